# The README's two commands: `make book` and `make test`. Each creates .venv and
# installs requirements.txt first when needed (python3 >= 3.11 on the PATH, or PYTHON=...);
# `make test`, `make lab` and `make assignments` add nbgrader and JupyterLab
# (requirements-instructor.txt), `make test`, `make unit` and `make lint` the linter
# (requirements-dev.txt).
#
# torch first (tools/install_torch.py): TORCH=auto (the default) takes the CPU build from
# PyTorch's CPU index where there is no NVIDIA GPU (no nvidia-smi), PyPI's CUDA build where
# there is one; TORCH=cpu or TORCH=cuda forces either. Where PyTorch's index cannot be reached,
# torch comes from pip's configured index, with one line saying so.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  ?= auto
ifeq ($(filter $(TORCH),auto cpu cuda),)
$(error TORCH=$(TORCH): write TORCH=auto (the default), TORCH=cpu or TORCH=cuda)
endif
# The pins need Python 3.11 (numpy 2.4, pandas 3.1): stop at once, naming what was found.
PYTHON_OK := $(PYTHON) -c "import sys; sys.exit(0 if sys.version_info >= (3, 11) else \
	'$(PYTHON) is Python ' + sys.version.split()[0] + '; the book needs 3.11 or newer (numpy 2.4 \
	and pandas 3.1 require it): install one (python.org, apt install python3.11, pyenv, conda) \
	and run make PYTHON=python3.11')"
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | cksum | cut -d' ' -f1)-$(TORCH)
GRADER := $(VENV)/.nbgrader-$(shell cat requirements.txt requirements-instructor.txt | cksum | cut -d' ' -f1)
DEV    := $(VENV)/.dev-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)

.PHONY: book test unit lint lab notebooks student assignments grade gpu-check clean

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON_OK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python tools/install_torch.py --torch $(TORCH)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Both files in one resolution, so that nbgrader's dependencies keep the book's pins.
$(GRADER): $(STAMP) requirements-instructor.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-r requirements.txt -r requirements-instructor.txt
	rm -f $(VENV)/.nbgrader-*
	touch $(GRADER)

$(DEV): $(STAMP) requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	rm -f $(VENV)/.dev-*
	touch $(DEV)

## Build the HTML book, re-executing every notebook (copies in _build/source/, as many at a
## time as there are cores, then Jupyter Book with -W -n): _build/html/index.html
book: $(STAMP)
	$(BIN)/python -m tools.book.build_book

## Run every test: the linter, unit tests and documented examples, every notebook under
## nbval, nbgrader end to end, the wheel, the HTML build (-W) and the browser; in
## $(WORKERS) pytest-xdist workers, each taking whole files (conftest.py), of one torch
## thread each (two torch processes of two threads on 2 cores spin against each other);
## it prints the 10 slowest tests
WORKERS ?= 2
PYTEST := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile
test: $(STAMP) $(GRADER) lint
	$(PYTEST) --durations=10 --durations-min=5

## The fast loop: the linter, the unit tests and documented examples (no test marked slow:
## no notebook, book build, browser, nbgrader, wheel or gpu_check), in the same workers
unit: $(STAMP) lint
	$(PYTEST) -m "not slow" tests

## Open the notebooks in JupyterLab (pinned in requirements-instructor.txt): LAB_ARGS are
## passed on (LAB_ARGS="--no-browser --port 8890")
LAB_ARGS ?=
lab: $(GRADER)
	$(BIN)/jupyter lab $(LAB_ARGS) chapters/

## The linter (ruff, configured in pyproject.toml)
lint: $(DEV)
	$(BIN)/ruff check labsupport tests tools conftest.py

## Re-execute the notebooks in place (refresh the committed outputs)
notebooks: $(STAMP)
	$(BIN)/python -m tools.book.execute_notebooks

## Student versions of every notebook, solutions removed: student/chapters/, the same
## notebooks as the nbgrader course's release/ (what `make grade` grades)
student: $(GRADER)
	$(BIN)/python -m tools.book.make_student

## An nbgrader course of every section, source and release versions: assignments/
assignments: $(GRADER)
	$(BIN)/python -m tools.book.make_assignments

## Grade a class: make grade ASSIGNMENT=12_1_self_attention SUBMISSIONS=DIR (one notebook per
## student: DIR/<student>.ipynb or DIR/<student>/<any>.ipynb), in the course of `make assignments`
grade: $(GRADER)
	@test -n "$(ASSIGNMENT)" -a -n "$(SUBMISSIONS)" || { echo "make grade: give ASSIGNMENT=<section, e.g. \
	12_1_self_attention> and SUBMISSIONS=<folder of notebooks>" >&2; exit 2; }
	@test -d assignments/release/$(ASSIGNMENT) || $(MAKE) assignments
	$(BIN)/python -m tools.book.grade_class --assignment $(ASSIGNMENT) --submissions $(SUBMISSIONS)

## Re-execute every notebook on this machine's GPU under nbval, build the book from it,
## write a report: gpu-out/ (tools/ci/gpu_check.sh, within --budget 600 s by default;
## offline: GPU_CHECK_ARGS="--wheels DIR", a bundle that tools/ci/gpu_wheels.sh built)
gpu-check:
	tools/ci/gpu_check.sh $(GPU_CHECK_ARGS)

clean:
	rm -rf _build .pytest_cache gpu-out student assignments
