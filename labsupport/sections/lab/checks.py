"""Self-checks for the lab's own steps (steps 1 and 2 reuse the checks of 12.1 under the
lab's labels: ``checks.attention_weights(fn, label="Lab step 1: ...")``)."""
from __future__ import annotations

import functools

import torch
from torch import nn

from ...checks.core import Case, Hint, check, expect_number, expect_tensor, judge, recognise, shapes, times
from . import reference

# --- step 3: the causal Transformer block, from PyTorch's parts ------------------------------

PARTS_ONLY = ("build the block from the layer's parts (norm1, self_attn, norm2, linear1, activation, "
              "linear2): calling the layer, or its _sa_block and _ff_block, is what the exercise asks "
              "you to write")


class _PartsOnly(nn.TransformerEncoderLayer):
    """PyTorch's pre-norm encoder layer whose own forward passes refuse to run: an answer
    must assemble the block from the layer's parts."""

    def forward(self, *args, **kwargs):
        raise RuntimeError(PARTS_ONLY)

    def _sa_block(self, *args, **kwargs):
        raise RuntimeError(PARTS_ONLY)

    def _ff_block(self, *args, **kwargs):
        raise RuntimeError(PARTS_ONLY)


def _layer(d_model: int, n_heads: int, d_ff: int, draw) -> nn.TransformerEncoderLayer:
    """A float64 pre-norm layer in eval mode, its two LayerNorms away from their initial
    values (each its own), as after training."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(draw.rng.getrandbits(62))
        layer = _PartsOnly(d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True,
                           dtype=torch.float64).eval()
    g = draw.generator()
    with torch.no_grad():
        for norm in (layer.norm1, layer.norm2):
            norm.weight.copy_(1 + 0.5 * torch.randn(norm.weight.shape, generator=g, dtype=torch.float64))
            norm.bias.copy_(0.5 * torch.randn(norm.bias.shape, generator=g, dtype=torch.float64))
    return layer


def _block_cases(draw) -> list[Case]:
    sizes = [(2, 6, 8, 2, 16), (1, draw.int(2, 7), 12, 3, draw.int(5, 20)),
             (draw.int(1, 3), draw.int(3, 9), 4, 1, 8)]
    cases = []
    for B, N, d, H, d_ff in sizes:
        layer, x = _layer(d, H, d_ff, draw), draw.randn(B, N, d)
        cases.append(Case((x, layer), f"x {tuple(x.shape)}, a layer of width {d}, {H} heads, d_ff {d_ff}"))
    return cases


def _blocked(N: int, *, causal: bool = True, flip: bool = False) -> torch.Tensor | None:
    """nn.MultiheadAttention's boolean mask (True: blocked): the future, or its mirror image."""
    if not causal:
        return None
    future = torch.ones(N, N, dtype=torch.bool).triu(1)
    return ~future if flip else future


def _block(x, layer, *, mask=_blocked, pre=True, residual=(True, True), ff_norm=True, act=True):
    """The causal pre-norm block and its usual mistakes, from ``layer``'s parts."""
    blocked = mask(x.shape[1]) if callable(mask) else mask

    def attend(h):
        return layer.self_attn(h, h, h, attn_mask=blocked, need_weights=False)[0]

    def ff(h):
        h = layer.linear1(h)
        return layer.linear2(layer.activation(h) if act else h)

    if not pre:                                                    # post-norm
        x = layer.norm1(x + attend(x))
        return layer.norm2(x + ff(x))
    a = attend(layer.norm1(x))
    x = x + a if residual[0] else a
    f = ff(layer.norm2(x) if ff_norm else x)
    return x + f if residual[1] else f


@check("Lab step 3: the causal Transformer block",
       forbid=("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerEncoder",
               "torch.nn.functional.multi_head_attention_forward"))
def causal_block(fn, draw):
    cases = _block_cases(draw)
    with torch.no_grad():
        outputs = []
        for case in cases:
            out = fn.on(case)
            if isinstance(out, tuple):
                raise Hint("return the block's output tensor only: nn.MultiheadAttention returns "
                           "(output, weights), so take [0] of what self_attn returns")
            what = f"causal_block({case.text.split(',')[0]}, layer)"
            out = expect_tensor(out, case.args[0].shape, what, finite=False)
            if not bool(torch.isfinite(out).all()):
                bad = tuple((~torch.isfinite(out)).nonzero()[0].tolist())
                raise Hint(f"{what} holds NaN or inf (first at index {bad}): a token whose attention has "
                           "every key blocked gives NaN. nn.MultiheadAttention's boolean attn_mask is "
                           "True where attention is blocked (the opposite of "
                           "F.scaled_dot_product_attention's): block the future with "
                           "torch.ones(N, N, dtype=torch.bool).triu(1)")
            outputs.append(out)
        mistakes = [("the block must be causal: pass self_attn a mask that blocks the future, "
                     "attn_mask = torch.ones(N, N, dtype=torch.bool).triu(1)",
                     lambda x, layer: _block(x, layer, mask=lambda n: _blocked(n, causal=False))),
                    ("the mask is the wrong way round: nn.MultiheadAttention's boolean attn_mask is True "
                     "where attention is blocked (the opposite of F.scaled_dot_product_attention's), so "
                     "block the future with .triu(1)",
                     lambda x, layer: _block(x, layer, mask=lambda n: _blocked(n, flip=True))),
                    ("that is post-norm (normalise after adding); norm_first=True normalises each "
                     "sub-layer's input: x + self_attn(norm1(x)), then x + ff(norm2(x))",
                     lambda x, layer: _block(x, layer, pre=False)),
                    ("keep the residual connection around attention: x + self_attn(norm1(x))",
                     lambda x, layer: _block(x, layer, residual=(False, True))),
                    ("keep the residual connection around the feed-forward network: x + ff(norm2(x))",
                     lambda x, layer: _block(x, layer, residual=(True, False))),
                    ("normalise the feed-forward input with norm2: ff(norm2(x))",
                     lambda x, layer: _block(x, layer, ff_norm=False)),
                    ("the feed-forward network is linear2(activation(linear1(h))): apply the layer's "
                     "activation between the two linear maps", lambda x, layer: _block(x, layer, act=False))]
        judge(outputs, cases, _block, compared="x + self_attn(norm1(x)) with the future blocked, then "
              "+ linear2(activation(linear1(norm2(x))))", mistakes=mistakes)
    return (f"the causal pre-norm block from the layer's parts, on {len(cases)} layers whose two LayerNorms "
            "differ: x + self_attn(norm1(x)) with the future blocked, then x + ff(norm2(x))")

# --- step 3: the closed-form ridge -----------------------------------------------------------

def _ridge_cases(draw) -> list[Case]:
    """X (N, L), Y (N, T): T < L and T > L, fewer rows than columns, several penalties."""
    sizes = [(40, 6, 3, 0.5), (40, 6, 3, 20.0), (draw.int(15, 40), draw.int(2, 5), draw.int(6, 9), 3.0),
             (draw.int(3, 6), draw.int(7, 10), 2, round(draw.uniform(0.1, 5.0), 3))]
    cases = []
    for N, L, T, penalty in sizes:
        X, Y = draw.randn(N, L), draw.randn(N, T)
        cases.append(Case((X, Y, penalty), shapes(X=X, Y=Y) + f", penalty={penalty:g}"))
    return cases


def _solve(X, Y, extra):
    return torch.linalg.solve(X.T @ X + extra, X.T @ Y)


NO_PENALTY = "that is least squares without the penalty: add penalty * I to X^T X before solving"


def _solved_or_told(fn, case):
    """The answer on ``case``; a solver's "singular" error on fewer rows than columns, where
    only the penalty makes X^T X + penalty I invertible, is the missing penalty."""
    X = case.args[0]
    try:
        return fn.on(case)
    except Hint as hint:
        if len(X) < X.shape[1] and "singular" in str(hint):
            raise Hint(f"{hint} With fewer rows than columns X^T X is singular, and only the "
                       f"penalty makes X^T X + penalty I invertible: {NO_PENALTY}") from None
        raise


@check("Lab step 3: the closed-form ridge", forbid=("sklearn",))
def ridge_weights(fn, draw):
    cases = _ridge_cases(draw)
    outputs = []
    for case in cases:
        X, Y, penalty = case.args
        W = _solved_or_told(fn, case)
        L, T = X.shape[1], Y.shape[1]
        if isinstance(W, torch.Tensor) and tuple(W.shape) == (T, L):
            raise Hint(f"on {case.text} you returned shape {(T, L)}: W maps the {L} inputs to the {T} "
                       f"outputs, Y ~ X @ W, so it is (L, T) = {(L, T)}; solve for W, not for W^T")
        outputs.append(expect_tensor(W, (L, T), f"ridge_weights({case.text})"))
    eye = lambda X: torch.eye(X.shape[1], dtype=X.dtype)                             # noqa: E731
    judge(outputs, cases, reference.ridge_weights, compared="the solution W of (X^T X + penalty I) W = X^T Y",
          mistakes=[(NO_PENALTY, lambda X, Y, p: torch.linalg.lstsq(X, Y).solution),
                    (NO_PENALTY, lambda X, Y, p: _solve(X, Y, 0 * eye(X))),
                    ("the penalty was added to every entry of X^T X; add it on the diagonal only, "
                     "X^T X + penalty * I (torch.eye)", lambda X, Y, p: _solve(X, Y, p)),
                    ("the penalty enters as it is, X^T X + penalty * I, not squared",
                     lambda X, Y, p: _solve(X, Y, p ** 2 * eye(X))),
                    ("the penalty enters as it is, X^T X + penalty * I, not square-rooted",
                     lambda X, Y, p: _solve(X, Y, p ** 0.5 * eye(X))),
                    ("the penalty here is not scaled by the number of rows: X^T X + penalty * I",
                     lambda X, Y, p: _solve(X, Y, len(X) * p * eye(X)))])
    return (f"the minimiser of |X W - Y|^2 + penalty |W|^2, on {len(cases)} inputs and penalties "
            "(fewer rows than columns among them)")


# --- step 4: predict the peak memory of a training step, then measure it ---------------------

STEP_PEAK_CASES = ((2, 4, 512, 1), (2, 4, 512, 3), (3, 2, 384, 2))    # practice: batch, heads, tokens, layers
STEP_PEAK_WIDTH = 8           # d_model of the encoder the check measures: the N x N matrices dominate
STEP_PEAK_TOLERANCE = 0.10


@functools.lru_cache(maxsize=None)
def measured_step_peak(batch: int, heads: int, tokens: int, layers: int,
                       d_model: int = STEP_PEAK_WIDTH) -> int | None:
    """The measured peak bytes of one training step (forward, then backward of the output's
    sum) of a causal `labsupport.layers.TransformerEncoder` with naive attention, in float32
    on the CPU; None where the platform cannot measure it."""
    from ...layers import TransformerEncoder
    from ...timing import peak_memory

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        encoder = TransformerEncoder(d_model, heads, layers, 2 * d_model, kernel="naive")
        x = torch.randn(batch, tokens, d_model)

    def step():
        encoder(x.detach().requires_grad_(), is_causal=True).sum().backward()

    return peak_memory(step)


def _step_cases(draw) -> list[Case]:
    """Graded sizes keep batch * heads * tokens^2 large, where the model holds within 10%."""
    if draw.graded:
        sizes = []
        for layers in (1, draw.int(2, 3), draw.int(1, 3)):
            heads = draw.choice((4, 8))                                  # batch * heads >= 8
            sizes.append((draw.int(8 // heads, 3), heads, draw.int(384, 512), layers))
    else:
        sizes = STEP_PEAK_CASES
    return [Case(size, "predicted_step_peak({}, {}, {}, {})".format(*size)) for size in sizes]


@check("Lab step 4: predict the bill, then measure it", predicts=True)
def step_peak(fn, draw):
    cases = _step_cases(draw)
    guesses = [expect_number(fn.on(case), "a number of bytes") for case in cases]
    where, measured = "the measured peak", [measured_step_peak(*case.args) for case in cases]
    if None in measured:
        measured, where = [reference.predicted_step_peak(*case.args) for case in cases], "the byte model"
    near = lambda a, b, tol=STEP_PEAK_TOLERANCE: abs(a / b - 1) <= tol                # noqa: E731
    if all(near(g, m) for g, m in zip(guesses, measured)):
        return (f"within {STEP_PEAK_TOLERANCE:.0%} of {where} for {len(cases)} sizes of batch, heads "
                "and tokens")
    matrices = lambda count: (lambda B, H, N, n: count(n) * B * H * N * N * 4)          # noqa: E731
    right = reference.predicted_step_peak
    mistakes = [("autograd does not keep every matrix of the forward pass: of a layer's scores, masked "
                 "scores and weights it keeps only what the backward needs, the softmax weights; the "
                 "others are freed once the next one exists", matrices(lambda n: 3 * n)),
                ("autograd does not keep every matrix of the forward pass: of a layer's scores, masked "
                 "scores and weights it keeps only what the backward needs, the softmax weights; the "
                 "others are freed once the next one exists", matrices(lambda n: 2 * n)),
                ("that counts the weights each layer keeps for the backward pass; at the worst moment "
                 "more (B, H, N, N) matrices are alive beside them: in the backward pass of a layer, "
                 "the gradient of its weights and the gradient of its scores", matrices(lambda n: n)),
                ("close: that is the peak of the forward pass; in the backward pass, beside every "
                 "layer's kept weights, a layer's weight gradient and score gradient are alive "
                 "together", matrices(lambda n: n + 1)),
                ("that is one attention call's forward peak (scores and weights); a training step also "
                 "keeps each layer's weights for the backward pass, so the layers count",
                 matrices(lambda n: 2)),
                ("that counts numbers; count bytes: float32 takes 4 bytes per number",
                 lambda B, H, N, n: right(B, H, N, n) / 4),
                ("that is bits; count bytes", lambda B, H, N, n: right(B, H, N, n) * 8),
                ("every batch element and every head has its own N x N matrices: multiply by batch * heads",
                 lambda B, H, N, n: right(1, 1, N, n)),
                ("every head has its own N x N matrices: multiply by the number of heads",
                 lambda B, H, N, n: right(B, 1, N, n)),
                ("every sequence of the batch has its own N x N matrices: multiply by the batch",
                 lambda B, H, N, n: right(1, H, N, n))]
    named = recognise(guesses, cases, mistakes, lambda a, b: near(a, b, 0.05))
    if len(named) == 1:
        raise Hint(named[0])
    first = next(i for i, (g, m) in enumerate(zip(guesses, measured)) if not near(g, m))
    ratio = times(guesses[first] / measured[first], STEP_PEAK_TOLERANCE)
    raise Hint(f"{cases[first].text} is {ratio} times {where}; count the (B, H, N, N) float32 matrices "
               "alive at once: those each layer keeps for the backward pass, and those alive only while "
               "one layer computes")
