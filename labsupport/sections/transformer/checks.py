"""Self-checks for the exercises of 12.2 The Transformer Block.

1. `block_parameters`: a block's parameters counted by hand, against the module's count;
2. `layer_norm`: layer normalisation written by hand, against nn.LayerNorm;
3. `decode_step`: one decoding step of a pre-norm decoder block, a single query over the cache;
4. `scheduled_inputs`: the decoder's inputs under scheduled sampling.

Each names the usual mistakes of its exercise in words (`labsupport.checks.core.judge`), never
the expected value or the solution's code (tests/test_hints.py).
"""
from __future__ import annotations

import torch
from torch import nn

from ...checks.core import Case, Hint, check, expect_number, expect_tensor, judge, same_number, shapes

# PyTorch's blocks compute what the block exercises ask for
BLOCK_LIBRARIES = ("torch.nn.TransformerEncoderLayer", "torch.nn.TransformerEncoder",
                   "torch.nn.TransformerDecoderLayer", "torch.nn.TransformerDecoder", "torch.nn.Transformer")
# ... and PyTorch's normalisations what the layer-norm exercise asks for
NORM_LIBRARIES = ("torch.nn.LayerNorm", "torch.nn.functional.layer_norm", "torch.layer_norm",
                  "torch.nn.GroupNorm", "torch.nn.functional.group_norm", "torch.nn.RMSNorm",
                  "torch.native_layer_norm")


# --- 12.2.1: counting a block's parameters --------------------------------------------------------

def _count_cases(draw) -> list[Case]:
    """(d_model, n_heads, d_ff): d_ff above, equal to and below d_model, one head and several."""
    if draw.graded:
        sizes = []
        for d_ff_factor in (4, 1, 0.5, None):
            H = draw.int(1, 8)
            d = H * draw.int(2, 12)
            sizes.append((d, H, draw.int(2, 300) if d_ff_factor is None else max(1, int(d_ff_factor * d))))
    else:
        sizes = [(64, 4, 256), (32, 8, 32), (16, 1, 64), (24, 3, 12)]
    return [Case(size, "block_parameters({}, {}, {})".format(*size)) for size in sizes]


def block_count(d_model: int, n_heads: int, d_ff: int) -> int:
    """The trainable parameters of the pre-norm block of the page, counted on the module
    (`labsupport.layers.TransformerBlock` holds the same parts)."""
    from ...layers import TransformerBlock
    with torch.random.fork_rng(devices=[]):
        return sum(p.numel() for p in TransformerBlock(d_model, n_heads, d_ff).parameters())


def _linear(n_in, n_out, bias=True):
    return n_in * n_out + (n_out if bias else 0)


def _counted(d, h, f, *, bias=True, projections=4, norms=2, per_norm=2, ff_layers=2, hidden=None, heads=1):
    hidden = f if hidden is None else hidden
    ff = [_linear(d, hidden, bias), _linear(hidden, d, bias)][:ff_layers]
    return heads * projections * _linear(d, d, bias) + sum(ff) + norms * per_norm * d


@check("12.2 exercise 1: counting a block's parameters", predicts=True, forbid=BLOCK_LIBRARIES,
       unavailable=("labsupport.layers.TransformerBlock",))
def block_parameters(fn, draw):
    cases = _count_cases(draw)
    outputs = [expect_number(fn.on(case), "a number of parameters") for case in cases]
    mistakes = [("your count leaves out the biases: every linear map of the block has one, as "
                 "PyTorch's linear layers do by default", lambda d, h, f: _counted(d, h, f, bias=False)),
                ("your count leaves out the two LayerNorms: their scales and shifts are trained too",
                 lambda d, h, f: _counted(d, h, f, norms=0)),
                ("your count gives each LayerNorm one vector; it has two, a learned scale and a "
                 "learned shift, one number per feature each", lambda d, h, f: _counted(d, h, f, per_norm=1)),
                ("your count grows with the number of heads: the heads split the same projections "
                 "between them, so more heads add no parameters",
                 lambda d, h, f: _counted(d, h, f, heads=h)),
                ("your count has three projections in attention; there are four: queries, keys, values "
                 "and the output map that mixes the heads", lambda d, h, f: _counted(d, h, f, projections=3)),
                ("your count has one linear map in the feed-forward network; it has two, into the "
                 "hidden layer and back", lambda d, h, f: _counted(d, h, f, ff_layers=1)),
                ("your feed-forward network's hidden layer has d_model units; it has d_ff",
                 lambda d, h, f: _counted(d, h, f, hidden=d))]
    judge(outputs, cases, block_count, compared="the parameters of the block, counted on the module",
          same=same_number, mistakes=mistakes)
    return (f"your count matches the module's on {len(cases)} blocks (feed-forward wider, as wide and "
            "narrower than the model, one head and several)")


# --- 12.2.2: layer normalisation by hand -------------------------------------------------------

def _trained_looking(norms, g) -> None:
    """LayerNorm scales and shifts away from their initial 1 and 0, each norm its own: at their
    initial values every LayerNorm is the same function, and a swap would go unseen."""
    with torch.no_grad():
        for norm in norms:
            norm.weight.copy_(1 + 0.5 * torch.randn(norm.weight.shape, generator=g, dtype=norm.weight.dtype))
            norm.bias.copy_(0.5 * torch.randn(norm.bias.shape, generator=g, dtype=norm.bias.dtype))


def _seeded(draw, build, *args, **kwargs):
    """``build(*args, **kwargs)`` in float64, eval mode, its weights drawn from ``draw``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(draw.rng.getrandbits(62))
        return build(*args, **kwargs).double().eval()


def _norm_cases(draw) -> list[Case]:
    """Tokens of several widths and batch shapes, trained-looking scales and shifts; one case
    holds a token whose features are all equal, one a large eps, one a wide scale of values."""
    g = draw.generator()
    shapes_ = [(2, 5, 8), (draw.int(2, 6), draw.int(3, 12)), (1, 3, draw.int(2, 4), 16)]
    cases = []
    for n, shape in enumerate(shapes_):
        d = shape[-1]
        x = draw.randn(*shape, scale=(1.0, 3.0, 40.0)[n]) + (0.0, 5.0, -2.0)[n]
        if n == 0:
            x[0, 1] = 3.0                                        # every feature equal
        weight = 1 + 0.5 * torch.randn(d, generator=g, dtype=torch.float64)
        bias = 0.5 * torch.randn(d, generator=g, dtype=torch.float64)
        eps = (1e-5, 0.1, 1e-5)[n]
        what = ("a token whose features are all equal among them" if n == 0 else
                "eps=0.1" if n == 1 else "values of a few tens")
        cases.append(Case((x, weight, bias), f"x {tuple(shape)} ({what})", {"eps": eps}))
    return cases


def _layer_norm(x, weight, bias, eps=1e-5, *, unbiased=False, eps_outside=False, over=(-1,), affine=True,
                swapped=False, shift_first=False):
    """LayerNorm over ``over`` and the usual ways to write it wrong (the reference: the defaults)."""
    mean = x.mean(over, keepdim=True)
    var = x.var(over, keepdim=True, unbiased=unbiased)
    scaled = (x - mean) / (var.sqrt() + eps if eps_outside else (var + eps).sqrt())
    if not affine:
        return scaled
    w, b = (bias, weight) if swapped else (weight, bias)
    return (scaled + b) * w if shift_first else scaled * w + b


@check("12.2 exercise 2: layer normalisation by hand", forbid=NORM_LIBRARIES)
def layer_norm(fn, draw):
    cases = _norm_cases(draw)
    outputs = []
    for n, case in enumerate(cases):
        what = f"layer_norm({case.text.split(' (')[0]}, ...)"
        out = expect_tensor(fn.on(case), case.args[0].shape, what, finite=False)
        if n == 0 and isinstance(out, torch.Tensor):
            rest = torch.ones_like(out, dtype=torch.bool)
            rest[0, 1] = False                                   # all but the token of equal features
            if torch.isfinite(out[rest]).all() and not torch.isfinite(out[0, 1]).all():
                raise Hint("on the token whose features are all equal your output is not finite: its "
                           "spread is zero, and LayerNorm keeps the division finite there; read the "
                           "exercise again")
        outputs.append(expect_tensor(out, case.args[0].shape, what))
    mistakes = [("your output differs from LayerNorm's by a factor that depends only on the number of "
                 "features: look at what your variance divides the sum of squares by",
                 lambda x, w, b, eps: _layer_norm(x, w, b, eps, unbiased=True)),
                ("your eps is added to the standard deviation; LayerNorm adds it where the exercise says",
                 lambda x, w, b, eps: _layer_norm(x, w, b, eps, eps_outside=True)),
                ("you normalised each feature over the positions: each token's output now changes when "
                 "another token changes", lambda x, w, b, eps: _layer_norm(x, w, b, eps, over=(-2,))),
                ("you normalised over the whole tensor at once: a token's output changes when another token "
                 "changes",
                 lambda x, w, b, eps: _layer_norm(x, w, b, eps, over=tuple(range(x.dim())))),
                ("your output is normalised but not scaled and shifted: it is the same whatever weight and "
                 "bias it is given", lambda x, w, b, eps: _layer_norm(x, w, b, eps, affine=False)),
                ("the weight and the bias are swapped: on the token of equal features your output is the "
                 "weight",
                 lambda x, w, b, eps: _layer_norm(x, w, b, eps, swapped=True)),
                ("you shifted before you scaled: on the token of equal features your output is the "
                 "bias times the weight", lambda x, w, b, eps: _layer_norm(x, w, b, eps, shift_first=True))]
    judge(outputs, cases, _layer_norm, compared="nn.LayerNorm with the same weight, bias and eps",
          mistakes=mistakes)
    return (f"on {len(cases)} inputs of {len(cases)} shapes (a token of equal features and a large eps "
            "among them), the same as nn.LayerNorm")


# --- 12.2.3: one decoding step ---------------------------------------------------------------------

_QUERIES: list[tuple[str, int]] = []        # (which attention, how many queries) of the last calls


class _Logged(nn.Module):
    """An attention layer with the page's signature, ``attn(x, context=None, mask=None)`` (mask:
    True = may attend), that notes how many queries each call asks about."""

    def __init__(self, mha, kind: str):
        super().__init__()
        self.mha, self.kind = mha, kind

    def forward(self, x, context=None, mask=None):
        _QUERIES.append((self.kind, x.shape[1]))
        return self.mha(x, context, mask=mask)


class DecoderParts(nn.Module):
    """A pre-norm decoder block under the names of the page's ``DecoderBlock``: ``ln1``,
    ``self_attn``, ``ln2``, ``cross_attn``, ``ln3``, ``ff``; called as ``block(x, memory)`` it
    runs the whole causal pass. Built on `labsupport.layers.DecoderBlock`'s parts."""

    def __init__(self, block):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = block.norms
        self.self_attn, self.cross_attn = _Logged(block.self_attn, "self"), _Logged(block.cross_attn, "cross")
        self.ff = block.ff

    def forward(self, x, memory):
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()
        x = x + self.self_attn(self.ln1(x), mask=mask)
        x = x + self.cross_attn(self.ln2(x), memory)
        return x + self.ff(self.ln3(x))


def full_pass_last(parts, x, memory):
    """The block's whole causal pass, its last position: what one step must give. (B, 1, d)"""
    return parts(x, memory)[:, -1:]


def _step(parts, x, memory, *, keys="normalised", mask=False, cross="memory", residual=(1, 1, 1),
          norms=(0, 1, 2)):
    """One step and its usual wrong variants."""
    ln = (parts.ln1, parts.ln2, parts.ln3)
    last = x[:, -1:]
    seen = {"normalised": ln[norms[0]](x), "raw": x, "itself": ln[norms[0]](last)}[keys]
    allowed = torch.ones(1, seen.shape[1], dtype=torch.bool).tril() if mask else None
    h = residual[0] * last + parts.self_attn(ln[norms[0]](last), seen, mask=allowed)
    if cross != "none":
        context = memory if cross == "memory" else None
        h = residual[1] * h + parts.cross_attn(ln[norms[1]](h), context)
    return residual[2] * h + parts.ff(ln[norms[2]](h))


def _decode_cases(draw) -> list[Case]:
    from ...layers import DecoderBlock
    sizes = [(2, 6, 5, 8, 2, 16), (1, draw.int(2, 9), draw.int(2, 7), 6, 3, 12), (2, 1, 4, 4, 1, 8),
             (draw.int(1, 3), draw.int(3, 9), draw.int(1, 6), 8, 4, draw.int(4, 20))]
    cases = []
    for B, t, S, d, H, d_ff in sizes:
        block = _seeded(draw, DecoderBlock, d, H, d_ff)
        _trained_looking(block.norms, draw.generator())
        parts = DecoderParts(block).double().eval()
        x, memory = draw.randn(B, t, d), draw.randn(B, S, d)
        cases.append(Case((parts, x, memory), f"x {tuple(x.shape)} (t = {t} inputs so far), memory "
                          f"{tuple(memory.shape)}, a block of width {d} with {H} heads"))
    return cases


@check("12.2 exercise 3: one decoding step", forbid=BLOCK_LIBRARIES,
       unavailable=("labsupport.layers.DecoderBlock.forward",))
def decode_step(fn, draw):
    cases = _decode_cases(draw)
    outputs = []
    with torch.no_grad():
        for case in cases:
            _, x, _ = case.args
            B, t, d = x.shape
            _QUERIES.clear()
            out = fn.on(case)
            asked = list(_QUERIES)
            if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, t, d) and t > 1:
                raise Hint(f"on {case.text}: you returned every position, shape {(B, t, d)}: the step "
                           f"returns the output at the new position only, shape {(B, 1, d)}")
            what = f"decode_step(block, {case.text.split(' (')[0]}, ...)"
            outputs.append(expect_tensor(out, (B, 1, d), what))
            many = [(kind, n) for kind, n in asked if n > 1]
            if many:
                kind, n = many[0]
                which = "self-attention" if kind == "self" else "cross-attention"
                raise Hint(f"on {case.text}, your answer asked {which} about {n} queries, every position "
                           "so far: a step needs the new position's query only (the outputs at earlier "
                           "positions are known already)")
        none = dict(residual=(0, 1, 1))
        mistakes = [("the new position attended only to itself: its self-attention reads every position "
                     "so far, the cached ones and its own", lambda p, x, m: _step(p, x, m, keys="itself")),
                    ("the keys and values were the inputs before the first LayerNorm: in a pre-norm block "
                     "self-attention reads the normalised inputs at every position",
                     lambda p, x, m: _step(p, x, m, keys="raw")),
                    ("with a single query, the causal mask's first row lets it see the first position "
                     "only; the newest position may see every position so far",
                     lambda p, x, m: _step(p, x, m, mask=True)),
                    ("the step left out cross-attention: the new position reads the encoder's memory "
                     "too", lambda p, x, m: _step(p, x, m, cross="none")),
                    ("cross-attention read the decoder's own state; its keys and values come from the "
                     "encoder's memory", lambda p, x, m: _step(p, x, m, cross="self")),
                    ("a residual connection is missing: each sub-layer's output is added to what flowed "
                     "into it", lambda p, x, m: _step(p, x, m, **none)),
                    ("a residual connection is missing: each sub-layer's output is added to what flowed "
                     "into it", lambda p, x, m: _step(p, x, m, residual=(1, 0, 1))),
                    ("a residual connection is missing: each sub-layer's output is added to what flowed "
                     "into it", lambda p, x, m: _step(p, x, m, residual=(1, 1, 0))),
                    ("the LayerNorms are out of place: the first goes before self-attention, the second "
                     "before cross-attention, the third before the feed-forward network",
                     lambda p, x, m: _step(p, x, m, norms=(0, 2, 1))),
                    ("the LayerNorms are out of place: the first goes before self-attention, the second "
                     "before cross-attention, the third before the feed-forward network",
                     lambda p, x, m: _step(p, x, m, norms=(1, 0, 2)))]
        judge(outputs, cases, full_pass_last, compared="the last position of the block's full causal pass",
              mistakes=mistakes)
    return (f"on {len(cases)} blocks and caches (t = 1 among them), one query per attention, the same "
            "output as the whole causal pass at the new position")


# --- 12.2.4: scheduled sampling's inputs -----------------------------------------------------------

def _sampled(last, truth, forecasts, sample):
    chosen = torch.where(sample[..., None], forecasts, truth)           # (B, T, C): each hour's value
    return torch.cat([last, chosen[:, :-1]], dim=1)                     # step t reads hour t - 1


def _sampling_cases(draw) -> list[Case]:
    sizes = [(2, 6, 1), (3, draw.int(4, 9), 2), (1, draw.int(3, 8), 1), (draw.int(2, 4), 24, 1)]
    cases = []
    for B, T, C in sizes:
        last, truth, forecasts = draw.randn(B, 1, C), draw.randn(B, T, C), draw.randn(B, T, C)
        sample = torch.rand(B, T, generator=draw.generator()) < 0.5
        sample[0, 0], sample[0, 1] = True, False                         # both kinds in every case
        cases.append(Case((last, truth, forecasts, sample),
                          shapes(last=last, truth=truth, forecasts=forecasts, sample=sample)))
    return cases


@check("12.2 exercise 4: scheduled sampling's inputs")
def scheduled_inputs(fn, draw):
    cases = _sampling_cases(draw)
    outputs = [expect_tensor(fn.on(case), case.args[1].shape, f"scheduled_inputs({case.text})")
               for case in cases]
    shift = lambda last, values: torch.cat([last, values[:, :-1]], dim=1)     # noqa: E731
    mistakes = [("the leak: step t reads the value of hour t, the very hour it must forecast (a causal "
                 "mask cannot stop a leak in the inputs); step t reads the hour before it",
                 lambda w, y, f, s: torch.where(s[..., None], f, y)),
                ("the choice is inverted: where sample is True, that hour is fed as the model's "
                 "forecast", lambda w, y, f, s: _sampled(w, f, y, s)),
                ("every step read the true values, whatever sample says: that is teacher forcing",
                 lambda w, y, f, s: shift(w, y)),
                ("every step read the model's forecasts, whatever sample says: that is free running",
                 lambda w, y, f, s: shift(w, f)),
                ("the first step's input is not the last value of the input window",
                 lambda w, y, f, s: _sampled(torch.zeros_like(w), y, f, s)),
                ("the first step read the true value of hour 0, the hour it forecasts; it reads the "
                 "last value of the input window", lambda w, y, f, s: _sampled(y[:, :1], y, f, s)),
                ("the choice is one hour off: sample's entry for hour h says how hour h's value is "
                 "fed (to the step after it)",
                 lambda w, y, f, s: torch.cat([w, torch.where(s[:, 1:, None], f[:, :-1], y[:, :-1])], 1)),
                ("the inputs run the wrong way: step t read a later hour, not the one before it",
                 lambda w, y, f, s: torch.cat([torch.where(s[..., None], f, y)[:, 1:], w], 1))]
    judge(outputs, cases, _sampled, compared="the decoder inputs of the exercise's scheduled sampling",
          mistakes=mistakes)
    return (f"on {len(cases)} batches: the window's last value first, then each hour before a step, "
            "true or forecast as sample says")
