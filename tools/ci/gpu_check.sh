#!/usr/bin/env bash
# Re-execute the notebooks on this machine's GPU under nbval, build the HTML book from
# those executions, and write a report: what the GPU workflow (.github/workflows/gpu.yml)
# does, on any GPU machine, with or without a network.
#
#   tools/ci/gpu_check.sh [--out DIR] [--wheels DIR] [--profile gpu|cpu] [--python PY]
#                      [--notebooks NB...] [--no-html] [--dry-run]
#
#   --out DIR        results (default gpu-out): notebooks/ (each notebook as executed),
#                    report.json and report.md (per notebook: result, time, device, torch
#                    and CUDA versions, peak GPU memory), html/ (the book, whose page
#                    "Where the numbers came from" shows these executions and the
#                    report), pytest.log
#   --wheels DIR     install what is missing offline, from this folder of wheels only
#   --profile P      labsupport size profile (default gpu; it needs CUDA)
#   --python PY      run with this interpreter's environment as it is: no venv, no installs
#   --notebooks ...  these notebooks instead of every one in chapters/ (the HTML build
#                    takes the committed outputs of the others)
#   --no-html        skip the HTML build
#   --dry-run        the CPU rehearsal the test suite runs: CUDA hidden, profile cpu,
#                    12.1 only, the current environment ($PYTHON, else python3)
#
# Without --python or --dry-run the run uses the venv $VENV (default .venv-gpu), created
# with --system-site-packages so that a preinstalled CUDA build of torch is kept. torch is
# installed only when the venv cannot import it (from --wheels, else from the index, which
# gives a CUDA build on Linux); the rest comes from requirements-gpu.txt (requirements.txt
# without the CPU torch pin). labsupport is used from this checkout (PYTHONPATH).
#
# Exit status: 0 when every notebook passed nbval (the checked outputs equal the committed
# ones) and the HTML built; otherwise non-zero. Budget: under 8 minutes on one data-centre
# GPU (an estimate; report.md has the times of the run).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT=gpu-out WHEELS="" PROFILE="" PY="" HTML=1 DRY=0 NOTEBOOKS=()
BUDGET_S=480

die() { echo "gpu_check: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
        --wheels) WHEELS="${2:?--wheels needs a folder}"; shift 2 ;;
        --profile) PROFILE="${2:?--profile needs gpu or cpu}"; shift 2 ;;
        --python) PY="${2:?--python needs an interpreter}"; shift 2 ;;
        --no-html) HTML=0; shift ;;
        --dry-run) DRY=1; shift ;;
        --notebooks) shift
            while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do NOTEBOOKS+=("$1"); shift; done ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
[ -z "$WHEELS" ] || WHEELS="$(cd "$WHEELS" && pwd)" || die "no wheels folder $WHEELS"
for i in "${!NOTEBOOKS[@]}"; do
    [ -f "${NOTEBOOKS[$i]}" ] || die "no notebook ${NOTEBOOKS[$i]}"
    NOTEBOOKS[$i]="$(cd "$(dirname "${NOTEBOOKS[$i]}")" && pwd)/$(basename "${NOTEBOOKS[$i]}")"
done
cd "$ROOT"

if [ "$DRY" = 1 ]; then
    export CUDA_VISIBLE_DEVICES=""
    PROFILE="${PROFILE:-cpu}" PY="${PY:-${PYTHON:-python3}}"
    [ ${#NOTEBOOKS[@]} -gt 0 ] || NOTEBOOKS=("$ROOT/chapters/12_1_self_attention.ipynb")
fi
PROFILE="${PROFILE:-gpu}"
case "$PROFILE" in gpu|cpu) ;; *) die "--profile must be gpu or cpu, got $PROFILE" ;; esac
[ ${#NOTEBOOKS[@]} -gt 0 ] || NOTEBOOKS=("$ROOT"/chapters/*.ipynb)

# --- the environment ---------------------------------------------------------------------
pip_install() {
    if [ -n "$WHEELS" ]; then
        "$PY" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$WHEELS" "$@"
    else
        "$PY" -m pip install --quiet --disable-pip-version-check "$@"
    fi
}

if [ -z "$PY" ]; then
    VENV="${VENV:-$ROOT/.venv-gpu}"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "gpu_check: creating $VENV (with the system's site-packages)"
        "${PYTHON:-python3}" -m venv --system-site-packages "$VENV"
    fi
    PY="$VENV/bin/python"
    if ! "$PY" -c "import torch" 2>/dev/null; then
        echo "gpu_check: torch is missing; installing it${WHEELS:+ from $WHEELS}"
        pip_install torch || die "could not install torch${WHEELS:+ from $WHEELS (it needs torch and its dependencies)}"
    fi
    echo "gpu_check: installing what is missing from requirements-gpu.txt${WHEELS:+ (offline)}"
    pip_install -r requirements-gpu.txt \
        || die "could not install requirements-gpu.txt${WHEELS:+ from $WHEELS (see the README: pip download)}"
fi
command -v "$PY" >/dev/null || [ -x "$PY" ] || die "no python interpreter $PY"

"$PY" - "$PROFILE" <<'EOF' || exit 2
import sys, torch
profile = sys.argv[1]
cuda = torch.cuda.is_available()
where = torch.cuda.get_device_name(0) if cuda else "no CUDA device"
print(f"gpu_check: torch {torch.__version__} (CUDA {torch.version.cuda}) on {where}; profile {profile}")
if profile == "gpu" and not cuda:
    sys.exit("gpu_check: the gpu profile needs CUDA; use --profile cpu or --dry-run here")
EOF

# --- one nbval pass: the regression check and the executions, with the report -----------
export LABSUPPORT_PROFILE="$PROFILE"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
rm -rf "$OUT/notebooks" "$OUT/html" "$OUT/report.json" "$OUT/report.md"
status=0
"$PY" -m pytest -c "$ROOT/pyproject.toml" --rootdir "$ROOT" -p no:cacheprovider \
    -p tools.ci.nbval_report --report-dir "$OUT" "${NOTEBOOKS[@]}" 2>&1 | tee "$OUT/pytest.log" \
    || status=$?
[ -f "$OUT/report.json" ] || die "nbval wrote no report (see $OUT/pytest.log)"

# --- the HTML book from those executions (the committed outputs for notebooks not run) ---
if [ "$HTML" = 1 ]; then
    book="$(mktemp -d)"
    trap 'rm -rf "$book"' EXIT
    cp -r _config.yml _toc.yml ./*.md references.bib _static chapters "$book"/
    cp "$OUT"/notebooks/*.ipynb "$book/chapters/" 2>/dev/null || true
    "$PY" - "$book/_config.yml" "$OUT/report.json" <<'EOF'
import sys, yaml
path, report = sys.argv[1:3]
config = yaml.safe_load(open(path))
config["execute"]["execute_notebooks"] = "off"     # render this run's outputs as they are
# the page "Where the numbers came from" adds what nbval found (labsupport.sphinx_provenance)
config.setdefault("sphinx", {}).setdefault("config", {})["provenance_nbval_report"] = report
open(path, "w").write(yaml.safe_dump(config))
EOF
    echo "gpu_check: building the HTML book"
    if "$PY" -c "from jupyter_book.cli.main import main; main()" build "$book" --all -W -n \
            --keep-going > "$OUT/html-build.log" 2>&1; then
        mv "$book/_build/html" "$OUT/html"
    else
        tail -30 "$OUT/html-build.log"
        echo "gpu_check: the HTML build failed (see $OUT/html-build.log)"
        [ "$status" != 0 ] || status=3
    fi
fi

# --- the report ----------------------------------------------------------------------------
echo
cat "$OUT/report.md"
elapsed=$SECONDS                     # since the script started, installs included
echo "gpu_check: ${elapsed} s in all; results in $OUT"
if [ "$PROFILE" = gpu ] && [ "$elapsed" -gt "$BUDGET_S" ]; then
    echo "gpu_check: WARNING: over the ${BUDGET_S} s budget; see the slowest cells above"
fi
[ "$status" = 0 ] || echo "gpu_check: FAILED (status $status)"
exit "$status"
