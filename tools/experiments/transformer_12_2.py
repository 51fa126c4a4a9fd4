"""12.2's encoder-decoder race as the notebook runs it: teacher forcing against free-running
training of the same decoder, beside the encoder-only forecaster, the ridge and the naive.

    python -m tools.experiments.transformer_12_2 --stride 4 --epochs 30 --seeds 3
"""
from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from labsupport.compare import NAIVE, RIDGE, Trainable, compare
from labsupport.data import HORIZON, LOOKBACK, book_task
from labsupport.models import Forecaster, PatchTransformer
from labsupport.sections.transformer.seq2seq import WindowOnly, teacher_forcing_task


def attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, context=None, mask=None):
        context = x if context is None else context
        B, L, d = x.shape

        def split(t):
            return t.view(B, t.shape[1], self.n_heads, -1).transpose(1, 2)

        out, self.weights = attention(split(self.W_Q(x)), split(self.W_K(context)),
                                      split(self.W_V(context)), mask)
        return self.W_O(out.transpose(1, 2).reshape(B, L, d))


def feed_forward(d_model, d_ff):
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d_model), MultiHeadAttention(d_model, n_heads)
        self.ln2, self.ff = nn.LayerNorm(d_model), feed_forward(d_model, d_ff)

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.ff(self.ln2(x))


def causal_mask(L):
    return torch.ones(L, L, dtype=torch.bool).tril()


class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln1, self.self_attn = nn.LayerNorm(d_model), MultiHeadAttention(d_model, n_heads)
        self.ln2, self.cross_attn = nn.LayerNorm(d_model), MultiHeadAttention(d_model, n_heads)
        self.ln3, self.ff = nn.LayerNorm(d_model), feed_forward(d_model, d_ff)

    def forward(self, x, memory):
        x = x + self.self_attn(self.ln1(x), mask=causal_mask(x.shape[1]).to(x.device))
        x = x + self.cross_attn(self.ln2(x), memory)
        return x + self.ff(self.ln3(x))


class EncoderDecoder(Forecaster):
    def __init__(self, *, teacher_forcing, d_model=32, n_heads=4, d_ff=64, revin=True, detach=False,
                 step=1, enc_layers=2):
        super().__init__(lookback=LOOKBACK, horizon=HORIZON, revin=revin, revin_affine=False)
        self.teacher_forcing, self.detach, self.step = teacher_forcing, detach, step
        self.embed_day = nn.Linear(24, d_model)
        self.day = nn.Parameter(0.02 * torch.randn(LOOKBACK // 24, d_model))
        self.encoder = nn.ModuleList(Block(d_model, n_heads, d_ff) for _ in range(enc_layers))
        self.embed_hour = nn.Linear(step, d_model)
        self.hour = nn.Parameter(0.02 * torch.randn(HORIZON // step, d_model))
        self.decoder = DecoderBlock(d_model, n_heads, d_ff)
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, step)

    def decode(self, previous, memory):
        h = self.embed_hour(previous) + self.hour[: previous.shape[1]]
        return self.head(self.norm(self.decoder(h, memory)))

    def forward(self, x, teacher=None):
        z, (mean, std) = self.revin.normalise(x)
        memory = self.embed_day(z[..., 0].unflatten(1, (-1, 24))) + self.day
        for block in self.encoder:
            memory = block(memory)
        B, s = len(x), self.step
        last = z[:, -s:].reshape(B, 1, s)
        if teacher is not None and self.teacher_forcing:
            truth = ((teacher - mean) / std).reshape(B, -1, s)
            previous = torch.cat([last, truth[:, :-1]], dim=1)
            y = self.decode(previous, memory)
        elif self.detach:
            previous = last
            with torch.no_grad():
                for _ in range(self.horizon // s - 1):
                    y = self.decode(previous, memory)
                    previous = torch.cat([last, y], dim=1)
            y = self.decode(previous, memory)
        else:
            previous = last
            for _ in range(self.horizon // s):
                y = self.decode(previous, memory)
                previous = torch.cat([previous, y[:, -1:]], dim=1)
        return y.reshape(B, -1, 1) * std + mean


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--models", nargs="+", default=["tf", "free", "enc"])
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args(argv)
    task = book_task(train_stride=args.stride)
    d = args.width
    builders = {
        "tf": ("encoder-decoder, teacher forcing",
               lambda revin: EncoderDecoder(teacher_forcing=True, d_model=d, d_ff=2 * d, revin=revin)),
        "free": ("encoder-decoder, free running",
                 lambda revin: EncoderDecoder(teacher_forcing=False, d_model=d, d_ff=2 * d, revin=revin)),
        "freedetach": ("encoder-decoder, free running, detached",
                       lambda revin: EncoderDecoder(teacher_forcing=False, detach=True, d_model=d,
                                                    d_ff=2 * d, revin=revin)),
        "tf4": ("enc-dec tf 4h", lambda revin: EncoderDecoder(teacher_forcing=True, step=4, d_model=d,
                                                          d_ff=2 * d, revin=revin)),
        "free4": ("enc-dec free 4h", lambda revin: EncoderDecoder(teacher_forcing=False, detach=True, step=4,
                                                                  d_model=d, d_ff=2 * d, revin=revin)),
        "tf2": ("enc-dec tf 2h", lambda revin: EncoderDecoder(teacher_forcing=True, step=2, d_model=d,
                                                          d_ff=2 * d, revin=revin)),
        "free2": ("enc-dec free 2h", lambda revin: EncoderDecoder(teacher_forcing=False, detach=True, step=2,
                                                                  d_model=d, d_ff=2 * d, revin=revin)),
        "enc": ("encoder only", lambda revin: WindowOnly(PatchTransformer(
            lookback=LOOKBACK, horizon=HORIZON, d_model=d, d_ff=2 * d, attn_dropout=0.0, revin=revin))),
        "enc0": ("encoder only, no dropout", lambda revin: WindowOnly(PatchTransformer(
            lookback=LOOKBACK, horizon=HORIZON, d_model=d, d_ff=2 * d, dropout=0.0, revin=revin))),
    }
    models = {builders[m][0]: Trainable(builders[m][1]) for m in args.models}
    start = time.perf_counter()
    race = compare(teacher_forcing_task(task), models, revin=True, seeds=args.seeds, epochs=args.epochs,
                   patience=3, schedule="plateau", lr=args.lr, batch_size=args.batch, progress=False,
                   device="cpu")
    print(f"{time.perf_counter() - start:.1f} s")
    for r in race.rows():
        print(f"{r['model']:40s} {r['mean']:.4f} ({r['min']:.4f}-{r['max']:.4f}) epochs {r['epochs']} "
              f"best {r['best_epochs']} s/epoch {r['seconds_per_epoch']} train s {r['train_seconds']}")
    names = list(models)
    for a in names:
        for b in [*names, RIDGE, NAIVE]:
            if a != b and args.seeds > 1:
                print(a, "vs", b, ":", race.judgement(a, b))
    return race


if __name__ == "__main__":
    main()
