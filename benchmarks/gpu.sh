#!/usr/bin/env bash
# The device check (benchmarks/device_check.py: parity, rollout, generation,
# PPO, memory; at most 7 minutes, its figures in $OUT/device_check), then with
# --all the older batched-rollout, solver and PPO benchmarks (9 more minutes).
# It runs the working tree with the machine's python3, which holds jax (with its
# CUDA plugin), numpy and optax but not gymnasium: fetch that first, on a
# machine with the package registry, with benchmarks/gpu_wheels.sh into .whl/,
# and copy .whl/ along with the checkout; this script installs the wheels it
# finds there into a folder of its own (nothing else is installed).
#   bash benchmarks/gpu_wheels.sh     # with the registry, once
#   bash benchmarks/gpu.sh [--all | --smoke]    # logs to $OUT if set; --smoke: every section small (a CPU check)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
out=${OUT:-$(mktemp -d)}

if compgen -G ".whl/*.whl" > /dev/null; then
  site=$(mktemp -d)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl || exit 2
  export PYTHONPATH="$PYTHONPATH:$site"
fi
if ! "$PY" -c "import jax, numpy, gymnasium, optax; print('devices:', jax.devices())"; then
  echo "gpu.sh: this python cannot import jax, numpy, optax and gymnasium; fetch gymnasium with benchmarks/gpu_wheels.sh and copy .whl/ along" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader 2>/dev/null || true

case "${1:-}" in
  ""|--all) ;;
  --smoke) exec "$PY" benchmarks/device_check.py --smoke --out "$out/device_check" ;;
  *) echo "gpu.sh: $1 not allowed; --all, --smoke or nothing" >&2; exit 2 ;;
esac
timeout 420 "$PY" benchmarks/device_check.py --out "$out/device_check"
[ "${1:-}" = "--all" ] || exit 0

timeout 230 "$PY" benchmarks/rollout.py --max-envs 65536 --sync-max 1 --gen-max 16384 --fresh-envs 4096 | tee "$out/rollout.txt"
timeout 60 "$PY" benchmarks/solver.py | tee -a "$out/rollout.txt"  # one file: fewer files to hand back
timeout 200 "$PY" benchmarks/ppo.py --envs 1024,4096,16384 --target-steps 5000000 | tee "$out/ppo.txt"

echo
echo "== summary =="
grep -E "^\| (1|64|1024|4096|16384|65536) \| [0-9,]+ \| (yes|NO)" "$out/rollout.txt" | sed 's/^/rollout  /'
grep -E "^\| [a-z]+, [a-z]+ \| (4096|16384) \|" "$out/rollout.txt" | sed 's/^/generate /'
grep -E "steps/s over" "$out/rollout.txt" | sed 's/^/fresh organisms every episode: /'
grep -E "^solve_(organisms|interventions):" "$out/rollout.txt"
grep -E "^\| [0-9]+ \| [0-9,]+ \| [0-9.]+ \|$|0.95|final" "$out/ppo.txt" | sed 's/^/ppo      /'
