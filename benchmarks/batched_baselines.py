"""The batched baselines against the per-session harness, on the same seeds.

    luca-gym eval --seeds 0-19 --out results/paper       # the harness (writes sessions.jsonl)
    .venv/bin/python benchmarks/batched_baselines.py [results/paper]

For heuristic and causal-sweep in both modes and random in healthy mode (its
disease draws come from a JAX key in the batched version), at every tier:
generates the seeds' organisms with ``world.generate``, runs the jittable
policy through ``rollout`` (one ``lax.scan``), and prints the largest
difference from the harness's composite per condition, and the time of both
(the harness's from the ``wall_s`` of its records; the rollout's after a
compile, generation excluded).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.baselines.batched import causal_sweep_policy, heuristic_policy, random_policy
from luca_gym.worlds.luca.functional import organism_batch, rollout

POLICIES = {"heuristic": heuristic_policy, "causal-sweep": causal_sweep_policy, "random": random_policy}


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "results/paper")
    records = {}
    for line in (folder / "sessions.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["n_genes"] == 20 and not r["backwards"]:
            records[(r["agent"], r["tier"], r["mode"], r["seed"])] = r
    seeds = sorted({k[3] for k in records})
    print(f"# batched baselines vs the harness, N=20, seeds {seeds[0]}..{seeds[-1]} ({len(seeds)})")
    print("| agent | tier | mode | max abs composite difference | harness s | rollout s |")
    print("|---|---|---|---|---|---|")
    total_harness = total_rollout = 0.0
    sessions = 0
    for agent, make in POLICIES.items():
        for mode in ("healthy", "disease"):
            if agent == "random" and mode == "disease":
                continue
            for tier in ("easy", "medium", "hard"):
                if any((agent, tier, mode, s) not in records for s in seeds):
                    continue
                params = core.make_params(tier, 20, mode)
                organisms, keys = organism_batch(seeds, tier, 20, mode)
                policy = make(params)
                run = lambda: jax.block_until_ready(  # noqa: E731
                    rollout(policy, jax.random.PRNGKey(0), organisms, keys, params, params.max_steps)
                )
                run()
                t0 = time.perf_counter()
                _, composite, ended = run()
                rollout_s = time.perf_counter() - t0
                harness = np.array([records[(agent, tier, mode, s)]["scores"]["composite"] for s in seeds])
                harness_s = sum(records[(agent, tier, mode, s)]["wall_s"] for s in seeds)
                assert np.asarray(ended).all(), f"{agent} {tier} {mode}: a batched session did not end"
                diff = float(np.abs(np.asarray(composite) - harness).max())
                print(f"| {agent} | {tier} | {mode} | {diff:.1e} | {harness_s:.2f} | {rollout_s:.3f} |", flush=True)
                total_harness += harness_s
                total_rollout += rollout_s
                sessions += len(seeds)
    print(f"\n{sessions} sessions: harness {total_harness:.1f} s, batched rollouts {total_rollout:.2f} s "
          f"({total_harness / total_rollout:,.0f}x)")


if __name__ == "__main__":
    main()
