"""Steps per second of the batched equation env (autoreset ``step``) under
the ``eliminate`` policy reading its observations, beside ``random`` (the env
with a trivial policy), at 1,024 and 16,384 instances, in one run.

    .venv/bin/python benchmarks/equation_batched.py [--steps 32] [--repeats 2] [--complexity simple] [--n-variables 3] [--family-size 256]

Each row is one jitted ``lax.scan`` of ``--steps`` autoreset steps over
``envs`` instances, timed after a compile (the median of ``--repeats`` runs
on other keys). The episodes that ended, their successes and the refused
actions are summed inside the scan and returned, so the work cannot be
skipped; the run fails if a policy's action is refused or ``eliminate``
solves under 95% of its episodes. Env steps per second = envs x steps / s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp

from luca_gym.worlds.equation import batched as B

ENVS = (1024, 16384)


@partial(jax.jit, static_argnames=("policy", "num_envs", "num_steps"))
def rollout(policy, params: B.EquationParams, key, num_envs: int, num_steps: int) -> dict:
    """``num_envs`` envs for ``num_steps`` autoreset steps: the episodes ended,
    solved, their iterations summed over the solved ones, and the refusals."""
    k_reset, k_play = jax.random.split(key)
    obs, state = jax.vmap(B.reset, (0, None))(jax.random.split(k_reset, num_envs), params)
    mask = jax.vmap(B.action_mask, (0, None))(state, params)

    def body(carry, key):
        obs, state, mask, totals = carry
        k_policy, k_step = jax.random.split(key)
        action = policy(params, k_policy, obs, mask)
        obs, state, _, done, info = jax.vmap(B.step, (0, 0, 0, None))(jax.random.split(k_step, num_envs), state, action,
                                                                      params)
        solved = done & (info["success"] > 0)
        totals = {"episodes": totals["episodes"] + done.sum(), "solved": totals["solved"] + solved.sum(),
                  "iterations": totals["iterations"] + jnp.where(solved, info["iterations"], 0).sum(),
                  "refused": totals["refused"] + (info["error"] != 0).sum()}
        return (obs, state, info["mask"], totals), None

    zero = jnp.int32(0)
    totals = {"episodes": zero, "solved": zero, "iterations": zero, "refused": zero}
    (*_, totals), _ = jax.lax.scan(body, (obs, state, mask, totals), jax.random.split(k_play, num_steps))
    return totals


def measure(policy, params, envs: int, steps: int, repeats: int) -> tuple[float, dict]:
    jax.block_until_ready(rollout(policy, params, jax.random.PRNGKey(0), envs, steps))  # compile
    times, out = [], None
    for r in range(repeats):
        start = time.perf_counter()
        out = jax.device_get(rollout(policy, params, jax.random.PRNGKey(r + 1), envs, steps))
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--complexity", default="simple")
    parser.add_argument("--n-variables", type=int, default=3)
    parser.add_argument("--family-size", type=int, default=256)
    args = parser.parse_args()
    config = B.BatchedConfig(args.complexity, args.n_variables, family_size=args.family_size)
    start = time.perf_counter()
    params = B.default_params(config)
    built = time.perf_counter() - start
    print(f"# .venv/bin/python {' '.join(sys.argv)}")
    print(f"# {config}: G={config.num_query_points} query points, K={config.num_actions} actions, "
          f"D={config.observation_size}; family built in {built:.1f} s; {jax.devices()[0].device_kind}, "
          f"{jax.device_count()} device(s)")
    print(f"{'policy':<10} {'envs':>6} {'steps':>5} {'s':>7} {'steps/s':>11} {'episodes':>9} {'success':>8} {'iters':>6}")
    failures = []
    for envs in ENVS:
        for name in ("random", "eliminate"):
            seconds, out = measure(B.BASELINES[name], params, envs, args.steps, args.repeats)
            episodes, solved = int(out["episodes"]), int(out["solved"])
            rate = solved / max(episodes, 1)
            iterations = out["iterations"] / solved if solved else float("inf")
            print(f"{name:<10} {envs:>6} {args.steps:>5} {seconds:>7.2f} {envs * args.steps / seconds:>11,.0f} "
                  f"{episodes:>9} {rate:>8.3f} {iterations:>6.2f}")
            if int(out["refused"]):
                failures.append(f"{name} at {envs} envs: {int(out['refused'])} actions refused")
            if name == "eliminate" and rate < 0.95:
                failures.append(f"eliminate at {envs} envs solved {rate:.3f} of its episodes (< 0.95)")
    if failures:
        raise SystemExit("; ".join(failures))


if __name__ == "__main__":
    main()
