"""Self-checks for the exercises of 12.5 Efficient and Sparse Attention."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ...attention import local_attention, naive_attention, performer_attention
from ...checks.core import Case, Draw, Hint, check, close, expect_number, expect_tensor, judge, shapes
from ...timing import fit_power_law

PROPERTY_SEED = 2              # 12.5.1's fixed inputs for the Monte Carlo property
SPARSE = ("torch.nn.attention.flex_attention",)          # its block masks build the band for you
KERNELIZED = ()


def _features(x, w, *, norm=True, sqrt_m=True, half=True, by_m=False):
    """Positive random features, right and typically wrong, in float64."""
    square = x.pow(2).sum(-1, keepdim=True)
    log = x @ w.T - ((square / 2 if half else square) if norm else 0.0)
    return torch.exp(log) / (w.shape[0] if by_m else math.sqrt(w.shape[0]) if sqrt_m else 1.0)


def _feature_cases(draw) -> list[Case]:
    sizes = [(5, 4, 7), (draw.int(1, 4), draw.int(5, 9), 2), (1, 3, draw.int(8, 16)),
             (draw.int(2, 6), 1, draw.int(3, 9))]
    cases = []
    for N, D, m in sizes:
        x, w = draw.randn(N, D, scale=0.3), draw.randn(m, D)
        cases.append(Case((x, w), shapes(x=x, w=w)))
    return cases


@check("12.5 exercise 1: positive random features", forbid=KERNELIZED)
def positive_features(fn, draw):
    cases = _feature_cases(draw)
    outputs = [expect_tensor(fn.on(case), (case.args[0].shape[0], case.args[1].shape[0]),
                             f"positive_features({case.text})") for case in cases]

    def positive(out, case):
        return ("the features must be positive (exponentials): sin/cos features can make the attention "
                "normaliser negative") if bool((out <= 0).any()) else None
    judge(outputs, cases, _features, compared="exp(w x - |x|^2 / 2) / sqrt(m)",
          mistakes=[("divide by sqrt(m): then phi(x) . phi(y) is the average of the m features' products, "
                     "not their sum", lambda x, w: _features(x, w, sqrt_m=False)),
                    ("divide by sqrt(m), not by m: phi(x) . phi(y) then averages the m products",
                     lambda x, w: _features(x, w, by_m=True)),
                    ("subtract |x|^2 / 2 in the exponent: E[exp(w.x) exp(w.y)] is exp(|x + y|^2 / 2), and "
                     "the two corrections turn it into exp(x . y)", lambda x, w: _features(x, w, norm=False)),
                    ("subtract |x|^2 / 2 in the exponent: E[exp(w.x) exp(w.y)] is exp(|x + y|^2 / 2), and "
                     "the two corrections turn it into exp(x . y)",
                     lambda x, w: _features(x, w, norm=False, sqrt_m=False)),
                    ("subtract half of |x|^2, not all of it: exp(w x - |x|^2 / 2)",
                     lambda x, w: _features(x, w, half=False))],
          properties=[positive])
    # the property the formula is for: an unbiased estimate of the softmax kernel, on fixed
    # inputs (a Monte Carlo bound holds for a draw, not for every draw; these are 2% off)
    fixed = Draw(PROPERTY_SEED)
    x, w_big = fixed.randn(5, 4, scale=0.3), fixed.randn(20000, 4)
    phi = fn(x, w_big, case=f"x {tuple(x.shape)}, w (20000, 4)")
    estimate = phi @ phi.T                                                  # (N, N)
    if not torch.allclose(estimate.double(), torch.exp(x @ x.T), rtol=0.05):
        raise Hint("with 20,000 Gaussian features, phi(x) . phi(y) should be within 5% of "
                   "exp(x . y); check the formula")
    return (f"phi(x) = exp(w x - |x|^2 / 2) / sqrt(m) on {len(cases)} sizes; with 20,000 features "
            "phi(x) . phi(y) is within 5% of exp(x . y)")


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


@check("12.5 exercise 2: local attention through SDPA, block by block", forbid=SPARSE)
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
                    "mask must also hide keys j > i (the future)")
        return None
    judge(outputs, cases, lambda q, k, v, block: local_attention(q, k, v, window=block, is_causal=True),
          compared="local_attention(window=block, is_causal=True)", same=lambda a, b: close(a, b, tol=1e-5),
          mistakes=[("this is full causal attention: each query may see only the `block` keys before it "
                     "and itself", lambda q, k, v, block: naive_attention(q, k, v, is_causal=True)),
                    ("each block must also see the block before it: the first query of a block needs the "
                     "`block` keys that precede it",
                     lambda q, k, v, block: _blocks_wrong(q, k, v, block, previous=False, band=False)),
                    ("mask the band inside the two blocks: query i sees keys i - block .. i, not the whole "
                     "previous block", lambda q, k, v, block: _blocks_wrong(q, k, v, block, band=False)),
                    ("the window holds block + 1 keys, i - block .. i inclusive; yours stops one short",
                     lambda q, k, v, block: _blocks_wrong(q, k, v, block, width=block - 1))],
          properties=[future])
    q, k, v, block = cases[-1].args
    B, H, L, _ = q.shape
    if largest[-1] >= B * H * L * L:
        raise Hint(f"the values are right, but on {cases[-1].text} a tensor of {largest[-1]} elements "
                   f"was built, as big as the full (L, L) scores ({B * H * L * L}): cut q into blocks "
                   "and give each block only its two key blocks")
    return (f"equal to local_attention(window=block, is_causal=True) on {len(cases)} inputs; on "
            f"{cases[-1].text} the largest tensor had {largest[-1]} elements, against {B * H * L * L} "
            "for the full scores")


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


@check("12.5 exercise 3: linear attention with a decay, as a recurrence", forbid=KERNELIZED)
def decayed_linear_attention(fn, draw):
    cases = _decay_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args[2].shape, f"decayed_linear_attention({case.text})")
               for case in cases]
    judge(outputs, cases, _decayed, compared="S_t = gamma S_{t-1} + phi(k_t) v_t^T, z_t = gamma z_{t-1} + "
          "phi(k_t), out_t = phi(q_t)^T S_t / phi(q_t)^T z_t",
          mistakes=[("apply the feature map phi(x) = elu(x) + 1 to queries and keys first; raw dot "
                     "products can be negative", lambda q, k, v, g: _decayed(q, k, v, g, phi=False)),
                    ("decay the normaliser z as well as S: otherwise the weights no longer sum to one",
                     lambda q, k, v, g: _decayed(q, k, v, g, decay_z=False)),
                    ("gamma changed nothing: multiply the old state by gamma at every step, "
                     "S_t = gamma S_{t-1} + phi(k_t) v_t^T, not the new token's term",
                     lambda q, k, v, g: _decayed(q, k, v, 1.0)),
                    ("key j's weight should be gamma^(t - j); yours is gamma^(2 (t - j))",
                     lambda q, k, v, g: _decayed(q, k, v, g ** 2))],
          properties=[lambda out, case: _now(out, case, fn)])
    return (f"gamma = 1 gives causal linear attention, gamma < 1 weights key j by gamma^(t - j), on "
            f"{len(cases)} inputs")


def _now(out, case, fn):
    q, k, v, g = case.args
    if q.shape[0] > 1 and close(out[1:], _decayed(q, k, v, g, include_now=False)[1:]):
        return ("add token t to the state before reading it: position t attends to itself as well as "
                "to the past")
    return None


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
    small = measured_error_exponent(SMALL_SCALE)
    if abs(guess - small) <= EXPONENT_TOLERANCE:
        large = measured_error_exponent(LARGE_SCALE)
        return (f"your exponent is within {EXPONENT_TOLERANCE} of the one measured on small queries "
                f"and keys (0.25 N(0, I), m = 16 to 1024); at four times their size the same fit gives "
                f"{large:+.2f}, a much slower fall: the Monte Carlo rule needs estimates whose relative "
                "variance is small")
    if abs(guess) <= EXPONENT_TOLERANCE:
        raise Hint("on small inputs the error does fall with m: the features' estimates of exp(q . k) "
                   "are unbiased, and m of them are averaged")
    if guess > 0:
        raise Hint("more features must give a smaller error: the exponent is negative")
    if abs(guess + 1) <= EXPONENT_TOLERANCE:
        raise Hint("1/m is how the variance of an average of m independent estimates falls; the "
                   "error is of the size of a standard deviation, its square root")
    raise Hint(f"your exponent {guess:+.2f} is more than {EXPONENT_TOLERANCE} from the measured one: "
               "how does the spread of an average of m independent estimates shrink with m?")
