"""Self-checks for the exercises of 12.1 Self-Attention, and two checks of attention's core
(`attention_weights`, `causal_attention`) that no notebook asks for now: the tests of the check
machinery itself (tests/test_checks.py, tests/test_grading.py) run them, and a course may use
them for exercises of its own.

Every check runs the answer on several inputs and names the mistake made, in words, without the
expected value or the solution's code (tests/test_hints.py feeds each the usual wrong answers).
"""
from __future__ import annotations

import math

import torch

from ...checks.core import (
    Case,
    Hint,
    apart,
    check,
    expect,
    expect_number,
    expect_tensor,
    how_far,
    judge,
    shapes,
)
from ...checks.sandbox import without

__all__ = ["unit_scale", "score_gradient", "padded_attention", "grouped_query_attention",
           "attention_weights", "causal_attention", "SAMPLES", "STD_TOLERANCE"]

# torch's own attention computes what the attention exercises ask for
ATTENTION_LIBRARIES = ("torch.nn.functional.scaled_dot_product_attention",
                       "torch.nn.functional.multi_head_attention_forward", "torch.nn.MultiheadAttention")
SCALING = "Section 12.1's subsection on scaling says by how much"


def _scores(q, k, scale=None):
    """q (..., L, d), k (..., S, d) -> the scaled scores (..., L, S); scale 1/sqrt(d) by default."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return q @ k.transpose(-2, -1) * scale


# --- Exercise 12.1.1: predict the scale, then measure it -----------------------------------------

SAMPLES = 20_000          # pairs (q, k) drawn per setting to measure the spread of the scores
STD_TOLERANCE = 0.05      # the measured standard deviation must lie within 5% of one


def _scale_cases(draw) -> list[Case]:
    """(d, sigma_q, sigma_k): one with unit spreads (the page's case), the others not, the two
    spreads different, their product away from one (so that forgetting them shows)."""
    if draw.graded:
        sizes = [(draw.int(2, 12), 1.0, 1.0)]
        while len(sizes) < 5:
            sq, sk = round(draw.uniform(0.3, 4.0), 2), round(draw.uniform(0.3, 4.0), 2)
            if abs(math.log(sq * sk)) > 0.4 and abs(math.log(sq / sk)) > 0.3:
                sizes.append((draw.int(3, 400), sq, sk))
    else:
        sizes = [(16, 1.0, 1.0), (64, 2.0, 1.0), (8, 0.5, 3.0), (200, 1.5, 0.4), (3, 4.0, 2.0)]
    return [Case(size, f"d = {size[0]}, sigma_q = {size[1]:g}, sigma_k = {size[2]:g}") for size in sizes]


def _measured_std(d, sigma_q, sigma_k, scale, g) -> float:
    """The standard deviation of scale * q.k over `SAMPLES` drawn pairs (float64, in chunks)."""
    total, count, chunk = 0.0, 0, max(1, 2_000_000 // d)
    while count < SAMPLES:
        n = min(chunk, SAMPLES - count)
        q = sigma_q * torch.randn(n, d, generator=g, dtype=torch.float64)
        k = sigma_k * torch.randn(n, d, generator=g, dtype=torch.float64)
        total += float(((scale * (q * k).sum(-1)) ** 2).sum())
        count += n
    return math.sqrt(total / count)                    # the mean is zero: the entries are centred


def _right_scale(d, sigma_q, sigma_k):
    return 1 / (math.sqrt(d) * sigma_q * sigma_k)


SCALE_MISTAKES = [
    ("your scale leaves out how spread the entries of q and k are: it is right only when both have "
     "variance one", lambda d, sq, sk: d ** -0.5),
    ("your scale divides by the width d itself, so the scores shrink as the head widens: a sum of d "
     "independent terms has a standard deviation that grows more slowly than d",
     lambda d, sq, sk: 1 / d),
    ("your scale divides by the width d itself, so the scores shrink as the head widens: a sum of d "
     "independent terms has a standard deviation that grows more slowly than d",
     lambda d, sq, sk: 1 / (d * sq * sk)),
    ("your scale multiplies where it should divide: it widens the scores further",
     lambda d, sq, sk: d ** 0.5),
    ("your scale multiplies where it should divide: it widens the scores further",
     lambda d, sq, sk: d ** 0.5 * sq * sk),
    ("your scale overreacts to the spreads: doubling every query doubles every score, and your scale "
     "shrinks by more than that undoes",
     lambda d, sq, sk: 1 / (d ** 0.5 * sq ** 2 * sk ** 2)),
    ("with your scale the scores still widen as the keys widen: doubling every key doubles every "
     "score, and your scale does not change", lambda d, sq, sk: 1 / (d ** 0.5 * sq)),
    ("with your scale the scores still widen as the queries widen: doubling every query doubles "
     "every score, and your scale does not change", lambda d, sq, sk: 1 / (d ** 0.5 * sk)),
    ("your scale adds the two spreads; doubling every query doubles every score, whatever the keys",
     lambda d, sq, sk: 1 / (d ** 0.5 * (sq + sk))),
    ("your scale underreacts to the spreads: doubling every query doubles every score, and your "
     "scale shrinks by less than that undoes",
     lambda d, sq, sk: 1 / (d * sq * sk) ** 0.5),
]


@check("12.1 exercise 1: predict the scale, then measure it", predicts=True,
       forbid=("torch.randn", "torch.randn_like", "torch.normal", "torch.rand", "torch.rand_like",
               "torch.distributions", "numpy.random", "random"))
def unit_scale(fn, draw):
    cases = _scale_cases(draw)
    scales = [expect_number(fn.on(case), "a number: the factor the scores are multiplied by")
              for case in cases]
    for scale, case in zip(scales, cases):
        if scale <= 0:
            raise Hint(f"for {case.text} your scale is not positive: a negative factor turns the "
                       "ranking of the keys upside down, so the query would read the keys least like it")
    g = draw.generator()
    measured = [_measured_std(*case.args, scale, g) for scale, case in zip(scales, cases)]
    if all(abs(m - 1) <= STD_TOLERANCE for m in measured):
        return (f"scaled by your factor, the scores' standard deviation measured within "
                f"{STD_TOLERANCE:.0%} of one at {len(cases)} settings ({SAMPLES:,} pairs each)")
    expect(*[_right_scale(*case.args) for case in cases])
    for hint, mistaken in SCALE_MISTAKES:
        if all(math.isclose(s, mistaken(*c.args), rel_tol=1e-6) for s, c in zip(scales, cases)):
            raise Hint(hint)
    first = next(i for i, m in enumerate(measured) if abs(m - 1) > STD_TOLERANCE)
    agree = [c.text for c, m in zip(cases, measured) if abs(m - 1) <= STD_TOLERANCE]
    text = (f"for {cases[first].text}, the scores scaled by your factor have a standard deviation "
            f"{how_far(measured[first], 1.0)} (measured on {SAMPLES:,} pairs)")
    if agree:
        text += f"; it is right for {agree[0]}: compare what differs between those settings"
    raise Hint(text)


# --- Exercise 12.1.2: the gradient that reaches the scores ---------------------------------------

AUTOGRAD = ("torch.Tensor.backward", "torch.autograd.grad", "torch.autograd.backward",
            "torch.autograd.functional.jacobian", "torch.autograd.functional.vjp", "torch.func.grad",
            "torch.func.vjp", "torch.func.jacrev", "torch.func.jacfwd")


def _gradient(s, v):
    """d/ds of sum_j softmax(s)_j v_j, over the last axis: a (v - o)."""
    a = s.softmax(-1)
    return a * (v - (a * v).sum(-1, keepdim=True))


def _gradient_cases(draw) -> list[Case]:
    """s, v (..., S): no batch, a batch, two batch axes; S = 1; scores of a wide spread (a
    nearly saturated softmax)."""
    sizes = [((), draw.int(3, 9), 1.0), ((draw.int(2, 4),), draw.int(2, 9), 2.0), ((2, 3), 1, 1.0),
             ((draw.int(1, 3), 2), draw.int(3, 12), 1.0), ((3,), draw.int(4, 9), 12.0)]
    cases = []
    for batch, S, spread in sizes:
        s, v = draw.randn(*batch, S, scale=spread), draw.randn(*batch, S)
        cases.append(Case((s, v), shapes(s=s, v=v) + (", scores of a wide spread" if spread > 5 else "")))
    return cases


def _sums_to_zero(got, case):
    total = got.double().sum(-1).abs().max().item()
    if total > 1e-6:
        return (f"on {case.text} your gradient does not sum to zero over the keys: adding the same "
                "number to every score leaves the softmax, and so the output, unchanged")
    return None


@check("12.1 exercise 2: the gradient that reaches the scores",
       forbid=("torch.autograd", "torch.func", "functorch"), unavailable=AUTOGRAD)
def score_gradient(fn, draw):
    cases = _gradient_cases(draw)
    outputs = []
    for case in cases:
        s, v = case.args
        got = fn.on(case, within=without(AUTOGRAD))
        S = s.shape[-1]
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (*s.shape, S) and S > 1:
            raise Hint(f"on {case.text} you returned the whole Jacobian of the weights, one row per "
                       "weight; the exercise asks for the gradient of the output: one number per key")
        outputs.append(expect_tensor(got, s.shape, "your gradient"))
    mistakes = [
        ("your gradient moves each weight as if it moved alone: raising one score also lowers every "
         "other weight, since the weights sum to one", lambda s, v: s.softmax(-1) * v),
        ("you kept only the diagonal of the softmax's Jacobian: raising one score also lowers the "
         "other weights, and that changes the output too",
         lambda s, v: s.softmax(-1) * (1 - s.softmax(-1)) * v),
        ("your gradient is as large for a key that holds almost no weight as for one that holds most "
         "of it; raising the score of a key nobody reads barely moves the output",
         lambda s, v: v - (s.softmax(-1) * v).sum(-1, keepdim=True)),
        ("the sign is flipped: raising a key's score pulls the output towards that key's value",
         lambda s, v: -_gradient(s, v)),
        ("your gradient does not vanish for a key whose value equals the output, yet raising that "
         "key's score leaves the output where it is",
         lambda s, v: s.softmax(-1) * (v - v.mean(-1, keepdim=True))),
    ]
    if any(c.args[0].dim() > 1 for c in cases):
        mistakes.append(("your softmax runs over the wrong axis: each set of scores is its own "
                         "distribution over the keys, the last axis", lambda s, v: _wrong_axis(s, v)))
    judge(outputs, cases, _gradient, compared="the gradient of the output with respect to the scores",
          mistakes=mistakes, properties=[_sums_to_zero])
    return f"on {len(cases)} inputs, a nearly saturated softmax among them"


def _wrong_axis(s, v):
    a = s.softmax(0)
    return a * (v - (a * v).sum(-1, keepdim=True))


# --- Exercise 12.1.3: padded queries and padded keys ----------------------------------------------

def _padded(q, k, v, q_lens, k_lens, *, fill=float("-inf"), after=False, extra=0, zero_rows=True,
            scale=None, swap=False):
    """Attention over the first k_lens[b] keys, rows of padded queries zero; and its mistakes."""
    if swap:
        q_lens, k_lens = k_lens, q_lens
    L, S = q.shape[-2], k.shape[-2]
    keys = torch.arange(S) < (k_lens[:, None] + extra)                   # (B, S)
    queries = torch.arange(L) < q_lens[:, None]                          # (B, L)
    scores = _scores(q, k, scale)                                        # (B, L, S)
    if after:
        weights = scores.softmax(-1) * keys[:, None, :]
    else:
        weights = scores.masked_fill(~keys[:, None, :], fill).softmax(-1)
    out = weights @ v
    return out * queries[..., None] if zero_rows else out


def _padding_cases(draw) -> list[Case]:
    """B sequences padded to L queries and S keys (L != S), lengths from 1 to full, the query and
    key lengths of a sequence different; dv != d."""
    sizes = [(3, draw.int(5, 8), draw.int(6, 10), draw.int(3, 6), draw.int(2, 5)),
             (2, draw.int(2, 6), draw.int(3, 9), draw.int(2, 8), draw.int(2, 8)),
             (4, draw.int(3, 7), draw.int(3, 7), 4, 3)]
    cases = []
    for B, L, S, d, dv in sizes:
        q, k, v = draw.randn(B, L, d), draw.randn(B, S, d), draw.randn(B, S, dv)
        q_lens = [L, draw.int(1, L - 1)] + [draw.int(1, L) for _ in range(B - 2)]   # one padded
        k_lens = [draw.int(2, S - 1)] + [draw.int(1, S) for _ in range(B - 2)] + [S]
        if q_lens == k_lens:
            k_lens[0] = 1 if k_lens[0] != 1 else 2
        q_lens, k_lens = torch.tensor(q_lens), torch.tensor(k_lens)
        text = shapes(q=q, k=k, v=v) + f", q_lens {q_lens.tolist()}, k_lens {k_lens.tolist()}"
        cases.append(Case((q, k, v, q_lens, k_lens), text))
    return cases


@check("12.1 exercise 3: padded queries and padded keys", forbid=ATTENTION_LIBRARIES)
def padded_attention(fn, draw):
    cases = _padding_cases(draw)
    outputs = []
    for case in cases:
        q, _, v = case.args[:3]
        outputs.append(expect_tensor(fn.on(case), (*q.shape[:-1], v.shape[-1]), "your output"))
    mistakes = [
        ("padded keys still receive weight: mask them before the softmax",
         lambda *a: _padded(*a, extra=10 ** 6)),
        ("your padded keys still receive weight: a score set to zero is not ignored by the softmax, "
         "it counts like any other score", lambda *a: _padded(*a, fill=0.0)),
        ("the padded keys' weights were zeroed after the softmax, so the weights of a query no longer "
         "sum to one over the keys it may read", lambda *a: _padded(*a, after=True)),
        ("your mask lets each sequence read one key past its length: count the real keys of a "
         "sequence of length 1", lambda *a: _padded(*a, extra=1)),
        ("the rows of padded queries should be zero: yours still hold attention outputs",
         lambda *a: _padded(*a, zero_rows=False)),
        ("you masked the keys with the queries' lengths and the queries with the keys'",
         lambda *a: _padded(*a, swap=True)),
        (f"the masks are right; the scores are not scaled: {SCALING}", lambda *a: _padded(*a, scale=1.0)),
    ]
    judge(outputs, cases, _padded, compared="attention over each sequence's real keys, padded query "
          "rows zero", mistakes=mistakes, properties=[_padded_rows_zero])
    return f"on {len(cases)} padded batches (L != S, lengths from one to full)"


def _padded_rows_zero(got, case):
    q_lens = case.args[3]
    for b, n in enumerate(q_lens.tolist()):
        if n < got.shape[1] and got[b, n:].abs().max() > 0:
            return (f"on {case.text}, sequence {b} has {n} real queries, but its rows from {n} on are "
                    "not zero")
    return None


# --- Exercise 12.1.4: grouped-query attention ------------------------------------------------------

def _grouped(q, k, v, *, assign="group", scale=None, dim=-1):
    """Query head h reads key-value head h // (H / G); and its mistakes."""
    H, G = q.shape[1], k.shape[1]
    if assign == "group":
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
    elif assign == "cycle":
        k, v = k.repeat(1, H // G, 1, 1), v.repeat(1, H // G, 1, 1)
    elif assign == "first":
        k, v = k[:, :1].expand(-1, H, -1, -1), v[:, :1].expand(-1, H, -1, -1)
    elif assign == "mean":
        k, v = k.mean(1, keepdim=True), v.mean(1, keepdim=True)
    return _scores(q, k, scale).softmax(dim) @ v


def _grouped_cases(draw) -> list[Case]:
    """(B, H, G, L, S, d, dv): groups of 2 and 3, one key-value head for all (G = 1), as many as
    the query heads (G = H), L != S, L = 1, dv != d."""
    sizes = [(2, 4, 2, draw.int(2, 6), draw.int(3, 8), draw.int(3, 6), draw.int(2, 5)),
             (1, 6, 3, draw.int(2, 6), draw.int(2, 6), draw.int(2, 5), draw.int(2, 5)),
             (draw.int(1, 3), 4, 1, 1, draw.int(2, 7), draw.int(2, 6), draw.int(1, 4)),
             (1, 2, 2, draw.int(2, 5), draw.int(2, 5), draw.int(3, 6), draw.int(3, 6)),
             (2, 8, 4, draw.int(2, 5), draw.int(2, 6), 4, 3)]
    cases = []
    for B, H, G, L, S, d, dv in sizes:
        q, k, v = draw.randn(B, H, L, d), draw.randn(B, G, S, d), draw.randn(B, G, S, dv)
        cases.append(Case((q, k, v), shapes(q=q, k=k, v=v)))
    return cases


@check("12.1 exercise 4: grouped-query attention", forbid=ATTENTION_LIBRARIES)
def grouped_query_attention(fn, draw):
    cases = _grouped_cases(draw)
    outputs = []
    for case in cases:
        q, _, v = case.args
        outputs.append(expect_tensor(fn.on(case), (*q.shape[:-1], v.shape[-1]), "your output"))
    mistakes = [
        ("your query heads take the key-value heads in turn (one each, then round again); the exercise "
         "gives each key-value head a block of consecutive query heads",
         lambda *a: _grouped(*a, assign="cycle")),
        ("every query head reads the first key-value head; each group of query heads has its own",
         lambda *a: _grouped(*a, assign="first")),
        ("you averaged the key-value heads into one; each group of query heads reads its own head, "
         "unchanged", lambda *a: _grouped(*a, assign="mean")),
        (f"the heads are right; the scores are not scaled: {SCALING}", lambda *a: _grouped(*a, scale=1.0)),
        ("your scale uses the width of the values; the scores are products of queries and keys, so "
         "their width sets it", lambda q, k, v: _grouped(q, k, v, scale=v.shape[-1] ** -0.5)),
        ("your softmax runs over the queries; each query's weights must sum to one over the keys",
         lambda *a: _grouped(*a, dim=-2)),
    ]
    judge(outputs, cases, _grouped, compared="grouped-query attention, each key-value head shared by a "
          "block of consecutive query heads", mistakes=mistakes)
    return f"on {len(cases)} inputs: groups of 2, 3 and 4, one shared head, as many heads as queries"


# --- attention's core, reused by the lab's steps 1 and 2 ------------------------------------------

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
                f"(off by {abs(total - 1):.2g}): each query's weights are a distribution over the keys")
    return None


def _weights(q, k, scale=None, dim=-1):
    return _scores(q, k, scale).softmax(dim)


@check("attention weights", forbid=ATTENTION_LIBRARIES)
def attention_weights(fn, draw):
    cases = _qk_cases(draw)
    outputs = []
    for case in cases:
        q, k = case.args
        w = fn.on(case)
        L, S = q.shape[-2], k.shape[-2]
        if isinstance(w, torch.Tensor) and tuple(w.shape) == (*q.shape[:-2], S, L) and L != S:
            raise Hint(f"on {case.text} your weights have shape {tuple(w.shape)}, one row per key: "
                       "each row should hold one query's weights over the keys")
        outputs.append(expect_tensor(w, (*q.shape[:-2], L, S), "your weights"))
    d = lambda q: q.shape[-1]                                                   # noqa: E731
    mistakes = [(f"your scores are not scaled before the softmax: {SCALING}",
                 lambda q, k: _weights(q, k, 1.0)),
                ("your scale divides by the head width itself; the spread of the scores grows more "
                 "slowly than the width", lambda q, k: _weights(q, k, 1 / d(q))),
                ("your scale multiplies where it should divide: it widens the scores further",
                 lambda q, k: _weights(q, k, d(q) ** 0.5)),
                ("your softmax runs over the queries; each query's weights, a row, must sum to one "
                 "over the keys", lambda q, k: _weights(q, k, dim=-2)),
                ("your scale depends on the number of queries; the head width sets it",
                 lambda q, k: _weights(q, k, q.shape[-2] ** -0.5)),
                ("your scale depends on the number of keys; the head width sets it",
                 lambda q, k: _weights(q, k, k.shape[-2] ** -0.5))]
    for c in sorted({case.args[0].shape[-1] for case in cases} | {8, 16, 32, 64}):
        mistakes.append((f"your scale is that of a head width of {c}, whatever the inputs: read the "
                         "width from the queries", lambda q, k, c=c: _weights(q, k, c ** -0.5)))
    judge(outputs, cases, _weights, compared="the scaled attention weights over the keys",
          mistakes=mistakes, properties=[_rows_sum_to_one])
    widths = sorted({case.args[0].shape[-1] for case in cases})
    return f"on {len(cases)} inputs: L != S, L = 1, S = 1, head widths {widths[0]} and {widths[-1]}"


def _masked(q, k, v, allowed, *, scale=None, dim=-1, after=False):
    """Masked attention, right and typically wrong: ``allowed (L, L)``, the scale, the
    softmax's axis, or the mask applied to the weights after the softmax."""
    scores = _scores(q, k, scale)
    if after:
        return (scores.softmax(-1) * allowed) @ v
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim) @ v


def _lower(q):
    return torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()


def _causal_reference(q, k, v):
    return _masked(q, k, v, _lower(q))


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
    cases.append(Case((q, k, eye.clone()), shapes(q=q, k=k) + f", v the identity {tuple(eye.shape)} "
                      "(the output is the weights)"))
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
                "its own key must stay allowed)")
    upper = torch.ones(L, L, dtype=torch.bool).triu(1)
    if w[..., upper].abs().max() > 1e-9:
        return f"on {case.text}, position i gives weight to keys j > i: it sees the future"
    if w.diagonal(dim1=-2, dim2=-1).abs().min() < 1e-9:
        return f"on {case.text}, a position gets no weight on itself: its own key must stay allowed"
    return None


@check("causal attention", forbid=ATTENTION_LIBRARIES)
def causal_attention(fn, draw):
    cases = _causal_cases(draw)
    outputs = []
    for case in cases:
        q, k, v = case.args
        out = fn.on(case)
        weights_shape = q.shape[:-1] + (q.shape[-2],)
        if isinstance(out, torch.Tensor) and out.shape == weights_shape and v.shape[-1] != q.shape[-2]:
            raise Hint(f"on {case.text} you returned shape {tuple(out.shape)}, the weights: the "
                       "output is the weighted sum of the values, one row of width dv per query")
        outputs.append(expect_tensor(out, (*q.shape[:-1], v.shape[-1]), "your output", finite=False))
    mistakes = [("the mask is flipped: query i may see keys j <= i (the lower triangle), never j > i",
                 lambda q, k, v: _masked(q, k, v, _lower(q).T)),
                ("nothing is masked: query i must not see keys j > i; mask them before the softmax",
                 lambda q, k, v: _masked(q, k, v, torch.ones_like(_lower(q)))),
                ("the weights were zeroed after the softmax, so the rows no longer sum to one: mask the "
                 "scores before the softmax, so that a masked key gets no weight at all",
                 lambda q, k, v: _masked(q, k, v, _lower(q), after=True)),
                ("your softmax runs over the queries: each query's weights must sum to one over its keys",
                 lambda q, k, v: _masked(q, k, v, _lower(q), dim=-2)),
                (f"the mask is right; the scores are not scaled: {SCALING}",
                 lambda q, k, v: _masked(q, k, v, _lower(q), scale=1.0)),
                ("the mask is right; your scale divides by the head width itself",
                 lambda q, k, v: _masked(q, k, v, _lower(q), scale=1 / q.shape[-1]))]
    judge(outputs, cases, _causal_reference, compared="causal attention (each position over itself "
          "and the positions before it)", mistakes=mistakes, properties=[_weights_pattern])
    return f"on {len(cases)} inputs (L = 1 among them, dv != d)"
