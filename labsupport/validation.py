"""Input validation shared by every kernel, module, loop and script: one place, one message
style, one exception policy.

Every message says what was checked, what was expected and what arrived, e.g.
``k head_dim 32 != q head_dim 64; expected q (B,H,L,D), k (B,H,S,D), v (B,H,S,Dv),
got (2, 4, 128, 64), (2, 4, 128, 32), (2, 4, 128, 32)``.

A value of the wrong type raises ``TypeError``: a str, None or a bool where a number belongs,
a float (even 3.0, NaN or inf) where an int belongs, a list where a tensor belongs. A value of
the right type that is outside its range raises ``ValueError``: 0 or -1 for a count, NaN, inf
or a negative number for a rate, a shape or a length that does not fit. A bool is never a
number here: ``True`` for a count would read as 1, so it is a type mistake.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import numbers

import numpy as np
import torch

QKV_LEGEND = "expected q (B,H,L,D), k (B,H,S,D), v (B,H,S,Dv)"


class NonFiniteError(ValueError, FloatingPointError):
    """A tensor holds NaN or inf where only finite values make sense. A ``ValueError`` (a bad
    value, refused by name); also a ``FloatingPointError``, so that `labsupport.train.fit`
    reads it as divergence when it comes from inside a model (its data are checked finite,
    so non-finite activations mean non-finite weights). ``name``, ``where`` (the position as
    printed, e.g. ``(0, 2, 5, :)``) and ``value`` say what was found where."""

    def __init__(self, message: str, *, name: str = "", where: str = "", value: float = math.nan):
        super().__init__(message)
        self.name, self.where, self.value = name, where, value


def check_finite_tensors(tensors: dict, *, axes: str = "", why: str = "", fix: str = "") -> None:
    """Raise `NonFiniteError` unless every tensor of ``tensors`` (name -> tensor, on one
    device) holds only finite values, naming the first NaN or inf by tensor and position
    (the last axis shown as ``:``), what ``axes`` the position indexes (e.g. ``"batch, head,
    position, :"``), ``why`` the values must be finite and the ``fix``.

    Cost: one reduction per tensor and one look at its result when all is finite (NaN or inf
    anywhere makes the sum of the sums non-finite; a sum that merely overflows sends the
    check to look element by element).

    >>> check_finite_tensors({"v": torch.tensor([[1.0, 2.0], [float("nan"), 0.0]])})
    Traceback (most recent call last):
    ...
    labsupport.validation.NonFiniteError: v holds nan at (1, :) of v (2, 2)
    """
    floats = {name: t.detach() for name, t in tensors.items()
              if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()}
    if not floats:
        return
    with torch.no_grad():
        device = next(iter(floats.values())).device
        if bool(torch.stack([t.sum().float().to(device) for t in floats.values()]).sum().isfinite()):
            return
        found = _first_non_finite(floats)
    if found is None:                                         # finite values whose sum overflowed
        return
    name, t, index = found
    value, where = t[index].item(), "(" + ", ".join([*map(str, index[:-1]), ":"]) + ")"
    message = f"{name} holds {value} at {where}{f' ({axes})' if axes else ''} of {name} {_shape(t)}"
    message += "".join(f"{sep}{text}" for sep, text in ((": ", why), ("; ", fix)) if text)
    raise NonFiniteError(message, name=name, where=where, value=value)


def _first_non_finite(tensors: dict):
    """(name, tensor, index) of the first NaN or inf in ``tensors``, else None."""
    for name, t in tensors.items():
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            return name, t, tuple(bad.nonzero()[0].tolist())
    return None


_CHECKED_FINITE = contextvars.ContextVar("labsupport_checked_finite", default=False)


@contextlib.contextmanager
def checked_finite():
    """Inside, the kernels skip their own check that q, k and v are finite
    (`check_attention_inputs`): for a caller that checked its inputs once and then calls
    kernels on them many times. `labsupport.timing.cost_sweep` times and measures each point
    this way, so that the check's reduction (and on a GPU its synchronisation) is not
    counted as the kernel's time. A NaN met inside spreads as it would in SDPA."""
    token = _CHECKED_FINITE.set(True)
    try:
        yield
    finally:
        _CHECKED_FINITE.reset(token)


_QKV_FINITE = ("attention needs finite q, k and v, since a mask does not hide NaN or inf: a weight of "
               "0 times NaN is NaN, so every output that weighs that key would be NaN, the causal "
               "past's too")
_QKV_FIX = ("fill or drop them first, e.g. v = torch.nan_to_num(v) where a mask hides them (any finite "
            "value gives the same output there)")


def _shape(t) -> tuple:
    return tuple(t.shape)


def check_attention_inputs(q, k, v, mask=None, bias=None, *, scale=None, dropout_p=0.0,
                           is_causal=False) -> None:
    """Raise ``TypeError``/``ValueError`` unless q, k, v (and mask, bias, scale, dropout_p) fit
    one attention call.

    Shapes: q (..., L, D), k (..., S, D), v (..., S, Dv); mask bool and bias float, both
    broadcastable to (..., L, S); scale None or a finite number; dropout_p a rate in [0, 1);
    is_causal a bool (a string such as "no" is truthy). q, k and v must be finite
    (`NonFiniteError`, a ``ValueError``, names the first NaN or inf by position): a mask does
    not hide a non-finite value, since its weight of 0 times NaN is NaN. That check costs one
    reduction of each (and on a GPU one synchronisation); inside `checked_finite` it is skipped.
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
    check_bool("is_causal", is_causal)
    if not _CHECKED_FINITE.get():
        check_finite_tensors({"q": q, "k": k, "v": v}, why=_QKV_FINITE, fix=_QKV_FIX,
                             axes="batch, head, position, :" if q.dim() == 4 else "..., position, :")


def _check_broadcast(name, t, q, k) -> None:
    """``t`` broadcastable to (..., L, S) and on q's device."""
    target = (*q.shape[:-1], k.shape[-2])
    if t.dim() > len(target) or any(m not in (1, n) for m, n in zip(t.shape[::-1], target[::-1])):
        raise ValueError(f"{name} shape {_shape(t)} does not broadcast to (..., L, S) = {target}")
    if t.device != q.device:
        raise ValueError(f"{name} on {t.device} but q on {q.device}")


def _is_int(value) -> bool:
    """Python and NumPy integers (``np.int64(48)`` from an array), never bools."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    """Python and NumPy real numbers, never bools."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _show(value) -> str:
    """``value`` for a message: NumPy integers as plain ints (48, not np.int64(48))."""
    return str(int(value)) if _is_int(value) else repr(value)


def check_positive_int(name: str, value) -> int:
    """Return ``value`` as an int if it is a positive integer; else raise naming the argument
    (``TypeError`` for a value that is no int, ``ValueError`` for one below 1)."""
    return _check_int(name, value, 1, "a positive int")


def check_nonnegative_int(name: str, value) -> int:
    """Return ``value`` as an int if it is an integer >= 0; else raise naming the argument."""
    return _check_int(name, value, 0, "an int >= 0")


def _check_int(name: str, value, least: int, expected: str) -> int:
    if not _is_int(value):
        raise TypeError(f"{name} must be {expected}, got {_show(value)}")
    if value < least:
        raise ValueError(f"{name} must be {expected}, got {_show(value)}")
    return int(value)


def _check_number(name: str, value, within, expected: str) -> float:
    """``value`` as a float if it is a real number (not a bool) for which ``within`` holds."""
    if not _is_real(value):
        raise TypeError(f"{name} must be {expected}, got {value!r}")
    if not within(value):
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return float(value)


def check_finite_number(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite real number (not a bool), else raise."""
    return _check_number(name, value, math.isfinite, "a finite number")


def check_positive_number(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite real number > 0 (not a bool), else raise."""
    return _check_number(name, value, lambda v: 0 < v < math.inf, "a finite number > 0")


def check_nonnegative_number(name: str, value) -> float:
    """Return ``value`` as a float if it is a finite real number >= 0 (not a bool), else raise."""
    return _check_number(name, value, lambda v: 0 <= v < math.inf, "a finite number >= 0")


def check_count(name: str, value, *, least: int, what: str, why: str = "", optional: bool = False):
    """``value`` as an int if it is an integer >= ``least`` (never a bool, nor a float such
    as 3.0), or None when ``optional``; else raise naming ``name``, ``what`` it is and the
    fix. ``why`` says what a value below ``least`` would do.

    >>> check_count("epochs", 3.0, least=1, what="the epoch budget")
    Traceback (most recent call last):
    ...
    TypeError: epochs must be an int >= 1 (the epoch budget), got the float 3.0; pass epochs=3
    """
    if value is None and optional:
        return None
    expected = f"{name} must be {'None or ' if optional else ''}an int >= {least} ({what})"
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{expected}, got {value!r}: a bool is not a count; pass e.g. {name}={least}")
    if isinstance(value, numbers.Integral):
        if value < least:
            raise ValueError(f"{expected}, got {int(value)}{'; ' + why if why else ''}")
        return int(value)
    if isinstance(value, numbers.Real):
        whole = math.isfinite(value) and value == int(value) and value >= least
        fix = f"pass {name}={int(value)}" if whole else f"pass an int >= {least}"
        raise TypeError(f"{expected}, got the float {value!r}; {fix}")
    raise TypeError(f"{expected}, got {type(value).__name__} {value!r}")


def check_real(name: str, value, *, what: str, fix: str, positive: bool, optional: bool = False):
    """``value`` as a float if it is a finite real number, > 0 when ``positive`` (else >= 0),
    or None when ``optional``; else raise naming ``name``, ``what`` it is and the ``fix``.

    >>> check_real("lr", -1.0, what="Adam's learning rate", fix="pass e.g. lr=1e-3", positive=True)
    Traceback (most recent call last):
    ...
    ValueError: lr must be a positive finite number (Adam's learning rate), got -1.0; pass e.g. lr=1e-3
    """
    if value is None and optional:
        return None
    kind = "a positive finite number" if positive else "a finite number >= 0"
    expected = f"{name} must be {'None or ' if optional else ''}{kind} ({what})"
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{expected}, got {value!r}: a bool is not a number; {fix}")
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{expected}, got {type(value).__name__} {value!r}; {fix}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{expected}, got {value!r}; {fix}")
    return float(value)


def check_text(name: str, value, *, optional: bool = False, example: str = ""):
    """``value`` if it is a str (or None when ``optional``), else ``TypeError`` naming it;
    ``example`` shows one in the message (``'MW'``)."""
    if value is None and optional or isinstance(value, str):
        return value
    such = f" such as {example}" if example else ""
    raise TypeError(f"{name} must be {'None or ' if optional else ''}a str{such}, got "
                    f"{type(value).__name__} {value!r}")


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
    if not all(_is_int(v) for v in values):
        raise TypeError(f"{name} must be distinct positive ints, got {shown}")
    if not all(v >= 1 for v in values):
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
    return _check_number(name, value, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")


def check_rank(name: str, x: torch.Tensor, rank: int, legend: str) -> None:
    """Raise unless ``x`` has exactly ``rank`` dimensions; ``legend`` names them, e.g. '(B, L, C)'."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != rank:
        raise ValueError(f"{name} must be {legend} ({rank} dims), got shape {_shape(x)}")


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


def check_batch_size(value) -> int:
    """``value`` as an int if it is a batch size (an int >= 1), else raise naming it."""
    return check_count("batch_size", value, least=1, what="windows per batch")


# --- forecasting windows: (inputs, targets) pairs ------------------------------------------------

def _is_inputs(inputs) -> bool:
    """A tensor, or a tuple of tensors (or None) passed to the model positionally."""
    if isinstance(inputs, torch.Tensor):
        return True
    return (isinstance(inputs, tuple) and isinstance(inputs[0], torch.Tensor)
            and all(t is None or isinstance(t, torch.Tensor) for t in inputs))


def count_windows(inputs) -> int:
    """The number of windows of ``inputs``: a tensor (N, ...) or a tuple whose first is one."""
    return len(inputs if isinstance(inputs, torch.Tensor) else inputs[0])


def _check_pair(name: str, pair):
    if isinstance(pair, (tuple, list)) and len(pair) == 2 and any(isinstance(p, np.ndarray) for p in pair):
        raise TypeError(f"{name} must be an (inputs, targets) pair of torch tensors, got NumPy arrays: "
                        "convert them, e.g. (torch.from_numpy(x).float(), torch.from_numpy(y).float())")
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and _is_inputs(pair[0])
            and isinstance(pair[1], torch.Tensor)):
        got = (f"a {type(pair).__name__} of {len(pair)}" if isinstance(pair, (tuple, list))
               else type(pair).__name__)
        raise TypeError(f"{name} must be an (inputs, targets) pair of tensors, got {got}")
    inputs, targets = pair
    if count_windows(inputs) != len(targets) or len(targets) == 0:
        raise ValueError(f"{name}: {count_windows(inputs)} inputs and {len(targets)} targets; "
                         "expected the same, non-zero number of windows")
    return inputs, targets


def check_windows(name: str, pair, *, when: str = "training") -> tuple:
    """``(inputs, targets)`` if ``pair`` holds tensors with as many windows each, all finite;
    else raise naming ``name`` (e.g. "test") and the first window that holds NaN or inf
    (``when``: what they must be dropped or filled before, in the message)."""
    inputs, targets = _check_pair(name, pair)
    _check_windows_finite(name, inputs, targets, when)
    return inputs, targets


def _check_windows_finite(name: str, inputs, targets, when: str) -> None:
    """Raise naming the tensor and its first window that holds NaN or inf."""
    tensors = {f"{name} inputs": inputs} if isinstance(inputs, torch.Tensor) else \
        {f"{name} inputs[{i}]": t for i, t in enumerate(inputs) if t is not None}
    tensors[f"{name} targets"] = targets
    for label, t in tensors.items():
        if not t.is_floating_point():
            continue
        bad = ~torch.isfinite(t.reshape(len(t), -1)).all(dim=1)          # (N,): window holds NaN/inf
        if bad.any():
            first = int(bad.nonzero()[0])
            raise ValueError(f"{label} hold NaN or inf values in {int(bad.sum())} window(s), first in "
                             f"window {first} of {len(t)}; drop or fill them before {when}, e.g. "
                             "keep = torch.isfinite(x).flatten(1).all(1) & "
                             "torch.isfinite(y).flatten(1).all(1)")
