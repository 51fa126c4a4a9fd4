"""`make book`'s builder (tools/book/build_book.py): copies, order, failures, arguments."""
import sys

import nbformat
import pytest

from tools.book import build_book


def notebook(path, *sources, last_output=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    if last_output is not None:
        nb.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=last_output)]
    nbformat.write(nb, path)
    return path


def test_recorded_seconds_reads_the_run_record_and_is_zero_without_one(tmp_path):
    record = "{'device': 'cpu', 'wall_s': 466.2, 'profile': 'cpu'}"
    assert build_book.recorded_seconds(notebook(tmp_path / "a.ipynb", "1", last_output=record)) == 466.2
    assert build_book.recorded_seconds(notebook(tmp_path / "b.ipynb", "1")) == 0.0
    assert build_book.recorded_seconds(notebook(tmp_path / "c.ipynb")) == 0.0


def test_the_sources_are_copied_and_the_longest_notebook_comes_first(tmp_path):
    chapters = build_book.ROOT / "chapters"
    before = {p.name: p.read_bytes() for p in chapters.glob("*.ipynb")}
    order = build_book.copy_sources(tmp_path / "source")
    assert sorted(p.name for p in order) == sorted(before)
    seconds = [build_book.recorded_seconds(chapters / p.name) for p in order]
    assert seconds == sorted(seconds, reverse=True) and seconds[0] > 0
    assert (tmp_path / "source" / "_toc.yml").is_file() and (tmp_path / "source" / "intro.md").is_file()
    assert {p.name: p.read_bytes() for p in chapters.glob("*.ipynb")} == before   # untouched


@pytest.mark.slow
def test_a_failing_notebook_is_named_with_its_error_and_stops_the_build(tmp_path, capsys):
    good = notebook(tmp_path / "good.ipynb", "x = 1")
    bad = notebook(tmp_path / "bad.ipynb", "raise ValueError('planted failure')")
    assert build_book.execute_all([bad, good], jobs=2, timeout=60) is False
    printed = capsys.readouterr().out
    assert "good.ipynb executed" in printed
    assert "bad.ipynb FAILED" in printed and "planted failure" in printed


def test_jobs_below_one_are_refused_with_the_reason(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["build_book", "--jobs", "0"])
    with pytest.raises(SystemExit) as stop:
        build_book.main()
    assert stop.value.code == 2
    assert "--jobs 0: give 1 or more" in capsys.readouterr().err


def test_the_executed_config_turns_execution_off_and_drops_the_local_extensions():
    config = {"execute": {"execute_notebooks": "force", "timeout": 900},
              "sphinx": {"local_extensions": {"stepped_polling": "tools/book"}, "config": {"a": 1}}}
    out = build_book.executed_config(config)
    assert out["execute"] == {"execute_notebooks": "off", "timeout": 900}
    assert out["sphinx"] == {"config": {"a": 1}}
    assert build_book.executed_config({}) == {"execute": {"execute_notebooks": "off"}, "sphinx": {}}
