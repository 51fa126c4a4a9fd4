"""Self-checks for the exercises of 12.4 Long Sequences and Memory.

1. `causal_tiled_attention`: the tiled loop with a causal mask that skips every tile lying
   entirely above the diagonal; checked on its output and on the work of its matrix products.
2. `merge_partials`: two partial softmax results over disjoint keys merged into one.
3. `cache_bytes`: the bytes a full Transformer-XL (or compressive) cache holds, against the
   state of a `SegmentRecurrentEncoder` measured after a stream that fills it.
4. `kept_fractions`: a prediction of the amplitude of three cycles that daily means keep,
   against the library's mean pooling.
"""
from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

from ...checks.core import (
    Case,
    Hint,
    check,
    close,
    expect,
    expect_number,
    expect_tensor,
    judge,
    off_by,
    shapes,
)

FUSED = ("torch.nn.functional.scaled_dot_product_attention",
         "torch.nn.functional.multi_head_attention_forward", "torch.nn.MultiheadAttention")


# --- exercise 1: causal tile skipping ----------------------------------------------------------

def _causal(q, k, v, *, strict=False, mask=True):
    """Causal attention (float64 where the inputs are), explicitly; ``strict``: no key j = i."""
    L = q.shape[0]
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask:
        i = torch.arange(L)
        allowed = (i[None, :] < i[:, None]) if strict else (i[None, :] <= i[:, None])
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1) @ v


def _tiles(q, k, v, block, *, upper=True, diagonal=True, mask="global"):
    """The tiled loop (online softmax) with typical causal variants: ``upper`` computes the tiles
    above the diagonal, ``diagonal`` the tiles the diagonal crosses; ``mask`` is "global" (key
    j <= query i in the whole sequence), "local" (the same inside every tile, by tile-local
    indices) or None."""
    L, out = q.shape[0], []
    for i in range(0, L, block):
        qi = q[i:i + block] / math.sqrt(q.shape[-1])
        m = torch.full((len(qi), 1), float("-inf"), dtype=q.dtype)
        s_sum = torch.zeros(len(qi), 1, dtype=q.dtype)
        acc = torch.zeros(len(qi), v.shape[-1], dtype=q.dtype)
        for j in range(0, L, block):
            if not upper and j > i + len(qi) - 1:
                continue
            if not diagonal and j + block > i:
                continue
            s = qi @ k[j:j + block].T
            rows, cols = torch.arange(i, i + len(qi))[:, None], torch.arange(j, j + s.shape[1])[None, :]
            if mask == "global":
                s = s.masked_fill(cols > rows, float("-inf"))
            elif mask == "local":
                s = s.masked_fill((cols - j) > (rows - i), float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = (s - m_new).exp().nan_to_num(0.0)
            fix = (m - m_new).exp().nan_to_num(0.0)
            s_sum, acc, m = s_sum * fix + p.sum(-1, keepdim=True), acc * fix + p @ v[j:j + block], m_new
        out.append(acc / s_sum)
    return torch.cat(out)


def _work(q, k, v, block, *, upper: bool) -> int:
    """Floating-point operations of the tiles' two matrix products (scores, then p times the
    values), with or without the tiles that lie entirely above the diagonal."""
    L, d, dv, total = q.shape[0], q.shape[1], v.shape[1], 0
    for i in range(0, L, block):
        n = min(block, L - i)
        for j in range(0, L, block):
            if upper or j <= i + n - 1:
                total += 2 * n * min(block, L - j) * (d + dv)
    return total


def _causal_cases(draw) -> list[Case]:
    """A length that is not a multiple of the block, one that is, one shorter than the block,
    L = 1, and scores of a few tens (the online softmax must subtract its running maximum)."""
    block = draw.int(3, 5)
    sizes = [(3 * block + draw.int(1, block - 1), block, draw.int(2, 4), draw.int(1, 3), 1.0),
             (4 * block, block, draw.int(2, 4), draw.int(2, 3), 1.0),
             (draw.int(2, block), block + 2, 3, 2, 1.0),
             (1, block, 2, 2, 1.0),
             (5 * block + 1, block, 3, 2, 12.0)]
    cases = []
    for L, b, d, dv, scale in sizes:
        q, k, v = draw.randn(L, d, scale=scale), draw.randn(L, d), draw.randn(L, dv)
        cases.append(Case((q, k, v, b), shapes(q=q, k=k, v=v) + f", block={b}"))
    return cases


LOCAL_MASK = ("the mask compares positions inside each tile instead of positions in the whole sequence: "
              "in a tile below the diagonal every key comes before every query")


def _same_or_both_nan(a, b) -> bool:
    """``close``, where NaN in the same places counts as equal (a mistake that leaves a row
    without keys gives 0 / 0 there)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return False
    if not torch.equal(torch.isnan(a), torch.isnan(b)):
        return False
    keep = ~torch.isnan(b)
    return close(a[keep], b[keep])


@check("12.4 exercise 1: causal tile skipping", forbid=FUSED,
       unavailable=("labsupport.attention.flash.flash_attention", "labsupport.attention.flash_attention"))
def causal_tiled_attention(fn, draw):
    cases = _causal_cases(draw)
    outputs, work = [], []
    for case in cases:
        q, k, v, block = case.args
        counter = FlopCounterMode(display=False)        # around the answer's own code only
        got = fn.on(case, within=counter)
        outputs.append(expect_tensor(got, (q.shape[0], v.shape[1]), f"causal_tiled_attention({case.text})",
                                     finite=False))
        work.append(counter.get_total_flops())
    judge(outputs, cases, lambda q, k, v, block: _causal(q, k, v),
          compared="causal attention (each query sees itself and the keys before it)", same=_same_or_both_nan,
          mistakes=[("each query also reads the keys after it: without a mask the loop computes full "
                     "attention, so the future leaks in",
                     lambda q, k, v, b: _tiles(q, k, v, b, mask=None)),
                    ("the tiles above the diagonal are skipped, but inside a tile that the diagonal "
                     "crosses a query still sees the keys after it: mask those entries",
                     lambda q, k, v, b: _tiles(q, k, v, b, upper=False, mask=None)),
                    (LOCAL_MASK, lambda q, k, v, b: _tiles(q, k, v, b, upper=False, mask="local")),
                    (LOCAL_MASK, lambda q, k, v, b: _tiles(q, k, v, b, mask="local")),
                    ("the first query has no key left: a query may attend to its own position",
                     lambda q, k, v, b: _causal(q, k, v, strict=True)),
                    ("the tile on the diagonal holds each query's own key and the keys just before it: "
                     "skip only the tiles that lie entirely above the diagonal",
                     lambda q, k, v, b: _tiles(q, k, v, b, upper=False, diagonal=False)),
                    ("the scores are not divided by the square root of the head width",
                     lambda q, k, v, b: _causal(q * math.sqrt(q.shape[-1]), k, v))])
    skipped = sum(_work(*c.args, upper=False) for c in cases)
    every = sum(_work(*c.args, upper=True) for c in cases)
    expect(skipped, every)
    if sum(work) > (skipped + every) / 2:
        raise Hint("the outputs are right, but your matrix products do the work of the tiles that lie "
                   f"entirely above the diagonal too (about {sum(work) / skipped:.2g} times the work of the "
                   "tiles a causal mask leaves): do not compute a tile whose every key comes after every "
                   "query of the block")
    return (f"causal attention on {len(cases)} inputs (lengths that are and are not a multiple of the "
            "block, one shorter than the block, a single step), and no tile above the diagonal computed")


# --- exercise 2: merging two partial softmax results ------------------------------------------------

def _partial(scores, v):
    """(m, l, acc) of one part of the keys: its maximum per row, the sum of exp(s - m), and the
    values weighted by exp(s - m). An empty part has m = -inf, l = 0, acc = 0."""
    if scores.shape[1] == 0:
        n = scores.shape[0]
        return (torch.full((n, 1), float("-inf"), dtype=scores.dtype), torch.zeros(n, 1, dtype=scores.dtype),
                torch.zeros(n, v.shape[1], dtype=scores.dtype))
    m = scores.amax(-1, keepdim=True)
    p = (scores - m).exp()
    return m, p.sum(-1, keepdim=True), p @ v


def _merge_cases(draw) -> list[Case]:
    """Rows whose larger maximum lies in the first part, in the second, in either (drawn), a gap
    of thousands between the parts' maxima, and an empty second part (the start of a loop)."""
    cases = []
    n, dv = draw.int(2, 5), draw.int(1, 4)
    plans = [("the first part's maximum is larger", draw.int(3, 6), draw.int(3, 6), 4.0, 0.0),
             ("the second part's maximum is larger", draw.int(3, 6), draw.int(3, 6), 0.0, 4.0),
             ("maxima drawn at random", draw.int(2, 7), draw.int(2, 7), 0.0, 0.0),
             ("the second part's maximum is thousands above the first's", 4, 3, 0.0, 3000.0),
             ("an empty second part", draw.int(2, 5), 0, 0.0, 0.0)]
    for text, s1, s2, up1, up2 in plans:
        scores1, scores2 = draw.randn(n, s1, scale=5.0) + up1, draw.randn(n, s2, scale=5.0) + up2
        parts = _partial(scores1, draw.randn(s1, dv)) + _partial(scores2, draw.randn(s2, dv))
        cases.append(Case(parts, f"{n} rows, {s1} + {s2} keys, {dv} value columns ({text})"))
    return cases


def _merged(m1, l1, a1, m2, l2, a2, *, rescale=True, assume_first=False, reverse=False, rescale_acc=True,
            rescale_l=True):
    """The merged output acc / l, right (the defaults: equal to softmax attention over the keys of
    both parts) and typically wrong."""
    m = m1 if assume_first else torch.maximum(m1, m2)
    if not rescale:
        return (a1 + a2) / (l1 + l2)
    e1, e2 = ((m - m1).exp(), (m - m2).exp()) if reverse else ((m1 - m).exp(), (m2 - m).exp())
    acc = a1 * e1 + a2 * e2 if rescale_acc else a1 + a2
    l = l1 * e1 + l2 * e2 if rescale_l else l1 + l2
    return acc / l


def _halves(m1, l1, a1, m2, l2, a2):
    """Each part's own normalised output, the two averaged."""
    return (a1 / l1 + a2 / l2) / 2


@check("12.4 exercise 2: merging two partial softmax results")
def merge_partials(fn, draw):
    cases = _merge_cases(draw)
    outputs, states = [], []
    for case in cases:
        m1, l1, a1 = case.args[:3]
        got = fn.on(case)
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise Hint(f"return the merged state as a tuple (m, l, acc), got {type(got).__name__}")
        m, l, acc = (expect_tensor(t, like.shape, f"merge_partials' {name} on {case.text}", finite=False)
                     for t, like, name in zip(got, (m1, l1, a1), ("m", "l", "acc")))
        outputs.append(acc / l)
        states.append((m, l))

    def overflow(out, case):
        if torch.isfinite(out).all():
            return None
        return (f"on {case.text}, acc / l holds inf or NaN: the exponential of a large number overflows. "
                "Which of your rescaling factors can exceed one?")
    judge(outputs, cases, _merged, compared="softmax attention over the keys of both parts",
          same=_same_or_both_nan,
          mistakes=[("your merge is right when the two parts have the same maximum and wrong when they "
                     "differ: each part's sums were taken against its own maximum",
                     lambda *p: _merged(*p, rescale=False)),
                    ("your merge assumes that the first part holds the larger maximum; on rows where the "
                     "second part's is larger it fails: take the larger of the two, row by row",
                     lambda *p: _merged(*p, assume_first=True)),
                    ("the rescaling factors are the wrong way round: a part whose maximum lies below the "
                     "common one must shrink, not grow", lambda *p: _merged(*p, reverse=True)),
                    ("the normalisers l are rescaled but the weighted sums acc are not, although both "
                     "were taken against their part's own maximum",
                     lambda *p: _merged(*p, rescale_acc=False)),
                    ("the weighted sums acc are rescaled but the normalisers l are not, although both "
                     "were taken against their part's own maximum", lambda *p: _merged(*p, rescale_l=False)),
                    ("each part counts for one half: a part's share of the result is its share of the "
                     "softmax weight, which its normaliser measures", _halves)],
          properties=[overflow])
    for (m, l), case in zip(states, cases):
        m1, l1, _, m2, l2, _ = case.args
        top = torch.maximum(m1, m2)
        if not close(m, top):
            raise Hint(f"on {case.text}, acc / l is right but the m you return is not the larger of the "
                       "two maxima: a later merge rescales against it")
        if not close(l, l1 * (m1 - top).exp() + l2 * (m2 - top).exp().nan_to_num(0.0)):
            raise Hint(f"on {case.text}, acc / l is right but l is not the normaliser taken against the "
                       "merged maximum: a later merge adds to it")
    return (f"the merged output is softmax attention over all the keys on {len(cases)} inputs, also when "
            "the maxima differ by thousands or one part is empty, and (m, l) can be merged again")


# --- exercise 3: the memory bill of a cache --------------------------------------------------------

def measured_cache_bytes(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype) -> int:
    """The bytes of the state a `SegmentRecurrentEncoder` (``cmem_len = 0``: Transformer-XL)
    carries after a stream long enough to fill every memory, measured as the sum of the state's
    tensors' sizes. Segments of ``rate`` steps, ``mem_len`` a multiple of ``rate``."""
    from ...memory import SegmentRecurrentEncoder, run_segments
    from ...randomstate import kept_random_state

    with kept_random_state():
        torch.manual_seed(0)
        encoder = SegmentRecurrentEncoder(d_model, 1, n_layers, mem_len=mem_len, cmem_len=cmem_len,
                                          rate=rate).to(dtype).eval()
        steps = (n_layers + 1) * (mem_len + rate * cmem_len + 2 * rate)
        x = torch.randn(batch, steps, d_model).to(dtype)
    with torch.no_grad():
        _, state = run_segments(encoder, x, rate, return_memory=True)
    tensors = state if cmem_len == 0 else state.memory + state.compressed
    return sum(t.numel() * t.element_size() for t in tensors)


def _bill(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype, *, layers=True, batched=True,
          kv=False, bits=False, four=False, reach=False, compressed=True, short=True):
    """The cache's bytes, right (the defaults) and typically wrong."""
    slots = (mem_len if short else 0) + ((rate if reach else 1) * cmem_len if compressed else 0)
    size = 4 if four else (torch.finfo(dtype).bits if bits else torch.finfo(dtype).bits // 8)
    return (batch if batched else 1) * (n_layers if layers else 1) * (2 if kv else 1) * slots * d_model * size


def _cache_cases(draw) -> list[Case]:
    """Transformer-XL alone (no compressed memory) and compressive caches, in four dtypes, with
    batch, layers, width and both memories all different from each other (even widths: the
    encoder's relative positions come in sine and cosine pairs)."""
    rate = draw.int(2, 3)
    sizes = [(2, 3, 8, 6, 0, 1, torch.float32),
             (draw.int(2, 3), 2, 4, 4 * rate, draw.int(3, 5), rate, torch.float64),
             (3, draw.int(1, 2), 6, 2 * rate, 2, rate, torch.bfloat16),
             (draw.int(1, 2), 4, draw.choice((4, 6)), 3, 0, 1, torch.float16),
             (2, 1, 10, 2 * rate, 7, rate, torch.float32)]
    cases = []
    for batch, n_layers, d_model, mem_len, cmem_len, r, dtype in sizes:
        name = str(dtype).removeprefix("torch.")
        text = (f"batch={batch}, n_layers={n_layers}, d_model={d_model}, mem_len={mem_len}, "
                f"cmem_len={cmem_len}, rate={r}, dtype=torch.{name}")
        cases.append(Case((batch, n_layers, d_model, mem_len, cmem_len, r, dtype), text))
    return cases


@check("12.4 exercise 3: the memory bill of a cache")
def cache_bytes(fn, draw):
    cases = _cache_cases(draw)
    outputs = [expect_number(fn.on(case), f"a number of bytes on {case.text}") for case in cases]
    measured = {case.args: measured_cache_bytes(*case.args) for case in cases}
    judge(outputs, cases, lambda *args: measured[args],
          compared="the bytes of the encoder's state, measured after a stream that fills it",
          same=lambda a, b: isinstance(a, (int, float)) and math.isclose(a, b, rel_tol=1e-9),
          show=lambda got, want: off_by(got, want),
          mistakes=[("your count does not grow with n_layers; the measured state does",
                     lambda *a: _bill(*a, layers=False)),
                    ("your count does not grow with the batch; the measured state does",
                     lambda *a: _bill(*a, batched=False)),
                    ("your count is twice the measured state on every encoder: count what the encoder "
                     "carries from segment to segment, not what attention computes from it",
                     lambda *a: _bill(*a, kv=True)),
                    ("your count is eight times the measured bytes on every encoder",
                     lambda *a: _bill(*a, bits=True)),
                    ("your count is right for float32 only: the check asks for float16, bfloat16, float32 "
                     "and float64", lambda *a: _bill(*a, four=True)),
                    ("your count grows with the compression rate; the measured state does not",
                     lambda *a: _bill(*a, reach=True)),
                    ("your count does not grow with cmem_len; the measured state does",
                     lambda *a: _bill(*a, compressed=False)),
                    ("your count does not grow with mem_len when there is a compressed memory; the measured "
                     "state does",
                     lambda *a: _bill(*a, short=False))])
    return (f"the bytes of the cache on {len(cases)} encoders (Transformer-XL alone and with a compressed "
            "memory, in four dtypes), as measured on their state")


# --- exercise 4: what a memory of daily means keeps --------------------------------------

KEPT_PERIODS = {24: "daily", 168: "weekly", 8766: "yearly"}      # hours per cycle
KEPT_RATE = 24
KEPT_TOLERANCE = 0.025


def measured_kept_fractions(rate: int = KEPT_RATE) -> dict:
    """The fraction of a cycle's amplitude left after mean pooling at ``rate``, measured:
    a year of hours of cos and sin of each period (float64) goes through the library's
    compression (`labsupport.memory.CompressiveMemory`), and the amplitude
    sqrt(cos^2 + sin^2) of each slot, the same for every slot, is averaged."""
    from ...memory import CompressiveMemory

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


@check("12.4 exercise 4: what a memory of daily means keeps", drawn=False)
def kept_fractions(fn, draw):
    answer = fn()
    if not isinstance(answer, dict) or set(answer) != set(KEPT_PERIODS):
        got = sorted(answer, key=str) if isinstance(answer, dict) else type(answer).__name__
        raise Hint(f"return a dict with the keys 24, 168 and 8766 (hours per cycle: a day, a week, "
                   f"a year, as whole numbers), each mapped to the fraction kept; got {got}")
    guess = {p: expect_number(answer[p], f"a fraction for the {name} cycle")
             for p, name in KEPT_PERIODS.items()}
    if any(g > 1.5 or g < -0.05 for g in guess.values()):
        raise Hint("give each prediction as a fraction of the amplitude between 0 and 1 (0.5 for "
                   "half), not as a percentage")
    measured = measured_kept_fractions()
    expect(*measured.values())
    off = {p: abs(guess[p] - measured[p]) > KEPT_TOLERANCE for p in KEPT_PERIODS}
    if off[24]:
        raise Hint("your daily prediction is off: a slot averages exactly one day, one whole period of "
                   "the daily cycle. What is left of a cycle whose ups and downs all fall inside the "
                   "same slot?")
    if off[168]:
        raise Hint("your weekly prediction is off: a day is a seventh of a week. How much does averaging "
                   "over a seventh of a period smooth a cycle? (Average a cosine over 24 consecutive hours "
                   "of a 168-hour cycle.)")
    if off[8766]:
        raise Hint("your yearly prediction is off: a day is 1/365 of a year. How much can one day's "
                   "average change a season?")
    return (f"your three predictions are within {KEPT_TOLERANCE} of the fractions measured through mean "
            "pooling")
