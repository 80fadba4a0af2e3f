"""The biobank world's part of ``luca-gym report``: the floor (each agent's
role beside the paper's best agent), the paper's score table
(the mean total out of 100 and its parts, by agent, profile, tier and
budget), bias identification by mechanism, the mean total by world design and budget (null, two-driver,
three-to-six, hard; DrugTargetWorld S3.2), experiment use (S3.5: sessions
that received an experiment, deliveries by kind, refused requests, dollars
spent) and paired statistics across worlds, as for LUCA's ablations: each
pair of agents on the same worlds (seeds) at each budget, and each agent's
budget regimes against none on the same worlds. Mean ± population std
(sessions), as :mod:`luca_gym.results.summaries` gives them; Δ, its percentile
bootstrap 95% interval and the paired Wilcoxon signed-rank p from
:func:`luca_gym.results.paired.difference`, the one source of the ablations' statistics."""

from __future__ import annotations

import collections

from luca_gym.results.paired import RESAMPLES, difference, format_ci, format_p
from luca_gym.results.summaries import agents_in, cell, group, markdown_table, stats
from luca_gym.worlds.biobank.config import BUDGETS
from luca_gym.worlds.biobank.design import MECHANISMS
from luca_gym.worlds.biobank.oracle import EXPERIMENTS, PARTS

KINDS = ("null", "one-driver", "two-driver", "three-to-six", "hard")
# What each shipped agent is for a reader of the tables: the floor a benchmark must defeat (trivial answers and
# shortcuts that reason about nothing), the baselines, and the reference pipeline.
ROLES = {"null": "floor: nothing at all", "nominate-nothing": "floor: the trivial answer",
         "nominate-all": "floor: every protein", "top-association": "floor: the strongest association",
         "cue-spotter": "floor: generator cues, no causal check",
         "artefact-sweep": "floor: every artefact carrier rejected", "blanket-labels": "floor: cis-mr, every label aligned",
         "association-pick": "floor: cis-mr, a pair's stronger association", "correlation-screen": "baseline",
         "cis-mr": "baseline", "mr-experiments": "baseline", "causal-pipeline": "reference pipeline"}
FLOOR = tuple(a for a, role in ROLES.items() if role.startswith("floor"))
# The paper's best agent (DrugTargetWorld 4.1: Opus 5, mean composite over 20 worlds x 3 budgets) and its best
# bias identification (4.3: no agent averaged above 2.87 of 15).
PAPER_BEST = ("Opus 5 (DrugTargetWorld 4.1, 20 worlds x 3 budgets)", 39.98, 2.87)


def _in_agent_order(records, *keys):
    """``(key, sessions)`` of the records grouped by agent and ``keys`` (budget as :func:`_with_budget` reads it), the
    agents in :func:`~luca_gym.results.summaries.agents_in`'s order."""
    cells = group([_with_budget(r) for r in records], "agent", *keys)
    return [(key, rs) for agent in agents_in(records) for key, rs in cells.items() if key[0] == agent]


def score_table(records) -> str:
    """Markdown: per agent, profile, tier and budget, sessions, the total and each part (mean ± std)."""
    rows = [[agent, profile, tier, budget, len(rs), *(cell(stats([r["scores"][p] for r in rs])) for p in ("total", *PARTS))]
            for (agent, profile, tier, budget), rs in _in_agent_order(records, "profile", "tier", "budget")]
    return markdown_table(["agent", "profile", "tier", "budget", "sessions", "total", *(p.replace("_", " ") for p in PARTS)],
                          rows)


def design_table(records) -> str:
    """Markdown: per agent and budget, the mean total in each design class present (sessions)."""
    kinds = [k for k in KINDS if any(r["design"]["kind"] == k for r in records)]
    lines = []
    for (agent, budget), rs in _in_agent_order(records, "budget"):
        row = []
        for kind in kinds:
            mine = [r["scores"]["total"] for r in rs if r["design"]["kind"] == kind]
            row.append(f"{cell(stats(mine))} ({len(mine)})" if mine else "-")
        lines.append([agent, budget, *row])
    return markdown_table(["agent", "budget", *kinds], lines)


def floor_table(records) -> str:
    """Markdown: per budget, each agent's role (floor, baseline, reference), sessions, mean total and bias
    identification, with the paper's best agent beside them; and a line naming floor agents the folder lacks."""
    rows = [[agent, ROLES.get(agent, "agent"), budget, len(rs), cell(stats([r["scores"]["total"] for r in rs])),
             cell(stats([r["scores"]["bias_identification"] for r in rs]))]
            for (agent, budget), rs in _in_agent_order(records, "budget")]
    name, total, bias = PAPER_BEST
    rows.append([name, "the paper's best agent", "all three", 60, f"{total:.2f}", f"at most {bias:.2f}"])
    lines = [markdown_table(["agent", "role", "budget", "sessions", "total", "bias identification (15)"], rows)]
    missing = [a for a in FLOOR if a not in agents_in(records)]
    if missing:
        lines += ["", f"Floor agents not in this folder: {', '.join(missing)} (run them on the same seeds: "
                      f"`luca-gym eval --world biobank --agents {','.join(missing)}`)."]
    return "\n".join(lines)


def mechanism_table(records) -> str:
    """Markdown: per agent and budget, for each planted mechanism, the decoys found (rejected under their own
    mechanism) over the sessions whose world carried one; from ``scores.bias_by_mechanism``."""
    carried = [m for m in MECHANISMS if any(m in (r["scores"].get("bias_by_mechanism") or {}) for r in records)]
    if not carried:
        return ""
    lines = []
    for (agent, budget), rs in _in_agent_order(records, "budget"):
        row = []
        for m in carried:
            seen = [r["scores"]["bias_by_mechanism"][m] for r in rs if m in (r["scores"].get("bias_by_mechanism") or {})]
            row.append(f"{sum(seen):g}/{len(seen)}" if seen else "-")
        earned = stats([r["scores"].get("rejections_earned", 0) for r in rs])
        wrong = stats([r["scores"].get("rejections_wrong", 0) for r in rs])
        lines.append([agent, budget, *row, cell(earned), cell(wrong)])
    return markdown_table(["agent", "budget", *(m.replace("_", " ") for m in carried), "rejections earned",
                           "rejections wrong"], lines)


def experiment_table(records) -> str:
    """Markdown: per agent and budget, sessions, those that received at least
    one experiment, the experiments delivered (each kind), the requests
    refused (over budget, or naming what the release does not hold) and the
    mean dollars spent per session; from each record's audit log
    (``experiments``) and its calls."""
    kinds = list(EXPERIMENTS)
    lines = []
    for (agent, budget), rs in _in_agent_order(records, "budget"):
        delivered = [e for r in rs for e in r.get("experiments") or ()]
        refused = sum(1 for r in rs for c in r.get("calls") or () if c.get("call") == "experiment" and "error" in c.get("result", {}))
        used = sum(1 for r in rs if r.get("experiments"))
        spent = sum(e["cost"] for e in delivered) / len(rs)
        lines.append([agent, budget, len(rs), used, len(delivered), *(sum(e["kind"] == k for e in delivered) for k in kinds),
                      refused, f"{spent:,.0f}"])
    return markdown_table(["agent", "budget", "sessions", "with an experiment", "delivered",
                           *(k.replace("_", " ") for k in kinds), "refused", "spent per session ($)"], lines)


def pairs_table(records) -> str:
    """Markdown: per agent and budget, the experiments delivered at each
    horizon (first visit: cell perturbations; five years: knockdowns) and,
    where the worlds have ambiguous pairs (scorer version 4's ``pairs``), how
    the pairs were answered: resolved with the agent's own experiments,
    resolved without, abstained, anything else; empty when no record has
    either."""
    horizons = {kind: spec["horizon"] for kind, spec in EXPERIMENTS.items()}
    names = list(dict.fromkeys(horizons.values()))
    rows = []
    for (agent, budget), rs in _in_agent_order(records, "budget"):
        delivered = [e for r in rs for e in r.get("experiments") or ()]
        answers = [a for r in rs for a in ((r.get("scores") or {}).get("pairs") or {}).values()]
        if not delivered and not answers:
            continue
        by_horizon = [sum(horizons.get(e["kind"]) == h for e in delivered) for h in names]
        count = collections.Counter(answers)
        other = len(answers) - count["resolved with experiments"] - count["resolved without experiments"] - count["abstained"]
        rows.append([agent, budget, *by_horizon, len(answers), count["resolved with experiments"],
                     count["resolved without experiments"], count["abstained"], other])
    if not rows:
        return ""
    return markdown_table(["agent", "budget", *(f"experiments ({h})" for h in names), "ambiguous pairs",
                           "resolved with experiments", "resolved without", "abstained", "missed, both or wrong member"], rows)


def agent_pairs(records, metric: str = "total") -> list[dict]:
    """Each pair of agents on the same worlds: per profile, tier and budget,
    for agents A before B (:func:`~luca_gym.results.summaries.agents_in`'s order, the
    baselines' own), over the seeds both have, Δ = B - A of ``metric`` with its
    interval and p (:func:`luca_gym.results.paired.difference`). Rows: ``{"a", "b",
    "profile", "tier", "budget", "seeds", "difference"}``."""
    agents = agents_in(records)
    out = []
    for (profile, tier, budget), rs in group([_with_budget(r) for r in records], "profile", "tier", "budget").items():
        scores = {a: {r["seed"]: float(r["scores"][metric]) for r in rs if r["agent"] == a} for a in agents}
        for i, a in enumerate(agents):
            for b in agents[i + 1:]:
                seeds = sorted(set(scores[a]) & set(scores[b]))
                if seeds:
                    d = difference([scores[b][s] for s in seeds], [scores[a][s] for s in seeds])
                    out.append({"a": a, "b": b, "profile": profile, "tier": tier, "budget": budget, "seeds": seeds, "difference": d})
    return out


def budget_pairs(records, metric: str = "total") -> list[dict]:
    """Each agent's budget regimes against ``none`` on the same worlds: per
    agent, profile and tier, for each other regime present, over the seeds
    both have, Δ = regime - none of ``metric`` (:func:`luca_gym.results.paired.difference`).
    Rows: ``{"agent", "profile", "tier", "budget", "seeds", "difference"}``."""
    out = []
    for (agent, profile, tier), rs in group([_with_budget(r) for r in records], "agent", "profile", "tier").items():
        scores = {b: {r["seed"]: float(r["scores"][metric]) for r in rs if r["budget"] == b} for b in BUDGETS}
        for budget in (b for b in BUDGETS if b != "none"):
            seeds = sorted(set(scores["none"]) & set(scores[budget]))
            if seeds:
                d = difference([scores[budget][s] for s in seeds], [scores["none"][s] for s in seeds])
                out.append({"agent": agent, "profile": profile, "tier": tier, "budget": budget, "seeds": seeds, "difference": d})
    return out


def _compared(d) -> list[str]:
    """The subtrahend's and the minuend's mean ± std, Δ, its interval and p, as table cells."""
    return [f"{d.subtrahend[0]:.3f} ± {d.subtrahend[1]:.3f}", f"{d.minuend[0]:.3f} ± {d.minuend[1]:.3f}", f"{d.delta:+.3f}",
            format_ci(d.ci), format_p(d.p)]


def paired_tables(records, metric: str = "total") -> str:
    """Markdown: the agents paired on the same worlds (:func:`agent_pairs`)
    and the budgets paired on the same worlds (:func:`budget_pairs`), with a
    line on the statistics; empty when no pair shares a world."""
    agents, budgets = agent_pairs(records, metric), budget_pairs(records, metric)
    if not agents and not budgets:
        return ""
    sections = [f"Metric: {metric}; sessions paired by world (seed), mean ± population std over the paired worlds. CI: "
                f"percentile bootstrap 95% ({RESAMPLES} resamples); p: paired Wilcoxon signed-rank, two-sided (n/a where "
                "every difference is zero), as in LUCA's ablations."]
    if agents:
        head = ["agent A", "agent B", "profile", "tier", "budget", "n", "A", "B", "Δ (B - A)", "95% CI", "p"]
        rows = [[r["a"], r["b"], r["profile"], r["tier"], r["budget"], len(r["seeds"]), *_compared(r["difference"])]
                for r in agents]
        sections += ["#### Agents on the same worlds", markdown_table(head, rows)]
    if budgets:
        head = ["agent", "profile", "tier", "budget", "n", "with none", "with the budget", "Δ (budget - none)", "95% CI", "p"]
        rows = [[r["agent"], r["profile"], r["tier"], r["budget"], len(r["seeds"]), *_compared(r["difference"])]
                for r in budgets]
        sections += ["#### Budgets on the same worlds", markdown_table(head, rows)]
    return "\n\n".join(sections)


def _with_budget(record: dict) -> dict:
    """A record with its budget regime ("none" for records from before the world had experiments)."""
    return {**record, "budget": record.get("budget", "none")}


def sections(records, out_dir, *, source=None, notes=()) -> list[str]:
    """``luca-gym report``'s markdown parts for this world's records."""
    paired = paired_tables(records)
    return ["## biobank (drug-target discovery in a synthetic biobank)",
            f"{len(records)} sessions" + (f" from `{source}`" if source else "") + ". Scores out of 100 (scorer version "
            "5): target identification 35, causal confidence 20, direction 15, outcome alignment 5, bias identification "
            "15, phenotype 10, harmful surrogate -30 (nominated in its harmful direction, however labelled); the "
            "total floored at 0. Bias points are earned only against the planted decoys (one per planted bias, "
            "T1-T9), by rejecting them under their own mechanism; a rejection of another protein counts in precision, "
            "right where the release shows it fooling the analysis its mechanism targets (an earned rejection), wrong "
            "otherwise. "
            "Budget: the experiments' regime (none $0, limited $450,000, expanded $2,000,000).",
            *(f"Note: {note}" for note in (notes or ())),
            "### The floor, the baselines and the reference",
            "Floor agents reason about nothing (the trivial answer, every protein, the strongest association, the "
            "generator's outliers, every artefact carrier, blanket outcome labels, a pair's stronger association); a "
            "score means something only above them. causal-pipeline is the scripted "
            "reference (the checks each bias calls for, experiments on what observation cannot separate).",
            floor_table(records),
            "### Scores by agent", score_table(records),
            "### Total by world design", design_table(records),
            *(["### Bias identification by mechanism",
               "Decoys found / worlds carrying the mechanism; rejections of other proteins, earned (the release shows "
               "them fooling the analysis the mechanism targets: right in precision, no bias points) or wrong (mean "
               "per session).", mechanism_table(records)] if mechanism_table(records) else []),
            "### Experiment use", experiment_table(records),
            *(["### Experiments by horizon and ambiguous pairs", pairs_table(records)] if pairs_table(records) else []),
            *(["### Paired across worlds", paired] if paired else [])]
