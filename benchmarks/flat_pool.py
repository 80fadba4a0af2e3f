"""The functional env's pool (``functional.make_pool``, PPO's training pool)
read from LUCA's disk store against regenerating its organisms, side by side
in one run.

    .venv/bin/python benchmarks/flat_pool.py [--size 1024] [--rounds 3] [--settings easy-healthy-20 medium-disease-20]

``make_pool`` takes its instances from the world's instance source; LUCA's
keeps its organisms on disk (``luca_gym.worlds.luca.pools``), so a run after
the first reads them back. "regenerate" is what ``make_pool`` did before:
``open_sessions(env.instances(seeds), env)``, generating the organisms with
``organism_batch``. Two measures, rounds interleaved so that a load change
on a shared machine hits both alike, best round reported:

* in process: the pool alone, every program already compiled (the store
  read after clearing this process's memory of pools);
* a first run: a new Python process importing luca_gym and building the pool
  (programs loaded from the persistent compilation cache), wall time to the
  pool on the device. The store is keyed by the package's source: a store
  run that finds nothing (an edit to luca_gym since this process filled it)
  stops at the first organism generated and is not counted.

Both pools are checked to be bitwise equal first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import jax
import numpy as np

from luca_gym import functional as F
from luca_gym.worlds.luca import pools

CHILD = """
import sys, time
import jax
from luca_gym import functional as F
tier, mode, n, size, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
env = F.make_env(tier, n, mode, world="luca")
seeds = F.training_seeds(size)
if how == "fill":
    jax.block_until_ready(F.make_pool(env, seeds).obs)
elif how == "store":
    from luca_gym.worlds.luca import generator
    generate = generator.generate
    def counted(*args, **kwargs):
        print("store missed: organisms generated", file=sys.stderr)
        sys.exit(3)
    generator.generate = counted
    pool = F.make_pool(env, seeds)
    jax.block_until_ready(pool.obs)
else:
    jax.block_until_ready(F.open_sessions(env.instances(seeds), env))
"""


def regenerate(env, seeds):
    return jax.block_until_ready(F.open_sessions(env.instances(seeds), env))


def from_store(env, seeds):
    pools._POOLS.clear()  # a new process remembers no pool
    pool = F.make_pool(env, seeds)
    return jax.block_until_ready((pool.start, pool.obs, pool.mask))


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=["easy-healthy-20", "medium-disease-20"])
    args = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    rows = []
    for setting in args.settings:
        tier, mode, n = setting.split("-")
        env, seeds = F.make_env(tier, int(n), mode, world="luca"), F.training_seeds(args.size)
        old, new = regenerate(env, seeds), from_store(env, seeds)  # warm-up: compiles, fills the store
        same = all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(jax.device_get(old)),
                                                        jax.tree_util.tree_leaves(jax.device_get(new))))
        assert same, f"{setting}: the stored pool differs from the regenerated one"
        times = {"regen": [], "store": [], "regen_proc": [], "store_proc": []}
        for _ in range(args.rounds):
            times["regen"].append(timed(regenerate, env, seeds)[0])
            times["store"].append(timed(from_store, env, seeds)[0])
            for how in ("regen", "store"):
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", CHILD, tier, mode, n, str(args.size), how])
                if done.returncode == 3:  # the package's source changed since the store was filled: a new key
                    print(f"{setting}: a first run missed the store (the package's source changed?); "
                          "filled it, round not counted", flush=True)
                    subprocess.run([sys.executable, "-c", CHILD, tier, mode, n, str(args.size), "fill"], check=True)
                    continue
                done.check_returncode()
                times[f"{how}_proc"].append(time.perf_counter() - start)
        best = {k: min(v) if v else float('nan') for k, v in times.items()}
        rows.append((setting, best))
        print(setting, {k: [round(x, 3) for x in v] for k, v in times.items()}, flush=True)
    print(f"\nload {os.getloadavg()[0]:.1f}; {args.size} organisms, best of {args.rounds} rounds\n")
    print("| settings | regenerate, in process (s) | store, in process (s) | ratio | regenerate, first run (s) | store, first run (s) | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for setting, b in rows:
        print(f"| {setting.replace('-', ' ')} | {b['regen']:.2f} | {b['store']:.3f} | {b['regen'] / b['store']:.0f}x "
              f"| {b['regen_proc']:.1f} | {b['store_proc']:.1f} | {b['regen_proc'] / b['store_proc']:.1f}x |")


if __name__ == "__main__":
    main()
