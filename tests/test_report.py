"""What the notebooks show: tables and sentences as Markdown output in a notebook (every
client renders it), the same content as plain text in a script."""
import pytest

from labsupport import report


@pytest.fixture
def shown(monkeypatch):
    """Pretend to run in a notebook kernel; collect what `IPython.display.display` gets."""
    import IPython.display

    out = []
    monkeypatch.setattr(report, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False: out.append((data, raw)))
    return out


def test_a_table_is_a_markdown_table_in_a_notebook_with_its_plain_text_beside(shown):
    report.table(["model", "test MSE"], [("full | naive", 0.0823), ("x*y", 1.0)],
                 formats={1: "{:.3f}"}, caption="Test error", notes=["min-max over seeds"])
    [(data, raw)] = shown
    assert raw and set(data) == {"text/markdown", "text/plain"}
    markdown = data["text/markdown"].split("\n\n")
    assert markdown[0] == "**Test error**"
    assert markdown[1].splitlines() == ["| model | test MSE |", "| :--- | ---: |",
                                        "| full \\| naive | 0.082 |", "| x\\*y | 1.000 |"]
    assert markdown[2] == "min-max over seeds"
    assert data["text/plain"].splitlines() == ["Test error", "       model  test MSE",
                                               "full | naive     0.082", "         x*y     1.000",
                                               "min-max over seeds"]


def test_a_table_prints_plain_text_outside_a_notebook(capsys):
    report.table(["L", "ms"], [(1024, 2.81)], formats={1: "{:.1f}"}, notes=["word " * 30])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["   L   ms", "1024  2.8"]
    assert len(lines) > 3 and all(len(line) <= report.NOTE_WIDTH for line in lines[2:])


def test_say_shows_the_sentence_as_markdown_and_refuses_anything_but_text(shown, capsys):
    report.say(f"The forecaster's test MSE is {0.08234:.3f}, $L^2$ in **memory**.")
    [(data, _)] = shown
    assert data == {"text/markdown": "The forecaster's test MSE is 0.082, $L^2$ in **memory**.",
                    "text/plain": "The forecaster's test MSE is 0.082, $L^2$ in **memory**."}
    with pytest.raises(TypeError, match=r"say's text must be the sentence as a str.*got float"):
        report.say(0.082)
    with pytest.raises(TypeError, match=r"table's caption must be a str, got float"):
        report.table(["a"], [(1,)], caption=1.5)
    assert capsys.readouterr().out == ""


def test_in_notebook_is_false_in_a_plain_python_process():
    assert report.in_notebook() is False
