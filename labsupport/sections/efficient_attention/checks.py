"""Self-checks for the exercises of 12.5 Efficient and Sparse Attention.

Each check runs the answer on several drawn inputs, computes the usual wrong variants on the
same inputs, and names the one the answer matches; no hint prints an expected value, a
formula or code of the solution (tests/test_hints.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ...attention import local_attention, naive_attention, performer_attention
from ...checks.core import Case, Hint, check, close, expect, expect_number, expect_tensor, judge, shapes
from ...timing import fit_power_law

SPARSE = ("torch.nn.attention.flex_attention",)          # its block masks build the band for you


# --- 12.5.1: Nystrom attention ---------------------------------------------------------------

def _nystrom(q, k, v, landmarks, *, scale=True, invert=True, middle_softmax=True, groups="blocks",
             first="keys"):
    """Nystrom attention (Xiong et al., 2021) in float64, right and typically wrong: landmarks
    are the means of consecutive blocks of rows (``groups``: "blocks"; "strided" averages rows
    spaced L / landmarks apart; "first" takes each block's first row)."""
    L, D = q.shape
    s = D ** -0.5 if scale else 1.0
    if groups == "blocks":
        q_land, k_land = (t.reshape(landmarks, L // landmarks, -1).mean(1) for t in (q, k))
    elif groups == "strided":
        q_land, k_land = (t.reshape(L // landmarks, landmarks, -1).mean(0) for t in (q, k))
    else:
        q_land, k_land = q[::L // landmarks], k[::L // landmarks]
    left = torch.softmax(q @ (k_land if first == "keys" else q_land).T * s, -1)   # (L, m)
    middle = q_land @ k_land.T * s                                                  # (m, m)
    middle = torch.softmax(middle, -1) if middle_softmax else middle
    right = torch.softmax(q_land @ k.T * s, -1)                                     # (m, L)
    return left @ (torch.linalg.pinv(middle) if invert else middle) @ (right @ v)


def _nystrom_cases(draw) -> list[Case]:
    """Several blocks of several rows (never a square split, on which a transposed grouping
    agrees), one landmark per row (exact attention), and wider heads of larger entries."""
    sizes = [(4, 3, 5, 3), (draw.int(2, 4), draw.int(2, 5), draw.int(2, 8), draw.int(1, 4)),
             (6, 1, 3, 2), (draw.int(3, 5), draw.int(2, 3), 16, draw.int(2, 6))]
    cases = []
    for m, per, D, Dv in sizes:
        if m == per:
            per += 1
        L = m * per
        scale = 2.0 if D == 16 else 1.0
        q, k, v = draw.randn(L, D, scale=scale), draw.randn(L, D, scale=scale), draw.randn(L, Dv)
        cases.append(Case((q, k, v, m), shapes(q=q, k=k, v=v) + f", landmarks={m}"))
    return cases


def _exact_with_one_row_each(out, case, fn):
    q, k, v, m = case.args
    L = q.shape[0]
    if m == L:
        return None
    alone = fn(q, k, v, L, case=f"{case.text[:case.text.rfind(', landmarks')]}, landmarks={L}")
    if isinstance(alone, torch.Tensor) and alone.shape == v.shape and \
            not close(alone, naive_attention(q, k, v), tol=1e-5):
        return ("with one landmark per row (landmarks equal to L) Nystrom attention is exact attention, and "
                "yours is not: look at the scale of the scores and at the axis of each softmax")
    return None


@check("12.5 exercise 1: Nystrom attention")
def nystrom_attention(fn, draw):
    cases = _nystrom_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args[2].shape, f"nystrom_attention({case.text})")
               for case in cases]
    judge(outputs, cases, _nystrom, compared="the Nystrom attention of the exercise",
          same=lambda a, b: close(a, b, tol=1e-6),
          mistakes=[("this is exact attention: it reads every key, while Nystrom attention goes through "
                     "the landmarks", lambda q, k, v, m: naive_attention(q, k, v)),
                    ("the scores are not scaled: divide every product of a query and a key by the square "
                     "root of the width D, in all three softmax matrices",
                     lambda q, k, v, m: _nystrom(q, k, v, m, scale=False)),
                    ("the middle matrix is not inverted: the three factors rebuild the attention matrix only "
                     "with the pseudo-inverse of the landmarks' own softmax matrix in the middle",
                     lambda q, k, v, m: _nystrom(q, k, v, m, invert=False)),
                    ("the middle matrix is a softmax too (landmark queries against landmark keys), taken "
                     "before its pseudo-inverse",
                     lambda q, k, v, m: _nystrom(q, k, v, m, middle_softmax=False)),
                    ("each landmark is the mean of a block of consecutive rows; yours averages rows spaced "
                     "L / landmarks apart", lambda q, k, v, m: _nystrom(q, k, v, m, groups="strided")),
                    ("each landmark is the mean of its whole block, not the block's first row",
                     lambda q, k, v, m: _nystrom(q, k, v, m, groups="first")),
                    ("the first factor compares every query with the landmark keys, not with the landmark "
                     "queries", lambda q, k, v, m: _nystrom(q, k, v, m, first="queries"))],
          properties=[lambda out, case: _exact_with_one_row_each(out, case, fn)])
    return (f"equal to Nystrom attention on {len(cases)} inputs, and to exact attention with one landmark "
            "per row")


# --- 12.5.2: local attention through the fused kernel, block by block ------------------------

class Allocations(TorchDispatchMode):
    """Inside ``with Allocations() as probe:``, ``probe.numel`` is the size of the largest
    tensor that any operator allocated (views, in-place results and copies of storage,
    such as ``copy.deepcopy`` makes, are not allocations of a new tensor by an operator)."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        returns = func._schema.returns
        for t, ret in zip(out if isinstance(out, (tuple, list)) else (out,), returns):
            if isinstance(t, torch.Tensor) and ret.alias_info is None:
                self.numel = max(self.numel, t.numel())
        return out


def _blocks_wrong(q, k, v, block, *, previous=True, band=True, causal=True, width=None):
    """Causal attention within each block and (optionally) the block before it, with or
    without the band limit i - block <= j: the typical wrong versions, via masks."""
    L = q.shape[-2]
    i = torch.arange(L)
    lag = i[:, None] - i[None, :]                                          # (L, L): i - j
    same = (i[:, None] // block) - (i[None, :] // block)                    # block distance
    allowed = (same <= (1 if previous else 0)) & (same >= 0)
    if causal:
        allowed &= lag >= 0
    if band:
        allowed &= lag <= (block if width is None else width)
    return naive_attention(q, k, v, mask=allowed)


def _block_cases(draw) -> list[Case]:
    """L = n blocks of ``block`` with n != block (a transposed block view passes when they
    are equal), one block only, and a long narrow input (the last) on which an (L, L)
    tensor stands out from everything a blocked answer builds."""
    sizes = [(2, 3, 5, 4, 8), (1, 2, 3, draw.int(5, 9), 5), (1, 1, 1, draw.int(3, 7), 4),
             (2, 2, draw.int(6, 9), draw.int(2, 5), draw.int(2, 6)),
             (1, 1, draw.int(10, 14), draw.int(3, 4), 2)]
    cases = []
    for B, H, n, block, D in sizes:
        if n == block:
            n += 1
        q, k, v = (draw.randn(B, H, n * block, D, dtype=torch.float32) for _ in range(3))
        cases.append(Case((q, k, v, block), shapes(q=q, k=k, v=v) + f", block={block}"))
    return cases


@check("12.5 exercise 2: local attention through SDPA, block by block", forbid=SPARSE,
       unavailable=("labsupport.attention.local_attention", "labsupport.attention.sparse.local_attention"))
def blocked_local_attention(fn, draw):
    cases = _block_cases(draw)
    outputs, largest = [], []
    for case in cases:
        q, k, v, block = case.args
        probe = Allocations()
        got = fn.on(case, within=probe)                                   # the copies are not counted
        outputs.append(expect_tensor(got, v.shape, f"blocked_local_attention({case.text})"))
        largest.append(probe.numel)

    def future(out, case):
        q, k, v, block = case.args
        p = q.shape[-2] // 2
        later = v.clone()
        later[..., p + 1:, :] += 1.0
        again = fn(q, k, later, block)
        if isinstance(again, torch.Tensor) and not close(again[..., :p + 1, :], out[..., :p + 1, :],
                                                         tol=1e-5):
            return (f"on {case.text}, outputs up to position {p} changed when values after it changed: the "
                    "mask must also hide the keys after each query (the future)")
        return None
    judge(outputs, cases, lambda q, k, v, block: local_attention(q, k, v, window=block, is_causal=True),
          compared="causal sliding-window attention with a window of `block`",
          same=lambda a, b: close(a, b, tol=1e-5),
          mistakes=[("this is full causal attention: each query may see only the `block` keys before it "
                     "and itself", lambda q, k, v, block: naive_attention(q, k, v, is_causal=True)),
                    ("each block must also see the block before it: the first query of a block needs the "
                     "`block` keys that precede it",
                     lambda q, k, v, block: _blocks_wrong(q, k, v, block, previous=False, band=False)),
                    ("mask the band inside the two blocks: a query may not see the whole previous block, "
                     "only its own band", lambda q, k, v, block: _blocks_wrong(q, k, v, block, band=False)),
                    ("the window holds one key more than `block`: the query itself and the `block` keys "
                     "before it; yours stops one short",
                     lambda q, k, v, block: _blocks_wrong(q, k, v, block, width=block - 1))],
          properties=[future])
    q, k, v, block = cases[-1].args
    B, H, L, _ = q.shape
    if largest[-1] >= B * H * L * L:
        raise Hint(f"the values are right, but on {cases[-1].text} a tensor of {largest[-1]} elements "
                   f"was built, as big as the full (L, L) scores: cut the queries into blocks and give "
                   "each block only its two key blocks")
    return (f"causal sliding-window attention on {len(cases)} inputs; on the longest the largest tensor "
            f"you built was {B * H * L * L // largest[-1]} times smaller than the full scores")


# --- 12.5.3: linear attention that forgets ---------------------------------------------------

def _decayed(q, k, v, gamma, *, phi=True, decay_z=True, include_now=True):
    """Decayed causal linear attention by its explicit weights, right and typically wrong."""
    fq, fk = (F.elu(q) + 1, F.elu(k) + 1) if phi else (q, k)
    L = q.shape[-2]
    i = torch.arange(L, dtype=q.dtype)
    lag = i[:, None] - i[None, :]                                          # (L, L): i - j
    visible = (lag >= 0) if include_now else (lag >= 1)
    decay = torch.where(visible, gamma ** lag.clamp_min(0), torch.zeros(()))
    scores = (fq @ fk.T) * decay                                           # (L, L)
    num = scores @ v
    den = (fq @ fk.T) * (decay if decay_z else visible.to(q.dtype))
    return num / den.sum(-1, keepdim=True)


def _decay_cases(draw) -> list[Case]:
    sizes = [(12, 4, 3, 1.0), (12, 4, 3, 0.8), (draw.int(5, 15), draw.int(2, 6), draw.int(1, 5), 0.5),
             (1, 2, 2, 0.9),
             (draw.int(5, 15), draw.int(2, 6), draw.int(1, 5), round(draw.uniform(0.3, 0.99), 3))]
    cases = []
    for L, D, Dv, gamma in sizes:
        q, k, v = draw.randn(L, D), draw.randn(L, D), draw.randn(L, Dv)
        cases.append(Case((q, k, v, gamma), shapes(q=q, k=k, v=v) + f", gamma={gamma:g}"))
    return cases


def _now(out, case, fn):
    q, k, v, g = case.args
    if q.shape[0] > 1 and close(out[1:], _decayed(q, k, v, g, include_now=False)[1:]):
        return ("add token t to the state before reading it: position t attends to itself as well as "
                "to the past")
    return None


@check("12.5 exercise 3: linear attention that forgets")
def decayed_linear_attention(fn, draw):
    cases = _decay_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args[2].shape, f"decayed_linear_attention({case.text})")
               for case in cases]
    judge(outputs, cases, _decayed, compared="the decayed causal linear attention of the exercise",
          mistakes=[("queries and keys go through the feature map (elu plus one) first: raw dot products "
                     "can be negative", lambda q, k, v, g: _decayed(q, k, v, g, phi=False)),
                    ("the normaliser must decay with the state: otherwise the weights of the past no longer "
                     "sum to one", lambda q, k, v, g: _decayed(q, k, v, g, decay_z=False)),
                    ("gamma changed nothing: what is already in the state must shrink by gamma at every "
                     "step, not the new token's term", lambda q, k, v, g: _decayed(q, k, v, 1.0)),
                    ("the weights of the past fall twice as fast as they should: the state shrinks by gamma "
                     "once per step", lambda q, k, v, g: _decayed(q, k, v, g ** 2))],
          properties=[lambda out, case: _now(out, case, fn)])
    return (f"with gamma = 1 causal linear attention, with gamma < 1 the past fading step by step, on "
            f"{len(cases)} inputs")


# --- 12.5.4: predict how fast the Performer's error falls ------------------------------------

FEATURE_COUNTS = (16, 64, 256, 1024)     # exercise 12.5.4: m, four times apart
EXPONENT_TOLERANCE = 0.1
SMALL_SCALE, LARGE_SCALE = 0.25, 1.0     # queries and keys drawn as scale * N(0, I)


def performer_error(scale: float, *, features=FEATURE_COUNTS, length: int = 64,
                    head_dim: int = 16, draws: int = 16) -> list[float]:
    """The share of attention `performer_attention` misplaces (total-variation distance of
    its implied rows from exact attention's, averaged over the rows) for each number of
    random features m, averaged over ``draws`` fixed feature draws; on fixed seeded queries
    and keys ``scale * N(0, I)`` of shape (length, head_dim), in float64. Deterministic."""
    g = torch.Generator().manual_seed(0)
    q, k = (scale * torch.randn(1, 1, length, head_dim, generator=g, dtype=torch.float64)
            for _ in range(2))
    eye = torch.eye(length, dtype=torch.float64)[None, None]           # V = I: the weights
    exact = naive_attention(q, k, eye)[0, 0]                           # (L, L)
    errors = []
    for m in features:
        misplaced = [0.5 * (performer_attention(q, k, eye, num_features=m, generator=1000 + d)[0, 0]
                            - exact).abs().sum(-1).mean().item() for d in range(draws)]
        errors.append(sum(misplaced) / draws)
    return errors


def measured_error_exponent(scale: float) -> float:
    """The fitted p of error ~ m^p over `FEATURE_COUNTS` (`performer_error`)."""
    return fit_power_law(FEATURE_COUNTS, performer_error(scale))[0]


@check("12.5 exercise 4: predict how fast the Performer's error falls", drawn=False)
def performer_error_exponent(fn, draw):
    guess = expect_number(fn(), "an exponent p, for an error that falls as m^p")
    small = expect(measured_error_exponent(SMALL_SCALE))
    if abs(guess - small) <= EXPONENT_TOLERANCE:
        large = measured_error_exponent(LARGE_SCALE)
        return (f"your exponent is within {EXPONENT_TOLERANCE} of the one measured on small queries and "
                f"keys (m = 16 to 1024); on inputs four times larger the error falls "
                f"{small / large:.1f} times more slowly: the rule for averages needs estimates whose "
                "relative spread is small, and the peaked attention of the series is not such a case")
    if abs(guess) <= EXPONENT_TOLERANCE:
        raise Hint("on small inputs the error does fall with m: each feature gives an unbiased estimate "
                   "of the softmax kernel, and the Performer averages m of them")
    if guess > 0:
        raise Hint("more features give a smaller error here, so the exponent is negative")
    if abs(guess + 1) <= EXPONENT_TOLERANCE:
        raise Hint("yours is the exponent at which the variance of an average of m independent estimates "
                   "falls, but the attention misplaced is not a variance")
    raise Hint(f"your exponent is more than {EXPONENT_TOLERANCE} from the measured one: how does the "
               "spread of an average of m independent estimates shrink as m grows?")
