# The README's two commands: `make book` and `make test`. Each creates .venv and
# installs requirements.txt first when needed (python3 >= 3.10 on the PATH); `make test`,
# `make lab` and `make assignments` add nbgrader and JupyterLab (requirements-instructor.txt),
# `make test`, `make unit` and `make lint` the linter (requirements-dev.txt).
#
# TORCH=cpu (`make book TORCH=cpu`): torch from PyTorch's CPU wheel index first, then the
# rest. On Linux, PyPI's torch is the CUDA build, which brings NVIDIA's libraries (several
# GB) with it, GPU or not; the CPU build satisfies the same pin (2.13.0+cpu is 2.13.0).
# Without TORCH, plain pip from the configured index: what CI uses.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell grep -m1 '^torch==' requirements.txt)
ifeq ($(TORCH),cpu)
# --upgrade: a CUDA build already in .venv (2.13.0) is replaced by the CPU one (2.13.0+cpu
# sorts above it); --extra-index-url keeps the configured index for torch's dependencies.
# pip only warns when an index cannot be reached, and then takes PyPI's build: the check
# after it stops there instead.
TORCH_FIRST := $(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade \
	--extra-index-url $(TORCH_CPU_INDEX) "$(TORCH_PIN)" \
	&& $(BIN)/python -c "import sys, torch; sys.exit(torch.version.cuda and 'TORCH=cpu: pip \
	installed torch ' + torch.__version__ + ', a CUDA build: was $(TORCH_CPU_INDEX) reachable? \
	(see the warnings above)')"
else ifeq ($(TORCH),)
TORCH_FIRST :=
else
$(error TORCH=$(TORCH): write TORCH=cpu for the CPU wheel of torch, or leave it out)
endif
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | cksum | cut -d' ' -f1)$(TORCH:%=-%)
GRADER := $(VENV)/.nbgrader-$(shell cat requirements.txt requirements-instructor.txt | cksum | cut -d' ' -f1)
DEV    := $(VENV)/.dev-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)

.PHONY: book test unit lint lab notebooks student assignments gpu-check clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(TORCH_FIRST)
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

## Student versions of every notebook, solutions removed: student/chapters/
student: $(STAMP)
	$(BIN)/python -m tools.book.make_student

## An nbgrader course of every section, source and release versions: assignments/
assignments: $(GRADER)
	$(BIN)/python -m tools.book.make_assignments

## Re-execute every notebook on this machine's GPU under nbval, build the book from it,
## write a report: gpu-out/ (tools/ci/gpu_check.sh, within --budget 600 s by default;
## offline: GPU_CHECK_ARGS="--wheels DIR", a bundle that tools/ci/gpu_wheels.sh built)
gpu-check:
	tools/ci/gpu_check.sh $(GPU_CHECK_ARGS)

clean:
	rm -rf _build .pytest_cache gpu-out student assignments
