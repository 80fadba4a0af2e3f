"""How far above causal-sweep-flat can any policy go at a tight budget?

    .venv/bin/python benchmarks/tight_budget_ceiling.py [--budget 8] [--tiers medium,hard] [--seeds 10000-10299]

Disease, N=20. Plays ``causal-sweep-flat`` (the scripted reference a learner
has to beat, :mod:`luca_gym.worlds.luca.baselines.sweep_flat`) on the organisms
of ``--seeds`` and reports its sub-scores. Then, from every organism's
noise-free single-target results (all 3N + S singles solved on the diseased
organism), it computes what a policy could score at best when it measures
the task singles (the predictions need them), keeps one unit for the rescue,
and spends the units left on signal activations (each design a number of
them, 0 to S) and then DAMPEN tests of genes no task names, reading every
result perfectly:

* diagnosis: right whenever the malfunction is one of the hypotheses the
  measured singles test by an exact no-change signature (a lock is a clamp
  that an intervention overrides: BOOST g changes nothing on a gene locked
  high, BLOCK g and DAMPEN g nothing on one locked low, a persistent signal's
  activation nothing; DAMPEN g on a gene locked high clamps it to 0.5, which
  restores, so a DAMPEN test covers both of g's locks); where no test names
  the malfunction, the untested hypothesis of the largest prior is named;
* rescue: the best restored fraction among the measured singles, or DAMPEN
  g's after a right LOCK_HI diagnosis;
* prediction: causal-sweep-flat's, measured (it measures the same singles).

A real policy reads noisy results, so it scores below this. The figure is a
ceiling for these designs, not for every policy: a design that drops a task
single trades about 0.04 of composite (an eighth of the prediction) for one
more probe. The script also prints the facts that set the ceiling: the
malfunction types, how often the malfunction sits on a task gene, and how
often one single restores.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from luca_gym.cli.common import parse_seeds
from luca_gym.worlds.luca import core, scoring
from luca_gym.worlds.luca import functional as luca_functional
from luca_gym.worlds.luca.baselines.sweep_flat import batched_policy
from luca_gym.worlds.luca.generator.network import single_interventions, solve_rows
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, HEALTHY_HIGH, HEALTHY_LOW, LOCK_HI, LOCK_LO, N_TASKS, PERSIST

N = 20


def singles(organisms, n_signals: int) -> np.ndarray:
    """Noise-free phenotypes (B, 3N + S, P) of every single on each diseased organism (layout of the flat targets)."""
    codes, flags = single_interventions(N, n_signals, (BLOCK, BOOST, DAMPEN))
    solve = jax.jit(lambda o: solve_rows(o, codes, flags)[0])
    count = organisms.weights.shape[0]
    return np.stack([np.asarray(solve(jax.tree_util.tree_map(lambda x, i=i: x[i], organisms))) for i in range(count)])


def ceiling(phen, organisms, signals: int, budget: int) -> tuple[float, float]:
    """(diagnosis, rescue) of the perfect reader of the design: the task
    singles, then ``signals`` signal activations, then DAMPEN tests of genes no
    task names with the units left but one (the rescue's)."""
    # The scorer's own restored fraction of every single on every organism (B, 3N + S).
    restored = np.asarray(jax.vmap(jax.vmap(scoring.restored_fraction, (0, None)))(phen, organisms.aberrant))
    kinds, targets = np.asarray(organisms.malfunction_type), np.asarray(organisms.malfunction_target)
    genes, codes = np.asarray(organisms.task_genes), np.asarray(organisms.task_codes).astype(int)
    s = phen.shape[1] - DAMPEN * N
    # The prior of one hypothesis of each type (the malfunction types' shares on these organisms over their counts).
    prior = {LOCK_HI: np.mean(kinds == LOCK_HI) / N, LOCK_LO: np.mean(kinds == LOCK_LO) / N, PERSIST: np.mean(kinds == PERSIST) / s}
    diagnosis, rescue = [], []
    for i in range(phen.shape[0]):
        rows = sorted(set(((codes[i] - 1) * N + genes[i]).ravel().tolist()))
        spare = budget - 1 - len(rows)
        tested = {(LOCK_HI if row >= N else LOCK_LO, row % N) for row in rows}
        activated = list(range(min(signals, spare, s)))
        fresh = [g for g in range(N) if g not in genes[i]][:max(spare - len(activated), 0)]
        tested |= {(kind, g) for g in fresh for kind in (LOCK_HI, LOCK_LO)}
        tested |= {(PERSIST, N + j) for j in activated}
        rows += [2 * N + g for g in fresh] + [DAMPEN * N + j for j in activated]
        truth = (int(kinds[i]), int(targets[i]))
        # No signature: the reader names the untested hypothesis of the largest prior.
        untested = [(kind, g) for kind in (LOCK_HI, LOCK_LO) for g in range(N)] + [(PERSIST, N + j) for j in range(s)]
        guess = max((h for h in untested if h not in tested), key=lambda h: prior[h[0]])
        right = truth in tested or truth == guess
        best = restored[i, rows].max()
        if right and kinds[i] == LOCK_HI:
            best = max(best, restored[i, 2 * N + targets[i]])
        diagnosis.append(right)
        rescue.append(best)
    return float(np.mean(diagnosis)), float(np.mean(rescue))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--tiers", default="medium,hard")
    parser.add_argument("--seeds", default="10000-10299")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    print(f"# Disease, N={N}, budget {args.budget}, seeds {args.seeds} ({len(seeds)} organisms); jax {jax.__version__}")
    for tier in args.tiers.split(","):
        t0 = time.perf_counter()
        params = core.make_params(tier, N, "disease", budget=args.budget)
        organisms, keys = luca_functional.organism_batch(seeds, tier, N, "disease")
        played = luca_functional.rollout_scores(batched_policy(params), jax.random.PRNGKey(0), organisms, keys, params,
                                                args.budget + 2 * N_TASKS + 4)
        assert bool(np.all(played["ended"])), "a causal-sweep-flat session did not end"
        pred, diag, resc = (float(np.mean(played[name])) for name in ("prediction", "diagnosis", "rescue"))
        phen = singles(organisms, params.n_signals)
        kinds = np.asarray(organisms.malfunction_type)
        genes = np.asarray(organisms.task_genes).reshape(len(seeds), -1)
        on_task = np.mean([(k != PERSIST) & (g in row) for k, g, row in zip(kinds, np.asarray(organisms.malfunction_target), genes)])
        aberrant = np.asarray(organisms.aberrant)
        full = np.all(((phen >= HEALTHY_LOW) & (phen <= HEALTHY_HIGH)) | ~aberrant[:, None], axis=2)
        print(f"\n## {tier}  ({time.perf_counter() - t0:.0f} s)\n")
        print(f"malfunctions: LOCK_HI {np.mean(kinds == LOCK_HI):.2f}, LOCK_LO {np.mean(kinds == LOCK_LO):.2f}, "
              f"PERSIST {np.mean(kinds == PERSIST):.2f}; on a task gene {on_task:.2f}; one aberrant phenotype in "
              f"{np.mean(aberrant.sum(1) == 1):.2f}; a single restores every aberrant phenotype in {full.mean():.2f} of tries")
        print("\n| policy | prediction | diagnosis | rescue | composite |\n|---|---|---|---|---|")
        print(f"| causal-sweep-flat (played) | {pred:.3f} | {diag:.3f} | {resc:.3f} | {np.mean(played['composite']):.3f} |")
        for signals in range(params.n_signals, -1, -1):
            d, r = ceiling(phen, organisms, signals, args.budget)
            print(f"| ceiling: task singles, {signals} signals, DAMPEN tests | {pred:.3f} | {d:.3f} | {r:.3f} "
                  f"| {(pred + d + r) / 3:.3f} |")


if __name__ == "__main__":
    main()
