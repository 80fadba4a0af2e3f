# Quick start: `make demo` and `make test`. Each bootstraps .venv by itself
# (created when missing, reinstalled when pyproject.toml is newer than it).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.luca-gym-installed
EXTRAS ?= dev

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m luca_gym.demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --durations=15

bench: $(STAMP)
	$(BIN)/python benchmarks/solver.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
