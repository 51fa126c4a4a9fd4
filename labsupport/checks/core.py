"""The self-check framework: a check runs the student's function on several inputs and
returns a verdict, a pass or a hint that says what differs. It never raises, so a student
notebook still runs top to bottom with exercises unanswered.

Inputs come from a `Draw`: the notebook's self-check (practice) uses a fixed seed, the
graded test (`labsupport.checks.grading.grade`) a seed drawn when it runs. Where an
answer is wrong, a hint that names a mistake is given only when the answer's output is
that mistake's on every input (`recognise`); otherwise the hint says what was compared
and where the answer first differs (`differ`).

A check is kind to the notebook it runs in: it calls the student's function on copies
of its inputs (and says so when the function changed them in place), under a time
limit, and leaves the global torch, NumPy and ``random`` generators as it found them.
"""
from __future__ import annotations

import functools
import math
import numbers
import random
import textwrap
from dataclasses import dataclass, field

import numpy as np
import torch

from ..randomstate import kept_random_state
from .sandbox import Hint, StudentFunction, _short, _Unanswered

__all__ = ["Draw", "CheckResult", "CHECKS", "check", "run_check", "NOT_ANSWERED", "yours_or_reference",
           "expect_tensor", "expect_number", "expect_sequence", "close", "Case", "shapes", "same_number",
           "apart", "how_far", "off_by", "times", "beyond", "differ", "recognise", "judge", "expect",
           "expected_values"]

NOT_ANSWERED = ("not answered yet: replace `raise NotImplementedError` in the exercise cell "
                "with your code, run that cell, then run this check again")

PRACTICE_SEED = 0          # the notebook's self-checks; graded tests draw theirs when they run
PRACTICE_NOTE = "practice check on fixed inputs; the graded test draws new ones"
PRACTICE_NOTE_MEASURED = "practice check; the graded test repeats the measurement"


class Draw:
    """Where a check's inputs come from: sizes and tensors drawn from one seed.

    ``Draw()`` is the practice draw of the notebook's self-check (`PRACTICE_SEED`, the
    same inputs every run); ``Draw(seed, graded=True)`` is a graded test's, whose seed is
    drawn when it runs and printed with its verdict so that the grade can be reproduced.
    """

    def __init__(self, seed: int = PRACTICE_SEED, *, graded: bool = False):
        self.seed, self.graded = int(seed), graded
        self.rng = random.Random(self.seed)

    def int(self, low: int, high: int) -> int:
        """A whole number in [low, high]."""
        return self.rng.randint(low, high)

    def other(self, low: int, high: int, *avoid: int) -> int:
        """A whole number in [low, high] other than those in ``avoid``."""
        choices = [n for n in range(low, high + 1) if n not in avoid]
        return self.rng.choice(choices)

    def choice(self, options):
        return self.rng.choice(list(options))

    def uniform(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)

    def generator(self) -> torch.Generator:
        """A torch generator seeded from this draw (tensors never touch the global one)."""
        return torch.Generator().manual_seed(self.rng.getrandbits(62))

    def randn(self, *shape, scale: float = 1.0, dtype=torch.float64) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=self.generator(), dtype=dtype)


@dataclass(frozen=True)
class CheckResult:
    exercise: str
    passed: bool
    message: str
    graded: bool = False
    note: str = ""                 # what kind of check this was (practice, or the graded seed)

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "TRY AGAIN"
        if self.graded:
            verdict = "GRADED: PASS" if self.passed else "GRADED: 0 POINTS"
        note = f" ({self.note})" if self.note else ""
        text = f"[{verdict}] {self.exercise}: {self.message}{note}"
        return textwrap.fill(text, width=76, subsequent_indent="    ", break_on_hyphens=False)

    __repr__ = __str__

    def __bool__(self) -> bool:
        return self.passed


CHECKS: dict = {}
_EXPECTED: list = []       # what the last check compared answers with (tests/test_hints.py reads it)


def expect(*values):
    """Record reference values the running check compares an answer with, so that the tests
    can check that no hint prints one (a student must not be able to paste it back); returns
    the first value."""
    _EXPECTED.extend(values)
    return values[0] if values else None


def expected_values() -> list:
    """The values the last check recorded with `expect` (and `judge`)."""
    return list(_EXPECTED)


def check(exercise: str, *, drawn: bool = True, predicts: bool = False, forbid: tuple = (),
          unavailable: tuple = ()):
    """Turn ``body(answer, draw) -> success message`` into a check returning a `CheckResult`.

    Inside ``body``, ``raise Hint("...")`` for a mistake. ``body`` receives the student's
    function wrapped in a `StudentFunction` (every call runs on copies of the arguments,
    within `TIME_LIMIT_S`, and turns a crash, a ``None`` or a timeout into a hint) and the
    `Draw` its inputs come from. ``predicts`` marks a prediction checked against a
    measurement, ``drawn=False`` one with no inputs to draw. ``forbid`` lists the dotted names (modules,
    functions) that the graded test does not accept in an answer
    (`labsupport.checks.grading`), beyond those every exercise forbids; ``unavailable`` the
    dotted names (the book's own implementation of the exercise: a function, a class, a method
    such as ``labsupport.memory.CompressiveMemory.update``) that raise a hint while the answer
    runs in the graded test, so that an answer reaching them through an object it was given
    gets no credit either.
    """
    def decorate(body):
        @functools.wraps(body)
        def run(answer, *, label: str | None = None) -> CheckResult:
            """``label`` names the exercise in the verdict instead of the book's own label
            (the lab reuses the sections' checks under its own step names)."""
            return run_check(run, answer, Draw(), label=label)
        run.exercise, run.body, run.drawn, run.forbid = exercise, body, drawn, tuple(forbid)
        run.unavailable = tuple(unavailable)
        run.predicts = predicts or not drawn
        CHECKS[body.__name__] = run
        return run
    return decorate


def run_check(check_fn, answer, draw: Draw, *, label: str | None = None, note: str | None = None,
              unavailable: tuple[str, ...] = ()):
    """The verdict of ``check_fn``'s body on ``answer`` with inputs from ``draw``; the dotted
    names in ``unavailable`` raise a hint while the answer runs (the graded tests)."""
    student = StudentFunction(answer, unavailable=unavailable)
    _EXPECTED.clear()
    with kept_random_state():
        passed, message = _verdict(check_fn.body, student, draw)
    if note is None:
        note = PRACTICE_NOTE if check_fn.drawn else PRACTICE_NOTE_MEASURED
    return CheckResult(label or check_fn.exercise, passed, message + student.note(), draw.graded, note)


def _verdict(body, student, draw) -> tuple[bool, str]:
    try:
        return True, body(student, draw)
    except _Unanswered:
        return False, NOT_ANSWERED
    except Hint as hint:
        return False, str(hint)
    except Exception as err:                 # the check itself could not use the answer
        return False, (f"the check could not use what your function returned ({type(err).__name__}: "
                       f"{err}); compare its type and shape with what the exercise asks for")


def expect_tensor(value, shape, what: str, *, finite: bool = True) -> torch.Tensor:
    """Raise a `Hint` unless ``value`` is a floating or integer tensor of ``shape``
    (and, with ``finite``, holds no NaN or inf)."""
    if not isinstance(value, torch.Tensor):
        raise Hint(f"{what} should return a torch.Tensor, got {type(value).__name__}")
    if tuple(value.shape) != tuple(shape):
        raise Hint(f"{what} should have shape {tuple(shape)}, got {tuple(value.shape)}")
    if value.dtype == torch.bool or value.is_complex():
        raise Hint(f"{what} should hold real numbers, got dtype {value.dtype}")
    if value.dtype in (torch.float16, torch.bfloat16):
        raise Hint(f"{what} returned {value.dtype}, which keeps about 3 digits, too few to check "
                   "against: compute in the dtype of the inputs (float32 or float64)")
    if finite and not bool(torch.isfinite(value).all()):
        bad = (~torch.isfinite(value)).nonzero()[0].tolist()
        raise Hint(f"{what} holds NaN or inf (first at index {tuple(bad)}): look for a division "
                   "by zero, exp() of a large number, or a softmax over a row with no allowed entry")
    return value


def expect_number(value, wanted: str = "a number") -> float | int:
    """``value`` as a Python number: ints, floats, NumPy scalars and one-element tensors
    count. Raise a `Hint` ("return <wanted>, got ...") for anything else, a bool, NaN or inf."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise Hint(f"return {wanted}, got {type(value).__name__}")
    if not math.isfinite(value):
        raise Hint(f"your function returned {value}, not {wanted}: look for a division by zero "
                   "or an overflow")
    return value.item() if isinstance(value, np.generic) else value


def expect_sequence(value, what: str, wanted: str) -> list:
    """``value`` (a list, tuple, array or 1-d tensor) as a list; raise a `Hint` otherwise."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 1:
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    shape = f" of shape {tuple(value.shape)}" if isinstance(value, (torch.Tensor, np.ndarray)) else ""
    raise Hint(f"{what} should return {wanted}, got {type(value).__name__}{shape}")


def close(a, b, tol: float = 1e-6) -> bool:
    """``a`` (the answer) equals ``b`` (a float64 reference) within ``tol``, relaxed to the
    precision of a lower-precision answer (float32 keeps about 7 digits)."""
    if not (isinstance(a, torch.Tensor) and a.shape == b.shape) or a.dtype == torch.bool:
        return False
    if a.is_floating_point():
        tol = max(tol, 100 * torch.finfo(a.dtype).eps)
    return torch.allclose(a.double(), b.double(), atol=tol, rtol=tol)


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


# --- comparing an answer with the reference on several inputs ---------------------------------

@dataclass(frozen=True)
class Case:
    """One input of a check: positional and keyword arguments, and how a hint names them."""
    args: tuple
    text: str                                   # e.g. "q (2, 3, 5, 8), k (2, 3, 7, 8)"
    kwargs: dict = field(default_factory=dict)

    def __call__(self, fn):
        """``fn`` (a reference, or a mistake) on this case's arguments."""
        return fn(*self.args, **self.kwargs)


def shapes(**tensors) -> str:
    """``q (2, 3, 5, 8), k (2, 3, 7, 8)``: tensors by shape, anything else by value."""
    return ", ".join(f"{name} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else f"{name}={t!r}"
                     for name, t in tensors.items())


def same_number(a, b) -> bool:
    """Two counts or sizes agree (to 1e-9 of their size: floats from a formula count too)."""
    return isinstance(a, numbers.Real) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def apart(got: float, want: float, digits: int = 6) -> tuple[str, str]:
    """``got`` and ``want`` printed with the fewest significant digits (at least ``digits``)
    that tell them apart, so that a hint never shows two equal numbers.

    >>> apart(-0.0469906977, -0.0469907123)
    ('-0.04699070', '-0.04699071')
    """
    if not (math.isfinite(got) and math.isfinite(want)):
        return f"{got:.{digits}g}", f"{want:.{digits}g}"
    for n in range(digits, 18):
        if f"{got:.{n}g}" != f"{want:.{n}g}":
            return _trimmed(f"{got:#.{n}g}", f"{want:#.{n}g}")               # as many digits each
    return repr(got), repr(want)


def _trimmed(a: str, b: str) -> tuple[str, str]:
    """Two numbers of as many digits, less the trailing zeros (and point) both end with."""
    (ma, _, ea), (mb, _, eb) = a.partition("e"), b.partition("e")
    while ma.endswith("0") and mb.endswith("0") and "." in ma and "." in mb:
        ma, mb = ma[:-1], mb[:-1]
    if ma.endswith(".") and mb.endswith("."):
        ma, mb = ma[:-1], mb[:-1]
    return ma + ("e" + ea if ea else ""), mb + ("e" + eb if eb else "")


def how_far(got, want) -> str:
    """How a number misses the expected one, in words and without the expected value: ``about
    12% too large``, ``about 3.2 times too small``, ``of the opposite sign``, ``not zero``.

    >>> how_far(0.56, 0.5), how_far(-2.0, 1.0), how_far(1024 * 5, 5)
    ('about 12% too large', 'of the opposite sign', '1024 times too large')
    """
    got, want = float(got), float(want)
    if not (math.isfinite(got) and math.isfinite(want)):
        return "not a finite number" if not math.isfinite(got) else "finite where it should not be"
    if want == 0:
        return "not zero" if got != 0 else "equal"
    if got == 0:
        return "zero where it should not be"
    if (got > 0) != (want > 0):
        return "of the opposite sign"
    ratio = got / want
    if ratio == 2.0 or ratio == 0.5:
        return "twice what it should be" if ratio == 2.0 else "half what it should be"
    if ratio >= 4 and ratio.is_integer():
        return f"{ratio:g} times too large"
    if 1 / ratio >= 4 and (1 / ratio).is_integer():
        return f"{1 / ratio:g} times too small"
    if ratio >= 1.5:
        return f"about {ratio:.2g} times too large"
    if ratio <= 1 / 1.5:
        return f"about {1 / ratio:.2g} times too small"
    percent = 100 * abs(ratio - 1)
    return f"about {percent:.2g}% too {'large' if ratio > 1 else 'small'}"


def off_by(got, want, allowed: float | None = None) -> str:
    """``yours is about 12% too large (the check allows 1e-06)``: how the answer misses, without
    the expected value (records it for the tests, `expect`)."""
    expect(want)
    limit = f" (the check allows {allowed:.2g})" if allowed is not None else ""
    return f"yours is {how_far(got, want)}{limit}"


def times(ratio: float, tol: float) -> str:
    """``ratio`` with the decimals (2 at least) that show it outside ``1 +- tol``: 1.0504 for a
    tolerance of 5%, never a 1.05 that reads as inside it.

    >>> times(1.0504, 0.05), times(1.2, 0.05)
    ('1.0504', '1.20')
    """
    for decimals in range(2, 9):
        text = f"{ratio:.{decimals}f}"
        if abs(float(text) - 1) > tol * (1 + 1e-9):                   # 1.05 - 1 is 0.05000000000000004
            return text
    return f"{ratio:.10g}"


def beyond(got: float, want: float, tol: float) -> tuple[str, str]:
    """``got`` and ``want`` with the decimals (2 at least) whose printed gap exceeds ``tol``,
    as the check found: never -0.39 and -0.49 for a gap that is more than 0.1."""
    for decimals in range(2, 9):
        a, b = f"{got:.{decimals}f}", f"{want:.{decimals}f}"
        if abs(float(a) - float(b)) > tol * (1 + 1e-9):
            return a, b
    return repr(got), repr(want)


def _precision_note(got: torch.Tensor, want: torch.Tensor) -> str:
    """Why a lower-precision answer to float64 inputs may miss, or ''."""
    if want.dtype != torch.float64 or not got.is_floating_point() or got.dtype == torch.float64:
        return ""
    name = str(got.dtype).removeprefix("torch.")
    return (f"; your result is {name} although the inputs were float64: {name} keeps about "
            f"{round(-math.log10(torch.finfo(got.dtype).eps))} significant digits, so compute in the "
            f"inputs' dtype (no .float(), no dtype=torch.{name})")


def differ(got, want, tol: float = 1e-6) -> str:
    """Where ``got`` first differs from ``want`` and how, without the expected value: ``at
    index (0, 1) yours is about 12% too large``; a lower-precision result for float64 inputs is
    named. Where nothing differs by more than ``tol`` (a stricter comparison decided), where the
    largest difference is."""
    if not isinstance(want, torch.Tensor):
        return off_by(got, want)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return f"expected shape {tuple(want.shape)}, got {_short(got)}"
    if got.is_floating_point():
        tol = max(tol, 100 * torch.finfo(got.dtype).eps)
    a, b = got.double(), want.double()
    off = ~torch.isclose(a, b, rtol=tol, atol=tol, equal_nan=True)
    if off.any():
        index = tuple(off.nonzero()[0].tolist())
        count = int(off.sum())
        where = f"at index {index}" + (f" (and {count - 1} more)" if count > 1 else "")
        text = f"{where} yours is {how_far(a[index].item(), b[index].item())}"
    else:
        gap = (a - b).abs().nan_to_num(nan=0.0)
        if not gap.any():
            return "they agree"
        index = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
        text = (f"the largest difference is at index {index}: yours is "
                f"{how_far(a[index].item(), b[index].item())}")
    return text + _precision_note(got, want)


def recognise(outputs, cases, mistakes, same=None) -> list[str]:
    """The hints of the mistakes whose output equals the answer's on every case.

    ``mistakes`` are ``(hint, function)`` pairs; the function takes a case's arguments
    and returns what that mistake gives (a mistake that cannot run on a case is not it).
    """
    same = same or close
    named = []
    for hint, mistaken in mistakes:
        try:
            matches = all(same(out, case(mistaken)) for out, case in zip(outputs, cases))
        except Exception:
            matches = False
        if matches and hint not in named:
            named.append(hint)
    return named


def judge(outputs, cases, reference, *, compared: str, same=None, mistakes=(), properties=(),
          show=None) -> None:
    """Raise a `Hint` unless every output equals ``reference`` on its case.

    The references are computed here, after the student's function ran on every case.
    A mistake names itself only when the outputs are its outputs on every case
    (`recognise`); a property (``function(output, case) -> hint or None``) speaks next, on
    the cases that differ; otherwise the hint says what was compared and where the
    answer first differs (``show(got, want)``, by default `differ`).
    """
    same, show = same or close, show or differ
    wants = [case(reference) for case in cases]
    expect(*wants)
    wrong = [i for i, (out, want) in enumerate(zip(outputs, wants)) if not same(out, want)]
    if not wrong:
        return
    named = recognise(outputs, cases, mistakes, same)
    if len(named) == 1:
        raise Hint(named[0])
    if named:
        raise Hint("your answer gives what each of these mistakes gives: "
                   + "; or ".join(f"({n}) {hint}" for n, hint in enumerate(named, start=1)))
    for prop in properties:
        for i in wrong:
            hint = prop(outputs[i], cases[i])
            if hint:
                raise Hint(hint)
    first = wrong[0]
    text = (f"compared with {compared} on {len(cases)} inputs; on {cases[first].text}: "
            f"{show(outputs[first], wants[first])}")
    agree = [cases[i].text for i in range(len(cases)) if i not in wrong]
    if agree:
        more = f" (and on {len(agree) - 1} more)" if len(agree) > 1 else ""
        text += f"; it agrees on {agree[0]}{more}: look at what differs between those inputs"
    raise Hint(text)
