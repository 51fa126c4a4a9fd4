"""Self-checks for the exercises of 12.3 Positional and Temporal Encodings.

1. `shift_matrix`: the matrix that moves the sinusoidal table by k positions;
2. `interpolated_rope`: RoPE with position interpolation on a window longer than the trained one;
3. `predicted_old_share` (predict, then measure): the share of an ALiBi head's attention that
   lands on keys older than any a training window holds, measured on the book's attention layer;
4. `alibi_on_times`: ALiBi's bias on the real time stamps of an irregularly sampled window.
"""
from __future__ import annotations

import math

import torch

from ...checks.core import Case, check, close, differ, expect_tensor, judge
from ...layers import MultiHeadAttention
from ...positional import ALiBi

# --- 1. the shift of the sinusoidal table ------------------------------------------------------

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
    mistakes = [("your matrix shifts the other way: the table times your matrix moves every row k "
                 "positions back, not on. The table's rows are row vectors multiplied from the left, which "
                 "swaps the places of the two sines in each 2 x 2 block, compared with turning a column "
                 "vector",
                 lambda k, d: _shift(k, d, transpose=True)),
                ("every pair of your matrix turns by the same angle; in the table, each pair turns at its "
                 "own frequency, so a shift by k turns each pair by a different angle",
                 lambda k, d: _shift(k, d, same_angle=True)),
                ("your frequencies fall off too slowly from pair to pair: compare the exponent of the "
                 "base in the table's formula with yours", lambda k, d: _shift(k, d, freq_step=1)),
                ("your matrix pairs coordinate i with coordinate i + d/2; the table interleaves its pairs: "
                 "the sine and cosine of one frequency sit side by side",
                 lambda k, d: _shift(k, d, halves=True))]
    for c in widths:
        mistakes.append((f"your frequencies use d = {c} whatever the width: read d_model from the "
                         "argument", lambda k, d, c=c: _shift(k, d, width=c)))

    def shifts_the_table(out, case):
        k, d = case.args
        moved = _table(12, d) @ out.double()
        if not close(moved, _table(12, d, first=k), tol=1e-6):
            return (f"on {case.text}, the table's rows times your matrix should be the rows {k} "
                    f"positions on, but {differ(moved, _table(12, d, first=k))} (row p = 0, 1, ... of "
                    "the product)")
        return None
    judge(outputs, cases, _shift, compared="the matrix that moves every row of the table k positions on",
          mistakes=mistakes, properties=[shifts_the_table])
    return (f"your matrix moves every row of the table by k, on {len(cases)} shifts and widths (back, "
            "forward and 0)")


# --- 2. RoPE with position interpolation -------------------------------------------------------

def _rope(x, positions, *, sign=1.0, halves=False):
    """RoPE of x (..., L, D) at ``positions`` (L,), base 10000, in float64 (the page's pairing:
    coordinates 2i and 2i + 1; ``halves``: i and i + D/2; ``sign=-1``: the other way)."""
    D = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)      # (D/2,)
    angle = sign * positions.double()[:, None] * theta                        # (L, D/2)
    cos, sin = angle.cos(), angle.sin()
    x = x.double()
    a, b = (x[..., : D // 2], x[..., D // 2:]) if halves else (x[..., 0::2], x[..., 1::2])
    first, second = a * cos - b * sin, a * sin + b * cos
    if halves:
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).flatten(-2)                   # (..., L, D)


def _interpolated(x, trained, *, rule="ratio", always=False, rounding=None, **rope):
    """Position interpolation (Chen et al., 2023) and typical wrong versions of it."""
    L = x.shape[-2]
    p = torch.arange(L, dtype=torch.float64)
    if L > trained or always:
        p = {"ratio": p * trained / L, "inverted": p * L / trained, "ends": p * (trained - 1) / max(L - 1, 1),
             "integer": p * (trained // L), "none": p}[rule]
    if rounding is not None:
        p = rounding(p)
    return _rope(x, p, **rope)


def _rope_cases(draw) -> list[Case]:
    """Windows twice, three times and 2.86 times the trained length, one as long and one shorter."""
    if draw.graded:
        D = [2 * draw.int(2, 8) for _ in range(5)]
        t = [draw.int(5, 20) for _ in range(5)]
        shapes = [(draw.int(1, 3), draw.int(1, 4), 2 * t[0], D[0]), (draw.int(1, 3), t[1], D[1]),
                  (draw.int(2, t[2] - 1), D[2]), (draw.int(1, 2), t[3] + draw.int(1, 3 * t[3]), D[3]),
                  (draw.int(1, 3), 2, 3 * t[4], D[4])]
    else:
        t = [14, 14, 10, 14, 7]
        shapes = [(2, 3, 28, 8), (1, 14, 8), (5, 6), (2, 40, 16), (3, 2, 21, 4)]
    g = draw.generator()
    return [Case((torch.randn(*shape, generator=g), trained), f"x {shape} (L = {shape[-2]}), "
                 f"trained_tokens={trained}") for shape, trained in zip(shapes, t)]


@check("12.3 exercise 2: RoPE with position interpolation")
def interpolated_rope(fn, draw):
    cases = _rope_cases(draw)
    outputs = [expect_tensor(fn.on(case), tuple(case.args[0].shape), f"interpolated_rope on {case.text}")
               for case in cases]
    mistakes = [
        ("your positions grow beyond the trained range instead of being squeezed into it: the factor "
         "is the ratio of the lengths the other way up", lambda x, t: _interpolated(x, t, rule="inverted")),
        ("a window no longer than the trained one must keep its own positions 0, 1, 2, ...; yours "
         "scaled them too", lambda x, t: _interpolated(x, t, always=True)),
        ("you rounded the squeezed positions to whole numbers, so neighbouring tokens share a position; "
         "interpolated positions are fractions", lambda x, t: _interpolated(x, t, rounding=torch.round)),
        ("you rounded the squeezed positions to whole numbers, so neighbouring tokens share a position; "
         "interpolated positions are fractions", lambda x, t: _interpolated(x, t, rounding=torch.floor)),
        ("you map the last token exactly onto the last trained position; the task's rule multiplies "
         "every position by the ratio of the two lengths", lambda x, t: _interpolated(x, t, rule="ends")),
        ("every token of a long window got position 0: a division of the two lengths in whole numbers "
         "gives 0", lambda x, t: _interpolated(x, t, rule="integer")),
        ("your long windows keep their plain positions, so nothing was interpolated; check that you read "
         "the window's length L from the second-to-last axis of x",
         lambda x, t: _interpolated(x, t, rule="none")),
        ("you rotate each pair the other way, by minus its angle",
         lambda x, t: _interpolated(x, t, sign=-1.0)),
        ("you pair coordinate i with coordinate i + D/2; the page's RoPE pairs neighbours, 2i and 2i + 1",
         lambda x, t: _interpolated(x, t, halves=True)),
    ]

    def keeps_lengths(out, case):
        if not torch.allclose(out.double().norm(dim=-1), case.args[0].double().norm(dim=-1), atol=1e-4):
            return (f"on {case.text} your output changes the length of a token's vector; a rotation "
                    "keeps every length")
        return None
    judge(outputs, cases, _interpolated, compared="the page's rotation at the interpolated positions",
          same=lambda a, b: close(a, b, tol=1e-5), mistakes=mistakes, properties=[keeps_lengths])
    return (f"the rotation at interpolated positions, on {len(cases)} windows (longer than, as long as "
            "and shorter than the trained ones)")


# --- 3. predict, then measure: ALiBi's attention on keys older than training -------------------

def measured_old_share(n_heads: int, n_tokens: int, trained_tokens: int) -> torch.Tensor:
    """Measured on the book's attention layer with ALiBi and every content score equal (the
    query projection zeroed): per head, the newest query's attention weight on the keys at
    offsets ``trained_tokens`` and beyond in a causal window of ``n_tokens`` (n_heads,)."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(d_model=2 * n_heads, n_heads=n_heads, position=ALiBi(n_heads)).double()
    with torch.no_grad():
        layer.q_proj.weight.zero_()
        layer.q_proj.bias.zero_()
        x = torch.randn(1, n_tokens, 2 * n_heads, dtype=torch.float64)
        _, weights = layer(x, is_causal=True, return_weights=True)          # (1, H, L, L)
    newest = weights[0, :, -1]                                               # (H, L): keys 0..L-1
    return newest[:, : n_tokens - trained_tokens].sum(-1)                    # offsets >= trained


def _share(H, n, trained, *, first=1, base=math.e, reverse=False, complement=False, normalise=True,
           sign=-1.0, cut=None, heads=None):
    """The share in closed form, and typical wrong ones: slopes 2^(-8h/H) for h = first.. (H:
    ``heads`` if given), the old keys those at distance ``cut`` (default trained) and beyond."""
    h = torch.arange(first, first + H, dtype=torch.float64)
    slopes = 2.0 ** (-8.0 * h / (heads or H))
    if reverse:
        slopes = slopes.flip(0)
    d = torch.arange(n, dtype=torch.float64)                                  # (n,) distances
    w = base ** (sign * slopes[:, None] * d)                                  # (H, n)
    old = d >= (trained if cut is None else cut)
    part = w[:, ~old] if complement else w[:, old]
    return part.sum(-1) / (w.sum(-1) if normalise else 1.0)


def _share_cases(draw) -> list[Case]:
    if draw.graded:
        sizes = []
        for H in (8, draw.choice((2, 4, 16)), draw.choice((4, 8, 16)), draw.choice((2, 8))):
            t = draw.int(5, 30)
            sizes.append((H, draw.int(t + 2, 4 * t), t))
    else:
        sizes = [(8, 56, 14), (4, 28, 14), (16, 100, 20), (2, 30, 10)]
    return [Case(size, "predicted_old_share({}, {}, {})".format(*size)) for size in sizes]


@check("12.3 exercise 3: predict ALiBi's weight on keys older than training", predicts=True)
def predicted_old_share(fn, draw):
    cases = _share_cases(draw)
    outputs = [expect_tensor(fn.on(case), (case.args[0],), case.text) for case in cases]
    mistakes = [
        ("your slopes are those of heads numbered from 0: number them 1 to H, as the page does, so that "
         "even the steepest head's slope is below 1", lambda H, n, t: _share(H, n, t, first=0)),
        ("your heads are in reverse order: head 1 has the steepest slope",
         lambda H, n, t: _share(H, n, t, reverse=True)),
        ("the softmax weighs each key by e to the power of its score, not 2 to that power",
         lambda H, n, t: _share(H, n, t, base=2.0)),
        ("ALiBi subtracts its penalty from the scores; with the penalty added, the oldest keys weigh most",
         lambda H, n, t: _share(H, n, t, sign=1.0)),
        ("your shares are not fractions of the row's whole weight: divide by the weight of every key the "
         "newest query reads", lambda H, n, t: _share(H, n, t, normalise=False)),
        ("that is the share of the keys a training window also holds; the task asks for the rest",
         lambda H, n, t: _share(H, n, t, complement=True)),
        ("you left out the key at the first offset that a training window never holds",
         lambda H, n, t: _share(H, n, t, cut=t + 1)),
        ("you counted the oldest key of a training window as new: a window of trained_tokens tokens "
         "holds offsets up to one less than its length", lambda H, n, t: _share(H, n, t, cut=t - 1)),
        ("your slopes are those of 8 heads whatever the number of heads: the slopes depend on H",
         lambda H, n, t: _share(H, n, t, heads=8)),
    ]
    judge(outputs, cases, measured_old_share, compared="the weights measured on the book's ALiBi layer",
          same=lambda a, b: close(a, b, tol=1e-4), mistakes=mistakes)
    return (f"your predictions match the weights measured on the book's attention layer with ALiBi, "
            f"for {len(cases)} head counts and lengths")


# --- 4. ALiBi on real time stamps ----------------------------------------------------------------

def _time_bias(times, n_heads, *, index=False, signed=False, unit=24.0, first=1, reverse=False,
               sign=-1.0, one_row=False):
    """ALiBi's bias on real times, -m_h |t_i - t_j| / 24 (distances in days), (B, H, L, L) in
    float64, and typical wrong versions of it."""
    t = times.double()
    if index:
        t = torch.arange(t.shape[-1], dtype=torch.float64).expand_as(t) * unit
    if one_row:
        t = t[:1].expand_as(t)
    gap = (t[:, :, None] - t[:, None, :]) / unit                             # (B, L, L)
    distance = gap if signed else gap.abs()
    h = torch.arange(first, first + n_heads, dtype=torch.float64)
    slopes = 2.0 ** (-8.0 * h / n_heads)
    if reverse:
        slopes = slopes.flip(0)
    return sign * slopes[None, :, None, None] * distance[:, None]            # (B, H, L, L)


def _time_cases(draw) -> list[Case]:
    """Windows of increasing real times in hours with uneven gaps, one of them evenly spaced."""
    sizes = ([(draw.int(2, 3), draw.int(5, 12), draw.choice((2, 4, 8))) for _ in range(3)]
             + [(1, draw.int(3, 8), draw.choice((4, 16)))] if draw.graded
             else [(2, 6, 4), (3, 9, 8), (1, 5, 2), (2, 7, 16)])
    g = draw.generator()
    cases = []
    for i, (B, L, H) in enumerate(sizes):
        gaps = 24.0 * (1 + torch.randint(0, 3, (B, L), generator=g)).double()          # 1-3 days apart
        gaps = gaps + torch.rand(B, L, generator=g, dtype=torch.float64) * 5            # hours off
        if i == 2:
            gaps = torch.full((B, L), 24.0, dtype=torch.float64)                         # evenly spaced
        times = gaps.cumsum(-1) - gaps.sum(-1, keepdim=True)                             # newest near 0
        cases.append(Case((times.float(), H), f"times ({B}, {L}), n_heads={H}"))
    return cases


@check("12.3 exercise 4: ALiBi on real time stamps")
def alibi_on_times(fn, draw):
    cases = _time_cases(draw)
    outputs = [expect_tensor(fn.on(case), (case.args[0].shape[0], case.args[1], case.args[0].shape[1],
                                           case.args[0].shape[1]), f"alibi_on_times on {case.text}")
               for case in cases]
    mistakes = [
        ("your bias counts tokens, not time: the distance of two tokens is the gap between their time "
         "stamps, in days", lambda t, H: _time_bias(t, H, index=True)),
        ("your bias grows for keys on one side and shrinks on the other: ALiBi's penalty is the size of "
         "the gap, whichever token is older", lambda t, H: _time_bias(t, H, signed=True)),
        ("your distances are in hours; the task measures them in days",
         lambda t, H: _time_bias(t, H, unit=1.0)),
        ("your slopes are those of heads numbered from 0: number them 1 to H, as the page does",
         lambda t, H: _time_bias(t, H, first=0)),
        ("your heads are in reverse order: head 1 has the steepest slope",
         lambda t, H: _time_bias(t, H, reverse=True)),
        ("ALiBi subtracts its penalty; yours adds it", lambda t, H: _time_bias(t, H, sign=1.0)),
        ("every window of your batch got the first window's distances: each row of times has its own",
         lambda t, H: _time_bias(t, H, one_row=True)),
    ]
    judge(outputs, cases, _time_bias, compared="ALiBi's penalty on the gaps between the time stamps",
          same=lambda a, b: close(a, b, tol=1e-5), mistakes=mistakes)
    return (f"ALiBi's penalty on the real gaps between tokens, on {len(cases)} batches of time stamps "
            "(uneven and even)")
