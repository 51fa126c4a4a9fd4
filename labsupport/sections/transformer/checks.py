"""Self-checks for the exercises of 12.2 The Transformer Architecture."""
from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...checks.core import (
    Case,
    Hint,
    check,
    close,
    expect_number,
    expect_tensor,
    judge,
    same_number,
    shapes,
    times,
)

BLOCK_LIBRARIES = ("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerEncoder",
                   "torch.nn.TransformerDecoderLayer", "torch.nn.Transformer", "torch.nn.MultiheadAttention")


def _ffn_cases(draw) -> list[Case]:
    """x (B, L, d) with d_ff > d, d_ff < d, and d_ff = d (untransposed weights then run)."""
    d1 = draw.int(3, 7)
    sizes = [(3, 5, d1, draw.int(d1 + 1, 12)), (1, 1, draw.int(5, 9), draw.int(2, 4)),
             (2, draw.int(2, 7), d1, d1), (draw.int(1, 3), draw.int(2, 7), draw.int(2, 9), draw.int(2, 12))]
    cases = []
    for B, L, d, d_ff in sizes:
        x, w1, b1 = draw.randn(B, L, d), draw.randn(d_ff, d), draw.randn(d_ff)
        w2, b2 = draw.randn(d, d_ff), draw.randn(d)
        cases.append(Case((x, w1, b1, w2, b2), shapes(x=x, W1=w1, b1=b1, W2=w2, b2=b2)))
    return cases


def _depends_only_on_its_position(fn):
    def prop(out, case):
        x, *weights = case.args
        if x.shape[1] < 2:
            return None
        alone = fn(x[:, 1:2], *weights)                               # position 1 on its own
        here = out[:, 1:2]
        if isinstance(alone, torch.Tensor) and alone.shape == here.shape and not close(alone, here):
            return (f"on {case.text}, the output at position 1 changed when the other positions were "
                    "left out: the output at a position must depend only on that position's input")
        return None
    return prop


@check("12.2 exercise 1: the feed-forward network")
def feed_forward(fn, draw):
    cases = _ffn_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args[0].shape, f"feed_forward({case.text})") for case in cases]
    lin = lambda x, w, b: x @ w.T + b                                              # noqa: E731
    mistakes = [("without the nonlinearity the two layers collapse into one linear map: apply relu "
                 "between them", lambda x, w1, b1, w2, b2: lin(lin(x, w1, b1), w2, b2)),
                ("add the biases b1 and b2", lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T) @ w2.T),
                ("add the second bias b2", lambda x, w1, b1, w2, b2: torch.relu(lin(x, w1, b1)) @ w2.T),
                ("add the first bias b1, inside the relu",
                 lambda x, w1, b1, w2, b2: lin(torch.relu(x @ w1.T), w2, b2)),
                ("that is GELU; this network's nonlinearity is relu",
                 lambda x, w1, b1, w2, b2: lin(F.gelu(lin(x, w1, b1)), w2, b2)),
                ("the output passes through relu too; only the hidden layer does: "
                 "relu(x W1^T + b1) W2^T + b2",
                 lambda x, w1, b1, w2, b2: torch.relu(lin(torch.relu(lin(x, w1, b1)), w2, b2))),
                ("the bias b1 is added after the relu; it belongs inside: relu(x W1^T + b1)",
                 lambda x, w1, b1, w2, b2: lin(torch.relu(x @ w1.T) + b1, w2, b2)),
                ("the weights are stored as (out_features, in_features), like nn.Linear: x @ W1.T, "
                 "not x @ W1 (they only ran because d_ff = d there)",
                 lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2 + b2)]
    judge(outputs, cases, lambda x, w1, b1, w2, b2: lin(torch.relu(lin(x, w1, b1)), w2, b2),
          compared="relu(x W1^T + b1) W2^T + b2", mistakes=mistakes,
          properties=[_depends_only_on_its_position(fn)])
    return (f"on {len(cases)} sizes (d_ff above, below and equal to d), each position's output "
            "depending on that position alone")


def _trained_looking(block, g) -> None:
    """LayerNorm scales and shifts away from their initial 1 and 0, each norm its own:
    at their initial values every LayerNorm is the same function."""
    with torch.no_grad():
        for norm in (block.norm1, block.norm2):
            norm.weight.copy_(1 + 0.5 * torch.randn(norm.weight.shape, generator=g, dtype=norm.weight.dtype))
            norm.bias.copy_(0.5 * torch.randn(norm.bias.shape, generator=g, dtype=norm.bias.dtype))


def _block(d_model, n_heads, d_ff, draw, *, norm_first=True):
    from ...layers import TransformerBlock
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(draw.rng.getrandbits(62))
        block = TransformerBlock(d_model, n_heads, d_ff, norm_first=norm_first).double().eval()
    _trained_looking(block, draw.generator())
    return block


def _block_cases(draw) -> list[Case]:
    sizes = [(2, 5, 8, 2, 16), (1, draw.int(1, 6), 6, 3, draw.int(4, 12)),
             (draw.int(1, 3), draw.int(2, 7), 4, 1, 8)]
    cases = []
    for B, L, d, H, d_ff in sizes:
        block = _block(d, H, d_ff, draw)
        x = draw.randn(B, L, d)
        cases.append(Case((x, block.attn, block.ff, block.norm1, block.norm2),
                          f"x {tuple(x.shape)}, a block of width {d}, {H} heads, d_ff {d_ff} (LayerNorm "
                          "scales and shifts not at their initial values)"))
    return cases


def _pre_norm(x, attn, ff, n1, n2):
    x = x + attn(n1(x))
    return x + ff(n2(x))


@check("12.2 exercise 2: a pre-norm block", forbid=BLOCK_LIBRARIES)
def pre_norm_block(fn, draw):
    cases = _block_cases(draw)
    with torch.no_grad():
        outputs = [expect_tensor(fn.on(case), case.args[0].shape,
                                 f"pre_norm_block({case.text.split(',')[0]}, ...)")
                   for case in cases]
        mistakes = [("that is post-norm (normalise after adding); pre-norm normalises each sub-layer's "
                     "input", lambda x, a, f, n1, n2: (lambda h: n2(h + f(h)))(n1(x + a(x)))),
                    ("keep the residual connections: add each sub-layer's output to its input",
                     lambda x, a, f, n1, n2: f(n2(a(n1(x))))),
                    ("keep the second residual connection: x + ff(norm2(x)), with x after attention",
                     lambda x, a, f, n1, n2: f(n2(x + a(n1(x))))),
                    ("normalise the feed-forward input too: ff(norm2(x))",
                     lambda x, a, f, n1, n2: (lambda h: h + f(h))(x + a(n1(x)))),
                    ("norm1 and norm2 are swapped: norm1 goes before attention, norm2 before the "
                     "feed-forward network", lambda x, a, f, n1, n2: _pre_norm(x, a, f, n2, n1)),
                    ("the feed-forward input is norm1's output; it has its own LayerNorm, norm2",
                     lambda x, a, f, n1, n2: _pre_norm(x, a, f, n1, n1)),
                    ("the two sub-layers run side by side on x; the feed-forward network reads the "
                     "output of the attention step: x = x + attn(norm1(x)), then x + ff(norm2(x))",
                     lambda x, a, f, n1, n2: x + a(n1(x)) + f(n2(x)))]
        judge(outputs, cases, _pre_norm, compared="x + attn(norm1(x)), then + ff(norm2(x))",
              mistakes=mistakes)
    return f"on {len(cases)} blocks whose two LayerNorms differ, each norm in its place"


class _Mixer(nn.Module):
    """Sequence models with known peeking, mapping (B, L, C) to (B, L, C) or (B, L, 2)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):                                        # x (B, L, C)
        L = x.shape[1]
        if self.kind == "causal":                                # the running mean: no peeking
            return x.cumsum(1) / torch.arange(1, L + 1, dtype=x.dtype)[:, None]
        if self.kind == "causal, 2 outputs":                     # a causal projection to 2 channels
            return torch.tanh(x.cumsum(1))[..., :2] * 3
        if self.kind == "next step":                             # out[t] reads x[t + 1]
            later = torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], dim=1)
            return x + later
        return x + x.mean(1, keepdim=True)                       # "mixes": every output reads all


_MODELS = {"causal": "a causal model (the running mean)",
           "causal, 2 outputs": "a causal model with 2 output channels",
           "next step": "a model whose output at t reads x[t + 1] only",
           "mixes": "a model that mixes the whole sequence"}


def _peek_cases(draw) -> list[tuple]:
    """(kind, L, t, does it peek): each model, t = 0 and t = L - 1 (nothing after it) among them."""
    L1, L2 = draw.int(6, 12), draw.int(4, 10)
    return [("causal", L1, draw.int(1, L1 - 2), False), ("mixes", L1, draw.int(1, L1 - 2), True),
            ("causal", L2, 0, False), ("mixes", L2, L2 - 2, True),
            ("next step", L1, draw.int(0, L1 - 2), True),
            ("causal, 2 outputs", L2, draw.int(1, L2 - 2), False), ("mixes", L1, L1 - 1, False),
            ("next step", L2, L2 - 1, False)]


@check("12.2 exercise 3: a test for peeking")
def peeks(fn, draw):
    verdicts = []
    for kind, L, t, truth in _peek_cases(draw):
        x = draw.randn(2, L, 3, dtype=torch.float32)
        got = fn(_Mixer(kind), x, t, case=f"{_MODELS[kind]}, x {tuple(x.shape)}, t={t}")
        if not isinstance(got, (bool, np.bool_)):
            raise Hint(f"return True or False (a bool), got {type(got).__name__}")
        verdicts.append((kind, L, t, truth, bool(got)))
    wrong = [v for v in verdicts if v[3] != v[4]]
    if not wrong:
        return (f"catches a model that reads the future and passes one that does not, on {len(verdicts)} "
                "models and times (t = 0 and t = L - 1 among them)")
    if len(wrong) == len(verdicts):
        raise Hint("the verdicts are inverted: return True when the outputs up to t DO change")
    kind, L, t, truth, _ = wrong[0]
    if t == L - 1:
        raise Hint(f"{_MODELS[kind]}, L = {L}, was flagged at t = L - 1 = {t}: there is no input after "
                   "the last position, so nothing can peek; compare only outputs up to t, out[:, : t + 1]")
    if not truth:
        raise Hint(f"{_MODELS[kind]} was flagged at t = {t}: its outputs up to t do not depend on the "
                   "inputs after t, but later outputs and the input at t itself do: change only inputs "
                   "strictly after t (x[:, t + 1:]) and compare only outputs up to t (out[:, : t + 1])")
    raise Hint(f"{_MODELS[kind]} was not caught at t = {t}: perturb every input after t, x[:, t + 1:] "
               "(x[:, t + 1] included), and compare out[:, : t + 1] (out[:, t] included) before and after")


HEADS_SIZES = dict(batch=2, length=512, d_model=64)      # exercise 12.2.4
HEADS_TOLERANCE = 0.05


def heads_peak_model(batch, length, d_model, n_heads, element=4):
    """The byte model of the peak of ``MultiHeadAttention(d_model, n_heads, kernel="naive")``
    on x (batch, length, d_model) without gradients: the q, k, v projections, then each
    head's scores and softmax weights alive together, and the output."""
    projections = 3 * batch * length * d_model
    scores = 2 * batch * n_heads * length * length
    return (projections + scores + batch * length * d_model) * element


@functools.lru_cache(maxsize=None)
def measured_heads_peaks(batch, length, d_model, heads=(1, 4)):
    """{H: measured forward peak in bytes} of ``MultiHeadAttention(d_model, H,
    kernel="naive")`` on float32 x (batch, length, d_model) without gradients, on the CPU
    (`labsupport.timing.peak_memory`: the allocator's exact peak); the byte model where the
    platform cannot measure, with ``measured=False``. Returns (peaks, measured)."""
    from ...layers import MultiHeadAttention
    from ...timing import peak_memory

    x = torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(0))
    peaks, measured = {}, True
    for n_heads in heads:
        with torch.random.fork_rng(devices=[]):
            mha = MultiHeadAttention(d_model, n_heads, kernel="naive").eval()
        with torch.no_grad():
            peak = peak_memory(mha, x)
        if peak is None:
            peak, measured = heads_peak_model(batch, length, d_model, n_heads), False
        peaks[n_heads] = peak
    return peaks, measured


@check("12.2 exercise 4: predict the memory of four heads", drawn=False)
def heads_peak_ratio(fn, draw):
    guess = expect_number(fn(), "a ratio (a number such as 2.5)")
    peaks, measured = measured_heads_peaks(**HEADS_SIZES)
    ratio = peaks[4] / peaks[1]
    where = "the measured ratio" if measured else "the byte model's ratio (this platform cannot measure)"
    near = lambda target, tol=HEADS_TOLERANCE: abs(guess / target - 1) <= tol   # noqa: E731
    if guess <= 0:
        raise Hint("a ratio of two peaks is a positive number: peak with 4 heads / peak with 1 head")
    if near(ratio):
        return f"your prediction is within {HEADS_TOLERANCE:.0%} of {where}"
    if near(1):
        raise Hint("the q, k, v projections are indeed the same for any number of heads, but each "
                   "head keeps its own (B, L, L) score matrix and its softmax weights: 4 heads hold "
                   "4 of each")
    if near(4):
        raise Hint("the score matrices grow 4x, but the q, k, v projections, (B, L, d) each, are "
                   "the same for any number of heads and are alive at the peak too: add them to "
                   "both peaks before you divide")
    if near(1 / ratio) or near(0.25):
        raise Hint("that is 1 head over 4 heads: divide the peak with 4 heads by the peak with 1")
    if near(16):
        raise Hint("each head's score matrix is L x L whatever its width d/H: 4 heads hold 4 of "
                   "them, not 16")
    raise Hint(f"your prediction is {times(guess / ratio, HEADS_TOLERANCE)} times {where}; count the "
               "bytes alive at the "
               "peak: q, k and v (the same for any H), and each head's scores and softmax weights")


def _block_count_cases(draw) -> list[Case]:
    if draw.graded:
        sizes = []
        for _ in range(4):
            H = draw.int(1, 8)
            sizes.append((H * draw.int(1, 12), H, draw.int(1, 200)))
    else:
        sizes = [(64, 4, 128), (32, 8, 32), (16, 1, 64), (24, 3, 40)]
    return [Case(size, "block_parameters({}, {}, {})".format(*size)) for size in sizes]


def _block_count(d_model, n_heads, d_ff):
    from ...layers import TransformerBlock
    with torch.random.fork_rng(devices=[]):
        return sum(p.numel() for p in TransformerBlock(d_model, n_heads, d_ff).parameters())


@check("12.2 exercise 5: counting a block's parameters", forbid=BLOCK_LIBRARIES)
def block_parameters(fn, draw):
    cases = _block_count_cases(draw)
    outputs = [expect_number(fn.on(case), "a number of parameters") for case in cases]
    right = lambda d, h, f: 4 * (d * d + d) + 2 * d * f + f + d + 4 * d            # noqa: E731
    mistakes = [("every nn.Linear has a bias: four in attention, two in the MLP",
                 lambda d, h, f: 4 * d * d + 2 * d * f + 4 * d),
                ("count the two LayerNorms (a scale and a shift of size d_model each)",
                 lambda d, h, f: right(d, h, f) - 4 * d),
                ("a LayerNorm has a shift as well as a scale: 2 d_model parameters each",
                 lambda d, h, f: right(d, h, f) - 2 * d),
                ("the heads share the d_model x d_model projections; more heads do not add parameters",
                 lambda d, h, f: right(d, h, f) + (h - 1) * 4 * (d * d + d)),
                ("attention has four projections: q, k, v and the output",
                 lambda d, h, f: right(d, h, f) - (d * d + d))]
    judge(outputs, cases, _block_count, compared="the parameters of TransformerBlock(d_model, n_heads, d_ff)",
          same=same_number, mistakes=mistakes)
    return f"the count of TransformerBlock's parameters, on {len(cases)} sizes and numbers of heads"
