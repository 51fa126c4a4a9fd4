"""Self-checks for the book's exercises: ``checks.attention_weights(my_fn)`` returns a
verdict that prints as ``[PASS] ...`` or ``[TRY AGAIN] ...: <a hint>``.

Every check runs the student's function on several inputs (fixed ones in the notebook:
practice) and never raises. ``checks.grade(name, fn)`` is the graded test of the nbgrader
course: new inputs drawn when it runs, and no credit for calling the book's own code.
"""
from . import reference
from .core import CHECKS, NOT_ANSWERED, CheckResult, Draw, Hint, check, yours_or_reference
from .efficient import (
    blocked_local_attention,
    decayed_linear_attention,
    performer_error_exponent,
    positive_features,
)
from .grading import forbidden_names, forbidden_uses, grade, graded
from .lab import causal_block, ridge_weights, step_peak
from .long_sequences import (
    compress_mean,
    kept_fractions,
    online_step,
    patch_count,
    stride_saving,
)
from .positional import alibi_slopes, hour_features, rotate_pairs, sinusoidal, untrained_buckets
from .self_attention import (
    attention_weights,
    causal_attention,
    predicted_peak,
    score_matrix_bytes,
    split_heads,
)
from .transformer import (
    block_parameters,
    feed_forward,
    heads_peak_ratio,
    peeks,
    pre_norm_block,
)

__all__ = ["CHECKS", "NOT_ANSWERED", "CheckResult", "Draw", "Hint", "check", "yours_or_reference",
           "reference",
           "grade", "graded", "forbidden_names", "forbidden_uses",
           "attention_weights", "causal_attention", "score_matrix_bytes", "split_heads", "predicted_peak",
           "feed_forward", "pre_norm_block", "peeks", "heads_peak_ratio",
           "block_parameters",
           "sinusoidal", "rotate_pairs", "alibi_slopes", "hour_features", "untrained_buckets",
           "online_step", "compress_mean", "kept_fractions", "patch_count", "stride_saving",
           "causal_block", "ridge_weights", "step_peak",
           "positive_features", "blocked_local_attention", "decayed_linear_attention",
           "performer_error_exponent"]
