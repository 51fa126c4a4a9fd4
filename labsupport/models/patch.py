"""The book's forecaster: a patch Transformer (after PatchTST)."""
from __future__ import annotations

from types import MappingProxyType

import torch
from torch import nn

from ..attention import kernel_name, kernel_spec
from ..data import patchify
from ..layers import TransformerEncoder
from ..positional import make_attention_position, make_positional_encoding
from ..validation import (
    check_bool,
    check_dropout,
    check_nonnegative_int,
    check_positive_int,
)
from .base import Forecaster


class PatchTransformer(Forecaster):
    """The book's forecaster: patches of the window are tokens for a causal Transformer
    encoder, and a linear head reads the forecast off the last token (after PatchTST,
    Nie et al. 2023).

    Steps: 1. instance-normalise each channel (RevIN, optional); 2. fold the channels
    into the batch (channel independence, shared weights); 3. cut each channel into
    patches and embed them linearly; 4. add the positional encoding and, optionally,
    calendar features; 5. run the encoder, causal by default; 6. map the last token
    (``head="last"``) or all tokens (``head="flatten"``, as PatchTST) to the horizon;
    7. undo the normalisation.
    Shapes: x (B, L, C) -> (B, T, C), T = horizon.

    ``pos_encoding``: ``none``, ``sinusoidal``, ``learned``, ``time2vec`` (added to the
    tokens) or ``rope``, ``alibi``, ``relative`` (T5 buckets; inside attention), see
    `labsupport.positional`. ``positions`` (N,) or (B, N) may give each token a real
    time (irregular sampling); default the token index.
    ``kernel``: a name in `labsupport.attention.KERNELS`, a kernel function, or a module
    such as ``LinformerAttention(seq_len=n_patches, k)`` (with ``causal=False``), shared
    by every layer and head.
    ``time_features=F`` expects ``time (B, L + T, F)``: calendar features of every input
    step and of every step to forecast (the calendar is known in advance). Each token
    gets its patch's mean features, and the head gets the horizon's.
    With the last-token head the model also reads windows of other lengths
    ``L = patch_len + k * stride`` (Section 12.3 tests extrapolation), as far as its
    positional encoding allows.

    ``backbone`` (`BACKBONES`): ``"book"`` (LayerNorm, ReLU, no padding, RevIN with its
    learned scale and shift) or ``"patchtst"``, PatchTST's: BatchNorm of each feature over
    every token (`labsupport.layers.TokenBatchNorm`), GELU, the window's last value
    repeated ``stride`` times at its end (one more patch: 42 instead of 41 for L = 336,
    patches of 16, stride 8), RevIN without the affine map. ``attn_dropout`` acts on the
    attention weights (default: ``dropout``, which also acts on the residual branches and
    in the FFN); on a CPU it costs about a third of the training speed, since the fused
    SDPA kernels do not drop weights and each layer falls back to the explicit L x L path.
    `patchtst` builds PatchTST's published model (`PATCHTST`).
    """

    BACKBONES = MappingProxyType({
        "book": MappingProxyType(dict(norm="layer", activation="relu", pad_end=False, revin_affine=True)),
        "patchtst": MappingProxyType(dict(norm="batch", activation="gelu", pad_end=True, revin_affine=False)),
    })
    # PatchTST/42 (Nie et al. 2023; the official code's defaults and its L = 336 scripts'
    # default model): bidirectional post-norm encoder, flatten head, no attention dropout.
    PATCHTST = MappingProxyType(dict(
        patch_len=16, stride=8, d_model=128, n_heads=16, n_layers=3, d_ff=256, dropout=0.2,
        attn_dropout=0.0, pos_encoding="learned", causal=False, norm_first=False, head="flatten",
        revin=True, backbone="patchtst"))

    def __init__(self, *, lookback: int, horizon: int, channels: int = 1, patch_len: int = 24,
                 stride: int = 12, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int | None = 128, dropout: float = 0.1, attn_dropout: float | None = None,
                 pos_encoding: str = "learned", kernel="sdpa", causal: bool = True, revin: bool = True,
                 norm_first: bool = True, head: str = "last", time_features: int = 0,
                 backbone: str = "book"):
        spec = self._backbone(backbone)
        super().__init__(lookback=lookback, horizon=horizon, channels=channels, revin=revin,
                         revin_affine=spec["revin_affine"])
        patch_len, stride, d_model, n_heads, n_layers = (check_positive_int(name, value) for name, value in (
            ("patch_len", patch_len), ("stride", stride), ("d_model", d_model), ("n_heads", n_heads),
            ("n_layers", n_layers)))
        d_ff = None if d_ff is None else check_positive_int("d_ff", d_ff)
        if self.lookback < patch_len or (self.lookback - patch_len) % stride:
            raise ValueError(f"lookback {self.lookback} does not split into patches of {patch_len} "
                             f"with stride {stride}: need lookback = {patch_len} + k * {stride}")
        if head not in ("last", "flatten"):
            raise ValueError(f"head must be 'last' or 'flatten', got {head!r}")
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        dropout = check_dropout("dropout", dropout)
        attn_dropout = dropout if attn_dropout is None else check_dropout("attn_dropout", attn_dropout)
        self.patch_len, self.stride, self.head_kind, self.backbone = patch_len, stride, head, backbone
        self.causal, norm_first = check_bool("causal", causal), check_bool("norm_first", norm_first)
        self.pos_encoding, self.pad_end = pos_encoding, spec["pad_end"]
        self.time_features = check_nonnegative_int("time_features", time_features)
        self.n_patches = (self.lookback + self.pad_end * stride - patch_len) // stride + 1
        self._check_kernel(kernel)                      # fail here, not in the first forward
        self.embed = nn.Linear(patch_len, d_model)
        self.position = make_positional_encoding(pos_encoding, d_model=d_model, max_len=self.n_patches)
        in_attention = make_attention_position(pos_encoding, n_heads=n_heads,
                                               head_dim=d_model // n_heads, causal=self.causal)
        self.encoder = TransformerEncoder(d_model, n_heads, n_layers, d_ff, dropout, norm_first=norm_first,
                                          kernel=kernel, position=in_attention, norm=spec["norm"],
                                          activation=spec["activation"], attn_dropout=attn_dropout)
        width = d_model if head == "last" else self.n_patches * d_model
        self.head = nn.Linear(width, self.horizon)
        if self.time_features:
            self.time_in = nn.Linear(self.time_features, d_model)               # each token's calendar
            self.time_out = nn.Linear(self.horizon * self.time_features, width)  # the horizon's calendar

    @classmethod
    def patchtst(cls, *, lookback: int, horizon: int, channels: int = 1, **overrides) -> "PatchTransformer":
        """PatchTST's published model (`PATCHTST`), with ``overrides`` replacing any of its
        options: e.g. the hourly ETT scripts' ``d_model=16, n_heads=4, d_ff=128, dropout=0.3``.

        >>> PatchTransformer.patchtst(lookback=336, horizon=96, channels=7).n_patches
        42
        """
        return cls(lookback=lookback, horizon=horizon, channels=channels, **(dict(cls.PATCHTST) | overrides))

    @classmethod
    def _backbone(cls, name):
        if name not in cls.BACKBONES:
            raise ValueError(f"backbone must be one of {', '.join(map(repr, cls.BACKBONES))}, got {name!r}")
        return cls.BACKBONES[name]

    def _check_kernel(self, kernel) -> None:
        """The kernel's spec must allow this model: causal if it is causal, and a kernel
        built for one length (Linformer) built for the number of patch tokens."""
        spec, name = kernel_spec(kernel), kernel_name(kernel)
        if spec.fixed_length and kernel.seq_len != self.n_patches:
            raise ValueError(f"kernel {name}(seq_len={kernel.seq_len}) does not fit this model's "
                             f"{self.n_patches} patch tokens; build it with "
                             f"{name}(seq_len={self.n_patches}, ...)")
        if self.causal and not spec.causal:
            raise ValueError(f"kernel {name!r} cannot be causal; pass causal=False: the head still "
                             "forecasts only from the window, so nothing leaks")

    def _check(self, x, time):
        """The window must be (B, lookback, C); the last-token head also reads other
        lengths that split into whole patches. Time features must cover L + T steps."""
        L = x.shape[1] if isinstance(x, torch.Tensor) and x.dim() == 3 else self.lookback
        fits = L >= self.patch_len and (L - self.patch_len) % self.stride == 0
        self.check_window(x, length=L if fits and self.head_kind == "last" else self.lookback)
        if self.time_features:
            expected = (x.shape[0], L + self.horizon, self.time_features)
            if not isinstance(time, torch.Tensor) or tuple(time.shape) != expected:
                got = tuple(time.shape) if isinstance(time, torch.Tensor) else time
                raise ValueError(f"time must be (B, L + T, F) = {expected}: calendar features of "
                                 f"the window and the horizon, got {got}")
        elif time is not None:
            raise ValueError("this model was built with time_features=0; pass time=None")

    def patches(self, x):
        """Cut the last axis into the model's patches: (..., L) -> (..., N, patch_len); with
        PatchTST's backbone the last value is first repeated ``stride`` times (its padding)."""
        if self.pad_end:
            x = torch.cat([x, x[..., -1:].expand(*x.shape[:-1], self.stride)], dim=-1)   # (..., L + stride)
        return patchify(x, self.patch_len, self.stride)                                 # (..., N, P)

    def encode(self, tokens, *, positions=None, return_weights=False):
        """Positional encoding and encoder: (N, P_tokens, d_model) -> same shape."""
        return self.encoder(self.position(tokens, positions), is_causal=self.causal,
                            positions=positions, return_weights=return_weights)

    def forward(self, x, time=None, positions=None, *, return_weights=False):
        self._check(x, time)
        z, stats = self._normalise(x)                                     # (B, L, C)
        out = self._forecast(z, time, positions, return_weights=return_weights)
        if not return_weights:
            return self._denormalise(out, stats)                          # (B, T, C)
        y, weights = out
        return self._denormalise(y, stats), weights

    def _forecast(self, x, time=None, positions=None, *, return_weights=False):
        """Steps 2-6 on the normalised window x (B, L, C): the forecast (B, T, C), with the
        attention weights of every layer when ``return_weights``."""
        B, L, C = x.shape
        series = x.transpose(1, 2).reshape(B * C, L)                   # (B*C, L): channels apart
        tokens = self.embed(self.patches(series))                       # (B*C, N, d_model)
        if positions is not None and positions.dim() == 2:
            positions = positions.repeat_interleave(C, dim=0)         # (B*C, N)
        if self.time_features:
            past = self.patches(time[:, :L].transpose(1, 2))          # (B, F, N, P)
            tokens = tokens + self.time_in(past.mean(-1).transpose(1, 2)).repeat_interleave(C, dim=0)
        encoded = self.encode(tokens, positions=positions, return_weights=return_weights)
        if return_weights:
            encoded, weights = encoded
        features = encoded[:, -1] if self.head_kind == "last" else encoded.flatten(1)
        if self.time_features:
            future = time[:, L:].flatten(1)                            # (B, T*F)
            features = features + self.time_out(future).repeat_interleave(C, dim=0)
        y = self.head(features).view(B, C, self.horizon).transpose(1, 2)   # (B, T, C)
        return (y, weights) if return_weights else y
