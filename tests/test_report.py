"""What the notebooks show: tables and sentences as Markdown output in a notebook (every
client renders it), the same content as plain text in a script (`labsupport.display`); claims
checked quietly, a notice for a reader and a stop under the tests (`labsupport.report`)."""
import pytest
import torch

from labsupport import display, report


@pytest.fixture
def shown(monkeypatch):
    """Pretend to run in a notebook kernel; collect what `IPython.display.display` gets."""
    import IPython.display

    out = []
    monkeypatch.setattr(display, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False: out.append((data, raw)))
    return out


def test_a_table_is_a_markdown_table_in_a_notebook_with_its_plain_text_beside(shown):
    display.table(["model", "test MSE"], [("full | naive", 0.0823), ("x*y", 1.0)],
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
    display.table(["L", "ms"], [(1024, 2.81)], formats={1: "{:.1f}"}, notes=["word " * 30])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["   L   ms", "1024  2.8"]
    assert len(lines) > 3 and all(len(line) <= display.NOTE_WIDTH for line in lines[2:])


def test_say_shows_the_sentence_as_markdown_and_refuses_anything_but_text(shown, capsys):
    display.say(f"The forecaster's test MSE is {0.08234:.3f}, $L^2$ in **memory**.")
    [(data, _)] = shown
    assert data == {"text/markdown": "The forecaster's test MSE is 0.082, $L^2$ in **memory**.",
                    "text/plain": "The forecaster's test MSE is 0.082, $L^2$ in **memory**."}
    with pytest.raises(TypeError, match=r"say's text must be the sentence as a str.*got float"):
        display.say(0.082)
    with pytest.raises(TypeError, match=r"table's caption must be a str, got float"):
        display.table(["a"], [(1,)], caption=1.5)
    assert capsys.readouterr().out == ""


def test_in_notebook_is_false_in_a_plain_python_process():
    assert display.in_notebook() is False


@pytest.fixture
def fresh_claims():
    """The claim record is the process's: start each test with an empty one, and leave one."""
    report.forget_claims()
    yield
    report.forget_claims()


def test_a_claim_that_holds_shows_nothing(fresh_claims, shown, capsys):
    report.claim("the peak is two score matrices", 8_700_000 == 8_700_000, peak=8_700_000)
    report.claim("time grows about as L^2", True)
    assert shown == [] and capsys.readouterr() == ("", "")
    assert report.claims_held() == ["the peak is two score matrices", "time grows about as L^2"]


@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setenv(report.STRICT_VAR, "1")


@pytest.fixture
def reader(monkeypatch):
    monkeypatch.delenv(report.STRICT_VAR, raising=False)
    monkeypatch.delenv("LABSUPPORT_PROFILE", raising=False)


def test_under_the_tests_a_claim_that_fails_stops_with_the_claim_and_its_numbers(fresh_claims, strict):
    with pytest.raises(report.ClaimNotConfirmed,
                       match=r'claim "SDPA needs less memory than every approximation": measured '
                             r'sdpa = 1\.23457e\+06; approx = \[1,000,000, 2\.5\]\.'):
        report.claim("SDPA needs less memory than every approximation", 1234567.0 < 1e6,
                     sdpa=1234567.0, approx=[1_000_000, 2.5])
    assert report.claims_held() == [] and report.claims_not_held() == []
    with pytest.raises(AssertionError, match=r"measured exponent = 1\.91\b"):   # nbval's failure
        report.claim("time exponent within 0.05 of 2", False, exponent=torch.tensor(1.91))


def test_for_a_reader_a_claim_that_fails_is_a_notice_and_the_notebook_goes_on(fresh_claims, reader, shown):
    report.claim("the Performer is behind full attention", False, paired=[0.006, 0.017])
    [(data, _)] = shown
    assert data["text/plain"].startswith('Not confirmed on this machine: the text says "the Performer '
                                         'is behind full attention". This run measured paired = '
                                         '[0.006, 0.017]. The book\'s own run confirmed it.')
    assert data["text/markdown"].startswith("**Not confirmed on this machine:**")
    report.claim("rows sum to one", True)
    assert report.claims_not_held() == ["the Performer is behind full attention"]
    report.claims_checked(machine="cpu, torch 2.13.0")
    plain = shown[-1][0]["text/plain"].splitlines()
    assert plain == ["2 claims of this section checked on this machine (cpu, torch 2.13.0): 1 held, 1 did "
                     "not (marked below).", "1. rows sum to one",
                     "2. not confirmed here: the Performer is behind full attention"]


def test_a_claim_refuses_what_is_not_a_bool(fresh_claims):
    with pytest.raises(TypeError, match=r"claim 'x': holds must be a bool.*got str 'False'"):
        report.claim("x", "False")
    with pytest.raises(TypeError, match=r"claim's text must be the claim in words"):
        report.claim(3, True)


def test_long_tensors_are_summarised_in_a_claims_message(fresh_claims, strict):
    with pytest.raises(report.ClaimNotConfirmed,
                       match=r"measured w = a float32 tensor of shape \(4, 5\) ranging 0 to 19\."):
        report.claim("weights are small", False, w=torch.arange(20.0).view(4, 5))


def test_claims_checked_counts_each_claim_once_and_lists_them_folded(fresh_claims, shown, strict):
    for holds in (True, True):                              # a cell run twice: one claim
        report.claim("rows sum to one", holds)
    report.claim("the holiday reads like a weekend", True)
    report.claim("the ridge beats the naive forecast", True)
    with pytest.raises(report.ClaimNotConfirmed):           # held before, fails now: not counted
        report.claim("the ridge beats the naive forecast", False)
    report.claims_checked(machine="cpu, torch 2.13.0")
    [(data, _)] = shown
    assert data["text/plain"].splitlines() == [
        "2 claims of this section checked on this machine (cpu, torch 2.13.0), and all held.",
        "1. rows sum to one", "2. the holiday reads like a weekend"]
    markdown = data["text/markdown"]
    assert markdown.startswith("**2 claims of this section checked on this machine")
    assert "<details><summary>" in markdown and "<li>rows sum to one</li>" in markdown


def _sanitized(text: str) -> str:
    """``text`` as nbval compares it: with the masks of tests/nbval_sanitize.cfg applied."""
    import configparser
    import re
    from pathlib import Path

    masks = configparser.ConfigParser(interpolation=None)
    masks.read(Path(__file__).with_name("nbval_sanitize.cfg"))
    for section in masks.sections():
        text = re.sub(masks[section]["regex"], masks[section]["replace"], text)
    return text


def test_the_closing_line_reads_the_same_on_every_machine(fresh_claims, shown, monkeypatch):
    report.claim("rows sum to one", True)
    report.claims_checked()                                          # this machine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA GeForce RTX 3060 (Laptop)")
    report.claims_checked()                                          # a faked card
    (cpu, _), (gpu, _) = shown
    assert "cuda: NVIDIA GeForce RTX 3060 Laptop, torch" in gpu["text/plain"]
    for kind in ("text/plain", "text/markdown"):
        assert cpu[kind] != gpu[kind] and _sanitized(cpu[kind]) == _sanitized(gpu[kind])


@pytest.mark.slow
def test_one_notebook_cell_warns_a_reader_and_stops_the_tests(tmp_path, monkeypatch):
    """The same cell in a real kernel: without the variable it shows the notice and runs on;
    with it (as the test suite and the book build set it) the cell stops."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    cell = ('from labsupport.report import claim\n'
            'claim("the ridge beats the naive forecast", False, gap=0.01)\nprint("went on")')

    def run(env):
        monkeypatch.delenv(report.STRICT_VAR, raising=False)
        monkeypatch.delenv("LABSUPPORT_PROFILE", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": tmp_path}}).execute()
        return nb.cells[0].outputs

    outputs = run({})
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "Not confirmed on this machine" in text and "went on" in text
    with pytest.raises(CellExecutionError, match="ClaimNotConfirmed"):
        run({report.STRICT_VAR: "1"})
