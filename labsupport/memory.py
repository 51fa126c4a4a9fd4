"""Memory for long sequences: Transformer-XL's segment recurrence and the Compressive
Transformer's compressed long-term memory.

A long series is cut into segments of ``L`` steps. Each layer caches its *input* hidden
states of past segments (detached: gradients stop at the segment boundary) and its
queries attend to ``concat(memory, segment)`` under a causal mask. With ``n_layers``
layers the receptive field grows to about ``n_layers * mem_len`` steps back, at a cost
of ``O(L (M + L))`` per segment instead of ``O(T^2)`` for the whole series.

Masks are boolean, ``True`` = may attend (the SDPA convention). Positions are relative
(Transformer-XL's scores, `labsupport.positional.XLRelativePosition`), so a cached state
needs no absolute index.

>>> enc = SegmentRecurrentEncoder(d_model=8, n_heads=2, n_layers=2, mem_len=6)
>>> out, memory = enc(torch.zeros(3, 4, 8))
>>> out.shape, [tuple(m.shape) for m in memory]
(torch.Size([3, 4, 8]), [(3, 4, 8), (3, 4, 8)])
>>> out, memory = enc(torch.zeros(3, 4, 8), memory)
>>> [tuple(m.shape) for m in memory]
[(3, 6, 8), (3, 6, 8)]
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .attention import causal_mask, naive_attention
from .layers import TransformerBlock
from .positional import XLRelativePosition
from .validation import check_nonnegative_int, check_positive_int, check_rank

COMPRESSIONS = ("pool", "conv")


def _check_state(name: str, t, x: torch.Tensor, max_len: int, d_model: int) -> None:
    """``t`` is (B, <= max_len, d_model) with x's batch size, dtype and device."""
    check_rank(name, t, 3, f"(B, <={max_len}, {d_model})")
    B = x.shape[0]
    if t.shape[0] != B or t.shape[1] > max_len or t.shape[2] != d_model:
        raise ValueError(f"{name} must be (B, <={max_len}, {d_model}) with B = {B} as in the "
                         f"input {tuple(x.shape)}, got {tuple(t.shape)}")
    if t.dtype != x.dtype or t.device != x.device:
        raise ValueError(f"{name} is {t.dtype} on {t.device} but the input {tuple(x.shape)} is "
                         f"{x.dtype} on {x.device}")


def _last(t: torch.Tensor, n: int) -> torch.Tensor:
    """The last ``n`` positions of t (B, S, d); ``n = 0`` gives (B, 0, d), not all of t."""
    return t[:, max(t.shape[1] - n, 0):]


def memory_mask(L: int, P: int, *, device=None) -> torch.Tensor:
    """Boolean (L, P + L) mask, True = may attend: every query sees all ``P`` cached
    states and the segment's keys up to itself (query i sees key j iff j <= P + i): the
    bottom-right causal mask that ``is_causal`` gives `labsupport.layers.MultiHeadAttention`.

    >>> memory_mask(2, 3).int()
    tensor([[1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1]], dtype=torch.int32)
    """
    return causal_mask(L, P + L, bottom_right=True, device=device)


# --- Compressive Transformer memory ----------------------------------------------------

class CompressiveMemory(nn.Module):
    """The Compressive Transformer's memory for one layer (Rae et al., 2020).

    A short-term memory (B, <= mem_len, d) keeps recent states exactly; the states that
    overflow it are compressed at ``rate`` c (every c states -> one) and appended to a
    compressed memory (B, <= cmem_len, d) that keeps its last ``cmem_len`` slots.
    ``compression="pool"`` averages each group; ``"conv"`` is a learned Conv1d with
    kernel = stride = c, initialised to the average (so untrained it equals ``pool``).

    Math: reach ``mem_len + rate * cmem_len`` steps back (plus the segment) with
    ``mem_len + cmem_len`` slots; Transformer-XL with the same slots reaches
    ``mem_len + cmem_len``.
    Cost: attention over ``cmem_len + mem_len + L`` keys; compression O(L d) per update
    (pool) or O(L d^2) (conv).

    Overflow that is not a multiple of c: whole groups are evicted, rounding *up*, so a
    few states may leave the short-term memory early (it then holds between
    ``mem_len - c + 1`` and ``mem_len`` states). Groups therefore always hold c states
    and are aligned to the start of the stream: compressed slot k summarises stream
    steps ``k c .. k c + c - 1``, whatever the segment length. This needs
    ``mem_len >= rate - 1``.

    Both memories are detached: `update` builds no graph, so a ``conv`` compressor gets
    no gradient from the model's loss. Train it as the paper does, with an auxiliary
    loss on the differentiable `compress` (see `attention_reconstruction_loss`).
    """

    def __init__(self, d_model: int, *, mem_len: int, cmem_len: int, rate: int,
                 compression: str = "pool"):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.mem_len = check_nonnegative_int("mem_len", mem_len)
        self.cmem_len = check_positive_int("cmem_len", cmem_len)
        self.rate = check_positive_int("rate", rate)
        if mem_len < rate - 1:
            raise ValueError(f"mem_len {mem_len} < rate - 1 = {rate - 1}: the short-term memory "
                             "must hold the states of a partly filled group")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {list(COMPRESSIONS)}, "
                             f"got {compression!r}")
        self.compression = compression
        self.conv = self._averaging_conv(d_model, rate) if compression == "conv" else None

    @staticmethod
    def _averaging_conv(d_model: int, rate: int) -> nn.Conv1d:
        conv = nn.Conv1d(d_model, d_model, kernel_size=rate, stride=rate)
        with torch.no_grad():
            conv.weight.copy_(torch.eye(d_model)[:, :, None].expand(-1, -1, rate) / rate)
            conv.bias.zero_()
        return conv

    @property
    def reach(self) -> int:
        """How many past steps the memories can summarise: ``mem_len + rate * cmem_len``."""
        return self.mem_len + self.rate * self.cmem_len

    def compress(self, states: torch.Tensor) -> torch.Tensor:
        """Differentiable compression: (B, n, d) with n a multiple of rate -> (B, n / rate, d)."""
        check_rank("states", states, 3, f"(B, n, {self.d_model})")
        B, n, d = states.shape
        if n % self.rate or d != self.d_model:
            raise ValueError(f"states must be (B, n, {self.d_model}) with n a multiple of rate "
                             f"{self.rate}, got {tuple(states.shape)}")
        if self.conv is None:
            return states.view(B, n // self.rate, self.rate, d).mean(2)      # (B, n/c, d)
        out = self.conv(states.transpose(1, 2))                              # (B, d, n/c)
        return out.transpose(1, 2)                                           # (B, n/c, d)

    def init_state(self, batch_size: int, *, device=None, dtype=None):
        """Empty (memory, compressed): two (B, 0, d) tensors."""
        empty = torch.zeros(batch_size, 0, self.d_model, device=device, dtype=dtype)
        return empty, empty.clone()

    def update(self, memory, compressed, h):
        """Append h (B, L, d) to memory (B, M, d); compress the overflow onto compressed
        (B, C, d). Returns the new (memory, compressed), detached; None means empty."""
        check_rank("h", h, 3, f"(B, L, {self.d_model})")
        empty = self.init_state(h.shape[0], device=h.device, dtype=h.dtype)
        memory = empty[0] if memory is None else memory
        compressed = empty[1] if compressed is None else compressed
        _check_state("h", h, h, h.shape[1], self.d_model)
        _check_state("memory", memory, h, self.mem_len, self.d_model)
        _check_state("compressed", compressed, h, self.cmem_len, self.d_model)
        states = torch.cat((memory, h), dim=1).detach()                      # (B, M+L, d)
        overflow = states.shape[1] - self.mem_len
        evict = -(-overflow // self.rate) * self.rate if overflow > 0 else 0  # whole groups
        if evict:
            with torch.no_grad():
                new = self.compress(states[:, :evict])                      # (B, evict/c, d)
            compressed = _last(torch.cat((compressed, new), dim=1), self.cmem_len)
        return states[:, evict:], compressed.detach()

    @staticmethod
    def context(memory: torch.Tensor, compressed: torch.Tensor) -> torch.Tensor:
        """What attention reads: concat(compressed, memory), oldest first, (B, C + M, d)."""
        return torch.cat((compressed, memory), dim=1)


def attention_reconstruction_loss(attn, h, states, memory: CompressiveMemory) -> torch.Tensor:
    """The Compressive Transformer's auxiliary loss, which trains only the compressor.

    Math: ``|| attn(h, S) - attn(h, f_c(S)) ||^2`` (mean), content-based attention of
    the layer's projections (no positions), h and S and the attention weights held fixed.
    Shapes: h (B, L, d) the queries' inputs, states (B, n, d) the states being evicted
    (n a multiple of rate), attn a `labsupport.layers.MultiHeadAttention`.
    """
    h, states = h.detach(), states.detach()
    weights = {n: p.detach() for n, p in attn.named_parameters()}

    def content_attention(context):
        q = attn.split_heads(nn.functional.linear(h, weights["q_proj.weight"],
                                                  weights.get("q_proj.bias")))   # (B, H, L, hd)
        k = attn.split_heads(nn.functional.linear(context, weights["k_proj.weight"],
                                                  weights.get("k_proj.bias")))   # (B, H, S, hd)
        v = attn.split_heads(nn.functional.linear(context, weights["v_proj.weight"],
                                                  weights.get("v_proj.bias")))   # (B, H, S, hd)
        return attn.merge_heads(naive_attention(q, k, v))                        # (B, L, d)

    with torch.no_grad():
        target = content_attention(states)
    return (content_attention(memory.compress(states)) - target).pow(2).mean()


# --- Transformer-XL encoder ------------------------------------------------------------

@dataclass
class MemoryState:
    """Per-layer memories of a compressive encoder: lists of n_layers tensors,
    ``memory`` (B, M, d) short-term and ``compressed`` (B, C, d), both detached."""

    memory: list
    compressed: list


class SegmentRecurrentEncoder(nn.Module):
    """A pre-norm Transformer-XL encoder: causal self-attention over
    ``concat(memory_l, h_l)`` in every layer, and the cache passed from segment to segment.

    Math: ``h_{l+1} = Block_l(h_l; prefix = sg(m_l))``, with ``m_l`` layer l's input
    states of the last ``mem_len`` steps and ``sg`` stop-gradient: the block's own
    forward with keys and values from ``concat(m_l, h_l)``; query i of the segment sees
    every cached state and segment keys j <= i (``is_causal``, bottom-right).
    Cost: per segment and layer, time O(L (M + L) d), memory O(L (M + L)) scores plus
    the cache ``n_layers * M * d`` per series.
    Shapes: ``forward(x, memory=None) -> (out, new_memory)``, x (B, L, d_model),
    out (B, L, d_model), memory a list of n_layers tensors (B, M, d_model) with
    M <= mem_len (None: empty). ``new_memory[l]`` = last mem_len steps of
    ``concat(memory[l], h_l)``, detached. ``mem_len=0``: independent causal segments.

    Positions are relative: one `XLRelativePosition` (``W_R``, ``u``, ``v``) shared by
    all layers (the original shares ``u``, ``v`` and has a ``W_R`` per layer); queries
    sit at ``P .. P+L-1`` and keys at ``0 .. P+L-1`` with ``P`` cached slots.

    ``cmem_len > 0`` adds a `CompressiveMemory` per layer (``rate``, ``compression``):
    the context is then ``concat(compressed_l, memory_l, h_l)`` and the state a
    `MemoryState`. Compressed slots take positions by their order index, as in
    Rae et al. (2020), not the mean position of the steps they summarise: the offsets
    to them count slots, not steps. Dropout applies to attention and sub-layers.

    >>> enc = SegmentRecurrentEncoder(8, 2, 1, mem_len=4, cmem_len=2, rate=2)
    >>> out, state = enc(torch.zeros(1, 6, 8))
    >>> [tuple(state.memory[0].shape), tuple(state.compressed[0].shape)]
    [(1, 4, 8), (1, 1, 8)]
    """

    def __init__(self, d_model: int, n_heads: int, n_layers: int, d_ff: int | None = None,
                 dropout: float = 0.0, *, mem_len: int, norm_first: bool = True, kernel="sdpa",
                 cmem_len: int = 0, rate: int = 1, compression: str = "pool"):
        super().__init__()
        n_heads, n_layers = check_positive_int("n_heads", n_heads), check_positive_int("n_layers", n_layers)
        d_model = check_positive_int("d_model", d_model)
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.d_model, self.n_layers = d_model, n_layers
        self.mem_len = check_nonnegative_int("mem_len", mem_len)
        self.cmem_len = check_nonnegative_int("cmem_len", cmem_len)
        self.position = XLRelativePosition(n_heads, d_model // n_heads)
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, n_heads, d_ff, dropout, norm_first=norm_first, kernel=kernel,
                             position=self.position) for _ in range(n_layers))
        self.compressors = None if cmem_len == 0 else nn.ModuleList(
            CompressiveMemory(d_model, mem_len=mem_len, cmem_len=cmem_len, rate=rate,
                              compression=compression) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def init_memory(self, batch_size: int, *, device=None, dtype=None):
        """Empty state: a list of n_layers (B, 0, d_model) tensors, or a `MemoryState`."""
        def empties():
            return [torch.zeros(batch_size, 0, self.d_model, device=device, dtype=dtype)
                    for _ in range(self.n_layers)]
        return empties() if self.compressors is None else MemoryState(empties(), empties())

    def forward(self, x, memory=None):
        # 1. check the input and the state
        check_rank("x", x, 3, f"(B, L, {self.d_model})")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, L, {self.d_model}), got {tuple(x.shape)}")
        if memory is None:
            memory = self.init_memory(x.shape[0], device=x.device, dtype=x.dtype)
        mems, cmems = self._unpack(memory, x)
        # 2. every layer attends over its cache and the segment; the cache takes its input
        new_mems, new_cmems, h = [], [], x
        for l, block in enumerate(self.layers):
            prefix = mems[l] if cmems is None else torch.cat((cmems[l], mems[l]), dim=1)
            h_next = block(h, prefix=prefix, is_causal=True)                 # (B, L, d)
            if cmems is None:
                new_mems.append(_last(torch.cat((mems[l], h), dim=1), self.mem_len).detach())
            else:
                m, c = self.compressors[l].update(mems[l], cmems[l], h)
                new_mems.append(m)
                new_cmems.append(c)
            h = h_next
        # 3. final norm
        state = new_mems if cmems is None else MemoryState(new_mems, new_cmems)
        return self.norm(h), state

    def _unpack(self, memory, x):
        """Validated (mems, cmems) lists; cmems is None without compressive memory."""
        if self.compressors is None:
            if not isinstance(memory, (list, tuple)):
                raise TypeError(f"memory must be a list of {self.n_layers} tensors (B, M, "
                                f"{self.d_model}) or None, got {type(memory).__name__}")
            mems, cmems = list(memory), None
        else:
            if not isinstance(memory, MemoryState):
                raise TypeError("with cmem_len > 0, memory must be a MemoryState or None, got "
                                f"{type(memory).__name__}")
            mems, cmems = list(memory.memory), list(memory.compressed)
        self._check_list("memory", mems, x, self.mem_len)
        if cmems is not None:
            self._check_list("compressed", cmems, x, self.cmem_len)
        return mems, cmems

    def _check_list(self, name, tensors, x, cap):
        if len(tensors) != self.n_layers:
            raise ValueError(f"{name} must hold one tensor per layer ({self.n_layers}), "
                             f"got {len(tensors)}")
        for l, t in enumerate(tensors):
            _check_state(f"{name}[{l}]", t, x, cap, self.d_model)


def run_segments(encoder: SegmentRecurrentEncoder, x: torch.Tensor, segment_len: int, *,
                 memory=None, return_memory: bool = False):
    """Run ``encoder`` over a long x (B, T, d) in segments of ``segment_len`` (the last
    may be shorter), carrying the memory; returns out (B, T, d) (and the final memory).

    Cost: ``ceil(T / segment_len)`` encoder calls; gradients stop at segment boundaries.
    """
    check_rank("x", x, 3, "(B, T, d_model)")
    if x.shape[1] == 0:
        raise ValueError(f"x has no time steps: expected (B, T, d_model) with T >= 1, got shape "
                         f"{tuple(x.shape)}; check the slice that built it")
    segment_len = check_positive_int("segment_len", segment_len)
    outs = []
    for segment in x.split(segment_len, dim=1):                              # (B, <=L, d) each
        out, memory = encoder(segment, memory)
        outs.append(out)
    out = torch.cat(outs, dim=1)                                             # (B, T, d)
    return (out, memory) if return_memory else out
