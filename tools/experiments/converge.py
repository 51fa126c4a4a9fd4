"""How fast the small PatchTransformer converges under early stopping: any stride, validation
stride, schedule and width (``python -m tools.experiments.converge --help``)."""
import argparse
import dataclasses
import time

import torch

from labsupport.compare import Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import PatchTransformer
from tools.experiments._common import make_schedule

ap = argparse.ArgumentParser()
ap.add_argument("--stride", type=int, default=4)
ap.add_argument("--val-stride", type=int, default=24)
ap.add_argument("--kinds", nargs="+", default=["none", "learned"])
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--schedule", default="constant")
ap.add_argument("--patience", type=int, default=3)
ap.add_argument("--epochs", type=int, default=40)
ap.add_argument("--seeds", type=int, default=2)
ap.add_argument("--width", type=int, default=32)
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--dropout", type=float, default=0.1)
a = ap.parse_args()
torch.set_num_threads(1)
task = book_task(train_stride=a.stride)
if a.val_stride != 24:
    dense = book_task(train_stride=10**6, eval_stride=a.val_stride)
    task = dataclasses.replace(task, val=dense.val)
models = {k: Trainable(lambda revin, k=k: PatchTransformer(
          lookback=LOOKBACK, horizon=HORIZON, pos_encoding=k, d_model=a.width, n_heads=4, n_layers=2,
          d_ff=2 * a.width, dropout=a.dropout, attn_dropout=0.0, revin=revin))
          for k in a.kinds}
t0 = time.perf_counter()
r = compare(task, models, revin=True, seeds=a.seeds, epochs=a.epochs, patience=a.patience, lr=a.lr,
            batch_size=a.batch, schedule=make_schedule(a.schedule, a.epochs), progress=False)
print(vars(a), f"{time.perf_counter()-t0:.0f} s")
r.table()
for k in a.kinds:
    print(k, [(x.best_epoch, x.epochs_run, x.stop_reason, round(x.best_val_loss,3)) for x in r[k].records])
