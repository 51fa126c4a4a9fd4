"""Answers to the exercises of 12.4 Long sequences and memory; the kinds are explained in __init__.py."""
from .answers import forbidden, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['online_step', 'compress_update']
RETURNS_TENSOR = []
RETURNS_NUMBER = []

ANSWERS = {
    "online_step": [
        wrong("""
            def online_step(m, l, acc, scores, v):
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                p = (scores - m_new).exp()
                fix = (m - m_new).exp()
                return m_new, l * fix + p.sum(-1, keepdim=True), acc + p @ v   # acc not rescaled
            """, "multiply the old l and the old acc"),
        right("""
            def online_step(m, l, acc, scores, v):
                m_new = torch.max(torch.cat([m, scores], dim=-1), dim=-1, keepdim=True).values
                p = torch.exp(scores - m_new)
                scale = torch.exp(m - m_new)
                return m_new, scale * l + p.sum(dim=-1, keepdim=True), scale * acc + p @ v
            """),
        wrong("""
            def online_step(m, l, acc, scores, v):
                m_new = scores.amax(-1, keepdim=True)                  # the tile's own maximum
                p = (scores - m_new).exp()
                fix = (m - m_new).exp()
                return m_new, l * fix + p.sum(-1, keepdim=True), acc * fix + p @ v
            """, "running maximum"),
        wrong("""
            def online_step(m, l, acc, scores, v):
                p = scores.exp()                                       # no maximum subtracted
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                return m_new, l + p.sum(-1, keepdim=True), acc + p @ v
            """, "overflows"),
        forbidden("""
            def online_step(m, l, acc, scores, v):
                from labsupport.attention import flash_attention
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                p = (scores - m_new).exp()
                fix = (m - m_new).exp()
                flash_attention
                return m_new, l * fix + p.sum(-1, keepdim=True), acc * fix + p @ v
            """, "labsupport.attention"),
    ],
    "compress_update": [
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                kept, gone = states[:, :mem_len], states[:, mem_len:]         # evicts the newest
                B, n, d = gone.shape
                slots = gone.reshape(B, n // rate, rate, d).mean(2)
                return kept, torch.cat([compressed, slots], dim=1)[:, -cmem_len:]
            """, "keeps the newest states"),
        right("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                slots = [states[:, i:i + rate].mean(dim=1, keepdim=True) for i in range(0, evict, rate)]
                compressed = torch.cat([compressed, *slots], dim=1)
                start = max(compressed.shape[1] - cmem_len, 0)
                return states[:, evict:], compressed[:, start:]
            """),
        right("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                import torch.nn.functional as F
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                slots = F.avg_pool1d(states[:, :evict].transpose(1, 2), rate).transpose(1, 2) if evict \
                    else states[:, :0]
                compressed = torch.cat([compressed, slots], dim=1)
                kept = min(compressed.shape[1], cmem_len)
                return states[:, evict:], compressed[:, compressed.shape[1] - kept:]
            """),
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                B, n, d = states[:, :evict].shape
                slots = states[:, :evict].reshape(B, n // rate, rate, d).mean(2)
                joined = torch.cat([compressed, slots], dim=1)
                return states[:, evict:], joined[:, :cmem_len]                 # the first slots
            """, "most recent cmem_len slots"),
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                B, n, d = states[:, :evict].shape
                slots = states[:, :evict].reshape(B, n // rate, rate, d).sum(2)             # a sum
                joined = torch.cat([compressed, slots], dim=1)
                return states[:, evict:], joined[:, max(joined.shape[1] - cmem_len, 0):]
            """, "a sum grows with the rate"),
        wrong("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                states = torch.cat([memory, h], dim=1)
                evict = max(states.shape[1] - mem_len, 0)
                slots = states[:, :evict:rate]                                # every rate-th state
                joined = torch.cat([compressed, slots], dim=1)
                return states[:, evict:], joined[:, max(joined.shape[1] - cmem_len, 0):]
            """, "every `rate`-th state"),
        forbidden("""
            def compress_update(memory, compressed, h, mem_len, cmem_len, rate):
                from labsupport.memory import CompressiveMemory
                memory_module = CompressiveMemory(h.shape[-1], mem_len=mem_len, cmem_len=cmem_len, rate=rate)
                return memory_module.double().update(memory, compressed, h)
            """, "labsupport.memory"),
    ],
    "kept_fractions": [
        wrong("""
            def kept_fractions():
                return {24: 1.0, 168: 1.0, 8766: 1.0}                 # every cycle survives
            """, "one whole period"),
        right("""
            def kept_fractions():
                import math
                kernel = lambda p: abs(math.sin(math.pi * 24 / p) / (24 * math.sin(math.pi / p)))
                return {p: kernel(p) for p in (24, 168, 8766)}
            """),
        wrong("""
            def kept_fractions():
                return {24: 0.0, 168: 0.5, 8766: 1.0}
            """, "a seventh of a week"),
        forbidden("""
            def kept_fractions():
                from labsupport.sections.long_sequences.checks import measured_kept_fractions
                return measured_kept_fractions()
            """, "labsupport.sections"),
    ],
    "stride_saving": [
        wrong("""
            def stride_saving():
                return 12                                             # fewer tokens, not their square
            """, "square of the token count"),
        right("""
            def stride_saving():
                tokens = [(336 - 24) // s + 1 for s in (1, 12)]
                return (tokens[0] / tokens[1]) ** 2
            """),
        wrong("""
            def stride_saving():
                return 144
            """, "S^2 rule"),
        forbidden("""
            def stride_saving():
                from labsupport.sections.long_sequences.checks import measured_stride_saving
                return measured_stride_saving()[0]
            """, "labsupport.sections"),
    ],
}
