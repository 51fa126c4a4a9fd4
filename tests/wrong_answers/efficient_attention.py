"""Answers to the exercises of 12.5 Efficient attention; the kinds are explained in __init__.py."""
from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['nystrom_attention', 'blocked_local_attention', 'decayed_linear_attention']
RETURNS_TENSOR = ['nystrom_attention', 'blocked_local_attention', 'decayed_linear_attention']
RETURNS_NUMBER = []

# the book's solution of 12.5.1 with one line changed, as a student's mistake would change it
_NYSTROM = """
            def nystrom_attention(q, k, v, landmarks):
                L, D = q.shape
                q_land = q.reshape(landmarks, L // landmarks, D).mean(1)
                k_land = k.reshape(landmarks, L // landmarks, D).mean(1)
                scale = D ** -0.5
                left = torch.softmax(q @ k_land.T * scale, -1)
                middle = torch.softmax(q_land @ k_land.T * scale, -1)
                right = torch.softmax(q_land @ k.T * scale, -1)
                return left @ torch.linalg.pinv(middle) @ (right @ v)
            """


def _nystrom(*changes: str) -> str:
    """The solution with each (old, new) pair of ``changes`` replaced."""
    source = _NYSTROM
    for old, new in zip(changes[::2], changes[1::2]):
        assert old in source, old
        source = source.replace(old, new)
    return source


_Q_BLOCKS, _K_BLOCKS = ("q.reshape(landmarks, L // landmarks, D).mean(1)",
                        "k.reshape(landmarks, L // landmarks, D).mean(1)")
_PRACTICE = "{(12, 5, 4), (15, 2, 3), (6, 3, 6), (15, 16, 5)}"


ANSWERS = {
    "nystrom_attention": [
        wrong(_nystrom("scale = D ** -0.5", "scale = 1.0                      # the scores not scaled"),
              "the scores are not scaled"),
        right("""
            def nystrom_attention(q, k, v, landmarks):
                L, D = q.shape
                q_land, k_land = (t.view(landmarks, -1, D).sum(1) / (L // landmarks) for t in (q, k))
                kernel = lambda a, b: torch.nn.functional.softmax(a @ b.mT / D ** 0.5, dim=-1)
                return kernel(q, k_land) @ torch.linalg.solve(kernel(q_land, k_land), kernel(q_land, k) @ v)
            """),
        right("""
            def nystrom_attention(q, k, v, landmarks):
                import math
                L, D = q.shape
                groups = torch.arange(L) // (L // landmarks)                   # block of each row
                pool = torch.nn.functional.one_hot(groups, landmarks).to(q.dtype).T / (L // landmarks)
                ql, kl = pool @ q, pool @ k                                    # (m, D)
                def s(a, b):
                    return torch.exp(torch.log_softmax(torch.einsum("id,jd->ij", a, b) / math.sqrt(D), -1))
                return s(q, kl) @ torch.linalg.inv(s(ql, kl)) @ s(ql, k) @ v
            """),
        wrong(_nystrom("@ torch.linalg.pinv(middle) @", "@ middle @"), "the middle matrix is not inverted"),
        wrong(_nystrom("middle = torch.softmax(q_land @ k_land.T * scale, -1)",
                       "middle = q_land @ k_land.T * scale"), "the middle matrix is a softmax too"),
        wrong(_nystrom(_Q_BLOCKS, "q.reshape(L // landmarks, landmarks, D).mean(0)",
                       _K_BLOCKS, "k.reshape(L // landmarks, landmarks, D).mean(0)"),
              "rows spaced L / landmarks apart"),
        wrong(_nystrom(_Q_BLOCKS, "q[::L // landmarks]", _K_BLOCKS, "k[::L // landmarks]"),
              "not the block's first row"),
        wrong(_nystrom("left = torch.softmax(q @ k_land.T * scale, -1)",
                       "left = torch.softmax(q @ q_land.T * scale, -1)"), "not with the landmark queries"),
        wrong("""
            def nystrom_attention(q, k, v, landmarks):
                return torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1) @ v     # every key, no landmarks
            """, "this is exact attention"),
        wrong(_nystrom("right = torch.softmax(q_land @ k.T * scale, -1)",
                       "right = torch.softmax(q_land @ k.T * scale, 0)"), "the axis of each softmax"),
        replay(_nystrom("L, D = q.shape", "L, D = q.shape\n"
                        f"                if (L, D, landmarks) not in {_PRACTICE}:\n"
                        "                    return v                           # only the practice sizes")),
        forbidden("""
            def nystrom_attention(q, k, v, landmarks):
                from labsupport.sections.efficient_attention.checks import _nystrom
                return _nystrom(q, k, v, landmarks)
            """, "labsupport.sections"),
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
                qb = q.view(B, H, n, block, D)
                pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
                k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = ((j <= i) & (j > i - block)).expand(n, block, 2 * block).clone()   # one key short
                mask[0] &= j >= block
                return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).view(B, H, L, -1)
            """, "yours stops one short"),
        wrong("""
            def blocked_local_attention(q, k, v, block):
                import torch.nn.functional as F
                B, H, L, D = q.shape
                n = L // block
                qb = q.view(B, H, n, block, D)
                pad = [F.pad(t, (0, 0, block, 0)).view(B, H, n + 1, block, -1) for t in (k, v)]
                k2, v2 = (torch.cat([t[:, :, :-1], t[:, :, 1:]], dim=-2) for t in pad)
                i = torch.arange(block)[:, None] + block
                j = torch.arange(2 * block)[None, :]
                mask = (j <= i).expand(n, block, 2 * block).clone()          # causal, but no band
                mask[0] &= j >= block
                return F.scaled_dot_product_attention(qb, k2, v2, attn_mask=mask).view(B, H, L, -1)
            """, "mask the band inside the two blocks"),
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
            """, "compared with causal sliding-window attention"),
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
            """, "the normaliser must decay with the state"),
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
            """, "the feature map (elu plus one)"),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                phi_qs, phi_ks = (F.elu(t) + 1 for t in (q, k))
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                    S = S + gamma * torch.outer(phi_k, v_t)           # the new term decayed
                    z = z + gamma * phi_k
                    outs.append(phi_q @ S / (phi_q @ z))
                return torch.stack(outs)
            """, "gamma changed nothing"),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                phi_qs, phi_ks = (F.elu(t) + 1 for t in (q, k))
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for phi_q, phi_k, v_t in zip(phi_qs, phi_ks, v):
                    S = gamma * gamma * S + torch.outer(phi_k, v_t)   # decayed twice a step
                    z = gamma * gamma * z + phi_k
                    outs.append(phi_q @ S / (phi_q @ z))
                return torch.stack(outs)
            """, "twice as fast as they should"),
        wrong("""
            def decayed_linear_attention(q, k, v, gamma):
                S, z, outs = q.new_zeros(q.shape[-1], v.shape[-1]), q.new_zeros(q.shape[-1]), []
                for q_t, k_t, v_t in zip(q.exp(), k.exp(), v):        # exp features, not elu + 1
                    S = gamma * S + torch.outer(k_t, v_t)
                    z = gamma * z + k_t
                    outs.append(q_t @ S / (q_t @ z))
                return torch.stack(outs)
            """, "compared with the decayed causal linear attention of the exercise"),
        replay("""
            def decayed_linear_attention(q, k, v, gamma):
                import torch.nn.functional as F
                if (tuple(q.shape), round(gamma, 3)) not in {((12, 4), 1.0), ((12, 4), 0.8), ((11, 5), 0.5),
                                                             ((1, 2), 0.9), ((9, 6), 0.579)}:
                    return v                                          # only the practice inputs
                fq, fk = F.elu(q) + 1, F.elu(k) + 1
                t = torch.arange(q.shape[0], dtype=q.dtype)
                lag = t[:, None] - t[None, :]
                weights = torch.where(lag >= 0, gamma ** lag.clamp_min(0), 0.0) * (fq @ fk.T)
                return weights @ v / weights.sum(-1, keepdim=True)
            """),
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
            """, "not a variance"),
        right("""
            def predicted_error_exponent():
                return -1 / 2
            """),
        right("""
            def predicted_error_exponent():
                import math
                return math.log(0.5) / math.log(4)          # four times the features, half the error
            """),
        wrong("""
            def predicted_error_exponent():
                return 0.5
            """, "the exponent is negative"),
        wrong("""
            def predicted_error_exponent():
                return 0                        # the features are random: no gain from more of them
            """, "does fall with m"),
        wrong("""
            def predicted_error_exponent():
                return -0.25
            """, "from the measured one"),
        wrong("""
            def predicted_error_exponent():
                return -0.8
            """, "from the measured one"),
        wrong("""
            def predicted_error_exponent():
                return "m^-1/2"
            """, "return an exponent p"),
        forbidden("""
            def predicted_error_exponent():
                from labsupport.sections.efficient_attention.checks import (SMALL_SCALE,
                                                                            measured_error_exponent)
                return measured_error_exponent(SMALL_SCALE)
            """, "labsupport.sections"),
    ],
}
