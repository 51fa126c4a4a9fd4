"""Input validation shared by every kernel and module: one place, one message style.

Every message says what was checked, what was expected and what arrived, e.g.
``k head_dim 32 != q head_dim 64; expected q (B,H,L,D), k (B,H,S,D), v (B,H,S,Dv),
got (2, 4, 128, 64), (2, 4, 128, 32), (2, 4, 128, 32)``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

QKV_LEGEND = "expected q (B,H,L,D), k (B,H,S,D), v (B,H,S,Dv)"


def _shape(t) -> tuple:
    return tuple(t.shape)


def check_attention_inputs(q, k, v, mask=None, bias=None, *, scale=None, dropout_p=0.0) -> None:
    """Raise ``TypeError``/``ValueError`` unless q, k, v (and mask, bias, scale, dropout_p) fit
    one attention call.

    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv); mask bool and bias float, both
    broadcastable to (..., L, S); scale None or a finite number; dropout_p a rate in [0, 1).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    got = f"got {_shape(q)}, {_shape(k)}, {_shape(v)}"
    if q.dim() < 2 or q.dim() != k.dim() or q.dim() != v.dim():
        raise ValueError(f"q, k, v must have the same rank >= 2; {QKV_LEGEND}, {got}")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k head_dim {k.shape[-1]} != q head_dim {q.shape[-1]}; {QKV_LEGEND}, {got}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v length {v.shape[-2]} != k length {k.shape[-2]}; {QKV_LEGEND}, {got}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(f"batch and head dims differ; {QKV_LEGEND}, {got}")
    if not q.is_floating_point():
        raise TypeError(f"q, k, v must be floating point, got dtype {q.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v devices differ: {q.device}, {k.device}, {v.device}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            kind = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a bool tensor (True = may attend), got {kind}")
        _check_broadcast("mask", mask, q, k)
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
            kind = bias.dtype if isinstance(bias, torch.Tensor) else type(bias).__name__
            raise TypeError(f"bias must be a float tensor added to the scores, got {kind}")
        _check_broadcast("bias", bias, q, k)
    if scale is not None:
        check_finite_number("scale", scale)
    check_dropout("dropout_p", dropout_p)


def _check_broadcast(name, t, q, k) -> None:
    """``t`` broadcastable to (..., L, S) and on q's device."""
    target = (*q.shape[:-1], k.shape[-2])
    if t.dim() > len(target) or any(m not in (1, n) for m, n in zip(t.shape[::-1], target[::-1])):
        raise ValueError(f"{name} shape {_shape(t)} does not broadcast to (..., L, S) = {target}")
    if t.device != q.device:
        raise ValueError(f"{name} on {t.device} but q on {q.device}")


def _is_int(value) -> bool:
    """Python and NumPy integers (``np.int64(48)`` from an array), never bools."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _show(value) -> str:
    """``value`` for a message: NumPy integers as plain ints (48, not np.int64(48))."""
    return str(int(value)) if _is_int(value) else repr(value)


def check_positive_int(name: str, value) -> int:
    """Return ``value`` as an int if it is a positive integer, else raise naming the argument."""
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {_show(value)}")
    return int(value)


def check_finite_number(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite real number (not a bool), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_positive_number(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite real number > 0 (not a bool), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_nonnegative_number(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite real number >= 0 (not a bool), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_bool(name: str, value) -> bool:
    """Return ``value`` as a bool if it is one (Python's or NumPy's), else raise ``TypeError``:
    a string such as ``"no"`` or a number is truthy and would switch the option on."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}")
    return bool(value)


def check_distinct_positive_ints(name: str, values) -> list[int]:
    """Return ``values`` as a list of ints if they are distinct positive integers (lengths,
    sizes), at least one, else raise naming the argument and the first repeat."""
    values = tuple(values) if not isinstance(values, (list, tuple)) else values
    shown = ("[{}]" if isinstance(values, list) else "({},)" if len(values) == 1 else "({})").format(
        ", ".join(_show(v) for v in values))
    if not values:
        raise ValueError(f"{name} must hold at least one value, got {shown}")
    if not all(_is_int(v) and v >= 1 for v in values):
        raise ValueError(f"{name} must be distinct positive ints, got {shown}")
    ints = [int(v) for v in values]
    for v in ints:
        if ints.count(v) > 1:
            times = "twice" if ints.count(v) == 2 else f"{ints.count(v)} times"
            raise ValueError(f"{name} must be distinct positive ints, got {shown} ({v} {times})")
    return ints


def check_dropout(name: str, value) -> float:
    """Return ``value`` as a float if it is a dropout rate in [0, 1) (1 would drop every
    activation), else raise naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def check_rank(name: str, x: torch.Tensor, rank: int, legend: str) -> None:
    """Raise unless ``x`` has exactly ``rank`` dimensions; ``legend`` names them, e.g. '(B, L, C)'."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != rank:
        raise ValueError(f"{name} must be {legend} ({rank} dims), got shape {_shape(x)}")


def check_nonnegative_int(name: str, value) -> int:
    """Return ``value`` as an int if it is an integer >= 0, else raise naming the argument."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {_show(value)}")
    return int(value)


def check_self_attention(kernel: str, q, k, v) -> None:
    """Raise unless keys and queries have one length (L == S), as sliding windows need."""
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"{kernel} needs self-attention, L == S: k length {k.shape[-2]} != q length "
                         f"{q.shape[-2]}; expected q (B,H,L,D), k (B,H,L,D), v (B,H,L,Dv), "
                         f"got {_shape(q)}, {_shape(k)}, {_shape(v)}")


def check_no_mask(kernel: str, mask, why: str) -> None:
    """Raise for a mask given to a kernel that cannot apply one; ``why`` says why not."""
    if mask is not None:
        got = f"shape {_shape(mask)}" if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"{kernel} takes no mask (got {got}): {why}")


def check_shape(name: str, t, expected: tuple, legend: str) -> None:
    """Raise unless tensor ``t`` has exactly the shape ``expected``; ``legend`` names its dims."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != tuple(expected):
        raise ValueError(f"{name} shape {_shape(t)} != expected {legend} = {tuple(expected)}")


def check_instance(name: str, value, kind: type, expected: str) -> None:
    """Raise ``TypeError`` unless ``value`` is a ``kind``; ``expected`` says what to pass."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}")
