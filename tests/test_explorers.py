"""The explorers without a kernel: one self-contained HTML output each (labsupport.widgets).

Built here at the sizes the chapters use (12.2: 4 heads x 24 forecast hours over a 192-hour
history; 12.3: the default grid; 12.5: a sweep of 8 kernels at 5 lengths), once per module:

- the default frame is the figure function's own output for the default setting, and every
  value each control offers has a frame, each the figure of that setting;
- each explorer stays within its byte budget and its time (run inside a notebook), fetches
  nothing (no http, no external script), shows a short text form, never a widget's repr,
  and two explorers on one page have different ids;
- in headless Chromium (tests/cdp.py), on a page holding all three explorers (one twice),
  moving each control to each value shows that value's frame, no request leaves the page,
  and with scripts disabled the default figure shows with no control that does nothing;
- in JupyterLab (requirements-instructor.txt), a trusted notebook's explorer responds and
  an untrusted one shows its default figure.

Without Chromium (or websocket-client, or JupyterLab) the browser tests skip, or fail when
REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import base64
import contextlib
import functools
import importlib.util
import os
import re
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from labsupport import plots, widgets  # noqa: E402

pytestmark = pytest.mark.slow

REQUIRED = os.environ.get("REQUIRE_BROWSER") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# What each explorer may add to its page and its notebook (measured at these sizes: 0.48 MB,
# 0.53 MB and 0.20 MB), and the time it may take to draw on one core (measured: 5-6, 8-10 and
# 5-8 s, beside another job on the other core).
BUDGET_BYTES = {"attention": 900_000, "encoding": 650_000, "cost": 350_000}
BUDGET_SECONDS = 20
# 12.2's call: attention_explorer(history_mw, w_day[0], **explore)
EXPLORE = dict(query_offset=192, ylabel="demand (MW)",
               xlabel="hour of the window (0-191: history; 192-215: the forecast day)")
KERNELS = ("naive", "sdpa", "flash", "local", "longformer", "linformer", "linear", "performer")


def chapter_like_inputs():
    """A 192-hour history in MW with a daily cycle, and four heads' weights of 24 forecast
    hours over it (peaked at the same hour of earlier days, as the chapter's reader learns)."""
    g = torch.Generator().manual_seed(0)
    hours = torch.arange(192, dtype=torch.float64)
    series = 4500 + 900 * torch.sin(2 * torch.pi * (hours - 8) / 24) + 60 * torch.randn(192, generator=g,
                                                                                       dtype=torch.float64)
    query_hours = 192 + torch.arange(24, dtype=torch.float64)
    lag = (query_hours[:, None] - hours) % 24                                  # (24, 192)
    sharpness = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)[:, None, None]
    logits = -sharpness * torch.minimum(lag, 24 - lag) + 0.3 * torch.randn(4, 24, 192, generator=g,
                                                                            dtype=torch.float64)
    return series.numpy(), logits.softmax(-1).float()


def chapter_like_sweep():
    """A saved sweep as provenance.save_sweep writes it: 8 kernels at 5 lengths, naive skipped
    at the longest (over the budget) and one kernel out of memory."""
    rows = []
    for k, name in enumerate(KERNELS):
        for length in (256, 512, 1024, 2048, 4096):
            status = "skipped" if (name == "naive" and length == 4096) else "ok"
            status = "oom" if (name == "linformer" and length == 4096) else status
            scale = (length / 256) ** (2 if name in ("naive", "sdpa", "flash") else 1)
            rows.append(dict(kernel=name, length=length, dtype="float32", status=status,
                             time_s=1e-3 * (1 + k / 4) * scale if status == "ok" else None,
                             peak_bytes=int(2e6 * (1 + k) * scale) if status == "ok" else None,
                             tflops=0.02 + 0.01 * k if status == "ok" else None, note=""))
    return {"title": "attention kernels, 4 heads of 32", "device": "CPU, 2 cores (x86_64)",
            "profile": "cpu", "torch": torch.__version__, "rows": rows}


@pytest.fixture(scope="module")
def inputs():
    return {"attention": chapter_like_inputs(), "cost": chapter_like_sweep()}


def build(name, inputs, **options):
    if name == "attention":
        series, weights = inputs["attention"]
        return widgets.attention_explorer(series, weights, show=False, **options, **EXPLORE)
    if name == "encoding":
        return widgets.encoding_explorer(show=False, **options)
    return widgets.cost_explorer([inputs["cost"]], show=False, **options)


def figure_for(name, inputs, **values):
    """The figure function's own output for one setting of an explorer's controls."""
    if name == "attention":
        series, weights = inputs["attention"]
        return widgets.attention_figure(series, weights, **values, **EXPLORE)
    if name == "encoding":
        return widgets.encoding_figure(values.pop("kind"), **values)
    kernels = values["kernels"]
    return widgets.cost_figure([inputs["cost"]], metric=values["metric"],
                               kernels=None if kernels == "(all)" else [kernels])


@pytest.fixture(scope="module")
def explorers(inputs):
    """The three explorers as the notebooks make them, in the book's style (one core)."""
    with matplotlib.rc_context():
        plots.use_book_style()
        return {name: build(name, inputs) for name in ("attention", "encoding", "cost")}


NAMES = ["attention", "encoding", "cost"]
DEFAULTS = {"attention": dict(query=0, head=0),
            "encoding": dict(kind="sinusoidal", d_model=64, length=128, base=10000.0),
            "cost": dict(metric="time_s", kernels="(all)")}


def values_of(explorer, key: str) -> dict:
    return {c["name"]: c["values"][int(i)] for c, i in zip(explorer.controls, key.split(","))}


@pytest.mark.parametrize("name", NAMES)
def test_the_default_frame_is_the_figure_functions_output(name, explorers, inputs):
    explorer = explorers[name]
    assert values_of(explorer, explorer.default) == DEFAULTS[name]
    with matplotlib.rc_context():
        plots.use_book_style()
        expected = widgets.figure_png(figure_for(name, inputs, **DEFAULTS[name]))
    assert explorer.default_png == expected
    shown = re.search(r'<img src="data:image/png;base64,([^"]+)"', explorer.html).group(1)
    assert base64.b64decode(shown) == expected, "the <img> in the HTML is not the default frame"


@pytest.mark.parametrize("name", NAMES)
def test_every_value_each_control_offers_has_its_frame(name, explorers, inputs):
    explorer = explorers[name]
    sizes = [len(c["values"]) for c in explorer.controls]
    assert all(n >= 2 for n in sizes), f"a control that offers one value: {explorer.controls}"
    assert len(explorer.table) == int(np.prod(sizes))                 # every combination
    assert set(explorer.table.values()) == set(range(len(explorer.frames)))
    assert all(f.startswith(b"\x89PNG") for f in explorer.frames)
    assert len(set(explorer.frames)) == len(explorer.frames) <= widgets.MAX_FRAMES
    # the last combination is the figure of that setting (the first is the default test's)
    last = max(explorer.table, key=lambda k: tuple(map(int, k.split(","))))
    with matplotlib.rc_context():
        plots.use_book_style()
        assert explorer.frames[explorer.table[last]] == widgets.figure_png(
            figure_for(name, inputs, **values_of(explorer, last)))


def test_the_offered_values(explorers):
    attention = {c["name"]: c for c in explorers["attention"].controls}
    assert attention["query"]["values"] == [0, 5, 9, 14, 18, 23]
    assert attention["head"]["values"] == [0, 1, 2, 3]
    assert attention["query"]["labels"][-1] == "23 (hour 215)"
    encoding = {c["name"]: c["values"] for c in explorers["encoding"].controls}
    assert encoding == {"kind": list(widgets.ENCODINGS), "d_model": [16, 64], "length": [64, 128, 256],
                        "base": [10.0, 10000.0]}
    assert len(explorers["encoding"].frames) == 2 * 2 * 2 * 3 + 2 * 3   # ALiBi, T5: length only
    cost = {c["name"]: c["values"] for c in explorers["cost"].controls}
    assert cost == {"metric": list(widgets.METRICS), "kernels": ["(all)", *KERNELS]}


@pytest.mark.parametrize("name", NAMES)
def test_bytes_and_seconds_within_budget(name, explorers):
    explorer = explorers[name]
    print(f"\n{name} explorer: {len(explorer.frames)} frames, {explorer.nbytes:,} bytes, "
          f"{explorer.seconds:.1f} s")
    assert explorer.nbytes <= BUDGET_BYTES[name]
    assert explorer.seconds <= BUDGET_SECONDS


@pytest.mark.parametrize("name", NAMES)
def test_nothing_is_fetched_and_the_text_form_is_short(name, explorers):
    explorer = explorers[name]
    page = re.sub(r"[A-Za-z0-9+/=]{200,}", "PNG", explorer.html)      # the frames' base64 text
    assert not re.search(r"https?:|//|\bwww\.", page, flags=re.I), "a URL in the explorer"
    sources = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', page)     # the <img>'s, and the script's
    assert sources and all(u.startswith("data:image/png;base64,") for u in sources), sources
    assert not re.search(r"\b(fetch|XMLHttpRequest|import)\s*\(|<script[^>]*\bsrc=|<link\b", page)
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle["text/plain"] == explorer.text == repr(explorer)
    assert len(explorer.text) < 160 and "interactive(" not in explorer.text and "\n" not in explorer.text
    assert explorer.text.endswith(f"({len(explorer.frames)} precomputed frames)")
    # the default figure carries alt text, for the book's alt-text check and screen readers
    assert re.search(r'<img [^>]*alt="[^"]{20,}"', explorer.html)


def test_two_explorers_on_one_page_have_their_own_ids(explorers, inputs):
    again = build("cost", inputs)
    assert again.element_id != explorers["cost"].element_id
    assert again.html.count(again.element_id) == 2              # the element and its script's lookup


def test_called_in_a_notebook_it_shows_itself_once(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objects, **options: shown.extend(objects))
    assert widgets.encoding_explorer() is None                  # so `encoding_explorer();` shows it
    (output,) = shown
    assert set(output._repr_mimebundle_()) == {"text/html", "text/plain"}
    assert output.text.startswith("Encoding explorer")


def test_live_returns_the_ipywidgets_version(inputs):
    pytest.importorskip("ipywidgets")
    series, weights = inputs["attention"]
    live = widgets.attention_explorer(series, weights, live=True, **EXPLORE)
    controls = {c.description: c for c in live.widget.children[:-1]}
    assert controls["query"].max == 23 and list(controls["head"].options) == [0, 1, 2, 3]


def test_more_heads_or_kernels_offer_fewer_values_within_the_frame_cap(inputs, monkeypatch):
    monkeypatch.setattr(widgets, "MAX_FRAMES", 16)
    series, weights = inputs["attention"]
    eight_heads = torch.cat([weights, weights.flip(0)])                          # (8, 24, 192)
    attention = widgets.attention_explorer(series, eight_heads, show=False, **EXPLORE)
    assert [c["values"] for c in attention.controls] == [[0, 23], list(range(8))]
    cost = widgets.cost_explorer([inputs["cost"]], show=False)
    assert cost.controls[1]["values"] == ["(all)", *KERNELS[:4]] and len(cost.frames) == 15


def test_too_many_frames_are_refused(inputs):
    series, weights = inputs["attention"]
    with pytest.raises(ValueError, match="more than 40 distinct frames"):
        widgets.attention_explorer(series, weights, queries=range(11), show=False)


# --- in a browser ---------------------------------------------------------------------

def _unavailable(why: str):
    if REQUIRED:
        pytest.fail(f"REQUIRE_BROWSER=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def chromium():
    path = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if path is None:
        _unavailable("no Chromium found (tools/ci/install_browser.sh installs it; or set CHROMIUM=path)")
    if importlib.util.find_spec("websocket") is None:
        _unavailable("websocket-client is not installed (requirements-dev.txt)")
    return path


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder: Path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


# What the reader sees of explorer k (its image's source, alt text and frame, its controls).
STATE = """(function (k) {
  var root = document.querySelectorAll('.lab-explorer')[k], img = root.querySelector('img');
  return {id: root.id, ready: root.getAttribute('data-ready'), frame: img.getAttribute('data-frame'),
          src: img.getAttribute('src'), alt: img.alt, complete: img.complete && img.naturalWidth > 0,
          controls: Array.from(root.querySelectorAll('.lab-explorer-controls [name]')).map(
            function (c) { return {name: c.name, type: c.type, value: c.value}; })};
})(%d)"""
FRAMES = ("Array.from(document.querySelectorAll('.lab-explorer img'))"
          ".map(function (i) { return i.getAttribute('data-frame'); })")


def _set(k: int, control: str, index: int) -> str:
    """JavaScript that moves explorer k's control to the value at ``index``, as a reader's
    input does (the element's value, then its input and change events)."""
    return (f"(function () {{ var c = document.querySelectorAll('.lab-explorer')[{k}]"
            f".querySelector('[name={control}]'); c.value = '{index}';"
            "c.dispatchEvent(new Event('input', {bubbles: true}));"
            "c.dispatchEvent(new Event('change', {bubbles: true})); return c.value; })()")


@pytest.fixture(scope="module")
def page_of_explorers(explorers, inputs, tmp_path_factory):
    """A page holding the three explorers and a second cost explorer, served on localhost."""
    folder = tmp_path_factory.mktemp("explorers")
    second = build("cost", inputs)
    order = [explorers["attention"], explorers["encoding"], explorers["cost"], second]
    body = "\n".join(f"<section><h2>{e.text.split(':')[0]}</h2>{e.html}</section>" for e in order)
    (folder / "index.html").write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>explorers"
                                       f"</title></head><body>{body}</body></html>")
    with serve(folder) as base:
        yield base + "index.html", order


def test_in_chromium_each_control_changes_the_figure_and_nothing_is_fetched(chromium, page_of_explorers):
    from cdp import Browser

    url, order = page_of_explorers
    with Browser(chromium) as page:
        page.goto(url)
        page.wait_for(f"document.querySelectorAll('.lab-explorer[data-ready]').length === {len(order)}")
        for k, explorer in enumerate(order):
            seen = page.evaluate(STATE % k)
            assert seen["id"] == explorer.element_id
            assert seen["complete"] and seen["frame"] == str(explorer.table[explorer.default])
            assert [(c["name"], c["type"]) for c in seen["controls"]] == [
                (c["name"], "range" if c["kind"] == "range" else "select-one") for c in explorer.controls]
            others = [f for i, f in enumerate(page.evaluate(FRAMES)) if i != k]
            chosen = explorer.default.split(",")
            for j, control in enumerate(explorer.controls):
                for index in [*range(len(control["values"])), int(explorer.default.split(",")[j])]:
                    before = page.evaluate(STATE % k)
                    assert page.evaluate(_set(k, control["name"], index)) == str(index)
                    chosen[j] = str(index)
                    frame = explorer.table[",".join(chosen)]
                    after = page.evaluate(STATE % k)
                    assert after["frame"] == str(frame), (explorer.text, control["name"], index)
                    assert base64.b64decode(after["src"].split(",", 1)[1]) == explorer.frames[frame]
                    assert after["complete"]
                    if before["frame"] != after["frame"]:
                        assert after["src"] != before["src"] and after["alt"] != before["alt"]
                    # the other explorers did not move (no shared ids, no shared state)
                    assert [f for i, f in enumerate(page.evaluate(FRAMES)) if i != k] == others
            # every control back at its default: the default frame again
            assert page.evaluate(STATE % k)["frame"] == str(explorer.table[explorer.default])
        page.pump(0.5)
        host = urlsplit(url).netloc
        away = [u for u in page.requests if not u.startswith("data:") and urlsplit(u).netloc != host]
        assert away == [], f"requests that left the page: {away}"
        assert page.console_errors == []


def test_in_chromium_without_scripts_the_default_figure_shows_and_no_control(chromium, page_of_explorers):
    from cdp import Browser

    url, order = page_of_explorers
    with Browser(chromium) as page:
        page.send("Emulation.setScriptExecutionDisabled", value=True)
        page.goto(url)
        state = [page.evaluate(STATE % k) for k in range(len(order))]
    assert [s["controls"] for s in state] == [[]] * len(order)          # no control that does nothing
    assert all(s["complete"] and s["ready"] is None for s in state)
    assert [base64.b64decode(s["src"].split(",", 1)[1]) for s in state] == [e.default_png for e in order]


# --- in JupyterLab ----------------------------------------------------------------------

def _notebook(path: Path, explorers: list, *, data_dir: Path | None) -> None:
    """A notebook whose cells' outputs are these explorers, signed (trusted) with the secret
    under ``data_dir``, or not signed."""
    import nbformat
    from nbformat.sign import NotebookNotary

    cells = []
    for k, explorer in enumerate(explorers, start=1):
        cell = nbformat.v4.new_code_cell("explorer();", execution_count=k)
        cell.outputs = [nbformat.v4.new_output("display_data", data=explorer._repr_mimebundle_())]
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    if data_dir is not None:
        NotebookNotary(data_dir=str(data_dir)).sign(nb)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def jupyterlab(explorers, chromium, tmp_path_factory):
    """A JupyterLab server on a loopback port over two notebooks holding the encoding and
    cost explorers: trusted.ipynb (signed, as a notebook the reader ran is) and
    untrusted.ipynb (as one opened from a download); its URL."""
    if importlib.util.find_spec("jupyterlab") is None:
        _unavailable("JupyterLab is not installed (pip install -r requirements-instructor.txt)")
    home = tmp_path_factory.mktemp("jupyterlab")
    root, data = home / "root", home / "data"
    root.mkdir()
    data.mkdir()
    chosen = [explorers["encoding"], explorers["cost"]]
    _notebook(root / "trusted.ipynb", chosen, data_dir=data)
    _notebook(root / "untrusted.ipynb", chosen, data_dir=None)
    from labserver import jupyterlab_server

    with jupyterlab_server(root, home, JUPYTER_DATA_DIR=str(data)) as url:
        yield url


def test_in_jupyterlab_a_trusted_explorer_responds_and_an_untrusted_one_shows_its_figure(
        chromium, jupyterlab, explorers):
    from cdp import Browser

    outputs = "document.querySelectorAll('.jp-OutputArea-output img').length === 2"
    with Browser(chromium) as page:
        page.goto(f"{jupyterlab}/lab/tree/trusted.ipynb?reset", ready=outputs, seconds=120)
        page.wait_for("document.querySelectorAll('.lab-explorer[data-ready]').length === 2", seconds=30)
        cost = explorers["cost"]
        page.evaluate(_set(1, "metric", 1))
        frame = cost.table["1," + cost.default.split(",")[1]]
        assert page.evaluate(STATE % 1)["frame"] == str(frame)
        assert base64.b64decode(page.evaluate(STATE % 1)["src"].split(",", 1)[1]) == cost.frames[frame]

        page.goto(f"{jupyterlab}/lab/tree/untrusted.ipynb?reset", ready=outputs, seconds=120)
        page.pump(2)
        seen = page.evaluate("Array.from(document.querySelectorAll('.jp-OutputArea-output'))"
                             ".map(function (o) { var i = o.querySelector('img');"
                             " return {src: i.getAttribute('src'),"
                             " complete: i.complete && i.naturalWidth > 0,"
                             " controls: o.querySelectorAll('select, input').length}; })")
        assert [s["controls"] for s in seen] == [0, 0]               # no control that does nothing
        assert all(s["complete"] for s in seen)
        assert [base64.b64decode(s["src"].split(",", 1)[1]) for s in seen] == [
            explorers["encoding"].default_png, cost.default_png]
        host = urlsplit(jupyterlab).netloc
        away = [u for u in page.requests if not u.startswith(("data:", "ws:")) and urlsplit(u).netloc != host]
        assert away == [], f"requests that left JupyterLab: {away}"
