import pytest
import torch

from helpers import tol
from labsupport.layers import MultiHeadAttention
from labsupport.memory import (
    CompressiveMemory,
    MemoryState,
    SegmentRecurrentEncoder,
    attention_reconstruction_loss,
    memory_mask,
    run_segments,
)

D, H, B = 8, 2, 2


def make_encoder(n_layers=1, *, mem_len, **options):
    enc = SegmentRecurrentEncoder(D, H, n_layers, 16, mem_len=mem_len, **options).double().eval()
    with torch.no_grad():                     # u and v start at zero: make those terms count
        enc.position.u.normal_()
        enc.position.v.normal_()
    return enc


def full_sequence(enc, x, mask=None):
    """Reference: every block over the whole series with the blocks' own forward
    (self-attention, positions 0..T-1), causal unless a mask is given, then the final norm."""
    for block in enc.layers:
        x = block(x, mask=mask, is_causal=mask is None)
    return enc.norm(x)


def series(T):
    return torch.randn(B, T, D, dtype=torch.float64)


def test_memory_mask_sees_cache_and_past():
    m = memory_mask(3, 2)
    assert m.shape == (3, 5)
    assert m[:, :2].all()
    torch.testing.assert_close(m[:, 2:], torch.ones(3, 3, dtype=torch.bool).tril())


def test_second_segment_equals_full_attention_over_cache_and_segment():
    enc, x = make_encoder(mem_len=5), series(9)
    _, memory = enc(x[:, :5])
    out2, _ = enc(x[:, 5:], memory)
    torch.testing.assert_close(out2, full_sequence(enc, x)[:, 5:], **tol(torch.float64))


def test_second_segment_from_the_blocks_modules():
    enc, x = make_encoder(mem_len=4), series(7)
    block, (x1, x2) = enc.layers[0], x.split([4, 3], dim=1)
    _, memory = enc(x1)
    ctx = block.norm1(torch.cat((x1, x2), dim=1))                        # (B, 7, D)
    mask = torch.ones(3, 7, dtype=torch.bool).tril(diagonal=4)
    h = x2 + block.attn(block.norm1(x2), ctx, mask=mask, positions=torch.arange(4, 7),
                        key_positions=torch.arange(7))
    expected = enc.norm(h + block.ff(block.norm2(h)))
    torch.testing.assert_close(enc(x2, memory)[0], expected, **tol(torch.float64))


@pytest.mark.parametrize("n_layers", [1, 3])
@pytest.mark.parametrize("norm_first", [True, False])
def test_run_segments_with_long_memory_equals_causal_full_sequence(n_layers, norm_first):
    enc, x = make_encoder(n_layers, mem_len=20, norm_first=norm_first), series(11)
    torch.testing.assert_close(run_segments(enc, x, 4), full_sequence(enc, x), **tol(torch.float64))


def test_short_memory_equals_full_attention_under_the_segment_band():
    L, T = 3, 10
    enc, x = make_encoder(mem_len=L), series(T)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    band = (j <= i) & (j >= (i // L - 1) * L)             # this segment and the one before
    torch.testing.assert_close(run_segments(enc, x, L), full_sequence(enc, x, band),
                               **tol(torch.float64))


def test_no_memory_is_independent_causal_segments():
    enc, x = make_encoder(2, mem_len=0), series(8)
    out, memory = enc(x[:, 4:], enc(x[:, :4])[1])
    assert [m.shape for m in memory] == [(B, 0, D)] * 2
    torch.testing.assert_close(out, full_sequence(enc, x[:, 4:]), **tol(torch.float64))


def test_memory_is_truncated_detached_and_stops_gradients():
    enc = make_encoder(2, mem_len=5)
    x1 = series(4).requires_grad_()
    _, memory = enc(x1)
    assert [m.shape for m in memory] == [(B, 4, D)] * 2
    torch.testing.assert_close(memory[0], x1.detach())                  # layer 0 caches its input
    out, memory = enc(series(4), memory)
    assert [m.shape for m in memory] == [(B, 5, D)] * 2
    assert not any(m.requires_grad for m in memory)
    out.sum().backward()
    assert x1.grad is None
    assert enc.layers[0].attn.q_proj.weight.grad is not None


def test_causal_within_a_segment():
    enc = make_encoder(2, mem_len=3)
    _, memory = enc(series(3))
    x = series(6)
    y = x.clone()
    y[:, 4:] += 1.0
    torch.testing.assert_close(enc(x, memory)[0][:, :4], enc(y, memory)[0][:, :4],
                               **tol(torch.float64))


def test_memory_follows_input_dtype():
    enc = SegmentRecurrentEncoder(D, H, 2, mem_len=4)
    _, memory = enc(torch.randn(1, 3, D))
    assert all(m.dtype == torch.float32 for m in memory)
    with pytest.raises(ValueError, match="float32 on cpu but the input"):
        enc(torch.randn(1, 3, D, dtype=torch.float64), memory)


def test_bad_inputs_raise_with_shapes():
    enc = make_encoder(2, mem_len=4)
    x = series(3)
    with pytest.raises(ValueError, match=r"x must be \(B, L, 8\), got \(2, 3, 5\)"):
        enc(torch.randn(2, 3, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must be \(B, L, 8\) \(3 dims\), got shape \(3, 8\)"):
        enc(torch.randn(3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"one tensor per layer \(2\), got 1"):
        enc(x, [torch.zeros(B, 2, D, dtype=torch.float64)])
    bad = [torch.zeros(B, 6, D, dtype=torch.float64)] * 2
    with pytest.raises(ValueError, match=r"memory\[0\] must be \(B, <=4, 8\) .* got \(2, 6, 8\)"):
        enc(x, bad)
    with pytest.raises(ValueError, match=r"B = 2 .* got \(3, 2, 8\)"):
        enc(x, [torch.zeros(3, 2, D, dtype=torch.float64)] * 2)
    with pytest.raises(TypeError, match="list of 2 tensors"):
        enc(x, torch.zeros(B, 2, D))
    with pytest.raises(ValueError, match="not divisible"):
        SegmentRecurrentEncoder(6, 4, 1, mem_len=2)
    with pytest.raises(ValueError, match="mem_len must be an int >= 0, got -1"):
        SegmentRecurrentEncoder(8, 2, 1, mem_len=-1)


# --- compressive memory ----------------------------------------------------------------

def stream(T):
    """(1, T, 2): step t holds (t, -t), so a pooled slot is the mean step of its group."""
    t = torch.arange(T, dtype=torch.float64)
    return torch.stack((t, -t), dim=-1)[None]


@pytest.mark.parametrize("seg", [1, 2, 5, 7])
def test_pooled_memory_is_aligned_group_means_and_stays_bounded(seg):
    mem = CompressiveMemory(2, mem_len=4, cmem_len=3, rate=3)
    s, memory, compressed, T = stream(60), None, None, 0
    for h in s.split(seg, dim=1):
        memory, compressed = mem.update(memory, compressed, h)
        T += h.shape[1]
        M, C = memory.shape[1], compressed.shape[1]
        assert M <= 4 and C <= 3 and M + C <= mem.mem_len + mem.cmem_len
        groups = (T - M) // 3                                 # states evicted so far, in groups
        assert groups * 3 == T - M and (T <= 4 or M >= 4 - 3 + 1)
        torch.testing.assert_close(memory, s[:, T - M:T])
        means = torch.arange(groups, dtype=torch.float64) * 3 + 1.0   # mean of 3k, 3k+1, 3k+2
        torch.testing.assert_close(compressed[0, :, 0], means[-3:][-C:] if C else means[:0])
    assert compressed.shape == (1, 3, 2) and mem.reach == 4 + 3 * 3
    assert CompressiveMemory.context(memory, compressed).shape == (1, 3 + memory.shape[1], 2)


def test_pool_of_known_input():
    mem = CompressiveMemory(2, mem_len=2, cmem_len=4, rate=2)
    memory, compressed = mem.update(None, None, stream(6))
    torch.testing.assert_close(compressed, torch.tensor([[[0.5, -0.5], [2.5, -2.5]]],
                                                        dtype=torch.float64))
    torch.testing.assert_close(memory, stream(6)[:, 4:])


def test_conv_compression_shape_init_and_gradient():
    mem = CompressiveMemory(D, mem_len=4, cmem_len=3, rate=2, compression="conv").double()
    pool = CompressiveMemory(D, mem_len=4, cmem_len=3, rate=2)
    states = series(6)
    assert mem.compress(states).shape == (B, 3, D)
    torch.testing.assert_close(mem.compress(states), pool.compress(states))   # starts as pool
    memory, compressed = mem.update(None, None, series(9))
    assert compressed.shape == (B, 3, D) and memory.shape == (B, 3, D)
    assert not compressed.requires_grad                  # update is detached: no graph
    attn = MultiHeadAttention(D, H).double()
    loss = attention_reconstruction_loss(attn, series(5), states, mem)
    loss.backward()
    assert mem.conv.weight.grad is not None and mem.conv.weight.grad.abs().sum() > 0
    assert attn.q_proj.weight.grad is None               # only the compressor learns


def test_compressive_memory_rejects_bad_inputs():
    mem = CompressiveMemory(D, mem_len=4, cmem_len=3, rate=2)
    with pytest.raises(ValueError, match=r"states must be \(B, n, 8\) with n a multiple of rate 2"):
        mem.compress(series(5))
    with pytest.raises(ValueError, match=r"memory must be \(B, <=4, 8\) .* got \(2, 5, 8\)"):
        mem.update(series(5), None, series(2))
    with pytest.raises(ValueError, match=r"compressed must be \(B, <=3, 8\) .* got \(2, 2, 3\)"):
        mem.update(None, torch.zeros(B, 2, 3, dtype=torch.float64), series(2))
    with pytest.raises(ValueError, match="mem_len 1 < rate - 1 = 2"):
        CompressiveMemory(D, mem_len=1, cmem_len=3, rate=3)
    with pytest.raises(ValueError, match="compression must be one of"):
        CompressiveMemory(D, mem_len=4, cmem_len=3, rate=2, compression="max")


def test_compressive_encoder_with_rate_one_pooling_equals_longer_xl_memory():
    xl = make_encoder(2, mem_len=7)
    comp = make_encoder(2, mem_len=3, cmem_len=4, rate=1)
    comp.load_state_dict(xl.state_dict())
    x = series(17)
    out, state = run_segments(comp, x, 3, return_memory=True)
    torch.testing.assert_close(out, run_segments(xl, x, 3), **tol(torch.float64))
    assert isinstance(state, MemoryState)
    assert [c.shape for c in state.compressed] == [(B, 4, D)] * 2


@pytest.mark.parametrize("compression", ["pool", "conv"])
def test_compressive_encoder_state_stays_fixed(compression):
    enc = make_encoder(2, mem_len=4, cmem_len=3, rate=2, compression=compression)
    state = None
    for segment in series(30).split(3, dim=1):
        out, state = enc(segment, state)
        assert all(m.shape[1] <= 4 and c.shape[1] <= 3
                   for m, c in zip(state.memory, state.compressed))
    assert [c.shape for c in state.compressed] == [(B, 3, D)] * 2
    assert not any(t.requires_grad for t in state.memory + state.compressed)
    with pytest.raises(TypeError, match="MemoryState"):
        enc(series(3), state.memory)
