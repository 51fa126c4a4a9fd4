"""No hint gives the answer away: every wrong answer of tests/wrong_answers/ through its check,
and the hint must hold neither a value the check compared with (which a student could paste
back) nor code or a formula of the solution (a call such as ``softmax(``, ``@``, ``**``, a
transpose ``^T``, ``dim=``). It names the mistake made, or where and how much the answer differs.
"""
import re

import pytest
import torch

from labsupport import checks
from labsupport.checks import core
from labsupport.sections import (  # noqa: F401  (importing a section registers its checks)
    efficient_attention,
    lab,
    long_sequences,
    positional_encodings,
    self_attention,
    transformer,
)
from wrong_answers import of_kind

CODE = re.compile(r"[A-Za-z_][\w.]*\((?!\d)|@|\*\*|\^T|\bdim=|\.T\b|\btranspose\b|masked_fill"
                  r"|\btril\b|\btriu\b|torch\.\w|\bnn\.\w|\bF\.\w|\.shape\b|\.view\b|\.sum\b|\.exp\b")
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w%])(?!\s*(?:times|%))")


def _values(expected) -> list[float]:
    """Every number the check compared with, flattened (tensors up to 20,000 elements)."""
    out = []
    for value in expected:
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() or not value.dtype.is_complex:
                out += value.detach().double().flatten()[:20_000].tolist()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value))
        elif isinstance(value, (list, tuple)):
            out += _values(value)
    return out


def pasted_values(hint: str, expected) -> list[str]:
    """The numbers of ``hint`` that equal a value the check compared with (to 1e-3): those a
    student could paste back. Counts and sizes below 100 are left alone (shapes, a head count)."""
    values = [v for v in _values(expected) if v == v and abs(v) >= 1e-12]
    found = []
    for match in NUMBER.finditer(hint):
        text = match.group(0).replace(",", "")
        x = float(text)
        if abs(x) < 100 and "." not in text and "e" not in text:
            continue
        if any(abs(x - v) <= 1e-3 * abs(v) for v in values):
            found.append(match.group(0))
    return found


WRONG = [(name, i, a) for name, i, a in of_kind("wrong") if name in checks.CHECKS]


@pytest.mark.parametrize("name, index, answer", WRONG, ids=[f"{n}-{i}" for n, i, _ in WRONG])
def test_a_hint_holds_no_expected_value_and_no_code(name, index, answer):
    result = checks.CHECKS[name](answer.function())
    assert not result.passed, result
    hint = result.message
    pasted = pasted_values(hint, core.expected_values())
    assert pasted == [], f"{name}: the hint prints an expected value {pasted}: {hint}"
    code = CODE.search(hint)
    assert code is None, f"{name}: the hint holds code or a formula ({code.group(0)!r}): {hint}"


def test_the_leak_test_can_fail():
    """A hint that prints the expected value, or the solution's code, is caught."""
    assert pasted_values("at index (0, 1) expected 0.04699071, got 0.05", [torch.tensor([0.0469907])]) \
        == ["0.04699071"]
    assert pasted_values("expected 16,777,216 bytes", [16777216]) == ["16,777,216"]
    assert pasted_values("yours is about 12% too large on q (2, 3, 5, 8)", [torch.tensor([12.0, 8.0])]) == []
    assert CODE.search("take softmax(dim=-1) over the keys")
    assert CODE.search("the scores are q @ k.transpose(-2, -1)")
    assert CODE.search("compared with relu(x W1^T + b1)")
    assert CODE.search("your weights sum to more than one over the keys") is None
