#!/usr/bin/env bash
# Re-execute the notebooks on this machine's GPU under nbval, build the HTML book from
# those executions, and write a report, within a time budget: what the GPU workflow
# (.github/workflows/gpu.yml) does, on any GPU machine, with or without a network.
#
#   tools/ci/gpu_check.sh [--out DIR] [--wheels DIR] [--budget SECONDS|none]
#                      [--previous REPORT] [--profile gpu|cpu] [--python PY]
#                      [--notebooks NB...] [--no-html] [--dry-run]
#
#   --out DIR        results (default gpu-out): notebooks/ (each notebook as executed),
#                    report.json and report.md (per notebook: result, time, device, torch
#                    and CUDA versions, peak GPU memory; what was not launched and why; the
#                    install and the HTML build), html/ (the book, whose page "Where the
#                    numbers came from" shows these executions and the report), pytest.log
#   --wheels DIR     install offline from this folder alone: a bundle that
#                    tools/ci/gpu_wheels.sh built (pip --no-index, then checked), or any
#                    folder of wheels for requirements-gpu.txt
#   --budget S       seconds for the whole run from the script's start, installs included
#                    (default 600; none: no budget). A notebook is launched only if its
#                    estimate fits in what is left (less 15 s kept for the report); one that
#                    runs past the budget is interrupted at it; the HTML build starts only if
#                    its estimate fits, and is stopped at the budget. What did not fit is in
#                    the report, with the reason.
#   --previous R     an earlier run's report.json: its times (plus 10%) are the estimates;
#                    without it, 180 s a notebook and 150 s for the HTML build
#   --profile P      labsupport size profile (default gpu; it needs CUDA)
#   --python PY      run with this interpreter's environment as it is: no venv, no installs
#   --notebooks ...  these notebooks instead of every one in chapters/ (the HTML build
#                    takes the committed outputs of the others)
#   --no-html        skip the HTML build
#   --dry-run        the CPU rehearsal the test suite runs: CUDA hidden, profile cpu,
#                    12.1 only, the current environment ($PYTHON, else python3), no budget
#
# Without --python or --dry-run the run uses the venv $VENV (default .venv-gpu), created on
# ${PYTHON:-python3}: it sees that interpreter's packages (its site-packages, also when it is
# itself a venv), so that a preinstalled CUDA build of torch is kept. torch is installed only
# when the venv cannot import it (from --wheels, else from the index, which gives a CUDA
# build on Linux); the rest comes from the bundle, or from requirements-gpu.txt
# (requirements.txt without the CPU torch pin). labsupport is used from this checkout.
#
# Exit status: 0 every notebook passed nbval (the checked outputs equal the committed ones)
# and the HTML built; 1 a notebook failed; 2 a usage or environment error; 3 the HTML build
# failed; 4 incomplete: something was skipped or stopped for the budget, nothing failed.
# The 600 s default is meant to hold every notebook and the HTML on one data-centre GPU;
# that has not been measured yet: report.md has the times of each run.
set -euo pipefail
START="$(date +%s.%N)"                  # the budget counts from here

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT=gpu-out WHEELS="" PROFILE="" PY="" HTML=1 DRY=0 NOTEBOOKS=() BUDGET="" PREVIOUS=""

die() { echo "gpu_check: $*" >&2; exit 2; }
fail() {   # an environment that cannot run the check: say so in the report too, then stop
    printf '# Notebook execution report\n\nNothing ran: %s\n' "$*" > "$OUT/report.md"
    printf '{"notebooks": [], "skipped": [], "passed": false, "run": {"error": "%s"}}\n' \
        "$(printf '%s' "$*" | sed 's/[\"]/\\&/g')" > "$OUT/report.json"
    die "$@"
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
        --wheels) WHEELS="${2:?--wheels needs a folder}"; shift 2 ;;
        --budget) BUDGET="${2:?--budget needs seconds, or none}"; shift 2 ;;
        --previous) PREVIOUS="${2:?--previous needs a report.json}"; shift 2 ;;
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

[ -n "$BUDGET" ] || { [ "$DRY" = 1 ] && BUDGET=none || BUDGET=600; }
if [ "$BUDGET" != none ]; then
    [[ "$BUDGET" =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v b="$BUDGET" 'BEGIN { exit !(b > 0) }' \
        || die "--budget must be a number of seconds above 0, or none; got '$BUDGET'"
fi
if [ -n "$PREVIOUS" ]; then
    [ -f "$PREVIOUS" ] || die "no previous report $PREVIOUS (give an earlier run's report.json)"
    PREVIOUS="$(cd "$(dirname "$PREVIOUS")" && pwd)/$(basename "$PREVIOUS")"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/notebooks" "$OUT/html" "$OUT/report.json" "$OUT/report.md"   # no earlier run's
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
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

# --- the environment ---------------------------------------------------------------------
pip_install() {
    if [ -n "$WHEELS" ]; then
        "$PY" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$WHEELS" "$@"
    else
        "$PY" -m pip install --quiet --disable-pip-version-check "$@"
    fi
}

make_venv() {   # a venv at $2 that sees the packages of interpreter $1, after its own
    "$1" - "$2" <<'EOF'
import site, subprocess, sys, venv
from pathlib import Path
target = Path(sys.argv[1])
try:
    venv.EnvBuilder(with_pip=True).create(target)
except Exception:                      # no ensurepip (a Debian python3 without python3-venv):
    venv.EnvBuilder(with_pip=False, clear=True).create(target)   # pip comes from the base
# This interpreter's site-packages (a venv's own, when it is one, as on images that keep
# PyTorch in a venv, where --system-site-packages would skip it), then its user site.
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
purelib = subprocess.run([str(target / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
(Path(purelib) / "_gpu_check_base.pth").write_text(
    "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs if Path(d).is_dir()))
EOF
}

INSTALL_FROM="none (the current environment)" INSTALL_S=0
if [ -z "$PY" ]; then
    t0="$(date +%s.%N)"
    VENV="${VENV:-$ROOT/.venv-gpu}"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "gpu_check: creating $VENV on the packages of ${PYTHON:-python3}"
        make_venv "${PYTHON:-python3}" "$VENV" || fail "could not create $VENV with ${PYTHON:-python3}"
    fi
    PY="$VENV/bin/python"
    if ! "$PY" -c "import torch" 2>/dev/null; then
        echo "gpu_check: torch is missing; installing it${WHEELS:+ from $WHEELS}"
        pip_install torch || fail "could not install torch${WHEELS:+ from $WHEELS (it needs torch and its dependencies)}"
    fi
    if [ -n "$WHEELS" ] && [ -f "$WHEELS/bundle.json" ]; then
        echo "gpu_check: installing the bundle $WHEELS (offline)"
        "$ROOT/tools/ci/gpu_wheels.sh" --install "$WHEELS" --into "$PY" \
            || fail "could not install the bundle $WHEELS (see the output above)"
        INSTALL_FROM="wheels $WHEELS"
    else
        echo "gpu_check: installing what is missing from requirements-gpu.txt${WHEELS:+ (offline)}"
        pip_install -r requirements-gpu.txt \
            || fail "could not install requirements-gpu.txt${WHEELS:+ from $WHEELS (build a bundle: tools/ci/gpu_wheels.sh)}"
        INSTALL_FROM="${WHEELS:+wheels $WHEELS}"
        INSTALL_FROM="${INSTALL_FROM:-the package index}"
    fi
    INSTALL_S="$(since "$t0")"
fi
command -v "$PY" >/dev/null || [ -x "$PY" ] || fail "no python interpreter $PY"
[ -z "$PREVIOUS" ] || "$PY" -m tools.ci.nbval_report check-previous "$PREVIOUS" \
    || fail "--previous $PREVIOUS is not an earlier run's report.json (see above)"

"$PY" - "$PROFILE" <<'EOF' || fail "torch cannot run profile $PROFILE here (see above)"
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
export LABSUPPORT_STRICT_CLAIMS=1          # a claim that does not hold on the card fails its cell
budget=()
[ "$BUDGET" = none ] || budget=(--budget-start "$START" --budget-seconds "$BUDGET")
[ -z "$PREVIOUS" ] || budget+=(--budget-previous "$PREVIOUS")
# nbval and the report alone: pytest plugins that the machine's image brings are not loaded
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "$PY" -m pytest -c "$ROOT/pyproject.toml" --rootdir "$ROOT" \
    -p nbval.plugin -p no:cacheprovider -p tools.ci.nbval_report.plugin --report-dir "$OUT" \
    "${budget[@]}" "${NOTEBOOKS[@]}" 2>&1 | tee "$OUT/pytest.log" || true   # the report says what passed
[ -f "$OUT/report.json" ] || fail "nbval wrote no report (see $OUT/pytest.log)"

# --- the HTML book from those executions (the committed outputs for notebooks not run) ---
html="not requested" html_s="" html_why="--no-html"
if [ "$HTML" = 1 ]; then
    plan_rc=0 previous=()
    [ -z "$PREVIOUS" ] || previous=(--previous "$PREVIOUS")
    plan="$("$PY" -m tools.ci.nbval_report html-plan --started "$START" --budget "$BUDGET" \
        "${previous[@]}")" || plan_rc=$?
    case "$plan_rc" in
        0) ;;
        3) html=skipped html_why="$plan"; echo "gpu_check: the HTML build is skipped: $plan" ;;
        *) die "could not plan the HTML build" ;;
    esac
fi
if [ "$HTML" = 1 ] && [ "$html" != skipped ]; then
    book="$(mktemp -d)"
    trap 'rm -rf "$book"' EXIT
    cp -r _config.yml _toc.yml ./*.md references.bib _static chapters "$book"/
    # the notebooks that ran to the end (one stopped at the budget keeps its committed outputs)
    "$PY" - "$OUT" "$book/chapters" <<'EOF'
import json, shutil, sys
out, chapters = sys.argv[1:3]
for n in json.load(open(f"{out}/report.json"))["notebooks"]:
    if n["status"] in ("passed", "failed"):
        shutil.copy(f"{out}/{n['executed']}", chapters)
EOF
    "$PY" - "$book/_config.yml" "$OUT/report.json" <<'EOF'
import sys, yaml
from tools.book.build_book import executed_config   # render this run's outputs as they are
path, report = sys.argv[1:3]
config = executed_config(yaml.safe_load(open(path)))
# the page "Where the numbers came from" adds what nbval found (labsupport.sphinx_provenance)
config.setdefault("sphinx", {}).setdefault("config", {})["provenance_nbval_report"] = report
open(path, "w").write(yaml.safe_dump(config))
EOF
    limit=()
    [ "$plan" = none ] || limit=(timeout --kill-after=10 "$plan")
    echo "gpu_check: building the HTML book${limit[*]:+ (at most $plan s)}"
    t0="$(date +%s.%N)" build_rc=0
    "${limit[@]}" "$PY" -c "from jupyter_book.cli.main import main; main()" build "$book" --all -W -n \
        --keep-going > "$OUT/html-build.log" 2>&1 || build_rc=$?
    html_s="$(since "$t0")"
    if [ "$build_rc" = 0 ]; then
        mv "$book/_build/html" "$OUT/html"
        html=built html_why=""
    elif [ "$build_rc" = 124 ] || [ "$build_rc" = 137 ]; then
        html=stopped html_why="it ran into the budget (its estimate was too low; see $OUT/html-build.log)"
        echo "gpu_check: the HTML build was stopped at the budget"
    else
        tail -30 "$OUT/html-build.log"
        html=failed html_why="see $OUT/html-build.log"
        echo "gpu_check: the HTML build failed (see $OUT/html-build.log)"
    fi
fi

# --- the report ----------------------------------------------------------------------------
status=0 html_seconds=()
[ -z "$html_s" ] || html_seconds=(--html-seconds "$html_s")
"$PY" -m tools.ci.nbval_report finish "$OUT" --started "$START" --budget "$BUDGET" \
    --install-seconds "$INSTALL_S" --install-from "$INSTALL_FROM" \
    --html "$html" "${html_seconds[@]}" --html-reason="$html_why" || status=$?
echo
cat "$OUT/report.md"
echo "gpu_check: $(since "$START") s in all${BUDGET:+ (budget $BUDGET)}; results in $OUT"
case "$status" in
    0) ;;
    4) echo "gpu_check: INCOMPLETE (status 4): the budget did not hold everything; report.md says what was left" ;;
    *) echo "gpu_check: FAILED (status $status)" ;;
esac
exit "$status"
