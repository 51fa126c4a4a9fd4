#!/usr/bin/env bash
# The offline wheel bundle of tools/ci/gpu_check.sh: every wheel that the GPU check needs
# beyond torch, numpy and what a CUDA image of PyTorch ships, for one Python and platform.
# Build it on a machine with a network; carry it to a GPU machine without one.
#
#   tools/ci/gpu_wheels.sh [--python X.Y] [--platform manylinux_2_N_ARCH] [--out DIR]
#                          [--include NAME]...            build the bundle (pip download)
#   tools/ci/gpu_wheels.sh --install DIR --into PYTHON    install it offline, then check it
#   tools/ci/gpu_wheels.sh --list                         what is left out, and why
#
#   --python X.Y     the GPU machine's Python (default 3.12)
#   --platform P     its platform (default manylinux_2_28_x86_64: glibc 2.28 or newer, as on
#                    RHEL 8 and Ubuntu 20.04 or later); wheels of older manylinux tags count
#   --out DIR        where the bundle goes (default .cache/gpu-wheels, which git ignores):
#                    the wheels, requirements.txt (each wheel's exact pin) and bundle.json
#                    (Python, platform, what was left out and why, which wheels are the
#                    pure-Python ones and why, file count and bytes)
#   --include NAME   keep NAME in the bundle although the lists below leave it out (for a
#                    machine without it: --include numpy ...); it is downloaded if needed
#   --install DIR --into PYTHON
#                    what `gpu_check.sh --wheels DIR` runs: check that PYTHON is the bundle's
#                    Python and that its environment has what the bundle assumes, install
#                    every wheel with pip --no-index --no-deps --no-compile from DIR alone
#                    (pip's configuration files and PIP_* variables are ignored), then check
#                    that the requirements of what the check uses hold (pip check), save
#                    those on the omitted packages (missing, or at another version)
#
# The build prints the bundle's file count and size. It downloads with ${PYTHON:-python3}'s
# pip, whose configuration (index, cache) applies: a second build takes its files from
# pip's cache.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MAX_MIB=60                              # the bundle travels with the checkout

# --- what the bundle leaves out ---------------------------------------------------------------
# ASSUMED: on the GPU machine already, so not in the bundle (--install checks that they are).
# What a CUDA image of PyTorch ships. pytorch/pytorch's images (their Dockerfile): conda
# installs python, pyyaml, numpy and ipython, pip installs PyTorch's requirements.txt
# (requests, packaging, psutil, pyyaml, hypothesis, typing-extensions, sympy, jinja2, ...),
# then torch, torchvision and torchaudio. NVIDIA's PyTorch containers (nvcr.io/nvidia/pytorch)
# hold a full scientific stack with JupyterLab, and so each of these. A bare machine that
# has only torch lacks some: build its bundle with --include NAME for each one --install names.
ASSUMED=(
    "numpy|every PyTorch image ships it, the numpy its torch was built and tested with; the image's numpy is kept (requirements-gpu.txt's pin applies to an online install)"
    "jinja2|torch requires it: wherever torch is installed, so is jinja2"
    "markupsafe|torch requires it, through jinja2"
    "typing-extensions|torch requires it: wherever torch is installed, so is typing-extensions"
    "setuptools|torch requires it: wherever torch is installed, so is setuptools"
    "pillow|torchvision requires it, and CUDA images of PyTorch ship torchvision (pytorch/pytorch's install torch, torchvision and torchaudio; NVIDIA's containers ship it)"
    "pyyaml|pytorch/pytorch's images install it (conda, and PyTorch's requirements.txt); NVIDIA's containers ship it"
    "requests|PyTorch's requirements.txt installs it in pytorch/pytorch's images; NVIDIA's containers ship it"
    "urllib3|requests requires it (requests is assumed above)"
    "certifi|requests requires it (requests is assumed above)"
    "idna|requests requires it (requests is assumed above)"
    "charset-normalizer|requests requires it (requests is assumed above)"
    "packaging|PyTorch's requirements.txt installs it in pytorch/pytorch's images; NVIDIA's containers ship it"
    "psutil|PyTorch's requirements.txt installs it in pytorch/pytorch's images; NVIDIA's containers ship it"
    "pygments|ipython requires it, which conda installs in pytorch/pytorch's images; NVIDIA's containers ship it"
    "attrs|hypothesis requires it, which PyTorch's requirements.txt installs in pytorch/pytorch's images; NVIDIA's containers ship it"
    "wheel|PyTorch's requirements.txt installs it in pytorch/pytorch's images; every conda base has it"
    "scipy|NVIDIA's containers and Colab ship it (35 MiB, more than half the bundle's room); a bare image needs --include scipy"
)
# OMITTED: required by a package the check uses, but imported by it only when present, and
# never on the check's path; installed nowhere (--install's pip check forgives them).
OMITTED=(
    "debugpy|ipykernel's debugger (5 MiB): nbval never debugs, and ipykernel imports it only when it is there"
    "jedi|IPython's tab completion (5 MiB): nbval never completes, and IPython imports it only when it is there"
    "parso|jedi's parser (jedi is omitted above)"
    "widgetsnbextension|the classic Notebook's widget front end (2 MiB): the kernel side of ipywidgets never imports it, and the HTML book loads its widget manager from a CDN"
    "jupyterlab-widgets|JupyterLab's widget front end: the kernel side of ipywidgets never imports it"
)

# PURE: in the bundle, but as the release's pure-Python wheel (py3-none-any), not the platform
# wheel that pip prefers: the same version and the same .py files, less Cython builds of some
# of them that the package imports only when present (the .py runs otherwise), on no path of
# the check where speed matters. It keeps the bundle under MAX_MIB; a release without a pure
# wheel keeps its platform wheel (the build says so).
PURE=(
    "fonttools|5.2 MiB as a platform wheel, 1.2 MiB pure: matplotlib imports fontTools.agl (backend_agg, through dviread) and subsets fonts with it only for PDF and PostScript, which the check never writes; the compiled modules are speedups of the pure wheel's cu2qu, qu2cu, bezierTools, momentsPen, iup and feaLib lexer, which matplotlib never calls"
    "sqlalchemy|4.5 MiB as a platform wheel, 2.0 MiB pure: MyST-NB imports jupyter-cache's database models on every build (myst_nb.core.execute imports its cache client), so SQLAlchemy must be there, but the check's HTML build runs with execution off and never opens the cache's database; the compiled modules are speedups of the pure wheel's row, result and cache-key code (sqlalchemy.util.has_compiled_ext() says which runs)"
)

die() { echo "gpu_wheels: $*" >&2; exit 2; }

PYVER=3.12 PLATFORM=manylinux_2_28_x86_64 OUT="$ROOT/.cache/gpu-wheels" INCLUDE=() MODE=build
INSTALL_DIR="" INTO=""
while [ $# -gt 0 ]; do
    case "$1" in
        --python) PYVER="${2:?--python needs a version X.Y}"; shift 2 ;;
        --platform) PLATFORM="${2:?--platform needs a platform tag}"; shift 2 ;;
        --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
        --include) INCLUDE+=("${2:?--include needs a package name}"); shift 2 ;;
        --install) MODE=install INSTALL_DIR="${2:?--install needs the bundle folder}"; shift 2 ;;
        --into) INTO="${2:?--into needs a Python interpreter}"; shift 2 ;;
        --list) MODE=list; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

rows() {   # kind, then "name|reason" lines -> "kind<TAB>name<TAB>reason" lines
    local kind="$1"; shift
    local row
    for row in "$@"; do printf '%s\t%s\t%s\n' "$kind" "${row%%|*}" "${row#*|}"; done
}
LISTS="$(rows assumed "${ASSUMED[@]}"; rows omitted "${OMITTED[@]}")"
if [ "$MODE" = list ]; then
    printf '%s\n' "$LISTS"
    exit 0
fi

# --- install: offline, from the bundle alone, then checked -----------------------------------
pip_alone() {   # pip with no configuration file and no PIP_* variable: the bundle only
    local unset=() name
    for name in $(compgen -e); do
        case "$name" in PIP_*) unset+=(-u "$name") ;; esac
    done
    env "${unset[@]}" PIP_CONFIG_FILE=/dev/null "$INTO" -m pip --disable-pip-version-check "$@"
}

if [ "$MODE" = install ]; then
    [ -n "$INTO" ] || die "--install needs --into PYTHON (the environment to install into)"
    [ -d "$INSTALL_DIR" ] || die "no bundle folder $INSTALL_DIR"
    INSTALL_DIR="$(cd "$INSTALL_DIR" && pwd)"
    [ -f "$INSTALL_DIR/bundle.json" ] || die "no bundle.json in $INSTALL_DIR: not a bundle of tools/ci/gpu_wheels.sh (build one with: tools/ci/gpu_wheels.sh --python X.Y --out DIR)"
    "$INTO" -c "" 2>/dev/null || die "no Python interpreter $INTO"
    started=$SECONDS
    "$INTO" - "$INSTALL_DIR" "$INTO" <<'EOF' || exit 2
import importlib.metadata as metadata, json, sys
folder, into = sys.argv[1:3]
bundle = json.load(open(f"{folder}/bundle.json"))
here = "%d.%d" % sys.version_info[:2]
if bundle["python"] != here:
    sys.exit(f"gpu_wheels: the bundle in {folder} was built for Python {bundle['python']}, and {into} "
             f"is Python {here}: build one for it with tools/ci/gpu_wheels.sh --python {here}")
missing = []
for name in bundle["assumed"]:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        missing.append(name)
if missing:
    sys.exit(f"gpu_wheels: the bundle assumes that the environment has these (a PyTorch image does): "
             f"{', '.join(bundle['assumed'])}; missing here: {', '.join(missing)}; build the bundle on a "
             f"machine with a network with " + " ".join(f"--include {n}" for n in missing)
             + f", or install them into {sys.prefix}")
EOF
    pip_alone install --quiet --no-index --find-links "$INSTALL_DIR" --no-deps --no-compile \
        -r "$INSTALL_DIR/requirements.txt" || die "pip could not install the bundle in $INSTALL_DIR"
    checked="$(pip_alone check 2>&1 || true)"
    "$INTO" - "$INSTALL_DIR" "$checked" <<'EOF' || exit 2
import json, re, sys
folder, checked = sys.argv[1:3]
bundle = json.load(open(f"{folder}/bundle.json"))
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
ours = {canon(line.split("==")[0]) for line in open(f"{folder}/requirements.txt") if "==" in line}
ours |= {canon(n) for n in bundle["assumed"]}
omitted = {canon(n) for n in bundle["omitted"]}
problems = []
for line in checked.splitlines():
    m = re.match(r"(\S+) \S+ (requires|has requirement) ([A-Za-z0-9._-]+)", line)
    if not m or canon(m[1]) not in ours:
        continue                                  # the image's own business, not the check's
    if canon(m[3]) in omitted:
        continue                                  # never used by the check (bundle.json says why)
    problems.append(line)
if problems:
    sys.exit("gpu_wheels: installed, but these requirements do not hold:\n  " + "\n  ".join(problems)
             + "\n(for what the bundle assumes, build it with --include NAME; see tools/ci/gpu_wheels.sh --list)")
EOF
    prefix="$("$INTO" -c 'import sys; print(sys.prefix)')"
    count="$(grep -c '==' "$INSTALL_DIR/requirements.txt" || true)"
    echo "gpu_wheels: installed $count wheels from $INSTALL_DIR offline into $prefix in $((SECONDS - started)) s" \
         "(any already there at the same version were kept); the requirements hold"
    exit 0
fi

# --- build ------------------------------------------------------------------------------------
[[ "$PYVER" =~ ^3\.[0-9]+$ ]] || die "--python must be a version X.Y such as 3.12, got '$PYVER'"
[[ "$PLATFORM" =~ ^manylinux_2_([0-9]+)_([a-z0-9_]+)$ ]] \
    || die "--platform must be manylinux_2_N_ARCH such as manylinux_2_28_x86_64, got '$PLATFORM'"
glibc="${BASH_REMATCH[1]}" arch="${BASH_REMATCH[2]}"
platforms=()                             # pip takes a platform tag only as written: list them all
for ((n = glibc; n >= 5; n--)); do platforms+=(--platform "manylinux_2_${n}_${arch}"); done
[ "$glibc" -lt 17 ] || platforms+=(--platform "manylinux2014_${arch}")
[ "$glibc" -lt 12 ] || platforms+=(--platform "manylinux2010_${arch}")
platforms+=(--platform "manylinux1_${arch}")
for name in "${INCLUDE[@]}"; do
    [[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--include takes a package name, got '$name'"
done
PY="${PYTHON:-python3}"
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT")" ] && [ ! -f "$OUT/bundle.json" ]; then
    die "$OUT holds files and no bundle.json: give an empty folder or an earlier bundle's"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

echo "gpu_wheels: downloading requirements-gpu.txt${INCLUDE[*]:+ and ${INCLUDE[*]}} for CPython $PYVER on $PLATFORM"
"$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" "${platforms[@]}" \
    -r "$ROOT/requirements-gpu.txt" "${INCLUDE[@]}" -d "$stage" \
    || die "pip download failed (see above): the registry must be reachable, with wheels for $PYVER on $PLATFORM"

# the PURE packages: swap the platform wheel for the same release's pure-Python one, if any
pure_rows="$(rows pure "${PURE[@]}")"
while IFS=$'\t' read -r _ name _; do
    canon="$(tr 'A-Z' 'a-z' <<<"$name" | tr '._' '--')"
    for wheel in "$stage"/*.whl; do
        file="$(basename "$wheel")"
        [ "$(tr 'A-Z' 'a-z' <<<"${file%%-*}" | tr '._' '--')" = "$canon" ] || continue
        [[ "$file" != *-none-any.whl ]] || continue               # pure already
        version="$(cut -d- -f2 <<<"$file")"
        pure="$(mktemp -d "$stage/pure.XXXXXX")"
        if "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
               --python-version "$PYVER" --implementation py --abi none --platform any \
               "$name==$version" -d "$pure" 2>/dev/null && compgen -G "$pure/*-none-any.whl" >/dev/null; then
            rm "$wheel" && mv "$pure"/*-none-any.whl "$stage"/
        else
            echo "gpu_wheels: no pure-Python wheel of $name $version could be downloaded: its platform wheel stays in the bundle"
        fi
        rm -rf "$pure"
    done
done <<<"$pure_rows"

ROOT="$ROOT" INCLUDED="${INCLUDE[*]:-}" LISTS="$LISTS" PURE_ROWS="$pure_rows" \
    "$PY" - "$stage" "$OUT" "$PYVER" "$PLATFORM" "$MAX_MIB" <<'EOF'
import hashlib, json, os, re, shutil, sys, time
from pathlib import Path
stage, out, python, platform, max_mib = Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:5], float(sys.argv[5])
canon = lambda name: re.sub(r"[-_.]+", "-", name).lower()
included = {canon(n) for n in os.environ["INCLUDED"].split()}
left_out = {}                                          # kind -> {name: reason}
for line in os.environ["LISTS"].splitlines():
    kind, name, reason = line.split("\t")
    if canon(name) not in included:
        left_out.setdefault(kind, {})[canon(name)] = reason
for old in [*out.glob("*.whl"), out / "requirements.txt", out / "bundle.json"]:
    old.unlink(missing_ok=True)
pure = {canon(name): reason for _, name, reason in (l.split("\t") for l in os.environ["PURE_ROWS"].splitlines())}
kept, manifest = {}, dict(python=python, platform=platform, assumed={}, omitted={}, pure={})
for wheel in sorted(stage.glob("*.whl")):
    name, version = canon(wheel.name.split("-")[0]), wheel.name.split("-")[1]
    for kind in ("assumed", "omitted"):
        if name in left_out.get(kind, {}):
            manifest[kind][name] = dict(version=version, reason=left_out[kind][name])
            break
    else:
        kept[name] = version
        shutil.move(wheel, out / wheel.name)
        if name in pure and wheel.name.endswith("-none-any.whl"):
            manifest["pure"][name] = dict(version=version, reason=pure[name])
(out / "requirements.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(kept.items())))
wheels = sorted(out.glob("*.whl"))
requirements = (Path(os.environ.get("ROOT", ".")) / "requirements-gpu.txt")
manifest.update(
    created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), included=sorted(included),
    wheels=len(wheels), bytes=sum(w.stat().st_size for w in wheels),
    requirements_gpu_sha256=hashlib.sha256(requirements.read_bytes()).hexdigest() if requirements.is_file() else None)
(out / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
files = [p for p in out.iterdir() if p.is_file()]
size = sum(p.stat().st_size for p in files)
listing = lambda kind: ", ".join(f"{n} {i['version']}" for n, i in manifest[kind].items()) or "none"
print(f"gpu_wheels: left out, assumed on the GPU machine: {listing('assumed')}")
print(f"gpu_wheels: left out, not needed by the check: {listing('omitted')}")
print(f"gpu_wheels: pure-Python wheels, not the platform ones: {listing('pure')}")
print(f"gpu_wheels: {out}: {len(wheels)} wheels + 2 manifest files = {len(files)} files, "
      f"{size:,} bytes ({size / 2**20:.1f} MiB), for CPython {python} on {platform}")
if size > max_mib * 2**20:
    print(f"gpu_wheels: WARNING: over the {max_mib:.0f} MiB that the bundle should stay under")
EOF
