"""Self-checks for the exercises of 12.3 Positional and Temporal Encodings."""
from __future__ import annotations

import math
import numbers

import torch

from ..attention import causal_mask
from ..positional import RelativePositionBias, relative_position_bucket
from .core import Case, Hint, check, close, expect_sequence, expect_tensor, judge, off_by


def _table(length, d, *, swap=False, freq_step=2, halves=False, base=10000.0, first=0, width=None):
    """Sinusoidal tables, right and typically wrong (``width``: the d of the exponent), in float64."""
    p = torch.arange(first, first + length, dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)
    angles = p / base ** (freq_step * i / (width or d))
    one, two = (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
    if halves:
        return torch.cat([one, two], dim=-1)
    return torch.stack([one, two], dim=-1).flatten(-2)


def _table_cases(draw) -> list[Case]:
    sizes = [(20, 8), (draw.int(2, 9), 16), (draw.int(10, 40), 6), (1, 2),
             (draw.int(2, 30), 2 * draw.int(2, 12))]
    return [Case(size, "sinusoidal({}, {})".format(*size)) for size in sizes]


@check("12.3 exercise 1: the sinusoidal table")
def sinusoidal(fn, draw):
    cases = _table_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args, case.text) for case in cases]
    d_values = sorted({d for _, d in (case.args for case in cases)})
    mistakes = [("sine and cosine are swapped: column 2i is sin, column 2i+1 is cos",
                 lambda L, d: _table(L, d, swap=True)),
                ("interleave the pairs: column 2i is sin and 2i+1 cos of the same frequency, rather "
                 "than all sines then all cosines", lambda L, d: _table(L, d, halves=True)),
                ("the frequency of pair i is 1 / 10000^(2i / d): the exponent is 2i/d, not i/d",
                 lambda L, d: _table(L, d, freq_step=1)),
                ("positions start at 0: the first row is sin(0) = 0, cos(0) = 1",
                 lambda L, d: _table(L, d, first=1))]
    for c in d_values:
        mistakes.append((f"your frequencies use d = {c} whatever the width: read d_model from the argument",
                         lambda L, d, c=c: _table(L, d, width=c)))
    judge(outputs, cases, _table, compared="PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)",
          same=lambda a, b: close(a, b, tol=1e-5), mistakes=mistakes)
    return ("PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)), on "
            f"{len(cases)} sizes")


def _rotate(x, position, base=10000.0, *, sign=1.0, same_angle=False, halves=False, freq_step=2):
    D = x.shape[-1]
    i = torch.arange(D // 2, dtype=torch.float64)
    theta = torch.full_like(i, float(position)) if same_angle else position * base ** (-freq_step * i / D)
    cos, sin = theta.cos(), sign * theta.sin()
    x1, x2 = (x[: D // 2], x[D // 2:]) if halves else (x[0::2], x[1::2])
    out = (x1 * cos - x2 * sin, x1 * sin + x2 * cos)
    return torch.cat(out) if halves else torch.stack(out, dim=-1).flatten()


def _rotate_cases(draw) -> list[Case]:
    """Positions 0 and beyond, widths from 4 up, and bases other than the default."""
    sizes = [(8, 0, None), (8, draw.int(1, 9), None), (draw.choice((6, 10, 12)), draw.int(20, 90), None),
             (draw.choice((4, 6, 8)), draw.int(1, 30), draw.choice((10.0, 100.0, 500.0))),
             (draw.choice((8, 12, 16)), draw.int(1, 60), draw.choice((50.0, 1000.0, 20000.0)))]
    cases = []
    for D, position, base in sizes:
        x = draw.randn(D)
        if base is None:
            cases.append(Case((x, position), f"x {tuple(x.shape)}, position={position}"))
        else:
            cases.append(Case((x, position), f"x {tuple(x.shape)}, position={position}, base={base:g}",
                              {"base": base}))
    return cases


@check("12.3 exercise 2: rotating a query (RoPE)")
def rotate_pairs(fn, draw):
    cases = _rotate_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args[0].shape, f"rotate_pairs({case.text})") for case in cases]
    mistakes = [("you rotated clockwise: the pair (a, b) becomes (a cos - b sin, a sin + b cos)",
                 lambda x, p, base=10000.0: _rotate(x, p, base, sign=-1.0)),
                ("the pairs are neighbours: (x[0], x[1]), (x[2], x[3]), ..., not the two halves",
                 lambda x, p, base=10000.0: _rotate(x, p, base, halves=True)),
                ("each pair has its own frequency: pair i turns by position * base^(-2i/D)",
                 lambda x, p, base=10000.0: _rotate(x, p, base, same_angle=True)),
                ("the exponent is -2i/D, not -i/D: pair i turns by position * base^(-2i/D)",
                 lambda x, p, base=10000.0: _rotate(x, p, base, freq_step=1)),
                ("your function ignores its argument `base` (it uses 10000 whatever it is given): "
                 "pair i turns by position * base^(-2i/D)", lambda x, p, base=10000.0: _rotate(x, p))]
    judge(outputs, cases, _rotate, compared="each pair (x[2i], x[2i+1]) rotated by position * base^(-2i/D)",
          mistakes=mistakes)
    g = draw.generator()
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    m, n = draw.int(5, 40), draw.int(0, 4)
    shift = draw.int(1, 30)
    if not math.isclose(float(fn(q, m) @ fn(k, n)), float(fn(q, m + shift) @ fn(k, n + shift)), abs_tol=1e-5):
        raise Hint("scores should depend only on the offset between positions")
    return (f"pairs rotate by position * base^(-2i/D) on {len(cases)} inputs (bases other than 10000 "
            "among them), so q_m . k_n depends only on m - n")


def _slopes(n, *, start=1, ratio_exponent=None):
    step = -8 / n if ratio_exponent is None else ratio_exponent
    return [2 ** (step * (i + start)) for i in range(n)]


@check("12.3 exercise 3: ALiBi slopes")
def alibi_slopes(fn, draw):
    counts = (1, 2, 4, 8, 16, 32)
    if draw.graded:
        counts = tuple(sorted(set(draw.rng.sample(counts, 4)) | {draw.choice((64, 128))}))
    outputs = []
    for n in counts:
        got = expect_sequence(fn(n, case=f"alibi_slopes_for({n})"), f"alibi_slopes({n})",
                              "a list or a tensor of slopes")
        if len(got) != n:
            raise Hint(f"alibi_slopes({n}) should give {n} slopes, one per head, got {len(got)}")
        if not all(isinstance(s, numbers.Real) for s in got):
            raise Hint(f"alibi_slopes({n}) should hold numbers, got {type(got[0]).__name__}")
        outputs.append(got)
    same = lambda a, b: all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(a, b))   # noqa: E731
    cases = [Case((n,), f"alibi_slopes_for({n})") for n in counts]
    judge(outputs, cases, _slopes, compared="2^(-8/n), 2^(-16/n), ..., 2^(-8)", same=same, show=_show_slopes,
          mistakes=[("off by one: the first slope is 2^(-8/n), not 1", lambda n: _slopes(n, start=0)),
                    ("the ratio depends on the number of heads: slope h is 2^(-8 h / n)",
                     lambda n: _slopes(n, ratio_exponent=-1)),
                    ("the first head gets the largest slope, 2^(-8/n), and the last the smallest, 2^(-8)",
                     lambda n: _slopes(n)[::-1])])
    return f"the geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8), for n = {', '.join(map(str, counts))}"


def _show_slopes(got, want) -> str:
    h = next(i for i, (a, b) in enumerate(zip(got, want)) if not math.isclose(a, b, rel_tol=1e-6))
    return f"slope {h + 1}: {off_by(got[h], want[h])}"


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


@check("12.3 exercise 4: hour-of-day features")
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


@check("12.3 exercise 5: predict the buckets that training never reached", drawn=False)
def untrained_buckets(fn, draw):
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
