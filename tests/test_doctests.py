"""Every ``>>>`` example in labsupport's docstrings runs (as einops runs its documented
examples): each module's examples pass, and every ``>>>`` line in a module's source is an
example that doctest found and ran (none sits where doctest does not look, such as inside
a function's body or in a comment)."""
import doctest
import importlib
import pkgutil
import re

import pytest

import labsupport

MODULES = sorted(m.name for m in pkgutil.walk_packages(labsupport.__path__, "labsupport."))
PROMPT = re.compile(r"^\s*>>> ", flags=re.M)


def run_examples(module) -> tuple[int, int, str]:
    """(examples found, failures, doctest's report) for the docstrings defined in ``module``."""
    tests = doctest.DocTestFinder().find(module)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    return sum(len(t.examples) for t in tests), runner.failures, "".join(report)


@pytest.mark.parametrize("name", MODULES)
def test_every_documented_example_runs(name):
    module = importlib.import_module(name)
    found, failures, report = run_examples(module)
    assert failures == 0, report
    written = len(PROMPT.findall(open(module.__file__, encoding="utf-8").read()))
    assert found == written, f"{name}: {written} '>>>' lines in the source, doctest found {found} examples"


def test_the_runner_reports_a_wrong_example():
    """The check above can fail: an example whose output is wrong is counted as a failure."""
    wrong = type(labsupport)("wrong")
    exec('def f():\n    """\n    >>> 1 + 1\n    3\n    """\n', wrong.__dict__)
    wrong.f.__module__ = "wrong"
    found, failures, report = run_examples(wrong)
    assert (found, failures) == (1, 1) and "Expected:\n    3\nGot:\n    2" in report
