"""The graph worlds' sections of ``luca-gym report`` (``World.report``): the
paper's Table 1 (success rate, and mean iterations over the successful
sessions, per setting and agent; infinity where none succeeded), with the
paper's best model beside it where the paper's text quotes it, and the
process figures the paper does not give (edge F1 and structural Hamming
distance of the final proposal, interventions, interventions wasted)."""

from __future__ import annotations

import numpy as np

from luca_gym.summaries import agents_in, group

# The paper's best model per setting, as its text quotes it (Auto-Discovery-Bench, Table 1):
# (success, mean iterations, model).
PAPER_BEST = {
    ("dag", (3, 3)): (1.00, 4.15, "GPT-4o"),
    ("dag", (3, 5)): (1.00, 4.35, "GPT-4o"),
    ("dag", (10, 5)): (1.00, 11.0, "Grok-4"),
    ("relational", (3,)): (1.00, 3.10, "Grok-4"),
    ("relational", (5,)): (1.00, 5.00, "Grok-4"),
    ("relational", (10,)): (1.00, 10.40, "Grok-4"),
}
# What a setting is, per world (the paper's columns), and what else a table holds fixed.
SIZE = {"dag": ("n_nodes", "n_states"), "relational": ("n_houses",)}
CONDITION = {"dag": ("edge_density", "redraw_may_repeat", "proposals"), "relational": ("edge_density", "proposals")}


def _setting_text(world: str, setting) -> str:
    return f"({setting[0]} nodes, {setting[1]} states)" if world == "dag" else f"{setting[0]} houses"


def success_cell(records) -> str:
    """``success % / mean iterations over the successful (n)``; ∞ where none succeeded."""
    success = np.array([r["scores"]["success"] for r in records], float)
    solved = [r["scores"]["iterations"] for r in records if r["scores"]["success"] >= 1]
    iterations = f"{np.mean(solved):.2f}" if solved else "∞"
    return f"{100 * success.mean():.0f}% / {iterations} ({len(records)})"


def table1(records, world: str) -> str:
    """Markdown: Table 1's cells per agent (rows) and setting (columns)."""
    size = SIZE[world]
    settings = sorted(group(records, *size))
    cells = group(records, "agent", *size)
    head = "| agent | " + " | ".join(_setting_text(world, s) for s in settings) + " |"
    lines = [head, "|" + " --- |" * (len(settings) + 1)]
    for agent in agents_in(records):
        lines.append(f"| {agent} | " + " | ".join(success_cell(cells[(agent, *s)]) if (agent, *s) in cells else "-"
                                                 for s in settings) + " |")
    paper = [PAPER_BEST.get((world, s)) for s in settings]
    if any(paper):
        lines.append("| *paper's best* | " + " | ".join(f"*{100 * p[0]:.0f}% / {p[1]:.2f} ({p[2]})*" if p else "-"
                                                        for p in paper) + " |")
    return "\n".join(lines)


def process_table(records, world: str) -> str:
    """Markdown: per agent and setting, the means of edge F1, SHD, interventions and wasted interventions."""
    size = SIZE[world]
    lines = ["| agent | setting | edge F1 | SHD | interventions | wasted | sessions |", "|" + " --- |" * 7]
    for (agent, *setting), rs in sorted(group(records, "agent", *size).items(),
                                       key=lambda kv: (agents_in(records).index(kv[0][0]), kv[0][1:])):
        mean = lambda k: np.mean([r["scores"][k] for r in rs])  # noqa: E731
        lines.append(f"| {agent} | {_setting_text(world, setting)} | {mean('edge_f1'):.3f} | {mean('shd'):.2f} | "
                     f"{mean('interventions'):.2f} | {mean('wasted'):.2f} | {len(rs)} |")
    return "\n".join(lines)


def sections(records: list, out_dir: str, *, source: str, notes=()) -> list[str]:
    """The report's sections for one graph world's lines ``records`` of
    results ``source`` (``notes``: what reading the file noted)."""
    world = records[0]["world"]
    title = "Directed graph discovery" if world == "dag" else "Undirected relational discovery"
    parts = [
        f"# {title} results ({world})",
        (f"{len(records)} sessions from `{source}`. Table 1's cells: success rate / mean iterations over the "
         "successful sessions (sessions); iterations count the interventions and the proposal that ended the "
         "session, the paper's cycles; ∞ where no session succeeded. The budget is 2N interventions."),
        *(f"Note: {note}" for note in notes),
    ]
    for condition, rs in sorted(group(records, *CONDITION[world]).items(), key=lambda kv: str(kv[0])):
        text = ", ".join(f"{k}={v}" for k, v in zip(CONDITION[world], condition))
        parts += [f"## Table 1: success rate and iterations ({text})", table1(rs, world),
                  f"## Process ({text})", process_table(rs, world)]
    return parts
