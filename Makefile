# Quick start: `make demo` and `make test`. Each bootstraps .venv by itself
# (created when missing, reinstalled when pyproject.toml is newer than it).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.luca-gym-installed
# `make demo` and `make ablation` run scripted baselines: the base install
# (jax, which brings scipy for the ablations' paired tests, and matplotlib for
# the report's figures) is all they import, not the dev extra's 2 GB (torch,
# verifiers, the docs). Their own stamp, so `make test` still installs dev.
DEMO_STAMP := $(VENV)/.luca-gym-demo-installed
# What `make demo` says to run next (tests/test_first_hour.py runs it).
DEMO_NEXT := source $(VENV)/bin/activate
EXTRAS ?= dev
# Compiled generators and solvers are cached on disk and shared by the test
# workers and later runs (JAX reads this variable itself).
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.cache/jax

.PHONY: demo ablation test test-slow test-all bench docs clean

# -qq: pip's quiet also hides setuptools' "Editable installation" warning block.
# --no-compile: Python byte-compiles the modules a program imports when it
# first imports them, not every file of every package at install time (torch
# alone has thousands). The packages the sandboxed `python` tool offers are
# compiled at once: the sandbox mounts them read-only, so Python could not keep
# their byte-code there and would compile them again on every run. Measured on
# a fresh clone: 50 s + 16 s instead of 2 min 14 s.
SANDBOX_PACKAGES := numpy pandas scipy statsmodels pyarrow patsy dateutil pytz
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -qq --no-compile -e ".[$(EXTRAS)]"
	@$(BIN)/python -c "import compileall, os, sys, sysconfig; site = sysconfig.get_paths()['purelib']; \
	[compileall.compile_dir(os.path.join(site, p), quiet=2, workers=0) for p in sys.argv[1:] if os.path.isdir(os.path.join(site, p))]" \
	$(SANDBOX_PACKAGES)
	@touch $(STAMP)

# A .venv that `make test` installed already holds everything the demo needs.
$(DEMO_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ $(STAMP) -nt pyproject.toml ]; then :; else \
	  $(BIN)/python -m pip install --quiet --upgrade pip && \
	  $(BIN)/python -m pip install -qq --no-compile -e .; fi
	@touch $(DEMO_STAMP)

# The main job on built-in defaults: three baselines x 3 tiers x 2 modes x 5
# seeds, the table, and a report (markdown + figures) in results/demo. It ends
# with the line to run next: the package lives in .venv, so a shell finds
# `luca-gym` and `import luca_gym` once .venv is activated.
demo: $(DEMO_STAMP)
	@rm -f results/demo/sessions.jsonl
	$(BIN)/luca-gym eval --seeds 0-4 --out results/demo
	$(BIN)/luca-gym report results/demo
	@echo
	@echo "Next, to use luca-gym and its Python package in this shell (the README's examples):"
	@echo "  $(DEMO_NEXT)"

# The paper's ablations (appendix E) on the scripted baselines, no network:
# forward vs backwards organisms (medium N=20), and invented vs real gene names
# x suppress vs permit prompts (medium N=20, hard N=30, as the paper), 20 paired
# seeds each; the report's "Ablations" section has the paired tests.
ABLATION_AGENTS ?= causal-sweep,heuristic,random
ABLATION = $(BIN)/luca-gym eval --agents $(ABLATION_AGENTS) --modes healthy --seeds 0-19 --out results/ablation --quiet
ablation: $(DEMO_STAMP)
	@rm -f results/ablation/sessions.jsonl
	$(ABLATION) --tiers medium --n-genes 20 --ablation backwards
	$(ABLATION) --tiers medium --n-genes 20 --ablation vocabulary,stance
	$(ABLATION) --tiers hard --n-genes 30 --ablation vocabulary,stance
	$(BIN)/luca-gym report results/ablation

# Two workers; tests that share an expensive program or organism (N=80, 320,
# 1280, the traced generator) carry one xdist_group and run on one worker, so
# it is compiled and generated once; every other module runs whole on one
# worker (tests/conftest.py groups it). `make test` is the quick tier: every
# layer and world at small sizes. `make test-slow` runs what it leaves out
# (tests marked slow: larger organisms, other processes, training runs, more
# cases of a quick check; tests/conftest.py lists them and why); `make
# test-all` runs both, as CI does (.ci/run).
PYTEST := $(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15 -rs
test: $(STAMP)
	$(PYTEST) -m "not slow"

test-slow: $(STAMP)
	$(PYTEST) -m slow

test-all: test test-slow

# verifiers 0.4 (luca_gym.integrations.verifiers_v1) in an environment of its
# own: 0.4 pins mcp==2.0.0, which cannot join .venv (the llm and dev extras need
# mcp>=2.3 and pin verifiers 0.2.0). The base install, verifiers 0.4 and pytest,
# no torch; tests/test_verifiers_v1.py plays a rollout against a fake server on
# 127.0.0.1 through verifiers' own interception, offline.
VF_VENV := .venv-verifiers
VF_STAMP := $(VF_VENV)/.luca-gym-installed
$(VF_STAMP): pyproject.toml
	@test -x $(VF_VENV)/bin/python || $(PYTHON) -m venv $(VF_VENV)
	$(VF_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VF_VENV)/bin/python -m pip install -qq --no-compile -e . "verifiers==0.4.*" pytest
	@touch $(VF_STAMP)

.PHONY: test-verifiers
test-verifiers: $(VF_STAMP)
	$(VF_VENV)/bin/python -m pytest tests/test_verifiers_v1.py -rs

bench: $(STAMP)
	$(BIN)/python benchmarks/solver.py

# The documentation site, into site/ (--strict: a broken link or reference fails).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .cache build *.egg-info
