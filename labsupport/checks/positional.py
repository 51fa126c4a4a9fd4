"""Self-checks for the exercises of 12.3 Positional and Temporal Encodings."""
from __future__ import annotations

import math
import numbers

import torch

from ..attention import causal_mask
from ..positional import RelativePositionBias, relative_position_bucket
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


def bucket_rows_read(n_tokens: int) -> set:
    """Measured on a `RelativePositionBias`: the rows of its one-sided (causal) bucket table
    that a causal window of ``n_tokens`` reads, i.e. the rows that receive a gradient."""
    bias = RelativePositionBias(n_heads=1, bidirectional=False)
    positions = torch.arange(n_tokens)
    q = torch.zeros(1, 1, n_tokens, 2)
    scores = bias.bias(q, q, positions, positions)                    # (1, 1, L, L)
    scores.masked_select(causal_mask(n_tokens)).sum().backward()      # the pairs a causal query sees
    return set(torch.nonzero(bias.embedding.weight.grad[:, 0]).flatten().tolist())


TRAIN_TOKENS, TWICE_TOKENS, TEST_TOKENS = 27, 55, 111   # patches of 24 h, stride 12: 336, 672, 1,344 h


@check("12.3 exercise 5: predict the buckets that training never reached")
def untrained_buckets(fn):
    got = expect_sequence(fn(), "untrained_buckets_read()", "a list of bucket numbers")
    if not all(isinstance(b, numbers.Real) and not isinstance(b, bool) and float(b).is_integer()
               for b in got):
        raise Hint("return whole bucket numbers, such as [3, 4, 5]")
    guess = {int(b) for b in got}
    trained = bucket_rows_read(TRAIN_TOKENS)
    measured = bucket_rows_read(TEST_TOKENS) - trained
    if guess == measured:
        return (f"measured on RelativePositionBias: a {TRAIN_TOKENS}-token window trains buckets "
                f"0-{max(trained)}; a {TEST_TOKENS}-token window also reads buckets "
                f"{min(measured)}-{max(measured)}, which keep their initial values")
    if guess == set(range(TRAIN_TOKENS, TEST_TOKENS)) or max(guess, default=0) > 31:
        raise Hint("those are offsets, not buckets: from offset 16 on, several offsets share one "
                   "bucket, and the buckets grow logarithmically up to a distance of 128")
    last_start = min(k for k in range(200) if int(relative_position_bucket(torch.tensor(k))) == 31)
    if 31 in guess:
        raise Hint(f"bucket 31 holds the offsets from {last_start} on, and the largest offset in a "
                   f"{TEST_TOKENS}-token window is {TEST_TOKENS - 1}")
    two_sided = {int(b) for b in relative_position_bucket(torch.arange(TEST_TOKENS), bidirectional=True)} \
        - {int(b) for b in relative_position_bucket(torch.arange(TRAIN_TOKENS), bidirectional=True)}
    if guess == two_sided:
        raise Hint("a causal encoder uses one-sided buckets (bidirectional=False): all 32 for keys "
                   "in the past, 16 of them exact, so the logarithmic buckets start at offset 16")
    if guess & trained:
        raise Hint(f"a {TRAIN_TOKENS}-token window already reads offsets 0..{TRAIN_TOKENS - 1}, and "
                   f"their buckets are trained: leave out every bucket that an offset up to "
                   f"{TRAIN_TOKENS - 1} falls into")
    if guess == bucket_rows_read(TWICE_TOKENS) - trained:
        raise Hint(f"that is the answer for a window of {TWICE_TOKENS} tokens "
                   f"(twice the training length); the window here has {TEST_TOKENS} tokens, offsets "
                   f"up to {TEST_TOKENS - 1}")
    if guess == measured - {min(measured)}:
        raise Hint(f"a window of {TRAIN_TOKENS} tokens has offsets 0..{TRAIN_TOKENS - 1} (the newest "
                   f"query reads the oldest key {TRAIN_TOKENS - 1} steps back), so offset "
                   f"{TRAIN_TOKENS} is new, and so is its bucket")
    missing, extra = measured - guess, guess - measured
    raise Hint(f"{len(missing)} bucket(s) missing and {len(extra)} too many: find the bucket of "
               f"every offset 0..{TEST_TOKENS - 1} and leave out those of offsets "
               f"0..{TRAIN_TOKENS - 1}")
