"""The organisms of a fidelity run (``luca-gym fidelity``) and their
statistics: the paper's Table 3 (and Table 1's loop counts) measured on ours.

* :func:`organism_statistics` -- Table 3 for one tier: per-seed arrays and
  summaries, from :func:`luca_gym.worlds.luca.generator.generate`.
* The graph algorithms it stands on, each on one organism's weights float
  (N, N) (``weights[i, j] != 0`` is the edge j -> i): :func:`feed_forward_loops`
  (triangles a -> b, b -> c, a -> c) and :func:`feedback_edges` (a minimum
  feedback arc set: exact by a dynamic programme over gene subsets for a
  strongly connected component of up to :data:`EXACT_FAS_MAX_GENES` genes,
  else the Eades-Lin-Smyth greedy upper bound); :func:`additive_residuals`
  on a batch of organisms.
* :func:`generate_organisms` -- a batch of organisms, generated once per
  (seeds, tier, N, mode) and shared through a cache by the statistics and
  :func:`luca_gym.worlds.luca.fidelity.baseline_scores`.

How each statistic is judged against the paper: :mod:`luca_gym.worlds.luca.fidelity`.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from luca_gym.worlds.luca import sim, spec, generator as world
from luca_gym.worlds.luca.spec import ACCURACY_THRESHOLD, N_TASKS

EXACT_FAS_MAX_GENES = 20  # a strongly connected component this small gets the exact feedback arc set


def stderr_log(message: str) -> None:
    """The default progress log: one line on stderr."""
    print(f"fidelity: {message}", file=sys.stderr, flush=True)


def say_to(log, message: str) -> None:
    """``message`` to ``log`` (None: quiet)."""
    if log is not None:
        log(message)


# -- graph statistics ----------------------------------------------------------------------
def edge_matrix(weights) -> np.ndarray:
    """bool (N, N) ``E[u, v]``: the edge u -> v (``weights[v, u] != 0``)."""
    return np.asarray(weights).T != 0


def feed_forward_loops(weights) -> int:
    """Triangles a -> b, b -> c, a -> c over distinct genes of one organism's
    weights float (N, N) (``weights[i, j] != 0`` is the edge j -> i)."""
    e = edge_matrix(weights).astype(np.int64)
    np.fill_diagonal(e, 0)
    return int(np.sum((e @ e) * e))


def _feedback_exact(adj: np.ndarray) -> int:
    """Minimum feedback arc set of a small graph (``adj[u, v]``: u -> v, no
    self-loops): the fewest backward edges over all orderings, by a dynamic
    programme over gene subsets (placing v after the set S makes its edges
    into S backward)."""
    k = adj.shape[0]
    out = [int(sum(1 << int(v) for v in np.flatnonzero(adj[u]))) for u in range(k)]
    subsets = np.arange(1 << k, dtype=np.int64)
    count = np.zeros(1 << k, np.int16)
    for b in range(k):
        count += ((subsets >> b) & 1).astype(np.int16)
    best_of = np.full(1 << k, np.iinfo(np.int16).max, np.int16)
    best_of[0] = 0
    order = np.argsort(count, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(count, minlength=k + 1))])
    for size in range(1, k + 1):  # every subset of a set is in an earlier layer
        layer = order[starts[size] : starts[size + 1]]
        best = np.full(layer.size, np.iinfo(np.int16).max, np.int16)
        for v in range(k):
            has = ((layer >> v) & 1).astype(bool)
            before = layer[has] ^ (1 << v)
            best[has] = np.minimum(best[has], best_of[before] + count[before & out[v]])
        best_of[layer] = best
    return int(best_of[-1])


def _feedback_greedy(adj: np.ndarray) -> int:
    """An upper bound on the minimum feedback arc set (Eades, Lin and Smyth
    1993): peel sinks to the back and sources to the front, else the gene of
    largest out-degree minus in-degree to the front; count backward edges."""
    k = adj.shape[0]
    alive = np.ones(k, bool)
    out_deg, in_deg = adj.sum(axis=1).astype(np.int64), adj.sum(axis=0).astype(np.int64)
    front, back = [], []

    def remove(g):
        alive[g] = False
        in_deg[adj[g]] -= 1
        out_deg[adj[:, g]] -= 1

    while alive.any():
        changed = True
        while changed:
            changed = False
            for g in np.flatnonzero(alive & (out_deg == 0)):
                back.append(g)
                remove(g)
                changed = True
            for g in np.flatnonzero(alive & (in_deg == 0)):
                front.append(g)
                remove(g)
                changed = True
        if alive.any():
            g = int(np.argmax(np.where(alive, out_deg - in_deg, np.iinfo(np.int64).min)))
            front.append(g)
            remove(g)
    position = np.empty(k, np.int64)
    position[front + back[::-1]] = np.arange(k)
    u, v = np.nonzero(adj)
    return int(np.sum(position[u] > position[v]))


def feedback_edges(weights) -> tuple[int, bool, int]:
    """Feedback edges of one organism's weights float (N, N).

    Returns (minimum feedback arc set size, whether it is exact, edges on a
    directed cycle). Self-loops count as feedback edges; each strongly
    connected component is solved alone (exactly up to EXACT_FAS_MAX_GENES
    genes, else by the greedy upper bound)."""
    from scipy.sparse.csgraph import connected_components

    e = edge_matrix(weights)
    loops = int(np.trace(e))
    e = e & ~np.eye(e.shape[0], dtype=bool)
    _, labels = connected_components(e, directed=True, connection="strong")
    total, exact = loops, True
    for label in np.unique(labels):
        genes = np.flatnonzero(labels == label)
        if genes.size < 2:
            continue
        sub = e[np.ix_(genes, genes)]
        if genes.size <= EXACT_FAS_MAX_GENES:
            total += _feedback_exact(sub)
        else:
            total += _feedback_greedy(sub)
            exact = False
    cyclic = loops + int(np.sum(e & (labels[:, None] == labels[None, :])))
    return total, exact, cyclic


def additive_residuals(arrays) -> np.ndarray:
    """float (B, T): for each organism of stacked ``OrganismArrays`` and each
    prediction task, the largest over phenotypes of |joint - (baseline +
    effect_a + effect_b)|, with the noise-free single-intervention effects of
    the task's two genes on the organism as stored (diseased in disease mode)."""
    genes, codes = np.asarray(arrays.task_genes), np.asarray(arrays.task_codes)
    b, n = genes.shape[0], arrays.weights.shape[-1]
    base = np.asarray(arrays.baseline_phenotypes)
    flags = np.zeros((b, arrays.signal_effects.shape[-2]), bool)
    additive = np.repeat(base[:, None, :], N_TASKS, axis=1)
    for t in range(N_TASKS):
        for g in range(2):
            single = np.zeros((b, n), np.int8)
            single[np.arange(b), genes[:, t, g]] = codes[:, t, g]
            additive[:, t] += np.asarray(sim.solve_organisms(arrays, single, flags).phenotypes) - base
    return np.abs(np.asarray(arrays.task_truth) - additive).max(axis=-1)


def summary(values) -> dict:
    """Mean, population std (as the paper), min, max and n of a 1-d array."""
    v = np.asarray(values, np.float64)
    return {"mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "max": float(v.max()), "n": int(v.size)}


def generate_organisms(cache, seeds, tier, n_genes, mode, log):
    """Stacked ``OrganismArrays`` of ``seeds`` (checked) at (tier, N, mode):
    from ``cache`` (a dict, or None: none) where generated before, else
    generated now (and said to ``log``) and kept there."""
    key = (tuple(seeds), tier, n_genes, mode)
    if cache is not None and key in cache:
        return cache[key]
    started = time.perf_counter()
    say_to(log, f"generating {len(seeds)} {tier} {mode} organisms, N={n_genes} ...")
    arrays = world.generate(np.asarray(seeds, np.int64), tier, n_genes, mode)
    say_to(log, f"  generated in {time.perf_counter() - started:.1f} s")
    if cache is not None:
        cache[key] = arrays
    return arrays


def check_seeds(seeds, name: str = "seeds") -> list[int]:
    """``seeds`` as a list, each checked; ValueError naming ``name`` for a bad one or none."""
    seeds = [spec.check_seed(s, name) for s in seeds]
    if not seeds:
        raise ValueError(f"{name}: empty; give at least one organism seed")
    return seeds


def organism_statistics(seeds, tier: str, n_genes: int = 20, *, log=stderr_log, cache: dict | None = None) -> dict:
    """Table 3 (and Table 1's loop counts) over ``seeds`` for one tier.

    Structure and the additive residual come from the healthy organisms,
    n_alt (and a second residual) from the disease ones. Returns a dict:
    ``tier``, ``n_genes``, ``seeds``; ``per_seed`` {name: list, one per seed}
    with targetable, readout, latent, edges, ffl, feedback, feedback_exact,
    cyclic_edges, additive_residual, additive_residual_disease, task_residuals
    (T per seed), n_alt; ``summary`` {name: mean, std, min, max, n} of the
    numeric ones; ``additive_task_rate`` and ``additive_task_rate_disease``
    (fraction of tasks with residual <= the accuracy threshold).
    ``cache`` (a dict) shares generated organisms between calls.
    """
    seeds = check_seeds(seeds)
    tier = spec.check_tier(tier)
    n_genes = spec.check_n_genes(n_genes)
    healthy = generate_organisms(cache, seeds, tier, n_genes, "healthy", log)
    disease = generate_organisms(cache, seeds, tier, n_genes, "disease", log)
    say_to(log, f"measuring {tier} N={n_genes} graphs and additive residuals ...")
    weights = np.asarray(healthy.weights)
    loops = [feedback_edges(w) for w in weights]
    latent = np.asarray(healthy.latent_mask)
    residuals = additive_residuals(healthy)
    residuals_disease = additive_residuals(disease)
    per_seed = {
        "targetable": (~latent).sum(axis=1).tolist(),
        "readout": np.asarray(healthy.readout_mask).sum(axis=1).tolist(),
        "latent": latent.sum(axis=1).tolist(),
        "edges": np.count_nonzero(weights, axis=(1, 2)).tolist(),
        "ffl": [feed_forward_loops(w) for w in weights],
        "feedback": [x[0] for x in loops],
        "feedback_exact": [x[1] for x in loops],
        "cyclic_edges": [x[2] for x in loops],
        "additive_residual": residuals.max(axis=1).tolist(),
        "additive_residual_disease": residuals_disease.max(axis=1).tolist(),
        "task_residuals": residuals.tolist(),
        "n_alt": np.asarray(disease.n_alt).tolist(),
    }
    numeric = [k for k in per_seed if k not in ("feedback_exact", "task_residuals")]
    return {
        "tier": tier,
        "n_genes": n_genes,
        "seeds": seeds,
        "per_seed": per_seed,
        "summary": {k: summary(per_seed[k]) for k in numeric},
        "additive_task_rate": float(np.mean(residuals <= ACCURACY_THRESHOLD)),
        "additive_task_rate_disease": float(np.mean(residuals_disease <= ACCURACY_THRESHOLD)),
    }

