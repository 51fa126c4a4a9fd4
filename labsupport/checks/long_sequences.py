"""Self-checks for the exercises of 12.4 Long Sequences and Memory."""
from __future__ import annotations

import torch

from .core import Hint, check, close, expect_number, expect_tensor


def _online_right(m, l, acc, scores, v):
    m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
    p = (scores - m_new).exp()
    fix = (m - m_new).exp()
    return m_new, l * fix + p.sum(-1, keepdim=True), acc * fix + p @ v


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


@check("12.4 exercise 3: how many patch tokens")
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
