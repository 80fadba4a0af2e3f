"""The biobank world's part of ``luca-gym report``: the paper's score table
(the mean total out of 100 and its parts, by agent, profile, tier and
budget) and the mean total by world design and budget (null, two-driver, three-to-six, hard; DrugTargetWorld
S3.2). Mean ± population std (sessions), as :mod:`luca_gym.summaries` gives them."""

from __future__ import annotations

from luca_gym.summaries import agents_in, cell, group, stats
from luca_gym.worlds.biobank.oracle import PARTS

KINDS = ("null", "one-driver", "two-driver", "three-to-six", "hard")


def score_table(records) -> str:
    """Markdown: per agent, profile, tier and budget, sessions, the total and each part (mean ± std)."""
    lines = ["| agent | profile | tier | budget | sessions | total | " + " | ".join(p.replace("_", " ") for p in PARTS) + " |",
             "| --- " * (6 + len(PARTS)) + "|"]
    cells = group([_with_budget(r) for r in records], "agent", "profile", "tier", "budget")
    for agent in agents_in(records):
        for (a, profile, tier, budget), rs in cells.items():
            if a != agent:
                continue
            parts = [cell(stats([r["scores"][p] for r in rs])) for p in ("total", *PARTS)]
            lines.append(f"| {agent} | {profile} | {tier} | {budget} | {len(rs)} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def design_table(records) -> str:
    """Markdown: per agent and budget, the mean total in each design class present (sessions)."""
    kinds = [k for k in KINDS if any(r["design"]["kind"] == k for r in records)]
    lines = ["| agent | budget | " + " | ".join(kinds) + " |", "| --- " * (2 + len(kinds)) + "|"]
    cells = group([_with_budget(r) for r in records], "agent", "budget")
    for agent in agents_in(records):
        for (a, budget), rs in cells.items():
            if a != agent:
                continue
            row = []
            for kind in kinds:
                mine = [r["scores"]["total"] for r in rs if r["design"]["kind"] == kind]
                row.append(f"{cell(stats(mine))} ({len(mine)})" if mine else "-")
            lines.append(f"| {agent} | {budget} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _with_budget(record: dict) -> dict:
    """A record with its budget regime ("none" for records from before stage S3, which had no experiments)."""
    return {**record, "budget": record.get("budget", "none")}


def sections(records, out_dir, *, source=None, notes=()) -> list[str]:
    """``luca-gym report``'s markdown parts for this world's records."""
    return ["## biobank (drug-target discovery in a synthetic biobank)",
            f"{len(records)} sessions" + (f" from `{source}`" if source else "") + ". Scores out of 100: target "
            "identification 35, causal confidence 20, direction 20, bias identification 15, phenotype 10, harmful "
            "surrogate -30 (nominated in its harmful direction); the total floored at 0. Bias identification is earned only "
            "against the planted decoys (one per planted bias, T1-T9), by rejecting them under their own mechanism. "
            "Budget: the experiments' regime (none $0, limited $450,000, expanded $2,000,000).",
            *(f"Note: {note}" for note in (notes or ())),
            "### Scores by agent", score_table(records),
            "### Total by world design", design_table(records)]
