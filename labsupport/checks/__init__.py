"""The self-check framework for the book's exercises: a check returns a verdict that prints as
``[PASS] ...`` or ``[TRY AGAIN] ...: <a hint>``.

Every check runs the student's function on several inputs (fixed ones in the notebook:
practice) and never raises. ``checks.grade(name, fn)`` is the graded test of the nbgrader
course: new inputs drawn when it runs, and no credit for calling the book's own code. The
checks of each exercise live with their section (``labsupport.sections.<section>.checks``),
which registers them here (`CHECKS`) when imported.
"""
from .core import CHECKS, NOT_ANSWERED, CheckResult, Draw, Hint, check, yours_or_reference
from .grading import forbidden_names, forbidden_uses, grade, graded

__all__ = ["CHECKS", "NOT_ANSWERED", "CheckResult", "Draw", "Hint", "check", "yours_or_reference",
           "grade", "graded", "forbidden_names", "forbidden_uses"]
