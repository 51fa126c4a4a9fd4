"""Conventions every chapter notebook follows (setup cell, clean outputs, exercises with
self-checks, citations), checked statically.

nbval (collected from chapters/ by the same pytest run) re-executes each notebook and
compares its outputs; these tests check what nbval does not."""
import json
import re
from pathlib import Path
from unittest import mock

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
from tools.book.execute_notebooks import drop_progress_bars, is_progress_bar  # noqa: E402
from tools.book.set_repository import TAGS, repository_url, setup_cell  # noqa: E402

NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
KNOWN_TAGS = {"nbval-ignore-output", "nbval-check-output", "nbval-skip", "raises-exception",
              "solution", "hide-input", "hide-output", "remove-input", "remove-output", "remove-cell"}
LOCAL_PATH = re.compile(r"(?:^|[\s'\"(=])/(?:home|root|tmp|work|Users|usr)/|site-packages|0x[0-9a-f]{8,}")


def read(path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def test_notebooks_and_toc_agree():
    toc = (ROOT / "_toc.yml").read_text()
    listed = set(re.findall(r"file:\s*(chapters/\S+)", toc))
    assert listed == {f"chapters/{p.stem}" for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_are_clean(path):
    nb = read(path)
    cells = code_cells(nb)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), \
        "re-run top to bottom: python -m tools.book.execute_notebooks"
    assert path.stat().st_size < 2_000_000, f"{path.name} is {path.stat().st_size / 1e6:.1f} MB"
    for i, cell in enumerate(cells):
        assert set(cell.metadata.get("tags", [])) <= KNOWN_TAGS, f"cell {i}: unknown tag"
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"cell {i} holds an error"
            text = json.dumps(out.get("text", "")) + json.dumps(out.get("data", {}).get("text/plain", ""))
            assert not LOCAL_PATH.search(text), f"cell {i} shows a local path or address"
            assert not is_progress_bar(out), f"cell {i} keeps a progress bar: run make notebooks"
        ignored = {"nbval-ignore-output", "nbval-skip"} & set(cell.metadata.get("tags", []))
        assert ignored or not cell.source.rstrip().endswith(";"), (
            f"cell {i}: nbval's kernel shows the value a trailing ';' hides elsewhere; assign it "
            "(outcome = ...) instead")


def test_progress_bars_are_dropped_with_their_widget_state():
    view = "application/vnd.jupyter.widget-view+json"
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {
        "box": {"state": {"children": ["IPY_MODEL_bar"], "layout": "IPY_MODEL_lay"}},
        "bar": {"state": {}}, "lay": {"state": {}}, "slider": {"state": {}}}}}
    cell = nbformat.v4.new_code_cell("compare(...)")
    cell.outputs = [
        nbformat.v4.new_output("display_data", {view: {"model_id": "box"},
                                                "text/plain": "comparison:  40%|####  | 2/5 [00:03<00:04]"}),
        nbformat.v4.new_output("display_data", {view: {"model_id": "slider"},
                                                "text/plain": "interactive(children=...)"}),
        nbformat.v4.new_output("stream", name="stdout", text="40%| of the windows | 2/5 [sic]\n")]
    nb.cells.append(cell)
    drop_progress_bars(nb)
    assert [o.get("data", {}).get(view, {}).get("model_id") for o in cell.outputs] == ["slider", None]
    assert set(nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]) == {"slider"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_cell_and_repository_setting(path):
    """The same first cell everywhere, with _config.yml's URL, hidden in the HTML."""
    setup = code_cells(read(path))[0]
    assert setup.source == setup_cell(repository_url()), "run python -m tools.book.set_repository"
    assert f'REPOSITORY = "{repository_url()}"' in setup.source
    assert setup.metadata.get("tags") == TAGS == ["remove-input"], "run python -m tools.book.set_repository"
    assert not setup.get("outputs"), "the setup cell prints nothing outside Colab"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_have_solutions_and_self_checks(path):
    nb = read(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    section = re.match(r"(\d+)_(\d+)_", path.name)
    numbered = re.findall(r"```\{exercise\} (\S+) [^\n]*\n:label: (\S+)\n:nonumber:", text)
    exercises = [label for _, label in numbered]
    if section:                       # 12.2.1, 12.2.2, ...: numbered within the section
        expected = [f"{section[1]}.{section[2]}.{i}" for i in range(1, len(numbered) + 1)]
        assert [n for n, _ in numbered] == expected
    solutions = re.findall(r"```\{solution-start\} (\S+)", text)
    assert 2 <= len(exercises) <= 5 and sorted(exercises) == sorted(solutions)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "### BEGIN SOLUTION" in cell.source:
            assert "### END SOLUTION" in cell.source
            assert cell.metadata.get("nbgrader", {}).get("solution") is True, f"cell {i}: nbgrader metadata"
            following = [c for c in nb.cells[i + 1:] if c.cell_type == "code"][0]
            assert "checks." in following.source, f"cell {i}: no self-check after the solution"
        if cell.cell_type == "markdown":
            assert "BEGIN SOLUTION" not in cell.source, "nbgrader markers belong in code cells"
    assert "{bibliography}" in text


def run_setup_cell(source, *, installed, colab):
    calls = []
    modules = {"google.colab": object()} if colab else {}
    with mock.patch("importlib.util.find_spec", return_value=object() if installed else None), \
         mock.patch("subprocess.run", side_effect=lambda cmd, check: calls.append(cmd)), \
         mock.patch.dict("sys.modules", modules), mock.patch("sys.path", []):
        if not colab:
            import sys
            sys.modules.pop("google.colab", None)
        exec(compile(source, "setup", "exec"), {})
    return calls


def test_setup_cell_installs_on_colab_and_does_nothing_locally():
    source = code_cells(read(NOTEBOOKS[0]))[0].source
    assert run_setup_cell(source, installed=True, colab=True) == []
    assert run_setup_cell(source, installed=True, colab=False) == []
    clone, install = run_setup_cell(source, installed=False, colab=True)
    assert clone[:2] == ["git", "clone"] and repository_url() in clone and clone[-1] == "/content/ch12"
    # a regular install of the clone (the series ships inside the package), not an editable one
    assert install[1:] == ["-m", "pip", "install", "-q", "/content/ch12"]
    with pytest.raises(ModuleNotFoundError, match=r"pip install \.`"):
        run_setup_cell(source, installed=False, colab=False)


@pytest.mark.parametrize("path", [*NOTEBOOKS, ROOT / "intro.md"], ids=lambda p: p.stem)
def test_citations_use_the_pages_own_key_prefix_and_exist(path):
    """Each page has its own bibliography; sphinxcontrib-bibtex needs a key prefix per
    page (:keyprefix:) to list the same work on several pages."""
    if path.suffix == ".ipynb":
        text = "\n".join(c.source for c in read(path).cells if c.cell_type == "markdown")
    else:
        text = path.read_text()
    prefixes = re.findall(r":keyprefix: (\S+)", text)
    assert len(prefixes) == 1, "one bibliography with a :keyprefix: per page"
    bib = set(re.findall(r"@\w+\{([^,]+),", (ROOT / "references.bib").read_text()))
    keys = [k.strip() for group in re.findall(r"\{cite:\w+\}`([^`]+)`", text) for k in group.split(",")]
    assert keys, "cite at least one reference"
    for key in keys:
        assert key.startswith(prefixes[0]), f"{key} lacks the page's prefix {prefixes[0]}"
        assert key[len(prefixes[0]):] in bib, f"{key} is not in references.bib"
