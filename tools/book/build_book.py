"""Build the HTML book, executing every notebook first, as many at a time as there are cores.

    python -m tools.book.build_book                 # what `make book` runs
    python -m tools.book.build_book --jobs 1        # one notebook at a time

The book's sources are copied to _build/source/ and its notebooks executed there (the
committed notebooks are not touched), each in a fresh kernel by
`tools.book.execute_notebooks`, the longest first. Running them side by side, one torch
thread each, is what brings the whole build within 15 minutes on 2 cores; each notebook's
results do not depend on it (on a CPU every notebook computes on one thread). Jupyter Book
then builds the HTML from those executions with execution off: _build/html/index.html,
with -W -n, like the tests. A notebook that fails stops the build and names the cell.
"""
import argparse
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


def execute_all(notebooks: list[Path], jobs: int, timeout: int) -> bool:
    ok = True
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, status, seconds, output in pool.map(lambda p: execute(p, jobs, timeout),
                                                      notebooks):
            if status == 0:
                print(f"build_book: {path.name} executed in {seconds:.0f} s", flush=True)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                        help="notebooks executed at a time (default: the cores this process may use)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more notebooks at a time")
    start = time.perf_counter()
    source = ROOT / "_build" / "source"
    notebooks = copy_sources(source)
    print(f"build_book: executing {len(notebooks)} notebooks, {args.jobs} at a time", flush=True)
    if not execute_all(notebooks, args.jobs, args.timeout):
        print("build_book: a notebook failed; no HTML built", file=sys.stderr)
        return 1
    status = build_html(source, ["-W", "-n", "--keep-going"])
    if status != 0:
        return status
    print(f"build_book: the book is in {ROOT / '_build' / 'html' / 'index.html'} "
          f"({time.perf_counter() - start:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
