"""Self-checks for the exercises of 12.4 Long Sequences and Memory."""
from __future__ import annotations

import math

import torch

from .core import (
    Case,
    Hint,
    apart,
    check,
    close,
    differ,
    expect_number,
    expect_tensor,
    judge,
    same_number,
    times,
)


def _run_tiles(step, scores, v, tile, text):
    """Feed one row block's scores (n, S) tile by tile through ``step``; return (acc / l, m)."""
    n = scores.shape[0]
    m = torch.full((n, 1), float("-inf"), dtype=torch.float64)
    l = torch.zeros(n, 1, dtype=torch.float64)
    acc = torch.zeros(n, v.shape[-1], dtype=torch.float64)
    for j in range(0, scores.shape[1], tile):
        block = scores[:, j:j + tile]
        state = step(m, l, acc, block, v[j:j + tile],
                     case=f"{text}, the tile of columns {j}..{j + block.shape[1] - 1}")
        if not (isinstance(state, tuple) and len(state) == 3):
            raise Hint(f"return the new state as a tuple (m, l, acc), got {type(state).__name__}")
        m, l, acc = (expect_tensor(t, like.shape, f"online_step's {name}", finite=False)
                     for t, like, name in zip(state, (m, l, acc), ("m", "l", "acc")))
    return acc / l, m


def _online_cases(draw) -> list[tuple]:
    """(scores (n, S), v (S, dv), tile, words): S not a multiple of the tile, scores in the
    hundreds, a maximum that rises in the last tile (an acc or l left unrescaled shows on
    every row) and one that falls by thousands from one tile to the next."""
    n, S, dv, tile = draw.int(2, 6), draw.int(9, 15), draw.int(1, 4), draw.int(3, 5)
    while S % tile == 0:
        S += 1
    plain = draw.randn(n, S)
    cases = [(plain, draw.randn(S, dv), tile, f"scores {tuple(plain.shape)} in tiles of {tile}"),
             (plain * 400, draw.randn(S, dv), tile,
              f"scores {tuple(plain.shape)} of a few hundred, in tiles of {tile}")]
    rising = draw.randn(n, 2 * tile + 1)
    rising[:, -1] += 8.0                            # every row's maximum comes in its last tile
    cases.append((rising, draw.randn(2 * tile + 1, dv), tile,
                  f"scores {tuple(rising.shape)} whose maximum comes in the last tile of {tile}"))
    falling = draw.randn(n, 2 * tile)
    falling[:, :tile] += 5000.0                     # the first tile's maximum is thousands above the next's
    cases.append((falling, draw.randn(2 * tile, dv), tile,
                  f"scores {tuple(falling.shape)} whose maximum falls by 5000 after the first tile "
                  f"of {tile}"))
    one = draw.randn(1, draw.int(1, 3))
    cases.append((one, draw.randn(one.shape[1], dv), 4, f"scores {tuple(one.shape)}, one tile"))
    return cases


@check("12.4 exercise 1: one step of the online softmax")
def online_step(fn, draw):
    for scores, v, tile, text in _online_cases(draw):
        got, m = _run_tiles(fn, scores, v, tile, text)
        want = scores.softmax(-1) @ v
        last_tile_max = scores[:, (scores.shape[1] - 1) // tile * tile:].amax(-1, keepdim=True)
        row_max = scores.amax(-1, keepdim=True)
        if got.shape == want.shape and close(got, want, tol=1e-9):
            if not close(m.double(), row_max):
                raise Hint(f"on {text}, acc / l is right but the m you return is not the running "
                           "maximum, max(m, the tile's maximum); the next tile relies on it")
            continue
        if not close(m.double(), row_max) and close(m.double(), last_tile_max):
            raise Hint(f"on {text}: m must be the running maximum, max(m, the tile's maximum); with "
                       "the tile's own maximum, exp(m_old - m_new) overflows once the maximum falls")
        if not torch.isfinite(got).all():
            raise Hint(f"on {text}, the result holds inf or NaN: exp() of a large number overflows; "
                       "subtract the running maximum before exponentiating")
        one_tile, _ = _run_tiles(fn, scores, v, scores.shape[1], text)
        if close(one_tile, want, tol=1e-9):
            raise Hint(f"on {text}, one tile is right but several are not: when the running maximum "
                       "grows, multiply the old l and the old acc by exp(m_old - m_new)")
        raise Hint(f"on {text}, acc / l after every tile should equal softmax(scores) @ v, but "
                   f"{differ(got, want, 1e-9)}: p = exp(scores - m_new), l = l exp(m_old - m_new) + "
                   "sum of p, acc = acc exp(m_old - m_new) + p @ v")
    return ("running max, normaliser and output, rescaled by exp(m_old - m_new): exact, tile by tile, "
            "also when the maximum rises in the last tile or falls by thousands")


def _compress_cases(draw) -> list[Case]:
    sizes = [(2, 3, 4, 3), (1, draw.int(1, 5), 1, 2), (draw.int(1, 3), draw.int(2, 5), 3, draw.int(1, 5)),
             (1, 1, draw.int(5, 9), 4), (2, draw.int(2, 4), draw.choice((2, 5, 6)), 2)]
    cases = []
    for B, slots, rate, d in sizes:
        states = draw.randn(B, slots * rate, d)
        cases.append(Case((states, rate), f"states {tuple(states.shape)}, rate={rate}"))
    return cases


@check("12.4 exercise 2: compressing a memory by mean pooling")
def compress_mean(fn, draw):
    cases = _compress_cases(draw)
    outputs = []
    for case in cases:
        states, rate = case.args
        B, n, d = states.shape
        outputs.append(expect_tensor(fn.on(case), (B, n // rate, d), f"compress_mean({case.text})"))
    groups = lambda s, r: s.view(s.shape[0], -1, r, s.shape[-1])                       # noqa: E731
    judge(outputs, cases, lambda s, r: groups(s, r).mean(2),
          compared="the mean of each `rate` consecutive states",
          mistakes=[("that keeps every `rate`-th state; a compressed slot should summarise all the states "
                     "of its group (their mean)", lambda s, r: s[:, ::r]),
                    ("groups must be consecutive states: slot k is the mean of states k*rate .. "
                     "k*rate + rate - 1", lambda s, r: s.view(s.shape[0], r, -1, s.shape[-1]).mean(1)),
                    ("a sum grows with the rate; take the mean", lambda s, r: groups(s, r).sum(2)),
                    ("that keeps the last state of each group; the slot is the mean of all of them",
                     lambda s, r: groups(s, r)[:, :, -1])])
    return f"every `rate` consecutive states become their mean, on {len(cases)} inputs (rates 1 to 9)"


# --- exercise 3: what a memory of daily means keeps --------------------------------------

KEPT_PERIODS = {24: "daily", 168: "weekly", 8766: "yearly"}      # hours per cycle
KEPT_RATE = 24
KEPT_TOLERANCE = 0.05


def measured_kept_fractions(rate: int = KEPT_RATE) -> dict:
    """The fraction of a cycle's amplitude left after mean pooling at ``rate``, measured:
    a year of hours of cos and sin of each period (float64) goes through the library's
    compression (`labsupport.memory.CompressiveMemory`), and the amplitude
    sqrt(cos^2 + sin^2) of each slot, the same for every slot, is averaged."""
    from ..memory import CompressiveMemory

    hours = 24 * 365
    t = torch.arange(hours, dtype=torch.float64)
    kept = {}
    for period in KEPT_PERIODS:
        angle = 2 * math.pi * t / period
        states = torch.stack([angle.cos(), angle.sin()], dim=-1)[None]       # (1, T, 2)
        memory = CompressiveMemory(2, mem_len=rate - 1, cmem_len=hours // rate, rate=rate).double()
        slots = memory.compress(states)                                       # (1, T / rate, 2)
        kept[period] = slots.norm(dim=-1).mean().item()
    return kept


@check("12.4 exercise 3: what a memory of daily means keeps", drawn=False)
def kept_fractions(fn, draw):
    answer = fn()
    if not isinstance(answer, dict) or set(answer) != set(KEPT_PERIODS):
        got = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        raise Hint(f"return a dict with the keys 24, 168 and 8766 (hours per cycle: a day, a week, "
                   f"a year), each mapped to the fraction kept; got {got}")
    guess = {p: expect_number(answer[p], f"a fraction for the {name} cycle")
             for p, name in KEPT_PERIODS.items()}
    if any(g > 1.5 or g < -0.05 for g in guess.values()):
        raise Hint("give each prediction as a fraction of the amplitude between 0 and 1 (0.5 for "
                   "half), not as a percentage")
    measured = measured_kept_fractions()
    off = {p: abs(guess[p] - measured[p]) > KEPT_TOLERANCE for p in KEPT_PERIODS}
    if off[24]:
        raise Hint("a slot averages exactly one day, one whole period of the daily cycle: its ups and "
                   "downs cancel, and nothing of the hour-of-day shape is left (0)")
    if off[168]:
        raise Hint("a day is a seventh of a week: averaging over one day smooths the weekly cycle "
                   "only a little, so most of it (well above 0.9) is kept")
    if off[8766]:
        raise Hint("a day is 1/365 of a year: the season passes through the daily means untouched")
    values = ", ".join(f"{name} {measured[p]:.2f}" for p, name in KEPT_PERIODS.items())
    return (f"measured amplitude kept by mean pooling at rate 24: {values}; your predictions are "
            f"within {KEPT_TOLERANCE}: the memory keeps each day's level, hence the week and the "
            "season, and loses the shape of the day")


def _patch_cases(draw) -> list[Case]:
    """Strides that divide lookback - patch_len and strides that do not, one patch, stride 1."""
    if draw.graded:
        sizes = []
        for _ in range(5):
            lookback = draw.int(10, 1000)
            patch = draw.int(1, lookback)
            sizes.append((lookback, patch, draw.int(1, max(1, min(2 * patch, lookback)))))
        lookback, patch = draw.int(60, 500), draw.int(5, 40)
        stride = draw.other(2, 17, *[s for s in range(2, 18) if (lookback - patch) % s == 0])
        sizes += [(lookback, patch, stride), (patch, patch, draw.int(1, 30))]
    else:
        sizes = [(336, 24, 12), (336, 16, 8), (2048, 24, 1), (100, 24, 7), (50, 8, 5), (24, 24, 24),
                 (30, 24, 10), (97, 10, 4)]
    return [Case(size, "patch_count({}, {}, {})".format(*size)) for size in sizes]


@check("12.4 exercise 4: how many patch tokens")
def patch_count(fn, draw):
    cases = _patch_cases(draw)
    outputs = [expect_number(fn.on(case), "a number of patches") for case in cases]
    for got, case in zip(outputs, cases):
        if isinstance(got, float) and not got.is_integer():
            raise Hint(f"{case.text} returned {apart(got, float(round(got)))[0]}: a count of patches is a "
                       "whole number; count only the patches that fit, with floor division //")
    judge(outputs, cases, lambda L, P, S: (L - P) // S + 1, compared="(lookback - patch_len) // stride + 1",
          same=same_number,
          mistakes=[("one short: the first patch starts at 0, so count it too (+1)",
                     lambda L, P, S: (L - P) // S),
                    ("the last patch must fit inside the lookback: start positions run from 0 to "
                     "lookback - patch_len", lambda L, P, S: L // S),
                    ("that rounds up: a patch that would start after lookback - patch_len runs past the "
                     "end of the window; round down, (lookback - patch_len) // stride + 1",
                     lambda L, P, S: -(-(L - P) // S) + 1),
                    ("start positions run from 0 to lookback - patch_len inclusive: "
                     "(lookback - patch_len) // stride + 1", lambda L, P, S: (L - P + 1) // S + 1)])
    return ("(lookback - patch_len) // stride + 1 patches, also where the stride does not divide the span; "
            "attention cost falls as its square")


# --- exercise 5: the saving of a patch stride, predicted then measured --------------------

STRIDE_CASE = dict(lookback=336, patch_len=24, strides=(1, 12), heads=4, head_dim=16)
SAVING_TOLERANCE = 0.05


def measured_stride_saving() -> tuple[float, list]:
    """How many times smaller the largest tensor of causal naive attention is with the
    tokens of stride 12 than with those of stride 1 (a 336-hour window, patches of 24).
    The largest tensor (`labsupport.timing.LargestTensor`) is the (B, H, N, N) score
    matrix, so fixed costs do not blur the ratio. Returns (ratio, token counts)."""
    from ..attention import naive_attention
    from ..timing import LargestTensor, attention_inputs

    c = STRIDE_CASE
    sizes, tokens = [], []
    for stride in c["strides"]:
        n = (c["lookback"] - c["patch_len"]) // stride + 1
        q, k, v = attention_inputs(n, heads=c["heads"], head_dim=c["head_dim"])
        with torch.no_grad(), LargestTensor() as probe:
            naive_attention(q, k, v, is_causal=True)
        sizes.append(probe.nbytes)
        tokens.append(n)
    return sizes[0] / sizes[1], tokens


@check("12.4 exercise 5: predict the saving of a patch stride, then measure it", drawn=False)
def stride_saving(fn, draw):
    guess = expect_number(fn(), "a number: how many times cheaper")
    measured, (n1, n12) = measured_stride_saving()
    if guess <= 0:
        raise Hint("return a positive factor: how many times smaller the cost becomes")
    if abs(guess / measured - 1) <= SAVING_TOLERANCE:
        return (f"the largest tensor, the causal score matrix, shrinks {measured:.1f}-fold from "
                f"{n1} to {n12} tokens: ({n1} / {n12})^2, within {SAVING_TOLERANCE:.0%} of your "
                "prediction")
    if guess < 1 and abs(1 / guess / measured - 1) <= SAVING_TOLERANCE:
        raise Hint("that is the fraction of the cost that is left; return the factor by which it "
                   "falls (greater than 1)")
    if any(abs(guess / r - 1) <= 0.1 for r in (12, n1 / n12)):
        raise Hint("that is how many times fewer tokens there are; attention's cost grows as the "
                   "square of the token count")
    if abs(guess / 144 - 1) <= 0.01:
        raise Hint("144 is the S^2 rule, which ignores the patch length: count the tokens of each "
                   "stride with patch_count, then square their ratio")
    raise Hint(f"your prediction is {times(guess / measured, SAVING_TOLERANCE)} times the measured saving: "
               "count the "
               "tokens of each stride, (lookback - patch_len) // stride + 1, and square their ratio")
