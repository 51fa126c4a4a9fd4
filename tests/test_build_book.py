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


# --- the execution cache ---------------------------------------------------------------------------

def _book(root):
    """A tiny book in ``root``: the sources build_book copies, two notebooks, a package file."""
    (root / "chapters").mkdir(parents=True)
    (root / "_static").mkdir()
    (root / "labsupport").mkdir()
    (root / "labsupport" / "a.py").write_text("x = 1\n")
    for name in ("_config.yml", "_toc.yml", "references.bib", "requirements.txt", "intro.md"):
        (root / name).write_text("execute: {}\n" if name == "_config.yml" else "")
    notebook(root / "chapters" / "one.ipynb", "1 + 1")
    notebook(root / "chapters" / "two.ipynb", "2 + 2")


def _run(monkeypatch, root, *argv):
    """build_book.main on the book in ``root``: which notebooks it executed, and whether it built."""
    executed, built = [], []
    monkeypatch.setattr(build_book, "ROOT", root)
    monkeypatch.setattr(build_book, "CACHE", root / "_build" / "executed")
    monkeypatch.setattr(build_book, "RUNS_ON", ("labsupport", "requirements.txt"))

    def fake_execute(path, jobs, timeout):
        executed.append(path.name)
        return path, 0, 0.0, ""

    def fake_html(source, options):
        built.append(True)
        (root / "_build" / "html").mkdir(parents=True, exist_ok=True)
        (root / "_build" / "html" / "index.html").write_text("<html></html>")
        return 0

    monkeypatch.setattr(build_book, "execute", fake_execute)
    monkeypatch.setattr(build_book, "build_html", fake_html)
    monkeypatch.setattr(sys, "argv", ["build_book", "--jobs", "1", *argv])
    assert build_book.main() == 0
    return sorted(executed), bool(built)


def test_a_rebuild_executes_exactly_what_changed(tmp_path, monkeypatch):
    _book(tmp_path)
    assert _run(monkeypatch, tmp_path) == (["one.ipynb", "two.ipynb"], True)      # the first build
    assert _run(monkeypatch, tmp_path) == ([], False)                              # nothing changed
    nb = nbformat.read(tmp_path / "chapters" / "two.ipynb", as_version=4)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="4")]
    nbformat.write(nb, tmp_path / "chapters" / "two.ipynb")
    assert _run(monkeypatch, tmp_path) == ([], True)                  # new outputs: nothing to execute
    notebook(tmp_path / "chapters" / "two.ipynb", "2 + 3")
    assert _run(monkeypatch, tmp_path) == (["two.ipynb"], True)       # one notebook's code changed
    (tmp_path / "intro.md").write_text("# A page\n")
    assert _run(monkeypatch, tmp_path) == ([], True)                  # a page: the HTML only
    (tmp_path / "labsupport" / "a.py").write_text("x = 2\n")
    assert _run(monkeypatch, tmp_path) == (["one.ipynb", "two.ipynb"], True)       # the package: all
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    assert _run(monkeypatch, tmp_path) == (["one.ipynb", "two.ipynb"], True)       # the pins: all
    monkeypatch.setenv("LABSUPPORT_PROFILE", "smoke")
    assert _run(monkeypatch, tmp_path) == (["one.ipynb", "two.ipynb"], True)       # another profile
    assert _run(monkeypatch, tmp_path, "--force") == (["one.ipynb", "two.ipynb"], True)


def test_a_failed_execution_is_not_cached(tmp_path, monkeypatch):
    _book(tmp_path)
    monkeypatch.setattr(build_book, "CACHE", tmp_path / "cache")
    path = tmp_path / "chapters" / "one.ipynb"
    monkeypatch.setattr(build_book, "execute", lambda p, jobs, timeout: (p, 1, 0.0, "boom"))
    assert build_book.execute_all([path], 1, 60, {path: "k"}) is False
    assert not build_book.cached(path, "k")
    build_book.store(path, "k")
    assert build_book.cached(path, "k") and not build_book.cached(path, "other")
