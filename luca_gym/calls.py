"""The session's calls by name (SPEC §2), translated to and from core actions.

One table maps the paper's call names to the core's action kinds; the harness
logs, the terminal player and the LLM tool interface all translate through
it. Nothing here decides a rule: legality, cost and scoring stay in the core.
"""

from __future__ import annotations

import numpy as np

from luca_gym import core
from luca_gym.types import INTERVENTION_TYPES, MALFUNCTION_TYPES, NONE, OrganismMeta

# Paper call name -> core action kind (None: a free call with no core action).
CALLS = {
    "get_organism_info": None,
    "run_experiment": core.EXPERIMENT,
    "get_next_prediction_task": core.REVEAL_TASK,
    "submit_prediction": core.SUBMIT_PREDICTION,
    "submit_hypothesis": None,
    "submit_network": core.SUBMIT_NETWORK,
    "submit_malfunction_hypothesis": core.COMMIT_DIAGNOSIS,
    "test_rescue": core.TEST_RESCUE,
    "end": core.END,
}
CALL_OF_KIND = {kind: name for name, kind in CALLS.items() if kind is not None}
GENE_TYPES = tuple(t for t in INTERVENTION_TYPES if t != "NONE")
SIGNAL_TYPE = "ACTIVATE"
DIRECTIONS = {"+": 1, "-": -1, "activates": 1, "inhibits": -1, "up": 1, "down": -1}


def interventions_from_names(meta: OrganismMeta, interventions: dict) -> tuple[np.ndarray, np.ndarray]:
    """``{"G003": {"type": "BLOCK"}, "cascade-B": {"type": "ACTIVATE"}}`` ->
    (gene codes int8 (N,), signal flags bool (S,)). Raises ValueError naming
    the unknown target or type and what is allowed. Latent genes pass here
    and are refused by the core (one rule, one place)."""
    if not isinstance(interventions, dict):
        raise ValueError(f"interventions: expected an object of target -> {{'type': ...}}, got {type(interventions).__name__}")
    codes = np.zeros(meta.n_genes, np.int8)
    flags = np.zeros(len(meta.signal_labels), bool)
    genes = {name: i for i, name in enumerate(meta.gene_names)}
    signals = {label: i for i, label in enumerate(meta.signal_labels)}
    for target, spec in interventions.items():
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict) or set(spec) != {"type"} or not isinstance(spec["type"], str):
            raise ValueError(f"interventions[{target!r}]: expected {{'type': NAME}}, got {spec!r}")
        kind = spec["type"].upper()
        if target in genes:
            if kind not in GENE_TYPES:
                raise ValueError(f"interventions[{target!r}]: unknown gene type {spec['type']!r}; allowed {', '.join(GENE_TYPES)}")
            codes[genes[target]] = INTERVENTION_TYPES.index(kind)
        elif target in signals:
            if kind != SIGNAL_TYPE:
                raise ValueError(f"interventions[{target!r}]: unknown signal type {spec['type']!r}; allowed {SIGNAL_TYPE}")
            flags[signals[target]] = True
        else:
            raise ValueError(
                f"interventions: unknown target {str(target)[:40]!r}; allowed gene names "
                f"{meta.gene_names[0]}..{meta.gene_names[-1]} or signals {', '.join(meta.signal_labels)}"
            )
    return codes, flags


def interventions_to_names(meta: OrganismMeta, codes, flags) -> dict:
    """Inverse of :func:`interventions_from_names`."""
    out = {}
    for g in np.flatnonzero(np.asarray(codes) != NONE):
        code = int(np.asarray(codes)[g])
        out[meta.gene_names[g]] = {"type": INTERVENTION_TYPES[code] if 0 <= code < len(INTERVENTION_TYPES) else str(code)}
    for k in np.flatnonzero(np.asarray(flags)):
        out[meta.signal_labels[k]] = {"type": SIGNAL_TYPE}
    return out


def target_name(meta: OrganismMeta, target: int) -> str:
    """Unified target index -> gene name or signal label."""
    n = meta.n_genes
    if 0 <= target < n:
        return meta.gene_names[target]
    if n <= target < n + len(meta.signal_labels):
        return meta.signal_labels[target - n]
    return str(target)


def target_index(meta: OrganismMeta, name: str) -> int:
    """Gene name or signal label -> unified target index (ValueError if unknown)."""
    if name in meta.gene_names:
        return meta.gene_names.index(name)
    if name in meta.signal_labels:
        return meta.n_genes + meta.signal_labels.index(name)
    raise ValueError(f"target_name: unknown target {str(name)[:40]!r}; allowed a gene name or a signal label")


def network_from_edges(meta: OrganismMeta, edges) -> np.ndarray:
    """[(gene, phenotype, direction), ...] -> int8 (N, P) signs."""
    if not isinstance(edges, (list, tuple)):
        raise ValueError(f"edges: expected a list of [gene, phenotype, direction], got {type(edges).__name__}")
    matrix = np.zeros((meta.n_genes, len(meta.phenotype_names)), np.int8)
    for item in edges:
        if not isinstance(item, (list, tuple)) or len(item) != 3 or not all(isinstance(x, str) for x in item):
            raise ValueError(f"edges: each edge is [gene, phenotype, direction] strings, got {str(item)[:60]}")
        gene, phenotype, direction = item
        if gene not in meta.gene_names:
            raise ValueError(f"edges: unknown gene {gene[:40]!r}")
        if phenotype not in meta.phenotype_names:
            raise ValueError(f"edges: unknown phenotype {phenotype[:40]!r}; allowed {', '.join(meta.phenotype_names)}")
        if direction.lower() not in DIRECTIONS:
            raise ValueError(f"edges: unknown direction {direction[:20]!r}; allowed {', '.join(DIRECTIONS)}")
        matrix[meta.gene_names.index(gene), meta.phenotype_names.index(phenotype)] = DIRECTIONS[direction.lower()]
    return matrix


def network_to_edges(meta: OrganismMeta, matrix) -> list:
    matrix = np.asarray(matrix)
    return [
        [meta.gene_names[g], meta.phenotype_names[p], "+" if matrix[g, p] > 0 else "-"]
        for g, p in zip(*np.nonzero(matrix))
    ]


def describe_action(meta: OrganismMeta, action: dict) -> dict:
    """A core action dict -> ``{"call": name, "arguments": {...}}`` by name."""
    kind = int(action["kind"])
    name = CALL_OF_KIND.get(kind, f"unknown_kind_{kind}")
    args: dict = {}
    if kind in (core.EXPERIMENT, core.TEST_RESCUE):
        args["interventions"] = interventions_to_names(
            meta, action.get("gene_codes", np.zeros(meta.n_genes)), action.get("signal_flags", np.zeros(len(meta.signal_labels)))
        )
    elif kind == core.SUBMIT_PREDICTION:
        values = np.asarray(action.get("prediction", np.full(3, 0.5)), float)
        args["predictions"] = {p: float(v) for p, v in zip(meta.phenotype_names, values)}
    elif kind == core.COMMIT_DIAGNOSIS:
        t = int(action.get("diagnosis_type", 0))
        args["target_name"] = target_name(meta, int(action.get("diagnosis_target", 0)))
        args["malfunction_type"] = MALFUNCTION_TYPES[t] if 0 <= t < len(MALFUNCTION_TYPES) else str(t)
    elif kind == core.SUBMIT_NETWORK:
        args["edges"] = network_to_edges(meta, action.get("network", np.zeros((meta.n_genes, 3))))
    return {"call": name, "arguments": args}


def describe_result(meta: OrganismMeta, kind: int, obs: dict, info: dict) -> dict:
    """What a call returned, by name: phenotypes, status, steps and budget on
    every measured call; the task on a reveal; an error when refused."""
    out: dict = {"budget_remaining": int(obs["budget_left"])}
    if info.get("error_code"):
        out["error"] = info["error"]
        return out
    if kind in (core.EXPERIMENT, core.TEST_RESCUE):
        out["phenotypes"] = {p: round(float(v), 6) for p, v in zip(meta.phenotype_names, obs["last_phenotypes"])}
        out["status"] = "converged" if obs["last_converged"] else "max_steps_reached"
        out["steps"] = int(obs["last_steps"])
        if kind == core.TEST_RESCUE:
            out["phenotype_in_healthy_range"] = {p: bool(v) for p, v in zip(meta.phenotype_names, obs["last_in_range"])}
            out["restored_fraction"] = round(float(obs["last_restored_fraction"]), 6)
    elif kind == core.REVEAL_TASK:
        out["task_index"] = int(obs["task_index"])
        out["interventions"] = {
            meta.gene_names[g]: {"type": INTERVENTION_TYPES[int(c)]} for g, c in zip(obs["task_genes"], obs["task_codes"])
        }
    elif kind in (core.SUBMIT_PREDICTION, core.SUBMIT_NETWORK):
        out["stored"] = True
    elif kind == core.COMMIT_DIAGNOSIS:
        out["stored"] = True
        out["note"] = "Hypothesis locked. test_rescue is now available. Score revealed at session end."
    return out
