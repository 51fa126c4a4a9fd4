"""Every self-check passes right answers in several styles, gives each typical mistake the
hint that names it, fails a replay of its practice inputs when graded, and grades 0 an
answer that calls the book's own implementation (tests/wrong_answers.py holds them all)."""
import functools
import os

import pytest
import torch

from labsupport import checks
from labsupport.checks import NOT_ANSWERED
from labsupport.checks.core import PRACTICE_NOTE, Case, Draw, judge
from labsupport.sections import (  # noqa: F401  (importing a section registers its checks)
    efficient_attention,
    lab,
    long_sequences,
    positional_encodings,
    self_attention,
    transformer,
)
from wrong_answers import ANSWERS, RETURNS_NUMBER, RETURNS_TENSOR, TAKES_TENSORS, first, missing, of_kind

GRADED_SEEDS = (1, 2, 3)


def words(text: str) -> str:
    return " ".join(text.split())


def expect(result, passed, fragment=""):
    assert result.passed is passed, str(result)
    assert words(fragment) in words(result.message), str(result)


def unanswered(*args, **kwargs):
    raise NotImplementedError


def crashes(*args, **kwargs):
    raise IndexError("boom")


RIGHT = {name: first(name, "right").function() for name in ANSWERS if name in checks.CHECKS}


# --- the answers of tests/wrong_answers.py ----------------------------------------------------

@pytest.mark.parametrize("name", sorted(checks.CHECKS))
def test_every_check_has_right_wrong_and_forbidden_answers(name):
    for kind in ("right", "wrong", "forbidden"):
        assert any(a.kind == kind for a in ANSWERS.get(name, ())), missing(name, kind)
    if checks.CHECKS[name].drawn:
        assert sum(a.kind == "wrong" for a in ANSWERS[name]) >= 3, missing(name, "third wrong")


def _ids(rows):
    return [f"{name}-{i}" for name, i, _ in rows]


@pytest.mark.parametrize("name,index,answer", of_kind("right"), ids=_ids(of_kind("right")))
def test_a_right_answer_in_another_style_passes_practice_and_graded(name, index, answer):
    fn = answer.function()
    expect(checks.CHECKS[name](fn), True)
    for seed in GRADED_SEEDS:
        expect(checks.graded(name, fn, seed=seed), True)


def notebook_globals() -> dict:
    """Every public name of labsupport, as notebooks that import them all would hold them."""
    import importlib
    import pkgutil

    import labsupport
    found = {"checks": checks}
    for module in pkgutil.walk_packages(labsupport.__path__, "labsupport."):
        loaded = importlib.import_module(module.name)
        found.update({n: getattr(loaded, n) for n in getattr(loaded, "__all__", ()) if hasattr(loaded, n)})
    return found


@pytest.mark.parametrize("name,index,answer", of_kind("right"), ids=_ids(of_kind("right")))
def test_a_right_answer_in_a_notebook_full_of_library_names_uses_none_of_them(name, index, answer):
    fn = answer.function(namespace=notebook_globals())
    assert checks.forbidden_uses(fn, checks.forbidden_names(checks.CHECKS[name])) == []


@pytest.mark.parametrize("name,index,answer", of_kind("wrong"), ids=_ids(of_kind("wrong")))
def test_a_wrong_answer_gets_the_hint_for_what_it_did(name, index, answer):
    fn = answer.function()
    expect(checks.CHECKS[name](fn), False, answer.says)
    for seed in GRADED_SEEDS[:1]:
        assert not checks.graded(name, fn, seed=seed).passed


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_first_wrong_answer_gets_its_hint_on_twenty_drawn_seeds(name):
    """What tests/test_grading.py asserts of a submission, on seeds it could draw."""
    answer = first(name, "wrong")
    fn = answer.function()
    for seed in range(1000, 1020):
        expect(checks.graded(name, fn, seed=seed), False, answer.says)


@pytest.mark.parametrize("name,index,answer", of_kind("replay"), ids=_ids(of_kind("replay")))
def test_an_answer_that_replays_the_practice_inputs_fails_when_graded(name, index, answer):
    fn = answer.function()
    expect(checks.CHECKS[name](fn), True)
    for seed in GRADED_SEEDS:
        assert not checks.graded(name, fn, seed=seed).passed


@pytest.mark.parametrize("name,index,answer", of_kind("forbidden"), ids=_ids(of_kind("forbidden")))
def test_an_answer_that_uses_the_books_implementation_scores_zero_with_a_note(name, index, answer):
    result = checks.graded(name, answer.function(), seed=1)
    expect(result, False, answer.says)
    expect(result, False, "scores 0 whatever it returns")


@pytest.mark.parametrize("name", sorted(checks.CHECKS))
def test_every_check_explains_unanswered_and_crashing_code(name):
    expect(checks.CHECKS[name](unanswered), False, NOT_ANSWERED)
    expect(checks.graded(name, unanswered, seed=1), False, NOT_ANSWERED)
    expect(checks.CHECKS[name](crashes), False, "raised IndexError: boom")


# --- hints that point at what differs -----------------------------------------------------------

def test_a_hint_that_names_no_mistake_says_what_was_compared_and_where_it_differs():
    result = checks.CHECKS["attention_weights"](lambda q, k: (1.1 * q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1))
    expect(result, False, "compared with the scaled attention weights over the keys on 4 inputs; on q (2, 3,")
    expect(result, False, "at index (0, 0, 0, 0) (and 83 more) yours is about")


def test_a_size_typed_in_is_named_by_the_inputs_on_which_the_answer_agrees():
    def typed_width(d_model, n_heads, d_ff):                  # d_ff typed in as the first case's
        d = d_model
        return 4 * (d * d + d) + 2 * d * 256 + 256 + d + 4 * d
    result = checks.CHECKS["block_parameters"](typed_width)
    expect(result, False, "it agrees on block_parameters(64, 4, 256)")
    expect(result, False, "look at what differs between those inputs")


def test_judge_names_a_mistake_only_when_it_matches_every_input():
    cases = [Case((n,), f"n={n}") for n in (1, 2, 3)]
    double, plus_one = ("doubled", lambda n: 2 * n), ("one more", lambda n: n + 1)
    same = lambda a, b: a == b                                                  # noqa: E731
    with pytest.raises(checks.Hint, match="^doubled$"):
        judge([2, 4, 6], cases, lambda n: n, compared="n", same=same, mistakes=[double, plus_one])
    with pytest.raises(checks.Hint, match=r"compared with n on 3 inputs; on n=1: yours is twice what it should be; it agrees on n=3"):
        judge([2, 3, 3], cases, lambda n: n * 1, compared="n", same=same, mistakes=[double])
    judge([1, 2, 3], cases, lambda n: n, compared="n", same=same, mistakes=[double])


def test_a_hint_that_fits_two_mistakes_names_both():
    cases = [Case((1,), "n=1")]
    with pytest.raises(checks.Hint, match=r"each of these mistakes gives: \(1\) doubled; or \(2\) one more"):
        judge([2], cases, lambda n: n, compared="n", same=lambda a, b: a == b,
              mistakes=[("doubled", lambda n: 2 * n), ("one more", lambda n: n + 1)])


def test_forgetting_the_heads_and_counting_numbers_get_their_own_hints():
    """H = 4 and 4 bytes a float are told apart: the sizes vary."""
    expect(checks.CHECKS["step_peak"](lambda B, H, N, n: (n + 2) * B * N * N * 4), False, "number of heads")
    expect(checks.CHECKS["step_peak"](lambda B, H, N, n: (n + 2) * B * H * N * N), False, "4 bytes")


def test_a_wrong_softmax_axis_gets_its_own_hint():
    def wrong_axis(q, k, v):
        L = q.shape[-2]
        s = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~torch.ones(L, L, dtype=bool).tril(), -1e9)
        return s.softmax(-2) @ v
    result = checks.CHECKS["causal_attention"](wrong_axis)
    expect(result, False, "runs over the queries")
    assert "-inf before the softmax" not in result.message


# --- the practice check and the graded test -------------------------------------------------------

def test_the_practice_check_is_the_same_every_run_and_says_it_is_practice():
    result = checks.CHECKS["attention_weights"](RIGHT["attention_weights"])
    assert str(result) == str(checks.CHECKS["attention_weights"](RIGHT["attention_weights"]))
    assert words(PRACTICE_NOTE) in words(str(result)) and str(result).startswith("[PASS]")


def test_graded_draws_are_reproducible_by_their_seed_and_differ_from_practice():
    texts = [case.text for case in checks.CHECKS["causal_attention"].body.__globals__["_causal_cases"](Draw(7, graded=True))]
    again = [case.text for case in checks.CHECKS["causal_attention"].body.__globals__["_causal_cases"](Draw(7, graded=True))]
    other = [case.text for case in checks.CHECKS["causal_attention"].body.__globals__["_causal_cases"](Draw(8, graded=True))]
    practice = [case.text for case in checks.CHECKS["causal_attention"].body.__globals__["_causal_cases"](Draw())]
    assert texts == again and texts != other and texts != practice


def test_grade_prints_a_pass_with_its_seed_and_raises_on_a_failure(capsys, monkeypatch):
    checks.grade("causal_tiled_attention", RIGHT["causal_tiled_attention"], seed=42)
    printed = capsys.readouterr().out
    assert printed.startswith("[GRADED: PASS] 12.4 exercise 1") and "seed 42" in words(printed)
    with pytest.raises(AssertionError, match=r"(?s)^\[GRADED: 0 POINTS\] Lab step 1: x: .*entirely above the diagonal"):
        checks.grade("causal_tiled_attention", first("causal_tiled_attention", "wrong").function(),
                     label="Lab step 1: x")
    monkeypatch.setenv("LABSUPPORT_GRADE_SEED", "1234")
    with pytest.raises(AssertionError, match="seed 1234"):
        checks.grade("causal_tiled_attention", first("causal_tiled_attention", "wrong").function())
    with pytest.raises(ValueError, match="no check named 'nope'; expected one of"):
        checks.grade("nope", RIGHT["causal_tiled_attention"])


def test_a_seed_is_drawn_from_the_operating_system_when_none_is_set(monkeypatch):
    from labsupport.checks.grading import draw_seed
    monkeypatch.delenv("LABSUPPORT_GRADE_SEED", raising=False)
    assert len({draw_seed() for _ in range(5)}) > 1


# --- what the graded test reads in an answer ----------------------------------------------------------

def _cell(source: str, name: str, **namespace):
    """A function written in a notebook cell: module __main__, its cell's source readable."""
    import linecache
    filename = f"<cell {name} {len(linecache.cache)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace.setdefault("__name__", "__main__")
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


FORBIDDEN = checks.forbidden_names(checks.CHECKS["attention_weights"])


def test_a_plain_answer_uses_nothing_forbidden():
    import torch.nn.functional as F
    fn = _cell("def f(q, k):\n    return F.softmax(q @ k.mT / q.shape[-1] ** 0.5, -1)\n", "f", F=F)
    assert checks.forbidden_uses(fn, FORBIDDEN) == []


def test_a_local_variable_named_like_a_library_global_is_not_the_library():
    from labsupport.display import table
    cell = ("def f(length, d):\n    table = torch.zeros(length, d)\n    checks = [table for table in [table]]\n"
            "    return table\n")
    assert checks.forbidden_uses(_cell(cell, "f", table=table, torch=torch, checks=checks), FORBIDDEN) == []
    global_use = _cell("def f(length, d):\n    return table(length)\n", "f", table=table)
    assert checks.forbidden_uses(global_use, FORBIDDEN) == ["`table` (labsupport.display.table)"]


def test_the_reader_finds_imports_aliases_helpers_and_frame_tricks():
    from labsupport.attention import naive_attention
    cell = "from labsupport.attention import naive_attention\n\ndef f(q, k):\n    return q\n"
    assert "`from labsupport.attention import naive_attention`" in checks.forbidden_uses(_cell(cell, "f"), FORBIDDEN)
    alias = _cell("def f(q, k):\n    return mine(q, k, k)\n", "f", mine=naive_attention)
    assert checks.forbidden_uses(alias, FORBIDDEN) == ["`mine` (labsupport.attention.exact.naive_attention)"]
    helper = _cell("def helper(q):\n    return lib.naive_attention(q, q, q)\n\ndef f(q, k):\n    return helper(q)\n",
                   "f", lib=__import__("labsupport.attention").attention)
    assert any("labsupport.attention" in use for use in checks.forbidden_uses(helper, FORBIDDEN))
    through_getattr = _cell("def f(q, k):\n    return getattr(lib, 'naive_attention')(q, k, k)\n", "f",
                            lib=__import__("labsupport.attention").attention)
    assert checks.forbidden_uses(through_getattr, FORBIDDEN)
    frames = _cell("def f(q, k):\n    try:\n        1 / 0\n    except Exception as e:\n"
                   "        return e.__traceback__.tb_frame.f_back.f_locals['q']\n", "f")
    assert "the attribute .f_back" in checks.forbidden_uses(frames, FORBIDDEN)
    hidden = _cell("def f(q, k):\n    return eval('q')\n", "f")
    assert checks.forbidden_uses(hidden, FORBIDDEN) == ["eval()"]
    assert checks.forbidden_uses(naive_attention, FORBIDDEN) == ["labsupport.attention.exact.naive_attention"]
    namespace = {}
    exec("def f(q, k):\n    import labsupport.attention\n    return q", namespace)   # no source to read
    assert "`labsupport.attention`" in checks.forbidden_uses(namespace["f"], FORBIDDEN)
    assert checks.forbidden_uses(functools.partial(naive_attention, is_causal=True), FORBIDDEN)


def test_what_one_exercise_forbids_another_may_use():
    import torch.nn.functional as F
    sdpa = _cell("def f(q, k, v, block):\n    return F.scaled_dot_product_attention(q, k, v)\n", "f", F=F)
    assert checks.forbidden_uses(sdpa, checks.forbidden_names(checks.CHECKS["blocked_local_attention"])) == []
    assert checks.forbidden_uses(sdpa, checks.forbidden_names(checks.CHECKS["causal_attention"]))
    profiled = _cell("def f(b, h, L, d):\n    import torch.profiler\n    return 1\n", "f")
    assert checks.forbidden_uses(profiled, checks.forbidden_names(checks.CHECKS["unit_scale"]))
    assert not checks.forbidden_uses(profiled, checks.forbidden_names(checks.CHECKS["merge_partials"]))


# --- a check is kind to the notebook -------------------------------------------------------------

def scribbles_on_its_inputs(answer):
    """A right answer that then overwrites every tensor it was given (as `x += ...`,
    `q /= sqrt(d)` or `F.elu(x, inplace=True)` do)."""
    def fn(*args, **kwargs):
        result = answer(*args, **kwargs)
        result = result.clone() if isinstance(result, torch.Tensor) else result
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a.mul_(-3.0).add_(1.0)
        return result
    return fn


@pytest.mark.parametrize("name", [n for n in TAKES_TENSORS if n in RIGHT])
def test_a_right_answer_that_edits_its_inputs_passes_with_a_note(name):
    result = checks.CHECKS[name](scribbles_on_its_inputs(RIGHT[name]))
    expect(result, True, "changed its input")
    expect(result, True, "in place")


def test_the_in_place_answers_students_write_pass():

    def layer_norm(x, weight, bias, eps=1e-5):
        x -= x.mean(-1, keepdim=True)                       # centred in place
        return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * weight + bias

    def weights_in_place(q, k):
        q /= q.shape[-1] ** 0.5
        return (q @ k.transpose(-2, -1)).softmax(-1)

    def merge(m1, l1, acc1, m2, l2, acc2):
        m = torch.maximum(m1, m2)
        f1, f2 = (m1 - m).exp(), (m2 - m).exp()
        acc1 *= f1                                          # rescaled in place
        l1 *= f1
        return m, l1 + l2 * f2, acc1 + acc2 * f2


    expect(checks.CHECKS["layer_norm"](layer_norm), True, "changed its input `x` in place")
    expect(checks.CHECKS["attention_weights"](weights_in_place), True, "changed its input `q` in place")
    expect(checks.CHECKS["merge_partials"](merge), True, "`l1`, `acc1` in place")


def draws_random_numbers(answer):
    import random

    import numpy as np

    def fn(*args, **kwargs):
        torch.randn(3), np.random.rand(), random.random()
        return answer(*args, **kwargs)
    return fn


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_check_leaves_every_global_generator_as_it_found_it(name):
    import random

    import numpy as np
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    expected = torch.rand(2), np.random.rand(2), random.random()
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    checks.CHECKS[name](draws_random_numbers(RIGHT[name]))
    checks.graded(name, draws_random_numbers(RIGHT[name]), seed=5)
    got = torch.rand(2), np.random.rand(2), random.random()
    assert torch.equal(got[0], expected[0]) and (got[1] == expected[1]).all() and got[2] == expected[2]


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_function_that_returns_none_is_told_so(name):
    expect(checks.CHECKS[name](lambda *args, **kwargs: None), False, "returned None: end it with `return")


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_something_else_than_a_function_is_named(name):
    expect(checks.CHECKS[name](None), False, "pass your function itself to the check, got NoneType")
    expect(checks.CHECKS[name](torch.ones(3)), False, "got Tensor")


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_function_that_hangs_is_stopped_with_a_hint(name, monkeypatch):
    import time

    from labsupport.checks import sandbox
    monkeypatch.setattr(sandbox, "TIME_LIMIT_S", 0.2)
    start = time.monotonic()
    expect(checks.CHECKS[name](lambda *args, **kwargs: time.sleep(30)), False, "ran longer than 0.2 s")
    assert time.monotonic() - start < 15          # stopped long before the 30 s, even on a busy machine


def test_the_time_limit_gives_an_outer_timer_back():
    import signal
    import time

    from labsupport.checks import sandbox
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with sandbox._time_limit(5.0):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0.5 < left <= 1.0                       # the outer timer still runs, not reset to 5 s
        time.sleep(1.2)
        assert fired == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


NUMBER_CHECKS = [n for n in RETURNS_NUMBER if n in RIGHT]


@pytest.mark.parametrize("name", NUMBER_CHECKS)
def test_numpy_and_tensor_numbers_are_numbers(name):
    import numpy as np
    right = RIGHT[name]
    expect(checks.CHECKS[name](lambda *a: np.int64(right(*a))), True)
    expect(checks.CHECKS[name](lambda *a: float(right(*a))), True)
    expect(checks.CHECKS[name](lambda *a: torch.tensor(right(*a))), True)
    expect(checks.CHECKS[name](lambda *a: float("nan")), False, "returned nan")
    expect(checks.CHECKS[name](lambda *a: True), False, "got bool")


TENSOR_CHECKS = [n for n in RETURNS_TENSOR if n in RIGHT]


@pytest.mark.parametrize("name", TENSOR_CHECKS)
def test_a_right_float32_answer_passes(name):
    right = RIGHT[name]
    expect(checks.CHECKS[name](lambda *a, **k: right(*a, **k).float()), True)


@pytest.mark.parametrize("name", [n for n in TENSOR_CHECKS if n != "causal_attention"])
def test_a_nan_answer_is_told_where_the_nan_is(name):
    right = RIGHT[name]

    def with_nan(*args, **kwargs):
        out = right(*args, **kwargs).contiguous().clone()
        out.view(-1)[-1] = float("nan")
        return out
    expect(checks.CHECKS[name](with_nan), False, "holds NaN or inf (first at index")


@pytest.mark.parametrize("name", TENSOR_CHECKS)
def test_a_half_precision_answer_is_told_to_keep_the_dtype(name):
    right = RIGHT[name]
    expect(checks.CHECKS[name](lambda *a, **k: right(*a, **k).half()), False, "keeps about 3 digits")


# --- the predictions, against what the checks measure ------------------------------------------------


@pytest.mark.skipif(os.name == "nt", reason="no alarm signal on Windows")
def test_every_check_and_its_graded_test_take_under_a_few_seconds():
    import time
    for name, fn in RIGHT.items():
        start = time.perf_counter()
        checks.graded(name, fn, seed=9)
        assert time.perf_counter() - start < 30, name      # milliseconds of work; room for a busy machine


# --- numbers in hints: where and how much, never the expected value -----------------------------

def test_a_difference_is_said_where_and_how_much_without_the_expected_value():
    from labsupport.checks import core
    from labsupport.checks.core import differ, expected_values
    core._EXPECTED.clear()
    want = torch.tensor([[0.5, -0.04699071234]], dtype=torch.float64)
    got = want.clone()
    got[0, 1] *= 1.12
    text = differ(got, want, 1e-9)
    assert text == "at index (0, 1) yours is about 12% too large", text
    assert "0.0469" not in text and "0.0526" not in text
    assert differ(12, 13) == "yours is about 7.7% too small" and 13 in expected_values()
    assert differ(5 * 1024, 5) == "yours is 1024 times too large"
    two = want.clone()
    two[0, :] *= -1
    assert differ(two, want, 1e-9) == "at index (0, 0) (and 1 more) yours is of the opposite sign"


def test_a_difference_the_deciding_comparison_saw_is_shown_even_below_differs_tolerance():
    """A check stricter than differ's default (same=... with its own tolerance) once read
    'they agree' in its hint: where the largest difference is, and how much, is shown instead."""
    from labsupport.checks.core import differ
    want = torch.tensor([1.0, 2.0], dtype=torch.float64)
    text = differ(want + torch.tensor([0.0, 4e-7], dtype=torch.float64), want)
    assert text == "the largest difference is at index (1,): yours is about 2e-05% too large", text


def test_a_float32_result_for_float64_inputs_is_named_in_the_hint():
    from labsupport.checks.core import differ
    want = torch.tensor([0.25, 0.75], dtype=torch.float64)
    text = differ((want + 1e-3).float(), want)
    assert text.endswith("; your result is float32 although the inputs were float64: float32 keeps about "
                         "7 significant digits, so compute in the inputs' dtype (no .float(), no "
                         "dtype=torch.float32)"), text
    assert "float32" not in differ(want + 1e-3, want)


def test_an_exponent_just_outside_the_tolerance_prints_a_gap_beyond_it():
    from labsupport.checks.core import beyond
    assert beyond(-0.39, -0.4905, 0.1) == ("-0.3900", "-0.4905")
    assert beyond(-0.2, -0.5, 0.1) == ("-0.20", "-0.50")
