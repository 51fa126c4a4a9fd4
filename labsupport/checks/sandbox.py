"""Running a student's function safely inside a check: on deep copies of its arguments (and
saying which ones it changed in place), within a time limit (a signal timer, where the platform
has one), with a crash, a ``None`` or a timeout turned into a `Hint` for the student.

`labsupport.checks.core` (the check framework) calls the student's code only through
`StudentFunction`; what an answer may import or call is checked before it runs, by
`labsupport.checks.grading`.
"""
from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import signal
import threading
import time

import numpy as np
import torch

TIME_LIMIT_S = 10.0        # per call of the student's function; the book's answers take milliseconds


class Hint(Exception):
    """Raised inside a check to tell the student what is wrong and where to look."""


class _Unanswered(Exception):
    """The student's function still raises NotImplementedError."""


class StudentFunction:
    """The student's function as a check calls it.

    Each call gets deep copies of the arguments (the check's own tensors stay intact for
    its reference computations), runs at most `TIME_LIMIT_S` seconds where the platform
    allows an alarm (the main thread on Linux and macOS), and raises a `Hint` when the
    function raises, returns None or runs out of time. ``within`` is a context manager
    entered around the student's code only (e.g. `labsupport.checks.efficient.Allocations`), so
    the copies are not counted in it. Arguments the function changed are remembered for
    `note`.
    """

    def __init__(self, fn, *, unavailable: tuple[str, ...] = ()):
        self.fn = fn
        self.unavailable = tuple(unavailable)  # dotted names made unavailable while fn runs
        self.changed: list[str] = []

    def __call__(self, *args, within=None, case: str | None = None, **kwargs):
        """``fn(*args, **kwargs)`` on copies; ``case`` (the inputs in words, such as
        ``q (2, 3, 5, 8)``) is named in a hint about a crash or a timeout."""
        if not callable(self.fn):
            raise Hint(f"pass your function itself to the check, got {type(self.fn).__name__} "
                       f"{_short(self.fn)}")
        copies, kw_copies = _copy((args, kwargs))
        where = f"on {case}, " if case else ""
        try:
            with _time_limit(TIME_LIMIT_S), without(self.unavailable), within or contextlib.nullcontext():
                result = self.fn(*copies, **kw_copies)
        except NotImplementedError:
            raise _Unanswered from None
        except _OutOfTime:
            raise Hint(f"{where}your function ran longer than {TIME_LIMIT_S:g} s on small inputs (the "
                       "book's answer takes milliseconds): look for a loop that never ends, or one over "
                       "every element that a tensor operation could replace") from None
        except (Hint, _Unanswered):
            raise
        except Exception as err:              # the student's code failed
            raise Hint(f"{where}your code raised {type(err).__name__}: {err}") from None
        self._remember_changes(args, copies)
        if result is None:
            raise Hint("your function returned None: end it with `return <the result>`")
        return result

    def on(self, case, *, within=None):
        """The function on a `Case`'s arguments, naming the case in a crash's hint."""
        return self(*case.args, within=within, case=case.text, **case.kwargs)

    def _remember_changes(self, originals, copies) -> None:
        names = _parameter_names(self.fn, len(originals))
        for name, before, after in zip(names, originals, copies):
            if not _same(before, after) and name not in self.changed:
                self.changed.append(name)

    def note(self) -> str:
        """'' or a sentence that names the arguments the function changed in place."""
        if not self.changed:
            return ""
        names = ", ".join(self.changed)
        return (f" (note: your function changed its input {names} in place; the check gave it a "
                "copy, but in your notebook the caller's data would change too: write "
                "`x = x + ...` rather than `x += ...`, and avoid in-place operations such as "
                "`.mul_()` or `inplace=True`)")


class _OutOfTime(Exception):
    pass


def _owner(dotted: str):
    """(object, attribute) that ``dotted`` names: the longest importable module prefix, then
    attributes (``labsupport.memory.CompressiveMemory.update``); None when it cannot be found."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:-1]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return (obj, parts[-1]) if hasattr(obj, parts[-1]) else None
    return None


@contextlib.contextmanager
def without(names: tuple[str, ...]):
    """Make each dotted name (a function, a class, a method: the book's or PyTorch's own version
    of what an exercise asks for) raise a `Hint` while the block runs, then put it back. The
    graded tests run the student's function inside it; a name that does not exist is skipped."""
    saved = []
    try:
        for dotted in names:
            found = _owner(dotted)
            if found is None:
                continue
            obj, attr = found
            original = obj.__dict__[attr] if attr in getattr(obj, "__dict__", {}) else getattr(obj, attr)

            def refuse(*args, _name=dotted, **kwargs):
                raise Hint(f"your function calls {_name}, the book's (or PyTorch's) own version of what "
                           "this exercise asks you to write; the graded test runs without it: write "
                           "the computation yourself")
            setattr(obj, attr, staticmethod(refuse) if isinstance(obj, type) else refuse)
            saved.append((obj, attr, original))
        yield
    finally:
        for obj, attr, original in reversed(saved):
            setattr(obj, attr, original)


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise `_OutOfTime` in the main thread after ``seconds``; elsewhere (Windows, other
    threads) no limit. A timer already set by someone else is restored afterwards."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def out_of_time(signum, frame):
        raise _OutOfTime

    previous_handler = signal.signal(signal.SIGALRM, out_of_time)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay:                     # give the outer timer back what it had left
            left = max(previous_delay - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, previous_interval)


def _copy(args: tuple) -> tuple:
    """Deep copies of ``(positional, keyword)`` arguments, in one go so that shared objects
    stay shared."""
    try:
        return copy.deepcopy(args)
    except Exception:                          # e.g. a non-leaf tensor: copy what can be copied
        positional, keyword = args
        clone = lambda a: a.detach().clone() if isinstance(a, torch.Tensor) else a   # noqa: E731
        return tuple(map(clone, positional)), {k: clone(a) for k, a in keyword.items()}


def _same(a, b) -> bool:
    """Whether the student's copy ``b`` still equals the original ``a`` (NaN equals NaN)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and bool(torch.isclose(a.detach(), b.detach(), rtol=0, atol=0, equal_nan=True).all()))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, torch.nn.Module):
        return _same(a.state_dict(), b.state_dict())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    return True                                # numbers, dtypes, functions: cannot be changed


def _parameter_names(fn, n: int) -> list[str]:
    """The names of the first ``n`` positional parameters of ``fn``, else 'argument i'."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [f"`{params[i]}`" if i < len(params) else f"argument {i + 1}" for i in range(n)]


def _short(value, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."
