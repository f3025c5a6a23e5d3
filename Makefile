# opgen: set-up, tests, benchmarks and the main job. Every target installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch (a wheel on the CI disk). On a GPU box: make setup TORCH="torch" (or a cu12x index).
TORCH ?= torch==2.13.0
N ?= 40
SEED ?= 0
RUN ?= data/smoke

.PHONY: setup bytecode test test-fast lint bench dataset clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev,ray]"
	touch $@

# the package's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (as on CI), every process the suite and
# a build start (sandbox zygotes, commands, pool servers) would compile opgen's sources again, about 0.3 s each
bytecode: setup
	$(BIN)/python -m compileall -q opgen filters kernels_ref scripts >/dev/null || true

# two xdist workers, a test module each at a time (its module-scoped builds made once): the suite waits on its
# sandboxes' subprocesses and timeouts a third of the time, which the other worker fills
test: setup bytecode
	$(BIN)/python -m pytest -q -ra -n 2 --dist loadfile

test-fast: setup bytecode
	$(BIN)/python -m pytest -q -ra -n 2 --dist loadfile -m "not heavy"

lint: setup
	$(BIN)/ruff check opgen filters kernels_ref tests scripts

bench: setup
	$(BIN)/python scripts/bench/all.py

dataset: setup bytecode
	$(BIN)/opgen build --n $(N) --seed $(SEED) --out $(RUN) --device cpu --profile smoke
	$(BIN)/opgen publish $(RUN) --repo-id opgen/cuda-ops-smoke --dry-run

clean:
	rm -rf $(VENV) data/smoke
