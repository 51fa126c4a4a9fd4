"""Seconds per training epoch of small PatchTransformers, round-robin in one process
(``python -m tools.experiments.epoch_cost``): which sizes a 2-core CPU can train to convergence."""
import itertools
import time

import torch

from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import PatchTransformer
from labsupport.train import fit

torch.set_num_threads(1)
task = book_task(train_stride=4)
configs = {
    "d32 p24/12 b128": dict(d_model=32, stride=12, batch=128),
    "d32 p24/24 b128": dict(d_model=32, stride=24, batch=128),
    "d16 p24/24 b128": dict(d_model=16, stride=24, batch=128),
    "d32 p24/12 b512": dict(d_model=32, stride=12, batch=512),
    "d64 p24/12 b128": dict(d_model=64, stride=12, batch=128),
}
times = {k: [] for k in configs}
for _, (name, c) in itertools.product(range(3), configs.items()):
    torch.manual_seed(0)
    m = PatchTransformer(lookback=LOOKBACK, horizon=HORIZON, d_model=c["d_model"], n_heads=4,
                         n_layers=2, d_ff=2 * c["d_model"], patch_len=24, stride=c["stride"],
                         attn_dropout=0.0, revin=True)
    t0 = time.perf_counter()
    fit(m, task.train, task.val, epochs=1, batch_size=c["batch"], progress=False)
    times[name].append(time.perf_counter() - t0)
for name, t in times.items():
    print(f"{name}: {min(t):.2f} s per epoch of {len(task.train[1])} windows (min of 3)")
