"""``gym.make_vec`` of a flat id: the JAX batch (``FlatVectorEnv``) against
Gymnasium's ``SyncVectorEnv`` of the single flat env, side by side in one run.

    .venv/bin/python benchmarks/flat_vector.py [--world luca] [--steps 200] [--sync-envs 16]

Every env takes a uniformly random legal action drawn on the host from the
masks the env returned (so each step's output feeds the next step), timed
after one warm-up step; the sessions' ended scores are summed and printed,
so the work cannot be skipped. Env steps per second (envs x steps / s).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import luca_gym  # noqa: F401  (registers the ids)

STEM = {"luca": "Luca", "dag": "DagDiscovery", "relational": "RelationalDiscovery"}


def legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random legal action per row of ``mask`` (vectorised on the host)."""
    return np.argmax(np.where(mask, rng.random(mask.shape), -1.0), axis=1)


def run(env, steps: int, seed: int = 0) -> tuple[float, int, float]:
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    obs, reward, terminated, truncated, info = env.step(legal(info["action_mask"], rng))  # warm-up (compiles)
    ended, total = 0, 0.0
    start = time.perf_counter()
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(legal(info["action_mask"], rng))
        done = terminated | truncated
        ended += int(done.sum())
        total += float(np.asarray(reward).sum())
    seconds = time.perf_counter() - start
    return env.num_envs * steps / seconds, ended, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="luca", choices=sorted(STEM))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sync-envs", type=int, default=16)
    args = parser.parse_args()
    flat_id = f"luca_gym/{STEM[args.world]}Flat-v0"
    settings = dict(tier="easy", mode="healthy", n_genes=20) if args.world == "luca" else {}
    rows = []
    sync = gym.make_vec(flat_id, num_envs=args.sync_envs, vectorization_mode="sync", **settings)
    rows.append((f"SyncVectorEnv({args.sync_envs})", *run(sync, max(args.steps // 10, 10))))
    for num_envs in (args.sync_envs, 1024):
        env = gym.make_vec(flat_id, num_envs=num_envs, **settings)
        rows.append((f"FlatVectorEnv({num_envs})", *run(env, args.steps)))
    base = rows[0][1]
    print(f"{flat_id} {settings}: random legal actions drawn on the host from the returned masks")
    print(f"{'env':<22} {'steps/s':>10} {'vs sync':>8} {'ended':>7} {'reward sum':>11}")
    for name, rate, ended, total in rows:
        print(f"{name:<22} {rate:>10,.0f} {rate / base:>7.1f}x {ended:>7} {total:>11.2f}")


if __name__ == "__main__":
    main()
