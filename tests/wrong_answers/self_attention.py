"""Answers to the exercises of 12.1 Self-Attention, and to the two checks of attention's core that
the lab's steps 1 and 2 reuse (kinds: __init__.py)."""
from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted; a whole
# number: the scale of 12.1.1 is not one)
TAKES_TENSORS = ['score_gradient', 'padded_attention', 'grouped_query_attention', 'attention_weights',
                 'causal_attention']
RETURNS_TENSOR = ['score_gradient', 'padded_attention', 'grouped_query_attention', 'attention_weights',
                  'causal_attention']
RETURNS_NUMBER: list[str] = []

ANSWERS = {
    "unit_scale": [
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / d ** 0.5                          # the page's scale, spreads left out
            """, "leaves out how spread the entries"),
        right("""
            def unit_scale(d, sigma_q, sigma_k):
                variance = d * sigma_q ** 2 * sigma_k ** 2     # Var(q.k): d products of variance sq^2 sk^2
                return variance ** -0.5
            """),
        right("""
            def unit_scale(d, sigma_q, sigma_k):
                import math
                return math.exp(-0.5 * math.log(d) - math.log(sigma_q) - math.log(sigma_k))
            """),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / (d * sigma_q * sigma_k)
            """, "divides by the width d itself"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return d ** 0.5 * sigma_q * sigma_k
            """, "multiplies where it should divide"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / (d ** 0.5 * sigma_q ** 2 * sigma_k ** 2)
            """, "shrinks by more than that undoes"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / (d ** 0.5 * sigma_q)
            """, "still widen as the keys widen"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / (d ** 0.5 * (sigma_q + sigma_k))
            """, "adds the two spreads"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / (d * sigma_q * sigma_k) ** 0.5
            """, "shrinks by less than that undoes"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return -1 / (d ** 0.5 * sigma_q * sigma_k)
            """, "not positive"),
        wrong("""
            def unit_scale(d, sigma_q, sigma_k):
                return 1 / (8 * sigma_q * sigma_k)                # the width typed in: sqrt(64)
            """, "it is right for d = 64"),
        replay("""
            def unit_scale(d, sigma_q, sigma_k):
                seen = {(16, 1.0, 1.0): 0.25, (64, 2.0, 1.0): 0.0625, (8, 0.5, 3.0): 0.2357022604,
                        (200, 1.5, 0.4): 0.1178511302, (3, 4.0, 2.0): 0.0721687836}
                return seen.get((d, sigma_q, sigma_k), 1.0)
            """),
        forbidden("""
            def unit_scale(d, sigma_q, sigma_k):
                q, k = sigma_q * torch.randn(50_000, d), sigma_k * torch.randn(50_000, d)
                return 1 / float((q * k).sum(-1).std())           # measured, not predicted
            """, "torch.randn"),
        forbidden("""
            def unit_scale(d, sigma_q, sigma_k):
                from labsupport.sections.self_attention import checks
                return checks._right_scale(d, sigma_q, sigma_k)
            """, "labsupport"),
    ],
    "score_gradient": [
        wrong("""
            def score_gradient(s, v):
                return s.softmax(-1) * v
            """, "as if it moved alone"),
        right("""
            def score_gradient(s, v):
                a = torch.exp(s - s.amax(-1, keepdim=True))
                a = a / a.sum(-1, keepdim=True)
                jacobian = torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)   # (..., S, S)
                return torch.einsum("...ij,...i->...j", jacobian, v)
            """),
        right("""
            def score_gradient(s, v):
                a = torch.softmax(s, dim=-1)
                o = torch.einsum("...s,...s->...", a, v)
                return a * v - a * o.unsqueeze(-1)
            """),
        wrong("""
            def score_gradient(s, v):
                a = s.softmax(-1)
                return a * (1 - a) * v
            """, "only the diagonal"),
        wrong("""
            def score_gradient(s, v):
                a = s.softmax(-1)
                return v - (a * v).sum(-1, keepdim=True)
            """, "as large for a key that holds almost no weight"),
        wrong("""
            def score_gradient(s, v):
                a = s.softmax(-1)
                return a * ((a * v).sum(-1, keepdim=True) - v)
            """, "sign is flipped"),
        wrong("""
            def score_gradient(s, v):
                a = s.softmax(-1)
                return a * (v - v.mean(-1, keepdim=True))
            """, "does not vanish for a key whose value equals the output"),
        wrong("""
            def score_gradient(s, v):
                a = s.softmax(0)
                return a * (v - (a * v).sum(-1, keepdim=True))
            """, "wrong axis"),
        wrong("""
            def score_gradient(s, v):
                a = s.softmax(-1)
                return torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)   # the Jacobian alone
            """, "whole Jacobian"),
        wrong("""
            def score_gradient(s, v):
                a = (s / s.shape[-1] ** 0.5).softmax(-1)                       # scores scaled again
                return a * (v - (a * v).sum(-1, keepdim=True))
            """, "compared with the gradient of the output"),
        forbidden("""
            def score_gradient(s, v):
                s = s.detach().requires_grad_()
                (grad,) = torch.autograd.grad((s.softmax(-1) * v).sum(), s)
                return grad
            """, "torch.autograd"),
        forbidden("""
            def score_gradient(s, v):
                from labsupport.sections.self_attention.checks import _gradient
                return _gradient(s, v)
            """, "labsupport"),
    ],
    "padded_attention": [
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5       # every key read
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return (scores.softmax(-1) @ v) * rows
            """, "padded keys still receive weight"),
        right("""
            def padded_attention(q, k, v, q_lens, k_lens):
                out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
                for b in range(q.shape[0]):                               # one sequence at a time
                    n, m = int(q_lens[b]), int(k_lens[b])
                    w = torch.softmax(q[b, :n] @ k[b, :m].T / q.shape[-1] ** 0.5, dim=-1)
                    out[b, :n] = w @ v[b, :m]
                return out
            """),
        right("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1]) < k_lens[:, None]                # (B, S)
                bias = torch.zeros(keys.shape, dtype=q.dtype).masked_fill(~keys, -1e9)
                w = torch.softmax(q @ k.mT * q.shape[-1] ** -0.5 + bias[:, None, :], dim=-1)
                rows = (torch.arange(q.shape[1]) < q_lens[:, None]).to(q.dtype)  # (B, L)
                return rows[..., None] * (w @ v)
            """),
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1])[None, None, :] < k_lens[:, None, None]
                scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keys, 0.0)
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return (scores.softmax(-1) @ v) * rows
            """, "a score set to zero"),
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1])[None, None, :] < k_lens[:, None, None]
                w = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) * keys
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return (w @ v) * rows
            """, "zeroed after the softmax"),
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1])[None, None, :] <= k_lens[:, None, None]
                scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keys, float("-inf"))
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return (scores.softmax(-1) @ v) * rows
            """, "one key past its length"),
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1])[None, None, :] < k_lens[:, None, None]
                scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keys, float("-inf"))
                return scores.softmax(-1) @ v                                  # padded rows kept
            """, "rows of padded queries should be zero"),
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1])[None, None, :] < q_lens[:, None, None]
                scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keys, float("-inf"))
                rows = torch.arange(q.shape[1])[None, :, None] < k_lens[:, None, None]
                return (scores.softmax(-1) @ v) * rows
            """, "masked the keys with the queries' lengths"),
        wrong("""
            def padded_attention(q, k, v, q_lens, k_lens):
                keys = torch.arange(k.shape[1])[None, None, :] < k_lens[:, None, None]
                scores = (q @ k.transpose(-2, -1)).masked_fill(~keys, float("-inf"))
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return (scores.softmax(-1) @ v) * rows
            """, "the scores are not scaled"),
        forbidden("""
            def padded_attention(q, k, v, q_lens, k_lens):
                import torch.nn.functional as F
                keys = torch.arange(k.shape[1])[None, None, :] < k_lens[:, None, None]
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keys) * rows
            """, "scaled_dot_product_attention"),
        forbidden("""
            def padded_attention(q, k, v, q_lens, k_lens):
                from labsupport.attention import naive_attention
                keys = torch.arange(k.shape[1])[None, None, :] < k_lens[:, None, None]
                rows = torch.arange(q.shape[1])[None, :, None] < q_lens[:, None, None]
                return naive_attention(q, k, v, mask=keys) * rows
            """, "labsupport.attention"),
    ],
    "grouped_query_attention": [
        wrong("""
            def grouped_query_attention(q, k, v):
                r = q.shape[1] // k.shape[1]
                k, v = k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)             # heads in turn
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v
            """, "take the key-value heads in turn"),
        right("""
            def grouped_query_attention(q, k, v):
                B, H, L, d = q.shape
                G = k.shape[1]
                q = q.reshape(B, G, H // G, L, d)                          # (B, G, H/G, L, d): the groups
                w = torch.softmax(q @ k.unsqueeze(2).mT / d ** 0.5, dim=-1)   # (B, G, H/G, L, S)
                return (w @ v.unsqueeze(2)).reshape(B, H, L, v.shape[-1])
            """),
        right("""
            def grouped_query_attention(q, k, v):
                H, G = q.shape[1], k.shape[1]
                index = torch.arange(H) // (H // G)                          # the key-value head of each
                k, v = k[:, index], v[:, index]
                w = torch.einsum("bhld,bhsd->bhls", q, k) / q.shape[-1] ** 0.5
                return torch.einsum("bhls,bhse->bhle", w.softmax(-1), v)
            """),
        wrong("""
            def grouped_query_attention(q, k, v):
                H = q.shape[1]
                k, v = k[:, :1].expand(-1, H, -1, -1), v[:, :1].expand(-1, H, -1, -1)
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v
            """, "reads the first key-value head"),
        wrong("""
            def grouped_query_attention(q, k, v):
                k, v = k.mean(1, keepdim=True), v.mean(1, keepdim=True)
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v
            """, "averaged the key-value heads"),
        wrong("""
            def grouped_query_attention(q, k, v):
                r = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
                return (q @ k.transpose(-2, -1)).softmax(-1) @ v
            """, "the scores are not scaled"),
        wrong("""
            def grouped_query_attention(q, k, v):
                r = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
                return (q @ k.transpose(-2, -1) / v.shape[-1] ** 0.5).softmax(-1) @ v
            """, "width of the values"),
        wrong("""
            def grouped_query_attention(q, k, v):
                r = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-2) @ v
            """, "runs over the queries"),
        forbidden("""
            def grouped_query_attention(q, k, v):
                import torch.nn.functional as F
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            """, "scaled_dot_product_attention"),
        forbidden("""
            def grouped_query_attention(q, k, v):
                import labsupport.attention as library
                r = q.shape[1] // k.shape[1]
                return library.naive_attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1))
            """, "labsupport.attention"),
    ],
    "attention_weights": [
        wrong("""
            def attention_weights(q, k):
                scores = q @ k.transpose(-2, -1)          # not scaled by 1 / sqrt(d)
                return scores.softmax(dim=-1)
            """, "not scaled before the softmax"),
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
            """, "that of a head width of 8"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-2)
            """, "runs over the queries"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(dim=-1)
            """, "divides by the head width itself"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) * q.shape[-1] ** 0.5).softmax(dim=-1)
            """, "multiplies where it should divide"),
        wrong("""
            def attention_weights(q, k):
                return (k @ q.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
            """, "one row per key"),
        wrong("""
            def attention_weights(q, k):
                return (q @ k.transpose(-2, -1) / q.shape[-2] ** 0.5).softmax(dim=-1)
            """, "number of queries"),
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
            """, "runs over the queries"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                w = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1)
                return (w * torch.ones(L, L).tril()) @ v                  # zeroed after the softmax
            """, "mask the scores before the softmax"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril(-1)    # drops the diagonal
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
            """, "its own key must stay allowed"),
        wrong("""
            def causal_attention(q, k, v):
                return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1) @ v
            """, "nothing is masked"),
        wrong("""
            def causal_attention(q, k, v):
                L = q.shape[-2]
                allowed = torch.ones(L, L, dtype=torch.bool).tril()
                return (q @ k.transpose(-2, -1)).masked_fill(~allowed, float("-inf")).softmax(-1) @ v
            """, "the scores are not scaled"),
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
}
