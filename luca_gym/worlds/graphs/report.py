"""The graph worlds' sections of ``luca-gym report`` (``World.report``): the
paper's Table 1 (success rate, and mean iterations over the successful
sessions, per setting and agent; infinity where none succeeded), with the
paper's best model beside it where the paper's text quotes it, and the
process figures the paper does not give (edge F1 and structural Hamming
distance of the final proposal, interventions, interventions wasted); and
:func:`figure_session`, one session drawn as its agent left it."""

from __future__ import annotations

import numpy as np

from luca_gym.figures import agent_color, panel_letters, pyplot, save
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


# What the evidence implies of a pair (core.EDGE, NO_EDGE, UNKNOWN), as drawn by figure_session.
KNOWLEDGE_COLORS = {1: "#2ca02c", -1: "#d9d9d9", 0: "#ffffff"}
KNOWLEDGE_NAMES = {1: "edge seen", -1: "no edge", 0: "unknown"}


def figure_session(state, config, path: str, *, agent: str = "") -> None:
    """One session of a graph world, as its agent saw and left it, to the PNG
    ``path``: (a) what the evidence implies of each pair
    (:func:`~luca_gym.worlds.graphs.core.knowledge`: edge seen, no edge,
    unknown), with each node's interventions, and (b) the adjacency matrix the
    session proposed last (nodes on a circle; arrows directed, lines
    undirected), titled with its scores. Reads the public view and the
    proposal, never the hidden graph, and the scores only once the session
    has ended (an ended session's scores are public): a session that succeeded
    shows the truth because its agent found it. ``state``: a
    :class:`~luca_gym.worlds.graphs.core.GraphState` (one session);
    ``config``: its :class:`~luca_gym.worlds.graphs.config.DagConfig` or
    :class:`~luca_gym.worlds.graphs.config.RelationalConfig`; ``agent``: who
    played it, for the title and the edges' colour."""
    import jax
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Circle, FancyArrowPatch, Patch

    from luca_gym.worlds.graphs import core

    view = jax.device_get(core.public_view(state))
    n, noun = config.n, config.node_noun
    known = np.asarray(view["knowledge"], int)
    intervened = np.asarray(view["intervened"], int)
    proposal = np.asarray(jax.device_get(state.hypothesis), bool)
    scores = {k: float(v) for k, v in jax.device_get(core.scores(state, config.directed)).items()}
    plt = pyplot()
    fig, (ax_k, ax_g) = plt.subplots(1, 2, figsize=(9.6, 4.6), gridspec_kw={"width_ratios": [1, 1.05]})

    order = (-1, 0, 1)
    ax_k.imshow(known + 1, cmap=ListedColormap([KNOWLEDGE_COLORS[v] for v in order]), vmin=0, vmax=2)
    ax_k.set_xticks(range(n))
    ax_k.set_yticks(range(n), [f"{i} ({intervened[i]}x)" for i in range(n)])
    ax_k.set_xticks(np.arange(-0.5, n), minor=True)
    ax_k.set_yticks(np.arange(-0.5, n), minor=True)
    ax_k.grid(which="minor", color="0.6", lw=0.5)
    ax_k.tick_params(which="minor", length=0)
    pair = "row -> column" if config.directed else "row - column"
    ax_k.set_xlabel(f"{noun} ({pair})")
    ax_k.set_ylabel(f"{noun} (its interventions)")
    ax_k.set_title("what the evidence implies", fontsize=10)
    ax_k.legend(handles=[Patch(facecolor=KNOWLEDGE_COLORS[v], edgecolor="0.6", label=KNOWLEDGE_NAMES[v]) for v in (1, -1, 0)],
                fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)

    angle = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    radius = 0.13
    color = agent_color(agent) if agent else "#1f77b4"
    edges = [(i, j) for i, j in zip(*np.nonzero(proposal)) if config.directed or i < j]
    for i, j in edges:
        ax_g.add_patch(FancyArrowPatch(xy[i], xy[j], arrowstyle="-|>" if config.directed else "-", mutation_scale=12,
                                       color=color, lw=1.4, shrinkA=radius * 72 * 1.6, shrinkB=radius * 72 * 1.6,
                                       connectionstyle="arc3,rad=0.08" if config.directed else "arc3", zorder=2))
    for i, (x, y) in enumerate(xy):
        ax_g.add_patch(Circle((x, y), radius, facecolor="white", edgecolor="0.2", lw=1.0, zorder=3))
        ax_g.text(x, y, str(i), ha="center", va="center", fontsize=9, zorder=4)
    ax_g.set_xlim(-1.3, 1.3)
    ax_g.set_ylim(-1.3, 1.3)
    ax_g.set_aspect("equal")
    ax_g.axis("off")
    if view["ended"]:
        verdict = "correct" if scores["success"] >= 1 else "wrong"
        title = (f"the proposal ({verdict}): edge F1 {scores['edge_f1']:.2f}, SHD {scores['shd']:.0f}, "
                 f"{scores['iterations']:.0f} iterations")
    else:  # the scores read the hidden graph: an open session shows none
        title = f"the last proposal (open session: scored at its end), {scores['interventions']:.0f} interventions"
    ax_g.set_title(title, fontsize=10)
    panel_letters([ax_k, ax_g])
    who = f"{agent} on " if agent else ""
    fig.suptitle(f"{who}{config.describe()}", fontsize=11)
    save(plt, fig, path)
