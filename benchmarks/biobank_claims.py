"""The biobank's claims against the blanket rules that read no causal
evidence (world version 11, scorer version 6): the floor baselines
``artefact-sweep``, ``blanket-labels`` and ``association-pick`` beside
``cis-mr`` and ``causal-pipeline`` on unseen seeds, blanket "misaligned"
labels on cis-mr's nominations (its claims rescored), and the association
pick on ambiguous pairs (the member with the stronger covariate-adjusted
association with log NT-proBNP, and the weaker: each right in about half
of them, with Wilson's 95% interval).

    python benchmarks/biobank_claims.py --seeds 9901-9920 --pairs 9921-9970 --out results/biobank-claims

Prints, outside null worlds, each agent's mean total and bias points, the
blanket labels' effect on cis-mr's mean total, and the pick's hit rate
over the pairs of worlds designed to carry two each (a T4 pair and a
delayed pair: three drivers, T4, delayed)."""

from __future__ import annotations

import argparse
import time

import numpy as np

from luca_gym import harness
from luca_gym.cli.common import parse_seeds
from luca_gym.worlds.biobank import audit
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.world import make_world

AGENTS = ("nominate-nothing", "cue-spotter", "artefact-sweep", "blanket-labels", "association-pick", "cis-mr",
          "causal-pipeline")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95% interval for a binomial proportion: k successes of n."""
    p = k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def association_pick(seeds, profile: str) -> list[bool]:
    """For each ambiguous pair of worlds carrying two (three drivers, T4, a delayed driver): whether the member with
    the stronger covariate-adjusted association with log NT-proBNP is the causal one."""
    return audit.association_pick(seeds, BiobankConfig(profile=profile))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="9901-9920")
    parser.add_argument("--pairs", default="9921-9970")
    parser.add_argument("--profile", default="small")
    parser.add_argument("--out", default="results/biobank-claims")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    start = time.perf_counter()
    specs = harness.plan_world("biobank", list(AGENTS), seeds, profile=args.profile)
    harness.sweep(specs, args.out, lambda name: harness.make_runner(name, world="biobank"))
    sessions = [s for s in harness.load_sessions(args.out) if s["design"]["kind"] != "null"]
    print(f"{len(seeds)} seeds ({args.seeds}), profile {args.profile}; {len({s['seed'] for s in sessions})} worlds with drivers")
    print("| agent | mean total | bias points /15 | rejections | earned | wrong |")
    print("| --- | --- | --- | --- | --- | --- |")
    for agent in AGENTS:
        mine = [s for s in sessions if s["agent"] == agent]
        print(f"| {agent} | {np.mean([s['scores']['total'] for s in mine]):.2f} | "
              f"{np.mean([s['scores']['bias_identification'] for s in mine]):.2f} | "
              f"{np.mean([len(s['calls'][-1]['arguments'].get('rejections') or []) for s in mine]):.1f} | "
              f"{np.mean([s['scores']['rejections_earned'] for s in mine]):.1f} | "
              f"{np.mean([s['scores']['rejections_wrong'] for s in mine]):.1f} |")
    cis = [s for s in sessions if s["agent"] == "cis-mr"]
    oracles = {s["seed"]: make_world(s["seed"], BiobankConfig(profile=args.profile)).oracle for s in cis}
    for label in ("aligned", "misaligned"):
        totals = [audit.relabelled_total(s, oracles[s["seed"]], label) for s in cis]
        print(f"cis-mr with every nomination labelled {label}: {np.mean(totals):.2f} (unlabelled "
              f"{np.mean([s['scores']['total'] for s in cis]):.2f}; raised in {sum(t > s['scores']['total'] + 1e-9 for t, s in zip(totals, cis))} "
              f"of {len(cis)} worlds)")
    picks = association_pick(parse_seeds(args.pairs), args.profile)
    for name, right in (("stronger", sum(picks)), ("weaker", len(picks) - sum(picks))):
        low, high = wilson(right, len(picks))
        print(f"the {name}-association pick right in {right} of {len(picks)} pairs ({right / len(picks):.0%}, 95% interval "
              f"{low:.0%}-{high:.0%}; seeds {args.pairs})")
    print(f"wall {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
