"""labsupport installs like a package: the wheel holds every subpackage and the shipped
series, and a notebook runs under nbval from it, in a fresh virtual environment, away
from the repository. The environment borrows this one's dependencies (torch, nbval, ...)
through a .pth file to a folder of links to them that leaves out this environment's own
labsupport.

The notebook is a small one written here, not a chapter (nbval already executes each
chapter against the repository): the book's setup cell, an import of every module the
repository holds (the list is checked against the source tree), the shipped series by
its shape, the kernel registry, a self-check and the profile. What a chapter needs from
an installed labsupport is all in there, at a few seconds instead of a chapter's minutes.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from labsupport.data import VIC_ELEC_FILE, VIC_ELEC_SHA256
from tools.book.set_repository import repository_url, setup_cell

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]



def run(command, **options):
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, **options)
    assert done.returncode == 0, (f"{' '.join(map(str, command))} failed:\n"
                                  f"{done.stdout[-4000:]}{done.stderr[-4000:]}")
    return done.stdout


def subpackages():
    """Every package in the repository's labsupport/, as paths inside a wheel."""
    return {path.parent.relative_to(ROOT).as_posix() for path in (ROOT / "labsupport").rglob("__init__.py")}


def site_packages():
    """This environment's folders of installed distributions."""
    return [Path(p) for p in sys.path
            if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]


def borrowed_dependencies(folder: Path) -> Path:
    """Links to everything installed here except labsupport itself (and .pth files, which
    would not run from there anyway)."""
    folder.mkdir()
    for packages in site_packages():
        for entry in packages.iterdir():
            name = entry.name.lower()
            if name.startswith(("labsupport", "__editable__")) or name.endswith(".pth"):
                continue
            if not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built from a copy of what the package needs (pyproject.toml, README.md, the licences,
    labsupport/), the way `pip install .` or `pip install git+<repository>` builds it."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-CONTENT"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "labsupport", source / "labsupport",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp / "dist", source])
    return next((tmp / "dist").glob("labsupport-*.whl"))


def test_the_wheel_holds_every_subpackage_the_series_and_py_typed(wheel):
    import labsupport
    assert wheel.name.startswith(f"labsupport-{labsupport.__version__}-"), "the version has one home"
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = subpackages()
    assert {"labsupport", "labsupport/checks", "labsupport/datasets"} <= packages
    for package in packages:
        assert f"{package}/__init__.py" in names, f"{package} is missing from the wheel"
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "labsupport").rglob("*.py")}
    assert modules <= names, f"missing: {sorted(modules - names)}"
    series = f"labsupport/datasets/{VIC_ELEC_FILE}"
    assert series in names and "labsupport/py.typed" in names
    assert hashlib.sha256(zipfile.ZipFile(wheel).read(series)).hexdigest() == VIC_ELEC_SHA256


def modules() -> list[str]:
    """Every module and package under the repository's labsupport/, dotted, sorted."""
    names = set()
    for path in (ROOT / "labsupport").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names - {"labsupport"})


def cell(source: str, printed: str = "") -> nbformat.NotebookNode:
    """A code cell whose committed output is ``printed`` on stdout (what nbval compares)."""
    outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
    return new_code_cell(source, outputs=outputs)


def installed_notebook() -> nbformat.NotebookNode:
    """What a chapter needs from an installed labsupport, with the outputs that prove it."""
    nb = new_notebook(cells=[
        cell(setup_cell(repository_url())),                # does nothing: labsupport is installed
        cell("import importlib, pkgutil\nimport labsupport\n"
             "names = sorted(m.name for m in pkgutil.walk_packages(labsupport.__path__, 'labsupport.'))\n"
             "for name in names:\n    importlib.import_module(name)\nprint(*names, sep='\\n')",
             "\n".join(modules()) + "\n"),
        cell("from labsupport.data import load_vic_elec\nseries = load_vic_elec()\n"
             "print(series.values.shape, series.columns)",
             "(26304, 3) ('demand_mw', 'temperature_c', 'holiday')\n"),
        cell("import torch\nfrom labsupport.attention import KERNELS\nq = torch.ones(1, 2, 5, 4)\n"
             "print(sorted(KERNELS), tuple(KERNELS['flash'](q, q, q).shape))",
             "['flash', 'linear', 'local', 'longformer', 'naive', 'performer', 'sdpa'] (1, 2, 5, 4)\n"),
        cell("from labsupport import profile\nfrom labsupport.sections.self_attention import checks\n"
             "def score_gradient(s, v):\n    a = s.softmax(-1)\n"
             "    return a * (v - (a * v).sum(-1, keepdim=True))\n"
             "passed = checks.score_gradient(score_gradient)\n"
             "print(bool(passed), profile.current().name)",
             "True cpu\n"),
    ])
    for count, code in enumerate(nb.cells, start=1):
        code.execution_count = count                       # run top to bottom, as nbval expects
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_a_notebook_runs_under_nbval_from_the_installed_wheel(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    (purelib / "borrowed.pth").write_text(f"{borrowed_dependencies(tmp_path / 'borrowed')}\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LABSUPPORT_DATA")}
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel], env=clean)

    away = tmp_path / "away"                         # no repository here or above
    away.mkdir()
    where = run([python, "-c", "import labsupport; print(labsupport.__file__)"], cwd=away, env=clean)
    assert Path(where.strip()).is_relative_to(purelib), where

    nbformat.write(installed_notebook(), away / "installed.ipynb")
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", away / "sanitize.cfg")
    run([python, "-m", "pytest", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "--nbval-cell-timeout=900", "--nbval-sanitize-with=sanitize.cfg", "installed.ipynb"],
        cwd=away, env={**clean, "LABSUPPORT_PROFILE": "cpu"})

