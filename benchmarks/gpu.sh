#!/usr/bin/env bash
# Batched-rollout, generation and solver benchmarks on a GPU machine, in under 8 minutes.
# Installs nothing: it runs the working tree with the machine's python3, which
# must already import jax (with its CUDA plugin), numpy and gymnasium.
#   bash benchmarks/gpu.sh            # prints a summary at the end
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
out=$(mktemp -d)

if ! "$PY" -c "import jax, numpy, gymnasium; print('devices:', jax.devices())"; then
  echo "gpu.sh: this python cannot import jax, numpy and gymnasium; carry them as wheels first" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader 2>/dev/null || true

timeout 330 "$PY" benchmarks/rollout.py --max-envs 65536 --sync-max 1 --gen-max 16384 --fresh-envs 4096 | tee "$out/rollout.txt"
timeout 120 "$PY" benchmarks/solver.py | tee "$out/solver.txt"

echo
echo "== summary =="
grep -E "^\| (1|64|1024|4096|16384|65536) \|" "$out/rollout.txt" | head -6 | sed 's/^/rollout  /'
grep -E "^\| [a-z]+, [a-z]+ \| (4096|16384) \|" "$out/rollout.txt" | sed 's/^/generate /'
grep -E "steps/s over" "$out/rollout.txt" | sed 's/^/fresh organisms every episode: /'
grep -E "^solve_(organisms|interventions):" "$out/solver.txt"
echo "target: >= 20,000,000 environment steps/s at N=20 on one H200"
