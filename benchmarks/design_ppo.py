"""A PPO designer against the Bayesian one on the graph worlds' posterior
analyst: the learning curve of a trained run and the decision time per
experiment, side by side in one run.

    .venv/bin/python benchmarks/design_ppo.py RUN [RUN ...] [--calls 200]

Each RUN is a ``luca-gym train --world dag --set analyst=posterior ...``
folder (its settings are read from it). For each, the script prints the
learning curve (env steps, wall seconds, the training sessions' mean
success or return) at about ten points, then times one decision on a
single session, jitted and warmed, averaged over ``--calls`` calls on the
observations of a round-robin session:

* ``ppo``: the trained network's most likely action from the flat
  observation (the analyst's posterior is in it);
* ``information-gain``: the Bayesian designer's choice from the same
  observation (:func:`~luca_gym.worlds.graphs.baselines.information_gain_policy`);
* ``analyst``: the posterior of the public view and the matrix stated
  (:func:`~luca_gym.worlds.graphs.analyst.edge_posterior`,
  :func:`~luca_gym.worlds.graphs.analyst.best_unrefuted`), which every
  designer here pays for, to set the two beside it.

The ratio information-gain / ppo is the decision time the learned policy
saves. Measured on a shared CPU: the ratio, not the seconds, is the figure.
"""

from __future__ import annotations

import argparse
import csv
import os
import time

import jax
import jax.numpy as jnp

from luca_gym.agents import ppo
from luca_gym.worlds.graphs import analyst, core
from luca_gym.worlds.graphs.baselines import information_gain_policy


def curve(path: str, points: int = 10) -> list[dict]:
    with open(os.path.join(path, "learning_curve.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keep = sorted({round(i * (len(rows) - 1) / (points - 1)) for i in range(points)})
    return [rows[i] for i in keep]


def per_call(fn, args, calls: int) -> float:
    """Seconds per call of ``fn`` over the argument tuples ``args`` (cycled), jitted and warmed."""
    for a in args[:2]:
        jax.block_until_ready(fn(*a))
    start = time.perf_counter()
    for i in range(calls):
        jax.block_until_ready(fn(*args[i % len(args)]))
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    for path in args.runs:
        config, network = ppo.load_network(path)
        codec = config.make_env()
        print(f"## {path}: {codec.describe()}\n")
        rows = curve(path)
        score = "mean_return" if codec.config.intervention_cost else "mean_success"
        print("| update | env steps | wall s | " + score.replace("_", " ") + " (training sessions) |")
        print("| --- | --- | --- | --- |")
        for row in rows:
            print(f"| {row['update']} | {int(row['env_steps']):,} | {float(row['wall_s']):.0f} | {float(row[score]):.3f} |")
        # observations of one session swept node by node: what a designer decides on
        instance = jax.tree_util.tree_map(lambda x: x[0], codec.instances([60_000]))
        state, vector, mask = codec.open(instance)
        observed = []
        for step in range(codec.config.budget):
            observed.append((state, vector, mask))
            state, vector, mask, _, done, _, _ = codec.step(state, jnp.int32(step % codec.config.n))
            if bool(done):
                break
        key = jax.random.PRNGKey(0)
        learned = jax.jit(lambda v, m: ppo.greedy_policy(network, key, v[None], m[None]))
        designer = jax.jit(lambda v, m: information_gain_policy(codec)(None, key, v[None], m[None]))
        config_ = codec.config
        reader = jax.jit(lambda s: analyst.best_unrefuted(analyst.edge_posterior(core.public_view(s.session), config_),
                                                          s.memory, config_))
        times = {"ppo": per_call(learned, [(v, m) for _, v, m in observed], args.calls),
                 "information-gain": per_call(designer, [(v, m) for _, v, m in observed], args.calls),
                 "analyst": per_call(reader, [(s,) for s, _, _ in observed], args.calls)}
        print("\n| decision | µs per call |")
        print("| --- | --- |")
        for name, seconds in times.items():
            print(f"| {name} | {seconds * 1e6:.0f} |")
        print(f"\ninformation-gain / ppo: {times['information-gain'] / times['ppo']:.1f}x "
              f"({args.calls} calls each, one session, batch of one; the analyst's reading, which both need: "
              f"{times['analyst'] * 1e6:.0f} µs)\n")


if __name__ == "__main__":
    main()
