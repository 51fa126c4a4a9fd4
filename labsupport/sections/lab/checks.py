"""Self-checks of the lab's exercises, one per step's core: patching (`patch_tokens`), attention
from PyTorch's weights (`attention`), the sinusoidal encoding (`sinusoidal_encoding`), the
forecaster's forward pass (`forecast`), the bill of a training step (`step_peak`) and causal
linear attention (`causal_linear_attention`).

Every check runs the answer on several inputs (fixed in the notebook, new in the graded test),
names the usual mistakes in words when the answer makes one, and otherwise says where and by
how much it differs, never the expected value or the solution's code (tests/test_hints.py
feeds each the wrong answers of tests/wrong_answers/lab.py).
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from ...checks.core import Case, Hint, check, expect_number, expect_tensor, judge, recognise, shapes, times
from . import reference

__all__ = ["patch_tokens", "attention", "sinusoidal_encoding", "forecast", "step_peak",
           "causal_linear_attention", "measured_step_peak"]

ATTENTION_LIBRARIES = ("torch.nn.functional.scaled_dot_product_attention",
                       "torch.nn.functional.multi_head_attention_forward")


def _nan_hint(what: str, out: torch.Tensor, why: str) -> None:
    if not bool(torch.isfinite(out).all()):
        bad = tuple((~torch.isfinite(out)).nonzero()[0].tolist())
        raise Hint(f"{what} holds NaN or inf (first at index {bad}): {why}")


# --- Step 1: patches ------------------------------------------------------------------------------

def _patch_cases(draw) -> list[Case]:
    """x (B, L): L a multiple of P, L with a remainder (which must go from the oldest end), one
    patch, a patch of one hour."""
    sizes = [(2, 24, 6), (3, 26, 8), (1, 9, 9), (2, 7, 1)]
    if draw.graded:
        p1, p2, one = draw.int(2, 6), draw.int(3, 7), draw.int(3, 8)
        sizes = [(draw.int(1, 3), p1 * draw.int(2, 5), p1),
                 (draw.int(1, 3), p2 * draw.int(2, 4) + draw.int(1, p2 - 1), p2),
                 (1, draw.int(4, 9), 1), (draw.int(1, 2), one, one)]
    cases = []
    for B, L, P in sizes:
        x = torch.arange(B * L, dtype=torch.float64).view(B, L) + draw.randn(B, L, scale=0.01)
        cases.append(Case((x, P), f"x {(B, L)}, patch_len={P}"))
    return cases


def _start_aligned(x, P):
    N = x.shape[-1] // P
    return x[..., :N * P].reshape(*x.shape[:-1], N, P)


@check("Lab step 1: patches", unavailable=("labsupport.data.patchify",))
def patch_tokens(fn, draw):
    cases = _patch_cases(draw)
    outputs = []
    for case in cases:
        x, P = case.args
        B, L = x.shape
        out = fn.on(case)
        N = L // P
        if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, L - P + 1, P) and L - P + 1 != N:
            raise Hint(f"on {case.text} your patches overlap, one starting at every hour; the tokens "
                       "are non-overlapping patches, each hour in one of them")
        if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, -(-L // P), P) and L % P:
            raise Hint(f"on {case.text} you made one patch more than fit: the oldest hours that do not "
                       "fill a whole patch are dropped, not padded")
        if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, P, N) and P != N:
            raise Hint(f"on {case.text} your tokens come out as (B, patch_len, N); a token is a patch, "
                       "so the result is (B, N, patch_len): N tokens of patch_len hours each")
        outputs.append(expect_tensor(out, (B, N, P), f"your tokens of {case.text}"))
    judge(outputs, cases, reference.patch_tokens, compared="the window cut into whole patches, the newest "
          "hour last", same=lambda a, b: isinstance(a, torch.Tensor) and a.shape == b.shape
          and torch.equal(a.double(), b.double()),
          mistakes=[("your patches start at the oldest hour and drop the newest hours that do not fill "
                     "a patch; the newest hour is what the forecast starts from, so align the patches "
                     "to the end of the window and drop the oldest hours instead", _start_aligned),
                    ("your tokens are in reverse order, the newest first; keep the order of time, the "
                     "newest patch last", lambda x, P: reference.patch_tokens(x, P).flip(-2)),
                    ("each of your patches holds hours that lie N apart: a patch is a run of "
                     "consecutive hours", lambda x, P: x[..., x.shape[-1] % P:].reshape(
                        *x.shape[:-1], P, x.shape[-1] // P).movedim(-1, -2)),
                    ("the hours inside each patch are reversed; keep them in the order of time",
                     lambda x, P: reference.patch_tokens(x, P).flip(-1))])
    return f"on {len(cases)} windows, a length that is not a multiple of the patch among them"


# --- Step 1: attention from PyTorch's weights -------------------------------------------------------

WEIGHTS_ONLY = ("compute the attention from the module's weights (in_proj_weight, in_proj_bias, "
                "out_proj) with your own scaled dot-product attention: calling the module runs "
                "PyTorch's, which is what your function is compared with")


class _WeightsOnly(nn.MultiheadAttention):
    """PyTorch's attention module whose own forward refuses to run: an answer must use its weights."""

    def forward(self, *args, **kwargs):
        raise Hint(WEIGHTS_ONLY)


def _mha(d: int, H: int, draw) -> nn.MultiheadAttention:
    """A float64 module in eval mode with every weight and bias drawn (PyTorch starts the biases at
    zero, which would hide a forgotten bias)."""
    mha = _WeightsOnly(d, H, batch_first=True, dtype=torch.float64).eval()
    g = draw.generator()
    with torch.no_grad():
        for p in mha.parameters():
            scale = 0.5 if p.dim() == 1 else d ** -0.5
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return mha


def _torch_attention(x, mha, causal=False):
    """What PyTorch's module computes (its boolean mask is True where attention is blocked)."""
    N = x.shape[1]
    blocked = _future(N) if causal else None
    return nn.MultiheadAttention.forward(mha, x, x, x, attn_mask=blocked, need_weights=False)[0]


def _future(n: int) -> torch.Tensor:
    """PyTorch's boolean mask of the future (True: blocked)."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def _attention_variant(x, mha, causal=False, *, scale=None, axis=-1, out_proj=True, in_bias=True,
                       out_bias=True, split="heads", blocked=_future, always=False, keys_first=False):
    """The attention of `reference.attention` with one of the usual mistakes."""
    B, N, d = x.shape
    H = mha.num_heads
    bias = mha.in_proj_bias if in_bias else None
    q, k, v = F.linear(x, mha.in_proj_weight, bias).chunk(3, dim=-1)
    if split == "heads":
        q, k, v = (t.view(B, N, H, d // H).transpose(1, 2) for t in (q, k, v))
    else:                                                              # the reshape without the transpose
        q, k, v = (t.reshape(B, H, N, d // H) for t in (q, k, v))
    scale = (d // H) ** -0.5 if scale is None else scale(d, H)
    scores = (k @ q.transpose(-2, -1) if keys_first else q @ k.transpose(-2, -1)) * scale
    mask = blocked(N) if causal or always else None
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    out = scores.softmax(dim=axis) @ v
    out = out.transpose(1, 2).reshape(B, N, d) if split == "heads" else out.reshape(B, N, d)
    if not out_proj:
        return out
    return F.linear(out, mha.out_proj.weight, mha.out_proj.bias if out_bias else None)


def _attention_cases(draw) -> list[Case]:
    sizes = [(2, 6, 8, 2, False), (2, 6, 8, 2, True), (1, 5, 12, 3, True), (3, 1, 4, 1, True),
             (1, 7, 6, 1, False)]
    if draw.graded:
        sizes = [(draw.int(1, 3), draw.int(3, 8), 4 * h, h, draw.choice((False, True))) for h in (2, 3)]
        sizes += [(draw.int(1, 3), draw.int(3, 9), 6, draw.choice((2, 3)), True), (2, 1, 8, 2, True),
                  (1, draw.int(3, 7), 5, 1, False)]
    cases = []
    for B, N, d, H, causal in sizes:
        x, mha = draw.randn(B, N, d), _mha(d, H, draw)
        cases.append(Case((x, mha, causal), f"x {(B, N, d)}, {H} head{'s' * (H > 1)}, causal={causal}"))
    return cases


@check("Lab step 1: attention from PyTorch's weights", forbid=ATTENTION_LIBRARIES,
       unavailable=("torch.nn.MultiheadAttention.forward", *ATTENTION_LIBRARIES))
def attention(fn, draw):
    cases = _attention_cases(draw)
    with torch.no_grad():
        outputs = []
        for case in cases:
            out = fn.on(case)
            if isinstance(out, tuple):
                raise Hint("return the attention's output tensor only, not a tuple")
            out = expect_tensor(out, case.args[0].shape, f"your attention on {case.text}", finite=False)
            _nan_hint(f"your attention on {case.text}", out, "a query whose every key is masked gives NaN: "
                      "with causal=True each token attends to itself and to the tokens before it")
            outputs.append(out)
        past = lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)              # noqa: E731
        mistakes = [
            ("your scores are not scaled: divide them by the square root of the head's width, as "
             "PyTorch does", dict(scale=lambda d, H: 1.0)),
            ("you scaled by the square root of the model's width; each head's scores are scaled by the "
             "square root of its own width, d_model / heads", dict(scale=lambda d, H: d ** -0.5)),
            ("you divided by the head's width itself; the scale is its square root",
             dict(scale=lambda d, H: 1 / (d // H))),
            ("your softmax runs over the queries; each query's weights form a distribution over the keys",
             dict(axis=-2)),
            ("the output projection is missing: the heads' outputs, joined, go through out_proj",
             dict(out_proj=False)),
            ("the input projection's bias is missing: in_proj_bias belongs to the queries, keys and values",
             dict(in_bias=False)),
            ("the output projection's bias is missing", dict(out_bias=False)),
            ("your heads are cut from the wrong axis: give each head its own slice of the features at every "
             "token, then put the heads before the tokens", dict(split="reshape")),
            ("your scores compare each key with every query the wrong way round: row i of the weights "
             "belongs to query i", dict(keys_first=True)),
            ("with causal=False every token attends to every token; your mask blocks the future "
             "anyway", dict(always=True)),
            ("your causal mask blocks the past and keeps the future: token i attends to the tokens "
             "before it and to itself", dict(blocked=past)),
        ]
        if any(c.args[2] for c in cases):
            mistakes.append(("with causal=True token i may not attend to the tokens after it; your answer "
                             "lets every token attend to every token", dict(blocked=lambda n: None)))
        judge(outputs, cases, _torch_attention,
              compared="PyTorch's multi-head attention with the same weights",
              mistakes=[(hint, functools.partial(_attention_variant, **kw)) for hint, kw in mistakes])
    return (f"= PyTorch's multi-head attention on {len(cases)} inputs (one head and several, one "
            "token, causal and not)")


# --- Step 2: the sinusoidal encoding ---------------------------------------------------------------

def _sinusoidal(n, d, *, pair=2, interleave=True, first="sin", start=0, base=10000.0, cos=True):
    position = torch.arange(start, start + n, dtype=torch.float64)[:, None]
    frequency = base ** (-torch.arange(0, d, 2, dtype=torch.float64) * pair / 2 / d)
    angle = position * frequency                                               # (N, d/2)
    a, b = (torch.sin(angle), torch.cos(angle) if cos else torch.sin(angle))
    if first == "cos":
        a, b = b, a
    if interleave:
        return torch.stack([a, b], dim=-1).reshape(n, d)
    return torch.cat([a, b], dim=-1)


def _encoding_cases(draw) -> list[Case]:
    sizes = [(14, 8), (1, 4), (50, 16), (7, 2), (30, 64)]
    if draw.graded:
        sizes = [(draw.int(5, 40), 2 * draw.int(2, 12)), (1, 2 * draw.int(1, 4)), (draw.int(40, 90), 32),
                 (draw.int(2, 9), 2), (draw.int(10, 30), 2 * draw.int(13, 40))]
    return [Case(size, f"n_tokens={size[0]}, d_model={size[1]}") for size in sizes]


@check("Lab step 2: the sinusoidal encoding",
       unavailable=("labsupport.positional.sinusoidal_encoding", "labsupport.positional.sinusoidal_features"))
def sinusoidal_encoding(fn, draw):
    cases = _encoding_cases(draw)
    outputs = []
    for case in cases:
        n, d = case.args
        out = fn.on(case)
        if isinstance(out, torch.Tensor) and tuple(out.shape) == (d, n) and n != d:
            raise Hint(f"on {case.text} your table is (d_model, n_tokens); it has one row per token: "
                       "(n_tokens, d_model)")
        outputs.append(expect_tensor(out, (n, d), f"your table for {case.text}"))
    judge(outputs, cases, reference.sinusoidal_encoding, compared="the sinusoidal table of Section 12.3",
          same=lambda a, b: isinstance(a, torch.Tensor) and a.shape == b.shape
          and torch.allclose(a.double(), b.double(), atol=1e-5),
          mistakes=[("sine and cosine are swapped: the even columns hold the sines, the odd ones the cosines",
                     lambda n, d: _sinusoidal(n, d, first="cos")),
                    ("your sines fill the first half of the columns and the cosines the second; they "
                     "alternate, a sine and its cosine side by side",
                     lambda n, d: _sinusoidal(n, d, interleave=False)),
                    ("your frequencies fall twice as slowly as they should: the exponent of column pair i "
                     "counts the columns before it, two per pair", lambda n, d: _sinusoidal(n, d, pair=1)),
                    ("your positions start at one; the first token is position zero",
                     lambda n, d: _sinusoidal(n, d, start=1)),
                    ("every column is a sine; the odd columns hold the cosines of the same angles",
                     lambda n, d: _sinusoidal(n, d, cos=False)),
                    ("your frequencies rise along the columns; they fall, from one at the first pair to "
                     "about one ten-thousandth at the last", lambda n, d: _sinusoidal(n, d, base=1e-4))])
    return f"on {len(cases)} sizes, one token and a width of two among them"


# --- Step 3: the forecaster's forward pass ------------------------------------------------------------

PARTS_ONLY = ("compute the forecast from the model's parts (embed, pos, encoder, head) and your "
              "patch_tokens: calling the model runs the book's forward pass, which is what yours is "
              "compared with")


def _refuse(model, x):
    raise Hint(PARTS_ONLY)


def _forecaster(L: int, P: int, d: int, T: int, draw):
    """A float64 LabForecaster in eval mode, its positions and LayerNorms away from their initial
    values, whose own forward refuses to run."""
    from .racers import LabForecaster
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(draw.rng.getrandbits(62))
        model = LabForecaster(lookback=L, horizon=T, patch_len=P, d_model=d, n_heads=2, n_layers=2,
                              dropout=0.0, revin=False).double().eval()
    g = draw.generator()
    with torch.no_grad():
        model.pos.copy_(torch.randn(model.pos.shape, generator=g, dtype=torch.float64))
        for name, p in model.encoder.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0)
                        + 0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    model.forward_fn = _refuse
    return model


def _forecast_cases(draw) -> list[Case]:
    sizes = [(2, 48, 8, 8, 5), (3, 30, 6, 4, 3), (1, 27, 6, 8, 2), (2, 12, 12, 4, 4)]
    if draw.graded:
        p = draw.int(3, 8)
        sizes = [(draw.int(1, 3), p * draw.int(3, 6), p, 2 * draw.int(2, 4), draw.int(2, 6)),
                 (draw.int(1, 3), 6 * draw.int(3, 5) + draw.int(1, 5), 6, 4, draw.int(2, 5)),
                 (1, 9, 9, 4, 3), (draw.int(2, 3), 4 * draw.int(3, 7), 4, 6, 1)]
    cases = []
    for B, L, P, d, T in sizes:
        model, x = _forecaster(L, P, d, T, draw), draw.randn(B, L, 1)
        cases.append(Case((model, x), f"x {(B, L, 1)}, patches of {P}, width {d}, horizon {T}"))
    return cases


def _forecast_variant(model, x, *, positions=True, causal=True, read="last", align="end"):
    cut = reference.patch_tokens if align == "end" else _start_aligned
    tokens = model.embed(cut(x[..., 0], model.patch_len))
    if positions:
        tokens = tokens + model.pos[:tokens.shape[1]]
    encoded = model.encoder(tokens, is_causal=causal)
    feature = {"last": encoded[:, -1], "first": encoded[:, 0], "mean": encoded.mean(1)}[read]
    return model.head(feature).unsqueeze(-1)


@check("Lab step 3: the forecaster's forward pass",
       unavailable=("labsupport.sections.lab.reference.forecast",
                    "labsupport.models.PatchTransformer.forward"))
def forecast(fn, draw):
    cases = _forecast_cases(draw)
    with torch.no_grad():
        outputs = []
        for case in cases:
            model, x = case.args
            out = fn.on(case)
            B, T = x.shape[0], model.horizon
            if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, T):
                raise Hint(f"on {case.text} your forecast is (B, horizon); the forecaster returns "
                           "(B, horizon, 1), one channel, like the window it reads")
            out = expect_tensor(out, (B, T, 1), f"your forecast on {case.text}", finite=False)
            _nan_hint("your forecast", out, "the encoder's mask means True where a token may attend "
                      "(SDPA's convention), and a token with no key left to attend to gives NaN; for a "
                      "causal encoder pass is_causal=True and no mask")
            outputs.append(out)
        variant = lambda **kw: functools.partial(_forecast_variant, **kw)         # noqa: E731
        judge(outputs, cases, reference.forecast, compared="the forward pass of the brief's PatchTransformer",
              mistakes=[("the learned positions are missing: add the model's pos row of each token to its "
                         "embedding before the encoder", variant(positions=False)),
                        ("your encoder is not causal: the forecaster's tokens attend only to themselves "
                         "and the tokens before them", variant(causal=False)),
                        ("you read the forecast off the oldest token; the head reads the newest one, "
                         "the token that has seen every other", variant(read="first")),
                        ("you averaged the tokens; the head reads the newest token only",
                         variant(read="mean")),
                        ("your patches start at the oldest hour and lose the newest hours; align them to "
                         "the end of the window (does your patch_tokens pass its check?)",
                         variant(align="start"))])
    return (f"= the book's forward pass on {len(cases)} windows and models (a window that is not a "
            "whole number of patches among them)")


# --- Step 4: predict the peak memory of a training step, then measure it ---------------------------

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
                 "more (B, H, N, N) matrices are alive beside them: what does the backward pass of one "
                 "layer create?", matrices(lambda n: n)),
                ("close: that is the peak of the forward pass; the backward pass of a layer creates "
                 "matrices of its own beside every layer's kept weights", matrices(lambda n: n + 1)),
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


# --- Step 5: causal linear attention ----------------------------------------------------------------

def _phi(x):
    return F.elu(x) + 1


def _linear_variant(q, k, v, *, feature=_phi, causal=True, normalise=True, values=False):
    fq, fk = feature(q), feature(k)
    v = feature(v) if values else v
    if causal:
        S = (fk.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(-3)
        z = fk.cumsum(-2)
        num, den = (fq.unsqueeze(-1) * S).sum(-2), (fq * z).sum(-1, keepdim=True)
    else:
        num, den = fq @ (fk.transpose(-2, -1) @ v), fq @ fk.sum(-2).unsqueeze(-1)
    return num / den if normalise else num


def _linear_cases(draw) -> list[Case]:
    sizes = [((2, 3), 6, 4, 4), ((1, 2), 9, 5, 3), ((2,), 1, 4, 6), ((), 12, 8, 8)]
    if draw.graded:
        sizes = [((draw.int(1, 3), draw.int(1, 4)), draw.int(4, 12), draw.int(2, 8), draw.int(2, 8)),
                 ((draw.int(1, 3),), draw.int(5, 20), 4, draw.other(2, 9, 4)), ((1, 2), 1, draw.int(2, 6), 3),
                 ((), draw.int(10, 30), draw.int(4, 10), draw.int(4, 10))]
    cases = []
    for batch, N, D, Dv in sizes:
        q, k, v = draw.randn(*batch, N, D), draw.randn(*batch, N, D), draw.randn(*batch, N, Dv)
        cases.append(Case((q, k, v), shapes(q=q, k=k, v=v)))
    return cases


@check("Lab step 5: causal linear attention", forbid=ATTENTION_LIBRARIES,
       unavailable=("labsupport.attention.linear_attention",
                    "labsupport.attention.linear_attention_recurrent",
                    "labsupport.attention.kernelized.linear_attention", *ATTENTION_LIBRARIES))
def causal_linear_attention(fn, draw):
    cases = _linear_cases(draw)
    outputs = []
    for case in cases:
        q, k, v = case.args
        out = expect_tensor(fn.on(case), (*q.shape[:-1], v.shape[-1]), f"your output on {case.text}",
                            finite=False)
        _nan_hint("your output", out, "the first token's sums hold its own key and value: token i's sums "
                  "run over the keys up to and including i, and elu plus one is positive, so the "
                  "normaliser never vanishes")
        outputs.append(out)
    exact = lambda q, k, v: torch.softmax(                                          # noqa: E731
        (q @ k.transpose(-2, -1)).masked_fill(_future(q.shape[-2]), float("-inf")) / q.shape[-1] ** 0.5,
        -1) @ v
    judge(outputs, cases, reference.causal_linear_attention, compared="causal linear attention with the "
          "feature map elu plus one",
          mistakes=[("your attention is not causal: token i's sums run over the keys up to i, not over all",
                     functools.partial(_linear_variant, causal=False)),
                    ("the normaliser is missing: divide by the query's features dotted with the running "
                     "sum of the keys' features, so the weights sum to one",
                     functools.partial(_linear_variant, normalise=False)),
                    ("your feature map is the exponential; the task's is elu plus one",
                     functools.partial(_linear_variant, feature=torch.exp)),
                    ("your feature map is relu; the task's is elu plus one, which is positive everywhere",
                     functools.partial(_linear_variant, feature=torch.relu)),
                    ("your feature map is elu without the one: it can be negative, so the weights can be too",
                     functools.partial(_linear_variant, feature=F.elu)),
                    ("the values go through the feature map too; only the queries and keys do",
                     functools.partial(_linear_variant, values=True)),
                    ("that is exact softmax attention; the exercise replaces the exponential of the scores "
                     "by a product of features, so that the sums can run along the tokens", exact)])
    return f"on {len(cases)} inputs (one token, no batch axes and Dv != D among them)"
