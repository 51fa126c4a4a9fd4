"""Validation and test error after every epoch of one small PatchTransformer: does longer
training help the test half-year? (``python -m tools.experiments.curves --help``)"""
import argparse
import dataclasses

import torch

from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import PatchTransformer
from labsupport.train import evaluate, set_seed
from tools.experiments._common import make_schedule

ap = argparse.ArgumentParser()
ap.add_argument("--stride", type=int, default=4)
ap.add_argument("--val-stride", type=int, default=24)
ap.add_argument("--kind", default="learned")
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--schedule", default="constant")
ap.add_argument("--epochs", type=int, default=20)
ap.add_argument("--width", type=int, default=32)
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--dropout", type=float, default=0.1)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--plateau", type=float, default=None,
                help="multiply lr by this after an epoch without improvement")
ap.add_argument("--patience", type=int, default=3)
a = ap.parse_args()
torch.set_num_threads(1)
task = book_task(train_stride=a.stride)
if a.val_stride != 24:
    task = dataclasses.replace(task, val=book_task(train_stride=10**6, eval_stride=a.val_stride).val)
set_seed(a.seed)
model = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, pos_encoding=a.kind, d_model=a.width, n_heads=4,
                         n_layers=2, d_ff=2 * a.width, dropout=a.dropout, attn_dropout=0.0, revin=True)
sched = make_schedule(a.schedule, a.epochs)
mult = (lambda e: 1.0) if sched is None else sched
optimiser = torch.optim.Adam(model.parameters(), lr=a.lr)
best, waited, factor, kept = float("inf"), 0, 1.0, None
g = torch.Generator().manual_seed(a.seed)
x, y = task.train
print(vars(a))
for epoch in range(a.epochs):
    for group in optimiser.param_groups:
        group["lr"] = a.lr * mult(epoch) * factor
    model.train()
    total = 0.0
    for idx in torch.randperm(len(y), generator=g).split(a.batch):
        loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        total += loss.item() * len(idx)
    val, test = evaluate(model, task.val).mse, evaluate(model, task.test).mse
    print(f"epoch {epoch + 1:2d} lr {a.lr * mult(epoch) * factor:.1e} train {total / len(y):.4f} "
          f"val {val:.4f} test {test:.4f}", flush=True)
    if val < best:
        best, waited, kept = val, 0, (epoch + 1, test)
    else:
        waited += 1
        if a.plateau:
            factor *= a.plateau
        if waited >= a.patience:
            break
print(f"stopped after epoch {epoch + 1}; best val {best:.4f} at epoch {kept[0]}: test {kept[1]:.4f}")
