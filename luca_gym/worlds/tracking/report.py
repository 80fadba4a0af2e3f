"""The tracking world's sections of ``luca-gym report`` (``World.report``):
the paper's Table 2 (OA-Acc and AT-Acc per trajectory length M and agent)
and Figure 5 (accuracy by trajectory position, at the longest M present).

OA-Acc is the mean of ``exact`` over sessions (the fraction of Y matrices
submitted exactly right); AT-Acc the mean of ``trajectory_accuracy`` (the
fraction of rows of Y right); the accuracy at position i (1..M-1, the
transition from step i-1 to step i) the mean of ``position_correct[i-1]``.
:func:`figure_session` draws one session: the trajectory as shown and the
change matrix submitted.

The paper's own figures for language models are in its Table 2 and Figure 5,
which its text does not reproduce; its prose quotes a few of them
(:data:`PROSE_TABLE2`, :data:`PROSE_FIGURE5`). They are shown as "prose
figures", labelled with the paper's protocol (:data:`PAPER_PROTOCOL`), and
only beside runs of that protocol: a Table 2 figure under the table whose
runs include its trajectory length M and CoT condition, a Figure 5 figure
where the figure is drawn at its M with runs of its CoT condition.
"""

from __future__ import annotations

import os

import numpy as np

from luca_gym.results.figures import agent_color, agent_colors, legend_right, panel_letters, pyplot, save, score_axis
from luca_gym.results.summaries import agents_in, group, markdown_table

CONDITION = ("n_nodes", "n_colors", "change_prob")  # what Table 2 holds fixed (one table each)
FIGURE = "tracking_positions.png"
# What the paper's text says of its protocol for these figures (Auto-Discovery-Bench, "long trajectory"); its N,
# colours and change probability are not stated in the text, so the figures sit beside every such condition.
PAPER_PROTOCOL = ("the paper's protocol: one structured zero-shot prompt, a JSON answer of Y only, R=100 rounds per "
                  "trajectory length M; CoT prepends \"Please also include the reason for your answer\" before the "
                  "prediction; N, colours and change probability not stated in its text")
# The paper's prose figures (Auto-Discovery-Bench, "Overall accuracy vs. trajectory length"): (model, cot, M,
# OA-Acc as the text gives it, the text's words). Claude's sentence names no prompt condition; read as without CoT,
# since the next sentence introduces CoT's gains.
_CLAUDE = "Claude falls from 69% at length 3 to near-zero accuracy by length 10"
_GPT4O = "CoT generally helps on short sequences (e.g., GPT-4o: 13% → 100% at length 5; Qwen2.5 shows similar gains)"
PROSE_TABLE2 = (
    ("Claude", False, 3, "69%", _CLAUDE),
    ("Claude", False, 10, "near 0", _CLAUDE),
    ("GPT-4o", False, 5, "13%", _GPT4O),
    ("GPT-4o", True, 5, "100%", _GPT4O),
)
# ("Average trajectory accuracy across positions", length fixed at 20, 100 trials): (model, cot, M, position,
# accuracy as the text gives it, the text's words). "CoT partially mitigates this for GPT-4o and Qwen2.5, yet
# performance at late steps (e.g., Qwen2.5 at position 19 <70%) remains weak": read as Qwen2.5 with CoT.
PROSE_FIGURE5 = (("Qwen2.5", True, 20, 19, "below 70%", "performance at late steps (e.g., Qwen2.5 at position 19 <70%) "
                  "remains weak"),)


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
    body = []
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
        body.append([agent, "yes" if cot else "no", *row])
    return markdown_table(["agent", "CoT", *(f"M={m}" for m in lengths)], body)


def prose_table2(records) -> str | None:
    """Markdown: the paper's :data:`PROSE_TABLE2` figures whose M and CoT
    condition ``records`` (one condition of CONDITION) hold runs of, labelled
    as prose figures under the paper's protocol; None where none matches."""
    present = {(r["cot"], r["length"]) for r in records}
    rows = [[model, "yes" if cot else "no", f"M={m}", value, f'"{words}"']
            for model, cot, m, value, words in PROSE_TABLE2 if (cot, m) in present]
    if not rows:
        return None
    return "\n".join([f"Prose figures, OA-Acc, read from the paper's text beside the runs of the same M and CoT condition "
                      f"({PAPER_PROTOCOL}):", "",
                      markdown_table(["model (paper)", "CoT", "M", "OA-Acc (prose figure)", "the paper's words"], rows)])


def prose_figure5(records, length: int) -> str | None:
    """The paper's :data:`PROSE_FIGURE5` figures at ``length`` where
    ``records`` hold runs of their CoT condition there (a markdown line
    each), labelled as prose figures; None where none matches."""
    present = {r["cot"] for r in records if r["length"] == length}
    lines = [f"Prose figure, read from the paper's text ({PAPER_PROTOCOL}): {model}{' + CoT' if cot else ''} at position "
             f"{position} of M={m}: accuracy {value} (\"{words}\")."
             for model, cot, m, position, value, words in PROSE_FIGURE5 if m == length and cot in present]
    return "\n\n".join(lines) or None


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


def figure_session(observations, changes, path: str, *, agent: str = "") -> None:
    """One session, to the PNG ``path``: (a) the trajectory X (int (M, N)) as
    the agent is shown it, a cell per node and step in its colour (the colour
    number written in it), and (b) the change matrix Y it submitted (0/1
    (M-1, N)), each transition drawn between the two steps it compares, a
    filled cell for "changed", a red cross on each cell that is wrong and the
    rows (positions) scored right ticked. Time runs left to right. Nothing in
    this world is hidden (Y is a function of X), so the picture leaks nothing."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    x = np.asarray(observations, int)
    guess = np.asarray(changes, bool)
    m, n = x.shape
    truth = x[1:] != x[:-1]
    wrong = guess != truth
    colors = max(int(x.max()) + 1, 2)
    plt = pyplot()
    fig, (ax_x, ax_y) = plt.subplots(2, 1, figsize=(max(5.5, 0.42 * m + 1.8), 0.36 * (2 * n + 1) + 1.8), sharex=True,
                                     gridspec_kw={"height_ratios": [n, n + 0.8]})
    palette = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd"]
    ax_x.imshow(x.T, cmap=ListedColormap([palette[c % len(palette)] for c in range(colors)]), vmin=-0.5,
                vmax=colors - 0.5, aspect="auto", extent=(-0.5, m - 0.5, n - 0.5, -0.5))
    for step in range(m):
        for node in range(n):
            ax_x.text(step, node, str(x[step, node]), ha="center", va="center", fontsize=7, color="0.25")
    ax_x.set_ylabel("node")
    ax_x.set_title(f"the trajectory X as shown ({m} steps, {n} nodes, colours 0..{colors - 1})", fontsize=10)

    fill = agent_color(agent) if agent else "#1f77b4"
    ax_y.set_xlim(-0.5, m - 0.5)
    ax_y.set_ylim(n - 0.5, -1.3)  # a band above the cells for each row's verdict
    for i in range(m - 1):
        for node in range(n):
            centre = i + 0.5  # the transition between steps i and i + 1
            ax_y.add_patch(Rectangle((centre - 0.5, node - 0.5), 1, 1, facecolor=fill if guess[i, node] else "white",
                                     edgecolor="0.7", lw=0.5))
            if wrong[i, node]:
                ax_y.plot(centre, node, marker="x", color="#d62728", ms=9, mew=2)
        right = not wrong[i].any()
        ax_y.text(i + 0.5, -0.9, "\u2713" if right else "\u2717", ha="center", va="center", fontsize=10,
                  color="0.2" if right else "#d62728")
    ax_y.set_ylabel("node")
    ax_y.set_xlabel("step (Y's row i sits between steps i and i+1; above it: the row scored right or wrong)")
    rows_right = int((~wrong.any(axis=1)).sum())
    who = f"{agent}'s" if agent else "the submitted"
    ax_y.set_title(f"{who} change matrix Y (filled: changed; red cross: wrong), {rows_right} of {m - 1} rows right",
                   fontsize=10)
    for ax in (ax_x, ax_y):
        ax.set_yticks(range(n))
        ax.set_xticks(range(m))
    ax_y.spines["top"].set_visible(False)
    panel_letters([ax_x, ax_y])
    fig.tight_layout()
    save(plt, fig, path)


def sections(records: list, out_dir: str, *, source: str, notes=()) -> list[str]:
    """The report's tracking sections (markdown parts), and :data:`FIGURE` in
    ``out_dir``, from the tracking lines ``records`` of results ``source``
    (``notes``: what reading the file noted)."""
    parts = [
        "# State tracking results",
        (f"{len(records)} session{'' if len(records) == 1 else 's'} from `{source}`. Each cell of Table 2: OA-Acc / AT-Acc (sessions); OA-Acc is the "
         f"fraction of change-indicator matrices submitted exactly right, AT-Acc the mean fraction of their rows right."),
        *(f"Note: {note}" for note in notes),
    ]
    for condition, rs in sorted(group(records, *CONDITION).items()):
        parts += [f"## Table 2: accuracy by trajectory length ({_condition_text(condition)})", table2(rs)]
        parts += [text for text in (prose_table2(rs),) if text]
    longest = max(r["length"] for r in records)
    figure_positions(records, os.path.join(out_dir, FIGURE), longest)
    parts += [f"## Figure 5: accuracy by trajectory position (M={longest})", f"![accuracy by position]({FIGURE})"]
    parts += [text for text in (prose_figure5(records, longest),) if text]
    return parts
