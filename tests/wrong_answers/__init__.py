"""Answers to every exercise, as a student would write them, keyed by the check's name: one
module per section (``self_attention.py`` for 12.1's exercises, ...), merged here.

Each exercise has right answers in other styles than the book's, typical wrong answers (at
least five: the mistakes a student makes, each named by its hint; a size typed in as a number;
a lookup table of the practice inputs) and answers that call the book's own implementation or
read the check's frames. ``kind`` says what each must get:

- ``right``: passes the practice check and the graded test (any seed);
- ``wrong``: fails the practice check with a hint containing ``says``, and the graded test;
- ``replay``: passes the practice check (it replays its inputs) and fails the graded test;
- ``forbidden``: gets 0 from the graded test, whose note contains ``says``.

tests/test_checks.py runs every answer through its check, and tests/test_hints.py checks that no
hint gives the answer away; tests/test_grading.py writes the first answer of a kind into the
exercise of an nbgrader submission (the body replaces the stub, so the ``def`` line must be the
exercise's own). A source may use ``torch``, which every notebook imports; anything else it
imports itself. A new exercise needs entries here: both tests name the check until it has them.
"""
from __future__ import annotations

import ast

from . import efficient_attention, lab, long_sequences, positional_encodings, self_attention, transformer
from .answers import KINDS, Answer

__all__ = ["ANSWERS", "TAKES_TENSORS", "RETURNS_TENSOR", "RETURNS_NUMBER", "KINDS", "Answer", "signature",
           "missing", "first", "of_kind"]

SECTIONS = (self_attention, transformer, positional_encodings, long_sequences, efficient_attention, lab)
ANSWERS: dict[str, list[Answer]] = {}
TAKES_TENSORS: list[str] = []       # checks of a function of tensors
RETURNS_TENSOR: list[str] = []      # checks of a function that returns a tensor
RETURNS_NUMBER: list[str] = []      # checks of a function that returns a number
for _section in SECTIONS:
    ANSWERS.update(_section.ANSWERS)
    TAKES_TENSORS += _section.TAKES_TENSORS
    RETURNS_TENSOR += _section.RETURNS_TENSOR
    RETURNS_NUMBER += _section.RETURNS_NUMBER


def signature(source: str) -> str:
    """``name(arguments)`` of the first function a cell defines, as written."""
    func = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    return f"{func.name}({ast.unparse(func.args)})"


def missing(check: str, kind: str = "wrong") -> str:
    return (f"no {kind} answer for checks.{check} in tests/wrong_answers/<section>.py: add one (the "
            "exercise's function, with its def line) and what its check says")


def first(check: str, kind: str) -> Answer:
    """The first answer of ``kind`` for ``check`` (the one the grading test submits)."""
    return next(a for a in ANSWERS.get(check, ()) if a.kind == kind)


def of_kind(kind: str) -> list[tuple[str, int, Answer]]:
    """Every ``(check, index, answer)`` of ``kind``."""
    return [(check, i, a) for check, answers in ANSWERS.items() for i, a in enumerate(answers)
            if a.kind == kind]


