"""Self-checks for the exercises of 12.1 Self-Attention."""
from __future__ import annotations

import functools

import torch

from ...checks.core import (
    Case,
    Hint,
    apart,
    check,
    expect_number,
    expect_tensor,
    judge,
    recognise,
    shapes,
    times,
)
from . import reference

# torch's fused attention computes what 12.1.1 and 12.1.2 ask for
ATTENTION_LIBRARIES = ("torch.nn.functional.scaled_dot_product_attention",
                       "torch.nn.functional.multi_head_attention_forward", "torch.nn.MultiheadAttention")


def _weights(q, k, scale):
    return (q @ k.transpose(-2, -1) * scale).softmax(dim=-1)


def _qk_cases(draw) -> list[Case]:
    """q (..., L, d), k (..., S, d): L != S, L = 1, S = 1, batch ranks 0 to 2, two head widths."""
    d1 = draw.int(3, 12)
    d2 = draw.other(2, 12, d1)
    sizes = [((2, 3), draw.int(2, 9), None, d1), ((), 1, draw.int(2, 9), d2),
             ((draw.int(1, 4),), draw.int(2, 9), 1, d1), ((draw.int(1, 3), 2), draw.int(2, 9), None, d2)]
    cases = []
    for batch, L, S, d in sizes:
        S = draw.other(1, 9, L) if S is None else S
        q, k = draw.randn(*batch, L, d), draw.randn(*batch, S, d)
        cases.append(Case((q, k), shapes(q=q, k=k)))
    return cases


def _rows_sum_to_one(w, case):
    sums = w.double().sum(-1)
    tol = max(1e-6, 100 * torch.finfo(w.dtype).eps) if w.is_floating_point() else 1e-6
    off = (sums - 1).abs() > tol
    if off.any():
        index = tuple(off.nonzero()[0].tolist())
        total = sums[index].item()
        return (f"on {case.text}, the weights of query {index} sum to {apart(total, 1.0)[0]}, not 1 "
                f"(off by {abs(total - 1):.2g}): take the softmax over the keys, the last axis (dim=-1)")
    return None


@check("12.1 exercise 1: attention weights", forbid=ATTENTION_LIBRARIES)
def attention_weights(fn, draw):
    cases = _qk_cases(draw)
    outputs = []
    for case in cases:
        q, k = case.args
        w = fn.on(case)
        L, S = q.shape[-2], k.shape[-2]
        if isinstance(w, torch.Tensor) and tuple(w.shape) == (*q.shape[:-2], S, L) and L != S:
            raise Hint(f"on {case.text} you returned shape (..., S, L) = {tuple(w.shape)}: rows are "
                       "queries, so the scores are q @ k.transpose(-2, -1), shape (..., L, S)")
        outputs.append(expect_tensor(w, (*q.shape[:-2], L, S), f"attention_weights({case.text})"))
    d = lambda q: q.shape[-1]                                                   # noqa: E731
    mistakes = [("scale the scores by 1 / sqrt(d) before the softmax",
                 lambda q, k: _weights(q, k, 1.0)),
                ("divide the scores by sqrt(d), not by d", lambda q, k: _weights(q, k, 1 / d(q))),
                ("divide the scores by sqrt(d); you multiplied", lambda q, k: _weights(q, k, d(q) ** 0.5)),
                ("your softmax runs over the queries (dim=-2); each query's weights, a row, must sum "
                 "to one over the keys: softmax(dim=-1)",
                 lambda q, k: (q @ k.transpose(-2, -1) / d(q) ** 0.5).softmax(dim=-2)),
                ("you divided by the square root of the number of queries L; d is the head width, "
                 "q.shape[-1]", lambda q, k: _weights(q, k, q.shape[-2] ** -0.5)),
                ("you divided by the square root of the number of keys S; d is the head width, "
                 "q.shape[-1]", lambda q, k: _weights(q, k, k.shape[-2] ** -0.5))]
    for c in sorted({case.args[0].shape[-1] for case in cases} | {8, 16, 32, 64}):
        mistakes.append((f"your scores are divided by sqrt({c}) whatever the head width: read d "
                         "from the inputs, q.shape[-1]", lambda q, k, c=c: _weights(q, k, c ** -0.5)))
    judge(outputs, cases, reference.attention_weights, compared="softmax(q k^T / sqrt(d)) over the keys",
          mistakes=mistakes, properties=[_rows_sum_to_one])
    widths = sorted({case.args[0].shape[-1] for case in cases})
    return (f"on {len(cases)} inputs: L != S, L = 1, S = 1, head widths {widths[0]} and "
            f"{widths[-1]}")


def _causal_reference(q, k, v):
    L = q.shape[-2]
    allowed = torch.ones(L, L, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1) @ v


def _masked(q, k, v, allowed, *, scale=None, dim=-1, after=False):
    """Masked attention, right and typically wrong: ``allowed (L, L)``, the scale, the
    softmax's axis, or the mask applied to the weights after the softmax."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if after:
        return (scores.softmax(-1) * allowed) @ v
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim) @ v


def _causal_cases(draw) -> list[Case]:
    """q, k (..., L, d), v (..., L, dv) with dv != d; L = 1; and v = I, whose output is the weights."""
    sizes = [((2, 3), draw.int(5, 9), draw.int(3, 9), draw.int(2, 5)), ((), 1, draw.int(2, 8), 3),
             ((draw.int(1, 3),), draw.int(2, 9), draw.int(2, 9), draw.int(6, 9)),
             ((1, 2), draw.int(2, 9), draw.int(2, 12), 1)]
    cases = []
    for batch, L, d, dv in sizes:
        q, k, v = draw.randn(*batch, L, d), draw.randn(*batch, L, d), draw.randn(*batch, L, dv)
        cases.append(Case((q, k, v), shapes(q=q, k=k, v=v)))
    q, k, _ = cases[0].args
    eye = torch.eye(q.shape[-2], dtype=torch.float64).expand(*q.shape[:-1], q.shape[-2])
    cases.append(Case((q, k, eye.clone()), shapes(q=q, k=k) + f", v = I {tuple(eye.shape)} (the output "
                      "is the weights)"))
    return cases


def _weights_pattern(w, case):
    """What the weights (the output for v = I) show: NaN rows, the future seen, the diagonal."""
    q, k, v = case.args
    if v.shape[-1] != v.shape[-2] or not torch.equal(v, torch.eye(v.shape[-1], dtype=v.dtype).expand_as(v)):
        return None
    w = w.double()
    L = w.shape[-1]
    if not torch.isfinite(w).all():
        return ("the weights hold NaN: a query whose every key is masked (position 0 has only itself: "
                "keep the diagonal, tril() rather than tril(diagonal=-1))")
    upper = torch.ones(L, L, dtype=torch.bool).triu(1)
    if w[..., upper].abs().max() > 1e-9:
        return f"on {case.text}, weights above the diagonal are not zero: position i sees keys j > i"
    if w.diagonal(dim1=-2, dim2=-1).abs().min() < 1e-9:
        return (f"on {case.text}, a position gets no weight on itself: keep the diagonal (tril(), "
                "not tril(-1))")
    return None


@check("12.1 exercise 2: causal attention", forbid=ATTENTION_LIBRARIES)
def causal_attention(fn, draw):
    cases = _causal_cases(draw)
    outputs = []
    for case in cases:
        q, k, v = case.args
        out = fn.on(case)
        weights_shape = q.shape[:-1] + (q.shape[-2],)
        if isinstance(out, torch.Tensor) and out.shape == weights_shape and v.shape[-1] != q.shape[-2]:
            raise Hint(f"on {case.text} you returned shape {tuple(out.shape)}, the weights: multiply "
                       "them by v, shape (..., L, dv)")
        outputs.append(expect_tensor(out, (*q.shape[:-1], v.shape[-1]), f"causal_attention({case.text})",
                                     finite=False))
    tril = lambda q: torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()   # noqa: E731
    mistakes = [("the mask is flipped: query i may see keys j <= i (the lower triangle), never j > i",
                 lambda q, k, v: _masked(q, k, v, tril(q).T)),
                ("nothing is masked: query i must not see keys j > i; mask them before the softmax",
                 lambda q, k, v: _masked(q, k, v, torch.ones_like(tril(q)))),
                ("the weights were zeroed after the softmax, so the rows no longer sum to one: set "
                 "the masked scores to -inf before the softmax",
                 lambda q, k, v: _masked(q, k, v, tril(q), after=True)),
                ("your softmax runs over the queries (dim=-2): each query's weights must sum to one "
                 "over its keys, softmax(dim=-1)", lambda q, k, v: _masked(q, k, v, tril(q), dim=-2)),
                ("the mask is right; now scale the scores by 1 / sqrt(d)",
                 lambda q, k, v: _masked(q, k, v, tril(q), scale=1.0)),
                ("divide the scores by sqrt(d), not by d",
                 lambda q, k, v: _masked(q, k, v, tril(q), scale=1 / q.shape[-1]))]
    judge(outputs, cases, _causal_reference, compared="softmax(masked q k^T / sqrt(d)) @ v",
          mistakes=mistakes, properties=[_weights_pattern])
    return f"on {len(cases)} inputs (L = 1 among them, dv != d)"


_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _bytes_cases(draw) -> list[Case]:
    if draw.graded:
        sizes = [(draw.int(1, 8), draw.int(1, 12), draw.int(1, 4096), dtype) for dtype in _DTYPES]
        sizes.append((draw.int(2, 8), draw.int(2, 12), draw.int(2, 300), draw.choice(_DTYPES)))
    else:
        sizes = [(1, 1, 1024, torch.float32), (8, 4, 512, torch.float16), (2, 8, 2048, torch.float64),
                 (3, 5, 100, torch.bfloat16), (2, 3, 7, torch.float32)]
    return [Case(size, f"score_matrix_bytes{size}") for size in sizes]


def _size(dtype):
    return torch.tensor([], dtype=dtype).element_size()


@check("12.1 exercise 3: the size of the score matrix")
def score_matrix_bytes(fn, draw):
    cases = _bytes_cases(draw)
    outputs = [expect_number(fn.on(case), "a number of bytes") for case in cases]
    mistakes = [("one L x L matrix per batch element and per head: multiply by batch * heads",
                 lambda b, h, L, dt: L * L * _size(dt)),
                ("every head has its own L x L matrix: multiply by heads too",
                 lambda b, h, L, dt: b * L * L * _size(dt)),
                ("every batch element has its own L x L matrices: multiply by batch too",
                 lambda b, h, L, dt: h * L * L * _size(dt)),
                ("the score matrix has L * L entries, not L", lambda b, h, L, dt: b * h * L * _size(dt)),
                ("that is bits; count bytes (element_size())", lambda b, h, L,
                 dt: b * h * L * L * 8 * _size(dt)),
                ("that counts numbers; count bytes: multiply by the element size of the dtype "
                 "(element_size())", lambda b, h, L, dt: b * h * L * L),
                ("the element size depends on the dtype (float16: 2 bytes, float64: 8)",
                 lambda b, h, L, dt: b * h * L * L * 4)]
    judge(outputs, cases, reference.score_matrix_bytes, compared="batch * heads * L * L * element size",
          same=lambda a, b: a == b, mistakes=mistakes)
    return f"on {len(cases)} sizes, for float16, bfloat16, float32 and float64"


def _split_cases(draw) -> list[Case]:
    sizes = [(2, 5, 3, 4), (1, draw.int(2, 9), 2, draw.int(2, 7)), (draw.int(1, 3), draw.int(2, 9), 4, 1),
             (2, 1, draw.int(2, 5), draw.int(2, 5)), (draw.int(1, 3), draw.int(2, 9), 1, draw.int(2, 5))]
    cases = []
    for B, L, H, hd in sizes:
        offset = draw.int(0, 1000)
        x = torch.arange(offset, offset + B * L * H * hd, dtype=torch.float32).view(B, L, H * hd)
        cases.append(Case((x, H), f"x {tuple(x.shape)}, n_heads={H}"))
    return cases


def _where_from(got, want, case):
    """Which element of x the answer put where (x holds consecutive numbers)."""
    x, H = case.args
    off = (got != want).nonzero()[0].tolist()
    B, L, D = x.shape

    def place(value):
        flat = int(value - x.flatten()[0])
        if not 0 <= flat < x.numel() or float(value) != float(int(value)):
            return f"{apart(value, float(round(value)))[0]}, not an element of x"
        b, rest = divmod(flat, L * D)
        return f"x[{b}, {rest // D}, {rest % D}]"
    return (f"out[{', '.join(map(str, off))}] should be {place(want[tuple(off)].item())}, "
            f"got {place(got[tuple(off)].item())}")


@check("12.1 exercise 4: splitting heads")
def split_heads(fn, draw):
    cases = _split_cases(draw)
    outputs = []
    for case in cases:
        x, H = case.args
        B, L, D = x.shape
        outputs.append(expect_tensor(fn.on(case), (B, H, L, D // H), f"split_heads({case.text})"))
    right = lambda x, H: x.view(x.shape[0], x.shape[1], H, -1).transpose(1, 2)      # noqa: E731
    mistakes = [("reshaping straight to (B, H, L, hd) mixes positions into heads: view as "
                 "(B, L, H, hd), then transpose(1, 2)", lambda x, H: x.view(x.shape[0], H, x.shape[1], -1)),
                ("head h should read the consecutive slice x[b, t, h*hd:(h+1)*hd]; yours reads every "
                 "H-th element: view as (B, L, H, hd), not (B, L, hd, H)",
                 lambda x, H: x.view(x.shape[0], x.shape[1], -1, H).permute(0, 3, 1, 2))]
    wrong = [o for o, c in zip(outputs, cases) if not torch.equal(o, right(*c.args))]
    if wrong and not recognise(outputs, cases, mistakes, torch.equal):
        first = next(i for i, (o, c) in enumerate(zip(outputs, cases)) if not torch.equal(o, right(*c.args)))
        raise Hint(f"head h at position t should hold x[b, t, h*hd:(h+1)*hd]; on {cases[first].text}: "
                   + _where_from(outputs[first], right(*cases[first].args), cases[first]))
    judge(outputs, cases, right, compared="x.view(B, L, H, hd).transpose(1, 2)", same=torch.equal,
          mistakes=mistakes)
    return f"on {len(cases)} sizes, every element in its head's place"


@functools.lru_cache(maxsize=None)
def measured_naive_peak(batch, heads, length, head_dim):
    """The measured forward peak of `naive_attention` (float32, no mask), on the CPU; None
    where the platform cannot measure it."""
    from ...attention import naive_attention
    from ...timing import attention_inputs, peak_memory

    q, k, v = attention_inputs(length, batch=batch, heads=heads, head_dim=head_dim)
    with torch.no_grad():
        return peak_memory(naive_attention, q, k, v)


PEAK_TOLERANCE = 0.05
PEAK_SIZES = ((2, 4, 1024, 64), (1, 3, 512, 32), (3, 1, 768, 16))   # practice: (B, H, L, d)


def _peak_cases(draw) -> list[Case]:
    if draw.graded:
        lengths = [draw.int(256, 1024) for _ in range(3)]        # d <= L / 16: the output stays small
        sizes = [(draw.int(1, 3), draw.int(1, 6), L, draw.int(8, L // 16)) for L in lengths]
        sizes[0] = (sizes[0][0], draw.other(2, 6, 4), *sizes[0][2:])                  # H != 4 once
        # B != 2 and H != 2 once: one matrix per head, B H L^2, is then not also two for one
        # sequence (2 H L^2) or two for one head (2 B L^2), and each mistake names itself
        sizes[1] = (draw.other(1, 3, 2), draw.other(1, 6, 2), *sizes[1][2:])
    else:
        sizes = PEAK_SIZES
    return [Case(size, "predicted_peak_bytes({}, {}, {}, {})".format(*size)) for size in sizes]


def naive_peak_model(batch, heads, length, head_dim):
    """The byte model of naive attention's forward peak: scores and weights, then the output."""
    return (2 * batch * heads * length * length + batch * heads * length * head_dim) * 4


@check("12.1 exercise 5: predict the peak, then measure it", predicts=True)
def predicted_peak(fn, draw):
    cases = _peak_cases(draw)
    guesses = [expect_number(fn.on(case), "a number of bytes") for case in cases]
    measured = [measured_naive_peak(*case.args) for case in cases]
    where = "the measured peak"
    if None in measured:
        measured, where = [naive_peak_model(*case.args) for case in cases], "the byte model"
    near = lambda a, b: abs(a / b - 1) <= PEAK_TOLERANCE                                # noqa: E731
    if all(near(g, m) for g, m in zip(guesses, measured)):
        return f"your predictions are within {PEAK_TOLERANCE:.0%} of {where} for {len(cases)} sizes"
    matrix = lambda B, H, L, d: B * H * L * L * 4                                      # noqa: E731
    mistakes = [("that is one (B, H, L, L) float32 matrix; naive attention holds two at once: the scores "
                 "are still alive while softmax writes the weights", matrix),
                ("that counts three (B, H, L, L) matrices; the scores are scaled in place of the "
                 "product (one matrix), and two are alive at once: the scores and the weights",
                 lambda B, H, L, d: 3 * matrix(B, H, L, d)),
                ("two L x L matrices, but for one sequence and one head: every batch element and every "
                 "head has its own scores", lambda B, H, L, d: naive_peak_model(1, 1, L, d)),
                ("every head has its own (L, L) scores and weights: multiply by the number of heads",
                 lambda B, H, L, d: naive_peak_model(B, 1, L, d)),
                ("every sequence of the batch has its own (L, L) scores and weights: multiply by the batch",
                 lambda B, H, L, d: naive_peak_model(1, H, L, d)),
                ("that counts numbers; count bytes: float32 takes 4 bytes per number",
                 lambda B, H, L, d: naive_peak_model(B, H, L, d) / 4),
                ("that is bits; count bytes", lambda B, H, L, d: naive_peak_model(B, H, L, d) * 8)]
    named = recognise(guesses, cases, mistakes, lambda a, b: abs(a / b - 1) <= 0.15)
    if len(named) == 1:
        raise Hint(named[0])
    first = next(i for i, (g, m) in enumerate(zip(guesses, measured)) if not near(g, m))
    ratio = times(guesses[first] / measured[first], PEAK_TOLERANCE)
    raise Hint(f"for {cases[first].text} your prediction is {guesses[first]:.4g} bytes, {ratio} times "
               f"{where} ({measured[first]}); count the (B, H, L, L) matrices that are alive at the same "
               "time, and the output, in bytes")
