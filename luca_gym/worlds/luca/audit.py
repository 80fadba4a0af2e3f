"""The evidence audit of a LUCA disease session: what each measurement told
the agent of the malfunction, and whether its diagnosis agrees with what it
had measured before committing it.

The organism is regenerated from the line's seed and settings
(:func:`~luca_gym.worlds.luca.session.config_organism`, as the scorer's
session opens it; a sealed line needs the secret and is not audited), and the
hypotheses are the world's own candidate malfunctions
(:func:`~luca_gym.worlds.luca.generator.malfunction.with_malfunction`'s
layout: LOCK_HI or LOCK_LO on each targetable gene, PERSIST on each signal).
What each candidate would show under a measured intervention is the
simulator's (:func:`~luca_gym.worlds.luca.sim.solve_organisms` on the
organism with that candidate malfunction) measured with the world's own noise
(:func:`~luca_gym.worlds.luca.sim.measure`, :data:`DRAWS` draws), and a
measurement *rules out* a candidate when some phenotype lies outside the
range of those draws widened by half the range (plus a rounding floor) on
each side: a candidate that could not plausibly have shown it. The opening (disease baseline) measurement is evidence the agent
has before any experiment: it rules out candidates first, and is not counted
as an experiment. Experiments are the accepted ``run_experiment`` and
``test_rescue`` calls (both measure).

The claim is the committed diagnosis (``submit_malfunction_hypothesis``,
one-way); it is *consistent* when the candidate it names is still live when
it is committed, and *evidence ignored* is 1 when the agent's own
measurements before the commit had ruled it out (0 otherwise; a diagnosis
naming no candidate, such as PERSIST on a gene, is inconsistent but ignores
nothing). Healthy sessions have no malfunction hypotheses: no audit (None).
Measurement noise can rule out the truth itself now and then;
``truth_ruled_out`` says when it did.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import calls, sim
from luca_gym.worlds.luca.generator.malfunction import with_malfunction
from luca_gym.worlds.luca.generator.tiers import plan
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.session import Session, config_organism
from luca_gym.worlds.luca.spec import LOCK_HI, LOCK_LO, MALFUNCTION_TYPES, PERSIST

# The calls that measure the organism.
MEASURING = ("run_experiment", "test_rescue")
# A measurement rules out a candidate when some phenotype lies outside the
# range of DRAWS draws of what that candidate would show (the world's own
# measurement noise), widened on each side by WIDEN times that range plus
# FLOOR (the results' rounding and the solver's tolerance). A range, not a
# standard deviation: noise clipped at a gene state of 0 or 1 makes skewed
# measurements.
DRAWS = 512
WIDEN = 0.5
FLOOR = 1e-4


def organism_of(record: dict):
    """The organism of a LUCA results line, regenerated from its seed and
    settings (None for a sealed line)."""
    if record.get("sealed"):
        return None
    return config_organism(record["seed"], LucaConfig.organism_settings_of(record))


def candidate_index(n_genes: int, n_signals: int, target: int, kind: int) -> int:
    """The candidate of ``(unified target, malfunction type)`` in the layout
    [LOCK_HI on genes | LOCK_LO on genes | PERSIST on signals], or -1 where
    the pair names none (a lock on a signal, PERSIST on a gene)."""
    if kind in (LOCK_HI, LOCK_LO) and 0 <= target < n_genes:
        return target + (0 if kind == LOCK_HI else n_genes)
    if kind == PERSIST and n_genes <= target < n_genes + n_signals:
        return 2 * n_genes + (target - n_genes)
    return -1


def candidate_name(meta, candidate: int) -> str:
    """``"LOCK_HI G003"`` / ``"PERSIST cascade-B"`` for a candidate index."""
    n = meta.n_genes
    if candidate < n:
        return f"LOCK_HI {meta.gene_names[candidate]}"
    if candidate < 2 * n:
        return f"LOCK_LO {meta.gene_names[candidate - n]}"
    return f"PERSIST {meta.signal_labels[candidate - 2 * n]}"


_CANDIDATES: dict = {}  # id(organism) -> (organism, candidates): organisms hold arrays, so they are not hashable


def _candidates(organism):
    """(stacked organism arrays, one per candidate malfunction; valid bool (C,)), kept for the last few organisms."""
    kept = _CANDIDATES.get(id(organism))
    if kept is not None and kept[0] is organism:
        return kept[1]
    if len(_CANDIDATES) >= 64:
        _CANDIDATES.pop(next(iter(_CANDIDATES)))
    _CANDIDATES[id(organism)] = (organism, _make_candidates(organism))
    return _CANDIDATES[id(organism)][1]


def _make_candidates(organism):
    arrays, meta = organism.arrays, organism.meta
    p = plan(meta.n_genes, meta.mode, meta.backwards)
    count = 2 * p.n + p.n_signals
    stacked = jax.vmap(lambda c: with_malfunction(p, arrays, c))(jnp.arange(count, dtype=jnp.int32))
    targetable = ~np.asarray(arrays.latent_mask)
    valid = np.concatenate([targetable, targetable, np.ones(p.n_signals, bool)])
    return stacked, valid


@jax.jit
def _measured_range(stacked, codes, flags, keys):
    """(low, high) float (C, P) over ``keys`` of each candidate's measured
    phenotypes (the simulator's steady state, then :func:`sim.measure`'s noise)."""
    states = sim.solve_organisms(stacked, codes, flags).states
    draws = jax.vmap(lambda k: jax.vmap(sim.measure, in_axes=(None, 0, 0))(k, stacked, states))(keys)
    return draws.min(axis=0), draws.max(axis=0)


def predicted_measurements(organism, codes, flags) -> tuple[np.ndarray, np.ndarray]:
    """(low, high), float (C, P): the range of what each candidate
    malfunction would show under the intervention ``codes`` (int8 (N,)),
    ``flags`` (bool (S,)): its steady state measured with the world's own
    noise (:func:`sim.measure`), over :data:`DRAWS` draws."""
    stacked, valid = _candidates(organism)
    count = len(valid)
    codes = jnp.broadcast_to(jnp.asarray(codes, jnp.int8), (count, organism.n_genes))
    flags = jnp.broadcast_to(jnp.asarray(flags, bool), (count, organism.n_signals))
    low, high = _measured_range(stacked, codes, flags, jax.random.split(jax.random.PRNGKey(0), DRAWS))
    return np.asarray(low, float), np.asarray(high, float)


def consistent_with(organism, codes, flags, measured) -> np.ndarray:
    """bool (C,): the candidates that could have shown ``measured`` (P,)
    under the intervention: every phenotype within the range of that
    candidate's simulated measurements widened by :data:`WIDEN` times the
    range plus :data:`FLOOR` on each side. A candidate outside is ruled out."""
    low, high = predicted_measurements(organism, codes, flags)
    margin = WIDEN * (high - low) + FLOOR
    measured = np.asarray(measured, float)[None, :]
    return np.all((measured >= low - margin) & (measured <= high + margin), axis=1)


def opening_baseline(record: dict) -> np.ndarray:
    """float (P,): the disease baseline the session showed at its opening (the
    core's reset, measured with the session's noise key)."""
    session = Session(record["tier"], record["mode"], record["n_genes"], record.get("backwards", False),
                      vocabulary=record.get("vocabulary", "invented"), budget=record.get("budget"))
    obs, _ = session.open(record["seed"])
    return np.asarray(obs["baseline_phenotypes"], float)


# What the report says under the audit's table of an agent whose row needs
# reading (luca_gym.results.audit.section): the paper's baselines diagnose by a rule
# that does not hold a candidate against the measurements.
NOTES = {
    "causal-sweep": (
        "its diagnosis is the paper's rule, not a reading of the evidence: the gene whose measured single intervention "
        "restored the most aberrant phenotypes, named locked low where a BOOST restored and locked high where a BLOCK "
        "did. That gene need not be the faulty one (an intervention elsewhere on the fault's path can restore the "
        "phenotypes too), and the rule never holds it against the session's measurements, which (the disease "
        "baseline first of all) have often ruled it out already: a consistent share near 0 and evidence ignored near "
        "1 are what the rule gives, not an error of the audit."),
    "heuristic": (
        "its diagnosis is the paper's rule, not a reading of the evidence: the gene whose measured BLOCK moved the "
        "aberrant phenotypes most, named locked high, never held against the session's measurements (the disease "
        "baseline first of all), which have often ruled it out already: a consistent share well below 1 is what the "
        "rule gives."),
}


def _accepted(call: dict) -> bool:
    return isinstance(call.get("result"), dict) and "error" not in call["result"]


def audit(record: dict) -> dict | None:
    """The evidence audit of one LUCA disease results line (None: healthy or
    sealed). Returns ``{"hypotheses": "malfunctions", "n_hypotheses",
    "experiments", "ruled_out"`` (per measurement, in order),
    ``"live_before"``, ``"ruled_out_per_experiment"``, ``"opening_ruled_out"``
    (by the disease baseline), ``"claimed"``, ``"claim"`` (the committed
    candidate by name), ``"consistent"``, ``"evidence_ignored"`` (0 or 1),
    ``"live_at_claim"`` (candidates live when it was committed),
    ``"truth_ruled_out"``}."""
    if record.get("mode") != "disease":
        return None
    organism = organism_of(record)
    if organism is None:
        return None
    meta = organism.meta
    n, s = meta.n_genes, organism.n_signals
    _, valid = _candidates(organism)
    truth = candidate_index(n, s, int(organism.arrays.malfunction_target), int(organism.arrays.malfunction_type))
    live = valid & consistent_with(organism, np.zeros(n, np.int8), np.zeros(s, bool), opening_baseline(record))
    opening_ruled_out = int(valid.sum() - live.sum())
    ruled_out, live_before = [], []
    claim, live_at_claim, claim_live = None, None, None
    for call in record.get("calls") or []:
        if not _accepted(call):
            continue
        name, arguments, result = call.get("call"), call.get("arguments") or {}, call["result"]
        if name == "submit_malfunction_hypothesis" and claim is None:
            target = calls.target_index(meta, arguments["target_name"])
            kind = MALFUNCTION_TYPES.index(arguments["malfunction_type"])
            claim = candidate_index(n, s, target, kind)
            live_at_claim, claim_live = int(live.sum()), bool(claim >= 0 and live[claim])
        elif name in MEASURING and "phenotypes" in result:
            codes, flags = calls.interventions_from_names(meta, arguments["interventions"])
            measured = [result["phenotypes"][p] for p in meta.phenotype_names]
            still = live & consistent_with(organism, codes, flags, measured)
            live_before.append(int(live.sum()))
            ruled_out.append(int(live.sum() - still.sum()))
            live = still
    claimed = claim is not None
    return {
        "hypotheses": "malfunctions",
        "n_hypotheses": int(valid.sum()),
        "experiments": len(ruled_out),
        "ruled_out": ruled_out,
        "live_before": live_before,
        "ruled_out_per_experiment": float(np.mean(ruled_out)) if ruled_out else None,
        "opening_ruled_out": opening_ruled_out,
        "claimed": claimed,
        "claim": candidate_name(meta, claim) if claimed and claim >= 0 else None,
        "consistent": claim_live if claimed else None,
        "evidence_ignored": (int(claim >= 0 and not claim_live)) if claimed else None,
        "live_at_claim": live_at_claim,
        "truth": candidate_name(meta, truth) if truth >= 0 else None,
        "truth_ruled_out": bool(truth >= 0 and not live[truth]),
    }
