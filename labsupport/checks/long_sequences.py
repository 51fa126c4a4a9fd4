"""Self-checks for the exercises of 12.4 Long Sequences and Memory."""
from __future__ import annotations

import math

import torch

from .core import Hint, check, close, expect_number, expect_tensor


def _run_tiles(step, q_scores, v, tile):
    """Feed one row block's scores (n, S) tile by tile through ``step``; return acc / l."""
    n = q_scores.shape[0]
    m = torch.full((n, 1), float("-inf"), dtype=torch.float64)
    l = torch.zeros(n, 1, dtype=torch.float64)
    acc = torch.zeros(n, v.shape[-1], dtype=torch.float64)
    for j in range(0, q_scores.shape[1], tile):
        state = step(m, l, acc, q_scores[:, j:j + tile], v[j:j + tile])
        if not (isinstance(state, tuple) and len(state) == 3):
            raise Hint(f"return the new state as a tuple (m, l, acc), got {type(state).__name__}")
        m, l, acc = (expect_tensor(t, like.shape, f"online_step's {name}", finite=False)
                     for t, like, name in zip(state, (m, l, acc), ("m", "l", "acc")))
    return acc / l


@check("12.4 exercise 1: one step of the online softmax")
def online_step(fn):
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(5, 12, generator=g, dtype=torch.float64)
    v = torch.randn(12, 3, generator=g, dtype=torch.float64)
    want = scores.softmax(-1) @ v
    got = expect_tensor(_run_tiles(fn, scores, v, 4), (5, 3), "acc / l after three tiles")
    if not close(got, want, tol=1e-9):
        one_tile = _run_tiles(fn, scores, v, 12)
        if close(one_tile, want, tol=1e-9):
            raise Hint("one tile is right but several are not: when the running maximum grows, "
                       "multiply the old l and the old acc by exp(m_old - m_new)")
        raise Hint("after all tiles, acc / l should equal softmax(scores) @ v: "
                   "p = exp(scores - m_new), l += sum of p, acc += p @ v")
    big = _run_tiles(fn, scores * 400, v, 4)
    if not torch.isfinite(big).all():
        raise Hint("scores of a few hundred overflow exp(): subtract the running maximum "
                   "before exponentiating")
    if not close(big, (scores * 400).softmax(-1) @ v, tol=1e-9):
        raise Hint("with large scores the result drifts: subtract m_new, the running maximum")
    return "running max, normaliser and output, rescaled by exp(m_old - m_new): exact, tile by tile"


@check("12.4 exercise 2: compressing a memory by mean pooling")
def compress_mean(fn):
    g = torch.Generator().manual_seed(1)
    states = torch.randn(2, 12, 3, generator=g, dtype=torch.float64)
    got = expect_tensor(fn(states, 4), (2, 3, 3), "compress_mean(states (2, 12, 3), rate=4)")
    want = states.view(2, 3, 4, 3).mean(2)
    if close(got, want):
        return "every `rate` consecutive states become their mean: 12 states -> 3 slots"
    if close(got, states[:, ::4]):
        raise Hint("that keeps every 4th state; the compressed slot should summarise all four "
                   "(their mean)")
    if close(got, states.view(2, 4, 3, 3).mean(1)):
        raise Hint("groups must be consecutive states: slot k is the mean of states "
                   "k*rate .. k*rate + rate - 1")
    if close(got, states.view(2, 3, 4, 3).sum(2)):
        raise Hint("a sum grows with the rate; take the mean")
    raise Hint("slot k should be states[:, k*rate:(k+1)*rate].mean(dim=1)")


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


@check("12.4 exercise 3: what a memory of daily means keeps")
def kept_fractions(fn):
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


@check("12.4 exercise 4: how many patch tokens")
def patch_count(fn):
    cases = [(336, 24, 12), (336, 16, 8), (2048, 24, 1), (100, 10, 10), (24, 24, 24), (50, 8, 7)]
    for lookback, patch_len, stride in cases:
        want = (lookback - patch_len) // stride + 1
        got = expect_number(fn(lookback, patch_len, stride), "a number of patches")
        if got == want:
            continue
        if got == want - 1:
            raise Hint(f"patch_count({lookback}, {patch_len}, {stride}) is one short: "
                       "the first patch starts at 0, so count it too (+1)")
        if got == lookback // stride:
            raise Hint("the last patch must fit inside the lookback: start positions run "
                       "from 0 to lookback - patch_len")
        raise Hint(f"patch_count({lookback}, {patch_len}, {stride}) should be {want}")
    return "(lookback - patch_len) // stride + 1 patches; attention cost falls as its square"


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


@check("12.4 exercise 5: predict the saving of a patch stride, then measure it")
def stride_saving(fn):
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
    raise Hint(f"your prediction is {guess / measured:.2f} times the measured saving: count the "
               "tokens of each stride, (lookback - patch_len) // stride + 1, and square their ratio")
