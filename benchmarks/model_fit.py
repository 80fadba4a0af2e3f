"""model-fit beside the repository's baselines, with each sub-score and the
seconds per session, from one results folder.

The sessions run through the harness (``luca_gym.harness.sweep``, as
``luca-gym eval`` does); a rerun on the same folder resumes. model-fit was
developed on seeds 300-309; report it on seeds it never saw (200-219 in
BENCHMARKS.md).

    # hard, N=20, healthy and disease (the dense candidate family)
    .venv/bin/python benchmarks/model_fit.py --seeds 200-219 --out results/model_fit_hard
    # medium healthy at N=320 and 1280 (the local family)
    .venv/bin/python benchmarks/model_fit.py --tier medium --modes healthy --n-genes 320,1280 \\
        --agents model-fit,causal-sweep,task-directed --seeds 200-219 --out results/model_fit_medium --batched

``--batched`` also runs the batched form (``baselines.batched``, healthy
only) on the same organisms through ``functional.rollout_scores``: one
jitted scan over all seeds per size, timed after its compile (generation
excluded).

``--counterfactual`` scores, for each healthy model-fit session (baseline
phenotypes 0.5, logit 0), what the sweeps' rule (the logit sum of the two
singles) would have predicted from
model-fit's own measurements (each single's mean), against the organism's
task truth: it tells the fitted model's part from the experiments' part.
"""

from __future__ import annotations

import argparse
import collections
import os

import time

import jax
import numpy as np

from luca_gym.worlds.luca import core, scoring, generator as world
from luca_gym import harness as ev
from luca_gym.cli.common import parse_seeds

AGENTS = ("model-fit", "task-directed", "causal-sweep", "heuristic")
# The paper's best agent per column (hard, N=20): an LLM healthy, causal-sweep diseased.
PAPER_BEST = {("hard", "healthy", 20): 0.642, ("hard", "disease", 20): 0.650}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="200-219")
    ap.add_argument("--out", default="results/model_fit_hard")
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--tier", default="hard")
    ap.add_argument("--modes", default="healthy,disease")
    ap.add_argument("--n-genes", default="20")
    ap.add_argument("--batched", action="store_true", help="also run model-fit's batched form (healthy) on the same seeds")
    ap.add_argument("--counterfactual", action="store_true",
                    help="also score the logit sum of model-fit's own averaged singles against the task truth")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    agents, modes = args.agents.split(","), args.modes.split(",")
    sizes = [int(n) for n in args.n_genes.split(",")]
    specs = ev.plan_world("luca", agents, parse_seeds(args.seeds), tier=[args.tier], mode=modes, n_genes=sizes)
    path = ev.sweep(specs, args.out)
    wanted = {(s.agent, s.mode, s.n_genes, s.seed) for s in specs}
    cells = collections.defaultdict(list)
    for r in ev.load_sessions(path):
        if (r["agent"], r["mode"], r["n_genes"], r["seed"]) in wanted and r["tier"] == args.tier:
            s = r["scores"]
            cells[(r["agent"], r["mode"], r["n_genes"])].append(
                [s["composite"], s["prediction"], s["diagnosis"], s["rescue"], r["wall_s"], r["budget"] - r["calls"][-1]["budget_remaining"], r["budget"]])
    print(f"{args.tier}, seeds {args.seeds}: mean (population std) per cell")
    print("| agent | mode | N | composite | prediction | diagnosis | rescue | budget used | s / session |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        for mode in modes:
            for agent in agents:
                v = np.array(cells[(agent, mode, n)], float)
                if not len(v):
                    continue
                mean, std = v.mean(0), v.std(0)
                sub = " | ".join(f"{mean[i]:.3f}" if mode == "disease" else "-" for i in (2, 3))
                print(f"| {agent} | {mode} | {n} | {mean[0]:.3f} ({std[0]:.3f}) | {mean[1]:.3f} | {sub} | "
                      f"{mean[5]:.0f} / {mean[6]:.0f} | {mean[4]:.1f} |")
            if (args.tier, mode, n) in PAPER_BEST:
                print(f"| paper's best agent | {mode} | {n} | {PAPER_BEST[(args.tier, mode, n)]:.3f} | | | | | |")
            if args.counterfactual and mode == "healthy" and ("model-fit", mode, n) in cells:
                counterfactual([r for r in ev.load_sessions(path) if r["agent"] == "model-fit" and r["tier"] == args.tier
                                and (r["agent"], r["mode"], r["n_genes"], r["seed"]) in wanted and r["mode"] == mode
                                and r["n_genes"] == n])
            if args.batched and mode == "healthy":
                batched(args.tier, n, parse_seeds(args.seeds))


def _logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def counterfactual(records) -> None:
    """The logit sum of each task's two singles, each averaged over every
    measurement model-fit made of it, scored against the task truth: one row."""
    scores = []
    for r in records:
        organism = world.make_organism(r["seed"], r["tier"], r["n_genes"], r["mode"], r["backwards"])
        measured, predictions = {}, []
        for call in r["calls"]:
            if call["call"] == "get_next_prediction_task":
                task = [(gene, how["type"]) for gene, how in call["result"]["interventions"].items()]
            elif call["call"] == "run_experiment" and "phenotypes" in call["result"]:
                interventions = call["arguments"]["interventions"]
                if len(interventions) == 1:
                    (gene, how), = interventions.items()
                    measured.setdefault((gene, how["type"]), []).append(list(call["result"]["phenotypes"].values()))
            elif call["call"] == "submit_prediction":
                logits = sum(_logit(np.mean(measured[single], axis=0)) for single in task)
                predictions.append(1.0 / (1.0 + np.exp(-logits)))
        truth = np.asarray(organism.arrays.task_truth)
        scores.append(float(scoring.prediction_accuracy(np.array(predictions), truth, np.ones(len(truth), bool))))
    s = np.array(scores)
    print(f"| logit sum of model-fit's averaged singles (counterfactual) | {records[0]['mode']} | {records[0]['n_genes']} | "
          f"{s.mean():.3f} ({s.std():.3f}) | {s.mean():.3f} | - | - | (model-fit's) | |", flush=True)


def batched(tier: str, n: int, seeds) -> None:
    """model-fit's batched form on ``seeds``: one table row."""
    from luca_gym.worlds.luca.baselines.batched import POLICIES
    from luca_gym.worlds.luca.functional import organism_batch, rollout_scores

    params = core.make_params(tier, n, "healthy")
    organisms, keys = organism_batch(list(seeds), tier, n, "healthy")
    policy = POLICIES["model-fit"](params)
    run = lambda: jax.block_until_ready(rollout_scores(policy, jax.random.PRNGKey(0), organisms, keys, params, 24))  # noqa: E731
    run()
    t0 = time.perf_counter()
    scores = run()
    seconds = time.perf_counter() - t0
    assert np.asarray(scores["ended"]).all(), "a batched session did not end"
    c = np.asarray(scores["composite"], float)
    print(f"| model-fit, batched ({len(seeds)} sessions in one rollout) | healthy | {n} | {c.mean():.3f} ({c.std():.3f}) | "
          f"{np.asarray(scores['prediction']).mean():.3f} | - | - | <= 12 / {params.budget} | {seconds / len(seeds):.2f} |", flush=True)


if __name__ == "__main__":
    main()
