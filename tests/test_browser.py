"""The HTML book in a real browser: every page rendered by headless Chromium.

The book is the session's build from the committed notebook outputs (conftest.py's
``book_html``, shared with tests/test_book.py), made with MathJax and the ipywidgets
manager pointed at local copies fetched from the npm registry
(tools/ci/fetch_web_assets.py), which are added to a copy of it: the pages then need no CDN.
A small checker script (tests/browser_check.js), injected into those temporary copies
only, waits until MathJax has typeset the page and the widget manager has drawn the
saved widgets and the explorers' scripts have built their controls, moves every explorer's
controls, and writes what it saw into the DOM, which Chromium dumps. Per page:

- math typeset: every math element holds a MathJax container, no TeX error, and no
  raw TeX (``$$``, ``\\(``, ``\\begin{``...) left in the prose;
- every image loaded; every content figure has alt text that is not a file name, or a
  caption;
- no raw widget JSON and no traceback in the visible text; every saved widget drawn;
- every explorer (labsupport.widgets) has its controls, and each control changes its figure
  with no kernel (tests/test_explorers.py drives every value of each);
- a notebook page links to Colab at that notebook's path;
- headings in order: one h1, first, and no level skipped going down;
- nothing was requested from another host (other hosts are unresolvable for Chromium
  here), no load failed, and no JavaScript error beyond a known harmless one.

Chromium: ``tools/ci/install_browser.sh`` installs it (CI runs it and sets
REQUIRE_BROWSER=1). Without a browser the tests skip, or fail when REQUIRE_BROWSER=1.
Three screenshots (a page's top, the 12.3 encoding explorer, display math in 12.4) go to
``screenshots/`` in the temporary folder (printed with ``-s``), or to $BROWSER_SCREENSHOTS.
"""
from __future__ import annotations

import contextlib
import functools
import html as htmlmod
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from helpers import BROWSER_ASSETS, ROOT, build_book, toc_files

pytestmark = pytest.mark.slow

CHECKER = Path(__file__).with_name("browser_check.js")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
REQUIRED = os.environ.get("REQUIRE_BROWSER") == "1"
# Known page errors that are harmless here (and happen on the published site too):
HARMLESS_JS_ERRORS = (
    # jupyter-book 1 writes sphinx-thebe's settings script twice, so the second
    # `const THEBE_JS_URL` throws; thebe (live code in the page) is off in this book.
    re.compile(r"Identifier 'THEBE_JS_URL' has already been declared"),
    # The widgets' label typesetting calls MathJax 2's MathJax.Hub.Queue whenever
    # window.MathJax exists; MathJax 3 has no Hub (jupyter-widgets/ipywidgets#3829, still in
    # html-manager 1.0.15). The label text is set before the call, so labels show as text.
    re.compile(r"Cannot read properties of undefined \(reading 'Queue'\)"),
)
VIRTUAL_TIME_MS = 40000
# Pages saved as screenshots, and what to show at the top (see showForScreenshot in the checker).
SCREENSHOTS = {"chapters/12_1_self_attention": "top", "chapters/12_3_positional_encodings": "explorer",
               "chapters/12_4_long_sequences": "math"}


PAGES = toc_files()


def _unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def find_browser() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return shutil.which(explicit) or (explicit if Path(explicit).is_file() else None)
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


@pytest.fixture(scope="module")
def browser():
    path = find_browser()
    if path is None:
        _unavailable("no Chromium found (tools/ci/install_browser.sh installs it; or set CHROMIUM=path)")
    return path


@pytest.fixture(scope="module")
def web_assets(browser):
    fetcher = importlib.import_module("tools.ci.fetch_web_assets")
    try:
        return fetcher.fetch_all()
    except fetcher.FetchError as exc:
        _unavailable(f"the local MathJax/widget assets could not be fetched: {exc}")


def install_assets(html: Path, assets: dict, pages=PAGES) -> None:
    """Copy the local assets into html/_static/browser-test/ and inject the checker into `pages`."""
    vendor = html / "_static" / BROWSER_ASSETS
    for folder, path in assets.items():
        shutil.copytree(path, vendor / folder, dirs_exist_ok=True)
    shutil.copy(CHECKER, vendor / CHECKER.name)
    for name in pages:
        page = html / f"{name}.html"
        prefix = "../" * name.count("/")
        tag = f'<script src="{prefix}_static/{BROWSER_ASSETS}/{CHECKER.name}"></script>'
        text, n = re.subn(r"<head>", f"<head>\n{tag}", page.read_text(), count=1)
        assert n == 1, f"{name}: no <head> to inject the checker into"
        page.write_text(text)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """Serve `folder` on a free localhost port in a thread; yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site(web_assets, book_html, tmp_path_factory):
    """The session's book (conftest.py's ``book_html``, -W -n) copied, with the local assets
    and the checker added to the copy, served on localhost."""
    started = time.perf_counter()
    out = tmp_path_factory.mktemp("browser")
    html = shutil.copytree(book_html, out / "html")
    install_assets(html, web_assets)
    built = time.perf_counter() - started
    with serve(html) as base:
        yield {"out": out, "html": html, "base": base, "build_s": built}


def chromium(browser: str, url: str, *extra: str, timeout: float = 180) -> str:
    with tempfile.TemporaryDirectory() as profile:
        command = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--mute-audio", f"--user-data-dir={profile}",
            # Every other host is unresolvable: a page that needs a CDN shows it as a failed load.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            f"--virtual-time-budget={VIRTUAL_TIME_MS}", *extra, url]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited {result.returncode} on {url}: {result.stderr[-2000:]}")
    return result.stdout


def observe(browser: str, url: str, screenshot: Path | None = None) -> dict:
    """Load `url` in Chromium; return what tests/browser_check.js saw (and save a screenshot)."""
    extra = ["--window-size=1280,1600", "--hide-scrollbars"]
    if screenshot is not None:
        extra.append(f"--screenshot={screenshot}")
    dom = chromium(browser, url, *extra, "--dump-dom")
    match = re.search(r'<pre id="browser-check"[^>]*>(.*?)</pre>', dom, flags=re.S)
    if match is None:
        raise RuntimeError(f"{url}: the checker wrote no result (did the page load?)")
    return json.loads(htmlmod.unescape(match.group(1)))


@pytest.fixture(scope="module")
def observed(browser, site):
    """What the checker saw on every page of the book, by page name."""
    shots = Path(os.environ.get("BROWSER_SCREENSHOTS") or site["out"] / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)

    def run(name):
        view = SCREENSHOTS.get(name)
        url = site["base"] + f"{name}.html" + (f"?view={view}" if view else "")
        png = shots / f"{name.replace('/', '_')}-{view}.png" if view else None
        return observe(browser, url, png)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, name) for name in PAGES}
        results = {}
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except Exception as exc:  # one broken page must not hide the others' results
                results[name] = {"error": str(exc)}
    print(f"\nbrowser test: copy and assets {site['build_s']:.1f} s, {len(PAGES)} pages rendered in "
          f"{time.perf_counter() - started:.1f} s; screenshots in {shots}")
    return results


# --- The checks: each takes what the checker saw on one page and returns its problems. ---

RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\end\{"
                     r"|\\(?:frac|sqrt|math[a-z]+|operatorname|text|sum|cdot|times|top|log|exp)\b"
                     r"|\$[^$\n]*[\\^_{][^$\n]*\$")
RAW_OUTPUT = ("Traceback", "model_id", "application/vnd.jupyter", "version_major", "\x1b[", "[0;31m")
# Same-host requests that fail on the published site too, and are harmless here:
KNOWN_MISSING = (
    # html-manager 1.0.6 resolves its bundled Font Awesome 5 files against the page
    # (<page dir>/@jupyter-widgets/html-manager/dist/<hash>.woff2), from the CDN as well;
    # only widget icons use them and the book's widgets (progress bars, sliders) have none.
    re.compile(r"/@jupyter-widgets/html-manager/dist/[0-9a-f]{20}\.(woff2?|ttf|eot|svg)$"),
    re.compile(r"^/favicon\.ico$"),  # Chromium asks for it; the book sets no favicon
)
KNOWN_FONT_ERRORS = ("Font Awesome 5 Brands", "Font Awesome 5 Free")  # the files above


def check_math(r: dict) -> list:
    problems = []
    if r["mathElements"]:
        if not r["mathjaxLoaded"]:
            problems.append(f"{r['mathElements']} math elements but MathJax is not on the page")
        if r["mathjaxError"]:
            problems.append(f"MathJax failed: {r['mathjaxError']}")
        problems += [f"not typeset: {tex}" for tex in r["untypeset"]]
    problems += [f"TeX error: {e}" for e in r["mathErrors"]]
    text = r["proseText"]
    problems += [f"raw TeX in the text: ...{text[max(0, m.start() - 50):m.end() + 30]}..."
                 for m in RAW_TEX.finditer(text)]
    return problems


def check_images_load(r: dict) -> list:
    return [f"did not load: {i['src'][:100]}" for i in r["images"]
            if not (i["complete"] and i["naturalWidth"] > 0)]


def names_a_file(alt: str | None, src: str) -> bool:
    """True when alt text says nothing a reader can use (empty, a path, a file name, a hash)."""
    alt = (alt or "").strip()
    return (alt == "" or ("/" in alt and " " not in alt) or alt == Path(src).name
            or re.search(r"\.(png|jpe?g|gif|svg|webp)$", alt, flags=re.I) is not None
            or re.fullmatch(r"[0-9a-f]{16,}", alt) is not None)


def check_alt_text(r: dict) -> list:
    # Images drawn by a saved widget (an explorer's output) are skipped: the static figure
    # beside the explorer is the one that carries the description.
    return [f"{i['src'][:100]} (alt={i['alt']!r}, no caption)" for i in r["images"]
            if i["inArticle"] and not i["inWidget"] and not i["caption"] and names_a_file(i["alt"], i["src"])]


def check_raw_output(r: dict) -> list:
    text, problems = r["visibleText"], []
    for marker in RAW_OUTPUT:
        at = text.find(marker)
        if at >= 0:
            problems.append(f"{marker!r} visible: ...{text[max(0, at - 60):at + 80]}...")
    return problems


def check_wide_outputs(r: dict) -> list:
    return [f"{text!r}..." for text in r["wideOutputs"]]


def check_explorers(r: dict) -> list:
    """Every explorer's script ran (it builds the controls) and each control changes the figure."""
    problems = []
    for e in r.get("explorers", []):
        if not (e["ready"] and e["controls"]):
            problems.append(f"explorer {e['id']}: no controls (its script did not run)")
        if not e["loaded"]:
            problems.append(f"explorer {e['id']}: its figure did not load")
        problems += [f"explorer {e['id']}: moving {c['name']} over its {c['values']} values changed nothing"
                     for c in e["controls"] if not c["changed"]]
        problems += [f"explorer {e['id']}: {c['name']} put back, the figure did not come back"
                     for c in e["controls"] if not c["restored"]]
    return problems


def check_widgets(r: dict) -> list:
    problems = []
    if r["widgetsRendered"] < r["widgetViews"]:
        problems.append(f"{r['widgetsRendered']} of {r['widgetViews']} saved widget views drawn")
    problems += [f"widget #{k} ({w['classes']}) drew nothing" for k, w in enumerate(r["widgets"])
                 if not w["text"]]
    return problems


def expected_colab_url(name: str) -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repository = config["repository"]
    repo = urlsplit(repository["url"]).path.strip("/")
    path = "/".join(p for p in (repository.get("path_to_book", "").strip("/"), f"{name}.ipynb") if p)
    return (f"{config['launch_buttons']['colab_url'].rstrip('/')}/github/{repo}/blob/"
            f"{repository.get('branch', 'main')}/{path}")


def check_colab(r: dict, name: str) -> list:
    expected = expected_colab_url(name)
    colab = sorted({link for link in r["links"] if "colab.research.google.com" in link})
    return [] if colab == [expected] else [f"Colab links {colab}, expected [{expected}]"]


def check_headings(r: dict) -> list:
    levels = [h["level"] for h in r["headings"]]
    problems = []
    if levels.count(1) != 1 or levels[0] != 1:
        problems.append(f"expected one h1, first; got levels {levels}")
    for prev, h in zip(r["headings"], r["headings"][1:]):
        if h["level"] > prev["level"] + 1:
            problems.append(f"h{prev['level']} {prev['text']!r} -> h{h['level']} {h['text']!r}")
    return problems


def check_network(r: dict) -> list:
    host = urlsplit(r["url"]).netloc
    urls = [x["url"] for x in r["resources"]] + r["scripts"]
    problems = [f"requested another host: {u}" for u in sorted(set(urls))
                if urlsplit(u).netloc not in (host, "")]
    problems += [f"HTTP {x['status']}: {x['url']}" for x in r["resources"]
                 if (x["status"] or 200) >= 400
                 and not any(p.search(urlsplit(x["url"]).path) for p in KNOWN_MISSING)]
    problems += [f"failed to load {u}" for u in r["failedLoads"]]
    problems += [f"font failed: {f}" for f in r["fontErrors"] if f not in KNOWN_FONT_ERRORS]
    problems += [f"JavaScript error: {e}" for e in r["jsErrors"]
                 if not any(p.search(e) for p in HARMLESS_JS_ERRORS)]
    return problems


# --- One test per check and page: a failure names the page and what was wrong. ---

@pytest.fixture
def page(observed, request):
    result = observed[request.param]
    if "error" in result:
        pytest.fail(f"{request.param}: {result['error']}", pytrace=False)
    return request.param, result


def per_page(test):
    return pytest.mark.parametrize("page", PAGES, indirect=True)(test)


def fail_if(problems: list, name: str, what: str):
    if problems:
        pytest.fail(f"{name}: {what}:\n  " + "\n  ".join(map(str, problems)), pytrace=False)


# What each check is about, as a failure names it, and the check.
PAGE_CHECKS = {
    "math not typeset": check_math,
    "images that did not load": check_images_load,
    "figures without alt text or a caption (set the code cell's metadata "
    "mystnb: {image: {alt: ...}} or mystnb: {figure: {caption: ...}})": check_alt_text,
    "raw output visible": check_raw_output,
    "output lines wider than the page (a horizontal scroll bar; _static/custom.css wraps "
    "them)": check_wide_outputs,
    "widgets not rendered": check_widgets,
    "explorers that do not respond to their controls": check_explorers,
    "headings out of order": check_headings,
    "the page needed another host or failed to load something": check_network,
}


@per_page
@pytest.mark.parametrize("what", PAGE_CHECKS, ids=[f.__name__ for f in PAGE_CHECKS.values()])
def test_page(page, what):
    fail_if(PAGE_CHECKS[what](page[1]), page[0], what)


@per_page
def test_colab_link_points_at_this_notebook(page):
    name, r = page
    if not (ROOT / f"{name}.ipynb").is_file():
        pytest.skip(f"{name} is not a notebook")
    fail_if(check_colab(r, name), name, "Colab launch link")


# --- The checks themselves: a synthetic page with one known fault of each kind. ---

def _png(width: int, height: int, grey: int) -> bytes:
    """A tiny grey PNG, written by hand (no imaging library needed)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes([grey]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def synthetic_explorer(*, broken: bool = False):
    """A small explorer's output cell (labsupport.widgets), or one whose script was lost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from nbformat.v4 import new_code_cell, new_output

    from labsupport import widgets

    def draw(level, width):
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.axhline(level, lw=width)
        return fig
    explorer = widgets._explorer("Synthetic explorer", [
        dict(name="level", label="level", values=[0, 1]),
        dict(name="width", label="width", values=[1, 4], kind="range")], draw, describe="a line")
    page = re.sub(r"<script>.*</script>", "", explorer.html, flags=re.S) if broken else explorer.html
    return explorer.element_id, new_code_cell("explore()", outputs=[new_output(
        "display_data", data={"text/html": page, "text/plain": explorer.text})])


def synthetic_book(folder: Path) -> str:
    """Writes the synthetic book; returns the id of its explorer without a script."""
    import base64

    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    def figure(grey: int, **metadata):
        png = base64.b64encode(_png(40, 20, grey)).decode()
        return new_code_cell("plot()", metadata=metadata, outputs=[
            new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})])
    nb = new_notebook(cells=[
        new_markdown_cell(
            "# Synthetic page\n\nInline math $a^2 + b^2$ and a display:\n\n"
            "$$\n\\frac{q k^\\top}{\\sqrt{d}}\n$$\n\n"
            "<p>A title with TeX a bibliography left raw: $O(n^2)$ memory.</p>\n\n"
            "<h4>A heading that skips two levels</h4>\n\n"
            '<img src="missing.png" alt="an image that is not there">\n\n'
            '<script src="https://cdn.jsdelivr.net/npm/nothing@1/index.js"></script>\n'),
        figure(60, mystnb={"image": {"alt": "A dark grey rectangle"}}),
        figure(120, mystnb={"figure": {"caption": "A mid-grey rectangle."}}),
        figure(200),
        new_code_cell("print(WIDE)", outputs=[new_output(          # no wrapping CSS here
            "stream", name="stdout", text="wide " * 60 + "\n")]),
        new_code_cell("fail()", outputs=[new_output(
            "error", ename="ValueError", evalue="boom",
            traceback=["\x1b[0;31mValueError\x1b[0m    Traceback (most recent call last)",
                       "\x1b[0;31mValueError\x1b[0m: boom"])]),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    _, working = synthetic_explorer()
    broken, lost = synthetic_explorer(broken=True)
    nb.cells += [working, lost]
    nbformat.write(nb, folder / "page.ipynb")
    (folder / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    (folder / "_config.yml").write_text(yaml.safe_dump({
        "title": "Synthetic", "only_build_toc_files": True,
        "exclude_patterns": [".*", "**/.*", "_build"],
        "execute": {"execute_notebooks": "off"},
        "parse": {"myst_enable_extensions": ["dollarmath", "amsmath"]},
        "sphinx": {"config": {"html_show_copyright": False}}}))
    return broken


def test_the_checks_catch_what_they_should(browser, web_assets, tmp_path):
    """Each check flags its fault on a synthetic page, and accepts the alt-text forms."""
    source, out = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    broken = synthetic_book(source)
    html = build_book(source, out)
    install_assets(html, web_assets, pages=["page"])
    with serve(html) as base:
        r = observe(browser, base + "page.html")

    assert r["typeset"] >= 2 and not r["untypeset"], r["untypeset"]
    assert [p for p in check_math(r) if "O(n^2)" in p] and all("raw TeX" in p for p in check_math(r))
    assert check_images_load(r) == ["did not load: missing.png"]
    figures = [i for i in r["images"] if i["inArticle"] and i["src"] != "missing.png"]
    assert [i["alt"] for i in figures][0] == "A dark grey rectangle"      # mystnb.image.alt -> alt
    assert [i["caption"] for i in figures][1] == "A mid-grey rectangle."  # mystnb.figure.caption
    assert len(check_alt_text(r)) == 1 and figures[2]["src"] in check_alt_text(r)[0]
    assert [p for p in check_raw_output(r) if "Traceback" in p]
    assert check_wide_outputs(r) == [repr("wide " * 15) + "..."]
    assert len(r["explorers"]) == 2 and all(c["changed"] for c in r["explorers"][0]["controls"])
    assert check_explorers(r) == [f"explorer {broken}: no controls (its script did not run)"]
    assert check_headings(r) == ["h1 'Synthetic page' -> h4 'A heading that skips two levels'"]
    network = check_network(r)
    cdn = "https://cdn.jsdelivr.net/npm/nothing@1/index.js"
    assert any(f"requested another host: {cdn}" in p for p in network)
    assert any(p.startswith("failed to load script https://cdn.jsdelivr.net") for p in network), network
