"""The self-check framework: a check runs the student's function on known inputs and
returns a verdict, a pass or a specific hint. It never raises, so a student notebook
still runs top to bottom with exercises unanswered."""
from __future__ import annotations

import functools
import textwrap
from dataclasses import dataclass

import torch

NOT_ANSWERED = ("not answered yet: replace `raise NotImplementedError` in the exercise cell "
                "with your code, run that cell, then run this check again")


class Hint(Exception):
    """Raised inside a check to tell the student what is wrong and where to look."""


@dataclass(frozen=True)
class CheckResult:
    exercise: str
    passed: bool
    message: str

    def __str__(self) -> str:
        text = f"[{'PASS' if self.passed else 'TRY AGAIN'}] {self.exercise}: {self.message}"
        return textwrap.fill(text, width=76, subsequent_indent="    ")

    __repr__ = __str__

    def __bool__(self) -> bool:
        return self.passed


CHECKS: dict = {}


def check(exercise: str):
    """Turn ``body(answer) -> success message`` into a check returning a `CheckResult`.

    Inside ``body``, ``raise Hint("...")`` for a recognised mistake.
    """
    def decorate(body):
        @functools.wraps(body)
        def run(answer) -> CheckResult:
            try:
                return CheckResult(exercise, True, body(answer))
            except NotImplementedError:
                return CheckResult(exercise, False, NOT_ANSWERED)
            except Hint as hint:
                return CheckResult(exercise, False, str(hint))
            except Exception as err:                     # the student's code failed
                return CheckResult(exercise, False, f"your code raised {type(err).__name__}: {err}")
        CHECKS[body.__name__] = run
        return run
    return decorate


def expect_tensor(value, shape, what: str) -> torch.Tensor:
    """Raise a `Hint` unless ``value`` is a tensor of ``shape``."""
    if not isinstance(value, torch.Tensor):
        raise Hint(f"{what} should return a torch.Tensor, got {type(value).__name__}")
    if tuple(value.shape) != tuple(shape):
        raise Hint(f"{what} should have shape {tuple(shape)}, got {tuple(value.shape)}")
    return value


def close(a, b, tol: float = 1e-6) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(
        a.double(), b.double(), atol=tol, rtol=tol)


def yours_or_reference(check_fn, answer, reference):
    """``answer`` if it passes ``check_fn``, else ``reference``, saying so.

    Later cells that build on an exercise use this, so that a student notebook still
    runs top to bottom while the exercise is unanswered or wrong.
    """
    result = check_fn(answer)
    if result.passed:
        return answer
    print(f"(not yet passing {result.exercise!r}: the cells below use the book's reference "
          "version until yours passes its check)")
    return reference
