"""The discovery worlds, batched: steps per second of the flat env
(``luca_gym.functional``, one jitted ``lax.scan`` with autoreset on pool
instances), side by side in one run, at 1, 64, 1024 and 4096 instances.

    .venv/bin/python benchmarks/discovery.py [--steps 256] [--repeats 3]

Policies:
  * ``systematic`` (:mod:`luca_gym.worlds.graphs.baselines`) reads its
    observation: the evidence matrix decides each target and when to submit,
    and the rollout returns the mean success of the sessions that ended, which
    depends on every intervention's redraws (checked: it must be 1.0);
  * ``masked_random`` reads only the mask, printed beside it.

``dag`` at N=10, S=5 and ``relational`` at N=10 houses, under the default
protocol (the paper's loop: the implied matrix stated with every
intervention, a session ended the first time it is right).

Then ``equation`` (3 variables, complex, float64): the oracle batched, each
of 10 queries' inputs chosen from the previous query's output (a policy that
reads its observation), the outputs' sum returned and checked finite:
queries per second at the same batch sizes.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import functional as F
from luca_gym.worlds.equation import core as equation_core
from luca_gym.worlds.equation.config import INPUT_HIGH, INPUT_LOW, EquationConfig
from luca_gym.worlds.equation.grammar import instances_of, x64
from luca_gym.worlds.graphs.baselines import systematic_policy

SIZES = (1, 64, 1024, 4096)


def measure(codec, policy, pool, num_envs: int, steps: int, repeats: int) -> tuple[float, dict]:
    key = jax.random.PRNGKey(0)
    out = jax.block_until_ready(F.flat_rollout(policy, None, key, codec, pool, num_envs, steps))  # compile
    best = np.inf
    for r in range(repeats):
        started = time.perf_counter()
        out = jax.block_until_ready(F.flat_rollout(policy, None, jax.random.PRNGKey(r + 1), codec, pool, num_envs, steps))
        best = min(best, time.perf_counter() - started)
    return num_envs * steps / best, jax.device_get(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {args.steps} steps per env, best of {args.repeats}")
    for world, settings in (("dag", {"n_nodes": 10, "n_states": 5}), ("relational", {"n_houses": 10})):
        codec = F.make_env(world=world, **settings)
        pool = F.make_pool(codec)
        systematic = systematic_policy(codec)
        print(f"\n{world} ({codec.describe()}): steps/s (mean success of the sessions that ended, sessions)")
        print("| envs | systematic | masked random | systematic / random |")
        print("| --- | --- | --- | --- |")
        for n in SIZES:
            fast, out = measure(codec, systematic, pool, n, args.steps, args.repeats)
            assert float(out["mean_success"]) == 1.0, out  # the result depends on every step
            slow, rout = measure(codec, F.masked_random, pool, n, args.steps, args.repeats)
            print(f"| {n} | {fast:,.0f} ({float(out['mean_success']):.2f}, {int(out['episodes'])}) | "
                  f"{slow:,.0f} ({float(rout['mean_success']):.2f}, {int(rout['episodes'])}) | {fast / slow:.2f} |")
    equation_section(args.repeats)


@x64
def equation_rate(config: EquationConfig, num: int, repeats: int, queries: int = 10) -> tuple[float, float]:
    """Queries per second of ``num`` instances answering ``queries`` chained queries each."""
    states = jax.vmap(equation_core.reset, (0, None))(instances_of(np.arange(num), config), config)
    m = config.n_inputs

    @jax.jit
    def run(states):
        def body(carry, _):
            states, last = carry
            # the next inputs read the last outputs: nothing the scan returns is independent of a query
            inputs = INPUT_LOW + (INPUT_HIGH - INPUT_LOW) * jnp.abs(jnp.sin(last[:, None] + jnp.arange(m)))
            states, _, error, out = jax.vmap(equation_core._step, (0, None, 0, None, None))(
                states, equation_core.QUERY, inputs, equation_core.NO_SUBMISSION, False)  # a query stating no formula
            return (states, out), jnp.sum(out)
        (_, last), sums = jax.lax.scan(body, (states, jnp.zeros(num)), None, length=queries)
        return sums.sum() + last.sum()

    total = jax.block_until_ready(run(states))  # compile
    best = np.inf
    for _ in range(repeats):
        started = time.perf_counter()
        total = jax.block_until_ready(run(states))
        best = min(best, time.perf_counter() - started)
    assert np.isfinite(float(total))
    return num * queries / best, float(total)


def equation_section(repeats: int) -> None:
    config = EquationConfig(complexity="complex", n_variables=3)
    print("\nequation (complex, 3 variables, float64): oracle queries/s, 10 chained queries per instance")
    print("| instances | queries/s |")
    print("| --- | --- |")
    for n in SIZES:
        rate, _ = equation_rate(config, n, repeats)
        print(f"| {n} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
