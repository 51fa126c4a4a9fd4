import math
import os
import time

import pytest
import torch

import labsupport.timing as timing
from helpers import policy_error
from labsupport.devices import quiet_stderr
from labsupport.timing import (
    cpu_peak_supported,
    fit_power_law,
    peak_memory,
    peak_resident_bytes,
    time_call,
)
from labsupport.units import format_bytes

exact_cpu_peak = pytest.mark.skipif(not cpu_peak_supported(),
                                    reason="this torch's profiler reports no CPU memory events")


@exact_cpu_peak
@pytest.mark.parametrize("n", [1, 1000, 10_000_000])
def test_peak_memory_reads_a_known_cpu_allocation_to_the_byte(n):
    assert peak_memory(lambda: torch.ones(n)) == 4 * n
    assert peak_memory(lambda: torch.ones(n, dtype=torch.float64)) == 8 * n


@exact_cpu_peak
def test_peak_memory_counts_a_transient_and_the_output_not_the_inputs():
    def make_and_drop():
        big = torch.ones(50_000_000)          # 200 MB, freed before returning
        return big[:10].clone()               # 40 bytes, allocated while big is alive
    assert peak_memory(make_and_drop) == 200_000_000 + 40
    x = torch.ones(1_000_000)                 # 4 MB input: not counted
    assert peak_memory(torch.neg, x) == 4_000_000
    assert peak_memory(torch.Tensor.neg_, x) == 0                 # in place: nothing new
    kept = torch.ones(25_000_000)             # 100 MB held around the call: not counted
    assert peak_memory(lambda: torch.ones(1000)) == 4000
    del kept


@exact_cpu_peak
def test_peak_memory_sees_buffers_allocated_inside_a_kernel():
    """Sorting allocates index and value buffers in C++: visible to the allocator's events."""
    x = torch.randn(1_000_000)
    out_bytes = 1_000_000 * (4 + 8)                               # values and int64 indices
    assert peak_memory(torch.sort, x) > out_bytes


@exact_cpu_peak
def test_peak_memory_repeats_to_the_byte():
    from labsupport.attention import naive_attention, sdpa
    from labsupport.timing import attention_inputs
    q, k, v = attention_inputs(512, heads=2)
    for kernel in (naive_attention, sdpa):
        peaks = {peak_memory(kernel, q, k, v, is_causal=True) for _ in range(3)}
        assert len(peaks) == 1 and peaks.pop() > 512 * 64 * 2 * 4, kernel


@exact_cpu_peak
def test_peak_memory_keeps_grad_mode_and_reraises():
    seen = []
    with torch.no_grad():
        peak_memory(lambda: seen.append(torch.is_grad_enabled()))
    peak_memory(lambda: seen.append(torch.is_grad_enabled()))
    assert seen == [False, False, True, True]                     # warm-up and measured call each
    with pytest.raises(ValueError, match="inside"):
        peak_memory(lambda: (_ for _ in ()).throw(ValueError("inside")))
    assert peak_memory(lambda: torch.ones(10)) == 40              # the profiler was stopped
    from torch.profiler import ProfilerActivity, profile  # and operators are recorded again
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as later:
        torch.ones(10)
    assert "aten::ones" in {e.name for e in later.events()}


def test_peak_memory_is_none_where_not_measurable():
    meta = torch.empty(1000, device="meta")                       # no allocator to ask
    assert peak_memory(torch.neg, meta) is None
    assert format_bytes(None) == "not measured"



def test_quiet_stderr_hides_the_profilers_notice_and_no_other_warning():
    # torch 2.11 with CUDA warns so when a profile starts: seen in a notebook's output on an H200.
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_stderr():
            warnings.warn("Warning: Profiler clears events at the end of each cycle. Only events "
                          "from the current cycle will be reported.", UserWarning, stacklevel=1)
            warnings.warn("a warning of the user's own", UserWarning, stacklevel=1)
        warnings.warn("Warning: Profiler clears events at the end of each cycle.", UserWarning,
                      stacklevel=1)
    assert [str(w.message)[:26] for w in caught] == ["a warning of the user's ow",
                                                     "Warning: Profiler clears e"]   # outside: again

@exact_cpu_peak
def test_peak_memory_is_none_while_another_profiler_runs():
    from torch.profiler import ProfilerActivity, profile
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as users:
        torch.ones(10)
        assert peak_memory(lambda: torch.ones(1000)) is None      # "not measured", not a guess
        assert not cpu_peak_supported()
        torch.ones(20)
    assert sum(e.name == "aten::ones" for e in users.events()) == 2   # the user's session survived
    assert peak_memory(lambda: torch.ones(1000)) == 4000 and cpu_peak_supported()


RESIDENT_CHECK = """
import torch
from labsupport.timing import peak_memory, peak_resident_bytes
def fresh():
    torch.ones(50_000_000).neg_()                                  # 200 MB, touched
print(peak_memory(fresh), peak_resident_bytes(fresh))
"""


@exact_cpu_peak
@pytest.mark.skipif(peak_resident_bytes(lambda: None) is None, reason="resident set is Linux-only")
def test_resident_set_cross_check_agrees_on_a_large_fresh_allocation():
    # In a fresh process: the resident set is the process's, and what earlier tests of this
    # worker touched and freed (memory the C library keeps resident) would hide the rise.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", RESIDENT_CHECK], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    exact, resident = map(int, out.stdout.split()[-2:])
    assert exact == 200_000_000
    assert 190e6 <= resident <= exact + 8e6                        # page-granular, coarse


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_peak_memory_on_cuda():
    measured = peak_memory(lambda: torch.ones(25_000_000, device="cuda"), device="cuda")
    assert 100e6 <= measured <= 100e6 + 2 ** 21


def test_time_call_on_a_known_sleep():
    t = time_call(time.sleep, 0.02, reps=3, warmup=0)
    # at least the sleep, in seconds: a loaded worker may oversleep, but not to the 20 that
    # milliseconds would read
    assert 0.02 <= t.min <= t.median <= t.max < 2 and len(t.times) == 3
    with pytest.raises(ValueError, match="reps must be a positive int, got 0"):
        time_call(time.sleep, 0, reps=0)


def test_fit_power_law_recovers_exponent_with_noise():
    g = torch.Generator().manual_seed(0)
    x = [2 ** i for i in range(6, 14)]
    y = [3e-9 * v ** 2 * math.exp(0.03 * float(torch.randn(1, generator=g))) for v in x]
    exponent, prefactor = fit_power_law(x, y)
    assert abs(exponent - 2) < 0.05 and 1e-9 < prefactor < 1e-8
    linear_tail = [100.0, 1.0, 50.0, 4.0, 5.0, 6.0]       # only the last three follow y = x
    assert abs(fit_power_law(range(1, 7), linear_tail, last=3)[0] - 1.0) < 1e-9
    assert abs(fit_power_law(range(1, 7), linear_tail)[0] - 1.0) > 0.5


def test_fit_power_law_rejects_bad_data():
    with pytest.raises(ValueError, match="positive"):
        fit_power_law([1, 2], [0, 1])
    with pytest.raises(ValueError, match="at least 2 distinct"):
        fit_power_law([3, 3], [1, 2])
    with pytest.raises(ValueError, match="differ in length"):
        fit_power_law([1, 2, 3], [1, 2])


def test_format_bytes():
    assert format_bytes(1_500_000) == "1.5 MB" and format_bytes(12) == "12 B"
    assert format_bytes(3e9) == "3.0 GB"


# --- cost_sweep -------------------------------------------------------------------------

def _tiny_inputs(L):
    return (torch.randn(1, 1, L, 8),) * 3


def test_cost_sweep_rows_and_budget_skips():
    from labsupport.attention import naive_attention
    from labsupport.timing import cost_sweep
    rows = cost_sweep({"naive": naive_attention}, [32, 16, 64], make_inputs=_tiny_inputs, reps=2,
                      memory_budget=2 * 32 * 32 * 4, memory_models={"naive": lambda L: 2 * L * L * 4},
                      progress=False)
    assert [r["length"] for r in rows] == [16, 32, 64]
    assert [r["status"] for r in rows] == ["ok", "ok", "skipped"]
    assert rows[2]["time_s"] is None and "needs 32.8 kB" in rows[2]["note"]
    assert all(r["time_min"] <= r["time_s"] <= r["time_max"] for r in rows[:2])
    assert rows[0]["model_bytes"] == 2048


def test_cost_sweep_survives_out_of_memory_and_goes_on():
    from labsupport.timing import cost_sweep

    def fragile(q, k, v):
        if q.shape[-2] >= 32:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return q
    def broken(q, k, v):
        raise ValueError("a real bug")

    rows = cost_sweep({"fragile": fragile, "fine": lambda q, k, v: q}, [16, 32, 64],
                      make_inputs=_tiny_inputs, reps=1, progress=False)
    assert [r["status"] for r in rows] == ["ok", "oom", "skipped", "ok", "ok", "ok"]
    assert "out of memory" in rows[1]["note"] and rows[2]["note"] == "out of memory at L=32"
    [row] = cost_sweep({"broken": broken}, [16], make_inputs=_tiny_inputs, progress=False)
    assert (row["status"], row["note"]) == ("error", "ValueError: a real bug")   # recorded, not hidden


def test_cost_sweep_backward_and_flops():
    from labsupport.attention import sdpa
    from labsupport.timing import attention_flops, cost_sweep
    rows = cost_sweep({"sdpa": sdpa}, [64], make_inputs=_tiny_inputs, backward=True, reps=1,
                      flops=lambda L: attention_flops(L, head_dim=8), progress=False)
    assert rows[0]["status"] == "ok" and rows[0]["tflops"] > 0
    assert attention_flops(10, head_dim=8, is_causal=True) == 4 * 100 * 8 / 2


def test_cost_sweep_times_without_the_profiler_and_measures_with_it():
    """Times and peaks come from separate calls: no timed call runs under the profiler."""
    from labsupport.timing import cost_sweep, profiler_active
    seen = []

    def spy(q, k, v):
        seen.append(profiler_active())
        return q * 2
    for backward in (False, True):
        seen.clear()
        [row] = cost_sweep({"spy": spy}, [16], make_inputs=_tiny_inputs, reps=3, backward=backward,
                           progress=False)
        assert seen == [False] * 4 + [cpu_peak_supported()]     # warm-up, 3 timed, then measured
        assert row["dtype"] == "float32"
        if cpu_peak_supported():
            assert row["peak_bytes"] >= 16 * 8 * 4                 # the output, or q.grad


def _hungry(q, k, v):
    """A fake kernel whose peak we know: 4 L^2 bytes of scratch, then an output like q."""
    scratch = torch.ones(q.shape[-2] ** 2)                          # (L^2,) float32
    return q + scratch[0]


@exact_cpu_peak
@pytest.mark.slow
def test_cost_sweep_predicts_a_peak_without_a_model_and_skips_over_budget():
    from labsupport.timing import cost_sweep
    peak = {L: 4 * L * L + 4 * L * 8 for L in (16, 32, 64)}        # scratch + output (exact)
    rows = cost_sweep({"hungry": _hungry}, [16, 32, 64, 128], make_inputs=_tiny_inputs, reps=1,
                      memory_budget=30_000, progress=False)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "skipped"]
    assert [r["peak_bytes"] for r in rows[:3]] == [peak[16], peak[32], peak[64]]
    predicted = round(peak[64] * peak[64] / peak[32])             # power law through 32 and 64
    assert rows[2]["predicted_bytes"] is None and rows[3]["predicted_bytes"] == predicted
    assert rows[3]["note"] == f"predicted {format_bytes(predicted)} > budget 30.0 kB"
    assert rows[3]["model_bytes"] is None and rows[3]["time_s"] is None
    # fewer than two measured points: the point runs, whatever the budget
    rows = cost_sweep({"hungry": _hungry}, [16, 32, 64], make_inputs=_tiny_inputs, reps=1,
                      memory_budget=1_000, progress=False)
    assert [r["status"] for r in rows] == ["ok", "ok", "skipped"]
    # a model, where there is one, decides instead of the prediction
    rows = cost_sweep({"hungry": _hungry}, [16, 32, 64, 128], make_inputs=_tiny_inputs, reps=1,
                      memory_budget=30_000, memory_models={"hungry": lambda L: 10}, progress=False)
    assert [r["status"] for r in rows] == ["ok"] * 4
    # no budget: nothing is predicted or skipped
    rows = cost_sweep({"hungry": _hungry}, [16, 32, 64, 128], make_inputs=_tiny_inputs, reps=1,
                      progress=False)
    assert [r["status"] for r in rows] == ["ok"] * 4 and rows[3]["peak_bytes"] > 30_000


def test_predict_peak_from_two_points():
    from labsupport.timing import predict_peak
    rows = [dict(length=L, peak_bytes=p, status=s) for L, p, s in
            [(100, 1e3, "ok"), (200, 4e3, "ok"), (300, None, "ok"), (400, None, "skipped")]]
    assert predict_peak(rows, 800) == 64_000                        # quadratic through 100, 200
    assert predict_peak(rows[:1], 800) is None
    linear = [dict(length=L, peak_bytes=3 * L, status="ok") for L in (10, 20)]
    assert predict_peak(linear, 40) == 120


def test_is_out_of_memory_recognises_allocator_errors():
    from labsupport.timing import is_out_of_memory
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_cost_sweep_flops_per_kernel():
    from labsupport.timing import attention_flops, cost_sweep
    rows = cost_sweep({"a": lambda q, k, v: q, "b": lambda q, k, v: q}, [16],
                      make_inputs=_tiny_inputs, reps=1, progress=False,
                      flops={"a": lambda L: attention_flops(L, head_dim=8, keys=3)})
    assert rows[0]["tflops"] > 0 and rows[1]["tflops"] is None
    assert attention_flops(10, head_dim=8, keys=3) == 4 * 10 * 3 * 8
    with pytest.raises(ValueError, match="keys per query"):
        attention_flops(10, keys=0)


# --- the matrix-multiply peak and the fraction of it a kernel reaches -------------------

def test_matmul_peak_tflops_is_the_best_size(monkeypatch):
    from labsupport.timing import Timing, throughput

    def fake_time_call(fn, a, b, **kwargs):        # 64: 1 TFLOP/s, 128: 4 TFLOP/s
        n = a.shape[0]
        seconds = 2 * n ** 3 / (1e12 if n == 64 else 4e12)
        return Timing(seconds, seconds, seconds, (seconds,))
    monkeypatch.setattr(throughput, "time_call", fake_time_call)
    assert throughput.matmul_peak_tflops("cpu", torch.float32, sizes=(64, 128)) == pytest.approx(4.0)


def test_matmul_peak_tflops_measures_on_cpu_and_rejects_bad_input():
    from labsupport.timing import matmul_peak_tflops
    peak = matmul_peak_tflops("cpu", torch.float32, sizes=(64, 128), reps=2)
    assert 0 < peak < 1e3 and math.isfinite(peak)
    with pytest.raises(ValueError, match="floating-point"):
        matmul_peak_tflops("cpu", torch.int32, sizes=(8,))
    with pytest.raises(ValueError, match=r"sizes must hold at least one value, got \(\)"):
        matmul_peak_tflops("cpu", torch.float32, sizes=())
    with pytest.raises(ValueError, match=r"sizes must be distinct positive ints, got \(0, 8\)"):
        matmul_peak_tflops("cpu", torch.float32, sizes=(0, 8))


def _row(**changes):
    row = dict(kernel="sdpa", length=64, dtype="float32", time_s=1e-3, time_min=1e-3, time_max=1e-3,
               peak_bytes=2e6, model_bytes=None, predicted_bytes=None, tflops=2.0, status="ok",
               note="")
    return {**row, **changes}


def test_peak_fraction_in_rows_and_in_the_sweep_table(capsys):
    from labsupport.timing import MatmulPeak, add_peak_fraction, sweep_table
    row, peak = _row(), MatmulPeak(8.0, torch.float32, "cpu")
    skipped = _row(length=128, tflops=None, status="skipped", note="budget")
    with_fraction = add_peak_fraction([row, skipped], peak)
    assert [r["peak_fraction"] for r in with_fraction] == [0.25, None]
    assert "peak_fraction" not in row                       # the input rows are not changed
    with pytest.raises(ValueError, match="peak.tflops must be positive"):
        add_peak_fraction([row], MatmulPeak(0.0, torch.float32, "cpu"))
    sweep_table([row, skipped], peak=peak)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("TFLOP/s  % of fp32 peak")
    assert lines[1].split()[-2:] == ["2.000", "25.0"] and lines[2].split()[-2:] == ["-", "-"]


def test_sweep_table_prints_every_measured_peak(capsys):
    """Exact peaks need no "< 1 MB" floor: a few kB print as what they are."""
    from labsupport.timing import sweep_table
    sweep_table([_row(peak_bytes=4096), _row(length=128, peak_bytes=None)])
    lines = capsys.readouterr().out.splitlines()
    assert "4.1 kB" in lines[1] and "not measured" in lines[2] and "<" not in "".join(lines)


def test_sweep_table_prints_a_time_range_only_for_repeated_timings(capsys):
    """One repetition has no range: min = max = median prints as the median alone."""
    from labsupport.timing import sweep_table
    sweep_table([_row()])
    once = capsys.readouterr().out.splitlines()
    assert "time ms" in once[0] and "min-max" not in once[0] and "(" not in once[1]
    sweep_table([_row(time_min=0.9e-3, time_max=1.2e-3), _row(length=128)])
    several = capsys.readouterr().out.splitlines()
    assert "time ms (min-max)" in several[0] and "1.0 (0.9-1.2)" in several[1] and "(" not in several[2]


def test_a_peak_of_another_dtype_is_refused():
    from labsupport.timing import MatmulPeak, add_peak_fraction
    bf16_rows = [_row(dtype="bfloat16")]
    with pytest.raises(ValueError, match="rows ran in bfloat16 but the peak was measured in float32"):
        add_peak_fraction(bf16_rows, MatmulPeak(60.0, torch.float32, "cuda"))
    with pytest.raises(TypeError, match="a bare number does not say its dtype"):
        add_peak_fraction(bf16_rows, 800.0)
    assert add_peak_fraction(bf16_rows, MatmulPeak(800.0, torch.bfloat16, "cuda"))[0]["peak_fraction"] \
        == pytest.approx(2.0 / 800.0)
    no_dtype = {k: v for k, v in _row().items() if k != "dtype"}          # not a cost_sweep row
    with pytest.raises(ValueError, match=r"a row with tflops has no dtype \(kernel 'sdpa', L=64\); "
                                         r"add_peak_fraction takes cost_sweep rows"):
        add_peak_fraction([no_dtype], MatmulPeak(8.0, torch.float32, "cpu"))


def test_gpu_profile_sweeps_in_bfloat16_against_the_bfloat16_peak(monkeypatch):
    """A faked CUDA device (as tests/test_gpu_check.py fakes one for the report plugin): the
    gpu profile picks bfloat16 for its sweeps, and the peak they are compared with is the
    bfloat16 one; the cpu profile keeps float32 and its float32 peak."""
    from labsupport import profile
    from labsupport.attention import sdpa
    from labsupport.timing import add_peak_fraction, attention_inputs, cost_sweep, matmul_peak, sweep_table

    asked = []

    def fake_matmul_peak_tflops(device, dtype, sizes=None, *, reps=5):
        asked.append((torch.device(device).type, dtype))
        return {torch.bfloat16: 800.0, torch.float32: 60.0}[dtype]

    monkeypatch.setattr(timing.throughput, "matmul_peak_tflops", fake_matmul_peak_tflops)
    monkeypatch.delenv(profile.ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    P = profile.current()
    assert P.name == "gpu" and P.device.type == "cuda" and P.sweep_dtype is torch.bfloat16
    peak = matmul_peak(P.device, P.sweep_dtype)
    assert asked == [("cuda", torch.bfloat16)] and peak.tflops == 800.0 and peak.label == "bf16 peak"
    # the sweep itself runs here on the CPU, in the profile's dtype
    rows = cost_sweep({"sdpa": sdpa}, [64], reps=1, progress=False, flops=lambda L: 1e6,
                      make_inputs=lambda L: attention_inputs(L, head_dim=8, dtype=P.sweep_dtype))
    assert rows[0]["dtype"] == "bfloat16"
    assert add_peak_fraction(rows, peak)[0]["peak_fraction"] > 0
    with pytest.raises(ValueError, match="rows ran in bfloat16"):
        sweep_table(rows, peak=matmul_peak(P.device, torch.float32))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu = profile.current()
    assert cpu.name == "cpu" and cpu.sweep_dtype is torch.float32
    assert matmul_peak(cpu.device, cpu.sweep_dtype).label == "fp32 peak"


def test_attention_inputs_in_a_reduced_dtype_are_the_float32_ones_rounded():
    from labsupport.timing import attention_inputs
    full, half = attention_inputs(32, heads=2), attention_inputs(32, heads=2, dtype=torch.bfloat16)
    assert all(h.dtype == torch.bfloat16 and torch.equal(h, f.bfloat16()) for f, h in zip(full, half))
    assert attention_inputs(8, dtype=torch.float64)[0].dtype == torch.float64
    with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
        attention_inputs(8, dtype="bfloat16")


def test_dtype_error_against_float32():
    from labsupport.attention import flash_attention, sdpa
    from labsupport.timing import attention_inputs, dtype_error
    assert dtype_error(sdpa, 128, torch.float32) == 0.0
    for kernel in (sdpa, flash_attention):
        error = dtype_error(kernel, 128, torch.bfloat16, is_causal=True)
        assert 1e-4 < error < 5e-2, (kernel, error)       # bfloat16 keeps 8 significant bits
    with pytest.raises(TypeError, match="make_inputs must return float32"):
        dtype_error(sdpa, 16, torch.bfloat16,
                    make_inputs=lambda L: attention_inputs(L, dtype=torch.float64))


# --- CUDA: events, peak-memory reset, out of memory, the peak (skip without CUDA) -------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@needs_cuda
def test_time_call_on_cuda_waits_for_the_gpu():
    cycles = 20_000_000                         # torch.cuda._sleep spins the GPU, not the CPU
    short = time_call(torch.cuda._sleep, cycles, reps=3, device="cuda")
    long = time_call(torch.cuda._sleep, 4 * cycles, reps=3, device="cuda")
    assert short.min > 1e-3                     # a CPU timer without a sync would see microseconds
    assert 3 < long.median / short.median < 5


@needs_cuda
def test_peak_memory_on_cuda_is_reset_between_calls():
    big = peak_memory(lambda: torch.ones(50_000_000, device="cuda"), device="cuda")      # 200 MB
    small = peak_memory(lambda: torch.ones(1_000_000, device="cuda"), device="cuda")     # 4 MB
    assert 200e6 <= big <= 200e6 + 2 ** 21
    assert 4e6 <= small <= 4e6 + 2 ** 21        # the 200 MB peak did not carry over
    kept = torch.ones(25_000_000, device="cuda")                # 100 MB allocated before: not counted
    assert peak_memory(lambda: torch.ones(1_000_000, device="cuda"), device="cuda") <= 4e6 + 2 ** 21
    del kept


@needs_cuda
def test_cost_sweep_records_cuda_out_of_memory_and_frees_it():
    from labsupport.attention import naive_attention
    from labsupport.timing import attention_inputs, cost_sweep
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    huge = 2 ** 21                              # one 2M x 2M float32 score matrix: 17.6 TB
    rows = cost_sweep({"naive": naive_attention}, [1024, huge, 2 * huge], reps=1, progress=False,
                      make_inputs=lambda L: attention_inputs(L, head_dim=8, device="cuda"))
    assert [r["status"] for r in rows] == ["ok", "oom", "skipped"]
    assert rows[0]["peak_bytes"] >= 1024 * 1024 * 4 and "out of memory" in rows[1]["note"].lower()
    assert torch.cuda.memory_allocated() - before < 2 ** 21


@needs_cuda
def test_matmul_peak_tflops_on_cuda():
    from labsupport.timing import matmul_peak_tflops
    fp32 = matmul_peak_tflops("cuda", torch.float32, sizes=(1024, 2048))
    assert 0.1 < fp32 < 1e4
    if torch.cuda.get_device_capability() >= (8, 0):    # Ampere on: bf16 tensor cores
        bf16 = matmul_peak_tflops("cuda", sizes=(2048, 4096))
        assert bf16 > fp32


def test_precision_note_names_the_backend_and_the_errors(capsys):
    from labsupport.attention import flash_attention, sdpa
    from labsupport.timing import precision_note
    precision_note({"sdpa": sdpa, "flash": flash_attention}, 64, torch.bfloat16, is_causal=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "inputs in bfloat16 on cpu; SDPA ran its flash backend"   # PyTorch's CPU flash
    assert lines[1] == "max |error| against the same kernel in float32, L = 64:"
    errors = {line.split()[0]: float(line.split()[1]) for line in lines[3:]}
    assert errors.keys() == {"sdpa", "flash"} and all(0 < e < 5e-2 for e in errors.values())
    precision_note({"sdpa": sdpa}, 64, torch.float32)
    assert capsys.readouterr().out.splitlines() == ["inputs in float32 on cpu; SDPA ran its flash backend"]


# --- a sweep keeps what it measured, and refuses options it would misread ---------------

def test_cost_sweep_records_a_kernel_error_and_goes_on(capsys):
    """A non-memory error is recorded (status "error", the error's type and first line), the
    kernel's longer lengths are skipped, the points already measured are kept, and the other
    kernels run; the summary line counts the error."""
    from labsupport.timing import cost_sweep, sweep_table

    def breaks_at_32(q, k, v):
        if q.shape[-2] >= 32:
            raise TypeError("unsupported operand\nsecond line of the traceback text")
        return q

    rows = cost_sweep({"breaks": breaks_at_32, "fine": lambda q, k, v: q}, [16, 32, 64],
                      make_inputs=_tiny_inputs, reps=1)
    assert [(r["kernel"], r["status"]) for r in rows] == [
        ("breaks", "ok"), ("breaks", "error"), ("breaks", "skipped"), ("fine", "ok"), ("fine", "ok"),
        ("fine", "ok")]
    assert rows[1]["note"] == "TypeError: unsupported operand" and rows[2]["note"] == "error at L=32"
    assert rows[0]["time_s"] > 0 and rows[1]["time_s"] is None
    assert capsys.readouterr().out.strip().endswith(
        "cost sweep: 4 of 6 points measured, 1 skipped, 0 out of memory, 1 error")
    sweep_table(rows)
    lines = capsys.readouterr().out.splitlines()
    assert "error" in lines[2] and "TypeError: unsupported operand" in lines[2]
    assert "error at L=32" in lines[3]


def _stops_at(length, *, in_inputs=False):
    """A kernel (or, with ``in_inputs``, a make_inputs) that raises KeyboardInterrupt, the
    notebook's Stop, at ``length``."""
    def kernel(q, k, v):
        if q.shape[-2] == length:
            raise KeyboardInterrupt
        return q * 2

    def make_inputs(L):
        if L == length:
            raise KeyboardInterrupt
        return _tiny_inputs(L)
    return make_inputs if in_inputs else kernel


@pytest.mark.parametrize("in_inputs", [False, True])
def test_stop_in_a_cost_sweep_returns_the_rows_measured_so_far(capsys, in_inputs):
    """Stop (KeyboardInterrupt) at the second point keeps the first point's measurement and
    marks the point it cut and every point after it "interrupted", as fit and compare keep
    what finished; the summary line counts them."""
    from labsupport.timing import cost_sweep, sweep_table
    kernels = {"first": lambda q, k, v: q * 2, "second": lambda q, k, v: q + 1} if in_inputs else \
        {"first": _stops_at(32), "second": lambda q, k, v: q + 1}
    options = dict(make_inputs=_stops_at(32, in_inputs=True)) if in_inputs else dict(make_inputs=_tiny_inputs)
    rows = cost_sweep(kernels, [16, 32, 64], reps=1, **options)
    assert [(r["kernel"], r["length"], r["status"]) for r in rows] == [
        ("first", 16, "ok"), ("first", 32, "interrupted"), ("first", 64, "interrupted"),
        ("second", 16, "interrupted"), ("second", 32, "interrupted"), ("second", 64, "interrupted")]
    assert rows[0]["time_s"] > 0 and all(r["time_s"] is None and r["peak_bytes"] is None for r in rows[1:])
    assert rows[1]["note"] == "Stop pressed while this point ran"
    assert all(r["note"] == "not run: Stop pressed at first L=32" for r in rows[2:])
    assert capsys.readouterr().out.strip().endswith(
        "cost sweep: 1 of 6 points measured, 0 skipped, 0 out of memory, 0 errors, 5 interrupted by Stop")
    sweep_table(rows)
    assert "interrupted" in capsys.readouterr().out.splitlines()[3]


def test_stop_in_a_quiet_cost_sweep_prints_nothing_and_keeps_the_rows(capsys):
    from labsupport.timing import cost_sweep
    rows = cost_sweep({"k": _stops_at(16)}, [16, 32], make_inputs=_tiny_inputs, reps=1, progress=False)
    assert [r["status"] for r in rows] == ["interrupted", "interrupted"] and capsys.readouterr().out == ""


def test_a_sweep_checks_its_inputs_finite_once_and_times_the_kernels_without_their_check(monkeypatch):
    """The kernels refuse NaN and inf in q, k, v with one reduction per call (on a GPU, one
    synchronisation): the sweep checks a point's inputs once, records a non-finite one as an
    error row naming it, and times the kernel without its own check."""
    import labsupport.validation as validation
    from labsupport.attention import naive_attention, sdpa
    from labsupport.timing import cost_sweep
    calls = []
    checked = validation.check_finite_tensors
    monkeypatch.setattr(validation, "check_finite_tensors",
                        lambda *a, **kw: calls.append(1) or checked(*a, **kw))
    [row] = cost_sweep({"sdpa": sdpa}, [16], make_inputs=_tiny_inputs, reps=3, progress=False)
    assert row["status"] == "ok" and calls == []                    # 5 kernel calls, no check inside
    sdpa(*_tiny_inputs(16))
    assert calls == [1]                                             # outside a sweep the kernel checks

    def holed(L):
        q, k, v = (torch.randn(1, 1, L, 8) for _ in range(3))
        v[0, 0, 3, 1] = float("nan")
        return q, k, v
    [row] = cost_sweep({"naive": naive_attention}, [16], make_inputs=holed, progress=False)
    assert (row["status"], row["note"]) == (
        "error", "NonFiniteError: make_inputs(16)[2] holds nan at (0, 0, 3, :) of make_inputs(16)[2] "
                 "(1, 1, 16, 8): a sweep measures kernels on finite inputs")


def test_cost_sweep_refuses_a_model_for_a_kernel_it_does_not_sweep():
    from labsupport.timing import cost_sweep
    kernels = {"naive": lambda q, k, v: q, "sdpa": lambda q, k, v: q}
    with pytest.raises(ValueError, match=r"memory_models names kernels that are not swept: \['nave'\]; "
                                         r"the kernels are \['naive', 'sdpa'\]"):
        cost_sweep(kernels, [16], memory_models={"nave": lambda L: 1}, memory_budget=1e9,
                   make_inputs=_tiny_inputs, progress=False)
    with pytest.raises(ValueError, match=r"flops names kernels that are not swept: \['flash'\]"):
        cost_sweep(kernels, [16], flops={"naive": lambda L: 1.0, "flash": lambda L: 1.0},
                   make_inputs=_tiny_inputs, progress=False)


def _sweep(**options):
    from labsupport.timing import cost_sweep
    return cost_sweep({"q": lambda q, k, v: q}, options.pop("lengths", [16]), make_inputs=_tiny_inputs,
                      progress=False, **options)


def _policy_error(options: dict) -> type:
    """The error the package's policy names for the one bad option of ``options``: reps,
    warmup and the lengths or sizes are ints, memory_budget a number; a list of them is
    refused by type when one holds a value of the wrong type."""
    ((name, value),) = [(k, v) for k, v in options.items() if k != "sizes" or len(options) == 1]
    if isinstance(value, (list, tuple)):
        return TypeError if any(policy_error(v, integer=True) is TypeError for v in value) else ValueError
    return policy_error(value, integer=name != "memory_budget")


BUDGET = r"memory_budget \(bytes; None: no budget\) must be a finite number > 0, "


@pytest.mark.parametrize("options, message", [
    (dict(reps=0), r"reps must be a positive int, got 0"),
    (dict(reps=True), r"reps must be a positive int, got True"),
    (dict(reps=2.0), r"reps must be a positive int, got 2\.0"),
    (dict(memory_budget=float("nan")), r"memory_budget \(bytes; None: no budget\) must be a finite "
                                       r"number > 0, got nan"),
    (dict(memory_budget=-1), BUDGET + r"got -1"),
    (dict(memory_budget=0), BUDGET + r"got 0"),
    (dict(memory_budget=float("inf")), BUDGET + r"got inf"),
    (dict(memory_budget=True), BUDGET + r"got True"),
    (dict(lengths=[16, 16]), r"lengths must be distinct positive ints, got \[16, 16\] \(16 twice\)"),
    (dict(lengths=[0, 16]), r"lengths must be distinct positive ints, got \[0, 16\]"),
    (dict(lengths=[-16]), r"lengths must be distinct positive ints, got \[-16\]"),
    (dict(lengths=[16.5]), r"lengths must be distinct positive ints, got \[16\.5\]"),
    (dict(lengths=[True]), r"lengths must be distinct positive ints, got \[True\]"),
    (dict(lengths=[]), r"lengths must hold at least one value, got \[\]"),
])
def test_cost_sweep_refuses_numeric_options_it_would_misread(options, message):
    with pytest.raises(_policy_error(options), match=message):
        _sweep(**options)


@pytest.mark.parametrize("bad", [float("nan"), -5, float("inf")])
def test_cost_sweep_refuses_a_model_that_returns_no_byte_count(bad):
    with pytest.raises(ValueError, match=r"memory_models\['q'\]\(16\) returned .*; a memory model returns "
                                         r"the bytes a point needs, a positive finite number"):
        _sweep(memory_models={"q": lambda L: bad}, memory_budget=1e9)
    with pytest.raises(ValueError, match=r"flops\(16\) returned .*; a flop model returns the operations "
                                         r"of one call, a positive finite number"):
        _sweep(flops=lambda L: bad)


@pytest.mark.parametrize("options, message", [
    (dict(reps=0), r"reps must be a positive int, got 0"),
    (dict(reps=True), r"reps must be a positive int, got True"),
    (dict(reps=2.0), r"reps must be a positive int, got 2\.0"),
    (dict(warmup=-1), r"warmup must be an int >= 0, got -1"),
    (dict(warmup=True), r"warmup must be an int >= 0, got True"),
    (dict(warmup=1.0), r"warmup must be an int >= 0, got 1\.0"),
])
def test_time_call_refuses_counts_that_are_not_counts(options, message):
    with pytest.raises(_policy_error(options), match=message):
        time_call(lambda: None, **options)


@pytest.mark.parametrize("warmup", [-1, True, 1.5])
def test_peak_memory_refuses_a_warmup_that_is_not_a_count(warmup):
    with pytest.raises(policy_error(warmup, integer=True), match=r"warmup must be an int >= 0, got "):
        peak_memory(lambda: torch.ones(4), warmup=warmup)


@pytest.mark.parametrize("call, error, message", [
    (lambda f: f(16.0), TypeError, r"length must be an int >= 0, got 16\.0"),
    (lambda f: f(-1), ValueError, r"length must be an int >= 0, got -1"),
    (lambda f: f(16, heads=0), ValueError, r"heads must be a positive int, got 0"),
    (lambda f: f(16, batch=True), TypeError, r"batch must be a positive int, got True"),
    (lambda f: f(16, head_dim=8.0), TypeError, r"head_dim must be a positive int, got 8\.0"),
    (lambda f: f(16, seed=1.5), TypeError, r"seed must be an int >= 0, got 1\.5"),
])
def test_attention_inputs_refuses_sizes_that_are_not_sizes(call, error, message):
    from labsupport.timing import attention_inputs
    with pytest.raises(error, match=message):
        call(attention_inputs)


@pytest.mark.parametrize("call, error, message", [
    (lambda f: f(0), ValueError, r"length must be a positive int, got 0"),
    (lambda f: f(16.5), TypeError, r"length must be a positive int, got 16\.5"),
    (lambda f: f(16, heads=-2), ValueError, r"heads must be a positive int, got -2"),
    (lambda f: f(16, keys=2.5), TypeError, r"keys \(keys per query\) must be a positive int, got 2\.5"),
    (lambda f: f(16, keys=True), TypeError, r"keys \(keys per query\) must be a positive int, got True"),
    (lambda f: f(16, keys=0), ValueError, r"keys \(keys per query\) must be a positive int, got 0"),
])
def test_attention_flops_refuses_sizes_that_are_not_sizes(call, error, message):
    from labsupport.timing import attention_flops
    with pytest.raises(error, match=message):
        call(attention_flops)


@pytest.mark.parametrize("options, message", [
    (dict(sizes=(True,)), r"sizes must be distinct positive ints, got \(True,\)"),
    (dict(sizes=(64.0,)), r"sizes must be distinct positive ints, got \(64\.0,\)"),
    (dict(sizes=(64, 64)), r"sizes must be distinct positive ints, got \(64, 64\) \(64 twice\)"),
    (dict(sizes=(8,), reps=0), r"reps must be a positive int, got 0"),
    (dict(sizes=(8,), reps=1.0), r"reps must be a positive int, got 1\.0"),
])
def test_matmul_peak_refuses_sizes_and_reps_that_are_not_counts(options, message):
    from labsupport.timing import matmul_peak, matmul_peak_tflops
    for measure in (matmul_peak_tflops, matmul_peak):
        with pytest.raises(_policy_error(options), match=message):
            measure("cpu", torch.float32, **options)


def test_predict_peak_and_sweep_exponent_refuse_counts_that_are_not_counts():
    from labsupport.timing import predict_peak, sweep_exponent
    rows = [_row(length=L, time_s=L * 1e-6) for L in (16, 32, 64)]
    for length in (0, -8, 64.0, True):
        with pytest.raises(policy_error(length, integer=True), match=r"length must be a positive int, got "):
            predict_peak(rows, length)
    for last in (0, 1, -2, 2.0, True):            # last=0 would fit every point: rows[-0:]
        with pytest.raises(policy_error(last, integer=True),
                           match=r"last must be an int >= 2 \(a fit needs two points\), got "):
            sweep_exponent(rows, "sdpa", last=last)
    assert sweep_exponent(rows, "sdpa", last=2) == pytest.approx(1.0)


@pytest.mark.parametrize("x, y, message", [
    ([1, 2, float("nan")], [1, 2, 3], r"x must be finite, got nan at index 2"),
    ([1, 2, 3], [1, float("inf"), 3], r"y must be finite, got inf at index 1"),
    ([1, 2, 3], [float("nan")] * 3, r"y must be finite, got nan at index 0"),
])
def test_fit_power_law_refuses_values_that_are_not_finite(x, y, message):
    with pytest.raises(ValueError, match=message):
        fit_power_law(x, y)


@pytest.mark.parametrize("last", [0, -1, 2.0, True])
def test_fit_power_law_refuses_a_last_that_is_not_a_count(last):
    with pytest.raises(policy_error(last, integer=True),
                       match=r"last must be an int >= 2 \(a fit needs two points\), got "):
        fit_power_law([1, 2, 4], [1, 4, 16], last=last)


@pytest.mark.parametrize("kernels, message", [
    ([lambda q, k, v: q], r"kernels must be a non-empty mapping name -> kernel"),
    ({}, r"kernels must be a non-empty mapping name -> kernel"),
    ({"naive": "naive"}, r"kernels\[.naive.\] must be a callable kernel\(\*inputs, .*\), got str"),
])
def test_cost_sweep_refuses_kernels_that_are_not_a_mapping_of_callables(kernels, message):
    from labsupport.timing import cost_sweep
    with pytest.raises(TypeError, match=message):
        cost_sweep(kernels, [16], make_inputs=_tiny_inputs, progress=False)
