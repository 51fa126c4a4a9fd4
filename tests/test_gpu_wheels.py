"""tools/ci/gpu_wheels.sh: the offline wheel bundle of tools/ci/gpu_check.sh.

The slow tests build bundles from the package registry (pip's cache makes a second build
quick): one for Python 3.12 on manylinux_2_28_x86_64, installed offline into a fresh Python
3.12 environment; and one for this interpreter, for the CPU rehearsal of a GPU slot: a fresh
"image" environment that holds only torch and what the bundle assumes, the offline install
from the bundle, and a run with a budget too small for every notebook.
"""
import glob
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "tools" / "ci" / "gpu_wheels.sh"
CHECK = ROOT / "tools" / "ci" / "gpu_check.sh"
NB_12_1 = ROOT / "chapters" / "12_1_self_attention.ipynb"
NB_12_2 = ROOT / "chapters" / "12_2_transformer.ipynb"
MAX_BYTES = 60 * 2**20                     # the bundle travels with the checkout
NO_NETWORK = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
              "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
UNREACHABLE = ("Failed to establish a new connection", "Temporary failure in name resolution",
               "Network is unreachable", "ProxyError", "Could not resolve host")


def run(script, *args, env=None, timeout=900):
    env = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(script), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def listed() -> list[tuple[str, str, str]]:
    """The script's exclusions as (kind, name, reason) rows."""
    result = run(WHEELS, "--list")
    assert result.returncode == 0, result.stderr
    return [tuple(line.split("\t")) for line in result.stdout.splitlines() if line.strip()]


def build(out, python: str):
    """Build a bundle for Python `python` (X.Y); skip only when the registry is unreachable."""
    result = run(WHEELS, "--python", python, "--platform", "manylinux_2_28_x86_64", "--out", out)
    if result.returncode != 0 and any(s in result.stderr for s in UNREACHABLE):
        pytest.skip(f"the package registry is unreachable from here: {result.stderr[-300:]}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def find_python(version: str) -> str | None:
    """An interpreter of Python `version` (X.Y): pyenv's, one on the PATH, or uv's."""
    candidates = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")))
    candidates += [shutil.which(f"python{version}") or ""]
    if shutil.which("uv"):
        found = subprocess.run(["uv", "python", "find", version], capture_output=True, text=True)
        candidates.append(found.stdout.strip())
    for path in filter(None, candidates):
        probe = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return path
    return None


def wheel_names(folder) -> dict[str, str]:
    """{canonical name: version} of the wheels in `folder`."""
    return {canonicalize_name(name): str(version) for name, version, _, _ in
            (parse_wheel_filename(p.name) for p in Path(folder).glob("*.whl"))}


# --- the command line ----------------------------------------------------------------------------


def test_a_python_version_that_is_not_x_y_is_refused(tmp_path):
    result = run(WHEELS, "--python", "3", "--out", tmp_path)
    assert result.returncode == 2
    assert re.search(r"--python must be a version X\.Y .*3\.12.*got '3'", result.stderr)


def test_a_platform_that_is_not_manylinux_is_refused(tmp_path):
    result = run(WHEELS, "--python", "3.12", "--platform", "win_amd64", "--out", tmp_path)
    assert result.returncode == 2
    assert re.search(r"--platform must be manylinux_2_N_ARCH .*manylinux_2_28_x86_64.*got 'win_amd64'",
                     result.stderr)


def test_an_unknown_option_is_refused():
    result = run(WHEELS, "--pyhton", "3.12")
    assert result.returncode == 2 and "unknown option --pyhton" in result.stderr


def test_the_exclusions_are_listed_each_with_its_reason():
    rows = listed()
    kinds = {kind for kind, _, _ in rows}
    assert kinds == {"assumed", "omitted"}
    assert all(len(reason) > 20 for _, _, reason in rows)
    names = [name for _, name, _ in rows]
    assert len(names) == len(set(names)) and {"numpy", "debugpy"} <= set(names)


def test_what_is_excluded_as_torchs_requirement_is_one():
    """Checked against torch's own metadata here: whatever torch requires, directly or
    through its requirements, is on every machine that has torch."""
    def closure(name, seen):
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or "extra" not in str(req.marker):
                dep = canonicalize_name(req.name)
                if dep not in seen:
                    seen.add(dep)
                    closure(dep, seen)
        return seen
    torch_needs = closure("torch", set())
    claimed = [name for _, name, reason in listed() if reason.startswith("torch requires it")]
    assert claimed and all(canonicalize_name(name) in torch_needs for name in claimed), (claimed, torch_needs)


def test_the_omitted_packages_are_imported_only_optionally(tmp_path):
    """The kernel, IPython, the widgets and nbval import with every omitted package hidden
    (the blocker works: hiding tornado, which the kernel needs, breaks the import)."""
    omitted = [name for kind, name, _ in listed() if kind == "omitted"]
    modules = {"debugpy": "debugpy", "jedi": "jedi", "parso": "parso",
               "widgetsnbextension": "widgetsnbextension", "jupyterlab-widgets": "jupyterlab_widgets"}
    assert set(omitted) == set(modules)
    code = """
import sys
for name in BLOCKED:                 # as if not installed: import fails, find_spec gives None
    sys.modules[name] = None
import ipykernel.ipkernel, ipykernel.kernelapp, IPython.core.completer, ipywidgets, nbval.plugin
from ipykernel.debugger import _is_debugpy_available
assert not _is_debugpy_available and not IPython.core.completer.JEDI_INSTALLED
"""
    hidden = sorted(modules.values())
    ok = subprocess.run([sys.executable, "-c", f"BLOCKED = {hidden!r}\n{code}"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    control = subprocess.run([sys.executable, "-c", f"BLOCKED = ['tornado']\n{code}"],
                             capture_output=True, text=True)
    assert control.returncode != 0 and "tornado" in control.stderr


def fake_bundle(folder: Path, **manifest) -> Path:
    folder.mkdir()
    (folder / "requirements.txt").write_text("")
    (folder / "bundle.json").write_text(json.dumps({
        "python": "%d.%d" % sys.version_info[:2], "platform": "manylinux_2_28_x86_64",
        "assumed": {}, "omitted": {}, "wheels": 0, "bytes": 0, **manifest}))
    return folder


def test_install_refuses_a_bundle_for_another_python(tmp_path):
    bundle = fake_bundle(tmp_path / "b", python="3.99")
    result = run(WHEELS, "--install", bundle, "--into", sys.executable)
    assert result.returncode == 2
    here = "%d.%d" % sys.version_info[:2]
    assert f"was built for Python 3.99, and {sys.executable} is Python {here}" in result.stderr
    assert f"--python {here}" in result.stderr


def test_install_names_the_assumed_packages_that_are_missing(tmp_path):
    bundle = fake_bundle(tmp_path / "b", assumed={
        "numpy": {"version": "2.4.6", "reason": "every PyTorch image ships it"},
        "surely-not-installed": {"version": "1.0", "reason": "torch requires it"}})
    result = run(WHEELS, "--install", bundle, "--into", sys.executable)
    assert result.returncode == 2
    missing = re.search(r"missing here: ([^;]*);", result.stderr)
    assert missing and missing[1] == "surely-not-installed", result.stderr
    assert "--include surely-not-installed" in result.stderr


def test_install_reports_the_requirements_that_do_not_hold_save_on_omitted_packages(tmp_path):
    """A package of the bundle (already installed here) that needs a missing package fails
    the check; needing an omitted package at another version does not."""
    site = tmp_path / "site"
    info = site / "fakepkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n"
                                   "Requires-Dist: no-such-dependency>=1\nRequires-Dist: jedi>=999\n")
    (info / "RECORD").write_text("")
    bundle = fake_bundle(tmp_path / "b", omitted={"jedi": {"version": "0.20.1", "reason": "completion"}})
    (bundle / "requirements.txt").write_text("fakepkg==1.0\n")
    result = run(WHEELS, "--install", bundle, "--into", sys.executable, env={"PYTHONPATH": str(site)})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "these requirements do not hold:\n  fakepkg 1.0 requires no-such-dependency" in result.stderr
    assert "jedi" not in result.stderr.split("do not hold:")[1]


def test_install_needs_a_bundle(tmp_path):
    result = run(WHEELS, "--install", tmp_path, "--into", sys.executable)
    assert result.returncode == 2 and "no bundle.json" in result.stderr


# --- the bundle for Python 3.12 ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle_3_12(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheels-3.12")
    started = time.perf_counter()
    result = build(out, "3.12")
    return out, result, time.perf_counter() - started


@pytest.mark.slow
def test_the_3_12_bundle_is_small_and_says_its_size(bundle_3_12):
    out, result, _ = bundle_3_12
    files = [p for p in out.iterdir() if p.is_file()]
    wheels = [p for p in files if p.suffix == ".whl"]
    size = sum(p.stat().st_size for p in files)
    m = re.search(r"(\d+) wheels \+ 2 manifest files = (\d+) files, ([\d,]+) bytes \(([\d.]+) MiB\)",
                  result.stdout)
    assert m, result.stdout
    assert (int(m[1]), int(m[2]), int(m[3].replace(",", ""))) == (len(wheels), len(files), size)
    assert abs(float(m[4]) - size / 2**20) < 0.05
    assert size <= MAX_BYTES, f"{size / 2**20:.1f} MiB"
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["python"] == "3.12" and manifest["platform"] == "manylinux_2_28_x86_64"
    assert (manifest["wheels"], manifest["bytes"]) == (len(wheels), sum(p.stat().st_size for p in wheels))


@pytest.mark.slow
def test_the_3_12_bundle_holds_wheels_for_that_python_and_platform_only(bundle_3_12):
    out, _, _ = bundle_3_12
    names = wheel_names(out)
    for path in out.glob("*.whl"):
        for tag in parse_wheel_filename(path.name)[3]:
            assert tag.interpreter in ("py3", "py2") or re.fullmatch(r"cp3\d+", tag.interpreter), path
            assert tag.abi in ("none", "abi3", "cp312"), path
            glibc = re.fullmatch(r"manylinux_2_(\d+)_x86_64", tag.platform)
            assert tag.platform in ("any", "manylinux1_x86_64", "manylinux2010_x86_64",
                                    "manylinux2014_x86_64") or (glibc and int(glibc[1]) <= 28), path
    excluded = {canonicalize_name(name) for _, name, _ in listed()}
    assert not excluded & set(names)
    manifest = json.loads((out / "bundle.json").read_text())          # pure-Python, to stay small
    assert set(manifest["pure"]) == {"fonttools", "sqlalchemy"}
    for name, info in manifest["pure"].items():
        assert info["version"] == names[name] and len(info["reason"]) > 20
        [wheel] = [p.name for p in out.glob("*.whl") if canonicalize_name(p.name.split("-")[0]) == name]
        assert wheel.endswith("-py3-none-any.whl"), wheel
    assert not {"torch", "numpy"} & set(names)
    pinned = [Requirement(line) for line in (out / "requirements.txt").read_text().splitlines()]
    assert {canonicalize_name(r.name): str(r.specifier) for r in pinned} == {
        name: f"=={version}" for name, version in names.items()}


@pytest.mark.slow
def test_the_3_12_bundle_installs_offline_into_a_fresh_python_3_12(bundle_3_12, tmp_path):
    """A fresh 3.12 environment first lacks what the bundle assumes (the install says what);
    given those (from the registry, as an image has them), the bundle installs with the
    network blocked, imports, and keeps requirements-gpu.txt's pins."""
    out, _, _ = bundle_3_12
    python = find_python("3.12")
    if python is None:
        pytest.skip("no Python 3.12 here (pyenv, PATH or uv) to install the 3.12 bundle into")
    env = tmp_path / "py312"
    subprocess.run([python, "-m", "venv", str(env)], check=True)
    py = env / "bin" / "python"
    manifest = json.loads((out / "bundle.json").read_text())

    bare = run(WHEELS, "--install", out, "--into", py, env=NO_NETWORK)
    missing = re.search(r"missing here: ([^;]*);", bare.stderr)
    assert bare.returncode == 2 and missing, bare.stderr
    assert set(missing[1].split(", ")) == set(manifest["assumed"])        # a bare Python has none

    image = [f"{name}=={info['version']}" for name, info in manifest["assumed"].items()]
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--only-binary=:all:", *image], check=True)
    started = time.perf_counter()
    result = run(WHEELS, "--install", out, "--into", py, env=NO_NETWORK)
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"installed {manifest['wheels']} wheels" in result.stdout and seconds < 300

    check = """
import importlib.metadata as m, io, json
import sphinx, jupyter_book, myst_nb, nbval.plugin, ipykernel.ipkernel, ipywidgets, tqdm, nbclient
import sphinx_book_theme, sphinx_togglebutton, matplotlib.pyplot, IPython.core.completer
import myst_nb.sphinx_ext, jupyter_book.cli.main    # what a build imports: jupyter-cache, SQLAlchemy
from matplotlib.backends import backend_agg         # imports fontTools (pure-Python in the bundle)
import matplotlib.pyplot as plt, sqlalchemy.util
plt.plot([0, 1]); plt.title(r"$\\alpha^2$"); plt.savefig(io.BytesIO(), format="png")
assert not sqlalchemy.util.has_compiled_ext()       # the pure wheel's SQLAlchemy runs
print(json.dumps({d.metadata["Name"].lower().replace("_", "-"): d.version for d in m.distributions()}))
"""
    probe = subprocess.run([py, "-c", check], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    versions = json.loads(probe.stdout)
    for line in (ROOT / "requirements-gpu.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            name = canonicalize_name(req.name)
            assert req.specifier.contains(versions[name]), (name, versions[name], str(req.specifier))


# --- the CPU rehearsal of a GPU slot --------------------------------------------------------------


def image_environment(path: Path, names) -> Path:
    """A fresh environment that holds torch, `names` and what they need, as a PyTorch image
    does: each distribution linked from this interpreter's site-packages, nothing else."""
    venv.create(path, with_pip=False)
    site = Path(subprocess.run([path / "bin" / "python", "-c",
                                "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    todo, done = ["torch", *names], set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in done:
            continue
        done.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        tops = {Path(str(f)).parts[0] for f in dist.files if not str(f).startswith("..")}
        tops.discard("__pycache__")
        for top in tops:
            if not (site / top).exists():
                (site / top).symlink_to(dist.locate_file(top))
        todo += [Requirement(r).name for r in dist.requires or [] if "extra ==" not in r]
    return path / "bin" / "python"


def short_copy_of_12_1(path: Path) -> Path:
    """12.1's setup, imports and data cell: a notebook of a few seconds."""
    nb = nbformat.read(NB_12_1, 4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells = [code[0], code[1], next(c for c in code if 'print("tokens:"' in c.source)]
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_cpu_rehearsal_installs_the_bundle_offline_and_keeps_to_a_tiny_budget(tmp_path):
    """The whole GPU-slot sequence on the CPU: a bundle for this interpreter, an "image"
    that has torch and what the bundle assumes, gpu_check.sh creating its environment on
    that image and installing from the bundle with the network blocked, then a budget that
    holds the short notebook but not 12.2 or the HTML build: both are reported as skipped."""
    here = "%d.%d" % sys.version_info[:2]
    bundle = tmp_path / "wheels"
    build(bundle, here)
    assumed = json.loads((bundle / "bundle.json").read_text())["assumed"]
    image = image_environment(tmp_path / "image", assumed)
    short = short_copy_of_12_1(tmp_path / "short_12_1.ipynb")
    previous = tmp_path / "previous.json"          # an earlier run's times: 12.2 and the HTML are long
    previous.write_text(json.dumps({"notebooks": [
        {"notebook": short.name, "status": "passed", "seconds": 5.0},
        {"notebook": NB_12_2.name, "status": "passed", "seconds": 5000.0}],
        "run": {"html": {"status": "built", "seconds": 5000.0}}}))
    out, budget = tmp_path / "out", 300
    started = time.perf_counter()
    result = run(CHECK, "--out", out, "--wheels", bundle, "--profile", "cpu", "--budget", budget,
                 "--previous", previous, "--notebooks", short, NB_12_2,
                 env={**NO_NETWORK, "PYTHON": str(image), "VENV": str(tmp_path / "venv-gpu"),
                      "CUDA_VISIBLE_DEVICES": ""})
    wall = time.perf_counter() - started
    log = result.stdout[-4000:] + result.stderr[-4000:]
    assert result.returncode == 4, log                       # incomplete, nothing failed
    report = json.loads((out / "report.json").read_text())
    [ran] = report["notebooks"]
    assert ran["notebook"] == short.name and ran["status"] == "passed", log
    [skipped] = report["skipped"]
    assert skipped["notebook"] == NB_12_2.name and skipped["estimate_s"] == pytest.approx(5500.0)
    assert "budget" in skipped["reason"] and skipped["left_s"] < budget
    run_ = report["run"]
    assert run_["budget_s"] == budget and run_["html"]["status"] == "skipped"
    assert "5500 s" in run_["html"]["reason"] and run_["install"]["from"] == f"wheels {bundle}"
    assert 0 < run_["install"]["seconds"] < run_["seconds"] <= budget and wall <= budget + 30
    markdown = (out / "report.md").read_text()
    assert f"- {NB_12_2.name}: not launched" in markdown and "HTML: skipped" in markdown
    assert not (out / "html").exists()
    # the environment: the bundle's packages in the new venv, torch from the image
    where = subprocess.run([tmp_path / "venv-gpu" / "bin" / "python", "-c",
                            "import sphinx, torch, sys; print(sphinx.__file__); print(torch.__file__);"
                            "print(sys.prefix)"], capture_output=True, text=True, check=True)
    sphinx_at, torch_at, prefix = where.stdout.split()
    assert sphinx_at.startswith(prefix) and not torch_at.startswith(prefix)
