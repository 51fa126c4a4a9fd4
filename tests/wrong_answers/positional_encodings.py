"""Answers to the exercises of 12.3 Positional and temporal encodings (kinds: __init__.py)."""
from .answers import forbidden, right, wrong

# which checks the generic tests of tests/test_checks.py also run: a function of tensors (its
# inputs copied, an in-place edit noted), one that returns a tensor (float32, NaN and half
# precision answers), one that returns a number (NumPy and tensor numbers accepted)
TAKES_TENSORS = ['hour_features']
RETURNS_TENSOR = ['hour_features', 'shift_matrix']
RETURNS_NUMBER = []

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
            """, "its own frequency"),
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
            """, "not i/d"),
        forbidden("""
            def shift_matrix(k, d_model):
                from labsupport.positional import sinusoidal_encoding
                table = sinusoidal_encoding(d_model + abs(k) + 1, d_model, dtype=torch.float64)
                return torch.linalg.lstsq(table[:d_model], table[k:k + d_model] if k >= 0
                                          else table[:d_model]).solution
            """, "labsupport.positional"),
    ],
    "hour_features": [
        wrong("""
            def hour_features(hours):
                angle = hours / 24                                    # no 2 pi
                return torch.stack([angle.sin(), angle.cos()], dim=-1)
            """, "2 pi"),
        right("""
            def hour_features(hours):
                angle = torch.deg2rad(hours.double() % 24 * 15)
                return torch.column_stack([torch.sin(angle), torch.cos(angle)])
            """),
        wrong("""
            def hour_features(hours):
                import math
                angle = 2 * math.pi * hours / 24
                return torch.stack([angle.cos(), angle.sin()], dim=-1)
            """, "(sin, cos) in that order"),
        wrong("""
            def hour_features(hours):
                import math
                angle = 2 * math.pi * hours / 12
                return torch.stack([angle.sin(), angle.cos()], dim=-1)
            """, "not 2 pi h / 12"),
        wrong("""
            def hour_features(hours):
                return torch.stack([hours / 24, 1 - hours / 24], dim=-1)
            """, "repeat every 24 hours"),
        forbidden("""
            def hour_features(hours):
                import labsupport.positional as encodings
                return encodings.time_features(hours)
            """, "labsupport.positional"),
    ],
    "untrained_buckets": [
        wrong("""
            def untrained_buckets_read():
                return list(range(27, 111))                           # offsets, not buckets
            """, "offsets, not buckets"),
        right("""
            def untrained_buckets_read():
                return list(range(20, 31))
            """),
        wrong("""
            def untrained_buckets_read():
                return list(range(21, 31))
            """, "offset 27 is new"),
        forbidden("""
            def untrained_buckets_read():
                from labsupport.positional import relative_position_bucket
                seen = lambda n: {int(b) for b in relative_position_bucket(torch.arange(n))}
                return sorted(seen(111) - seen(27))
            """, "labsupport.positional"),
    ],
}
