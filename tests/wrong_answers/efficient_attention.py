"""Answers to the exercises of 12.5 Efficient attention; the kinds are explained in __init__.py."""
from .answers import forbidden, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['positive_features', 'blocked_local_attention', 'decayed_linear_attention']
RETURNS_TENSOR = ['positive_features', 'blocked_local_attention', 'decayed_linear_attention']
RETURNS_NUMBER = []

ANSWERS = {
    "positive_features": [
        wrong("""
            def positive_features(x, w):
                return torch.exp(x @ w.T) / w.shape[0] ** 0.5         # no -|x|^2 / 2
            """, "subtract |x|^2 / 2"),
        right("""
            def positive_features(x, w):
                import math
                log_phi = torch.einsum("nd,md->nm", x, w) - 0.5 * (x * x).sum(-1, keepdim=True)
                return log_phi.exp() * math.sqrt(1 / w.shape[0])
            """),
        wrong("""
            def positive_features(x, w):
                return torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / w.shape[0]
            """, "not by m"),
        wrong("""
            def positive_features(x, w):
                import math
                return torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2) / math.sqrt(7)   # m typed in
            """, "look at what differs"),
        wrong("""
            def positive_features(x, w):
                return torch.exp(x @ w.T - x.pow(2).sum(-1, keepdim=True) / 2)
            """, "divide by sqrt(m)"),
        forbidden("""
            def positive_features(x, w):
                from labsupport.attention import favor_features
                return favor_features(x, w)
            """, "labsupport.attention"),
    ],
    "blocked_local_attention": [
        wrong("""
            def blocked_local_attention(q, k, v, block):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            """, "full causal attention"),
        right("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                kp, vp = (F.pad(t, (0, 0, block, 0)) for t in (k, v))            # (B, H, L + c, D)
                windows = [(kp[:, :, b * block:(b + 2) * block], vp[:, :, b * block:(b + 2) * block])
                           for b in range(n)]
                k2 = torch.stack([w[0] for w in windows], dim=2)                 # (B, H, n, 2c, D)
                v2 = torch.stack([w[1] for w in windows], dim=2)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j >= i - block)).repeat(n, 1, 1)
                mask[0, :, :block] = False
                out = F.scaled_dot_product_attention(q.view(B, H, n, block, D), k2, v2, attn_mask=mask)
                return out.reshape(B, H, L, -1)
            """),
        right("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                import copy
                q, k, v = copy.deepcopy((q, k, v))                   # work on copies
                B, H, L, D = q.shape
                n = L // block
                qb = q.view(B, H, n, block, D)
                pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
                k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j >= i - block)).expand(n, block, 2 * block).clone()
                mask[0] &= j >= block
                return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).view(B, H, L, -1)
            """),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                qb, kb, vb = (t.view(B, H, n, block, D) for t in (q, k, v))   # its own block only
                return F.scaled_dot_product_attention(qb, kb, vb, is_causal=True).view(B, H, L, D)
            """, "the block before it"),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                t = torch.arange(L)
                lag = t[:, None] - t[None, :]
                mask = (lag >= 0) & (lag <= block)                   # right, through an (L, L) mask
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            """, "as big as the full (L, L) scores"),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                qb = q.view(B, H, block, n, D).transpose(2, 3)        # blocks cut the wrong way
                pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
                k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j >= i - block)).expand(n, block, 2 * block).clone()
                mask[0] &= j >= block
                return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).reshape(B, H, L, -1)
            """, "compared with local_attention"),
        forbidden("""
            def blocked_local_attention(q, k, v, block):
                from labsupport.attention import local_attention
                return local_attention(q, k, v, window=block, is_causal=True)
            """, "labsupport.attention"),
    ],
    "decayed_linear_attention": [
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                phi_qs, phi_ks = (torch.nn.functional.elu(t) + 1 for t in (q, k))
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                    S = gamma * S + torch.outer(phi_k, v_t)
                    z = z + phi_k                                     # the normaliser does not decay
                    outs.append(phi_q @ S / (phi_q @ z))
                return torch.stack(outs)
            """, "normaliser z"),
        right("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                fq, fk = F.elu(q) + 1, F.elu(k) + 1
                t = torch.arange(q.shape[0], dtype=q.dtype)
                lag = t[:, None] - t[None, :]
                weights = torch.where(lag >= 0, gamma ** lag.clamp_min(0), 0.0) * (fq @ fk.T)
                return weights @ v / weights.sum(-1, keepdim=True)
            """),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                phi_qs, phi_ks = (F.elu(t) + 1 for t in (q, k))
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                    outs.append(phi_q @ S / (phi_q @ z).clamp_min(1e-30))   # reads before adding t
                    S = gamma * S + torch.outer(phi_k, v_t)
                    z = gamma * z + phi_k
                return torch.stack(outs)
            """, "add token t to the state before reading it"),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(q, k, v):                # no feature map
                    S = gamma * S + torch.outer(phi_k, v_t)
                    z = gamma * z + phi_k
                    outs.append(phi_q @ S / (phi_q @ z))
                return torch.stack(outs)
            """, "elu(x) + 1"),
        forbidden("""
            def decayed_linear_attention(q, k, v, gamma):
                from labsupport.attention import linear_attention
                assert gamma == 1.0
                return linear_attention(q[None], k[None], v[None], is_causal=True)[0]
            """, "labsupport.attention"),
    ],
    "performer_error_exponent": [
        wrong("""
            def predicted_error_exponent():
                return -1.0                     # how the variance falls, not the error
            """, "its square root"),
        right("""
            def predicted_error_exponent():
                return -1 / 2
            """),
        wrong("""
            def predicted_error_exponent():
                return 0.5
            """, "the exponent is negative"),
        forbidden("""
            def predicted_error_exponent():
                from labsupport.sections.efficient_attention.checks import (SMALL_SCALE,
                                                                            measured_error_exponent)
                return measured_error_exponent(SMALL_SCALE)
            """, "labsupport.sections"),
    ],
}
