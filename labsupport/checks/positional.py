"""Self-checks for the exercises of 12.3 Positional and Temporal Encodings."""
from __future__ import annotations

import math

import torch

from .core import Hint, check, close, expect_sequence, expect_tensor


def _table(length, d, *, swap=False, freq_step=2, halves=False):
    """Sinusoidal tables, right and typically wrong, in float64."""
    p = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)
    angles = p / 10000 ** (freq_step * i / d)
    first, second = (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
    if halves:
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).flatten(-2)


@check("12.3 exercise 1: the sinusoidal table")
def sinusoidal(fn):
    for length, d in ((20, 8), (5, 16)):
        got = expect_tensor(fn(length, d), (length, d), f"sinusoidal({length}, {d})")
        if close(got, _table(length, d), tol=1e-5):
            continue
        if close(got, _table(length, d, swap=True), tol=1e-5):
            raise Hint("sine and cosine are swapped: column 2i is sin, column 2i+1 is cos")
        if close(got, _table(length, d, halves=True), tol=1e-5):
            raise Hint("interleave the pairs: column 2i is sin and 2i+1 cos of the same frequency, "
                       "rather than all sines then all cosines")
        if close(got, _table(length, d, freq_step=1), tol=1e-5):
            raise Hint("the frequency of pair i is 1 / 10000^(2i / d): the exponent is 2i/d, not i/d")
        raise Hint(f"sinusoidal({length}, {d}) differs from PE[p, 2i] = sin(p / 10000^(2i/d)), "
                   "PE[p, 2i+1] = cos(...)")
    return "PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))"


def _rotate(x, position, base=10000.0, *, sign=1.0, same_angle=False, halves=False):
    D = x.shape[-1]
    i = torch.arange(D // 2, dtype=torch.float64)
    theta = torch.full_like(i, position) if same_angle else position * base ** (-2 * i / D)
    cos, sin = theta.cos(), sign * theta.sin()
    x1, x2 = (x[: D // 2], x[D // 2:]) if halves else (x[0::2], x[1::2])
    out = (x1 * cos - x2 * sin, x1 * sin + x2 * cos)
    return torch.cat(out) if halves else torch.stack(out, dim=-1).flatten()


@check("12.3 exercise 2: rotating a query (RoPE)")
def rotate_pairs(fn):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, generator=g, dtype=torch.float64)
    for position in (0, 3, 50):
        got = expect_tensor(fn(x, position), (8,), f"rotate_pairs(x (8,), {position})")
        if close(got, _rotate(x, position)):
            continue
        if close(got, _rotate(x, position, sign=-1.0)):
            raise Hint("you rotated clockwise: the pair (a, b) becomes (a cos - b sin, a sin + b cos)")
        if close(got, _rotate(x, position, halves=True)):
            raise Hint("the pairs are neighbours: (x[0], x[1]), (x[2], x[3]), ..., not the two halves")
        if close(got, _rotate(x, position, same_angle=True)):
            raise Hint("each pair has its own frequency: pair i turns by position * base^(-2i/D)")
        raise Hint(f"rotate_pairs(x, {position}) is not the rotation of each pair by position * theta_i")
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    if not math.isclose(float(fn(q, 9) @ fn(k, 4)), float(fn(q, 25) @ fn(k, 20)), abs_tol=1e-5):
        raise Hint("scores should depend only on the offset between positions")
    return "pairs rotate by position * base^(-2i/D), so q_m . k_n depends only on m - n"


@check("12.3 exercise 3: ALiBi slopes")
def alibi_slopes(fn):
    for n in (2, 4, 8, 16):
        right = [2 ** (-8 * (i + 1) / n) for i in range(n)]
        got = expect_sequence(fn(n), f"alibi_slopes({n})", "a list or a tensor of slopes")
        if len(got) != n:
            raise Hint(f"alibi_slopes({n}) should give {n} slopes, one per head, got {len(got)}")
        if all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, right)):
            continue
        if all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, [2 ** (-8 * i / n) for i in range(n)])):
            raise Hint("off by one: the first slope is 2^(-8/n), not 1")
        if all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, [2 ** (-(i + 1)) for i in range(n)])):
            raise Hint("the ratio depends on the number of heads: slope h is 2^(-8 h / n)")
        raise Hint(f"alibi_slopes({n}) should be 2^(-8/n), 2^(-16/n), ..., 2^(-8)")
    return "the geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8)"


@check("12.3 exercise 4: hour-of-day features")
def hour_features(fn):
    hours = torch.tensor([0.0, 6.0, 12.0, 18.0, 23.0, 24.0, 30.5])
    got = expect_tensor(fn(hours), (7, 2), "hour_features(hours (7,))")
    angle = 2 * math.pi * hours.double() / 24
    if close(got, torch.stack([angle.sin(), angle.cos()], -1), tol=1e-5):
        return "sin and cos of 2 pi h / 24: 23:00 sits next to 00:00, and 24 h wraps to 0"
    if close(got, torch.stack([angle.cos(), angle.sin()], -1), tol=1e-5):
        raise Hint("return (sin, cos) in that order")
    raw = hours.double() / 24
    if close(got, torch.stack([raw.sin(), raw.cos()], -1), tol=1e-5):
        raise Hint("an angle is 2 pi * hour / 24: one full turn per day")
    if not torch.allclose(got[0].double(), got[5].double(), atol=1e-5):
        raise Hint("hour 24 is hour 0 of the next day: the features must repeat every 24 hours")
    raise Hint("use sin(2 pi h / 24) and cos(2 pi h / 24)")
