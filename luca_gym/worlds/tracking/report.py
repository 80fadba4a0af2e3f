"""The tracking world's sections of ``luca-gym report`` (``World.report``):
the paper's Table 2 (OA-Acc and AT-Acc per trajectory length M and agent)
and Figure 5 (accuracy by trajectory position, at the longest M present).

OA-Acc is the mean of ``exact`` over sessions (the fraction of Y matrices
submitted exactly right); AT-Acc the mean of ``trajectory_accuracy`` (the
fraction of rows of Y right); the accuracy at position i (1..M-1, the
transition from step i-1 to step i) the mean of ``position_correct[i-1]``.
"""

from __future__ import annotations

import os

import numpy as np

from luca_gym.figures import agent_colors, legend_right, pyplot, save, score_axis
from luca_gym.summaries import agents_in, group

CONDITION = ("n_nodes", "n_colors", "change_prob")  # what Table 2 holds fixed (one table each)
FIGURE = "tracking_positions.png"


def _condition_text(condition) -> str:
    n_nodes, n_colors, change_prob = condition
    return f"N={n_nodes}, {n_colors} colours, change_prob={change_prob:g}"


def _series(records) -> list[tuple]:
    """(agent, cot) of ``records``: agents in the registry's order, without CoT first."""
    present = {(r["agent"], r["cot"]) for r in records}
    return [(a, cot) for a in agents_in(records) for cot in (False, True) if (a, cot) in present]


def _label(agent, cot) -> str:
    return f"{agent} + CoT" if cot else agent


def table2(records) -> str:
    """Markdown: per agent and prompt condition, OA-Acc / AT-Acc (sessions)
    at each trajectory length M of ``records`` (one condition of CONDITION)."""
    lengths = sorted({r["length"] for r in records})
    cells = group(records, "agent", "cot", "length")
    lines = ["| agent | CoT | " + " | ".join(f"M={m}" for m in lengths) + " |", "|" + " --- |" * (len(lengths) + 2)]
    for agent, cot in _series(records):
        row = []
        for m in lengths:
            rs = cells.get((agent, cot, m))
            if rs:
                oa = np.mean([r["scores"]["exact"] for r in rs])
                at = np.mean([r["scores"]["trajectory_accuracy"] for r in rs])
                row.append(f"{oa:.3f} / {at:.3f} ({len(rs)})")
            else:
                row.append("-")
        lines.append(f"| {agent} | {'yes' if cot else 'no'} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def position_accuracy(records) -> np.ndarray:
    """float64 (M-1,): the mean of ``position_correct`` over ``records`` (all of one length M)."""
    return np.mean([r["scores"]["position_correct"] for r in records], axis=0)


def figure_positions(records, path: str, length: int) -> None:
    """The paper's Figure 5: accuracy by trajectory position (1..M-1) at
    ``length``, one line per agent and prompt condition (and condition of
    CONDITION, where the records hold several): an agent's colour, dashed with CoT."""
    plt = pyplot()
    rs = [r for r in records if r["length"] == length]
    conditions = sorted(group(rs, *CONDITION))
    series = [(a, cot, c) for c in conditions for a, cot in _series([r for r in rs if tuple(r[k] for k in CONDITION) == c])]
    cells = group(rs, "agent", "cot", *CONDITION)
    colors = agent_colors(agents_in(rs))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.32 * length + 2.5), 4))
    markers = "osD^v<>"
    for a, cot, c in series:
        mine = cells[(a, cot, *c)]
        label = _label(a, cot) + (f" ({_condition_text(c)})" if len(conditions) > 1 else "") + f", n={len(mine)}"
        ax.plot(np.arange(1, length), position_accuracy(mine), marker=markers[conditions.index(c) % len(markers)], ms=4,
                color=colors[a], ls="--" if cot else "-", label=label)
    ax.set_xticks(np.arange(1, length, max(1, (length - 1) // 10)))
    ax.set_xlabel(f"trajectory position i (the change from step i-1 to step i), M={length}")
    score_axis(ax, "accuracy (row of Y right)", lines=True)
    title = f"Accuracy by trajectory position, M={length}"
    ax.set_title(title + (f" ({_condition_text(conditions[0])})" if len(conditions) == 1 else ""), fontsize=10)
    legend_right(ax)
    save(plt, fig, path)


def sections(records: list, out_dir: str, *, source: str, notes=()) -> list[str]:
    """The report's tracking sections (markdown parts), and :data:`FIGURE` in
    ``out_dir``, from the tracking lines ``records`` of results ``source``
    (``notes``: what reading the file noted)."""
    parts = [
        "# State tracking results",
        (f"{len(records)} sessions from `{source}`. Each cell of Table 2: OA-Acc / AT-Acc (sessions); OA-Acc is the "
         f"fraction of change-indicator matrices submitted exactly right, AT-Acc the mean fraction of their rows right."),
        *(f"Note: {note}" for note in notes),
    ]
    for condition, rs in sorted(group(records, *CONDITION).items()):
        parts += [f"## Table 2: accuracy by trajectory length ({_condition_text(condition)})", table2(rs)]
    longest = max(r["length"] for r in records)
    figure_positions(records, os.path.join(out_dir, FIGURE), longest)
    parts += [f"## Figure 5: accuracy by trajectory position (M={longest})", f"![accuracy by position]({FIGURE})"]
    return parts
