import math
import time

import pytest
import torch

from labsupport.timing import cpu_peak_supported, fit_power_law, format_bytes, peak_memory, time_call


@pytest.mark.skipif(not cpu_peak_supported(), reason="CPU peak resident set is Linux-only")
@pytest.mark.parametrize("megabytes", [40, 200])
def test_peak_memory_sees_a_known_cpu_allocation(megabytes):
    n = megabytes * 1_000_000 // 4
    measured = peak_memory(lambda: torch.ones(n))
    assert 0.95 * megabytes * 1e6 <= measured <= 1.15 * megabytes * 1e6 + 4e6


@pytest.mark.skipif(not cpu_peak_supported(), reason="CPU peak resident set is Linux-only")
def test_peak_memory_counts_a_transient_not_only_the_result():
    def make_and_drop():
        big = torch.ones(50_000_000)          # 200 MB, freed before returning
        return big[:10].clone()
    assert peak_memory(make_and_drop) >= 190e6


@pytest.mark.skipif(not cpu_peak_supported(), reason="CPU peak resident set is Linux-only")
def test_peak_memory_is_not_hidden_by_memory_the_allocator_kept():
    for _ in range(3):                         # leave freed 16 MB blocks in this thread's heap
        torch.ones(4_000_000).add_(1)
    measured = [peak_memory(lambda: torch.ones(4_000_000)) for _ in range(3)]
    assert all(15e6 <= m <= 18e6 for m in measured), measured


@pytest.mark.skipif(not cpu_peak_supported(), reason="CPU peak resident set is Linux-only")
def test_peak_memory_keeps_grad_mode_and_reraises():
    seen = []
    with torch.no_grad():
        peak_memory(lambda: seen.append(torch.is_grad_enabled()))
    peak_memory(lambda: seen.append(torch.is_grad_enabled()))
    assert seen == [False, False, True, True]                     # warm-up and measured call each
    with pytest.raises(ValueError, match="inside"):
        peak_memory(lambda: (_ for _ in ()).throw(ValueError("inside")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_peak_memory_on_cuda():
    measured = peak_memory(lambda: torch.ones(25_000_000, device="cuda"), device="cuda")
    assert 100e6 <= measured <= 100e6 + 2 ** 21


def test_peak_memory_is_none_where_not_measurable(monkeypatch):
    import labsupport.timing as timing
    monkeypatch.setattr(timing, "cpu_peak_supported", lambda: False)
    assert peak_memory(lambda: torch.ones(10)) is None
    assert format_bytes(None) == "not measured"


def test_time_call_on_a_known_sleep():
    t = time_call(time.sleep, 0.02, reps=3, warmup=0)
    assert 0.02 <= t.min <= t.median <= t.max < 0.5 and len(t.times) == 3
    with pytest.raises(ValueError, match="reps must be >= 1"):
        time_call(time.sleep, 0, reps=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_time_call_on_cuda_uses_events():
    x = torch.randn(2048, 2048, device="cuda")
    t = time_call(torch.mm, x, x, reps=3)
    assert 0 < t.min <= t.median <= t.max


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
    assert format_bytes(1_500_000) == "1.5 MB" and format_bytes(12) == "12 B" and format_bytes(3e9) == "3.0 GB"


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
    with pytest.raises(ValueError, match="a real bug"):        # other errors are not hidden
        cost_sweep({"broken": broken}, [16], make_inputs=_tiny_inputs, progress=False)


def test_cost_sweep_backward_and_flops():
    from labsupport.attention import sdpa
    from labsupport.timing import attention_flops, cost_sweep
    rows = cost_sweep({"sdpa": sdpa}, [64], make_inputs=_tiny_inputs, backward=True, reps=1,
                      flops=lambda L: attention_flops(L, head_dim=8), progress=False)
    assert rows[0]["status"] == "ok" and rows[0]["tflops"] > 0
    assert attention_flops(10, head_dim=8, is_causal=True) == 4 * 100 * 8 / 2


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
    import labsupport.timing as timing
    from labsupport.timing import Timing

    def fake_time_call(fn, a, b, **kwargs):        # 64: 1 TFLOP/s, 128: 4 TFLOP/s
        n = a.shape[0]
        seconds = 2 * n ** 3 / (1e12 if n == 64 else 4e12)
        return Timing(seconds, seconds, seconds, (seconds,))
    monkeypatch.setattr(timing, "time_call", fake_time_call)
    assert timing.matmul_peak_tflops("cpu", torch.float32, sizes=(64, 128)) == pytest.approx(4.0)


def test_matmul_peak_tflops_measures_on_cpu_and_rejects_bad_input():
    from labsupport.timing import matmul_peak_tflops
    peak = matmul_peak_tflops("cpu", torch.float32, sizes=(64, 128), reps=2)
    assert 0 < peak < 1e3 and math.isfinite(peak)
    with pytest.raises(ValueError, match="floating-point"):
        matmul_peak_tflops("cpu", torch.int32, sizes=(8,))
    with pytest.raises(ValueError, match="positive integers"):
        matmul_peak_tflops("cpu", torch.float32, sizes=())
    with pytest.raises(ValueError, match="positive integers"):
        matmul_peak_tflops("cpu", torch.float32, sizes=(0, 8))


def test_peak_fraction_in_rows_and_in_the_sweep_table(capsys):
    from labsupport.report import sweep_table
    from labsupport.timing import add_peak_fraction
    row = dict(kernel="sdpa", length=64, time_s=1e-3, time_min=1e-3, time_max=1e-3,
               peak_bytes=2e6, model_bytes=None, tflops=2.0, status="ok", note="")
    skipped = {**row, "length": 128, "tflops": None, "status": "skipped", "note": "budget"}
    with_fraction = add_peak_fraction([row, skipped], 8.0)
    assert [r["peak_fraction"] for r in with_fraction] == [0.25, None]
    assert "peak_fraction" not in row                       # the input rows are not changed
    with pytest.raises(ValueError, match="peak_tflops must be positive"):
        add_peak_fraction([row], 0)
    sweep_table([row, skipped], peak_tflops=8.0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("TFLOP/s  % of bf16 peak")
    assert lines[1].split()[-2:] == ["2.000", "25.0"] and lines[2].split()[-2:] == ["-", "-"]


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
