"""12.1's encoder-decoder comparison, sized outside the notebook: the context-vector model
against the same model with attention over the encoder's states (dot-product scores), at several
input lengths, with the protocol's ridge and weekly naive beside them.

    python -m tools.experiments.self_attention_seq2seq --hours 24 168 336 --seeds 3 --stride 12

The model is a copy of the notebook's ``Seq2Seq`` (chapters/12_1_self_attention.ipynb); the
runs go through `labsupport.sections.self_attention.study.bottleneck`, as the notebook's do.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from torch import nn

from labsupport.compare import NAIVE, RIDGE
from labsupport.models import Forecaster
from labsupport.sections.self_attention import study
from labsupport.sections.self_attention.sizes import CPU


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


class Seq2Seq(Forecaster):
    """The notebook's encoder-decoder (a copy): 4-hour tokens, a GRU encoder, a GRU decoder
    driven by learned step vectors; ``attend`` lets each decoder step read every encoder state."""

    def __init__(self, *, lookback, horizon=24, attend=False, hidden=32, patch=4, revin=True):
        super().__init__(lookback=lookback, horizon=horizon, revin=revin)
        self.attend, self.patch = attend, patch
        self.encoder = nn.GRU(patch, hidden, batch_first=True)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.step = nn.Parameter(0.1 * torch.randn(horizon // patch, hidden))
        if attend:
            self.where = nn.Parameter(0.1 * torch.randn(lookback // patch, hidden))
            self.W_Q, self.W_K = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(2 * hidden if attend else hidden, patch)

    def _forecast(self, x):
        B = len(x)
        tokens = x.reshape(B, -1, self.patch)
        states, context = self.encoder(tokens)
        d, _ = self.decoder(self.step.expand(B, -1, -1), context)
        if self.attend:
            read, weights = attention(self.W_Q(d), self.W_K(states + self.where), states)
            self.weights = weights.detach()
            d = torch.cat([d, read], dim=-1)
        return self.out(d).reshape(B, -1, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=int, nargs="+", default=[24, 168, 336])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--stride", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=60)
    args = parser.parse_args()
    sizes = replace(CPU, bottleneck_seeds=args.seeds, bottleneck_train_stride=args.stride,
                    bottleneck_max_epochs=args.epochs)
    builds = {"context vector": lambda hours: (lambda revin: Seq2Seq(lookback=hours, revin=revin)),
              "attention": lambda hours: (lambda revin: Seq2Seq(lookback=hours, attend=True, revin=revin))}
    for hours in args.hours:
        started = time.perf_counter()
        c = study.bottleneck(hours, {name: build(hours) for name, build in builds.items()}, sizes)
        seconds = time.perf_counter() - started
        print(f"--- {hours} hours: {seconds:.0f} s")
        for name in ("context vector", "attention", RIDGE, NAIVE):
            if name in c.entries:
                e = c[name]
                epochs = [r.epochs_run for r in e.records]
                print(f"  {name:16s} {['%.4f' % v for v in e.values()]} epochs {epochs} "
                      f"{[r.stop_reason for r in e.records]}")
        for a, b in (("attention", "context vector"), ("attention", RIDGE), ("context vector", RIDGE),
                     ("attention", NAIVE), ("context vector", NAIVE)):
            if b in c.entries:
                print(f"  {a} vs {b}: {c.outcome(a, b)}; {c.judgement(a, b)}")


if __name__ == "__main__":
    main()
