"""Measured peak memory of every attention kernel (exact CPU allocator peaks, one thread).

`labsupport.timing.peak_memory` reads the CPU allocator's own events, so these tests can
assert byte models and physical floors exactly: no kernel's peak is below the output it
returns (or, with a backward pass, below the gradients it leaves), naive attention's peak
is its byte model (`labsupport.byte_models.naive_bytes`, which the gpu profile sizes with),
and the sub-quadratic kernels' peaks grow at most linearly.
"""
import pytest
import torch

from helpers import seeded
from labsupport.attention import KERNELS, LinformerAttention, naive_attention
from labsupport.byte_models import naive_bytes
from labsupport.timing import attention_inputs, cpu_peak_supported, fit_power_law, peak_memory

pytestmark = pytest.mark.skipif(not cpu_peak_supported(),
                                reason="this torch's profiler reports no CPU memory events")
H, D = 4, 64                                          # heads, head_dim; batch 1


@pytest.fixture(autouse=True)
def one_thread():
    """Intra-op threads may add per-thread buffers: every peak here is for one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def linformer(q, k, v):
    """LinformerAttention with k = 64, built per length outside the measured call."""
    return _LINFORMERS[k.shape[-2]](q, k, v)


_LINFORMERS = {L: seeded(lambda L=L: LinformerAttention(L, 64).requires_grad_(False))
               for L in (256, 1024, 2048, 4096)}
CAUSAL = {name: {"is_causal": True} for name in KERNELS}
EVERY = {**KERNELS, "linformer": linformer}
CAUSAL["linformer"] = {}                              # Linformer cannot be causal


@pytest.mark.parametrize("name", sorted(EVERY))
def test_no_peak_is_below_the_output(name):
    q, k, v = attention_inputs(256, heads=H, head_dim=D, seed=1)
    with torch.no_grad():
        out = EVERY[name](q, k, v, **CAUSAL[name])
        peak = peak_memory(EVERY[name], q, k, v, **CAUSAL[name])
    assert peak >= out.numel() * out.element_size(), (peak, out.shape)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_no_backward_peak_is_below_the_gradients(name):
    inputs = attention_inputs(256, heads=H, head_dim=D, seed=1)

    def forward_backward():
        leaves = [t.detach().requires_grad_() for t in inputs]
        KERNELS[name](*leaves, **CAUSAL[name]).sum().backward()
        grads = [t.grad for t in leaves]
        assert all(g is not None for g in grads)
        return grads
    peak = peak_memory(forward_backward)
    assert peak >= sum(t.numel() * t.element_size() for t in inputs)          # q, k, v gradients
    assert peak_memory(forward_backward) == peak                               # to the byte


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("L", [256, 512])
def test_naive_peak_is_its_byte_model(L, causal):
    q, k, v = attention_inputs(L, heads=H, head_dim=D)
    with torch.no_grad():
        measured = peak_memory(naive_attention, q, k, v, is_causal=causal)
    assert measured == naive_bytes(L, heads=H, head_dim=D, causal=causal)          # to the byte


def exponent(kernel, lengths, **kwargs):
    peaks = []
    for L in lengths:
        q, k, v = attention_inputs(L, heads=H, head_dim=D)
        with torch.no_grad():
            peaks.append(peak_memory(kernel, q, k, v, **kwargs))
    return fit_power_law(lengths, peaks)[0]


@pytest.mark.slow
def test_naive_memory_exponent_is_two():
    assert abs(exponent(naive_attention, (1024, 2048, 4096), is_causal=True) - 2.0) < 0.05


@pytest.mark.parametrize("name", ["sdpa", "flash", "local", "longformer", "linformer", "linear",
                                  "performer"])
def test_efficient_memory_exponents_are_at_most_one(name):
    lengths = (1024, 2048) if name == "flash" else (1024, 2048, 4096)   # flash: Python tiles, slow
    assert exponent(EVERY[name], lengths, **CAUSAL[name]) <= 1.1
