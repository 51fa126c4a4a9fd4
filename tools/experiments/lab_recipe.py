"""Does the lab's training loop bring a linear model to the closed-form ridge? The ridge's own
model class (RevIN, then one linear map of the 336 hours) trained by `labsupport.train.fit` under
several recipes, beside `RidgeForecaster`, on the lab's windows.

    python -m tools.experiments.lab_recipe --horizon 24 --stride 2 --seeds 3 \\
        --recipe lab "lr=0.002 schedule=plateau" --recipe dlinear "lr=0.01 schedule=type1"

Each recipe is a name and ``key=value`` fit options on top of the lab's (batch 128, patience 3,
at most 30 epochs, clip 1.0, lr 2e-3, plateau). Printed per recipe and seed: the training MSE
(every training window, denormalised as the models are judged), the best validation MSE, the
test MSE, epochs and why it stopped; for the ridge the same errors, its penalty, and those of
the least squares without a penalty.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from labsupport.data import LOOKBACK
from labsupport.models import Forecaster, RidgeForecaster
from labsupport.randomstate import set_seed
from labsupport.sections.lab.racers import lab_task
from labsupport.train import fit, predict
from tools.experiments._common import parse_options

LAB = dict(epochs=30, patience=3, lr=2e-3, batch_size=128, schedule="plateau", clip=1.0)


class LinearMap(Forecaster):
    """The ridge's model, trained: RevIN, then y = W x + b over time (channels folded)."""

    def __init__(self, *, lookback: int, horizon: int, revin: bool = True, affine: bool = True):
        super().__init__(lookback=lookback, horizon=horizon, revin=revin, revin_affine=affine)
        self.map = nn.Linear(lookback, horizon)

    def _forecast(self, x):
        return self.map(x.transpose(1, 2)).transpose(1, 2)          # (B, T, C)


def mse(model, data) -> float:
    return F.mse_loss(predict(model, data[0]), data[1]).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--every", dest="stride", type=int, default=8,
                        help="training windows whose forecast starts every EVERY hours from midnight")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-affine", action="store_true", help="RevIN without its learned scale and shift")
    parser.add_argument("--penalties", action="store_true", help="the ridge's errors at every penalty")
    parser.add_argument("--zero-init", action="store_true", help="start the map at W = 0, b = 0")
    parser.add_argument("--recipe", nargs=2, action="append", metavar=("NAME", "OPTIONS"), default=[])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = lab_task(every=args.stride, horizon=args.horizon)
    ridge = RidgeForecaster(lookback=LOOKBACK, horizon=args.horizon, revin=True).fit(task.train, task.val)
    print(f"H{args.horizon} every {args.stride} h: ridge penalty {ridge.penalty:g}: "
          f"train {mse(ridge, task.train):.4f} "
          f"val {mse(ridge, task.val):.4f} test {mse(ridge, task.test):.4f}")
    for penalty in ridge.penalties if args.penalties else ():
        one = RidgeForecaster(lookback=LOOKBACK, horizon=args.horizon, revin=True, penalties=[penalty]).fit(
            task.train, task.val)
        print(f"  ridge at penalty {penalty:g}: train {mse(one, task.train):.4f} "
              f"val {mse(one, task.val):.4f} "
              f"test {mse(one, task.test):.4f}")
    ls = RidgeForecaster(lookback=LOOKBACK, horizon=args.horizon, revin=True, penalties=[0.0]).fit(
        task.train, task.val)
    print(f"  least squares (penalty 0): train {mse(ls, task.train):.4f} val {mse(ls, task.val):.4f} "
          f"test {mse(ls, task.test):.4f}")
    # The ridge's penalty as Adam's L2 term on the training MSE of the denormalised error:
    # |.|^2 summed with row weights s^2 / mean(s^2) plus lambda |W|^2, times mean(s^2) / (N T).
    x = task.train[0][..., 0].double()
    spread = x.var(1, unbiased=False) + 1e-5                          # s^2 per window
    wd = 2 * ridge.penalty * spread.mean().item() / (len(x) * args.horizon)
    print(f"  the ridge's penalty as weight decay: {wd:.3g}")
    for name, text in args.recipe or [("lab", "")]:
        options = {**LAB, **parse_options(text.replace("RIDGE_WD", f"{wd!r}").split())}
        tests = []
        for seed in range(args.seeds):
            set_seed(seed)
            model = LinearMap(lookback=LOOKBACK, horizon=args.horizon, affine=not args.no_affine)
            if args.zero_init:
                nn.init.zeros_(model.map.weight)
                nn.init.zeros_(model.map.bias)
            started = time.perf_counter()
            history = fit(model, task.train, task.val, seed=seed, progress=False, **options)
            tests.append(mse(model, task.test))
            print(f"  {name} seed {seed}: train {mse(model, task.train):.4f} val {history.best_val_loss:.4f} "
                  f"test {tests[-1]:.4f}; {len(history.val_loss)} epochs (best {history.best_epoch + 1}), "
                  f"{history.stop_reason}, {time.perf_counter() - started:.1f} s", flush=True)
        print(f"  {name}: test mean {statistics.fmean(tests):.4f} "
              f"({min(tests):.4f}-{max(tests):.4f}) {options}")


if __name__ == "__main__":
    main()
