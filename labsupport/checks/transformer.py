"""Self-checks for the exercises of 12.2 The Transformer Architecture."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .core import Hint, check, close, expect_number, expect_tensor


def _ffn_weights(d=6, d_ff=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 5, d, generator=g, dtype=torch.float64),
            torch.randn(d_ff, d, generator=g, dtype=torch.float64),
            torch.randn(d_ff, generator=g, dtype=torch.float64),
            torch.randn(d, d_ff, generator=g, dtype=torch.float64),
            torch.randn(d, generator=g, dtype=torch.float64))


@check("12.2 exercise 1: the feed-forward network")
def feed_forward(fn):
    x, w1, b1, w2, b2 = _ffn_weights()
    out = expect_tensor(fn(x, w1, b1, w2, b2), x.shape, "feed_forward(x (3, 5, 6), ...)")
    right = torch.relu(x @ w1.T + b1) @ w2.T + b2
    if close(out, right):
        return "relu(x W1^T + b1) W2^T + b2, the same MLP at every position"
    alone = fn(x[:, 2:3], w1, b1, w2, b2)                      # position 2 on its own
    if isinstance(alone, torch.Tensor) and not close(alone, out[:, 2:3]):
        raise Hint("the output at a position must depend only on that position's input")
    if close(out, (x @ w1.T + b1) @ w2.T + b2):
        raise Hint("without the nonlinearity the two layers collapse into one linear map: "
                   "apply relu between them")
    if close(out, torch.relu(x @ w1.T) @ w2.T):
        raise Hint("add the biases b1 and b2")
    if close(out, torch.relu(x @ w1.T + b1) @ w2.T):
        raise Hint("add the second bias b2")
    raise Hint("weights are stored as (out_features, in_features), like nn.Linear: use x @ W1.T + b1")


def _block(norm_first=True, seed=0):
    torch.manual_seed(seed)
    from ..layers import TransformerBlock
    return TransformerBlock(8, 2, 16, norm_first=norm_first).double().eval()


@check("12.2 exercise 2: a pre-norm block")
def pre_norm_block(fn):
    block = _block()
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        out = expect_tensor(fn(x, block.attn, block.ff, block.norm1, block.norm2), x.shape,
                            "pre_norm_block(x (2, 5, 8), ...)")
        if close(out, block(x)):
            return "x + attn(norm1(x)), then + ff(norm2(x)): the pre-norm block"
        post = _block(norm_first=False)
        post.load_state_dict(block.state_dict())
        if close(out, post(x)):
            raise Hint("that is post-norm (normalise after adding); "
                       "pre-norm normalises each sub-layer's input")
        h = block.attn(block.norm1(x))
        if close(out, block.ff(block.norm2(h))):
            raise Hint("keep the residual connections: add each sub-layer's output to its input")
        if close(out, x + h + block.ff(x + h)):
            raise Hint("normalise the feed-forward input too: ff(norm2(x))")
    raise Hint("compute x = x + attn(norm1(x)), then x = x + ff(norm2(x))")


class _Mixer(nn.Module):
    """Sequence models with known peeking: causal cumulative mean, or a full mean."""

    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, x):                                        # x (B, L, C)
        if self.causal:
            return x.cumsum(1) / torch.arange(1, x.shape[1] + 1)[:, None]
        return x + x.mean(1, keepdim=True)


@check("12.2 exercise 3: a test for peeking")
def peeks(fn):
    x = torch.randn(2, 9, 3, generator=torch.Generator().manual_seed(0))
    verdicts = {}
    for name, model, t in (("causal", _Mixer(True), 4), ("non-causal", _Mixer(False), 4),
                           ("causal", _Mixer(True), 0), ("non-causal", _Mixer(False), 7)):
        got = fn(model, x.clone(), t)
        if not isinstance(got, (bool, np.bool_)):
            raise Hint(f"return True or False (a bool), got {type(got).__name__}")
        verdicts[(name, t)] = bool(got)
    if verdicts[("causal", 4)] or verdicts[("causal", 0)]:
        if not verdicts[("non-causal", 4)]:
            raise Hint("the verdicts are inverted: return True when the outputs up to t DO change")
        raise Hint("a causal model was flagged: change only inputs strictly after t (x[:, t + 1:]) "
                   "and compare only outputs up to t (out[:, : t + 1])")
    if not (verdicts[("non-causal", 4)] and verdicts[("non-causal", 7)]):
        raise Hint("a model that mixes the whole sequence was not caught: perturb x[:, t + 1:] "
                   "and compare out[:, : t + 1] before and after")
    return "catches a model that reads the future and passes one that does not"


HEADS_SIZES = dict(batch=2, length=512, d_model=64)      # exercise 12.2.4
HEADS_TOLERANCE = 0.05


def heads_peak_model(batch, length, d_model, n_heads, element=4):
    """The byte model of the peak of ``MultiHeadAttention(d_model, n_heads, kernel="naive")``
    on x (batch, length, d_model) without gradients: the q, k, v projections, then each
    head's scores and softmax weights alive together, and the output."""
    projections = 3 * batch * length * d_model
    scores = 2 * batch * n_heads * length * length
    return (projections + scores + batch * length * d_model) * element


def measured_heads_peaks(batch, length, d_model, heads=(1, 4)):
    """{H: measured forward peak in bytes} of ``MultiHeadAttention(d_model, H,
    kernel="naive")`` on float32 x (batch, length, d_model) without gradients, on the CPU
    (`labsupport.timing.peak_memory`: the allocator's exact peak); the byte model where the
    platform cannot measure, with ``measured=False``. Returns (peaks, measured)."""
    from ..layers import MultiHeadAttention
    from ..timing import peak_memory

    x = torch.randn(batch, length, d_model, generator=torch.Generator().manual_seed(0))
    peaks, measured = {}, True
    for n_heads in heads:
        mha = MultiHeadAttention(d_model, n_heads, kernel="naive").eval()
        with torch.no_grad():
            peak = peak_memory(mha, x)
        if peak is None:
            peak, measured = heads_peak_model(batch, length, d_model, n_heads), False
        peaks[n_heads] = peak
    return peaks, measured


@check("12.2 exercise 4: predict the memory of four heads")
def heads_peak_ratio(fn):
    guess = expect_number(fn(), "a ratio (a number such as 2.5)")
    peaks, measured = measured_heads_peaks(**HEADS_SIZES)
    ratio = peaks[4] / peaks[1]
    where = "the measured ratio" if measured else "the byte model's ratio (this platform cannot measure)"
    near = lambda target, tol=HEADS_TOLERANCE: abs(guess / target - 1) <= tol   # noqa: E731
    if guess <= 0:
        raise Hint("a ratio of two peaks is a positive number: peak with 4 heads / peak with 1 head")
    if near(ratio):
        return (f"your prediction is within {HEADS_TOLERANCE:.0%} of {where}: the projections are "
                "the same for any number of heads, but each head keeps its own L x L scores and "
                "softmax weights")
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
    raise Hint(f"your prediction is {guess / ratio:.2f} times {where}; count the bytes alive at the "
               "peak: q, k and v (the same for any H), and each head's scores and softmax weights")


@check("Lab step 3: seasonal naive")          # the lab's exercise (12.2 no longer repeats it)
def seasonal_naive(fn):
    x = torch.arange(2 * 10 * 1, dtype=torch.float32).view(2, 10, 1)
    for period, horizon in ((4, 3), (4, 4), (4, 10), (10, 5)):
        expected = torch.stack([x[:, 10 - period + (t % period)] for t in range(horizon)], dim=1)
        got = fn(x, period, horizon)
        call = f"seasonal_naive(x (2, 10, 1), period={period}, horizon={horizon})"
        expect_tensor(got, (2, horizon, 1), call)
        if close(got, expected):
            continue
        shifted = torch.stack([x[:, 9 - period + (t % period)] for t in range(horizon)], dim=1)
        if close(got, shifted):
            raise Hint(f"{call}: off by one: the last period is x[:, -period:], ending at the last step")
        raise Hint(f"{call}: forecast step t should repeat x[:, L - period + (t mod period)]; "
                   "tile the last period when the horizon is longer than it")
    return "repeats the last period, tiled or cut to the horizon"


@check("12.2 exercise 5: counting a block's parameters")
def block_parameters(fn):
    from ..layers import TransformerBlock
    for d_model, n_heads, d_ff in ((64, 4, 128), (32, 8, 32), (16, 1, 64)):
        right = sum(p.numel() for p in TransformerBlock(d_model, n_heads, d_ff).parameters())
        got = expect_number(fn(d_model, n_heads, d_ff), "a number of parameters")
        call = f"block_parameters({d_model}, {n_heads}, {d_ff})"
        if got == right:
            continue
        d = d_model
        if got == right - 4 * d - d_ff - d:
            raise Hint(f"{call}: every nn.Linear has a bias: four in attention, two in the MLP")
        if got == right - 4 * d:
            raise Hint(f"{call}: count the two LayerNorms (a scale and a shift of size d_model each)")
        if n_heads > 1 and got == right + (n_heads - 1) * 4 * (d * d + d):
            raise Hint(f"{call}: the heads share the d_model x d_model projections; "
                       "more heads do not add parameters")
        raise Hint(f"{call} returned {got}, expected {right}")
    return "4 (d^2 + d) attention + 2 d d_ff + d_ff + d MLP + 4 d LayerNorm, independent of the heads"
