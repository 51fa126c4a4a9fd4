"""Self-checks for the exercises of 12.4 Long Sequences and Memory."""
from __future__ import annotations

import math

import torch

from ...checks.core import Case, Hint, check, close, differ, expect_number, expect_tensor, judge


def _run_tiles(step, scores, v, tile, text):
    """Feed one row block's scores (n, S) tile by tile through ``step``; return (acc / l, m)."""
    n = scores.shape[0]
    m = torch.full((n, 1), float("-inf"), dtype=torch.float64)
    l = torch.zeros(n, 1, dtype=torch.float64)
    acc = torch.zeros(n, v.shape[-1], dtype=torch.float64)
    for j in range(0, scores.shape[1], tile):
        block = scores[:, j:j + tile]
        state = step(m, l, acc, block, v[j:j + tile],
                     case=f"{text}, the tile of columns {j}..{j + block.shape[1] - 1}")
        if not (isinstance(state, tuple) and len(state) == 3):
            raise Hint(f"return the new state as a tuple (m, l, acc), got {type(state).__name__}")
        m, l, acc = (expect_tensor(t, like.shape, f"online_step's {name}", finite=False)
                     for t, like, name in zip(state, (m, l, acc), ("m", "l", "acc")))
    return acc / l, m


def _online_cases(draw) -> list[tuple]:
    """(scores (n, S), v (S, dv), tile, words): S not a multiple of the tile, scores in the
    hundreds, a maximum that rises in the last tile (an acc or l left unrescaled shows on
    every row) and one that falls by thousands from one tile to the next."""
    n, S, dv, tile = draw.int(2, 6), draw.int(9, 15), draw.int(1, 4), draw.int(3, 5)
    while S % tile == 0:
        S += 1
    plain = draw.randn(n, S)
    cases = [(plain, draw.randn(S, dv), tile, f"scores {tuple(plain.shape)} in tiles of {tile}"),
             (plain * 400, draw.randn(S, dv), tile,
              f"scores {tuple(plain.shape)} of a few hundred, in tiles of {tile}")]
    rising = draw.randn(n, 2 * tile + 1)
    rising[:, -1] += 8.0                            # every row's maximum comes in its last tile
    cases.append((rising, draw.randn(2 * tile + 1, dv), tile,
                  f"scores {tuple(rising.shape)} whose maximum comes in the last tile of {tile}"))
    falling = draw.randn(n, 2 * tile)
    falling[:, :tile] += 5000.0                     # the first tile's maximum is thousands above the next's
    cases.append((falling, draw.randn(2 * tile, dv), tile,
                  f"scores {tuple(falling.shape)} whose maximum falls by 5000 after the first tile "
                  f"of {tile}"))
    one = draw.randn(1, draw.int(1, 3))
    cases.append((one, draw.randn(one.shape[1], dv), 4, f"scores {tuple(one.shape)}, one tile"))
    return cases


@check("12.4 exercise 1: one step of the online softmax")
def online_step(fn, draw):
    for scores, v, tile, text in _online_cases(draw):
        got, m = _run_tiles(fn, scores, v, tile, text)
        want = scores.softmax(-1) @ v
        last_tile_max = scores[:, (scores.shape[1] - 1) // tile * tile:].amax(-1, keepdim=True)
        row_max = scores.amax(-1, keepdim=True)
        if got.shape == want.shape and close(got, want, tol=1e-9):
            if not close(m.double(), row_max):
                raise Hint(f"on {text}, acc / l is right but the m you return is not the running "
                           "maximum, max(m, the tile's maximum); the next tile relies on it")
            continue
        if not close(m.double(), row_max) and close(m.double(), last_tile_max):
            raise Hint(f"on {text}: m must be the running maximum, max(m, the tile's maximum); with "
                       "the tile's own maximum, exp(m_old - m_new) overflows once the maximum falls")
        if not torch.isfinite(got).all():
            raise Hint(f"on {text}, the result holds inf or NaN: exp() of a large number overflows; "
                       "subtract the running maximum before exponentiating")
        one_tile, _ = _run_tiles(fn, scores, v, scores.shape[1], text)
        if close(one_tile, want, tol=1e-9):
            raise Hint(f"on {text}, one tile is right but several are not: when the running maximum "
                       "grows, multiply the old l and the old acc by exp(m_old - m_new)")
        raise Hint(f"on {text}, acc / l after every tile should equal softmax(scores) @ v, but "
                   f"{differ(got, want, 1e-9)}: p = exp(scores - m_new), l = l exp(m_old - m_new) + "
                   "sum of p, acc = acc exp(m_old - m_new) + p @ v")
    return ("running max, normaliser and output, rescaled by exp(m_old - m_new): exact, tile by tile, "
            "also when the maximum rises in the last tile or falls by thousands")


def _update(memory, compressed, h, mem_len, cmem_len, rate, *, newest_out=False, first_slots=False,
            pool="mean", consecutive=True, new_first=False, trim=True):
    """The compressive memory's update (Rae et al., 2020) on whole groups, and typical wrong ones:
    append h to the short memory, compress its oldest overflow ``rate`` states to a slot, keep
    the last ``cmem_len`` slots, oldest first."""
    states = torch.cat([memory, h], dim=1)                                    # (B, M + L, d)
    evict = max(states.shape[1] - mem_len, 0)
    if newest_out:
        gone, kept = states[:, mem_len:], states[:, :mem_len]
    else:
        gone, kept = states[:, :evict], states[:, evict:]
    B, n, d = gone.shape
    if pool == "every":
        slots = gone[:, ::rate]
    elif consecutive:
        groups = gone.reshape(B, n // rate, rate, d)
        slots = groups.sum(2) if pool == "sum" else groups.mean(2)
    else:
        slots = gone.reshape(B, rate, n // rate, d).mean(1)
    joined = torch.cat([slots, compressed] if new_first else [compressed, slots], dim=1)
    joined = joined[:, :cmem_len] if first_slots else joined[:, max(joined.shape[1] - cmem_len, 0):]
    return (kept if trim else states), joined


def _update_cases(draw) -> list[Case]:
    """Full and empty memories, rate 1 (an exact cache), overflows of one and several groups,
    a compressed memory that overflows too; mem_len and the segment whole groups."""
    sizes = [(2, 3, 2, 4, 3, 4, 2, 4),                        # B, d, rate, mem_len, cmem_len, M, C, L
             (1, 2, draw.int(2, 3), 8, 2, 0, 0, 4),
             (draw.int(1, 3), 2, 1, 3, 4, 3, draw.int(0, 4), 2),
             (1, draw.int(2, 4), 3, 3, 5, 3, 4, 6),
             (2, 2, draw.choice((2, 4)), 8, 3, 8, 3, 8)]
    cases = []
    for B, d, rate, mem_len, cmem_len, M, C, L in sizes:
        memory, compressed, h = draw.randn(B, M, d), draw.randn(B, C, d), draw.randn(B, L, d)
        text = (f"memory ({B}, {M}, {d}), compressed ({B}, {C}, {d}), h ({B}, {L}, {d}), mem_len={mem_len}, "
                f"cmem_len={cmem_len}, rate={rate}")
        cases.append(Case((memory, compressed, h, mem_len, cmem_len, rate), text))
    return cases


def _state(t, B: int, d: int, what: str) -> torch.Tensor:
    """``t`` if it is a (B, n, d) tensor of real numbers, for any n; else a `Hint`."""
    steps = t.shape[1] if isinstance(t, torch.Tensor) and t.dim() == 3 else "n"
    return expect_tensor(t, (B, steps, d), what)


def _same_pair(a, b) -> bool:
    return (isinstance(a, tuple) and len(a) == 2 and all(isinstance(t, torch.Tensor) for t in a)
            and close(a[0], b[0]) and close(a[1], b[1]))


def _show_pair(got, want) -> str:
    for name, g, w in zip(("the short memory", "the compressed memory"), got, want):
        if not close(g, w):
            return f"{name}: {differ(g, w)}"
    return "they agree"


@check("12.4 exercise 2: updating a compressive memory")
def compress_update(fn, draw):
    cases = _update_cases(draw)
    outputs = []
    for case in cases:
        got = fn.on(case)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise Hint(f"return the new (memory, compressed) as a tuple of two tensors, got "
                       f"{type(got).__name__}")
        B, d = case.args[0].shape[0], case.args[0].shape[2]
        outputs.append(tuple(_state(t, B, d, f"compress_update's {name} on {case.text}")
                             for t, name in zip(got, ("memory", "compressed"))))
    judge(outputs, cases, _update, compared="the short memory and the compressed slots, oldest first",
          same=_same_pair, show=_show_pair,
          mistakes=[("the short memory keeps the newest states: evict the oldest ones, from the start "
                     "of concat(memory, h)", lambda *a: _update(*a, newest_out=True)),
                    ("the compressed memory keeps its most recent cmem_len slots, the last ones",
                     lambda *a: _update(*a, first_slots=True)),
                    ("oldest first: append the new slots after the old ones",
                     lambda *a: _update(*a, new_first=True)),
                    ("a slot is the mean of its `rate` states; a sum grows with the rate",
                     lambda *a: _update(*a, pool="sum")),
                    ("that keeps every `rate`-th state; a slot should summarise all the states of its "
                     "group (their mean)", lambda *a: _update(*a, pool="every")),
                    ("groups are consecutive states: slot k is the mean of the evicted states "
                     "k*rate .. k*rate + rate - 1", lambda *a: _update(*a, consecutive=False)),
                    ("the short memory holds at most mem_len states: keep only what is left after "
                     "the eviction", lambda *a: _update(*a, trim=False))])
    return (f"the oldest states evicted, compressed by mean pooling and the last cmem_len slots kept, on "
            f"{len(cases)} memories (empty and full, rate 1 among them)")


# --- exercise 3: what a memory of daily means keeps --------------------------------------

KEPT_PERIODS = {24: "daily", 168: "weekly", 8766: "yearly"}      # hours per cycle
KEPT_RATE = 24
KEPT_TOLERANCE = 0.05


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


@check("12.4 exercise 3: what a memory of daily means keeps", drawn=False)
def kept_fractions(fn, draw):
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
        raise Hint("a slot averages exactly one day, one whole period of the daily cycle: what is "
                   "left of a cycle whose ups and downs all fall inside the same slot?")
    if off[168]:
        raise Hint("a day is a seventh of a week: how much does averaging over one seventh of a "
                   "period smooth a cycle? (sum the cycle over 24 consecutive hours)")
    if off[8766]:
        raise Hint("a day is 1/365 of a year: how much can one day's average change a season?")
    return (f"your three predictions are within {KEPT_TOLERANCE} of the amplitudes measured through "
            "the library's mean pooling: the memory keeps each day's level, hence the week and the "
            "season, and loses the shape of the day")


# --- exercise 4: the saving of a patch stride, predicted then measured --------------------

STRIDE_CASE = dict(lookback=336, patch_len=24, strides=(1, 12), heads=4, head_dim=16)
SAVING_TOLERANCE = 0.05


def measured_stride_saving() -> tuple[float, list]:
    """How many times smaller the largest tensor of causal naive attention is with the
    tokens of stride 12 than with those of stride 1 (a 336-hour window, patches of 24).
    The largest tensor (`labsupport.timing.LargestTensor`) is the (B, H, N, N) score
    matrix, so fixed costs do not blur the ratio. Returns (ratio, token counts)."""
    from ...attention import naive_attention
    from ...timing import LargestTensor, attention_inputs

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


@check("12.4 exercise 4: predict the saving of a patch stride, then measure it", drawn=False)
def stride_saving(fn, draw):
    guess = expect_number(fn(), "a number: how many times cheaper")
    measured, (n1, n12) = measured_stride_saving()
    if guess <= 0:
        raise Hint("return a positive factor: how many times smaller the cost becomes")
    if abs(guess / measured - 1) <= SAVING_TOLERANCE:
        return (f"your prediction is within {SAVING_TOLERANCE:.0%} of the measured ratio of the "
                "largest tensors, the causal score matrices of the two strides")
    if guess < 1 and abs(1 / guess / measured - 1) <= SAVING_TOLERANCE:
        raise Hint("that is the fraction of the cost that is left; return the factor by which it "
                   "falls (greater than 1)")
    if any(abs(guess / r - 1) <= 0.1 for r in (12, n1 / n12)):
        raise Hint("that is how many times fewer tokens there are; attention's cost grows as the "
                   "square of the token count")
    if abs(guess / 144 - 1) <= 0.01:
        raise Hint("144 is the S^2 rule, which ignores the patch length: count the tokens of each "
                   "stride with patch_count, then square their ratio")
    side = "above" if guess > measured else "below"
    raise Hint(f"your prediction is {side} the measured saving by more than {SAVING_TOLERANCE:.0%}: "
               "count the tokens of each stride, (lookback - patch_len) // stride + 1, and square "
               "their ratio")
