"""Transformer building blocks written from scratch, with a swappable attention kernel.

Modules are batch-first: ``x (B, L, d_model)``. Masks follow the SDPA convention,
``True`` = may attend. ``nn.MultiheadAttention`` reads boolean masks the other way
round (``True`` = blocked): pass it ``~mask``.
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import KERNELS, causal_mask, explicit_attention, get_kernel, kernel_name, kernel_spec
from .validation import check_bool, check_dropout, check_positive_int, check_rank

_APPLIES_DROPOUT = "'sdpa' or 'naive'"        # exact kernels that drop attention weights themselves


def _check_attention_dropout(owner: str, option: str, rate: float, kernel) -> float:
    """Return ``rate`` (a dropout rate in [0, 1)) if ``kernel`` can apply it to its attention
    weights (its spec declares ``dropout=True``), or if it is 0; else raise naming the
    kernel and the fix, rather than drop the option without a word."""
    rate = check_dropout(option, rate)
    if rate > 0 and not kernel_spec(kernel).dropout:
        raise ValueError(f"{owner}({option}={rate:g}): kernel {kernel_name(kernel)!r} does not apply "
                         "dropout to its attention weights (its spec declares dropout=False), so the rate "
                         f"would be ignored; pass {option}=0.0, or a kernel that applies dropout to its "
                         f"weights: {_APPLIES_DROPOUT}")
    return rate


def _check_causal(kernel, spec) -> None:
    """Raise for ``is_causal=True`` through a kernel whose spec does not declare ``causal=True``."""
    if spec.causal:
        return
    causal = ", ".join(repr(name) for name in KERNELS if kernel_spec(name).causal)
    raise ValueError(f"is_causal=True: kernel {kernel_name(kernel)!r} cannot be causal: it does not declare "
                     "causal=True (@attention_kernel(..., causal=True)); call it with is_causal=False, "
                     f"or use a causal kernel: {causal}")


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q/k/v/out projections and any kernel.

    Math: ``MHA(X, C) = concat_h attn(X Wq_h, C Wk_h, C Wv_h) Wo``, one kernel call for all heads.
    Cost: that of the kernel, times B * H, plus four d_model x d_model projections.
    Shapes: x (B, L, d_model), context (B, S, d_model) (default: x) -> (B, L, d_model).

    ``kernel`` is a name in `labsupport.attention.KERNELS` (``"sdpa"``, ``"naive"``, ...)
    or a callable with the kernel signature, or an ``nn.Module`` with that signature such as
    ``LinformerAttention(seq_len, k)``, which becomes a submodule. Its `KernelSpec`
    (``self.spec``, see `labsupport.attention.attention_kernel`) says whether it takes
    ``dropout_p`` (the attention dropout), a score ``bias`` and ``is_causal``; an undeclared
    callable is passed ``mask`` and ``is_causal`` only. What the kernel cannot take is
    refused by name: ``dropout > 0`` for a kernel that does not apply dropout to its
    weights (flash, linear, Performer, an undeclared callable), a bias-adding ``position``
    for one without ``bias``, ``is_causal=True`` for one without ``causal``. ``position`` is an optional
    `labsupport.positional.AttentionPosition` (RoPE, ALiBi, T5 or Transformer-XL
    relative positions) applied to every head; ``positions`` (L,) or (B, L) and
    ``key_positions`` then give the tokens' positions (default: indices, queries last).
    ``return_weights=True`` also returns the weights (B, H, L, S) of the kernel that ran,
    formed explicitly by its spec's ``explicit`` function: softmax weights for the exact
    kernels, zero outside the band for ``local`` and ``longformer``. An approximate kernel
    (linear, Performer, Linformer) never forms them and raises ``ValueError``.

    A mask does not hide NaN or inf: the kernel refuses non-finite q, k, v by (batch, head,
    position) (`labsupport.validation.check_attention_inputs`), so a NaN in x is refused
    rather than spread to every position, the causal past's included.

    ``is_causal`` is aligned at the bottom right: the L queries are the last L of the S
    tokens, and query i sees keys j <= i + S - L (`causal_mask(L, S, bottom_right=True)`),
    so a cached decoding step, ``mha(x[:, t:], x, is_causal=True)``, equals rows t.. of
    the full causal pass ``mha(x, is_causal=True)``. (The kernels' own ``is_causal``, as
    SDPA's, is top-left; the two agree when L == S.) With L != S the kernel gets that
    mask explicitly, so it must take a mask (naive, sdpa, flash): linear and performer
    attention refuse it.

    >>> mha = MultiHeadAttention(d_model=8, n_heads=2)
    >>> mha(torch.zeros(3, 5, 8)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(self, d_model: int, n_heads: int, *, kernel="sdpa", dropout: float = 0.0,
                 bias: bool = True, position=None):
        super().__init__()
        d_model, n_heads = check_positive_int("d_model", d_model), check_positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.kernel = get_kernel(kernel)        # an nn.Module kernel becomes a submodule, so it trains
        self.spec = kernel_spec(self.kernel)
        self.dropout = _check_attention_dropout("MultiHeadAttention", "dropout", dropout, self.kernel)
        if position is not None and position.needs_bias and not self.spec.bias:
            raise ValueError(f"{type(position).__name__} adds a bias to the scores, which kernel "
                             f"{kernel_name(self.kernel)!r} does not declare (bias=False); use naive, "
                             "sdpa or flash, or a rotary encoding")
        self.position = position
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) -> (B, H, L, head_dim)."""
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)   # (B, H, L, hd)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, L, head_dim) -> (B, L, d_model)."""
        B, H, L, hd = x.shape
        return x.transpose(1, 2).reshape(B, L, H * hd)                       # (B, L, d_model)

    def forward(self, x, context=None, *, mask=None, is_causal=False, positions=None,
                key_positions=None, return_weights=False):
        check_rank("x", x, 3, "(B, L, d_model)")
        context = x if context is None else context
        check_rank("context", context, 3, "(B, S, d_model)")
        if x.shape[-1] != self.d_model or context.shape[-1] != self.d_model:
            raise ValueError(f"expected x (B, L, {self.d_model}) and context (B, S, {self.d_model}), "
                             f"got {tuple(x.shape)} and {tuple(context.shape)}")
        L, S = x.shape[1], context.shape[1]
        if check_bool("is_causal", is_causal):
            _check_causal(self.kernel, self.spec)
        if is_causal and L != S:                  # the queries are the newest tokens: bottom-right
            if not self.spec.mask:
                raise ValueError(f"is_causal with {L} queries and {S} keys needs a bottom-right causal "
                                 f"mask, and kernel {kernel_name(self.kernel)!r} takes no mask; use "
                                 "naive, sdpa or flash for a cached step, or equal query and key lengths")
            causal = causal_mask(L, S, bottom_right=True, device=x.device)  # (L, S)
            mask, is_causal = (causal if mask is None else mask & causal), False
        q = self.split_heads(self.q_proj(x))                                 # (B, H, L, hd)
        k = self.split_heads(self.k_proj(context))                           # (B, H, S, hd)
        v = self.split_heads(self.v_proj(context))                           # (B, H, S, hd)
        extra = {}
        if self.position is not None:
            q_pos, k_pos = self._positions(L, S, positions, key_positions, x.device, context is x)
            self.position.check_attention(q_pos, k_pos, mask=mask, is_causal=is_causal)
            q, k = self.position.rotate(q, k, q_pos, k_pos)
            score_bias = self.position.bias(q, k, q_pos, k_pos)
            if score_bias is not None:
                extra["bias"] = score_bias
        p = self.dropout if self.training else 0.0
        if self.spec.dropout:
            extra["dropout_p"] = p
        if return_weights:                                                   # the same kernel, explicitly
            out, weights = explicit_attention(self.kernel, q, k, v, mask=mask, is_causal=is_causal, **extra)
            return self.out_proj(self.merge_heads(out)), weights             # weights (B, H, L, S)
        out = self.kernel(q, k, v, mask=mask, is_causal=is_causal, **extra)  # (B, H, L, hd)
        return self.out_proj(self.merge_heads(out))                          # (B, L, d_model)

    @staticmethod
    def _positions(L, S, positions, key_positions, device, self_attention):
        """Query and key positions: given, else indices with the queries last."""
        if key_positions is None:
            key_positions = positions if (self_attention and positions is not None) \
                else torch.arange(S, device=device)
        if positions is None:
            positions = torch.arange(S - L, S, device=device)
        return positions, key_positions

    @torch.no_grad()
    def load_torch_weights(self, mha: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of an ``nn.MultiheadAttention`` (same d_model, heads, bias)."""
        if mha.embed_dim != self.d_model or mha.num_heads != self.n_heads:
            raise ValueError(f"nn.MultiheadAttention has embed_dim {mha.embed_dim}, heads "
                             f"{mha.num_heads}; expected {self.d_model}, {self.n_heads}")
        if mha.in_proj_weight is None:
            raise ValueError("nn.MultiheadAttention with separate kdim/vdim is not supported")
        if (mha.in_proj_bias is None) != (self.q_proj.bias is None):
            raise ValueError(f"bias differs: nn.MultiheadAttention bias={mha.in_proj_bias is not None}, "
                             f"this module bias={self.q_proj.bias is not None}")
        for proj, w in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_weight.chunk(3)):
            proj.weight.copy_(w)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if mha.in_proj_bias is not None:
            for proj, b in zip((self.q_proj, self.k_proj, self.v_proj), mha.in_proj_bias.chunk(3)):
                proj.bias.copy_(b)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self


class FeedForward(nn.Module):
    """The position-wise feed-forward network: one two-layer MLP applied at every position.

    Math: ``FFN(x) = W2 act(W1 x + b1) + b2``, the same weights for every position.
    Shapes: x (B, L, d_model) -> (B, L, d_model).
    """

    def __init__(self, d_model: int, d_ff: int, *, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        d_model, d_ff = check_positive_int("d_model", d_model), check_positive_int("d_ff", d_ff)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = _ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(check_dropout("dropout", dropout))

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class TokenBatchNorm(nn.BatchNorm1d):
    """Batch normalisation of each feature over every token of the batch, as PatchTST's encoder
    normalises (its BatchNorm1d over (B, d_model, L)); running statistics in eval mode.

    Math: ``y = (x - mean_{B,L}) / sqrt(var_{B,L} + eps) * gamma + beta``, per feature.
    Shapes: x (B, L, d_model) -> (B, L, d_model).
    """

    def forward(self, x):
        y = super().forward(x.reshape(-1, x.shape[-1]))       # (B*L, d_model): tokens as the batch
        return y.view(x.shape)                                # (B, L, d_model)


_NORMS = {"layer": nn.LayerNorm, "batch": TokenBatchNorm}


def make_norm(kind: str, d_model: int, eps: float = 1e-5) -> nn.Module:
    """The normalisation of a block: ``"layer"`` (LayerNorm over each token's features) or
    ``"batch"`` (`TokenBatchNorm`: each feature over every token of the batch, PatchTST's)."""
    if kind not in _NORMS:
        raise ValueError(f"norm must be 'layer' or 'batch', got {kind!r}")
    return _NORMS[kind](d_model, eps=eps)


def _check_prefix(prefix, x, positions) -> None:
    """prefix (B, P, d_model) with x's batch size and width; positions, if any, for all P + L."""
    check_rank("prefix", prefix, 3, "(B, P, d_model)")
    (B, L, d), P = x.shape, prefix.shape[1]
    if prefix.shape[0] != B or prefix.shape[2] != d:
        raise ValueError(f"prefix must be (B, P, d_model) = ({B}, P, {d}) as x {tuple(x.shape)}, "
                         f"got {tuple(prefix.shape)}")
    if positions is not None and positions.shape[-1] != P + L:
        raise ValueError(f"with a prefix, positions cover prefix and x: (P + L,) = ({P + L},) or "
                         f"(B, {P + L}), got {tuple(positions.shape)}")


def _with_weights(result, return_weights: bool):
    """``(out, weights)`` of a `MultiHeadAttention` call; weights None when not asked for."""
    return result if return_weights else (result, None)


class TransformerBlock(nn.Module):
    """An encoder block: self-attention then a feed-forward network, each in a residual
    connection with layer normalisation.

    Math (pre-norm, ``norm_first=True``): ``x = x + MHA(LN1(x)); x = x + FFN(LN2(x))``.
    Math (post-norm, the original): ``x = LN1(x + MHA(x)); x = LN2(x + FFN(x))``.
    Shapes: x (B, L, d_model) -> (B, L, d_model); prefix (B, P, d_model).

    ``prefix``: earlier inputs of this block (a cache, as in Transformer-XL) that x's
    tokens attend to as well: keys and values come from ``concat(prefix, x)``, the prefix
    seen as x is (through LN1 in pre-norm), and x's tokens are the last L of those P + L,
    so ``is_causal`` lets token i see the whole prefix and x's tokens up to i (bottom-right,
    see `MultiHeadAttention`); ``positions`` then give all P + L positions.
    ``norm="batch"`` puts `TokenBatchNorm` where LN stands (PatchTST's encoder). ``dropout``
    acts on each sub-layer's output and inside the FFN; ``attn_dropout`` on the attention
    weights (default: ``dropout``; PatchTST uses 0, and on a CPU it is slow, since the fused
    SDPA kernels do not drop weights); a kernel that cannot drop weights needs
    ``attn_dropout=0.0``. ``residual=False`` or ``layer_norm=False`` (no normalisation at all) remove
    those parts (for the experiments of Section 12.2); `load_torch_weights` copies an
    ``nn.TransformerEncoderLayer``.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None, dropout: float = 0.0, *,
                 norm_first: bool = True, kernel="sdpa", activation: str = "relu",
                 residual: bool = True, layer_norm: bool = True, eps: float = 1e-5, position=None,
                 norm: str = "layer", attn_dropout: float | None = None):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        dropout = check_dropout("dropout", dropout)
        attn_dropout = _check_attention_dropout("TransformerBlock", "attn_dropout",
                                               dropout if attn_dropout is None else attn_dropout, kernel)
        self.attn = MultiHeadAttention(d_model, n_heads, kernel=kernel, dropout=attn_dropout,
                                       position=position)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = make_norm(norm, d_model, eps) if layer_norm else nn.Identity()
        self.norm2 = make_norm(norm, d_model, eps) if layer_norm else nn.Identity()
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first, self.residual = norm_first, residual

    def forward(self, x, *, prefix=None, mask=None, is_causal=False, positions=None,
                return_weights=False):
        attend = dict(prefix=prefix, mask=mask, is_causal=is_causal, positions=positions,
                      return_weights=return_weights)
        if self.norm_first:                                  # x + f(LN(x)), twice
            a, weights = self.self_attention(self.norm1(x), **attend)
            x = self._skip(x) + self.drop1(a)
            x = self._skip(x) + self.drop2(self.ff(self.norm2(x)))
        else:                                                # LN(x + f(x)), twice
            a, weights = self.self_attention(x, **attend)
            x = self.norm1(self._skip(x) + self.drop1(a))
            x = self.norm2(self._skip(x) + self.drop2(self.ff(x)))
        return (x, weights) if return_weights else x

    def self_attention(self, h, *, prefix=None, mask=None, is_causal=False, positions=None,
                       return_weights=False):
        """The attention sub-layer on h (B, L, d_model), x as attention sees it (after LN1
        in pre-norm), over ``concat(prefix, x)`` seen the same way: (out, weights or None)."""
        context, q_pos = None, positions
        if prefix is not None:
            _check_prefix(prefix, h, positions)
            seen = self.norm1(prefix) if self.norm_first else prefix
            context = torch.cat((seen, h), dim=1)                           # (B, P+L, d_model)
            q_pos = None if positions is None else positions[..., prefix.shape[1]:]
        result = self.attn(h, context, mask=mask, is_causal=is_causal, positions=q_pos,
                           key_positions=positions, return_weights=return_weights)
        return _with_weights(result, return_weights)

    def _skip(self, x):
        """x on the residual path, or zeros for the ``residual=False`` ablation."""
        return x if self.residual else torch.zeros_like(x)

    @torch.no_grad()
    def load_torch_weights(self, layer: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """Copy an ``nn.TransformerEncoderLayer`` (same sizes and ``norm_first``)."""
        if not isinstance(self.norm1, nn.LayerNorm):
            got = "norm='batch'" if isinstance(self.norm1, TokenBatchNorm) else "layer_norm=False"
            raise ValueError(f"load_torch_weights needs norm='layer' (torch's layer has LayerNorms), "
                             f"got {got}")
        if layer.norm_first != self.norm_first:
            raise ValueError(f"norm_first differs: torch layer {layer.norm_first}, "
                             f"this block {self.norm_first}")
        self.attn.load_torch_weights(layer.self_attn)
        for ours, theirs in ((self.ff.linear1, layer.linear1), (self.ff.linear2, layer.linear2),
                             (self.norm1, layer.norm1), (self.norm2, layer.norm2)):
            ours.load_state_dict(theirs.state_dict())
        return self


class TransformerEncoder(nn.Module):
    """A stack of `TransformerBlock` s; pre-norm stacks end with a final norm of the blocks' kind.

    Shapes: x (B, L, d_model) -> (B, L, d_model); with ``return_weights`` also a list
    of per-layer weights (B, H, L, L). An in-attention ``position`` module is shared
    by every layer (as in T5).
    """

    def __init__(self, d_model: int, n_heads: int, n_layers: int, d_ff: int | None = None,
                 dropout: float = 0.0, *, norm_first: bool = True, kernel="sdpa", **block_options):
        super().__init__()
        n_layers = check_positive_int("n_layers", n_layers)
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, n_heads, d_ff, dropout, norm_first=norm_first, kernel=kernel,
                             **block_options) for _ in range(n_layers))
        final_norm = norm_first and block_options.get("layer_norm", True)
        self.norm = make_norm(block_options.get("norm", "layer"), d_model) if final_norm else nn.Identity()

    def forward(self, x, *, mask=None, is_causal=False, positions=None, return_weights=False):
        all_weights = []
        for layer in self.layers:
            x = layer(x, mask=mask, is_causal=is_causal, positions=positions,
                      return_weights=return_weights)
            if return_weights:
                x, w = x
                all_weights.append(w)
        x = self.norm(x)
        return (x, all_weights) if return_weights else x


class DecoderBlock(nn.Module):
    """A decoder block: causal self-attention, cross-attention to the encoder's output
    (the "memory"), then a feed-forward network; residuals and LayerNorm around each.

    Math (pre-norm): ``x += SelfAttn(LN1(x)); x += CrossAttn(LN2(x), memory); x += FFN(LN3(x))``.
    Math (post-norm): ``x = LN1(x + SelfAttn(x)); x = LN2(x + CrossAttn(x, memory)); x = LN3(x + FFN(x))``.
    Shapes: x (B, L, d_model), memory (B, S, d_model) -> (B, L, d_model).
    ``dropout`` acts on each sub-layer's output and inside the FFN; ``attn_dropout`` on both
    attentions' weights (default: ``dropout``), as in `TransformerBlock`.
    `load_torch_weights` copies an ``nn.TransformerDecoderLayer``.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None, dropout: float = 0.0, *,
                 norm_first: bool = True, kernel="sdpa", activation: str = "relu", eps: float = 1e-5,
                 attn_dropout: float | None = None):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        dropout = check_dropout("dropout", dropout)
        attn_dropout = _check_attention_dropout("DecoderBlock", "attn_dropout",
                                               dropout if attn_dropout is None else attn_dropout, kernel)
        self.self_attn = MultiHeadAttention(d_model, n_heads, kernel=kernel, dropout=attn_dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, kernel=kernel, dropout=attn_dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model, eps=eps) for _ in range(3))
        self.drops = nn.ModuleList(nn.Dropout(dropout) for _ in range(3))
        self.norm_first = norm_first

    def forward(self, x, memory, *, is_causal=True, memory_mask=None, return_weights=False):
        (n1, n2, n3), (d1, d2, d3) = self.norms, self.drops
        cross = dict(mask=memory_mask, return_weights=return_weights)
        if self.norm_first:                                  # x + f(LN(x)), three times
            x = x + d1(self.self_attn(n1(x), is_causal=is_causal))
            c, weights = _with_weights(self.cross_attn(n2(x), memory, **cross), return_weights)
            x = x + d2(c)
            x = x + d3(self.ff(n3(x)))
        else:                                                # LN(x + f(x)), three times
            x = n1(x + d1(self.self_attn(x, is_causal=is_causal)))
            c, weights = _with_weights(self.cross_attn(x, memory, **cross), return_weights)
            x = n2(x + d2(c))
            x = n3(x + d3(self.ff(x)))
        return (x, weights) if return_weights else x

    @torch.no_grad()
    def load_torch_weights(self, layer: nn.TransformerDecoderLayer) -> "DecoderBlock":
        """Copy an ``nn.TransformerDecoderLayer`` (same sizes and ``norm_first``)."""
        if layer.norm_first != self.norm_first:
            raise ValueError(f"norm_first differs: torch layer {layer.norm_first}, "
                             f"this block {self.norm_first}")
        self.self_attn.load_torch_weights(layer.self_attn)
        self.cross_attn.load_torch_weights(layer.multihead_attn)
        self.ff.linear1.load_state_dict(layer.linear1.state_dict())
        self.ff.linear2.load_state_dict(layer.linear2.state_dict())
        for ours, theirs in zip(self.norms, (layer.norm1, layer.norm2, layer.norm3)):
            ours.load_state_dict(theirs.state_dict())
        return self
