"""Answers to the exercises of 12.1 Self-attention (kinds: __init__.py)."""
from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['attention_weights', 'causal_attention', 'split_heads']
RETURNS_TENSOR = ['attention_weights', 'causal_attention', 'split_heads']
RETURNS_NUMBER = ['score_matrix_bytes', 'predicted_peak']

ANSWERS = {
    "attention_weights": [
        wrong("""
            def attention_weights(q, k):
                scores = q @ k.transpose(-2, -1)          # not scaled by 1 / sqrt(d)
                return scores.softmax(dim=-1)
            """, "scale the scores by 1 / sqrt(d)"),
        right("""
            def attention_weights(q, k):
                import math
                scores = torch.einsum("...ld,...sd->...ls", q, k) / math.sqrt(q.size(-1))
                return torch.exp(scores - scores.amax(-1, keepdim=True)) / torch.exp(
                    scores - scores.amax(-1, keepdim=True)).sum(-1, keepdim=True)
            """),
        right("""
            def attention_weights(q, k):
                import torch.nn.functional as F
                return F.softmax(torch.matmul(q, k.mT) * q.shape[-1] ** -0.5, dim=q.dim() - 1)
            """),
        wrong("""
            def attention_weights(q, k):
                import math
                return (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(dim=-1)   # d typed in
            """, "divided by sqrt(8) whatever the head width"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-2)
            """, "runs over the queries (dim=-2)"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(dim=-1)
            """, "not by d"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) * q.shape[-1] ** 0.5).softmax(dim=-1)
            """, "you multiplied"),
        wrong("""
            def attention_weights(q, k):
                return (k @ q.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
            """, "rows are queries"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-2] ** 0.5).softmax(dim=-1)
            """, "number of queries L"),
        wrong("""
            def attention_weights(q, k):
                return torch.sigmoid(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5)
            """, "sum to"),
        forbidden("""
            def attention_weights(q, k):
                from labsupport.attention import naive_attention
                return naive_attention(q, k, k, return_weights=True)[1]
            """, "labsupport.attention"),
        forbidden("""
            def attention_weights(q, k):
                import torch.nn.functional as F
                eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])
                return F.scaled_dot_product_attention(q, k, eye)
            """, "scaled_dot_product_attention"),
        forbidden("""
            def attention_weights(q, k):
                import sys
                return sys._getframe(1).f_back.f_locals["q"]          # the check's own variables
            """, "sys._getframe"),
    ],
    "causal_attention": [
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).triu()     # the future, not the past
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "the mask is flipped"),
        right("""
            def causal_attention(q, k, v):
                import math
                L = q.shape[-2]
                bias = torch.full((L, L), float("-inf"), dtype=q.dtype).triu(1)
                return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]) + bias, dim=-1) @ v
            """),
        right("""
            def causal_attention(q, k, v):
                out = []
                for i in range(q.shape[-2]):           # one query at a time, over keys 0..i
                    s = q[..., i:i + 1, :] @ k[..., : i + 1, :].transpose(-2, -1) / q.shape[-1] ** 0.5
                    out.append(s.softmax(-1) @ v[..., : i + 1, :])
                return torch.cat(out, dim=-2)
            """),
        wrong("""
            def causal_attention(q, k, v):
                allowed = torch.ones(6, 6, dtype=torch.bool).tril()     # L typed in
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "your code raised RuntimeError"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril()
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-2) @ v
            """, "runs over the queries (dim=-2)"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                w = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
                return (w * torch.ones(L, L).tril()) @ v                  # zeroed after the softmax
            """, "-inf before the softmax"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril(-1)    # drops the diagonal
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "keep the diagonal"),
        wrong("""
            def causal_attention(q, k, v):
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1) @ v
            """, "nothing is masked"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril()
                return (q @ k.transpose(-2, -1)).masked_fill(~allowed, float("-inf")).softmax(-1) @ v
            """, "scale the scores by 1 / sqrt(d)"),
        forbidden("""
            def causal_attention(q, k, v):
                import torch.nn.functional as F
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            """, "scaled_dot_product_attention"),
        forbidden("""
            def causal_attention(q, k, v):
                import labsupport.attention as library
                return library.naive_attention(q, k, v, is_causal=True)
            """, "labsupport.attention"),
    ],
    "score_matrix_bytes": [
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return length * length * torch.tensor([], dtype=dtype).element_size()
            """, "multiply by batch * heads"),
        right("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length ** 2 * dtype.itemsize
            """),
        right("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return torch.empty(batch, heads, length, length, dtype=dtype, device="meta").nbytes
            """),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length * length * 4              # float32 for every dtype
            """, "depends on the dtype"),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length * torch.finfo(dtype).bits // 8
            """, "L * L entries"),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * heads * length * length * torch.finfo(dtype).bits
            """, "that is bits"),
        wrong("""
            def score_matrix_bytes(batch, heads, length, dtype):
                return batch * length * length * dtype.itemsize         # the heads forgotten
            """, "multiply by heads too"),
        replay("""
            def score_matrix_bytes(batch, heads, length, dtype):
                table = {(1, 1, 1024): 4194304, (8, 4, 512): 16777216, (2, 8, 2048): 536870912,
                         (3, 5, 100): 300000, (2, 3, 7): 1176}
                return table.get((batch, heads, length), 0)             # the practice inputs
            """),
        forbidden("""
            def score_matrix_bytes(batch, heads, length, dtype):
                from labsupport.sections.self_attention import reference
                return reference.score_matrix_bytes(batch, heads, length, dtype)
            """, "labsupport.sections"),
    ],
    "split_heads": [
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.view(B, n_heads, L, d_model // n_heads)     # mixes positions into heads
            """, "transpose(1, 2)"),
        right("""
            def split_heads(x, n_heads):
                return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)
            """),
        right("""
            def split_heads(x, n_heads):
                hd = x.shape[-1] // n_heads
                return torch.stack([x[..., h * hd:(h + 1) * hd] for h in range(n_heads)], dim=1)
            """),
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.view(B, L, d_model // n_heads, n_heads).permute(0, 3, 1, 2)
            """, "every H-th element"),
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.reshape(B, L, n_heads, 4).transpose(1, 2)        # head width typed in
            """, "your code raised RuntimeError"),
        wrong("""
            def split_heads(x, n_heads):
                B, L, d_model = x.shape
                return x.view(B, L, n_heads, d_model // n_heads)          # not transposed
            """, "should have shape"),
        forbidden("""
            def split_heads(x, n_heads):
                from labsupport.layers import MultiHeadAttention
                return MultiHeadAttention(x.shape[-1], n_heads).split_heads(x)
            """, "labsupport.layers"),
    ],
    "predicted_peak": [
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return batch * heads * length * length * 4      # one score matrix; two are alive
            """, "naive attention holds two at once"),
        right("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                matrix = batch * heads * length * length * 4
                return 2 * matrix                                   # the output is a few % more
            """),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return (2 * batch * length * length + batch * length * head_dim) * 4   # no heads
            """, "multiply by the number of heads"),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return 2 * batch * heads * length * length + batch * heads * length * head_dim
            """, "float32 takes 4 bytes"),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return 3 * batch * heads * length * length * 4
            """, "three (B, H, L, L) matrices"),
        wrong("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return (2 * length * length + length * head_dim) * 4
            """, "for one sequence and one head"),
        replay("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                return {(2, 4, 1024, 64): 69206016, (1, 3, 512, 32): 6488064,
                        (3, 1, 768, 16): 14303232}.get((batch, heads, length, head_dim), 1)
            """),
        forbidden("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                from labsupport.sections.self_attention.checks import measured_naive_peak
                return measured_naive_peak(batch, heads, length, head_dim)   # the check's measurement
            """, "labsupport.sections"),
        forbidden("""
            def predicted_peak_bytes(batch, heads, length, head_dim):
                import torch.profiler
                with torch.profiler.profile(profile_memory=True):
                    pass
                return (2 * batch * heads * length * length + batch * heads * length * head_dim) * 4
            """, "torch.profiler"),
    ],
}
