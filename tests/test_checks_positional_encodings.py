"""Tests of the self-checks of 12.3 that go beyond the generic ones of tests/test_checks.py
(every answer of tests/wrong_answers/positional_encodings.py runs there)."""
import copy  # noqa: F401

import pytest  # noqa: F401
import torch

from labsupport import checks
from labsupport.checks.core import Draw  # noqa: F401
from labsupport.sections import positional_encodings  # noqa: F401  (registers its checks)
from test_checks import GRADED_SEEDS, RIGHT, expect  # noqa: F401
from wrong_answers import ANSWERS, first  # noqa: F401


def test_untrained_buckets():
    """12.3 exercise 3: the T5 buckets a 111-token causal window reads and 27 tokens never train;
    the pass names no bucket (the answer stays the student's)."""
    from labsupport.sections.positional_encodings.checks import bucket_rows_read
    assert bucket_rows_read(27) == set(range(20))                       # offsets 0..26
    assert bucket_rows_read(111) - bucket_rows_read(27) == set(range(20, 31))
    expect(checks.CHECKS["untrained_buckets"](lambda: torch.arange(20, 31)), True, "exactly those")
    assert "20" not in checks.CHECKS["untrained_buckets"](lambda: [20.0 + i for i in range(11)]).message
    expect(checks.CHECKS["untrained_buckets"](lambda: list(range(20, 32))), False, "offsets from 113 on")
    expect(checks.CHECKS["untrained_buckets"](lambda: [12, 13, 14, 15]), False, "one-sided")
    expect(checks.CHECKS["untrained_buckets"](lambda: list(range(10, 31))), False, "already reads")
    expect(checks.CHECKS["untrained_buckets"](lambda: list(range(20, 26))), False, "55 tokens")
    expect(checks.CHECKS["untrained_buckets"](lambda: [20, 22]), False, "missing")
    expect(checks.CHECKS["untrained_buckets"](lambda: [20.5]), False, "whole bucket numbers")
    expect(checks.CHECKS["untrained_buckets"](lambda: 20), False, "a list of bucket numbers")
