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

from tools.book.execute_notebooks import drop_progress_bars, is_progress_bar
from tools.book.references import cited_keys, load_works, update
from tools.book.set_repository import TAGS, repository_url, setup_cell

ROOT = Path(__file__).resolve().parents[1]

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
    assert f'REPOSITORY, CLONE = "{repository_url()}", "/content/ch12"' in setup.source
    assert setup.metadata.get("tags") == TAGS == ["remove-input"], "run python -m tools.book.set_repository"
    assert not setup.get("outputs"), "the setup cell prints nothing outside Colab"


EXERCISE = re.compile(r"^### (?:Exercise (\d+\.\d+\.\d+)|Lab exercise (\d+)): \S", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_have_titles_folded_solutions_and_self_checks(path):
    """An exercise is a numbered heading with its task (markdown that every client renders),
    its solution code cell, folded in every client (hide-input: the book; source_hidden:
    JupyterLab and VS Code; cellView form: Colab), and the self-check cell after it."""
    nb = read(path)
    section = re.match(r"(\d+)_(\d+)_", path.name)
    titled = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and EXERCISE.search(c.source)]
    numbers = [m.group(1) or m.group(2) for i in titled for m in EXERCISE.finditer(nb.cells[i].source)]
    if section:                       # 12.2.1, 12.2.2, ...: numbered within the section
        assert numbers == [f"{section[1]}.{section[2]}.{i}" for i in range(1, len(numbers) + 1)]
    else:
        assert numbers == [str(i) for i in range(1, len(numbers) + 1)]
    solutions = [i for i, c in enumerate(nb.cells)
                 if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert 2 <= len(numbers) <= 5 and len(solutions) == len(numbers), (numbers, solutions)
    for title, i in zip(titled, solutions):
        assert title < i and not any(c.cell_type == "code" for c in nb.cells[title + 1:i]), \
            f"cell {i}: the solution must follow its exercise's title (cell {title})"
        cell = nb.cells[i]
        assert "### END SOLUTION" in cell.source
        assert cell.metadata.get("nbgrader", {}).get("solution") is True, f"cell {i}: nbgrader metadata"
        assert "hide-input" in cell.metadata.get("tags", []) and cell.metadata.get("cellView") == "form" \
            and cell.metadata.get("jupyter", {}).get("source_hidden") is True, f"cell {i}: fold the solution"
        following = [c for c in nb.cells[i + 1:] if c.cell_type == "code"][0]
        assert "checks." in following.source, f"cell {i}: no self-check after the solution"
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert "BEGIN SOLUTION" not in cell.source, "nbgrader markers belong in code cells"


def run_setup_cell(source, *, installed, colab, cloned=False):
    calls = []
    modules = {"google.colab": object()} if colab else {}
    removed = []
    with mock.patch("importlib.util.find_spec", return_value=object() if installed else None), \
         mock.patch("subprocess.run", side_effect=lambda cmd, check: calls.append(cmd)), \
         mock.patch("os.path.isdir", return_value=cloned), \
         mock.patch("shutil.rmtree", side_effect=lambda path, ignore_errors: removed.append(path)), \
         mock.patch.dict("sys.modules", modules), mock.patch("sys.path", []):
        if not colab:
            import sys
            sys.modules.pop("google.colab", None)
        exec(compile(source, "setup", "exec"), {})
    return calls, removed


def test_setup_cell_installs_on_colab_does_nothing_locally_and_can_run_again():
    source = code_cells(read(NOTEBOOKS[0]))[0].source
    assert run_setup_cell(source, installed=True, colab=True) == ([], [])
    assert run_setup_cell(source, installed=True, colab=False) == ([], [])
    (clone, install), removed = run_setup_cell(source, installed=False, colab=True)
    assert clone[:2] == ["git", "clone"] and repository_url() in clone and clone[-1] == "/content/ch12"
    assert removed == ["/content/ch12"], "a half-made clone from an earlier run is removed first"
    # a regular install of the clone (the series ships inside the package), not an editable one
    assert install[1:] == ["-m", "pip", "install", "-q", "/content/ch12"]
    # run again after a failed install: the clone is there, so only the install is retried
    assert run_setup_cell(source, installed=False, colab=True, cloned=True) == ([install], [])
    with pytest.raises(ModuleNotFoundError, match=r"pip install \.`"):
        run_setup_cell(source, installed=False, colab=False)


def test_citations_and_reference_lists_follow_references_bib():
    """Every citation is an author-year link to the notebook's own reference list, which lists
    exactly the works it cites, from references.bib (tools/book/references.py keeps them)."""
    works = load_works()
    for path in NOTEBOOKS:
        nb = read(path)
        keys = cited_keys(nb)
        assert keys, f"{path.name}: cite at least one reference"
        assert not update(nb, works, path.name), f"{path.name}: run python -m tools.book.references"


def test_reference_tool_writes_citations_and_the_list():
    works = load_works()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell('As attention does (<a href="#ref-vaswani2017attention">x</a>); '
                                      '<a href="#ref-nie2023patchtst">Nie (2023)</a> patch.'),
        nbformat.v4.new_code_cell("record_run(RUN)")])
    assert update(nb, works)
    vaswani = ('(<a href="#ref-vaswani2017attention" title="Vaswani, A., Shazeer, N., Parmar, N., '
               'Uszkoreit, J., Jones, L., Gomez, A. N., Kaiser, Ł. and Polosukhin, I. (2017). Attention Is '
               'All You Need. Advances in Neural Information Processing Systems.">Vaswani et al., 2017</a>)')
    assert vaswani in nb.cells[0].source
    assert re.search(r'<a href="#ref-nie2023patchtst" title="Nie, Y\., [^"]+">Nie et al\. \(2023\)</a> patch',
                     nb.cells[0].source)
    listing = nb.cells[1].source
    assert listing.startswith("## References") and nb.cells[2].cell_type == "code"
    assert listing.index('id="ref-nie2023patchtst"') < listing.index('id="ref-vaswani2017attention"')
    assert "Attention Is All You Need" in listing and "https://arxiv.org/abs/1706.03762" in listing
    assert not update(nb, works)                                     # in step now
    nb.cells[0].source += ' <a href="#ref-nosuchwork2099">?</a>'
    with pytest.raises(KeyError, match="nosuchwork2099.*references.bib"):
        update(nb, works)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_the_book_hides_is_folded_in_every_client(path):
    """A cell whose input the book hides (remove-input, hide-input, remove-cell) folds in
    JupyterLab and VS Code (jupyter.source_hidden) and Colab (cellView: form) too, written by
    tools/book/execute_notebooks.py; the Colab setup cell among them, under its form title."""
    from tools.book.make_student import HIDDEN_IN_BOOK, is_setup_cell

    unfolded = [i for i, c in enumerate(read(path).cells)
                if c.cell_type == "code" and set(c.metadata.get("tags", [])) & set(HIDDEN_IN_BOOK)
                and (c.metadata.get("jupyter", {}).get("source_hidden") is not True
                     or c.metadata.get("cellView") != "form")]
    assert not unfolded, (f"cells {unfolded} are hidden in the book but show their code in JupyterLab "
                          "and Colab: run python -m tools.book.execute_notebooks --fold-only")
    setup = next(c for c in read(path).cells if c.cell_type == "code")
    assert is_setup_cell(setup) and setup.source.startswith("#@title Setup: ")
