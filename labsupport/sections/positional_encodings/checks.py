"""Self-checks for the exercises of 12.3 Positional and Temporal Encodings."""
from __future__ import annotations

import math
import numbers

import torch

from ...attention import causal_mask
from ...checks.core import Case, Hint, check, close, differ, expect_sequence, expect_tensor, judge
from ...positional import RelativePositionBias, relative_position_bucket


def _shift(k, d, *, base=10000.0, transpose=False, same_angle=False, freq_step=2, halves=False,
           width=None):
    """The (d, d) matrix M with PE(p) M = PE(p + k) for the sinusoidal table (rows PE(p), pairs
    (sin, cos) in columns 2i, 2i + 1), and typical wrong ones, in float64."""
    i = torch.arange(d // 2, dtype=torch.float64)
    angle = torch.full_like(i, float(k)) if same_angle else k * base ** (-freq_step * i / (width or d))
    c, s = angle.cos(), (-1.0 if transpose else 1.0) * angle.sin()
    first, second = (i.long(), i.long() + d // 2) if halves else (2 * i.long(), 2 * i.long() + 1)
    M = torch.zeros(d, d, dtype=torch.float64)
    M[first, first], M[first, second] = c, -s          # new sin = sin cos(kw) + cos sin(kw)
    M[second, first], M[second, second] = s, c         # new cos = cos cos(kw) - sin sin(kw)
    return M


def _table(length, d, first=0):
    """The sinusoidal table PE (length, d) from position ``first``, float64."""
    p = torch.arange(first, first + length, dtype=torch.float64)[:, None]
    angles = p * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)


def _shift_cases(draw) -> list[Case]:
    """Shifts forward and back, k = 0, widths from 2 up, one of them 8 (the check's own)."""
    sizes = [(7, 8), (draw.int(1, 30), 2 * draw.int(3, 10)), (-draw.int(1, 20), 6), (0, 4),
             (draw.int(100, 500), 2 * draw.int(1, 12))]
    return [Case(size, "shift_matrix({}, {})".format(*size)) for size in sizes]


@check("12.3 exercise 1: shifting the sinusoidal table")
def shift_matrix(fn, draw):
    cases = _shift_cases(draw)
    outputs = [expect_tensor(fn.on(case), (case.args[1], case.args[1]), case.text) for case in cases]
    widths = sorted({d for _, d in (case.args for case in cases)})
    mistakes = [("your matrix shifts the other way: PE(p) M gives PE(p - k); with the table's rows "
                 "as row vectors, pair i's block is [[cos, -sin], [sin, cos]] of k w_i",
                 lambda k, d: _shift(k, d, transpose=True)),
                ("each pair turns by k times its own frequency, k w_i with w_i = 10000^(-2i/d), "
                 "not by k radians", lambda k, d: _shift(k, d, same_angle=True)),
                ("the frequency of pair i is 10000^(-2i/d): the exponent is 2i/d, not i/d",
                 lambda k, d: _shift(k, d, freq_step=1)),
                ("the table interleaves its pairs: pair i is columns 2i and 2i + 1, not i and i + d/2",
                 lambda k, d: _shift(k, d, halves=True))]
    for c in widths:
        mistakes.append((f"your frequencies use d = {c} whatever the width: read d_model from the "
                         "argument", lambda k, d, c=c: _shift(k, d, width=c)))

    def shifts_the_table(out, case):
        k, d = case.args
        moved = _table(12, d) @ out.double()
        if not close(moved, _table(12, d, first=k), tol=1e-6):
            return (f"on {case.text}, PE(p) M should equal PE(p + {k}) for every p, but "
                    f"{differ(moved, _table(12, d, first=k))} (row p = 0, 1, ... of PE(p) M)")
        return None
    judge(outputs, cases, _shift, compared="the matrix M_k with PE(p) M_k = PE(p + k)",
          mistakes=mistakes, properties=[shifts_the_table])
    return f"PE(p) M_k = PE(p + k) for every p, on {len(cases)} shifts and widths (back, forward and 0)"


def _hour_cases(draw) -> list[Case]:
    fixed = torch.tensor([0.0, 6.0, 12.0, 18.0, 23.0, 24.0, 30.5], dtype=torch.float64)
    drawn = torch.tensor([draw.uniform(0, 100) for _ in range(draw.int(3, 12))], dtype=torch.float64)
    cases = [Case((fixed,), f"hours {fixed.tolist()}"), Case((drawn,),
                                                             f"{len(drawn)} hours between 0 and 100"),
             Case((drawn.float(),), f"{len(drawn)} hours in float32")]
    return cases


def _clock(hours, period=24.0, turn=2 * math.pi, order=(0, 1)):
    angle = turn * hours.double() / period
    pair = (angle.sin(), angle.cos())
    return torch.stack([pair[order[0]], pair[order[1]]], -1)


@check("12.3 exercise 2: hour-of-day features")
def hour_features(fn, draw):
    cases = _hour_cases(draw)
    outputs = [expect_tensor(fn.on(case), (len(case.args[0]), 2), f"hour_features({case.text})")
               for case in cases]

    def repeats(out, case):
        hours = case.args[0]
        if 0.0 in hours.tolist() and 24.0 in hours.tolist():
            i, j = hours.tolist().index(0.0), hours.tolist().index(24.0)
            if not torch.allclose(out[i].double(), out[j].double(), atol=1e-5):
                return "hour 24 is hour 0 of the next day: the features must repeat every 24 hours"
        return None
    judge(outputs, cases, _clock, compared="(sin, cos) of 2 pi h / 24",
          same=lambda a, b: close(a, b, tol=1e-5),
          mistakes=[("return (sin, cos) in that order", lambda h: _clock(h, order=(1, 0))),
                    ("an angle is 2 pi * hour / 24: one full turn per day", lambda h: _clock(h, turn=1.0)),
                    ("one turn per day: the angle is 2 pi h / 24, not 2 pi h / 12",
                     lambda h: _clock(h, 12.0)),
                    ("sin and cos take radians: 2 pi h / 24, not 360 h / 24 degrees",
                     lambda h: _clock(h, turn=360.0))],
          properties=[repeats])
    return "sin and cos of 2 pi h / 24: 23:00 sits next to 00:00, and 24 h wraps to 0"


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


@check("12.3 exercise 3: predict the buckets that training never reached", drawn=False)
def untrained_buckets(fn, draw):
    got = expect_sequence(fn(), "untrained_buckets_read()", "a list of bucket numbers")
    if not all(isinstance(b, numbers.Real) and not isinstance(b, bool) and float(b).is_integer()
               for b in got):
        raise Hint("return whole bucket numbers, such as [3, 4, 5]")
    guess = {int(b) for b in got}
    trained = bucket_rows_read(TRAIN_TOKENS)
    measured = bucket_rows_read(TEST_TOKENS) - trained
    if guess == measured:
        return (f"measured on RelativePositionBias: your buckets are exactly those a {TEST_TOKENS}-token "
                f"causal window reads and no {TRAIN_TOKENS}-token window trains")
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
