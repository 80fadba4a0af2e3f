#!/usr/bin/env bash
# The device check (benchmarks/device_check.py: parity, rollout, generation,
# PPO, memory; at most 7 minutes, its figures in $OUT/device_check), then with
# --all the older batched-rollout, solver and PPO benchmarks (9 more minutes).
# Installs nothing: it runs the working tree with the machine's python3, which
# must already import jax (with its CUDA plugin), numpy, optax and gymnasium.
#   bash benchmarks/gpu.sh [--all]    # logs to $OUT if set
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
out=${OUT:-$(mktemp -d)}

if ! "$PY" -c "import jax, numpy, gymnasium, optax; print('devices:', jax.devices())"; then
  echo "gpu.sh: this python cannot import jax, numpy, optax and gymnasium; carry them as wheels first" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader 2>/dev/null || true

timeout 420 "$PY" benchmarks/device_check.py --out "$out/device_check"
[ "${1:-}" = "--all" ] || exit 0

timeout 230 "$PY" benchmarks/rollout.py --max-envs 65536 --sync-max 1 --gen-max 16384 --fresh-envs 4096 | tee "$out/rollout.txt"
timeout 60 "$PY" benchmarks/solver.py | tee "$out/solver.txt"
timeout 200 "$PY" benchmarks/ppo.py --envs 1024,4096,16384 --target-steps 5000000 | tee "$out/ppo.txt"

echo
echo "== summary =="
grep -E "^\| (1|64|1024|4096|16384|65536) \| [0-9,]+ \| (yes|NO)" "$out/rollout.txt" | sed 's/^/rollout  /'
grep -E "^\| [a-z]+, [a-z]+ \| (4096|16384) \|" "$out/rollout.txt" | sed 's/^/generate /'
grep -E "steps/s over" "$out/rollout.txt" | sed 's/^/fresh organisms every episode: /'
grep -E "^solve_(organisms|interventions):" "$out/solver.txt"
grep -E "^\| [0-9]+ \| [0-9,]+ \| [0-9.]+ \|$|0.95|final" "$out/ppo.txt" | sed 's/^/ppo      /'
