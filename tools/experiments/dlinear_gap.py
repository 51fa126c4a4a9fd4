"""Why DLinear (gradient descent) lands above the closed-form ridge on the book's windows:
train it with a long, annealed schedule and score the test windows after every epoch,
beside the ridge and the unpenalised least-squares fit on the same windows.

    OMP_NUM_THREADS=1 python -m tools.experiments.dlinear_gap --stride 1 --epochs 20 --lr 1e-3
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import LinearForecaster, RidgeForecaster
from labsupport.schedules import warmup_cosine
from labsupport.train import evaluate, predict, set_seed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--revin", type=int, default=1)
    parser.add_argument("--schedule", default="cosine", choices=["cosine", "constant", "type1"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = book_task(train_stride=args.stride)
    revin = bool(args.revin)
    ridge = RidgeForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=revin).fit(task.train, task.val)
    ols = RidgeForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=revin,
                          penalties=[0.0]).fit(task.train, task.val)
    print(f"ridge (penalty {ridge.penalty:g}): test {evaluate(ridge, task.test).mse:.4f}, "
          f"val {ridge.validation_mse[ridge.penalty]:.4f}; "
          f"least squares: test {evaluate(ols, task.test).mse:.4f}, "
          f"val {ols.validation_mse[0.0]:.4f}; train MSE ridge {evaluate(ridge, task.train).mse:.4f}, "
          f"least squares {evaluate(ols, task.train).mse:.4f}")
    schedule = {"cosine": lambda: warmup_cosine(args.epochs, warmup=min(1, args.epochs - 1)),
                "constant": lambda: lambda e: 1.0,
                "type1": lambda: lambda e: 0.5 ** max(0, e - 1)}[args.schedule]()
    set_seed(0)
    model = LinearForecaster(lookback=LOOKBACK, horizon=HORIZON, revin=revin)
    optimiser = torch.optim.Adam(model.parameters(), lr=args.lr)
    x, y = task.train
    g = torch.Generator().manual_seed(0)
    for epoch in range(args.epochs):
        for group in optimiser.param_groups:
            group["lr"] = args.lr * schedule(epoch)
        model.train()
        for idx in torch.randperm(len(y), generator=g).split(args.batch):
            loss = F.mse_loss(model(x[idx]), y[idx])
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
        val = F.mse_loss(predict(model, task.val[0]), task.val[1]).item()
        train, test = evaluate(model, task.train).mse, evaluate(model, task.test).mse
        print(f"epoch {epoch + 1:2d}: lr x{schedule(epoch):.3f}  train {train:.4f}  val {val:.4f}  "
              f"test {test:.4f}", flush=True)


if __name__ == "__main__":
    main()
