"""The kinds of answer and their constructors (tests/wrong_answers/__init__.py says what each must get).

Each exercise has right answers in other styles than the book's, typical wrong answers
(the mistakes a strict instructor tries: each mistake class, a size or an argument typed in
as a number, a lookup table of the practice inputs) and answers that call the book's own
implementation or read the check's frames. ``kind`` says what each must get:

- ``right``: passes the practice check and the graded test (any seed);
- ``wrong``: fails the practice check with a hint containing ``says``, and the graded test;
- ``replay``: passes the practice check (it replays its inputs) and fails the graded test;
- ``forbidden``: gets 0 from the graded test, whose note contains ``says``.

tests/test_checks.py runs every answer through its check; tests/test_grading.py writes the
first answer of a kind into the exercise of an nbgrader submission (the body replaces the
stub, so the ``def`` line must be the exercise's own). A source may use ``torch``, which
every notebook imports; anything else it imports itself. A new exercise needs
entries here: both tests name the check until it has them.
"""
from __future__ import annotations

import ast
import linecache
import textwrap
from dataclasses import dataclass

KINDS = ("right", "wrong", "replay", "forbidden")


@dataclass(frozen=True)
class Answer:
    source: str        # a whole function, with the exercise's def line
    kind: str
    says: str = ""     # wrong: a fragment of its hint; forbidden: of the graded note

    def function(self, label: str = "answer", namespace: dict | None = None):
        """The function the source defines, its source readable like a notebook cell's
        (``namespace``: the notebook's other globals)."""
        import torch
        filename = f"<{label} {self.name} {abs(hash(self.source))}>"      # one per source
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace = {**(namespace or {}), "torch": torch, "__name__": "__main__"}
        exec(compile(self.source, filename, "exec"), namespace)
        return namespace[self.name]

    @property
    def _def(self) -> ast.FunctionDef:
        return ast.parse(self.source).body[0]

    @property
    def name(self) -> str:
        return self._def.name

    @property
    def body(self) -> str:
        """The function's body, dedented: what a student would write in place of the stub."""
        lines = self.source.splitlines()
        return textwrap.dedent("\n".join(lines[self._def.body[0].lineno - 1:]))


def _a(kind: str, source: str, says: str = "") -> Answer:
    assert kind in KINDS, kind
    return Answer(textwrap.dedent(source).strip() + "\n", kind, says)


def right(source):
    return _a("right", source)


def wrong(source, says):
    return _a("wrong", source, says)


def replay(source):
    return _a("replay", source)


def forbidden(source, says):
    return _a("forbidden", source, says)

