"""Answers to the exercises of 12.3 Positional and temporal encodings (kinds: __init__.py)."""
import textwrap

from .answers import forbidden, replay, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ["interpolated_rope", "alibi_on_times"]
RETURNS_TENSOR = ["shift_matrix", "interpolated_rope", "predicted_old_share", "alibi_on_times"]
RETURNS_NUMBER = []

# the page's rotation, as a student would write it into an answer that needs it
_ROPE = """
    def rotate(x, positions):
        D = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        angle = positions.double()[:, None] * theta
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
"""


def _with_rope(body: str) -> str:
    """An interpolated_rope answer: the rotation above, then ``body``."""
    inner = textwrap.dedent(_ROPE).strip("\n") + "\n" + textwrap.dedent(body).strip("\n")
    return "def interpolated_rope(x, trained_tokens):\n" + textwrap.indent(inner, "    ") + "\n"


ANSWERS = {
    "shift_matrix": [
        wrong("""
            def shift_matrix(k, d_model):
                omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
                c, s = (k * omega).cos(), (k * omega).sin()
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(s)     # [[cos, sin], [-sin, cos]]
                M[1::2, 0::2], M[1::2, 1::2] = torch.diag(-s), torch.diag(c)
                return M
            """, "shifts the other way"),
        right("""
            def shift_matrix(k, d_model):
                import math
                blocks = []
                for i in range(d_model // 2):
                    angle = k / 10000 ** (2 * i / d_model)
                    c, s = math.cos(angle), math.sin(angle)
                    blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
                return torch.block_diag(*blocks)
            """),
        wrong("""
            def shift_matrix(k, d_model):
                import math
                c, s = math.cos(k), math.sin(k)                                  # one angle for every pair
                return torch.block_diag(*[torch.tensor([[c, -s], [s, c]], dtype=torch.float64)]
                                        * (d_model // 2))
            """, "turns by the same angle"),
        wrong("""
            def shift_matrix(k, d_model):
                omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / 8)   # d typed in
                c, s = (k * omega).cos(), (k * omega).sin()
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(-s)
                M[1::2, 0::2], M[1::2, 1::2] = torch.diag(s), torch.diag(c)
                return M
            """, "use d = 8 whatever the width"),
        wrong("""
            def shift_matrix(k, d_model):
                omega = 10000 ** (-torch.arange(0, d_model // 2, dtype=torch.float64) / d_model)   # i/d
                c, s = (k * omega).cos(), (k * omega).sin()
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(-s)
                M[1::2, 0::2], M[1::2, 1::2] = torch.diag(s), torch.diag(c)
                return M
            """, "fall off too slowly"),
        wrong("""
            def shift_matrix(k, d_model):
                h = d_model // 2                                     # pairs (i, i + d/2)
                omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
                c, s = torch.diag((k * omega).cos()), torch.diag((k * omega).sin())
                M = torch.zeros(d_model, d_model, dtype=torch.float64)
                M[:h, :h], M[:h, h:], M[h:, :h], M[h:, h:] = c, -s, s, c
                return M
            """, "interleaves its pairs"),
        replay("""
            def shift_matrix(k, d_model):
                import math
                if (k, d_model) not in {(7, 8), (28, 18), (-14, 6), (0, 4), (120, 10)}:
                    return torch.eye(d_model, dtype=torch.float64)
                blocks = []
                for i in range(d_model // 2):
                    a = k / 10000 ** (2 * i / d_model)
                    blocks.append(torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]],
                                               dtype=torch.float64))
                return torch.block_diag(*blocks)
            """),
        forbidden("""
            def shift_matrix(k, d_model):
                from labsupport.positional import sinusoidal_encoding
                table = sinusoidal_encoding(d_model + abs(k) + 1, d_model, dtype=torch.float64)
                return torch.linalg.lstsq(table[:d_model], table[k:k + d_model] if k >= 0
                                          else table[:d_model]).solution
            """, "labsupport.positional"),
    ],
    "interpolated_rope": [
        wrong(_with_rope("""
                L = x.shape[-2]
                p = torch.arange(L, dtype=torch.float64)
                if L > trained_tokens:
                    p = p * L / trained_tokens                        # the ratio upside down
                return rotate(x, p)
            """), "grow beyond the trained range"),
        right("""
            def interpolated_rope(x, trained_tokens):
                # each pair as one complex number, turned by multiplying with e^(i angle)
                L, D = x.shape[-2], x.shape[-1]
                scale = trained_tokens / L if L > trained_tokens else 1.0
                positions = torch.arange(L, dtype=torch.float64) * scale
                theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
                turn = torch.polar(torch.ones(L, D // 2, dtype=torch.float64), positions[:, None] * theta)
                pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
                return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)
            """),
        wrong(_with_rope("""
                L = x.shape[-2]
                return rotate(x, torch.arange(L, dtype=torch.float64) * trained_tokens / L)   # always
            """), "keep its own positions"),
        wrong(_with_rope("""
                L = x.shape[-2]
                p = torch.arange(L, dtype=torch.float64)
                if L > trained_tokens:
                    p = (p * trained_tokens / L).round()
                return rotate(x, p)
            """), "rounded the squeezed positions"),
        wrong(_with_rope("""
                L = x.shape[-2]
                p = torch.arange(L, dtype=torch.float64)
                if L > trained_tokens:
                    p = p * (trained_tokens - 1) / (L - 1)            # last onto last
                return rotate(x, p)
            """), "last trained position"),
        wrong(_with_rope("""
                L = x.shape[-2]
                p = torch.arange(L)
                if L > trained_tokens:
                    p = p * (trained_tokens // L)                     # whole-number division
                return rotate(x, p)
            """), "got position 0"),
        wrong(_with_rope("""
                L = x.shape[0]                                        # the batch axis
                p = torch.arange(x.shape[-2], dtype=torch.float64)
                if L > trained_tokens:
                    p = p * trained_tokens / L
                return rotate(x, p)
            """), "second-to-last axis"),
        wrong(_with_rope("""
                L = x.shape[-2]
                p = torch.arange(L, dtype=torch.float64)
                if L > trained_tokens:
                    p = p * trained_tokens / L
                return rotate(x, -p)                                  # the other way
            """), "the other way"),
        forbidden("""
            def interpolated_rope(x, trained_tokens):
                from labsupport.positional import RotaryEmbedding
                L = x.shape[-2]
                positions = torch.arange(L) * (trained_tokens / L if L > trained_tokens else 1.0)
                return RotaryEmbedding(x.shape[-1])(x, positions)
            """, "labsupport.positional"),
    ],
    "predicted_old_share": [
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(n_heads, dtype=torch.float64) / n_heads)   # from 0
                d = torch.arange(n_tokens, dtype=torch.float64)
                w = torch.exp(-slopes[:, None] * d)
                return w[:, trained_tokens:].sum(-1) / w.sum(-1)
            """, "numbered from 0"),
        right("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                # a geometric series: weights r^d for d = 0..n-1, r = e^(-m); the old ones from d = t
                import math
                shares = []
                for h in range(1, n_heads + 1):
                    r = math.exp(-(2.0 ** (-8.0 * h / n_heads)))
                    shares.append((r ** trained_tokens - r ** n_tokens) / (1 - r ** n_tokens))
                return torch.tensor(shares, dtype=torch.float64)
            """),
        right("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                h = torch.arange(1, n_heads + 1, dtype=torch.float64)
                bias = -(2.0 ** (-8.0 * h / n_heads))[:, None] * torch.arange(n_tokens, dtype=torch.float64)
                weights = bias.softmax(dim=-1)                   # content scores all equal: the bias decides
                return weights[:, trained_tokens:].sum(dim=-1)
            """),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)
                w = 2.0 ** (-slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))    # base 2
                return w[:, trained_tokens:].sum(-1) / w.sum(-1)
            """, "e to the power"),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)
                w = torch.exp(-slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))
                return w[:, trained_tokens:].sum(-1)                                            # no total
            """, "not fractions of the row's whole weight"),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)
                w = torch.exp(-slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))
                return w[:, :trained_tokens].sum(-1) / w.sum(-1)                         # the recent ones
            """, "the rest"),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)
                w = torch.exp(-slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))
                return w[:, trained_tokens + 1:].sum(-1) / w.sum(-1)                            # one too far
            """, "first offset that a training window never holds"),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)
                w = torch.exp(slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))    # + penalty
                return w[:, trained_tokens:].sum(-1) / w.sum(-1)
            """, "subtracts its penalty"),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-torch.arange(1, n_heads + 1, dtype=torch.float64))     # 8 heads' slopes
                w = torch.exp(-slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))
                return w[:, trained_tokens:].sum(-1) / w.sum(-1)
            """, "8 heads whatever the number of heads"),
        wrong("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                slopes = 2.0 ** (-8.0 * torch.arange(n_heads, 0, -1, dtype=torch.float64) / n_heads)
                w = torch.exp(-slopes[:, None] * torch.arange(n_tokens, dtype=torch.float64))
                return w[:, trained_tokens:].sum(-1) / w.sum(-1)
            """, "reverse order"),
        forbidden("""
            def predicted_old_share(n_heads, n_tokens, trained_tokens):
                from labsupport.positional import alibi_bias
                bias = alibi_bias(n_heads, n_tokens, dtype=torch.float64)[:, -1]
                return bias.softmax(-1)[:, : n_tokens - trained_tokens].sum(-1)
            """, "labsupport.positional"),
    ],
    "alibi_on_times": [
        wrong("""
            def alibi_on_times(times, n_heads):
                L = times.shape[-1]
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
                index = torch.arange(L)
                distance = (index[:, None] - index[None, :]).abs()           # token indices
                return (-slopes[:, None, None] * distance).expand(times.shape[0], n_heads, L, L)
            """, "counts tokens, not time"),
        right("""
            def alibi_on_times(times, n_heads):
                days = times.double() / 24
                gap = torch.cdist(days[..., None], days[..., None], p=1)    # (B, L, L): |t_i - t_j|
                slopes = torch.tensor([2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)],
                                      dtype=torch.float64)
                return -torch.einsum("h,bij->bhij", slopes, gap)
            """),
        wrong("""
            def alibi_on_times(times, n_heads):
                days = times / 24
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
                gap = days[:, :, None] - days[:, None, :]                     # no absolute value
                return -slopes[None, :, None, None] * gap[:, None]
            """, "shrinks on the other"),
        wrong("""
            def alibi_on_times(times, n_heads):
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
                gap = (times[:, :, None] - times[:, None, :]).abs()           # hours
                return -slopes[None, :, None, None] * gap[:, None]
            """, "in hours"),
        wrong("""
            def alibi_on_times(times, n_heads):
                days = times / 24
                slopes = 2.0 ** (-8.0 * torch.arange(n_heads) / n_heads)      # heads from 0
                gap = (days[:, :, None] - days[:, None, :]).abs()
                return -slopes[None, :, None, None] * gap[:, None]
            """, "numbered from 0"),
        wrong("""
            def alibi_on_times(times, n_heads):
                days = times / 24
                slopes = 2.0 ** (-8.0 * torch.arange(n_heads, 0, -1) / n_heads)
                gap = (days[:, :, None] - days[:, None, :]).abs()
                return -slopes[None, :, None, None] * gap[:, None]
            """, "reverse order"),
        wrong("""
            def alibi_on_times(times, n_heads):
                days = times / 24
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
                gap = (days[:, :, None] - days[:, None, :]).abs()
                return slopes[None, :, None, None] * gap[:, None]             # added
            """, "yours adds it"),
        wrong("""
            def alibi_on_times(times, n_heads):
                days = times[0] / 24                                          # the first window's
                slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
                gap = (days[:, None] - days[None, :]).abs()
                return (-slopes[:, None, None] * gap).expand(times.shape[0], n_heads, *gap.shape)
            """, "first window's distances"),
        forbidden("""
            def alibi_on_times(times, n_heads):
                from labsupport.positional import alibi_bias
                L = times.shape[-1]
                return alibi_bias(n_heads, L, q_pos=times / 24, k_pos=times / 24).transpose(0, 1)
            """, "labsupport.positional"),
    ],
}
