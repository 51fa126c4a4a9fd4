"""Build the HTML book, executing the notebooks first, as many at a time as there are cores.

    python -m tools.book.build_book                 # what `make book` runs
    python -m tools.book.build_book --jobs 1        # one notebook at a time
    python -m tools.book.build_book --force         # re-execute every notebook

The book's sources are copied to _build/source/ and its notebooks executed there (the
committed notebooks are not touched), each in a fresh kernel by
`tools.book.execute_notebooks`, the longest first. Running them side by side, one torch
thread each, is what brings the whole build within 15 minutes on 2 cores; each notebook's
results do not depend on it (on a CPU every notebook computes on one thread). Jupyter Book
then builds the HTML from those executions with execution off: _build/html/index.html,
with -W -n, like the tests. A notebook that fails stops the build and names the cell.

Executions are cached in _build/executed/: a notebook is executed again only when its
cells (outputs aside) or what it runs on changed since its cached execution: any file of
`labsupport`, the pins (requirements*.txt, pyproject.toml), the executor, or the profile
(`$LABSUPPORT_PROFILE`, the device). When no notebook and no page changed since the last
build, the HTML is left as it is.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("_config.yml", "_toc.yml", "references.bib", "_static", "chapters")
WALL = re.compile(r"'wall_s': ([0-9.]+)")     # in the run record of a notebook's last cell
CACHE = ROOT / "_build" / "executed"
# what every execution depends on besides the notebook itself
RUNS_ON = ("labsupport", "requirements.txt", "requirements-instructor.txt", "pyproject.toml",
           "tools/book/execute_notebooks.py", "tools/book/stepped_polling.py")


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def environment_key() -> str:
    """What every notebook's execution depends on: the package's files, the pins, the
    executor, the profile asked for and whether CUDA is there."""
    root, files = ROOT, []
    for name in RUNS_ON:
        path = root / name
        found = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
            if path.is_dir() else [path] if path.is_file() else []
        files += [(str(p.relative_to(root)), p.read_bytes()) for p in found]
    import torch
    return _digest(*(x for pair in files for x in pair), os.environ.get("LABSUPPORT_PROFILE", ""),
                   torch.cuda.is_available())


def notebook_key(path: Path, environment: str) -> str:
    """The key of one execution: the notebook's cells without their outputs, and the environment."""
    nb = nbformat.read(path, as_version=4)
    cells = [(c.cell_type, c.source, json.dumps(c.metadata, sort_keys=True)) for c in nb.cells]
    return _digest(environment, json.dumps(cells))


def cached(path: Path, key: str, cache: Path | None = None) -> bool:
    """Put the cached execution of ``path`` in its place if its key matches; True if it did."""
    cache = CACHE if cache is None else cache
    stored, keyfile = cache / path.name, cache / f"{path.stem}.key"
    if not (stored.is_file() and keyfile.is_file() and keyfile.read_text() == key):
        return False
    shutil.copy(stored, path)
    return True


def store(path: Path, key: str, cache: Path | None = None) -> None:
    """Keep the execution of ``path`` under ``key``."""
    cache = CACHE if cache is None else cache
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, cache / path.name)
    (cache / f"{path.stem}.key").write_text(key)


def recorded_seconds(path: Path) -> float:
    """How long the committed execution of a notebook took (its run record), else 0."""
    nb = nbformat.read(path, as_version=4)
    found = WALL.search(str(nb.cells[-1].get("outputs", []))) if nb.cells else None
    return float(found[1]) if found else 0.0


def copy_sources(source: Path) -> list[Path]:
    """The book's pages, configuration and notebooks in ``source``; its notebooks, longest first."""
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, source / name)
    for page in ROOT.glob("*.md"):
        shutil.copy(page, source / page.name)
    notebooks = sorted((source / "chapters").glob("*.ipynb"))
    return sorted(notebooks, key=lambda p: -recorded_seconds(ROOT / "chapters" / p.name))


def execute(path: Path, jobs: int, timeout: int) -> tuple[Path, int, float, str]:
    """Execute one notebook in place in its own process: (path, exit status, seconds, output)."""
    env = dict(os.environ)
    if jobs > 1:                                  # side by side: one thread each, or they spin
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tools.book.execute_notebooks", str(path),
                           "--timeout", str(timeout)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return path, done.returncode, time.perf_counter() - start, done.stdout + done.stderr


def execute_all(notebooks: list[Path], jobs: int, timeout: int, keys: dict | None = None) -> bool:
    """Execute ``notebooks`` side by side; with ``keys`` (path -> key) keep each success in the cache."""
    ok = True
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, status, seconds, output in pool.map(lambda p: execute(p, jobs, timeout),
                                                      notebooks):
            if status == 0:
                print(f"build_book: {path.name} executed in {seconds:.0f} s", flush=True)
                if keys is not None:
                    store(path, keys[path])
            else:
                print(f"build_book: {path.name} FAILED after {seconds:.0f} s:\n{output[-4000:]}",
                      flush=True)
                ok = False
    return ok


def executed_config(config: dict) -> dict:
    """``config`` (a _config.yml) for a build from notebooks executed already: execution off,
    and without the local extensions, which help execution only. Also what the GPU check
    and the tests' book builds use."""
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    config.setdefault("sphinx", {}).pop("local_extensions", None)
    return config


def build_html(source: Path, options: list[str]) -> int:
    """Jupyter Book on the executed copies, execution off; the HTML lands in _build/html."""
    config = executed_config(yaml.safe_load((source / "_config.yml").read_text()))
    (source / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    html = ROOT / "_build" / "html"
    shutil.rmtree(html, ignore_errors=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    status = subprocess.run([str(jb), "build", str(source), "--all", *options]).returncode
    if status == 0:
        shutil.move(source / "_build" / "html", html)
    return status


def sources_key() -> str:
    """Every source of the book: its pages, configuration, static files and notebooks."""
    root = ROOT
    paths = [root / name for name in SOURCES] + sorted(root.glob("*.md"))
    files = []
    for path in paths:
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        files += [(str(p.relative_to(root)), p.read_bytes()) for p in found if p.is_file()]
    return _digest(*(x for pair in files for x in pair))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                        help="notebooks executed at a time (default: the cores this process may use)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--force", action="store_true", help="re-execute every notebook, cache or not")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more notebooks at a time")
    start = time.perf_counter()
    environment = environment_key()
    built_key = _digest(environment, sources_key())
    html, stamp = ROOT / "_build" / "html", CACHE / "html.key"    # the last build's sources
    if not args.force and (html / "index.html").is_file() and stamp.is_file() \
            and stamp.read_text() == built_key:
        print(f"build_book: nothing changed since the last build; the book is in {html / 'index.html'}")
        return 0
    source = ROOT / "_build" / "source"
    notebooks = copy_sources(source)
    keys = {path: notebook_key(path, environment) for path in notebooks}
    todo = [p for p in notebooks if args.force or not cached(p, keys[p])]
    for path in notebooks:
        if path not in todo:
            print(f"build_book: {path.name} unchanged: its cached execution is used", flush=True)
    print(f"build_book: executing {len(todo)} notebooks, {args.jobs} at a time", flush=True)
    if not execute_all(todo, args.jobs, args.timeout, keys):
        print("build_book: a notebook failed; no HTML built", file=sys.stderr)
        return 1
    status = build_html(source, ["-W", "-n", "--keep-going"])
    if status != 0:
        return status
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(built_key)
    print(f"build_book: the book is in {ROOT / '_build' / 'html' / 'index.html'} "
          f"({time.perf_counter() - start:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
