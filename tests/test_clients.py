"""The notebooks as students see them: converted by nbconvert, and opened in a real JupyterLab.

Students read the notebooks in JupyterLab, VS Code and Colab, not only in the HTML book:
markdown cells hold only CommonMark, LaTeX and plain HTML, run-dependent sentences are
Markdown outputs of code cells (`labsupport.report.say`), and solutions are folded by cell
metadata. Two checks:

- every chapter notebook, and every student version (`make student`), converted to HTML
  by nbconvert shows no MyST role or directive in its rendered text;
- a notebook opened in JupyterLab (installed from requirements-instructor.txt, started here
  on a loopback port) and rendered by headless Chromium shows an exercise's title as a
  heading, a run-dependent sentence as rendered Markdown output, its solutions folded, and
  no raw role. A screenshot goes to $BROWSER_SCREENSHOTS when it is set.

Without Chromium or JupyterLab the second test skips, or fails when REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tools.book.make_student import student_version

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
REQUIRED = os.environ.get("REQUIRE_BROWSER") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# What MyST writes and only Jupyter Book renders: a role, a directive fence, a directive option
MYST = re.compile(r"\{[a-z][a-z0-9:-]*\}`|(?:```+|:::+)\s*\{[a-z-]+\}|^\s*:(?:label|nonumber|class|filter|"
                  r"keyprefix|name):", re.M)


def visible_text(page: str) -> str:
    """The text a reader sees in an HTML page: tags, scripts and styles removed."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.fixture(scope="module")
def exporter():
    from nbconvert import HTMLExporter

    return HTMLExporter()


@pytest.mark.parametrize("version", ["chapter", "student"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbconvert_shows_no_myst_markup(path, version, exporter):
    nb = nbformat.read(path, as_version=4)
    if version == "student":
        nb = student_version(nb, path.name)
    body, _ = exporter.from_notebook_node(nb)
    found = sorted({m.group(0).strip() for m in MYST.finditer(visible_text(body))})
    assert not found, f"{path.name} ({version}) shows raw MyST markup in nbconvert's HTML: {found}"


def _unavailable(why: str):
    if REQUIRED:
        pytest.fail(f"REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer at {url} within {seconds:.0f} s")


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server on a loopback port over a folder holding 12.1; its URL."""
    if importlib_missing("jupyterlab"):
        _unavailable("JupyterLab is not installed (pip install -r requirements-instructor.txt)")
    home = tmp_path_factory.mktemp("jupyterlab")
    root, settings = home / "root", home / "settings" / "@jupyterlab" / "notebook-extension"
    root.mkdir()
    settings.mkdir(parents=True)
    shutil.copy(NOTEBOOKS[0], root / NOTEBOOKS[0].name)
    # render every cell, not only those in view (JupyterLab 4 windows long notebooks)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port = _free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "JUPYTER_CONFIG_DIR": str(home / "config")}
    log = open(home / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--IdentityProvider.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={root}"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for(f"http://127.0.0.1:{port}/lab")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def importlib_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


def _chromium(*args: str) -> subprocess.CompletedProcess:
    browser = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None:
        _unavailable("no Chromium found (tools/ci/install_browser.sh installs it; or set CHROMIUM=path)")
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,1800",
                               "--virtual-time-budget=30000", *args],
                              capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_a_notebook_reads_in_jupyterlab_as_in_the_book(jupyterlab):
    url = f"{jupyterlab}/lab/tree/{NOTEBOOKS[0].name}"
    dom = _chromium("--dump-dom", url).stdout
    assert "jp-Notebook" in dom, "JupyterLab did not render the notebook (no jp-Notebook in the DOM)"
    book = nbformat.read(NOTEBOOKS[0], as_version=4)
    # an exercise's title is a heading of rendered markdown
    title = next(m.group(1) for c in book.cells if c.cell_type == "markdown"
                 for m in [re.search(r"^### (Exercise 12\.1\.1: [^\n]+)", c.source, re.M)] if m)
    headings = [visible_text(h).strip() for h in re.findall(r"<h3\b[^>]*>(.*?)</h3>", dom, re.S)]
    assert any(h.startswith(title) for h in headings), f"no heading {title!r} in JupyterLab's rendering"
    # a run-dependent sentence: a say() cell's Markdown output, rendered as Markdown
    sentence = next(o["data"]["text/markdown"] for c in book.cells if c.cell_type == "code"
                    and "say(" in c.source for o in c.outputs if "text/markdown" in o.get("data", {}))
    outputs = re.findall(r'data-mime-type="text/markdown"[^>]*>(.*?)</div>', dom, re.S)
    assert any(sentence[:40] in visible_text(o) for o in outputs), \
        "the say() sentence is not rendered as a Markdown output"
    # every solution folded: JupyterLab shows a placeholder for each collapsed input
    solutions = sum("### BEGIN SOLUTION" in c.source for c in book.cells)
    assert dom.count("jp-InputPlaceholder") >= solutions >= 2, "the solutions are not folded"
    found = sorted({m.group(0).strip() for m in MYST.finditer(visible_text(dom))})
    assert not found, f"raw MyST markup visible in JupyterLab: {found}"
    shots = os.environ.get("BROWSER_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        _chromium(f"--screenshot={Path(shots) / 'jupyterlab_12_1.png'}", url)
