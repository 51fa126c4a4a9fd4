"""labsupport installs like a package: the wheel holds every subpackage and the shipped
series, and 12.1 runs under nbval from it, in a fresh virtual environment, away from the
repository. The environment borrows this one's dependencies (torch, nbval, ...) through a
.pth file to a folder of links to them that leaves out this environment's own labsupport.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from labsupport.data import VIC_ELEC_FILE, VIC_ELEC_SHA256

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "chapters" / "12_1_self_attention.ipynb"


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
    """The wheel, built from a copy of what the package needs (pyproject.toml, README.md,
    labsupport/), the way `pip install .` or `pip install git+<repository>` builds it."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "labsupport", source / "labsupport",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp / "dist", source])
    return next((tmp / "dist").glob("labsupport-*.whl"))


def test_the_wheel_holds_every_subpackage_the_series_and_py_typed(wheel):
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


def test_12_1_runs_under_nbval_from_the_installed_wheel(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    (purelib / "borrowed.pth").write_text(f"{borrowed_dependencies(tmp_path / 'borrowed')}\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LABSUPPORT_DATA")}
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel], env=clean)

    away = tmp_path / "away"                         # no repository here or above
    away.mkdir()
    where = run([python, "-c", "import labsupport, labsupport.checks, labsupport.data as d; "
                 "print(labsupport.__file__); print(len(d.load_vic_elec()))"], cwd=away, env=clean)
    installed, rows = where.split()
    assert Path(installed).is_relative_to(purelib) and int(rows) == 26304, where

    shutil.copy(NOTEBOOK, away / NOTEBOOK.name)
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", away / "sanitize.cfg")
    run([python, "-m", "pytest", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "--nbval-cell-timeout=900", "--nbval-sanitize-with=sanitize.cfg", NOTEBOOK.name],
        cwd=away, env={**clean, "LABSUPPORT_PROFILE": "cpu"})
