"""Attention kernels with one signature, and a registry that modules use by name.

Every kernel takes ``q (..., L, D)``, ``k (..., S, D)``, ``v (..., S, Dv)``, usually
``(B, H, L, D)``, and returns ``(..., L, Dv)``, exactly like
``torch.nn.functional.scaled_dot_product_attention``. Boolean masks mean
``True`` = may attend (the SDPA convention), broadcastable to ``(..., L, S)``.
Note that ``nn.MultiheadAttention`` reads boolean masks the other way round
(``True`` = blocked); `labsupport.layers` converts where it talks to it.
``is_causal=True`` means query i sees keys j <= i, aligned at the top left as in SDPA,
in every kernel here (with S > L the last S - L keys are never seen);
`labsupport.layers.MultiHeadAttention` aligns it at the bottom right instead.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .validation import (check_attention_inputs, check_no_mask, check_nonnegative_int, check_positive_int,
                         check_self_attention, check_shape)

Kernel = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class KernelSpec:
    """What an attention kernel takes and computes, declared where the kernel is defined
    (`attention_kernel`) and read by `labsupport.layers` and `labsupport.models`.

    ``mask``, ``bias``, ``causal``, ``dropout``: it takes a bool ``mask``, a float ``bias``
    added to the scores, ``is_causal=True``, ``dropout_p``. ``exact``: softmax attention
    over the keys it reads, no approximation (a sliding window is exact on its band).
    ``module``: a trainable ``nn.Module``, used as an instance. ``fixed_length``: built for
    one key length, its ``seq_len``. ``explicit``: a function of the kernel's arguments
    returning ``(out, weights (..., L, S))``, the weights the kernel uses, formed
    explicitly; None where the kernel never forms them.
    """

    mask: bool = False
    bias: bool = False
    causal: bool = True
    dropout: bool = False
    exact: bool = False
    module: bool = False
    fixed_length: bool = False
    explicit: Callable | None = None


UNDECLARED = KernelSpec(mask=True)   # a callable without a spec gets mask and is_causal passed through


def attention_kernel(**fields):
    """Declare a kernel's `KernelSpec` where it is defined: ``@attention_kernel(mask=True, ...)``
    above a function or an ``nn.Module`` class."""
    spec = KernelSpec(**fields)

    def declare(kernel):
        kernel.spec = spec
        return kernel
    return declare


def _unwrap(kernel) -> tuple[object, dict]:
    """The function under any ``functools.partial`` layers, and the keywords they fix."""
    keywords = {}
    while isinstance(kernel, partial):
        keywords = {**kernel.keywords, **keywords}                     # outer layers win
        kernel = kernel.func
    return kernel, keywords


def kernel_spec(kernel) -> KernelSpec:
    """The `KernelSpec` declared for ``kernel``: a name in `KERNELS`, a function, a
    ``functools.partial`` of one or a module instance. An undeclared callable gets
    `UNDECLARED` (mask and is_causal passed through; no bias, dropout or weights).

    >>> kernel_spec("local").exact, kernel_spec("linear").exact, kernel_spec("flash").dropout
    (True, False, False)
    """
    spec = getattr(_unwrap(get_kernel(kernel))[0], "spec", None)
    return spec if isinstance(spec, KernelSpec) else UNDECLARED


def kernel_name(kernel) -> str:
    """A short name for messages: ``'local_attention'``, ``'LinformerAttention'``, ``'<lambda>'``."""
    base = _unwrap(get_kernel(kernel))[0]
    return getattr(base, "__name__", type(base).__name__)


def explicit_attention(kernel, q, k, v, **options):
    """``(out, weights (..., L, S))`` of ``kernel`` with its weights formed explicitly, through
    its spec's ``explicit`` (a partial's fixed options included). Raises ``ValueError`` for
    a kernel that never forms the weights (an approximation) or declares no way to."""
    spec, (_, fixed), name = kernel_spec(kernel), _unwrap(get_kernel(kernel)), kernel_name(kernel)
    if spec.explicit is None and not spec.exact and spec is not UNDECLARED:
        raise ValueError(f"return_weights=True: kernel {name!r} is an approximation that never forms the "
                         "(L, S) weights, and full softmax weights would belong to another model; look "
                         "at weights with an exact kernel ('naive', 'sdpa', 'flash') or a sliding window "
                         "('local', 'longformer'), or call without return_weights")
    if spec.explicit is None:
        raise ValueError(f"return_weights=True: kernel {name!r} declares no explicit weights; declare "
                         "them with @attention_kernel(..., explicit=fn), fn(q, k, v, **options) -> "
                         "(out, weights), or call without return_weights")
    return spec.explicit(q, k, v, **{**fixed, **options})


def causal_mask(L: int, S: int | None = None, *, bottom_right: bool = False, device=None) -> torch.Tensor:
    """Boolean ``(L, S)`` mask, True where query i may attend key j, i.e. j <= i.

    Aligned at the top left, as ``is_causal=True`` in SDPA and in every kernel here:
    with S > L the last S - L keys are never seen. ``bottom_right=True``: j <= i + S - L,
    the queries being the last L of the S tokens (a cached decoding step; the alignment
    of `labsupport.layers.MultiHeadAttention`'s ``is_causal``); with L > S the first
    L - S queries then see no key. Both agree when L == S.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    >>> causal_mask(2, 4, bottom_right=True).int()
    tensor([[1, 1, 1, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L if bottom_right else 0)


def _allowed(mask, is_causal: bool, L: int, S: int, device) -> torch.Tensor | None:
    """Combine an optional mask and causality into one boolean mask (or None)."""
    if not is_causal:
        return mask
    causal = causal_mask(L, S, device=device)
    return causal if mask is None else mask & causal


def _softmax_explicit(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0,
                      block_size=None, backend=None):
    """The explicit form of the exact kernels: `naive_attention` and its weights (a block
    size or an SDPA backend changes how the same function is computed, not its weights)."""
    return naive_attention(q, k, v, mask=mask, is_causal=is_causal, scale=scale, bias=bias,
                           dropout_p=dropout_p, return_weights=True)


@attention_kernel(mask=True, bias=True, causal=True, dropout=True, exact=True, explicit=_softmax_explicit)
def naive_attention(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0,
                    return_weights=False):
    """Textbook scaled dot-product attention with the explicit ``L x S`` score matrix.

    Math: ``softmax(Q K^T * scale + bias, masked to -inf where not allowed) V``, ``scale = 1/sqrt(D)``.
    Cost: time O(L S D); memory O(L S): the scores and weights are materialised.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> out (..., L, Dv),
    and with ``return_weights`` also the weights (..., L, S).
    ``is_causal``: query i sees keys j <= i, aligned at the top left as SDPA (`causal_mask`).
    A query with no allowed key (masked, or a bias of -inf everywhere) gets weights of zero
    and an output of zero, as SDPA does.
    ``bias``: an optional float tensor broadcastable to (..., L, S), added to the
    scaled scores (ALiBi and relative position biases); ``dropout_p`` drops
    attention weights (pass 0.0 in evaluation, as for SDPA).

    >>> q = k = v = torch.ones(1, 1, 2, 4)
    >>> naive_attention(q, k, v, is_causal=True).shape
    torch.Size([1, 1, 2, 4])
    """
    check_attention_inputs(q, k, v, mask, bias, scale=scale, dropout_p=dropout_p)
    L, S = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale                      # (..., L, S)
    if bias is not None:
        scores = scores + bias
    allowed = _allowed(mask, is_causal, L, S, q.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    no_key = None                                                    # (..., L, 1): rows with no key
    if bias is not None:                                             # a bias of -inf hides keys too
        no_key = torch.isneginf(scores).all(dim=-1, keepdim=True)
    elif allowed is not None:
        no_key = ~allowed.any(dim=-1, keepdim=True)
    if no_key is not None and not no_key.any():
        no_key = None                                                # the usual case: no copies
    if no_key is not None:
        scores = scores.masked_fill(no_key, 0.0)                     # a finite softmax there ...
    weights = scores.softmax(dim=-1)                                 # (..., L, S)
    if no_key is not None:
        weights = weights.masked_fill(no_key, 0.0)                   # ... then 0, not NaN, as SDPA
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ v                                                # (..., L, Dv)
    return (out, weights) if return_weights else out


def _at_least_2d(t):
    """A mask or bias of shape (S,) or () as (1, S) or (1, 1): the same broadcast, with the
    (L, S) axes that tiling and SDPA index."""
    if t is None or t.dim() >= 2:
        return t
    return t.reshape((1,) * (2 - t.dim()) + tuple(t.shape))              # (1, S) or (1, 1)


def _tile(t, rows: slice, cols: slice):
    """The (rows, cols) tile of a mask or bias broadcastable to (..., L, S)."""
    if t is None:
        return None
    r = rows if t.shape[-2] > 1 else slice(None)
    c = cols if t.shape[-1] > 1 else slice(None)
    return t[..., r, c]


@attention_kernel(mask=True, bias=True, causal=True, exact=True, explicit=_softmax_explicit)
def flash_attention(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None,
                    block_size=128):
    """FlashAttention's algorithm in plain PyTorch: tiles and an online softmax.

    Math: the same function as `naive_attention`. For each block of queries, the key
    blocks are visited in turn while a running row maximum ``m``, normaliser ``l`` and
    unnormalised output ``acc`` are kept: with a new tile of scores ``s``,
    ``m' = max(m, rowmax s)``, ``l = l e^(m - m') + rowsum e^(s - m')``,
    ``acc = acc e^(m - m') + e^(s - m') V_tile``; at the end ``out = acc / l``.
    Cost: time O(L S D), as naive attention (exact attention cannot do better); memory
    O(L Dv + block_size^2) in the forward pass: one tile of scores is alive at a time.
    With ``is_causal`` (top-left aligned, as SDPA), tiles entirely above the diagonal
    are skipped, about half the work. ``mask`` (bool) and ``bias`` (float),
    broadcastable to (..., L, S), are cut into the same tiles.
    Gradients: autograd differentiates the loop, but it must keep every tile's
    probabilities for the backward pass, so training memory is O(L S) again. The real
    kernel stores only ``m`` and ``l`` per row and recomputes the tiles backwards.
    Precision: in bfloat16 or float16, as in FlashAttention, only the two matrix products
    read half-precision operands (``Q K^T``, then ``P V`` with ``P`` rounded); the scores,
    ``m``, ``l`` and ``acc`` are float32, which keeps a long row's normaliser exact
    where a half-precision sum would stop growing (bfloat16 holds 8 significant bits).
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).

    >>> q = k = v = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(flash_attention(q, k, v, block_size=2), naive_attention(q, k, v), atol=1e-6)
    True
    """
    check_attention_inputs(q, k, v, mask, bias, scale=scale)
    block_size = check_positive_int("block_size", block_size)
    mask, bias = _at_least_2d(mask), _at_least_2d(bias)
    L, S = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                         # (..., L, Dv)
    for i in range(0, L, block_size):
        rows = slice(i, min(i + block_size, L))
        out[..., rows, :] = _flash_query_block(q, k, v, rows, mask, bias, is_causal, scale,
                                               block_size)
    return out


def _flash_query_block(q, k, v, rows, mask, bias, is_causal, scale, block_size):
    """Attention output for the queries in ``rows``, visiting key tiles one at a time."""
    q_block = q[..., rows, :] * scale                                     # (..., Bq, D)
    stats = dict(dtype=torch.promote_types(q.dtype, torch.float32), device=q.device)  # half: float32
    m = torch.full(q_block.shape[:-1], float("-inf"), **stats)            # (..., Bq) running max
    l = torch.zeros(q_block.shape[:-1], **stats)                          # (..., Bq) normaliser
    acc = torch.zeros(*q_block.shape[:-1], v.shape[-1], **stats)          # (..., Bq, Dv)
    S = k.shape[-2]
    last_key = min(rows.stop, S) if is_causal else S                      # keys j <= i only
    for j in range(0, last_key, block_size):
        cols = slice(j, min(j + block_size, last_key))
        s = (q_block @ k[..., cols, :].transpose(-2, -1)).to(m.dtype)     # (..., Bq, Bk) one tile
        if bias is not None:
            s = s + _tile(bias, rows, cols)
        allowed = _tile(mask, rows, cols)
        if is_causal and cols.stop - 1 > rows.start:                      # tile crosses the diagonal
            i = torch.arange(rows.start, rows.stop, device=q.device)
            diagonal = i[:, None] >= torch.arange(cols.start, cols.stop, device=q.device)
            allowed = diagonal if allowed is None else allowed & diagonal
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))                          # (..., Bq)
        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)            # rows with no key yet
        p = (s - shift[..., None]).exp()                                  # (..., Bq, Bk)
        correction = (m - shift).exp()                                    # rescales old sums
        l = l * correction + p.sum(dim=-1)
        acc = acc * correction[..., None] + (p.to(v.dtype) @ v[..., cols, :]).to(m.dtype)
        m = m_new
    # l >= 1 for a row with any key (its maximum adds e^0); a row with none gets 0, with finite grads
    return (acc / l.clamp_min(1.0)[..., None]).to(q.dtype)


_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


def _backend_context(backend: str | None):
    if backend is None:
        return contextlib.nullcontext()
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {sorted(_BACKENDS)} or None, got {backend!r}")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, _BACKENDS[backend]))


@attention_kernel(mask=True, bias=True, causal=True, dropout=True, exact=True, explicit=_softmax_explicit)
def sdpa(q, k, v, *, mask=None, is_causal=False, scale=None, bias=None, dropout_p=0.0, backend=None):
    """``F.scaled_dot_product_attention``, optionally forced to one backend.

    Math: the same function as `naive_attention`.
    Cost: time O(L S D); memory O(L S) on the math backend, O(L) on the fused
    ``flash``/``efficient`` backends (which never store the score matrix).
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``bias`` (float, broadcastable to (..., L, S)) is added to the scaled scores;
    SDPA takes it as a float ``attn_mask``, into which a boolean mask and causality are
    folded as -inf. ``is_causal`` is SDPA's, aligned at the top left (`causal_mask`).
    ``backend``: None (PyTorch chooses), "math", "flash", "efficient" or "cudnn";
    a backend that cannot run these inputs on this device raises ``RuntimeError``.
    """
    check_attention_inputs(q, k, v, mask, bias, scale=scale, dropout_p=dropout_p)
    mask, bias = _at_least_2d(mask), _at_least_2d(bias)
    if bias is not None:                                            # one additive float mask
        allowed = _allowed(mask, is_causal, q.shape[-2], k.shape[-2], q.device)
        mask = bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
        is_causal = False
    elif mask is not None and is_causal:                            # SDPA takes one or the other
        mask, is_causal = _allowed(mask, True, q.shape[-2], k.shape[-2], q.device), False
    with _backend_context(backend):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )


def sdpa_backends(q, k, v, *, is_causal=False) -> dict[str, bool]:
    """Which SDPA backends can run these inputs here: ``{"flash": False, "math": True, ...}``."""
    usable = {}
    for name in _BACKENDS:
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sdpa(q, k, v, is_causal=is_causal, backend=name)
            usable[name] = True
        except (RuntimeError, AttributeError):
            usable[name] = False
    return usable


# ---------------------------------------------------------------------------------------
# 12.5 Efficient and sparse attention. Sliding windows (local, Longformer) keep softmax
# attention exact on a sparse pattern and never build the L x S matrix; kernelized
# attention (linear, Performer) replaces exp(q.k) by phi(q).phi(k) and reorders the
# product; Linformer projects the length axis of the keys and values.
# ---------------------------------------------------------------------------------------


def band_mask(L: int, window: int, *, is_causal: bool = False, device=None) -> torch.Tensor:
    """Boolean ``(L, L)`` sliding-window mask: True where ``|i - j| <= window``
    (causal: ``i - window <= j <= i``). For tests and figures; `local_attention` never builds it.

    >>> band_mask(4, 1).int()
    tensor([[1, 1, 0, 0],
            [1, 1, 1, 0],
            [0, 1, 1, 1],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    pos = torch.arange(L, device=device)
    offset = pos[None, :] - pos[:, None]                                # (L, L): j - i
    return (offset >= -window) & (offset <= (0 if is_causal else window))


def longformer_mask(L: int, window: int, global_tokens, *, is_causal: bool = False,
                    device=None) -> torch.Tensor:
    """Boolean ``(L, L)`` mask of `longformer_attention`: the band plus the global tokens'
    rows and columns (causal: then only ``j <= i``). For tests and figures."""
    g = _global_index(global_tokens, L, device)
    allowed = band_mask(L, window, device=device)
    allowed[:, g] = True
    allowed[g, :] = True
    return allowed & causal_mask(L, device=device) if is_causal else allowed


def _global_index(global_tokens, L: int, device) -> torch.Tensor:
    """Sorted, de-duplicated global positions as a long tensor (g,), each in [0, L)."""
    if isinstance(global_tokens, torch.Tensor) and global_tokens.dtype == torch.bool:
        raise TypeError(f"global_tokens are positions, got a bool tensor of shape "
                        f"{tuple(global_tokens.shape)}; for a bool mask of the global positions pass "
                        "mask.nonzero().flatten()")
    if isinstance(global_tokens, torch.Tensor) and global_tokens.is_floating_point():
        raise TypeError(f"global_tokens are integer positions, got dtype {global_tokens.dtype}")
    g = torch.as_tensor(global_tokens, dtype=torch.long, device=device).reshape(-1).unique()  # (g,)
    if g.numel() and (g.min() < 0 or g.max() >= L):
        raise ValueError(f"global_tokens must be positions in [0, {L}) for L = {L}, got {g.tolist()}")
    return g


def _gather_mask(mask: torch.Tensor, rows, cols, L: int, S: int) -> torch.Tensor:
    """``mask[..., rows, cols]`` of a bool mask broadcastable to (..., L, S), read through a
    broadcast view (never copied to L x S). Out-of-range indices are clamped: mask them yourself."""
    while mask.dim() < 2:
        mask = mask.unsqueeze(0)
    mask = mask.expand(*mask.shape[:-2], L, S)                          # (..., L, S), a view
    return mask[..., rows.clamp(0, L - 1), cols.clamp(0, S - 1)]


def _masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim where ``allowed``; a row with nothing allowed gets zeros
    (not NaN), with finite gradients."""
    some = allowed.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~allowed, float("-inf")).masked_fill(~some, 0.0)
    return scores.softmax(dim=-1).masked_fill(~some, 0.0)


_GROUPS = 16              # a sliding window's chunks run in at most 16 groups, one at a time,
_GROUP_SCORES = 2 ** 17   # of at least 2^17 scores each (512 kB in float32): short inputs in one


@dataclass(frozen=True)
class _Band:
    """A sliding window cut into ``n`` chunks of ``c`` queries. Chunk t holds queries
    ``t c ... t c + c - 1`` and sees keys ``t c - left ... t c + c - 1 + right``: its scores
    are ``(c, c + left + right)``. The chunks run in groups of ``per_group``, so only one
    group's scores are alive at a time: up to 16 groups, each with at least 2^17 scores
    (over the batch and heads), so that long sequences keep about 1/16 of the band's
    scores alive and short ones run in one pass, without a Python loop's overhead."""

    n: int
    c: int
    left: int
    right: int
    per_group: int

    @classmethod
    def of(cls, L: int, window: int, is_causal: bool, block_size: int | None,
           batch: int = 1) -> "_Band":
        """The band of ``window`` over L positions; ``batch``: how many (batch x heads) rows
        share it, which sets the group size."""
        w = min(window, L - 1)                                          # a wider window sees nothing more
        c = min(L, max(w, 1) if block_size is None else block_size)
        n, right = -(-L // c), 0 if is_causal else w
        scores = batch * n * c * (c + w + right)
        groups = min(_GROUPS, n, max(1, scores // _GROUP_SCORES))
        return cls(n, c, w, right, -(-n // groups))

    @property
    def width(self) -> int:
        """Keys each chunk sees: ``c + left + right``."""
        return self.c + self.left + self.right

    def groups(self):
        """``(t0, t1)``: the chunks ``t0 ... t1 - 1`` of each group, in order."""
        for t0 in range(0, self.n, self.per_group):
            yield t0, min(t0 + self.per_group, self.n)

    def chunks(self, x: torch.Tensor, t0: int, t1: int) -> torch.Tensor:
        """(..., L, E) -> (..., t1 - t0, c, E): chunks t0 ... t1 - 1, zero rows past the end."""
        rows = x[..., t0 * self.c:t1 * self.c, :]                       # (..., <= (t1 - t0) c, E)
        rows = F.pad(rows, (0, 0, 0, (t1 - t0) * self.c - rows.shape[-2]))  # (..., (t1 - t0) c, E)
        return rows.unflatten(-2, (t1 - t0, self.c))                     # (..., t1 - t0, c, E)

    def bands(self, x: torch.Tensor, t0: int, t1: int) -> torch.Tensor:
        """(..., L, E) -> (..., t1 - t0, width, E): the rows chunks t0 ... t1 - 1 see, zero
        outside [0, L)."""
        L, lo, hi = x.shape[-2], t0 * self.c - self.left, t1 * self.c + self.right
        rows = x[..., max(lo, 0):min(hi, L), :]                         # (..., inside [0, L), E)
        rows = F.pad(rows, (0, 0, max(-lo, 0), max(hi - L, 0)))         # (..., hi - lo, E)
        return rows.unfold(-2, self.width, self.c).transpose(-2, -1)    # (..., t1 - t0, width, E)

    def positions(self, device, t0: int, t1: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Absolute query positions (t1 - t0, c, 1) and key positions (t1 - t0, 1, width)."""
        qi = torch.arange(t0 * self.c, t1 * self.c, device=device).view(t1 - t0, self.c, 1)  # (t, c, 1)
        kj = qi[:, :1] - self.left + torch.arange(self.width, device=device)             # (t, 1, width)
        return qi, kj

    def allowed(self, L: int, mask, device, t0: int, t1: int) -> torch.Tensor:
        """(t1 - t0, c, width) bool, or (..., t1 - t0, c, width) with a mask: inside the
        window and inside [0, L)."""
        qi, kj = self.positions(device, t0, t1)
        ok = (kj >= qi - self.left) & (kj <= qi + self.right) & (kj >= 0) & (kj < L) & (qi < L)
        return ok if mask is None else ok & _gather_mask(mask, qi, kj, L, L)


def _check_window(name: str, q, k, v, mask, window, block_size, scale=None, dropout_p=0.0) -> None:
    check_attention_inputs(q, k, v, mask, scale=scale, dropout_p=dropout_p)
    check_self_attention(name, q, k, v)
    check_nonnegative_int("window", window)
    if block_size is not None:
        check_positive_int("block_size", block_size)


def _local_explicit(q, k, v, *, window, mask=None, is_causal=False, scale=None, block_size=None,
                    dropout_p=0.0):
    """`local_attention` with its weights: `naive_attention` under `band_mask`."""
    _check_window("local_attention", q, k, v, mask, window, block_size, scale, dropout_p)
    allowed = band_mask(q.shape[-2], window, is_causal=is_causal, device=q.device)   # (L, L)
    return naive_attention(q, k, v, mask=allowed if mask is None else allowed & mask, scale=scale,
                           dropout_p=dropout_p, return_weights=True)


@attention_kernel(mask=True, causal=True, dropout=True, exact=True, explicit=_local_explicit)
def local_attention(q, k, v, *, window: int, mask=None, is_causal=False, scale=None,
                    block_size: int | None = None, dropout_p: float = 0.0):
    """Sliding-window (local) self-attention: query i sees keys j with ``|i - j| <= window``
    (causal: ``i - window <= j <= i``), computed chunk by chunk, never as an L x L matrix.

    Math: ``softmax(Q K^T * scale, masked to the band) V``: `naive_attention` under `band_mask`.
    Cost: time O(L (c + 2w) D), memory O(L Dv + L (c + 2w) / 16) with w = window and
    c = block_size (default w), against O(L^2) for full attention: a long sequence's chunks
    run in 16 groups, one group's scores alive at a time (at L = 16384, w = 128 the forward
    peak is 0.74x the band's own scores, L (2w + 1) floats); a short one (under 2^17 scores)
    runs in one pass. With autograd every group's weights are kept for the backward pass.
    Shapes: q (..., L, D), k (..., L, D), v (..., L, Dv) -> (..., L, Dv); needs L == S.
    ``block_size``: queries per chunk (default ``max(window, 1)``); ``mask``: optional bool,
    True = may attend, broadcastable to (..., L, L), read only inside the band.

    >>> q = k = v = torch.randn(1, 2, 10, 4)
    >>> local_attention(q, k, v, window=2).shape
    torch.Size([1, 2, 10, 4])
    """
    _check_window("local_attention", q, k, v, mask, window, block_size, scale, dropout_p)
    L = q.shape[-2]
    if L == 0:                                                              # nothing to attend: (..., 0, Dv)
        return v.new_zeros(v.shape)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    band = _Band.of(L, window, is_causal, block_size, batch=q[..., 0, 0].numel())
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                          # (..., L, Dv)
    for t0, t1 in band.groups():                                           # one group's scores at a time
        q_c = band.chunks(q, t0, t1) * scale                               # (..., t, c, D)
        scores = q_c @ band.bands(k, t0, t1).transpose(-2, -1)             # (..., t, c, width)
        weights = _masked_softmax(scores, band.allowed(L, mask, q.device, t0, t1))
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        _write_rows(out, weights @ band.bands(v, t0, t1), t0 * band.c)      # (..., t, c, Dv)
    return out


def _write_rows(out: torch.Tensor, chunks: torch.Tensor, start: int) -> None:
    """Copy (..., t, c, Dv) chunk outputs into rows ``start ...`` of out (..., L, Dv), dropping
    the rows past L."""
    rows = chunks.flatten(-3, -2)                                           # (..., t c, Dv)
    stop = min(start + rows.shape[-2], out.shape[-2])
    out[..., start:stop, :] = rows[..., :stop - start, :]


def _longformer_explicit(q, k, v, *, window, global_tokens, mask=None, is_causal=False, scale=None,
                         block_size=None, dropout_p=0.0):
    """`longformer_attention` with its weights: `naive_attention` under `longformer_mask`."""
    _check_window("longformer_attention", q, k, v, mask, window, block_size, scale, dropout_p)
    allowed = longformer_mask(q.shape[-2], window, global_tokens, is_causal=is_causal,
                              device=q.device)                                          # (L, L)
    return naive_attention(q, k, v, mask=allowed if mask is None else allowed & mask, scale=scale,
                           dropout_p=dropout_p, return_weights=True)


@attention_kernel(mask=True, causal=True, dropout=True, exact=True, explicit=_longformer_explicit)
def longformer_attention(q, k, v, *, window: int, global_tokens, mask=None, is_causal=False,
                         scale=None, block_size: int | None = None, dropout_p: float = 0.0):
    """Longformer attention: a sliding window plus global tokens that attend to every key and
    that every query attends to (causal: only global tokens in the past, ``j <= i``).

    Math: `naive_attention` under `longformer_mask`; exact, computed in three parts: every
    query against its band (global keys left out) and the g global keys in one softmax,
    then the g global queries against all keys.
    Cost: time O(L (c + 2w + 2g) D), memory O(L Dv + L (c + 2w + g) / 16); c = block_size
    (default w); the chunks run in groups, as in `local_attention`.
    Shapes: q (..., L, D), k (..., L, D), v (..., L, Dv) -> (..., L, Dv); needs L == S.
    ``global_tokens``: positions (a list or a long tensor, each in [0, L)); ``mask`` as in
    `local_attention`.
    """
    _check_window("longformer_attention", q, k, v, mask, window, block_size, scale, dropout_p)
    L = q.shape[-2]
    if L == 0:                                                              # nothing to attend: (..., 0, Dv)
        return v.new_zeros(v.shape)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    g = _global_index(global_tokens, L, q.device)                          # (g,)
    band = _Band.of(L, window, is_causal, block_size, batch=q[..., 0, 0].numel())
    k_g, v_g = k[..., None, g, :], v[..., None, g, :]                       # (..., 1, g, D), (..., 1, g, Dv)
    out = q.new_empty(*q.shape[:-1], v.shape[-1])                          # (..., L, Dv)
    # 1. every query: its band without the global keys (so none counts twice), and the global
    #    keys; one group of chunks at a time
    for t0, t1 in band.groups():
        q_c = band.chunks(q, t0, t1) * scale                               # (..., t, c, D)
        scores = torch.cat([q_c @ band.bands(k, t0, t1).transpose(-2, -1),
                            q_c @ k_g.transpose(-2, -1)], dim=-1)           # (..., t, c, width + g)
        weights = _masked_softmax(scores, _longformer_allowed(band, g, L, mask, is_causal, q.device,
                                                              t0, t1))
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        w_band, w_glob = weights.split([band.width, len(g)], dim=-1)
        _write_rows(out, w_band @ band.bands(v, t0, t1) + w_glob @ v_g, t0 * band.c)  # (..., t, c, Dv)
    # 2. the global queries: full rows
    keys = torch.arange(L, device=q.device)
    rows = keys <= g[:, None] if is_causal else None                       # (g, L)
    if mask is not None:
        picked = _gather_mask(mask, g[:, None], keys, L, L)                 # (..., g, L)
        rows = picked if rows is None else picked & rows
    out_g = naive_attention(q[..., g, :], k, v, mask=rows, scale=scale, dropout_p=dropout_p)  # (..., g, Dv)
    return out.index_copy_(-2, g, out_g)                                    # (..., L, Dv)


def _longformer_allowed(band: _Band, g, L: int, mask, is_causal: bool, device, t0: int,
                        t1: int) -> torch.Tensor:
    """(t, c, width + g) bool, or (..., t, c, width + g) with a mask, for chunks t0 ... t1 - 1:
    band keys that are not global, then the global keys (causal: those at or before the query)."""
    qi, kj = band.positions(device, t0, t1)
    is_global = torch.zeros(L, dtype=torch.bool, device=device).index_fill(0, g, True)   # (L,)
    in_band = band.allowed(L, mask, device, t0, t1) & ~is_global[kj.clamp(0, L - 1)]   # (..., t, c, width)
    to_global = (qi < L) & ((g <= qi) | (not is_causal))                                # (t, c, g)
    if mask is not None:
        to_global = to_global & _gather_mask(mask, qi, g, L, L)                          # (..., t, c, g)
    return torch.cat([in_band, to_global], dim=-1)


@attention_kernel(causal=False, dropout=True, module=True, fixed_length=True)
class LinformerAttention(nn.Module):
    """Linformer (Wang et al. 2020): learned projections ``E, F (k x seq_len)`` shorten the
    keys and values along the length axis, then softmax attention runs against k rows.

    Math: ``softmax(Q (E K)^T * scale) (F V)``; ``E, F`` start as ``N(0, 1/k)`` entries
    (the paper's Johnson-Lindenstrauss choice); ``share_kv=True`` uses one matrix for both.
    Cost: time O(L k D + S k D), memory O(L k), against O(L S) for full attention.
    Shapes: q (..., L, D), k (..., seq_len, D), v (..., seq_len, Dv) -> (..., L, Dv).

    Not causal: every projected key mixes all ``seq_len`` positions, future ones included,
    so no mask on the k projected keys can hide the future; ``is_causal=True`` raises, as
    does a ``mask`` (it would have to act before the projection). Use it as a kernel by
    passing an instance, ``MultiHeadAttention(d, h, kernel=LinformerAttention(L, 32))``:
    it becomes a submodule and trains. Its parameters are shared by all heads, and by all
    layers given the same instance (the paper's "layerwise sharing").

    >>> lin = LinformerAttention(seq_len=10, k=4)
    >>> lin(torch.randn(2, 3, 10, 8), torch.randn(2, 3, 10, 8), torch.randn(2, 3, 10, 8)).shape
    torch.Size([2, 3, 10, 8])
    """

    def __init__(self, seq_len: int, k: int, *, share_kv: bool = False):
        super().__init__()
        self.seq_len, self.proj_len = check_positive_int("seq_len", seq_len), check_positive_int("k", k)
        self.share_kv = share_kv
        self.E = nn.Parameter(torch.randn(k, seq_len) * k ** -0.5)
        self.register_parameter("F", None if share_kv else nn.Parameter(torch.randn(k, seq_len) * k ** -0.5))

    def forward(self, q, k, v, *, mask=None, is_causal=False, scale=None, dropout_p: float = 0.0):
        check_attention_inputs(q, k, v, scale=scale, dropout_p=dropout_p)
        if is_causal:
            raise ValueError("LinformerAttention cannot be causal: each projected key mixes all "
                             f"{self.seq_len} positions, future ones included; use local, linear or "
                             "performer attention for causal models")
        check_no_mask("LinformerAttention", mask, "a mask over (L, S) cannot act after the "
                      "length axis is projected to k rows")
        if k.shape[-2] != self.seq_len:
            raise ValueError(f"LinformerAttention was built for seq_len {self.seq_len}, got k length "
                             f"{k.shape[-2]}; expected q (B,H,L,D), k (B,H,{self.seq_len},D), "
                             f"v (B,H,{self.seq_len},Dv), got {tuple(q.shape)}, {tuple(k.shape)}, "
                             f"{tuple(v.shape)}")
        proj_v = self.E if self.F is None else self.F
        k_low = torch.einsum("ps,...sd->...pd", self.E, k)                 # (..., k, D)
        v_low = torch.einsum("ps,...sd->...pd", proj_v, v)                 # (..., k, Dv)
        return naive_attention(q, k_low, v_low, scale=scale, dropout_p=dropout_p)

    def extra_repr(self) -> str:
        return f"seq_len={self.seq_len}, k={self.proj_len}, share_kv={self.share_kv}"


# --- kernelized attention: linear (elu + 1) and Performer (FAVOR+) ---------------------

_NO_MASK = "kernelized attention never forms the (L, S) scores, so an arbitrary mask cannot apply"


def _nonzero(den: torch.Tensor) -> torch.Tensor:
    """Guard a normaliser against underflow to 0 (changes nothing otherwise)."""
    return den.clamp_min(torch.finfo(den.dtype).tiny)


def _kernelized(phi_q, phi_k, v) -> torch.Tensor:
    """Non-causal ``phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)``: no (L, S) matrix.
    Shapes: phi_q (..., L, m), phi_k (..., S, m), v (..., S, Dv) -> (..., L, Dv)."""
    kv = phi_k.transpose(-2, -1) @ v                                       # (..., m, Dv)
    z = phi_k.sum(dim=-2).unsqueeze(-1)                                    # (..., m, 1)
    return (phi_q @ kv) / _nonzero(phi_q @ z)                              # (..., L, Dv)


def _kernelized_causal(phi_q, phi_k, v, *, chunk_size: int, log_keys: bool = False) -> torch.Tensor:
    """Causal kernelized attention by chunked prefix sums (linear and Performer attention).

    Within a chunk, the masked (c, c) product ``tril(phi(Q_c) phi(K_c)^T)``; across chunks,
    the running state ``S = sum_j phi(k_j) v_j^T`` (m, Dv) and ``z = sum_j phi(k_j)`` (m, 1).
    Memory per head O(c^2 + c m + m Dv) without autograd (with it, one state per chunk).
    ``log_keys``: phi_k holds log-features, exponentiated chunk by chunk against the running
    maximum so far (the state is rescaled when it grows): stable, it cancels in the ratio,
    and no later chunk can underflow an earlier one. Queries and keys align at the top left.
    Shapes: phi_q (..., L, m), phi_k (..., S, m), v (..., S, Dv) -> (..., L, Dv).
    """
    *batch, L, m = phi_q.shape
    S, z, top = phi_q.new_zeros(*batch, m, v.shape[-1]), phi_q.new_zeros(*batch, m, 1), None
    outs = []
    for t in range(0, L, chunk_size):
        qc = phi_q[..., t:t + chunk_size, :]                                # (..., c, m)
        kc, vc = phi_k[..., t:t + chunk_size, :], v[..., t:t + chunk_size, :]  # (..., c', m), (..., c', Dv)
        if log_keys and kc.shape[-2]:
            kc, S, z, top = _exp_running_max(kc, S, z, top)
        scores = (qc @ kc.transpose(-2, -1)).tril()                         # (..., c, c'): j <= i
        num = qc @ S + scores @ vc                                          # (..., c, Dv)
        den = qc @ z + scores.sum(dim=-1, keepdim=True)                     # (..., c, 1)
        outs.append(num / _nonzero(den))
        S = S + kc.transpose(-2, -1) @ vc                                   # (..., m, Dv)
        z = z + kc.sum(dim=-2).unsqueeze(-1)                                # (..., m, 1)
    if not outs:                                                            # L = 0
        return v.new_zeros(*batch, 0, v.shape[-1])
    return torch.cat(outs, dim=-2)                                          # (..., L, Dv)


def _exp_running_max(log_kc, S, z, top):
    """``exp(log_kc - M)``, M the running max of the log-features so far (detached, it cancels);
    (S, z) rescaled from the old M to the new one."""
    new = log_kc.detach().amax(dim=(-2, -1), keepdim=True)                 # (..., 1, 1)
    if top is not None:
        new = torch.maximum(new, top)
        shrink = torch.exp(top - new)                                       # <= 1
        S, z = S * shrink, z * shrink
    return torch.exp(log_kc - new), S, z, new


def _elu_features(q, k, scale):
    """phi(x) = elu(x) + 1 > 0 of ``q * scale`` and ``k`` (scale None: 1, as in the paper)."""
    q = q if scale is None else q * scale
    return F.elu(q) + 1, F.elu(k) + 1


@attention_kernel(causal=True)
def linear_attention(q, k, v, *, mask=None, is_causal=False, scale=None, chunk_size: int = 64):
    """Linear attention (Katharopoulos et al. 2020): softmax's ``exp(q.k)`` replaced by
    ``phi(q).phi(k)`` with ``phi(x) = elu(x) + 1``, so the product can be reordered.

    Math: ``out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / phi(q_i)^T sum_j phi(k_j)``, sums over
    all j, or j <= i when causal (top-left aligned, as SDPA; chunked prefix sums,
    `linear_attention_recurrent` is the same function step by step).
    Cost: time O((L + S) D Dv), plus O(L c D) causal; memory O(D Dv + L Dv), causal per
    chunk O(c^2 + c D + D Dv); never O(L S).
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``scale`` multiplies q before the feature map (default None: 1, not 1/sqrt(D));
    ``chunk_size``: positions per chunk of the causal prefix sums. No ``mask``: the (L, S)
    scores are never formed.
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_no_mask("linear_attention", mask, _NO_MASK)
    check_positive_int("chunk_size", chunk_size)
    phi_q, phi_k = _elu_features(q, k, scale)                              # (..., L, D), (..., S, D)
    if is_causal:
        return _kernelized_causal(phi_q, phi_k, v, chunk_size=chunk_size)
    return _kernelized(phi_q, phi_k, v)


class LinearAttentionState(NamedTuple):
    """The constant-size memory of causal linear attention after some steps."""

    S: torch.Tensor   # (..., D, Dv): sum_j phi(k_j) v_j^T
    z: torch.Tensor   # (..., D): sum_j phi(k_j)


def linear_attention_recurrent(q, k, v, *, state: LinearAttentionState | None = None, scale=None,
                               return_state: bool = False):
    """Causal `linear_attention` as an RNN: one step per position, a state of constant size.

    Math: ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``z_t = z_{t-1} + phi(k_t)``,
    ``out_t = S_t^T phi(q_t) / z_t . phi(q_t)``, ``phi(x) = elu(x) + 1``.
    Cost: time O(L D Dv); memory O(D Dv) for the state whatever L (plus the outputs).
    Shapes: q (..., L, D), k (..., L, D), v (..., L, Dv) -> (..., L, Dv); with
    ``return_state`` also the final `LinearAttentionState`, which a later call takes as
    ``state`` to continue the stream.

    >>> q = k = v = torch.randn(1, 1, 6, 4)
    >>> out, st = linear_attention_recurrent(q[..., :3, :], k[..., :3, :], v[..., :3, :], return_state=True)
    >>> rest = linear_attention_recurrent(q[..., 3:, :], k[..., 3:, :], v[..., 3:, :], state=st)
    >>> torch.allclose(torch.cat([out, rest], -2), linear_attention(q, k, v, is_causal=True), atol=1e-6)
    True
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_self_attention("linear_attention_recurrent", q, k, v)
    *batch, L, D = q.shape
    if state is None:
        state = LinearAttentionState(q.new_zeros(*batch, D, v.shape[-1]), q.new_zeros(*batch, D))
    check_shape("state.S", state.S, (*batch, D, v.shape[-1]), "(..., D, Dv)")
    check_shape("state.z", state.z, (*batch, D), "(..., D)")
    phi_q, phi_k = _elu_features(q, k, scale)                              # (..., L, D) each
    S, z = state
    outs = []
    for t in range(L):
        S = S + phi_k[..., t, :, None] * v[..., t, None, :]                 # (..., D, Dv)
        z = z + phi_k[..., t, :]                                            # (..., D)
        num = (phi_q[..., t, :, None] * S).sum(dim=-2)                      # (..., Dv)
        den = (phi_q[..., t, :] * z).sum(dim=-1, keepdim=True)              # (..., 1)
        outs.append(num / _nonzero(den))
    out = torch.stack(outs, dim=-2) if outs else v.new_zeros(*batch, 0, v.shape[-1])  # (..., L, Dv)
    return (out, LinearAttentionState(S, z)) if return_state else out


def _as_generator(generator):
    """None (the global RNG), a torch.Generator, or an int seed for a fresh CPU generator."""
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool):
        return torch.Generator().manual_seed(generator)
    raise TypeError("generator must be None, a torch.Generator or an int seed, "
                    f"got {type(generator).__name__}")


def orthogonal_random_features(num_features: int, dim: int, *, generator=None, dtype=None,
                               device=None) -> torch.Tensor:
    """FAVOR+ projections ``W (num_features, dim)``: blocks of ``dim`` orthogonal rows (QR of
    a Gaussian matrix), each row's norm redrawn from chi(dim) so that rows are marginally
    ``N(0, I)``, as in Choromanski et al. (2021). Drawn in float64 on the generator's device.
    ``generator``: None (global RNG), a ``torch.Generator`` or an int seed.
    """
    check_positive_int("num_features", num_features)
    check_positive_int("dim", dim)
    gen = _as_generator(generator)
    where = gen.device if gen is not None else torch.device("cpu")
    gauss = torch.randn(-(-num_features // dim), dim, dim, generator=gen, dtype=torch.float64,
                        device=where)                                      # (blocks, D, D)
    Q, R = torch.linalg.qr(gauss)
    Q = Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)              # fix QR's signs: Haar
    rows = Q.transpose(-2, -1).reshape(-1, dim)[:num_features]             # (m, D), unit rows
    norms = torch.randn(num_features, dim, generator=gen, dtype=torch.float64,
                        device=where).norm(dim=-1, keepdim=True)           # (m, 1) ~ chi(D)
    return (rows * norms).to(device=device, dtype=dtype or torch.get_default_dtype())


def _favor_log(x, w):
    """log phi(x) = ``w x - |x|^2 / 2 - log(m) / 2``. Shapes: x (..., L, D), w (m, D) -> (..., L, m)."""
    return x @ w.transpose(-2, -1) - x.pow(2).sum(dim=-1, keepdim=True) / 2 - math.log(w.shape[0]) / 2


def favor_features(x, w):
    """FAVOR+ positive random features ``phi(x) = exp(w x - |x|^2 / 2) / sqrt(m)``, unbiased:
    ``E[phi(x) . phi(y)] = exp(x . y)`` for rows of w drawn N(0, I). Unstabilised (for
    analysis; `performer_attention` subtracts maxima). Shapes: x (..., L, D), w (m, D) -> (..., L, m)."""
    return torch.exp(_favor_log(x, w))


@attention_kernel(causal=True)
def performer_attention(q, k, v, *, num_features: int, mask=None, is_causal=False, generator=None,
                        scale=None, chunk_size: int = 64):
    """Performer attention (FAVOR+, Choromanski et al. 2021): softmax attention estimated with
    positive orthogonal random features, in linear time.

    Math: ``exp(q.k * scale) ~= phi(q').phi(k')`` with ``x' = x sqrt(scale)`` (scale 1/sqrt(D):
    x D^-1/4) and ``phi`` = `favor_features` over `orthogonal_random_features`; then as
    `linear_attention`, causal (top-left aligned) by the same chunked prefix sums. Maxima are
    subtracted in the exponents for stability (per query, and a running one over the keys):
    they cancel.
    Cost: time O((L + S) m D + (L + S) m Dv), plus O(L c m) causal; memory O((L + S) m + m Dv),
    never O(L S); m = num_features.
    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    ``generator``: None draws fresh features from the global RNG on every call; a
    ``torch.Generator`` continues its stream; an int seed gives the same features every call.
    No ``mask``: the (L, S) scores are never formed.
    """
    check_attention_inputs(q, k, v, scale=scale)
    check_no_mask("performer_attention", mask, _NO_MASK)
    check_positive_int("chunk_size", chunk_size)
    if 0 in (q.shape[-2], k.shape[-2]):                                     # no query or no key
        return v.new_zeros(*q.shape[:-1], v.shape[-1])                      # (..., L, Dv), as SDPA
    D = q.shape[-1]
    root = (D ** -0.5 if scale is None else scale) ** 0.5                   # half the scale on q, half on k
    w = orthogonal_random_features(num_features, D, generator=generator, dtype=q.dtype, device=q.device)
    log_q, log_k = _favor_log(q * root, w), _favor_log(k * root, w)        # (..., L, m), (..., S, m)
    phi_q = torch.exp(log_q - log_q.detach().amax(dim=-1, keepdim=True))   # per-query constant: cancels
    if is_causal:
        return _kernelized_causal(phi_q, log_k, v, chunk_size=chunk_size, log_keys=True)
    phi_k = torch.exp(log_k - log_k.detach().amax(dim=(-2, -1), keepdim=True))  # one per head: cancels
    return _kernelized(phi_q, phi_k, v)


_BACKEND_OPS = {           # the aten op each SDPA backend dispatches to
    "flash": "flash_attention", "efficient": "efficient_attention",
    "cudnn": "cudnn_attention", "math": "attention_math",
}


def sdpa_backend_used(q, k, v, *, is_causal=False) -> str:
    """Which backend ``F.scaled_dot_product_attention`` ran for these inputs, as the
    profiler saw it: ``"flash"``, ``"efficient"``, ``"cudnn"`` or ``"math"``."""
    from torch.profiler import ProfilerActivity, profile

    from .timing import _quiet_stderr

    activities = [ProfilerActivity.CPU]
    if q.is_cuda:
        activities.append(ProfilerActivity.CUDA)
    with torch.no_grad(), _quiet_stderr(), profile(activities=activities) as prof:
        sdpa(q, k, v, is_causal=is_causal)
    names = {event.name for event in prof.events()}
    for backend, op in _BACKEND_OPS.items():
        if any(op in name for name in names):
            return backend
    return "unknown"


KERNELS: dict[str, Kernel] = {
    "naive": naive_attention,
    "sdpa": sdpa,
    "flash": flash_attention,
    # 12.5, with defaults for the book's series (a few hundred steps); call the functions
    # themselves for other windows or feature counts.
    "local": partial(local_attention, window=16),
    "longformer": partial(longformer_attention, window=16, global_tokens=(0,)),
    "linear": linear_attention,
    "performer": partial(performer_attention, num_features=128, generator=0),  # seed 0: fixed features
}


def get_kernel(kernel: str | Kernel) -> Kernel:
    """Resolve a kernel given by name (a key of `KERNELS`) or as a callable."""
    if isinstance(kernel, type) and getattr(kernel, "spec", UNDECLARED).module:
        raise TypeError(f"{kernel.__name__} is a module class: pass an instance, "
                        f"e.g. {kernel.__name__}(...) with its arguments")
    if callable(kernel):
        return kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown attention kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    return KERNELS[kernel]
