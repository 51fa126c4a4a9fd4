"""The cost sweep: time and measured peak memory of attention kernels over sequence
lengths, with a memory budget that skips a point before it runs, out-of-memory errors
recorded as part of the lesson, and the fitted exponent of the upper lengths. Also the
sweep's default inputs and the flop model that turns times into TFLOP/s."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import torch

from ..scaling import fit_power_law
from ..units import format_bytes
from ..validation import (
    check_distinct_positive_ints,
    check_finite_tensors,
    check_nonnegative_int,
    check_positive_int,
    check_positive_number,
    checked_finite,
)
from .clocks import time_call
from .peaks import free_cuda, peak_memory
from .throughput import dtype_name

_OOM_ERRORS = (torch.cuda.OutOfMemoryError, MemoryError)
STATUSES = ("ok", "skipped", "oom", "error", "interrupted")     # a sweep row's status


def is_out_of_memory(err: BaseException) -> bool:
    """True for the errors an allocator raises when memory runs out (CUDA or CPU)."""
    if isinstance(err, _OOM_ERRORS):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def attention_inputs(length: int, *, batch: int = 1, heads: int = 1, head_dim: int = 64,
                     device=None, dtype=torch.float32, seed: int = 0):
    """Seeded ``(q, k, v)``, each (batch, heads, length, head_dim): the default sweep input.

    Drawn in float32 (float64 for ``dtype=torch.float64``) and then rounded to ``dtype``,
    so that a bfloat16 sweep sees the float32 inputs rounded, and `dtype_error` can
    compare the two. ``length`` and ``seed`` are ints >= 0, the sizes positive ints.
    """
    length, seed = check_nonnegative_int("length", length), check_nonnegative_int("seed", seed)
    batch, heads, head_dim = (check_positive_int(name, value) for name, value in
                              (("batch", batch), ("heads", heads), ("head_dim", head_dim)))
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype (torch.float32, "
                        f"torch.bfloat16, ...), got {dtype!r}")
    g = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, heads, length, head_dim)
    drawn = torch.float64 if dtype == torch.float64 else torch.float32
    return tuple(torch.randn(shape, generator=g, dtype=drawn).to(device=device or "cpu", dtype=dtype)
                 for _ in range(3))


def dtype_error(kernel, length: int, dtype, *, make_inputs=None, **kernel_kwargs) -> float:
    """Max absolute error of ``kernel`` run in ``dtype`` against the same kernel in float32.

    ``make_inputs(length)`` gives the float32 inputs (default `attention_inputs`); the
    reduced-precision run gets them rounded to ``dtype``, on the same device. Prints
    beside a sweep run in bfloat16 what the lower precision costs in accuracy.

    >>> from labsupport.attention import sdpa
    >>> dtype_error(sdpa, 64, torch.float32)
    0.0
    >>> 0 < dtype_error(sdpa, 64, torch.bfloat16) < 0.05
    True
    """
    inputs = (make_inputs or attention_inputs)(length)
    if any(t.dtype != torch.float32 for t in inputs):
        raise TypeError("make_inputs must return float32 tensors (the reference); got "
                        f"{[t.dtype for t in inputs]}")
    with torch.no_grad():
        reference = kernel(*inputs, **kernel_kwargs)
        reduced = kernel(*(t.to(dtype) for t in inputs), **kernel_kwargs)
    return (reduced.float() - reference).abs().max().item()


def attention_flops(length: int, *, batch: int = 1, heads: int = 1, head_dim: int = 64,
                    is_causal: bool = False, keys: int | None = None) -> float:
    """A model of forward attention's floating-point operations: ``4 B H L K D``.

    Two matrix products (``Q K^T`` and ``P V``) of ``2 L K D`` each, where ``K`` is the
    number of keys each query reads: ``L`` for exact attention (the default), half of
    that with a causal mask when the kernel skips the masked half. Softmax and scaling
    are ignored. For the efficient kernels pass the keys they read instead, e.g.
    ``2 * window + 1`` (local), ``2 * k`` (Linformer: the projections of K and V cost
    as much as attending to ``k`` rows), ``head_dim`` (linear attention with
    ``elu + 1`` features), ``2 * num_features`` (Performer: feature maps, then the
    reordered product).

    >>> attention_flops(1024, head_dim=64) == 4 * 1024 * 1024 * 64
    True
    >>> attention_flops(1024, keys=129) == 4 * 1024 * 129 * 64
    True
    """
    length, batch, heads, head_dim = (check_positive_int(name, value) for name, value in (
        ("length", length), ("batch", batch), ("heads", heads), ("head_dim", head_dim)))
    if keys is None:
        flops = 4.0 * batch * heads * length * length * head_dim
        return flops / 2 if is_causal else flops
    keys = check_positive_int("keys (keys per query)", keys)
    return 4.0 * batch * heads * length * keys * head_dim


def _forward_backward(kernel, inputs, kwargs):
    leaves = [t.detach().requires_grad_() for t in inputs]
    kernel(*leaves, **kwargs).sum().backward()


@dataclass(frozen=True)
class _Options:
    """What every point of one sweep shares."""

    make_inputs: Callable
    backward: bool
    reps: int
    budget: float | None
    kwargs: dict


def _measure_point(kernel, inputs, opts: _Options):
    """Time, then measure the peak in a separate call: the profiler that reads the CPU
    peak must not slow the timed calls (`time_call` has warmed up, so no second warm-up)."""
    call = (lambda: _forward_backward(kernel, inputs, opts.kwargs)) if opts.backward else \
        (lambda: kernel(*inputs, **opts.kwargs))
    with torch.set_grad_enabled(opts.backward):
        timing = time_call(call, reps=opts.reps, device=inputs[0].device)
        peak = peak_memory(call, device=inputs[0].device, warmup=0)
    return timing, peak


def cost_sweep(kernels, lengths, *, make_inputs=None, backward=False, reps=5,
               memory_budget=None, memory_models=None, flops=None, kernel_kwargs=None,
               progress=True) -> list[dict]:
    """Time and measure the peak memory of attention kernels over sequence lengths.

    ``kernels``: name -> callable ``kernel(*inputs, **kernel_kwargs)``. ``lengths``: distinct
    positive ints (swept in increasing order). ``make_inputs(L)`` returns the inputs at
    length L (default `attention_inputs`; its dtype is the sweep's). ``backward`` times
    forward plus backward of ``out.sum()``. Times and peaks come from separate calls;
    ``reps`` (a positive int) timed calls per point. ``memory_budget`` (bytes, a positive
    finite number; None: no budget): a point that would need more is skipped, not run;
    what it needs comes from ``memory_models`` (name -> ``f(L)``, a model of the bytes)
    where the kernel has one, else it is predicted from the kernel's measured peaks (a
    power law through the last two; with fewer the point runs). ``flops(L)``, if given,
    adds the achieved ``tflops`` to each measured row; a mapping name -> ``f(L)`` gives
    each kernel its own model (others get None). A key of ``memory_models`` or ``flops``
    that names no kernel of ``kernels`` raises (its budget or model would never apply), and
    every model is evaluated at every length before anything runs: each must return a
    positive finite number.

    Each point's inputs are checked finite once (a NaN or inf is an ``error`` row naming it),
    then timed and measured inside `labsupport.validation.checked_finite`: the kernels' own
    finite check, a reduction and on a GPU a synchronisation per call, is not their cost.

    A point that fails does not end the sweep: an out-of-memory error is recorded as
    ``oom`` (the wall is part of the lesson), any other error as ``error`` with its type and
    first line (``"TypeError: ..."``), and the kernel's longer lengths are then skipped
    (``"out of memory at L=..."``, ``"error at L=..."``); the points already measured and
    the other kernels are kept. Stop (KeyboardInterrupt, the notebook's Stop button) ends the
    sweep and returns the rows measured so far, the point it cut and every point after it
    marked ``interrupted``, as `labsupport.train.fit` and `labsupport.compare.compare` keep
    what finished. The summary line (with ``progress``) counts each outcome.

    Returns one dict per (kernel, length): ``kernel``, ``length``, ``dtype`` (of the
    inputs, e.g. ``"float32"``), ``time_s`` (median), ``time_min``, ``time_max``,
    ``peak_bytes`` (measured; None where not measurable), ``model_bytes`` (None without a
    model), ``predicted_bytes`` (the prediction a skip rests on, else None), ``tflops``,
    ``status`` (``ok``, ``oom``, ``error``, ``skipped`` or ``interrupted``) and ``note`` (why a
    point did not run).
    """
    from tqdm.auto import tqdm

    _check_kernels(kernels)
    lengths = sorted(check_distinct_positive_ints("lengths", lengths))
    opts = _Options(make_inputs or attention_inputs, backward, check_positive_int("reps", reps),
                    None if memory_budget is None else check_positive_number(
                        "memory_budget (bytes; None: no budget)", memory_budget),
                    kernel_kwargs or {})
    bytes_at, flops_at = _models_at(kernels, lengths, memory_models, flops)
    rows, bar = [], tqdm(total=len(kernels) * len(lengths), disable=not progress,
                         desc="cost sweep", leave=False)
    points = [(name, length) for name in kernels for length in lengths]
    try:
        for name, kernel in kernels.items():
            stop, mine = None, []
            for length in lengths:
                bar.set_postfix_str(f"{name} L={length}")
                row = _sweep_point(name, kernel, length, opts, bytes_at[name].get(length),
                                   flops_at[name].get(length), stop, mine)
                if stop is None and row["status"] in ("oom", "error"):
                    stop = f"{'out of memory' if row['status'] == 'oom' else 'error'} at L={length}"
                mine.append(row)
                rows.append(row)
                bar.update()
    except KeyboardInterrupt:                             # Stop: keep what was measured, as fit does
        free_cuda()
        rows += _interrupted(points[len(rows):], bytes_at)
    finally:
        bar.close()
    if progress:
        print(_summary(rows))
    return rows


def _interrupted(points, bytes_at) -> list[dict]:
    """The rows of the points Stop cut (the first) or left unrun (the rest): status ``interrupted``."""
    if not points:                                        # Stop came after the last point
        return []
    (name, length), rows = points[0], []
    for i, (kernel, L) in enumerate(points):
        note = f"not run: Stop pressed at {name} L={length}" if i else "Stop pressed while this point ran"
        rows.append({**_empty_row(kernel, L, bytes_at[kernel].get(L)), "status": "interrupted", "note": note})
    return rows


def _summary(rows) -> str:
    """``cost sweep: 4 of 6 points measured, 1 skipped, 0 out of memory, 1 error`` (and
    ``, 2 interrupted by Stop`` when Stop ended the sweep)."""
    count = {status: sum(r["status"] == status for r in rows) for status in STATUSES}
    errors = f"{count['error']} error{'s' if count['error'] != 1 else ''}"
    stopped = f", {count['interrupted']} interrupted by Stop" if count["interrupted"] else ""
    return (f"cost sweep: {count['ok']} of {len(rows)} points measured, {count['skipped']} skipped, "
            f"{count['oom']} out of memory, {errors}{stopped}")


def _check_kernels(kernels) -> None:
    """``kernels``: a non-empty mapping of names to callables."""
    if not isinstance(kernels, Mapping) or not kernels:
        raise TypeError(f"kernels must be a non-empty mapping name -> kernel, e.g. {{'naive': "
                        f"naive_attention}}, got {kernels!r}")
    for name, kernel in kernels.items():
        if not callable(kernel):
            raise TypeError(f"kernels[{name!r}] must be a callable kernel(*inputs, **kernel_kwargs), "
                            f"got {type(kernel).__name__}")


def _check_names(option: str, models, kernels) -> None:
    """Raise for keys of a per-kernel mapping that name no kernel of the sweep."""
    unknown = sorted((key for key in models if key not in kernels), key=str)
    if unknown:
        raise ValueError(f"{option} names kernels that are not swept: {unknown}; the kernels are "
                         f"{list(kernels)}; give models only for kernels of this sweep (a model of "
                         "another name never applies)")


def _models_at(kernels, lengths, memory_models, flops) -> tuple[dict, dict]:
    """{kernel: {L: model bytes}} and {kernel: {L: flops}}, each model evaluated and checked
    at every length before the sweep runs (empty where a kernel has no model)."""
    memory_models = memory_models or {}
    _check_names("memory_models", memory_models, kernels)
    if flops is not None and not callable(flops):
        _check_names("flops", flops, kernels)
    bytes_at, flops_at = {}, {}
    for name in kernels:
        model, flop_model = memory_models.get(name), _flops_for(flops, name)
        bytes_at[name] = {} if model is None else {
            L: int(_model_value(f"memory_models[{name!r}]", model, L, _BYTES_MODEL)) for L in lengths}
        label = "flops" if callable(flops) else f"flops[{name!r}]"
        flops_at[name] = {} if flop_model is None else {
            L: _model_value(label, flop_model, L, _FLOP_MODEL) for L in lengths}
    return bytes_at, flops_at


_BYTES_MODEL = "a memory model returns the bytes a point needs"
_FLOP_MODEL = "a flop model returns the operations of one call"


def _model_value(label: str, model, length: int, what: str) -> float:
    """``model(length)`` as a positive finite float, else raise naming the model and the value."""
    value = model(length)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    try:
        return check_positive_number(label, value)
    except (TypeError, ValueError) as err:          # the same kind of mistake, said of the model
        raise type(err)(f"{label}({length}) returned {value!r}; {what}, a positive finite number") from None


def _flops_for(flops, name):
    """The flop model of kernel ``name``: ``flops`` itself, or its entry in a mapping."""
    if flops is None or callable(flops):
        return flops
    return flops.get(name)


def predict_peak(rows, length: int) -> int | None:
    """The peak bytes at ``length`` predicted from one kernel's measured `cost_sweep` rows:
    the power law through the last two measured peaks (shorter lengths), ``p2 (L / L2)^e``
    with ``e = log(p2 / p1) / log(L2 / L1)``. None with fewer than two positive peaks.

    >>> predict_peak([dict(length=1024, peak_bytes=4e6, status="ok"),
    ...               dict(length=2048, peak_bytes=16e6, status="ok")], 4096)
    64000000
    """
    length = check_positive_int("length", length)
    points = [(r["length"], r["peak_bytes"]) for r in rows
              if r["status"] == "ok" and r["peak_bytes"] and r["length"] < length]
    if len(points) < 2 or points[-1][0] == points[-2][0]:
        return None
    (l1, p1), (l2, p2) = points[-2:]
    exponent = math.log(p2 / p1) / math.log(l2 / l1)
    return round(p2 * (length / l2) ** exponent)


def _empty_row(name, length, model_bytes) -> dict:
    """A row before its point is measured: nothing but its kernel, length and model."""
    return dict(kernel=name, length=length, dtype=None, time_s=None, time_min=None, time_max=None,
                peak_bytes=None, model_bytes=model_bytes, predicted_bytes=None, tflops=None,
                status="ok", note="")


def _sweep_point(name, kernel, length, opts: _Options, model_bytes, flop_count, stop, measured) -> dict:
    """One row: skipped (after the kernel's wall, or over the budget), or measured, or the
    error that stopped it (``oom``, ``error``)."""
    row = _empty_row(name, length, model_bytes)
    budget = opts.budget
    if stop is not None:
        return {**row, "status": "skipped", "note": stop}
    if budget is not None and model_bytes is not None and model_bytes > budget:
        return {**row, "status": "skipped",
                "note": f"needs {format_bytes(model_bytes)} > budget {format_bytes(budget)}"}
    predicted = predict_peak(measured, length) if budget is not None and model_bytes is None else None
    if predicted is not None and predicted > budget:
        return {**row, "status": "skipped", "predicted_bytes": predicted,
                "note": f"predicted {format_bytes(predicted)} > budget {format_bytes(budget)}"}
    try:
        inputs = opts.make_inputs(length)
        if not isinstance(inputs, (tuple, list)):
            raise TypeError(f"make_inputs({length}) must return a tuple of the kernel's positional inputs, "
                            f"e.g. (q, k, v), got {type(inputs).__name__}")
        check_finite_tensors({f"make_inputs({length})[{i}]": t for i, t in enumerate(inputs)},
                             why="a sweep measures kernels on finite inputs")
        with checked_finite():                            # checked once: the kernels' checks untimed
            timing, peak = _measure_point(kernel, inputs, opts)
    except Exception as err:                              # recorded: the rows so far are kept
        free_cuda()
        if is_out_of_memory(err):
            return {**row, "status": "oom", "note": _first_line(err)[:80]}
        return {**row, "status": "error", "note": f"{type(err).__name__}: {_first_line(err)}"}
    row.update(dtype=dtype_name(inputs[0].dtype), time_s=timing.median, time_min=timing.min,
               time_max=timing.max, peak_bytes=peak)
    if flop_count is not None:
        row["tflops"] = flop_count / timing.median / 1e12
    del inputs
    free_cuda()
    return row


def _first_line(err: BaseException) -> str:
    lines = str(err).splitlines()
    return lines[0] if lines else ""


def sweep_exponent(rows, kernel: str, key: str = "time_s", *, last: int = 3) -> float:
    """Fitted power-law exponent of ``key`` against length over a kernel's last
    ``last`` measured points of a `cost_sweep` (the upper lengths)."""
    points = [(r["length"], r[key]) for r in rows
              if r["kernel"] == kernel and r["status"] == "ok" and r[key]]
    if len(points) < 2:
        raise ValueError(f"kernel {kernel!r} has {len(points)} measured points of {key!r}; "
                         "a fit needs at least 2")
    lengths, values = zip(*points)
    return fit_power_law(lengths, values, last=last)[0]
