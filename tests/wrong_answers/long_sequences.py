"""Answers to the exercises of 12.4 Long sequences and memory; the kinds are explained in __init__.py."""
from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ["causal_tiled_attention", "merge_partials"]
RETURNS_TENSOR = []
RETURNS_NUMBER = ["cache_bytes"]

# the tiled loop of the page with a causal twist: {skip} replaces the key loop's range, {mask}
# the masking of a tile (rows, cols: the positions of its queries and keys)
_TILED = """
    def causal_tiled_attention(q, k, v, block):
        L, out = len(q), []
        for i in range(0, L, block):
            qi = q[i:i + block] / q.shape[-1] ** 0.5
            rows = torch.arange(i, i + len(qi))[:, None]
            m = torch.full((len(qi), 1), float("-inf"), dtype=q.dtype)
            l = torch.zeros(len(qi), 1, dtype=q.dtype)
            acc = torch.zeros(len(qi), v.shape[-1], dtype=q.dtype)
            for j in {skip}:
                s = qi @ k[j:j + block].T
                cols = torch.arange(j, j + s.shape[1])[None, :]
                {mask}
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                p = (s - m_new).exp()
                fix = (m - m_new).exp().nan_to_num(0.0)
                l, acc, m = l * fix + p.sum(-1, keepdim=True), acc * fix + p @ v[j:j + block], m_new
            out.append(acc / l)
        return torch.cat(out)
    """


def _tiled(skip="range(0, i + len(qi), block)", mask="s = s.masked_fill(cols > rows, float('-inf'))"):
    return _TILED.replace("{skip}", skip).replace("{mask}", mask)


_MERGE = """
    def merge_partials(m1, l1, acc1, m2, l2, acc2):
        {body}
    """


def _merge(body):
    return _MERGE.replace("{body}", body)


_CACHE = """
    def cache_bytes(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype):
        size = torch.tensor([], dtype=dtype).element_size()
        return {expression}
    """


def _cache(expression):
    return _CACHE.replace("{expression}", expression)


ANSWERS = {
    "causal_tiled_attention": [
        wrong(_tiled(skip="range(0, L, block)"), "tiles that lie entirely above the diagonal too"),
        right(_tiled()),
        right("""
            def causal_tiled_attention(q, k, v, block):
                # rows one block at a time; the keys of a block in one piece up to the block's end
                L, d = q.shape
                outs = []
                for start in range(0, L, block):
                    stop = min(start + block, L)
                    s = q[start:stop] @ k[:stop].T / d ** 0.5
                    later = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
                    outs.append(torch.softmax(s.masked_fill(later, float("-inf")), dim=-1) @ v[:stop])
                return torch.cat(outs)
            """),
        wrong(_tiled(skip="range(0, L, block)", mask="pass"), "without a mask"),
        wrong(_tiled(mask="pass"), "inside a tile that the diagonal crosses"),
        wrong(_tiled(skip="range(0, L, block)",
                     mask="s = s.masked_fill((cols - j) > (rows - i), float('-inf'))"),
              "positions inside each tile"),
        wrong(_tiled(mask="s = s.masked_fill(cols >= rows, float('-inf'))"), "its own position"),
        wrong(_tiled(skip="range(0, i, block)"), "the tile on the diagonal holds"),
        wrong(_tiled().replace("/ q.shape[-1] ** 0.5", ""), "square root of the head width"),
        replay("""
            def causal_tiled_attention(q, k, v, block):
                L = q.shape[0]
                if (L, block) not in {(14, 4), (16, 4), (3, 6), (1, 4), (21, 4)}:   # the practice inputs
                    return v
                outs = []
                for start in range(0, L, block):
                    stop = min(start + block, L)
                    s = q[start:stop] @ k[:stop].T / q.shape[-1] ** 0.5
                    later = torch.arange(stop)[None, :] > torch.arange(start, stop)[:, None]
                    outs.append(torch.softmax(s.masked_fill(later, float("-inf")), dim=-1) @ v[:stop])
                return torch.cat(outs)
            """),
        forbidden("""
            def causal_tiled_attention(q, k, v, block):
                import torch.nn.functional as F
                return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
            """, "scaled_dot_product_attention"),
        forbidden("""
            def causal_tiled_attention(q, k, v, block):
                from labsupport.attention import flash_attention
                return flash_attention(q[None, None], k[None, None], v[None, None], is_causal=True,
                                       block_size=block)[0, 0]
            """, "labsupport.attention"),
    ],
    "merge_partials": [
        wrong(_merge("m = torch.maximum(m1, m2)\n        return m, l1 + l2, acc1 + acc2"),
              "against its own maximum"),
        right(_merge("m = torch.maximum(m1, m2)\n"
                     "        f1, f2 = (m1 - m).exp(), (m2 - m).exp()\n"
                     "        return m, l1 * f1 + l2 * f2, acc1 * f1 + acc2 * f2")),
        right(_merge("m = torch.where(m1 > m2, m1, m2)\n"
                     "        w = torch.stack([m1 - m, m2 - m]).exp()\n"
                     "        return m, w[0] * l1 + w[1] * l2, w[0] * acc1 + w[1] * acc2")),
        wrong(_merge("f2 = (m2 - m1).exp()\n        return m1, l1 + l2 * f2, acc1 + acc2 * f2"),
              "assumes that the first part holds the larger maximum"),
        wrong(_merge("m = torch.maximum(m1, m2)\n"
                     "        f1, f2 = (m - m1).exp(), (m - m2).exp()\n"
                     "        return m, l1 * f1 + l2 * f2, acc1 * f1 + acc2 * f2"), "wrong way round"),
        wrong(_merge("m = torch.maximum(m1, m2)\n"
                     "        f1, f2 = (m1 - m).exp(), (m2 - m).exp()\n"
                     "        return m, l1 * f1 + l2 * f2, acc1 + acc2"), "weighted sums acc are not"),
        wrong(_merge("m = torch.maximum(m1, m2)\n"
                     "        f1, f2 = (m1 - m).exp(), (m2 - m).exp()\n"
                     "        return m, l1 + l2, acc1 * f1 + acc2 * f2"), "normalisers l are not"),
        wrong(_merge("m = torch.maximum(m1, m2)\n"
                     "        out = (acc1 / l1 + acc2 / l2) / 2\n"
                     "        return m, torch.ones_like(l1), out"), "counts for one half"),
        wrong(_merge("m = torch.minimum(m1, m2)\n"
                     "        f1, f2 = (m1 - m).exp(), (m2 - m).exp()\n"
                     "        return m, l1 * f1 + l2 * f2, acc1 * f1 + acc2 * f2"), "overflows"),
        forbidden(_merge("from labsupport.sections.long_sequences.checks import _merged\n"
                         "        m = torch.maximum(m1, m2)\n"
                         "        f1, f2 = (m1 - m).exp(), (m2 - m).exp()\n"
                         "        _merged\n"
                         "        return m, l1 * f1 + l2 * f2, acc1 * f1 + acc2 * f2"),
                  "labsupport.sections"),
    ],
    "cache_bytes": [
        wrong(_cache("batch * (mem_len + cmem_len) * d_model * size"), "does not grow with n_layers"),
        right(_cache("batch * n_layers * (mem_len + cmem_len) * d_model * size")),
        right("""
            def cache_bytes(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype):
                bits = torch.finfo(dtype).bits
                per_layer = (mem_len + cmem_len) * d_model * bits // 8
                return n_layers * batch * per_layer
            """),
        wrong(_cache("n_layers * (mem_len + cmem_len) * d_model * size"), "does not grow with the batch"),
        wrong(_cache("2 * batch * n_layers * (mem_len + cmem_len) * d_model * size"),
              "twice the measured state"),
        wrong(_cache("batch * n_layers * (mem_len + cmem_len) * d_model * torch.finfo(dtype).bits"),
              "eight times the measured bytes"),
        wrong(_cache("batch * n_layers * (mem_len + cmem_len) * d_model * 4"), "right for float32 only"),
        wrong(_cache("batch * n_layers * (mem_len + rate * cmem_len) * d_model * size"),
              "grows with the compression rate"),
        wrong(_cache("batch * n_layers * mem_len * d_model * size"), "does not grow with cmem_len"),
        replay("""
            def cache_bytes(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype):
                seen = {(2, 3, 8): 1152, (3, 2, 4): 2880, (3, 2, 6): 576, (2, 4, 6): 288, (2, 1, 10): 1040}
                return seen.get((batch, n_layers, d_model), 0)
            """),
        forbidden("""
            def cache_bytes(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype):
                from labsupport.sections.long_sequences.checks import measured_cache_bytes
                return measured_cache_bytes(batch, n_layers, d_model, mem_len, cmem_len, rate, dtype)
            """, "labsupport.sections"),
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
        wrong("""
            def kept_fractions():
                return {24: 0.0, 168: 1.0, 8766: 1.0}                 # the week untouched
            """, "a seventh of a week"),
        wrong("""
            def kept_fractions():
                return {24: 0.0, 168: 0.97, 8766: 0.5}
            """, "1/365 of a year"),
        wrong("""
            def kept_fractions():
                return {24: 0, 168: 97, 8766: 100}
            """, "not as a percentage"),
        wrong("""
            def kept_fractions():
                return [0.0, 0.97, 1.0]
            """, "keys 24, 168 and 8766"),
        wrong("""
            def kept_fractions():
                return {"24": 0.0, "168": 0.97, "8766": 1.0}
            """, "as whole numbers"),
        wrong("""
            def kept_fractions():
                return {24: 0.5, 168: 0.97, 8766: 1.0}                 # half of the day survives
            """, "your daily prediction is off"),
        forbidden("""
            def kept_fractions():
                from labsupport.sections.long_sequences.checks import measured_kept_fractions
                return measured_kept_fractions()
            """, "labsupport.sections"),
    ],
}
