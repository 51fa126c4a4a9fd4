"""Position and time encodings: how a permutation-equivariant attention learns order.

Two families:

- **additive** encodings map token embeddings ``x (B, L, d_model)`` to ``x + PE(positions)``:
  `SinusoidalPositionalEncoding`, `LearnedPositionalEncoding`, `Time2Vec`;
- **in-attention** encodings act on each head's queries and keys after projection
  (subclasses of `AttentionPosition`): `RotaryEmbedding` rotates them, `ALiBi`,
  `RelativePositionBias` (T5) and `XLRelativePosition` (Transformer-XL) add a bias
  to the scores. `labsupport.layers.MultiHeadAttention` takes one as ``position=``.

Conventions that matter when porting weights or mixing code are stated where they
apply: RoPE's pairing (`RotaryEmbedding`), T5's scaled scores and buckets
(`RelativePositionBias`), Transformer-XL's feature order (`XLRelativePosition`);
`interleave_halves` maps the "halves" layouts other code uses onto the pairs used here.

Positions are token indices by default, or any float times (irregular sampling) for the
encodings defined on real values (sinusoidal, Time2Vec, RoPE, ALiBi); T5's buckets and
Transformer-XL's table index whole offsets and refuse others rather than round them.
In attention, key positions default to ``0..S-1`` and query positions to the last
``L`` of them, ``S-L..S-1`` (queries are the newest tokens, as with a cache).
Calendar features of time stamps come from `labsupport.data.time_features` (also importable
from here).
"""
from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .attention import causal_mask
from .data import time_features  # noqa: F401  (public here too, as DESIGN.md documents it)
from .validation import check_positive_int, check_positive_number

# --- additive encodings ------------------------------------------------------------

def sinusoidal_features(positions: torch.Tensor, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Sinusoidal features of (possibly fractional) positions: (...,) -> (..., d_model).

    Math: ``PE[p, 2i] = sin(p / base^(2i/d))``, ``PE[p, 2i+1] = cos(p / base^(2i/d))``.
    """
    d_model, base = check_positive_int("d_model", d_model), check_positive_number("base", base)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")
    inv_freq = base ** (-torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float64) / d_model)
    angles = positions.double()[..., None] * inv_freq                       # (..., d/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)     # (..., d)


def sinusoidal_encoding(length: int, d_model: int, base: float = 10000.0, *, device=None,
                        dtype=torch.float32) -> torch.Tensor:
    """The fixed sinusoidal table of Vaswani et al. (2017), shape (length, d_model).

    >>> sinusoidal_encoding(3, 4)[0].tolist()
    [0.0, 1.0, 0.0, 1.0]
    """
    length = check_positive_int("length", length)
    positions = torch.arange(length, device=device, dtype=torch.float64)
    return sinusoidal_features(positions, d_model, base).to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds sinusoidal features of each token's position; defined for any position."""

    def __init__(self, d_model: int, base: float = 10000.0):
        super().__init__()
        self.d_model, self.base = check_positive_int("d_model", d_model), check_positive_number("base", base)
        if self.d_model % 2:
            raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")

    def forward(self, x, positions=None):                  # x (B, L, d_model)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, L, {self.d_model}) for this encoding of width {self.d_model}, "
                             f"got {tuple(x.shape)}: build it with d_model={x.shape[-1]}")
        if positions is None:
            positions = torch.arange(x.shape[-2], device=x.device)
        if positions.shape[-1] != x.shape[-2]:
            raise ValueError(f"positions must hold one position per token, L = {x.shape[-2]}, got "
                             f"{tuple(positions.shape)}")
        return x + sinusoidal_features(positions, self.d_model, self.base).to(x.dtype)


class LearnedPositionalEncoding(nn.Module):
    """Adds a learned vector per position, for positions ``0 .. max_len - 1`` only.

    A position never seen in training keeps its random initial vector, and one past
    ``max_len`` has no vector at all: that raises ``ValueError``.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len = check_positive_int("max_len", max_len)
        self.table = nn.Parameter(0.02 * torch.randn(max_len, d_model))

    def forward(self, x, positions=None):                  # x (B, L, d_model)
        if positions is not None:
            raise ValueError("a learned table is indexed by token order 0..max_len-1; "
                             "it cannot take arbitrary positions (use sinusoidal, rope or time2vec)")
        L = x.shape[-2]
        if x.shape[-1] != self.table.shape[1]:
            raise ValueError(f"x must be (B, L, {self.table.shape[1]}) for this table of width "
                             f"{self.table.shape[1]}, got {tuple(x.shape)}: build it with "
                             f"d_model={x.shape[-1]}")
        if L > self.max_len:
            raise ValueError(f"sequence of {L} tokens is longer than the learned table's max_len "
                             f"{self.max_len}: positions {self.max_len}..{L - 1} have no embedding")
        return x + self.table[:L]


class Time2Vec(nn.Module):
    """Time2Vec (Kazemi et al., 2019): a learned linear term and learned periodic terms.

    Math: ``t2v(t)[0] = w_0 t + b_0``, ``t2v(t)[i] = sin(w_i t + b_i)`` for i >= 1.
    Shapes: t (...,) float times -> (..., dim). As a positional encoding it adds
    ``t2v(positions)`` to the tokens; positions may be real, irregular times.
    """

    def __init__(self, dim: int):
        super().__init__()
        dim = check_positive_int("dim", dim)
        self.frequency = nn.Parameter(torch.randn(dim))
        self.phase = nn.Parameter(torch.randn(dim))

    def features(self, t: torch.Tensor) -> torch.Tensor:
        z = t[..., None].to(self.frequency.dtype) * self.frequency + self.phase    # (..., dim)
        return torch.cat((z[..., :1], torch.sin(z[..., 1:])), dim=-1)

    def forward(self, x, positions=None):                  # x (B, L, dim)
        if positions is None:
            positions = torch.arange(x.shape[-2], device=x.device)
        return x + self.features(positions)


class NoPositionalEncoding(nn.Module):
    """No position at all: attention sees a set, not a sequence."""

    def forward(self, x, positions=None):
        return x


# --- in-attention encodings ----------------------------------------------------------

class AttentionPosition(nn.Module):
    """Position information applied inside attention, per head, after the projections.

    ``rotate(q, k, q_pos, k_pos)`` may transform queries and keys (RoPE);
    ``bias(q, k, q_pos, k_pos)`` may return a float bias (..., H, L, S) added to the
    scaled scores (ALiBi, T5, Transformer-XL). q (B, H, L, D), k (B, H, S, D);
    positions (L,) / (S,) or per batch (B, L) / (B, S).
    """

    needs_bias = False                  # True: the kernel must accept ``bias=``

    def rotate(self, q, k, q_pos, k_pos):
        return q, k

    def bias(self, q, k, q_pos, k_pos):
        return None

    def check_attention(self, q_pos, k_pos, *, mask=None, is_causal=False):
        """Raise ``ValueError`` if this encoding cannot score the (query, key) pairs that
        ``mask`` and ``is_causal`` (top-left) allow; every pair is fine by default."""


def interleave_halves(n: int) -> torch.Tensor:
    """The index ``(0, n/2, 1, n/2 + 1, ..., n/2 - 1, n - 1)``: ``t[..., interleave_halves(n)]``
    turns a layout of halves (pair i is coordinates i and i + n/2) into one of adjacent
    pairs (2i, 2i + 1), the layout of this module; ``argsort`` of it goes back.

    >>> interleave_halves(6).tolist()
    [0, 3, 1, 4, 2, 5]
    """
    if check_positive_int("n", n) % 2:
        raise ValueError(f"n must be even to pair coordinates, got {n}")
    return torch.arange(n).view(2, n // 2).t().flatten()                    # (n,)


def _offsets(q_pos, k_pos):
    """Signed distance query - key for every pair: (..., L, S)."""
    return q_pos[..., :, None] - k_pos[..., None, :]


def _whole(offsets: torch.Tensor, owner: str) -> torch.Tensor:
    """``offsets`` (..., L, S) as whole numbers (long), or raise naming the first that is not
    whole (to 1e-3: positions computed in floating point keep their whole values)."""
    if not offsets.is_floating_point():
        return offsets.long()
    rounded = offsets.round()
    off = (offsets - rounded).abs() > 1e-3
    if bool(off.any()):
        index = tuple(off.nonzero()[0].tolist())
        value = offsets[index].item()
        raise ValueError(f"{owner} reads whole offsets (query position - key position), got the offset "
                         f"{value:.4g} at index {index} (..., query, key), which would be rounded to "
                         f"{round(value)}; pass integer positions (token indices), or use rope, alibi, "
                         "sinusoidal or time2vec for real-valued times")
    return rounded.long()


class RotaryEmbedding(AttentionPosition):
    """RoPE (Su et al., 2021): rotate each pair of query/key coordinates by an angle
    proportional to the token's position, so that ``q_m . k_n`` depends on ``m - n`` only.

    Math: pair i of x at position p is rotated by ``p * theta_i``, ``theta_i = base^(-2i/D)``.
    Shapes: x (..., L, D) -> (..., L, D); ``rope(x, positions=None)`` with positions
    (L,) or (B, L) (default ``0..L-1``). Rotations keep norms; nothing is learned, so
    it works with every exact kernel and at any length.

    Pairing: pair i is the adjacent coordinates ``(2i, 2i + 1)``, as in Su et al., Meta's
    LLaMA code and torchtune. Hugging Face's ``rotate_half`` pairs ``(i, i + D/2)``
    instead: ``rope(x)[..., p] == rotate_half_rope(x[..., p])`` with
    ``p = argsort(interleave_halves(D)) = (0, 2, 4, ..., 1, 3, 5, ...)``. Scores are
    unchanged by a permutation applied to both q and k, so a Hugging Face checkpoint
    runs here once each head's D rows of ``W_q`` and ``W_k`` (and their biases) are
    reordered by ``interleave_halves(D)``.
    """

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        head_dim, base = check_positive_int("head_dim", head_dim), check_positive_number("base", base)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even to rotate pairs, got {head_dim}")
        self.head_dim, self.base = head_dim, base
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)            # (D/2,)

    def forward(self, x, positions=None):
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x must be (..., L, {self.head_dim}), got {tuple(x.shape)}")
        L = x.shape[-2]
        positions = torch.arange(L, device=x.device) if positions is None else positions
        if not isinstance(positions, torch.Tensor) or positions.shape[-1] != L:
            got = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
            raise ValueError(f"positions must hold one position per token, (L,) or (B, L) with L = {L} "
                             f"(x is {tuple(x.shape)}), got {got}")
        angles = positions.to(x.device).double()[..., None] * self.inv_freq      # (..., L, D/2)
        if angles.dim() == 3 and x.dim() == 4:                                    # (B, L) positions
            angles = angles[:, None]                                              # (B, 1, L, D/2)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]                                       # (..., L, D/2)
        rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return rotated.flatten(-2)                                                # (..., L, D)

    def rotate(self, q, k, q_pos, k_pos):
        return self(q, q_pos), self(k, k_pos)


def alibi_slopes(n_heads: int, *, dtype=None) -> torch.Tensor:
    """ALiBi's head slopes (Press et al., 2022): for H a power of two, the geometric
    sequence ``2^(-8/H), 2^(-16/H), ..., 2^(-8)``; otherwise the paper's interleaving
    of the next powers of two. Computed in float64, returned in ``dtype`` (default:
    torch's default dtype).

    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    """
    n_heads = check_positive_int("n_heads", n_heads)

    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = geometric(n_heads)
    else:
        below = 2 ** math.floor(math.log2(n_heads))
        slopes = geometric(below) + geometric(2 * below)[0::2][: n_heads - below]
    return torch.tensor(slopes, dtype=dtype or torch.get_default_dtype())


def alibi_bias(n_heads: int, L: int, S: int | None = None, *, q_pos=None, k_pos=None,
               device=None, dtype=None) -> torch.Tensor:
    """ALiBi's additive bias ``-slope_h * |i - j|``, shape (H, L, S) (or (B, H, L, S)).

    Queries sit at the last L of the S key positions unless positions are given.
    Computed in float64, returned in ``dtype`` (default: torch's default dtype, float32):
    pass the scores' dtype (`ALiBi` does), as float32 rounds distant biases (by up to
    1.2e-4 at 16 heads and 4096 keys).
    """
    S = L if S is None else S
    k_pos = torch.arange(S, device=device) if k_pos is None else k_pos
    q_pos = torch.arange(S - L, S, device=k_pos.device) if q_pos is None else q_pos
    for what, pos, n in (("q_pos", q_pos, L), ("k_pos", k_pos, S)):
        if pos.shape[-1] != n:
            raise ValueError(f"{what} must hold one position per {'query' if what == 'q_pos' else 'key'}, "
                             f"{n} of them (L = {L}, S = {S}), got shape {tuple(pos.shape)}")
    distance = _offsets(q_pos, k_pos).double().abs()                          # (..., L, S)
    slopes = alibi_slopes(n_heads, dtype=torch.float64).to(distance.device).view(n_heads, 1, 1)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    return (-slopes * distance[..., None, :, :]).to(dtype)                     # (..., H, L, S)


class ALiBi(AttentionPosition):
    """Attention with Linear Biases: no embedding at all, a penalty growing with distance."""

    needs_bias = True

    def __init__(self, n_heads: int):
        super().__init__()
        self.n_heads = check_positive_int("n_heads", n_heads)

    def bias(self, q, k, q_pos, k_pos):
        return alibi_bias(self.n_heads, q.shape[-2], k.shape[-2], q_pos=q_pos, k_pos=k_pos, dtype=q.dtype)


def relative_position_bucket(offset: torch.Tensor, *, bidirectional: bool = False,
                             num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """T5's buckets for ``offset = query - key``: exact for small distances, logarithmic
    up to ``max_distance``, one shared bucket beyond (Raffel et al., 2020).

    The same buckets as T5's ``_relative_position_bucket(key - query, ...)`` (note the
    sign: T5 passes ``key - query``). ``bidirectional=False`` (T5's decoder) gives every
    key after its query (offset < 0) bucket 0, the query's own: for causal attention only.
    ``bidirectional=True`` (T5's encoder) gives keys after the query the upper half.
    Offsets must be whole numbers (a float offset of 2.7 is refused, not rounded).
    """
    num_buckets, max_distance = _check_buckets(num_buckets, max_distance, bidirectional)
    n = _whole(offset, "relative_position_bucket")
    bucket = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    exact = num_buckets // 2
    log_ratio = torch.log(n.clamp(min=1).double() / exact) / math.log(max_distance / exact)
    large = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(n < exact, n, large)


def _check_buckets(num_buckets, max_distance, bidirectional: bool) -> tuple[int, int]:
    """T5's bucket settings as ints, or raise: at least 2 buckets per direction of offset (an
    exact one and a logarithmic one), and a ``max_distance`` beyond the exact buckets."""
    least = 4 if bidirectional else 2
    expected = (f"num_buckets must be an int >= {least} (2 per direction of offset: exact, then "
                f"logarithmic), got {num_buckets!r}")
    if not _is_count(num_buckets):
        raise TypeError(expected)
    if num_buckets < least:
        raise ValueError(expected)
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    expected = (f"max_distance must be an int > {exact}, the last offset with a bucket of its own "
                f"(num_buckets {num_buckets}), got {max_distance!r}; T5 uses 128 with 32 buckets")
    if not _is_count(max_distance):
        raise TypeError(expected)
    if max_distance <= exact:
        raise ValueError(expected)
    return int(num_buckets), int(max_distance)


def _is_count(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class RelativePositionBias(AttentionPosition):
    """T5-style relative position bias: a learned scalar per head and distance bucket.

    Math: ``s_ij = q_i . k_j / sqrt(D) + b_h(bucket(i - j))`` (`relative_position_bucket`).
    T5 adds ``b`` to *unscaled* scores ``q_i . k_j`` (it has no 1/sqrt(D)); here the
    kernel scales first, so a T5 checkpoint needs its query projection multiplied by
    sqrt(D) (the bias table is used as it is).
    ``bidirectional=True`` (the default, T5's encoder) tells keys before and after the
    query apart and suits any attention. ``bidirectional=False`` (T5's decoder) spends
    every bucket on the past but puts future keys in the query's own bucket: it is for
    causal attention only, and `check_attention` refuses a call that lets a query see a
    key after it.
    """

    needs_bias = True

    def __init__(self, n_heads: int, *, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True):
        super().__init__()
        num_buckets, max_distance = _check_buckets(num_buckets, max_distance, bidirectional)
        self.buckets = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
        self.embedding = nn.Embedding(num_buckets, check_positive_int("n_heads", n_heads))
        nn.init.normal_(self.embedding.weight, std=0.02)

    def bias(self, q, k, q_pos, k_pos):
        offsets = _whole(_offsets(q_pos, k_pos), "RelativePositionBias")            # (..., L, S)
        buckets = relative_position_bucket(offsets, **self.buckets)                 # (..., L, S)
        return self.embedding(buckets).movedim(-1, -3).to(q.dtype)                  # (..., H, L, S)

    def check_attention(self, q_pos, k_pos, *, mask=None, is_causal=False):
        if self.buckets["bidirectional"]:
            return
        ahead = _offsets(q_pos, k_pos) < 0                                          # (..., L, S)
        if ahead.dim() == 3:                                                        # (B, L, S)
            ahead = ahead[:, None]                                                  # (B, 1, L, S)
        if is_causal:
            ahead = ahead & causal_mask(*ahead.shape[-2:], device=ahead.device)
        if mask is not None:
            ahead = ahead & mask
        if ahead.any():
            raise ValueError(
                "RelativePositionBias(bidirectional=False) puts every key after its query in the "
                f"query's own bucket, but this attention lets queries see {int(ahead.sum())} such "
                "(query, key) pairs; pass bidirectional=True for non-causal attention, or "
                "is_causal=True / a causal mask")


class XLRelativePosition(AttentionPosition):
    """Transformer-XL's relative scores (Dai et al., 2019), as a bias added to ``q . k``.

    Math: ``s_ij = q_i.k_j + q_i.W_R r_{i-j} + u.k_j + v.W_R r_{i-j}`` (all / sqrt(D)),
    with ``r_{i-j}`` sinusoidal features of the offset, ``W_R`` learned per head, and
    two global biases shared by all queries: ``u`` (content) and ``v`` (position).
    The kernel computes ``q.k``; this returns the other three terms.

    Feature order: ``r`` interleaves ``(sin, cos)`` pairs (`sinusoidal_features`), where
    the original code concatenates the halves ``cat(sin, cos)``. It matters only when
    porting weights: the original ``r_net.weight`` (H*D, d_pos) loads here as
    ``r_proj.weight = r_net.weight[:, interleave_halves(d_pos)]``; ``u`` and ``v`` are its
    ``r_w_bias`` and ``r_r_bias``.
    """

    needs_bias = True

    def __init__(self, n_heads: int, head_dim: int, d_pos: int | None = None):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, head_dim
        self.d_pos = head_dim * n_heads if d_pos is None else d_pos
        self.r_proj = nn.Linear(self.d_pos, n_heads * head_dim, bias=False)     # W_R
        self.u = nn.Parameter(torch.zeros(n_heads, head_dim))                    # content bias
        self.v = nn.Parameter(torch.zeros(n_heads, head_dim))                    # position bias

    def bias(self, q, k, q_pos, k_pos):
        offsets = _whole(_offsets(q_pos, k_pos), "XLRelativePosition")           # (..., L, S)
        if offsets.dim() == 3:                                                    # (B, L, S)
            offsets = offsets[:, None]                                            # (B, 1, L, S)
        low = int(offsets.min())
        distances = torch.arange(low, int(offsets.max()) + 1, device=q.device)   # (P,)
        r = self.r_proj(sinusoidal_features(distances, self.d_pos).to(q.dtype))   # (P, H*D)
        r = r.view(-1, self.n_heads, self.head_dim).transpose(0, 1)              # (H, P, D)
        position = (q + self.v[:, None]) @ r.transpose(-2, -1)                    # (B, H, L, P)
        index = (offsets - low).expand(*position.shape[:-1], offsets.shape[-1])   # (B, H, L, S)
        position = position.gather(-1, index)                                     # (B, H, L, S)
        content = (k * self.u[:, None]).sum(-1)[..., None, :]                     # (B, H, 1, S)
        return (position + content) / self.head_dim ** 0.5


# --- factories used by the forecaster --------------------------------------------------

ADDITIVE = ("none", "sinusoidal", "learned", "time2vec")
IN_ATTENTION = ("rope", "alibi", "relative")
KINDS = ADDITIVE + IN_ATTENTION


def make_positional_encoding(kind: str, *, d_model: int, max_len: int) -> nn.Module:
    """The additive part of encoding ``kind`` (identity for in-attention kinds)."""
    builders = {
        "sinusoidal": lambda: SinusoidalPositionalEncoding(d_model),
        "learned": lambda: LearnedPositionalEncoding(max_len, d_model),
        "time2vec": lambda: Time2Vec(d_model),
    }
    if kind not in KINDS:
        raise ValueError(f"pos_encoding must be one of {list(KINDS)}, got {kind!r}")
    return builders.get(kind, NoPositionalEncoding)()


def make_attention_position(kind: str, *, n_heads: int, head_dim: int, causal: bool = True):
    """The in-attention part of encoding ``kind`` (None for additive kinds)."""
    if kind not in KINDS:
        raise ValueError(f"pos_encoding must be one of {list(KINDS)}, got {kind!r}")
    if kind == "rope":
        return RotaryEmbedding(head_dim)
    if kind == "alibi":
        return ALiBi(n_heads)
    if kind == "relative":
        return RelativePositionBias(n_heads, bidirectional=not causal)
    return None
