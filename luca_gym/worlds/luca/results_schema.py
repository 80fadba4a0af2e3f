"""JSON Schemas of what each tool of a :class:`~luca_gym.worlds.luca.tools.ToolSession`
returns: the MCP server publishes them as ``outputSchema`` and sends every
result as ``structuredContent`` that conforms.

Each schema is an object schema with two branches (``anyOf``): the tool's
result, or a refusal ``{"error", "budget_remaining"}``. The SDK's Python
client checks only results without ``isError`` against the schema; others may
check every result, so a refusal (``isError``) carries conforming structured
content too. The names are this
organism's (phenotypes, targetable genes, signals); scores are by name
(``malfunction_type`` NONE / LOCK_HI / LOCK_LO / PERSIST) and rounded, as
:func:`luca_gym.worlds.luca.calls.describe_scores` writes them. A latent gene's name is
never listed: ``malfunction_target`` is any string (or null, healthy mode).
"""

from __future__ import annotations

import copy

from luca_gym.worlds.luca.spec import GENE_TYPES, MALFUNCTION_TYPES, N_TASKS

_COUNT = {"type": "integer", "minimum": 0}
_FRACTION = {"type": "number", "minimum": 0, "maximum": 1}
# Score figures by type; any other figure the core adds is a number (additionalProperties).
_SCORE_COUNTS = ("n_alt", "n_experiments", "n_rescue_tests")
_SCORE_FIGURES = (
    "composite", "prediction", "diagnosis", "rescue", "network_precision", "network_recall", "network_f1",
    "budget_fraction", "single_gene_fraction", "gene_coverage", "block_fraction", "redundancy", "commit_point",
)


def _object(properties: dict, required=None, **extra) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else list(required),
        "additionalProperties": False,
        **extra,
    }


def _by_phenotype(session, value: dict) -> dict:
    return _object({p: dict(value) for p in session.meta.phenotype_names})


def _scores() -> dict:
    properties = {
        **{k: {"type": "number"} for k in _SCORE_FIGURES},
        **{k: dict(_COUNT) for k in _SCORE_COUNTS},
        "task_scores": {"type": "array", "items": {"type": "number"}, "minItems": N_TASKS, "maxItems": N_TASKS},
        "malfunction_target": {"type": ["string", "null"], "description": "the true malfunction's gene or signal; null in healthy mode"},
        "malfunction_type": {"enum": list(MALFUNCTION_TYPES)},
    }
    return {**_object(properties), "additionalProperties": {"type": "number"}, "description": "figures rounded to 4 decimals"}


def _ending() -> dict:
    """The fields of a result that ended the session (``end``, or the call that reached the call limit)."""
    return {
        "ended": {"const": True},
        "end_reason": {"enum": ["end", "call_limit"]},
        "note": {"type": "string"},
        "scores": _scores(),
    }


def _measured(session) -> dict:
    return {
        "budget_remaining": _COUNT,
        "phenotypes": _by_phenotype(session, _FRACTION),
        "status": {"enum": ["converged", "max_steps_reached"]},
        "steps": _COUNT,
    }


def _result(session, tool_name: str) -> dict:
    """The schema of a tool's result when the call is accepted."""
    budget = {"budget_remaining": _COUNT}
    ends = {"dependentRequired": {"ended": ["end_reason", "scores"]}}
    if tool_name == "get_organism_info":
        properties = {
            "organism_id": {"type": "string"},
            "gene_names": {"type": "array", "items": {"enum": list(session.targetable_genes)}},
            "signals": {
                "type": "array",
                "items": _object({"label": {"enum": list(session.meta.signal_labels)}, "mode": {"type": "string"}}),
            },
            "observable_phenotypes": {"type": "array", "items": {"enum": list(session.meta.phenotype_names)}},
            "baseline_phenotypes": _by_phenotype(session, _FRACTION),
            "healthy_phenotype_ranges": _by_phenotype(
                session, {"type": "array", "items": _FRACTION, "minItems": 2, "maxItems": 2}
            ),
            **budget,
            "budget_total": _COUNT,
            "call_limit": _COUNT,
            "calls_accepted": _COUNT,
        }
        if session.params.disease:
            properties["aberrant_phenotypes"] = {"type": "array", "items": {"enum": list(session.meta.phenotype_names)}}
        return _object(properties)
    if tool_name == "submit_hypothesis":
        return _object({"stored": {"const": True}, **budget})
    if tool_name == "run_experiment":
        measured = _measured(session)
        return _object({**measured, **_ending()}, required=measured, **ends)
    if tool_name == "test_rescue":
        measured = {
            **_measured(session),
            "phenotype_in_healthy_range": _by_phenotype(session, {"type": "boolean"}),
            "restored_fraction": _FRACTION,
        }
        return _object({**measured, **_ending()}, required=measured, **ends)
    if tool_name == "get_next_prediction_task":
        task = {
            **budget,
            "task_index": _COUNT,
            "interventions": {
                "type": "object",
                "description": "the task's two genes and what is done to each",
                "propertyNames": {"enum": list(session.targetable_genes)},
                "additionalProperties": _object({"type": {"enum": list(GENE_TYPES)}}),
                "minProperties": 2,
                "maxProperties": 2,
            },
        }
        return _object({**task, **_ending()}, required=task, **ends)
    if tool_name in ("submit_prediction", "submit_network"):
        stored = {**budget, "stored": {"const": True}}
        return _object({**stored, **_ending()}, required=stored, **ends)
    if tool_name == "submit_malfunction_hypothesis":
        stored = {**budget, "stored": {"const": True}, "note": {"type": "string"}}
        return _object({**stored, **_ending()}, required=stored, **ends)
    if tool_name == "end":
        return _object({**budget, **_ending()}, required=["budget_remaining", "ended", "end_reason", "scores"])
    raise ValueError(f"tool_name: unknown tool {tool_name!r}")


def error_schema() -> dict:
    """A refused call's result (the session is unchanged)."""
    return _object({"error": {"type": "string"}, "budget_remaining": _COUNT})


def output_schema(session, tool_name: str) -> dict:
    """The JSON Schema (draft 2020-12, as MCP assumes) of every result
    ``session.call(tool_name, ...)`` can return: the tool's result or a
    refusal. A fresh copy each call. Raises ValueError for an unknown tool."""
    return copy.deepcopy({"type": "object", "anyOf": [_result(session, tool_name), error_schema()]})
