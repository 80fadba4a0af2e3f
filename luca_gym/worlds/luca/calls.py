"""The session's calls by name (SPEC §2), translated to and from core actions.

One table maps the paper's call names to the core's action kinds.
:func:`open_session` is the one place a front end (the LLM tool interface,
``luca-gym info``, ``play`` and ``mcp``, the evaluation harness) turns its
settings into an open :class:`~luca_gym.worlds.luca.session.Session`; :func:`action_from_call`
is the one translation of a named call into an env action, and
:func:`describe_action` / :func:`describe_result` translate back for logs.
Nothing here decides a rule: legality, cost and scoring stay in the core, and
the arguments of a call are checked by the schema the tools publish
(:class:`~luca_gym.worlds.luca.tools.ToolSession`) before they get here.
"""

from __future__ import annotations

import numpy as np

from luca_gym.worlds.luca import core, spec
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.spec import GENE_TYPES, INTERVENTION_TYPES, MALFUNCTION_TYPES, NO_MALFUNCTION, NONE, SIGNAL_TYPE
from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.types import OrganismMeta

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
# A submitted edge's direction -> its sign: + raises the phenotype, - lowers it.
DIRECTIONS = {"+": 1, "-": -1}


def open_session(seed, tier="medium", mode="healthy", n_genes=20, backwards=False, env: Session | None = None, *, sealed=None,
                 vocabulary="invented", budget=None):
    """Validate the settings, build a :class:`Session` from them (or take
    ``env``, which must have been built from the same ones) and open it on
    organism ``seed`` (sealed under ``sealed``, :mod:`luca_gym.seal`; its
    genes named in ``vocabulary``, invented or real), with ``budget``
    experiment and rescue units (None: the paper's N + S + 8, or ``env``'s own).
    Returns ``(env, first observation)``.

    Raises ValueError naming the bad setting and what is allowed."""
    seed = spec.check_seed(seed)
    tier, n_genes, mode, backwards = spec.check_organism(tier, n_genes, mode, backwards)
    vocabulary = spec.check_vocabulary(vocabulary, n_genes)
    seal = seal_mod.make_seal(sealed)
    budget = spec.check_budget(budget)
    if env is None:
        env = Session(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards, sealed=seal, vocabulary=vocabulary,
                      budget=budget)
    elif budget is not None and env.params.budget != budget:
        raise ValueError(f"env: built with budget={env.params.budget}; this session asks for budget={budget}")
    obs, _ = env.open(seed)
    m = env.organism.meta
    built = {"tier": m.tier, "n_genes": m.n_genes, "mode": m.mode, "backwards": m.backwards, "sealed": m.sealed,
             "vocabulary": m.vocabulary}
    wanted = {"tier": tier, "n_genes": n_genes, "mode": mode, "backwards": backwards,
              "sealed": None if seal is None else seal.fingerprint, "vocabulary": vocabulary}
    for name, value in wanted.items():
        if built[name] != value:
            raise ValueError(f"env: built with {name}={built[name]!r}; this session asks for {name}={value!r}")
    return env, obs


def _index(names, value, what: str) -> int:
    """Position of ``value`` in ``names``; ValueError naming it and what is allowed."""
    if value not in names:
        allowed = f"{names[0]}..{names[-1]}" if len(names) > 8 else ", ".join(names)
        raise ValueError(f"{what}: unknown {str(value)[:40]!r}; allowed {allowed}")
    return list(names).index(value)


def interventions_from_names(meta: OrganismMeta, interventions: dict) -> tuple[np.ndarray, np.ndarray]:
    """``{"G003": {"type": "BLOCK"}, "cascade-B": {"type": "ACTIVATE"}}`` ->
    (gene codes int8 (N,), signal flags bool (S,)). Latent genes pass here and
    are refused by the core (one rule, one place)."""
    codes = np.zeros(meta.n_genes, np.int8)
    flags = np.zeros(len(meta.signal_labels), bool)
    for target, item in interventions.items():
        if target in meta.signal_labels:
            _index((SIGNAL_TYPE,), item["type"], f"interventions[{target!r}].type")
            flags[meta.signal_labels.index(target)] = True
        else:
            gene = _index(meta.gene_names, target, "interventions")
            _index(GENE_TYPES, item["type"], f"interventions[{target!r}].type")
            codes[gene] = INTERVENTION_TYPES.index(item["type"])
    return codes, flags


def _code_name(names, code: int) -> str:
    """A code's name; an out-of-range code (an action the core will refuse) as its number."""
    return names[code] if 0 <= code < len(names) else str(code)


def interventions_to_names(meta: OrganismMeta, codes, flags) -> dict:
    """Inverse of :func:`interventions_from_names`."""
    codes = np.asarray(codes)
    out = {meta.gene_names[g]: {"type": _code_name(INTERVENTION_TYPES, int(codes[g]))} for g in np.flatnonzero(codes != NONE)}
    out.update({meta.signal_labels[k]: {"type": SIGNAL_TYPE} for k in np.flatnonzero(np.asarray(flags))})
    return out


def target_name(meta: OrganismMeta, target: int) -> str:
    """Unified target index (genes, then signals) -> gene name or signal label."""
    return _code_name((*meta.gene_names, *meta.signal_labels), target)


def target_index(meta: OrganismMeta, name: str) -> int:
    """Gene name or signal label -> unified target index."""
    return _index((*meta.gene_names, *meta.signal_labels), name, "target_name")


def network_from_edges(meta: OrganismMeta, edges) -> np.ndarray:
    """``[{"gene", "phenotype", "direction": "+" | "-"}, ...]`` -> int8 (N, P) signs."""
    matrix = np.zeros((meta.n_genes, len(meta.phenotype_names)), np.int8)
    for edge in edges:
        g = _index(meta.gene_names, edge["gene"], "edges.gene")
        p = _index(meta.phenotype_names, edge["phenotype"], "edges.phenotype")
        _index(tuple(DIRECTIONS), edge["direction"], "edges.direction")
        matrix[g, p] = DIRECTIONS[edge["direction"]]
    return matrix


def network_to_edges(meta: OrganismMeta, matrix) -> list:
    """Inverse of :func:`network_from_edges`; an entry other than -1, 0 or +1
    (a network the core refuses) keeps its value as the direction, which the
    call's schema then refuses, rather than pass as a legal sign."""
    matrix = np.asarray(matrix)
    signs = {1: "+", -1: "-"}
    return [
        {"gene": meta.gene_names[g], "phenotype": meta.phenotype_names[p], "direction": signs.get(int(matrix[g, p]), str(matrix[g, p]))}
        for g, p in zip(*np.nonzero(matrix))
    ]


def action_from_call(meta: OrganismMeta, name: str, arguments: dict) -> dict:
    """A named call -> the :class:`Session` action dict (dtypes of the env's action
    space). ``arguments`` are those the call's schema allows (already checked);
    a call with no core action (``get_organism_info``, ``submit_hypothesis``)
    raises ValueError."""
    kind = CALLS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"name: {str(name)[:40]!r} has no core action; allowed {', '.join(CALL_OF_KIND.values())}")
    if kind in (core.EXPERIMENT, core.TEST_RESCUE):
        codes, flags = interventions_from_names(meta, arguments["interventions"])
        return {"kind": kind, "gene_codes": codes.astype(np.int64), "signal_flags": flags.astype(np.int8)}
    if kind == core.SUBMIT_PREDICTION:
        return {"kind": kind, "prediction": np.asarray([arguments["predictions"][p] for p in meta.phenotype_names], np.float32)}
    if kind == core.SUBMIT_NETWORK:
        return {"kind": kind, "network": network_from_edges(meta, arguments["edges"])}
    if kind == core.COMMIT_DIAGNOSIS:
        return {
            "kind": kind,
            "diagnosis_target": target_index(meta, arguments["target_name"]),
            "diagnosis_type": _index(MALFUNCTION_TYPES[1:], arguments["malfunction_type"], "malfunction_type") + 1,
        }
    return {"kind": kind}


def describe_action(meta: OrganismMeta, action: dict) -> dict:
    """A core action dict -> ``{"call": name, "arguments": {...}}``, the
    arguments as the call's schema has them (the inverse of
    :func:`action_from_call`)."""
    kind = int(action["kind"])
    name = CALL_OF_KIND.get(kind, f"unknown_kind_{kind}")
    args: dict = {}
    if kind in (core.EXPERIMENT, core.TEST_RESCUE):
        args["interventions"] = interventions_to_names(
            meta, action.get("gene_codes", np.zeros(meta.n_genes)), action.get("signal_flags", np.zeros(len(meta.signal_labels)))
        )
    elif kind == core.SUBMIT_PREDICTION:
        values = np.asarray(action.get("prediction", np.full(len(meta.phenotype_names), 0.5)), float)
        args["predictions"] = {p: float(v) for p, v in zip(meta.phenotype_names, values)}
    elif kind == core.COMMIT_DIAGNOSIS:
        args["target_name"] = target_name(meta, int(action.get("diagnosis_target", 0)))
        args["malfunction_type"] = _code_name(MALFUNCTION_TYPES, int(action.get("diagnosis_type", 0)))
    elif kind == core.SUBMIT_NETWORK:
        args["edges"] = network_to_edges(meta, action.get("network", np.zeros((meta.n_genes, len(meta.phenotype_names)))))
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


SCORE_DIGITS = 4  # decimals of the scores an agent is shown


def describe_scores(meta: OrganismMeta, scores: dict) -> dict:
    """An ended session's scores as an agent or a person reads them: the true
    malfunction by name (``malfunction_target`` a gene name or signal label,
    or None in healthy mode; ``malfunction_type`` NONE / LOCK_HI / LOCK_LO /
    PERSIST) and every figure rounded to 4 decimals (no float32 noise)."""
    out = {}
    for key, value in scores.items():
        if key == "malfunction_target":
            out[key] = None if int(scores.get("malfunction_type", 0)) == NO_MALFUNCTION else target_name(meta, int(value))
        elif key == "malfunction_type":
            out[key] = _code_name(MALFUNCTION_TYPES, int(value))
        elif isinstance(value, float):
            out[key] = round(value, SCORE_DIGITS)
        elif isinstance(value, list):
            out[key] = [round(v, SCORE_DIGITS) if isinstance(v, float) else v for v in value]
        else:
            out[key] = value
    return out
