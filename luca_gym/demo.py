"""``make demo``: one organism per tier, described, and a short steady-state
experiment on each (BLOCK and BOOST of a readout gene, then a signal)."""

from __future__ import annotations

import jax
import numpy as np

from luca_gym import sim, world
from luca_gym.types import BLOCK, BOOST


def _fmt(values) -> str:
    return "[" + ", ".join(f"{float(v):.3f}" for v in np.asarray(values)) + "]"


def describe(organism) -> str:
    a, m = organism.arrays, organism.meta
    sz = world.sizes(m.n_genes)
    readout = np.asarray(a.readout_mask)
    latent = np.asarray(a.latent_mask)
    edges = int(np.count_nonzero(np.asarray(a.weights)))
    signals = ", ".join(f"{label} ({mode})" for label, mode in zip(m.signal_labels, m.signal_modes))
    return "\n".join(
        [
            f"organism seed={m.seed} tier={m.tier} N={m.n_genes} mode={m.mode}  fingerprint {organism.fingerprint()[:12]}",
            f"  modules {sz.n_modules}, GRN edges {edges}, readout genes {int(readout.sum())}, "
            f"latent genes {int(latent.sum())}, budget {sz.budget}",
            f"  signals: {signals}",
            f"  phenotypes: {', '.join(m.phenotype_names)}",
        ]
    )


def experiment(organism, key) -> str:
    a, m = organism.arrays, organism.meta
    gene = int(np.flatnonzero(np.asarray(a.readout_mask))[0])
    lines = [f"  baseline phenotypes {_fmt(a.baseline_phenotypes)}"]
    trials = []
    for code, label in ((BLOCK, "BLOCK"), (BOOST, "BOOST")):
        codes = np.zeros(m.n_genes, np.int8)
        codes[gene] = code
        trials.append((f"{label} {m.gene_names[gene]}", codes, None))
    flags = np.zeros(organism.n_signals, bool)
    flags[0] = True
    trials.append((f"ACTIVATE {m.signal_labels[0]}", None, flags))
    for k, (label, codes, flags) in enumerate(trials):
        r = sim.steady_state(organism, codes, flags, key=jax.random.fold_in(key, k))
        status = "converged" if bool(r.converged) else "max_steps_reached"
        lines.append(
            f"  {label:<24} -> {_fmt(r.phenotypes)}  {status} in {int(r.steps)} steps"
        )
    return "\n".join(lines)


def main() -> None:
    key = jax.random.PRNGKey(0)
    for tier in world.TIERS:
        organism = world.make_organism(0, tier, 20)
        print(describe(organism))
        print(experiment(organism, key))
        print()


if __name__ == "__main__":
    main()
