"""Learners that must track state: behaviour cloning on the graph worlds'
flat codec under ``observation="evidence"`` and ``observation="raw"``.

    .venv/bin/python benchmarks/graph_raw.py [--world dag] [--n-nodes 10] [--n-states 5] [--seeds 0-499]
        [--intervention-cost 0.01] [--pool-size 16384] [--envs 4096] [--steps 64] [--epochs 100]
        [--fine-tune-steps 0] [--recurrent-steps 0] [--recurrent-envs 512]

For each observation, :func:`luca_gym.agents.bc.clone` fits the PPO's MLP
(64 x 64 and the linear path, the defaults) to a teacher's actions on the
training pool (seeds 10000 up, ``--pool-size`` of them): under
``"evidence"`` ``systematic`` (:func:`~luca_gym.worlds.graphs.baselines.systematic_policy`,
which reads what the evidence implies; the world writes the matrix), under
``"raw"`` its raw form (:func:`~luca_gym.worlds.graphs.flat.raw_systematic_policy`,
which reads the last intervention's states only and writes its own matrix,
an edit a step). Then once more under ``"raw"`` with ``intervention_cost``
(each intervention costs that much of the return), optionally fine-tuned by
the PPO for ``--fine-tune-steps`` at that cost. Each network plays greedily
(:func:`luca_gym.agents.ppo.greedy_policy`) on the held-out ``--seeds``
(never in the pool), batched (:func:`~luca_gym.worlds.graphs.flat.play_batch`),
beside ``systematic``, ``random`` and the raw teacher on the same seeds.

With ``--recurrent-steps``, recurrent PPO from scratch (``network="recurrent"``,
a GRU memory; reward alone: no teacher, no cloning) trains on the raw codec
with commit actions (``raw_actions="commit"``: each call with or without
a commit of what the last intervention showed first) for that many env
steps (``--recurrent-envs`` envs x 32 steps an update, 4 minibatches of
whole env trajectories) and plays the held-out seeds greedily, its
memory carried through each session (:func:`luca_gym.agents.ppo.play_greedy`);
the row gives its wall time and the env steps and wall seconds at which
its training success first reached 0.9.

Success is the share of sessions solved; iterations the paper's cycles (the
interventions before the matrix that ended the session), averaged over the
solved sessions; the return is success less the cost of the interventions.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import jax

from luca_gym.agents import bc, ppo
from luca_gym.cli.common import parse_seeds
from luca_gym.worlds.graphs.baselines import random_policy, systematic_policy
from luca_gym.worlds.graphs.flat import play_batch, raw_systematic_policy, session_keys


def _play(policy, params, codec, seeds) -> dict:
    out = jax.device_get(play_batch(policy, params, session_keys(seeds), codec, codec.instances(seeds), codec.max_calls))
    solved = out["success"] > 0
    return {"success": float(out["success"].mean()),
            "iterations": float(out["iterations"][solved].mean()) if solved.any() else float("nan"),
            "return": float(out["return"].mean())}


def _play_network(network, codec, seeds) -> dict:
    played = jax.device_get(ppo.play_greedy(network, codec, codec.instances(seeds), codec.max_calls))
    out = played["scores"]
    solved = out["success"] > 0
    return {"success": float(out["success"].mean()),
            "iterations": float(out["iterations"][solved].mean()) if solved.any() else float("nan"),
            "return": float(played["return"].mean())}


def _recurrent(world: str, size: dict, args) -> tuple[dict, str]:
    config = ppo.PPOConfig(world, {**size, "observation": "raw", "raw_actions": "commit"}, network="recurrent",
                           steps=args.recurrent_steps, num_envs=args.recurrent_envs, num_steps=32, minibatches=4,
                           pool_size=args.pool_size)
    rows = []
    summary = ppo.train(config, progress=rows.append)
    reached = next((r for r in rows if r["mean_score"] >= 0.9), None)
    note = (f"{summary['wall_s']:.0f} s for {summary['env_steps']:,} steps; training success 0.9 at "
            + (f"{reached['env_steps']:,} steps, {reached['wall_s']:.0f} s" if reached else "never"))
    return summary, note


def _clone(world: str, settings: dict, teacher, args) -> tuple[dict, dict, float]:
    config = ppo.PPOConfig(world, settings, steps=args.envs * args.steps, num_envs=args.envs, num_steps=args.steps,
                           minibatches=1, pool_size=args.pool_size)
    started = time.perf_counter()
    cloned = bc.clone(config, teacher(config.make_env()), envs=args.envs, steps=args.steps, epochs=args.epochs)
    return config, cloned, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="dag", choices=("dag", "relational"))
    parser.add_argument("--n-nodes", type=int, default=10, help="N (dag's n_nodes, relational's n_houses)")
    parser.add_argument("--n-states", type=int, default=5, help="dag's n_states")
    parser.add_argument("--seeds", default="0-499", help="held-out evaluation seeds (the pool starts at 10000)")
    parser.add_argument("--intervention-cost", type=float, default=0.01)
    parser.add_argument("--pool-size", type=int, default=16_384)
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=64, help="teacher steps per env")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--fine-tune-steps", type=int, default=0, help="PPO steps at the cost after the clone (0: none)")
    parser.add_argument("--recurrent-steps", type=int, default=0,
                        help="recurrent PPO from scratch on the commit actions, env steps (0: none)")
    parser.add_argument("--recurrent-envs", type=int, default=512)
    parser.add_argument("--no-cloning", action="store_true", help="leave out the behaviour-cloning rows")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    size = {"n_nodes": args.n_nodes, "n_states": args.n_states} if args.world == "dag" else {"n_houses": args.n_nodes}
    cost = {"intervention_cost": args.intervention_cost}

    print("# Learners that must track state")
    print(f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"jax {jax.__version__} ({jax.default_backend()})")
    cloning = "" if args.no_cloning else (f"behaviour cloning into the 64x64 MLP: {args.envs} envs x {args.steps} teacher "
                                          f"steps, {args.epochs} epochs; ")
    print(f"{args.world} {size}; {cloning}{args.pool_size} training instances (seeds 10000 up); greedy on held-out seeds "
          f"{args.seeds} ({len(seeds)} sessions)\n")
    rows = []
    for label, observation, extra, teacher in () if args.no_cloning else (
            ("evidence", "evidence", {}, systematic_policy),
            ("raw", "raw", {}, raw_systematic_policy),
            (f"raw, cost {args.intervention_cost:g}", "raw", cost, raw_systematic_policy)):
        config, cloned, seconds = _clone(args.world, {**size, **extra, "observation": observation}, teacher, args)
        codec = config.make_env()
        rows.append((f"BC of {'systematic' if observation == 'evidence' else 'raw systematic'} ({label})",
                     _play(ppo.greedy_policy, cloned["network"], codec, seeds),
                     f"{seconds:.0f} s, {cloned['samples']:,} samples, agrees {cloned['accuracy']:.4f}"))
        if extra and args.fine_tune_steps:
            tuned_config = ppo.PPOConfig(args.world, dict(config.settings), steps=args.fine_tune_steps, num_envs=1024,
                                         num_steps=64, learning_rate=3e-4, pool_size=args.pool_size)
            started = time.perf_counter()
            tuned = ppo.train(tuned_config, network=cloned["network"])
            rows.append((f"  + PPO {args.fine_tune_steps:,} steps ({label})",
                         _play(ppo.greedy_policy, tuned["network"], codec, seeds),
                         f"{time.perf_counter() - started:.0f} s"))
        if extra:
            evidence_codec = ppo.PPOConfig(args.world, {**size, **extra}).make_env()
            rows += [(f"systematic ({label.replace('raw', 'evidence')})",
                      _play(systematic_policy(evidence_codec), None, evidence_codec, seeds), "")]
    if args.recurrent_steps:
        summary, note = _recurrent(args.world, size, args)
        codec = ppo.PPOConfig(args.world, {**size, "observation": "raw", "raw_actions": "commit"}).make_env()
        rows.append((f"recurrent PPO from scratch, {summary['env_steps']:,} steps (raw, commit)",
                     _play_network(summary["network"], codec, seeds), note))
    evidence_codec = ppo.PPOConfig(args.world, size).make_env()
    raw_codec = ppo.PPOConfig(args.world, {**size, "observation": "raw"}).make_env()
    rows += [("systematic (evidence)", _play(systematic_policy(evidence_codec), None, evidence_codec, seeds), ""),
             ("raw systematic, the teacher (raw)", _play(raw_systematic_policy(raw_codec), None, raw_codec, seeds), ""),
             ("random (evidence)", _play(random_policy(evidence_codec), None, evidence_codec, seeds), "")]
    print("| agent (observation) | success | iterations (solved) | return | training |")
    print("|---|---|---|---|---|")
    for name, r, note in rows:
        print(f"| {name} | {r['success']:.3f} | {r['iterations']:.2f} | {r['return']:.3f} | {note} |")
    if args.no_cloning:
        return
    by_name = {name: r for name, r, _ in rows}
    learner = by_name[f"BC of raw systematic (raw, cost {args.intervention_cost:g})"]
    ceiling = by_name[f"systematic (evidence, cost {args.intervention_cost:g})"]
    print(f"\nraw learner at cost {args.intervention_cost:g}: iterations {learner['iterations']:.2f} against systematic's "
          f"{ceiling['iterations']:.2f} ({learner['iterations'] / ceiling['iterations'] - 1:+.1%}); held-out success "
          f"{by_name['BC of raw systematic (raw)']['success']:.3f} (target at least 0.9)")


if __name__ == "__main__":
    main()
