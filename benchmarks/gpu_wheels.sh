#!/usr/bin/env bash
# Fetch, on a machine with the package registry, the wheels that the GPU
# machine's python lacks, into .whl/ (ignored by git; copy it along with the
# checkout). The GPU image holds jax with its CUDA plugin, numpy, optax,
# equinox, pyarrow, matplotlib, tqdm, flatbuffers, cloudpickle and
# typing-extensions, but not gymnasium (its package list, read 2026-11-17);
# benchmarks/gpu.sh installs whatever .whl/ holds before it imports anything.
#   bash benchmarks/gpu_wheels.sh            # about 1 MB; needs the package registry
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
# The versions this checkout's environment runs, so the device runs the same.
gym=$("$PY" -c "import gymnasium; print(gymnasium.__version__)" 2>/dev/null || echo 1.4.0)
farama=$("$PY" -c "import importlib.metadata as m; print(m.version('farama-notifications'))" 2>/dev/null || echo 0.0.6)
rm -rf .whl && mkdir -p .whl
# Pure-python wheels; the platform and version flags only make pip accept them
# for the device's python (3.12, x86-64) whatever this machine runs.
for spec in "gymnasium==$gym" "farama-notifications==$farama"; do
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl "$spec"
done
ls -l .whl
