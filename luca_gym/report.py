"""Markdown tables and PNG figures from a results folder (``luca-gym report``),
the drawing of an organism's true network (``luca-gym info --graph``) and the
timeline of one recorded session (``luca-gym show``).

Every score figure shows our mean with ±1 population std (error bars, as the
paper's tables) and marks the paper's baseline figures as black diamonds where
the paper has them: composites (Tables 6-7, N=20), disease sub-scores
(Table 8, N=20), prediction accuracy against N (Table 11, medium healthy) and
budget use and gene coverage (Table 10, medium healthy, N=20).
"""

from __future__ import annotations

import math
import os
import warnings
import re

import numpy as np

from luca_gym import __version__, ablation
from luca_gym.worlds.luca import calls, generator as world
from luca_gym import harness as ev
from luca_gym.worlds.luca.fidelity import PAPER_TABLE8
from luca_gym.worlds.luca.spec import (
    ACCURACY_THRESHOLD,
    HEALTHY_RANGE,
    INTERVENTION_TYPES,
    MALFUNCTION_TYPES,
    MODES,
    NO_MALFUNCTION,
    TIER_NAMES,
)
from luca_gym.worlds.luca.vocabulary import gene_names

# Table 10 (medium healthy, N=20): budget fraction and coverage of the
# baselines that run experiments (random runs none and is not in the table).
PAPER_STRATEGY = {
    "causal-sweep": {"budget_fraction": 1.00, "gene_coverage": 1.00},
    "heuristic": {"budget_fraction": 0.65, "gene_coverage": 1.00},
}
PAPER_N = 20  # the organism size of the paper's Tables 6-8 and 10
PAPER_MARK = dict(marker="D", markersize=5, color="black", linestyle="none", zorder=6)
METRIC_COLORS = {"prediction": "tab:blue", "diagnosis": "tab:orange", "rescue": "tab:green"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: str) -> None:
    """Save with every outside legend and label inside the image; close."""
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _colors(agents) -> dict:
    return {a: f"C{i % 10}" for i, a in enumerate(agents)}


def _score_axis(ax, ylabel: str) -> None:
    """A 0..1 score axis with a little room below 0, so a zero bar shows as a stroke on the zero line."""
    ax.set_ylim(-0.04, 1.08)
    ax.axhline(0, color="0.3", lw=0.6, zorder=1)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def _bars(ax, x, stats, width: float, color, label=None) -> None:
    """Bars of means with ±1 std error bars. A mean of 0 gets a thick stroke
    at 0 in the bar's colour, so it reads as a zero, not as a missing bar."""
    x = np.asarray(x, float)
    mean = np.array([s[0] for s in stats], float)
    std = np.array([s[1] for s in stats], float)
    ax.bar(x, mean, width, yerr=std, color=color, label=label, capsize=2, error_kw=dict(lw=0.8, ecolor="0.2"), zorder=2)
    zero = np.isclose(mean, 0.0)
    if zero.any():
        ax.hlines(np.zeros(zero.sum()), x[zero] - width / 2, x[zero] + width / 2, colors=color, lw=3, zorder=3, gid="zero-bar")


def _paper_marks(ax, x, values, label: str) -> None:
    """The paper's figures (black diamonds) at ``x``; ``None`` values are skipped."""
    pts = [(xi, v) for xi, v in zip(x, values) if v is not None]
    if pts:
        ax.plot(*zip(*pts), label=label, **PAPER_MARK)


def _legend_right(ax) -> None:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _counts(stats) -> str:
    """'k seeds' or 'k-m seeds' over the cells drawn."""
    counts = sorted({s[2] for s in stats})
    if not counts:
        return "no sessions"
    return f"{counts[0]} seeds" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} seeds"


def figure_composite(records, path: str, n_genes: int = 20) -> None:
    """Grouped bars: composite (mean ± 1 std) by condition and agent at
    ``n_genes``; the paper's composites (Tables 6-7) as diamonds at N=20."""
    plt = _pyplot()
    rs = [r for r in records if r["n_genes"] == n_genes]
    s = ev.summary(rs)
    agents = ev.agents_in(rs)
    colors = _colors(agents)
    conds = [(t, m) for m in MODES for t in TIER_NAMES if any((a, t, m, n_genes) in s for a in agents)]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 * len(conds) + 1.5), 4))
    width = 0.8 / max(1, len(agents))
    drawn, paper_x, paper_y = [], [], []
    for i, a in enumerate(agents):
        cells = [(k, s[(a, t, m, n_genes)]["composite"]) for k, (t, m) in enumerate(conds) if (a, t, m, n_genes) in s]
        x = [k + (i - (len(agents) - 1) / 2) * width for k, _ in cells]
        _bars(ax, x, [st for _, st in cells], width, colors[a], a)
        drawn += [st for _, st in cells]
        if n_genes == PAPER_N:
            paper_x += x
            paper_y += [ev.PAPER_COMPOSITE.get(a, {}).get(conds[k]) for k, _ in cells]
    _paper_marks(ax, paper_x, paper_y, "paper (Tables 6-7)")
    ax.set_xticks(range(len(conds)))
    ax.set_xticklabels([f"{t}\n{m}" for t, m in conds])
    _score_axis(ax, "composite score (mean ± 1 std)")
    ax.set_title(f"Composite by condition (N={n_genes}, {_counts(drawn)})")
    _legend_right(ax)
    _save(plt, fig, path)


def figure_disease(records, path: str, n_genes: int = 20) -> None:
    """(a) Disease sub-scores per tier and agent (mean ± 1 std; the paper's
    Table 8 as diamonds at N=20). (b) Diagnosis and rescue side by side per
    agent and tier, ordered by diagnosis within a tier, with the rescue -
    diagnosis gap (mean ± std of the per-seed gap) written beside: the
    paper's Fig. 3b."""
    plt = _pyplot()
    rs = [r for r in records if r["n_genes"] == n_genes and r["mode"] == "disease"]
    s = ev.summary(rs)
    agents = ev.agents_in(rs)
    tiers = [t for t in TIER_NAMES if any((a, t, "disease", n_genes) in s for a in agents)] or ["easy"]
    rows = [(t, a) for t in tiers for a in sorted((a for a in agents if (a, t, "disease", n_genes) in s),
                                                    key=lambda a: -s[(a, t, "disease", n_genes)]["diagnosis"][0])]
    fig = plt.figure(figsize=(max(7.0, 3.6 * len(tiers) + 1.6), 4.2 + 0.34 * len(rows)))
    grid = fig.add_gridspec(2, len(tiers), height_ratios=[3.4, 0.9 + 0.34 * max(1, len(rows))], hspace=0.45)
    width = 0.26
    for c, t in enumerate(tiers):
        ax = fig.add_subplot(grid[0, c])
        present = [a for a in agents if (a, t, "disease", n_genes) in s]
        paper_x, paper_y = [], []
        for j, metric in enumerate(("prediction", "diagnosis", "rescue")):
            x = np.arange(len(present)) + (j - 1) * width
            _bars(ax, x, [s[(a, t, "disease", n_genes)][metric] for a in present], width, METRIC_COLORS[metric],
                  metric if c == 0 else None)
            if n_genes == PAPER_N:
                paper_x += list(x)
                paper_y += [PAPER_TABLE8.get(t, {}).get(a, {}).get(metric) for a in present]
        _paper_marks(ax, paper_x, paper_y, "paper (Table 8)" if c == 0 else None)
        ax.set_xticks(range(len(present)))
        crowded = len(present) * max(map(len, present), default=0) > 40  # names would run into each other
        ax.set_xticklabels(present, fontsize=8, rotation=25 if crowded else 0, ha="right" if crowded else "center")
        _score_axis(ax, "score (mean ± 1 std)" if c == 0 else "")
        ax.set_title(f"(a) {t} disease, N={n_genes} ({_counts([s[(a, t, 'disease', n_genes)]['rescue'] for a in present])})",
                     fontsize=9)
    fig.legend(*fig.axes[0].get_legend_handles_labels(), fontsize=8, loc="upper left", bbox_to_anchor=(0.99, 0.95), frameon=False)
    _gap_panel(fig.add_subplot(grid[1, :]), rs, rows, n_genes)
    _save(plt, fig, path)


def _gap_panel(ax, records, rows, n_genes: int) -> None:
    """The paper's Fig. 3b: per (tier, agent) row, diagnosis (open circle) and
    rescue (filled square) joined by a line, ±1 std whiskers, the gap written
    at the right; the paper's pair as black diamonds just below."""
    groups = ev.group(records, "agent", "tier")
    y = np.arange(len(rows))[::-1].astype(float)
    for yi, (t, a) in zip(y, rows):
        d = np.array([r["scores"]["diagnosis"] for r in groups[(a, t)]], float)
        r_ = np.array([r["scores"]["rescue"] for r in groups[(a, t)]], float)
        ax.plot([d.mean(), r_.mean()], [yi, yi], color="0.65", lw=3, zorder=1, solid_capstyle="round")
        ax.errorbar(r_.mean(), yi, xerr=r_.std(), fmt="s", color=METRIC_COLORS["rescue"], capsize=2, ms=6, zorder=3)
        # the open circle is drawn over the square, so equal scores show as a ring round it
        ax.errorbar(d.mean(), yi, xerr=d.std(), fmt="o", mfc="none", mec=METRIC_COLORS["diagnosis"], mew=1.8,
                    ecolor=METRIC_COLORS["diagnosis"], capsize=2, ms=10, zorder=4)
        gap = r_ - d
        ax.text(1.12, yi, f"{gap.mean():+.2f} ± {gap.std():.2f}", va="center", ha="left", fontsize=8)
        paper = PAPER_TABLE8.get(t, {}).get(a) if n_genes == PAPER_N else None
        if paper:
            ax.plot([paper["diagnosis"], paper["rescue"]], [yi - 0.28] * 2, color="black", lw=0.8, zorder=2)
            ax.plot([paper["diagnosis"]], [yi - 0.28], marker="D", ms=4, mfc="white", mec="black", ls="none", zorder=4)
            ax.plot([paper["rescue"]], [yi - 0.28], marker="D", ms=4, color="black", ls="none", zorder=4)
    for k in range(1, len(rows)):
        if rows[k][0] != rows[k - 1][0]:
            ax.axhline(y[k] + 0.5, color="0.5", ls=":", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{a} ({t})" for t, a in rows], fontsize=8)
    ax.set_xlim(-0.05, 1.45)
    ax.set_xticks(np.linspace(0, 1, 6))
    ax.set_ylim(-0.8, len(rows) + 0.3)
    ax.axvline(0, color="0.3", lw=0.6)
    ax.text(1.12, len(rows) - 0.3, "rescue - diagnosis", fontsize=8, fontweight="bold", va="center")
    ax.set_xlabel("score (mean ± 1 std over seeds)")
    ax.set_title(f"(b) rescue vs diagnosis per agent, ordered by diagnosis within a tier (N={n_genes})", fontsize=9)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", mfc="white", mec=METRIC_COLORS["diagnosis"], mew=1.6, ls="none", label="diagnosis"),
        Line2D([], [], marker="s", color=METRIC_COLORS["rescue"], ls="none", label="rescue"),
        Line2D([], [], marker="D", ms=4, mfc="white", mec="black", ls="none", label="paper diagnosis"),
        Line2D([], [], marker="D", ms=4, color="black", ls="none", label="paper rescue"),
    ]
    ax.legend(handles=handles if n_genes == PAPER_N else handles[:2], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)


def figure_scaling(records, path: str, tier: str = "medium", mode: str = "healthy") -> None:
    """The paper's Fig. 5 for ``tier`` / ``mode``: (a) prediction accuracy,
    (b) budget used (fraction of B), (c) gene coverage (fraction of targetable
    genes perturbed), each against N on a log2 axis ticked at the N values of
    the records; mean with ±1 std error bars and shaded band. The paper's
    figures (Table 11; Table 10 at N=20) as diamonds on a dashed line, for
    medium healthy only (the condition they were measured on)."""
    plt = _pyplot()
    rs = [r for r in records if (r["tier"], r["mode"]) == (tier, mode)]
    s = ev.summary(rs)
    ns = sorted({r["n_genes"] for r in rs})
    agents = ev.agents_in(rs)
    colors = _colors(agents)
    paper_cond = (tier, mode) == ("medium", "healthy")
    panels = (
        ("prediction", "(a) prediction accuracy", lambda a, n: ev.PAPER_SCALING.get(a, {}).get(n)),
        ("budget_fraction", "(b) budget used (fraction of B)",
         lambda a, n: PAPER_STRATEGY.get(a, {}).get("budget_fraction") if n == PAPER_N else None),
        ("gene_coverage", "(c) gene coverage (fraction of genes perturbed)",
         lambda a, n: PAPER_STRATEGY.get(a, {}).get("gene_coverage") if n == PAPER_N else None),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 4), squeeze=False)
    for ax, (metric, title, paper_of) in zip(axes[0], panels):
        for a in agents:
            pts = [(n, *s[(a, tier, mode, n)][metric][:2]) for n in ns if (a, tier, mode, n) in s]
            if not pts:
                continue
            x, m, sd = map(np.asarray, zip(*pts))
            ax.errorbar(x, m, yerr=sd, marker="o", capsize=3, color=colors[a], label=a, zorder=3)
            ax.fill_between(x, m - sd, m + sd, color=colors[a], alpha=0.12, lw=0)
            paper = [(n, paper_of(a, n)) for n in x if paper_cond and paper_of(a, n) is not None]
            if paper:
                ax.plot(*zip(*paper), ls="--", marker="D", ms=5, color=colors[a], mec="black", alpha=0.85,
                        label=f"{a} (paper)", zorder=4)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.minorticks_off()
        if ns:
            ax.set_xlim(ns[0] / 1.3, ns[-1] * 1.3)
        ax.set_xlabel("genes N")
        _score_axis(ax, "")
        ax.set_title(title, fontsize=10)
    axes[0][0].set_ylabel("mean ± 1 std over seeds")
    handles = {}
    for ax in axes[0]:
        handles.update(dict(zip(*ax.get_legend_handles_labels()[::-1])))
    order = [label for a in agents for label in (a, f"{a} (paper)") if label in handles]  # each agent beside its paper line
    axes[0][-1].legend([handles[k] for k in order], order, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"Scaling ({tier} {mode}); paper: diamonds, dashed" if paper_cond else f"Scaling ({tier} {mode})")
    fig.tight_layout()
    _save(plt, fig, path)


def results_folder(results: str) -> str:
    """The folder of a results folder or sessions.jsonl path."""
    return results if os.path.isdir(results) else os.path.dirname(results) or "."


def _scaling_condition(records):
    """The (tier, mode) the scaling figure shows: medium healthy (the paper's)
    when it has several N, else the first condition that has; None if none."""
    conds = [("medium", "healthy")] + [(t, m) for m in MODES for t in TIER_NAMES]
    for t, m in conds:
        if len({r["n_genes"] for r in records if (r["tier"], r["mode"]) == (t, m)}) > 1:
            return t, m
    return None


def write_report(results: str, out_dir: str | None = None) -> str:
    """Write ``report.md`` and figures (``composite.png``, ``disease.png`` with
    disease sessions, ``scaling.png`` when a condition has several N) next to
    the results (or in ``out_dir``). Records holding both arms of an ablation
    (backwards, vocabulary, stance) add an "Ablations" section of paired tests
    (:mod:`luca_gym.ablation`); the other tables then show the default arm.
    Returns the markdown text."""
    read = ev.read_results(results)
    if not read.records:
        raise ev.ResultsError(f"{results}: no sessions to report")
    for note in read.notes():  # e.g. duplicate lines dropped: said, and kept in the report
        warnings.warn(note, ev.ResultsWarning, stacklevel=2)
    out_dir = out_dir or results_folder(results)
    os.makedirs(out_dir, exist_ok=True)
    every = [r for r in read.records if r["world"] == "luca"]
    others = sorted({r["world"] for r in read.records} - {"luca"})
    parts = [] if every else ["# Results", f"{len(read.records)} sessions from `{results}`; mean ± population std."]
    if every:
        parts += _luca_sections(read, every, results, out_dir)
    for name in others:  # every other world: its headline score by agent and settings
        parts += [f"## {name}", ev.world_table(read.records, name)]
    text = "\n\n".join(parts) + "\n"
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def _luca_sections(read, every: list, results: str, out_dir: str) -> list[str]:
    """The report's LUCA sections and figures (from LUCA's lines)."""
    records, arms_note = ablation.main_records(every)  # the main tables never average over ablation arms
    ns = sorted({r["n_genes"] for r in records})
    n0 = 20 if 20 in ns else ns[0]
    parts = [
        "# LUCA results",
        (f"{len(every)} sessions from `{results}`; mean ± population std; paper figures in brackets. "
         f"Figures: bars and lines are our means with ±1 std error bars; black diamonds are the paper's baseline figures."),
        *(f"Note: {note}" for note in read.notes()),
        *([f"Note: {arms_note}."] if arms_note else []),
        f"## Composite score (N={n0})",
        ev.composite_table(records, n0),
        "![composite](composite.png)",
    ]
    figure_composite(records, os.path.join(out_dir, "composite.png"), n0)
    if any(r["mode"] == "disease" for r in records):
        parts += [f"## Disease sub-scores (N={n0})", ev.disease_table(records, n0), "![disease](disease.png)"]
        figure_disease(records, os.path.join(out_dir, "disease.png"), n0)
    if any((r["tier"], r["mode"]) == ("medium", "healthy") for r in records):
        parts += ["## Strategy (medium healthy)", ev.strategy_table(records, n_genes=n0)]
    scaling = _scaling_condition(records)
    if scaling:
        t, m = scaling
        parts += [f"## Scaling ({t} {m}, prediction accuracy)", ev.scaling_table(records, t, m), "![scaling](scaling.png)"]
        figure_scaling(records, os.path.join(out_dir, "scaling.png"), t, m)
    ablations = ablation.section(every)
    if ablations:
        parts.append(ablations)
    return parts


# -- the true network ----------------------------------------------------------------------------
EDGE_COLORS = {1: "tab:red", -1: "tab:blue"}  # activates, inhibits
READOUT_COLOR = "tab:purple"
MALFUNCTION_COLOR = "darkorange"
# Network layout, in data units (module centres sit MODULE_SPACING apart).
MODULE_SPACING = 1.35
MODULE_RADIUS = 0.34  # the circle a module's genes sit on
GENE_RADIUS = 0.085
SIGNAL_HALF = 0.08
PHENOTYPE_RADIUS = 0.16
SIDE_GAP = 1.3  # from the grid's edge to the signal and phenotype columns
MAX_ARROWS = 1500  # more gene -> gene edges than this are drawn as plain lines


def _network_layout(module):
    """Genes grouped by module: module centres on a grid, each module's genes
    on a small circle around its centre. Returns (gene xy (N, 2), module ids,
    their centres (M, 2), grid columns, grid rows)."""
    ids = np.unique(module)
    cols = math.ceil(math.sqrt(len(ids)))
    rows = math.ceil(len(ids) / cols)
    centres = MODULE_SPACING * np.array([(k % cols, -(k // cols)) for k in range(len(ids))], float)
    xy = np.zeros((module.size, 2))
    for k, mod in enumerate(ids):
        members = np.flatnonzero(module == mod)
        angle = np.pi / 2 - 2 * np.pi * np.arange(members.size) / members.size
        ring = MODULE_RADIUS if members.size > 1 else 0.0
        xy[members] = centres[k] + ring * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return xy, ids, centres, cols, rows


def _column(count: int, x: float, rows: int) -> np.ndarray:
    """``count`` points in a column at ``x`` spread over the grid's height."""
    top, bottom = MODULE_RADIUS + 0.2, -MODULE_SPACING * (rows - 1) - MODULE_RADIUS - 0.2
    y = np.linspace(top, bottom, count + 2)[1:-1] if count else np.zeros(0)
    return np.stack([np.full(count, x), y], axis=1)


def _trim(p, q, r_p: float, r_q: float):
    """The segment p -> q cut back by the radii of the nodes at its ends (data units)."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    d = q - p
    length = float(np.hypot(*d)) or 1.0
    return p + d * (r_p / length), q - d * (r_q / length)


def draw_network(organism, path: str, *, malfunction: bool = False) -> None:
    """The organism's true network (ground truth, for researchers, never for
    agents), written to the PNG ``path``.

    Genes sit by module (a shaded disc per module, named up to 16 modules),
    signals in a column on the left (gold squares), phenotypes on the right
    (circles, names beside them). Arrows: gene -> gene regulation (red
    activates, blue inhibits; ``weights[i, j]`` is j acting on i), signal ->
    gene effects (dashed, same colours; ``signal_effects``), readout links
    gene -> phenotype (purple; solid raises, dashed lowers). Readout genes are
    green, latent genes grey with a dashed rim; gene numbers are written in
    the nodes up to N=80. ``malfunction=True`` (only once a session has
    ended) rings the malfunction's target, gene or signal, and names its type;
    in healthy mode the title says there is none."""
    plt = _pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Circle, FancyArrowPatch, Rectangle

    a, m = organism.arrays, organism.meta
    n = m.n_genes
    weights = np.asarray(a.weights)
    effects = np.asarray(a.signal_effects)
    readout = np.asarray(a.readout)
    xy, ids, centres, cols, rows = _network_layout(np.asarray(a.module))
    right = MODULE_SPACING * (cols - 1)
    sig_xy = _column(effects.shape[0], -SIDE_GAP, rows)
    ph_xy = _column(readout.shape[0], right + SIDE_GAP, rows)

    x_lo, x_hi = -SIDE_GAP - 1.4, right + SIDE_GAP + 1.5  # room for the signal and phenotype names
    y_lo, y_hi = -MODULE_SPACING * (rows - 1) - MODULE_RADIUS - 0.45, MODULE_RADIUS + 0.45
    scale = min(1.6, 13.0 / (x_hi - x_lo), 11.0 / (y_hi - y_lo))  # inches per data unit
    thin = min(1.0, scale / 1.6)  # line widths and fonts shrink with the drawing
    fig, ax = plt.subplots(figsize=((x_hi - x_lo) * scale, (y_hi - y_lo) * scale))
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_aspect("equal")
    ax.axis("off")

    for k, (mod, centre) in enumerate(zip(ids, centres)):
        ax.add_patch(Circle(centre, MODULE_RADIUS + 0.15, facecolor=f"C{k % 10}", alpha=0.10, edgecolor="0.55", lw=0.6, zorder=0))
        if len(ids) <= 16:
            name = m.module_names[mod] if 0 <= mod < len(m.module_names) else f"module {mod}"
            below = k // cols == rows - 1 and rows > 1  # the last row's names go below, clear of the edges
            ax.text(centre[0], centre[1] + (-1 if below else 1) * (MODULE_RADIUS + 0.17), name, ha="center",
                    va="top" if below else "bottom", fontsize=7, color="0.3", zorder=5,
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.6))

    def arrow(p, q, r_p, r_q, color, *, ls="-", lw=1.0, alpha=0.8, rad=0.0):
        p, q = _trim(p, q, r_p, r_q)
        ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=9 * thin, color=color, lw=lw * thin, ls=ls,
                                     alpha=alpha, shrinkA=0, shrinkB=0, zorder=2, connectionstyle=f"arc3,rad={rad}"))

    wmax = np.abs(weights).max() or 1.0
    edges = [(i, j) for i, j in zip(*np.nonzero(weights)) if i != j]  # the generator makes no self-loops
    if len(edges) <= MAX_ARROWS:
        for i, j in edges:
            arrow(xy[j], xy[i], GENE_RADIUS, GENE_RADIUS, EDGE_COLORS[1 if weights[i, j] > 0 else -1],
                  lw=0.5 + 0.9 * abs(weights[i, j]) / wmax, rad=0.15)
    else:  # thousands of arrow patches take minutes to draw, and their heads would be specks
        from matplotlib.collections import LineCollection

        ax.add_collection(LineCollection([(xy[j], xy[i]) for i, j in edges], lw=0.3, alpha=0.35, zorder=1,
                                         colors=[EDGE_COLORS[1 if weights[i, j] > 0 else -1] for i, j in edges]))
    for k, g in zip(*np.nonzero(effects)):
        arrow(sig_xy[k], xy[g], SIGNAL_HALF, GENE_RADIUS, EDGE_COLORS[1 if effects[k, g] > 0 else -1], ls=(0, (4, 2)))
    rmax = np.abs(readout).max() or 1.0
    for p, g in zip(*np.nonzero(readout)):
        arrow(xy[g], ph_xy[p], GENE_RADIUS, PHENOTYPE_RADIUS, READOUT_COLOR, ls="-" if readout[p, g] > 0 else (0, (3, 2)),
              lw=0.5 + 0.9 * abs(readout[p, g]) / rmax, alpha=0.6)

    latent = np.asarray(a.latent_mask)
    face = np.where(latent, "0.72", np.where(np.asarray(a.readout_mask), "#b7e4b0", "white"))
    for g in range(n):
        ax.add_patch(Circle(xy[g], GENE_RADIUS, facecolor=face[g], edgecolor="black", lw=0.8 * thin,
                            ls="--" if latent[g] else "-", zorder=4))
        if n <= 80:
            ax.text(*xy[g], str(g + 1), fontsize=6, ha="center", va="center", zorder=5)
    # Signal names fit the column's spacing: with the mode below while there is room, on one line, or not at all.
    spacing_pt = 72 * scale * (abs(sig_xy[0, 1] - sig_xy[1, 1]) if len(sig_xy) > 1 else 1.0)
    for k, (x, y) in enumerate(sig_xy):
        ax.add_patch(Rectangle((x - SIGNAL_HALF, y - SIGNAL_HALF), 2 * SIGNAL_HALF, 2 * SIGNAL_HALF, facecolor="gold",
                               edgecolor="black", lw=0.8, zorder=4))
        if spacing_pt >= 5:
            text = f"{m.signal_labels[k]}\n({m.signal_modes[k]})" if spacing_pt >= 20 else f"{m.signal_labels[k]} ({m.signal_modes[k]})"
            ax.text(x - SIGNAL_HALF - 0.06, y, text, fontsize=min(7.0, 0.8 * spacing_pt), ha="right", va="center")
    for p, (x, y) in enumerate(ph_xy):
        ax.add_patch(Circle((x, y), PHENOTYPE_RADIUS, facecolor="plum", edgecolor="black", lw=0.8, zorder=4))
        ax.text(x + PHENOTYPE_RADIUS + 0.06, y, m.phenotype_names[p], fontsize=8, ha="left", va="center")

    title = f"True network: {m.tier} seed {m.seed} N={n} ({m.mode}{', backwards' if m.backwards else ''})"
    if len(edges) > MAX_ARROWS:
        title += f"; {len(edges)} gene edges drawn as lines, without arrowheads"
    if malfunction:
        target, kind = int(a.malfunction_target), int(a.malfunction_type)
        if kind == NO_MALFUNCTION or target < 0:
            title += "; healthy: no malfunction"
        else:
            where = xy[target] if target < n else sig_xy[target - n]
            ring = (GENE_RADIUS if target < n else SIGNAL_HALF * 1.42) + 0.05
            ax.add_patch(Circle(where, ring, facecolor="none", edgecolor=MALFUNCTION_COLOR, lw=3, zorder=6))
            name = calls.target_name(m, target)
            ax.annotate(f"malfunction: {name} {MALFUNCTION_TYPES[kind]}", (where[0], where[1] + ring), xytext=(0, 4),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8, fontweight="bold",
                        color=MALFUNCTION_COLOR, zorder=7, bbox=dict(boxstyle="round,pad=0.2", fc="white", ec=MALFUNCTION_COLOR))
            title += f"; malfunction {name} {MALFUNCTION_TYPES[kind]}"
    numbers = f"; nodes numbered by gene (1 = {m.gene_names[0]})" if n <= 80 else ""
    ax.set_title(title + f"\nground truth, for researchers (never shown to agents){numbers}", fontsize=10)

    legend = [
        Line2D([], [], color=EDGE_COLORS[1], marker=">", label="activates (gene → gene)"),
        Line2D([], [], color=EDGE_COLORS[-1], marker=">", label="inhibits (gene → gene)"),
        Line2D([], [], color="0.3", ls=(0, (4, 2)), marker=">", label="signal effect (dashed; same colours)"),
        Line2D([], [], color=READOUT_COLOR, marker=">", label="readout: raises (solid), lowers (dashed)"),
        Line2D([], [], marker="o", ls="none", mfc="#b7e4b0", mec="black", ms=9, label="readout gene"),
        Line2D([], [], marker="o", ls="none", mfc="white", mec="black", ms=9, label="other gene"),
        Line2D([], [], marker="o", ls="none", mfc="0.72", mec="black", ms=9, label="latent gene"),
        Line2D([], [], marker="s", ls="none", mfc="gold", mec="black", ms=8, label="signal"),
        Line2D([], [], marker="o", ls="none", mfc="plum", mec="black", ms=12, label="phenotype"),
    ]
    if malfunction:
        legend.append(Line2D([], [], marker="o", ls="none", mfc="none", mec=MALFUNCTION_COLOR, mew=3, ms=13, label="malfunction"))
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=5, fontsize=7.5, frameon=False)
    _save(plt, fig, path)


# -- one recorded session ------------------------------------------------------------------------
PHENOTYPE_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e")
EVENT_ROWS = ("other", "network", "diagnosis", "prediction", "task", "rescue", "experiment")
EVENT_OF_CALL = {
    "run_experiment": "experiment", "test_rescue": "rescue", "get_next_prediction_task": "task",
    "submit_prediction": "prediction", "submit_malfunction_hypothesis": "diagnosis", "submit_network": "network",
}
MAX_TICK_LABELS = 70


def _safe_name(text: str) -> str:
    """A filesystem-safe form of an agent name ('openai:gpt-4o' -> 'openai-gpt-4o')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.") or "agent"


def session_file_name(record: dict) -> str:
    """``session_<agent>_<tier>_<mode>_<seed>.png`` (agent made filesystem-safe);
    ``_N<n>`` is added for N other than 20 and ``_backwards`` for a backwards
    organism, so two sessions never share a name."""
    name = f"session_{_safe_name(record['agent'])}_{record['tier']}_{record['mode']}_{record['seed']}"
    if record["n_genes"] != 20:
        name += f"_N{record['n_genes']}"
    if record.get("backwards"):
        name += "_backwards"
    for arm in _arms(record):
        name += f"_{arm}"
    return name + ".png"


def _arms(record: dict) -> list:
    """A record's non-default vocabulary and stance (ablation arms), e.g. ['real', 'permit']."""
    return [record[f] for f, default in ev.KEY_DEFAULTS.items() if record.get(f, default) != default]


def _describe(record: dict) -> str:
    back = " backwards" if record.get("backwards") else ""
    arms = "".join(f" {a}" for a in _arms(record))
    return f"{record['agent']} {record['tier']} {record['mode']} N={record['n_genes']}{back}{arms} seed {record['seed']}"


def _ranges(values) -> str:
    """Sorted integers as '0-19, 25' (at most 12 pieces shown)."""
    values = sorted(values)
    pieces, start = [], None
    for i, v in enumerate(values):
        start = v if start is None else start
        if i + 1 == len(values) or values[i + 1] != v + 1:
            pieces.append(str(v) if v == start else f"{start}-{v}")
            start = None
    return ", ".join(pieces[:12]) + (f" and {len(pieces) - 12} more" if len(pieces) > 12 else "")


def pick_session(records, seed, agent, *, tier=None, mode=None, n_genes=None) -> tuple[dict, str | None]:
    """The session of ``agent`` on organism ``seed``, narrowed by ``tier``,
    ``mode`` and ``n_genes`` when given. Returns (record, note): the note is
    None when one session matches, else it names the session picked (the
    first on file) and the others. ValueError names what exists when none
    matches (the agents, the agent's seeds, or the sessions of that seed)."""
    agents = ev.agents_in(records)
    if agent not in agents:
        raise ValueError(f"agent: {agent!r} has no session in these results; agents there: {', '.join(map(str, agents)) or 'none'}")
    mine = [r for r in records if r["agent"] == agent]
    if seed not in {r["seed"] for r in mine}:
        raise ValueError(f"seed: {seed!r} has no session of agent {agent!r}; its seeds there: {_ranges({r['seed'] for r in mine})}")
    mine = [r for r in mine if r["seed"] == seed]
    wanted = {"tier": tier, "mode": mode, "n_genes": n_genes}
    matches = [r for r in mine if all(v is None or r[k] == v for k, v in wanted.items())]
    if not matches:
        given = ", ".join(f"{k}={v}" for k, v in wanted.items() if v is not None)
        raise ValueError(f"no session of agent {agent!r} seed {seed} with {given}; its sessions there: "
                         f"{'; '.join(_describe(r) for r in mine)}")
    if len(matches) == 1:
        return matches[0], None
    others = "; ".join(_describe(r) for r in matches[1:6]) + (f" and {len(matches) - 6} more" if len(matches) > 6 else "")
    return matches[0], (f"{len(matches)} sessions match; drew the first, {_describe(matches[0])}; the others: {others}. "
                        f"Choose one with tier, mode and n_genes")


def show_session(results: str, seed, agent, out_path: str | None = None, *, tier=None, mode=None, n_genes=None) -> str:
    """Draw one recorded session of ``results`` (a folder or sessions.jsonl) as
    a timeline figure (see :func:`draw_session`) to ``out_path`` (default:
    ``<results folder>/`` + :func:`session_file_name`). Returns a one-line
    message: the path written, followed by a note in brackets naming the
    session drawn when several matched (see :func:`pick_session`).
    ValueError for an unknown agent or seed, or no session with the filters."""
    record, note = pick_session(ev.load_sessions(results), seed, agent, tier=tier, mode=mode, n_genes=n_genes)
    out_path = out_path or os.path.join(results_folder(results), session_file_name(record))
    draw_session(record, out_path)
    return out_path if note is None else f"{out_path} ({note})"


def _rebuilt_organism(record: dict):
    """The session's organism generated again from its seed, or (None, why
    not): only for an unsealed record of this build, and only if its tasks are
    those the record revealed (a check that it is the same organism)."""
    if record.get("sealed") is not None:
        return None, "sealed organism: truth not regenerated"
    if record.get("version") != __version__:
        return None, f"written by version {record.get('version')}, this is {__version__}: truth not regenerated"
    organism = world.make_organism(record["seed"], record["tier"], record["n_genes"], record["mode"], bool(record.get("backwards")),
                                   vocabulary=record.get("vocabulary", "invented"))
    a, meta = organism.arrays, organism.meta
    for c in record.get("calls", []):
        res = c.get("result", {})
        if c.get("call") == "get_next_prediction_task" and "task_index" in res:
            t = res["task_index"]
            truth = {meta.gene_names[g]: INTERVENTION_TYPES[int(k)] for g, k in zip(np.asarray(a.task_genes)[t], np.asarray(a.task_codes)[t])}
            if truth != {g: v.get("type") for g, v in res.get("interventions", {}).items()}:
                return None, "the regenerated organism's tasks differ from the record's: truth not shown"
    return organism, None


def _intervention_text(interventions: dict) -> str:
    return " + ".join(f"{t} {v.get('type', '?') if isinstance(v, dict) else v}" for t, v in (interventions or {}).items()) or "(none)"


def _call_label(name: str, args: dict, res: dict) -> str:
    if name in ("run_experiment", "test_rescue"):
        text = _intervention_text(args.get("interventions"))
        return f"rescue: {text}" if name == "test_rescue" else text
    if name == "get_next_prediction_task":
        return f"task {res['task_index'] + 1}" if "task_index" in res else "task"
    if name == "submit_prediction":
        return "predict"
    if name == "submit_malfunction_hypothesis":
        return f"diagnose {args.get('target_name', '?')} {args.get('malfunction_type', '?')}"
    if name == "submit_network":
        return f"network ({len(args.get('edges', []))} edges)"
    if name == "get_organism_info":
        return "info"
    return name.replace("submit_", "")


def _parse_session(record: dict) -> dict:
    """What the timeline draws, from the record's calls: each call's label and
    event row, the measurements, the tasks and predictions, the diagnosis and
    the rescues."""
    out = dict(labels=[], events=[], refused=[], budget=[], measures=[], tasks={}, predictions={}, diagnosis=None,
               rescues=[], baseline=None, phenotypes=None)
    task = None
    for i, c in enumerate(record.get("calls", []), 1):
        name, args, res = c.get("call", "?"), c.get("arguments") or {}, c.get("result") or {}
        refused = "error" in res
        out["labels"].append(_call_label(name, args, res) + (" (refused)" if refused else ""))
        out["events"].append(EVENT_OF_CALL.get(name, "other"))
        out["refused"].append(refused)
        out["budget"].append(c.get("budget_remaining", res.get("budget_remaining")))
        if refused:
            continue
        if "phenotypes" in res:
            out["measures"].append((i, name == "test_rescue", res["phenotypes"]))
            out["phenotypes"] = out["phenotypes"] or list(res["phenotypes"])
        if name == "get_organism_info" and "baseline_phenotypes" in res:
            out["baseline"] = res["baseline_phenotypes"]
        if name == "get_next_prediction_task" and "task_index" in res:
            task = res["task_index"]
            out["tasks"][task] = res.get("interventions", {})
        if name == "submit_prediction" and task is not None:
            out["predictions"][task] = (i, args.get("predictions", {}))
            out["phenotypes"] = out["phenotypes"] or list(args.get("predictions", {}))
        if name == "submit_malfunction_hypothesis":
            out["diagnosis"] = (i, args.get("target_name"), args.get("malfunction_type"))
        if name == "test_rescue":
            out["rescues"].append((i, args.get("interventions", {}), res.get("restored_fraction"),
                                   res.get("phenotype_in_healthy_range", {})))
    return out


def _true_malfunction(record: dict, organism) -> str:
    scores = record["scores"]
    kind = scores.get("malfunction_type", NO_MALFUNCTION)
    kind = MALFUNCTION_TYPES[kind] if isinstance(kind, int) and 0 <= kind < len(MALFUNCTION_TYPES) else str(kind)
    if kind == MALFUNCTION_TYPES[NO_MALFUNCTION]:
        return "none (healthy)"
    target = scores.get("malfunction_target")
    if isinstance(target, int):
        n = record["n_genes"]
        if organism is not None:
            target = calls.target_name(organism.meta, target)
        else:
            invented = record.get("vocabulary", "invented") == "invented"
            gene = (gene_names(n)[target] if invented else f"gene #{target + 1}") if 0 <= target < n else None
            target = gene or f"signal #{target - n + 1}"
    return f"{target} {kind}"


def draw_session(record: dict, path: str) -> None:
    """One recorded session as a figure, written to the PNG ``path``:

    (a) the phenotypes measured by each experiment (dots) and rescue test
    (stars) in call order, the healthy range shaded, the baseline dashed
    (as get_organism_info returned it, else the noise-free one), the
    diagnosis commit and the predictions as vertical lines;
    (b) every call in order on one axis, labelled with its interventions
    (experiments, rescues) or what it submitted, refused calls crossed, and
    the budget left;
    (c) each prediction task's submitted phenotypes against the truth ± the
    0.10 threshold, and its task score. The record holds only the per-task
    scores, so the truth comes from the organism generated again from its
    seed, shown only for an unsealed record of this build whose revealed
    tasks match the regenerated ones; otherwise the scores alone;
    (d) the diagnosis committed against the true malfunction (from the final
    scores), the rescues and their restored fraction, and the scores.
    """
    plt = _pyplot()
    from matplotlib.lines import Line2D

    s = _parse_session(record)
    scores = record["scores"]
    organism, why = _rebuilt_organism(record)
    phen = s["phenotypes"] or (list(organism.meta.phenotype_names) if organism is not None else [])
    colour = {p: PHENOTYPE_COLORS[k % len(PHENOTYPE_COLORS)] for k, p in enumerate(phen)}
    n_calls = len(s["labels"])
    x_all = np.arange(1, n_calls + 1)

    fig = plt.figure(figsize=(max(11.0, 0.17 * n_calls + 5), 11.5), layout="constrained")
    grid = fig.add_gridspec(3, 2, height_ratios=[3.0, 1.9, 2.8], width_ratios=[1.35, 1.0])
    ax_ph = fig.add_subplot(grid[0, :])
    ax_ev = fig.add_subplot(grid[1, :], sharex=ax_ph)

    # (a) measured phenotypes
    ax_ph.axhspan(*HEALTHY_RANGE, color="tab:green", alpha=0.08, label="healthy range")
    baseline, base_src = s["baseline"], "baseline (get_organism_info)"
    if baseline is None and organism is not None:
        baseline, base_src = dict(zip(phen, np.asarray(organism.arrays.baseline_phenotypes).tolist())), "baseline (noise-free)"
    for p in phen:
        exp = [(i, m[p]) for i, rescue, m in s["measures"] if p in m and not rescue]
        if exp:
            ax_ph.plot(*zip(*exp), marker="o", ms=4, lw=0.8, color=colour[p])
        res = [(i, m[p]) for i, rescue, m in s["measures"] if p in m and rescue]
        if res:
            ax_ph.plot(*zip(*res), ls="none", marker="*", ms=13, color=colour[p], mec="black", zorder=5)
        if baseline and p in baseline:
            ax_ph.axhline(baseline[p], color=colour[p], ls="--", lw=0.9, alpha=0.8)
    if s["diagnosis"]:
        ax_ph.axvline(s["diagnosis"][0], color="black", ls="-.", lw=1.2)
    for i, _ in s["predictions"].values():
        ax_ph.axvline(i, color="0.5", ls=":", lw=1)
    handles, _ = ax_ph.get_legend_handles_labels()
    handles += [Line2D([], [], color=colour[p], marker="o", ms=4, lw=0.8, label=p) for p in phen]
    handles += [Line2D([], [], color="0.4", ls="--", label=base_src),
                Line2D([], [], ls="none", marker="*", ms=11, color="0.6", mec="black", label="rescue test"),
                Line2D([], [], color="black", ls="-.", label="diagnosis committed"),
                Line2D([], [], color="0.5", ls=":", label="prediction submitted")]
    ax_ph.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    ax_ph.set_ylim(-0.02, 1.02)
    ax_ph.set_ylabel("measured phenotype")
    ax_ph.set_title("(a) phenotypes measured in call order", fontsize=10, loc="left")
    ax_ph.tick_params(labelbottom=False)
    if not s["measures"]:
        ax_ph.text(0.5, 0.85, "no measurements recorded", transform=ax_ph.transAxes, ha="center", color="0.4")

    # (b) every call
    row = {e: k for k, e in enumerate(EVENT_ROWS)}
    event_colour = {"experiment": "0.25", "rescue": "gold", "task": "tab:cyan", "prediction": "tab:blue",
                    "diagnosis": "black", "network": "tab:purple", "other": "0.6"}
    for e in EVENT_ROWS:
        xs = [x for x, ev_, bad in zip(x_all, s["events"], s["refused"]) if ev_ == e and not bad]
        if xs:
            ax_ev.plot(xs, [row[e]] * len(xs), ls="none", marker="*" if e == "rescue" else "o", ms=10 if e == "rescue" else 5,
                       color=event_colour[e], mec="black" if e == "rescue" else None)
    bad = [(x, row[e]) for x, e, b in zip(x_all, s["events"], s["refused"]) if b]
    if bad:
        ax_ev.plot(*zip(*bad), ls="none", marker="x", ms=8, color="tab:red", mew=2)
    ax_ev.set_yticks(range(len(EVENT_ROWS)))
    ax_ev.set_yticklabels(EVENT_ROWS, fontsize=8)
    ax_ev.set_ylim(-0.6, len(EVENT_ROWS) - 0.4)
    step = max(1, math.ceil(n_calls / MAX_TICK_LABELS))
    ax_ev.set_xticks(x_all[::step])
    ax_ev.set_xticklabels(s["labels"][::step], rotation=90, fontsize=7)
    ax_ev.set_xlim(0.3, n_calls + 0.7)
    ax_ev.grid(axis="x", alpha=0.25)
    ax_ev.set_xlabel("call (in order)")
    budget = [(x, b) for x, b in zip(x_all, s["budget"]) if b is not None]
    if budget:
        ax_b = ax_ev.twinx()
        ax_b.step(*zip(*budget), where="post", color="tab:red", alpha=0.45, lw=1.2)
        ax_b.set_ylim(0, max(record.get("budget") or 0, *(b for _, b in budget)) * 1.05 + 1e-9)
        ax_b.set_ylabel("budget left", color="tab:red", fontsize=8)
        ax_b.tick_params(axis="y", labelsize=7, colors="tab:red")
    ax_ev.set_title("(b) calls: interventions of each experiment and rescue; refused calls crossed", fontsize=10, loc="left")

    _prediction_panel(fig.add_subplot(grid[2, 0]), s, scores, organism, why, phen, colour)
    _summary_panel(fig.add_subplot(grid[2, 1]), record, s, organism)
    fig.suptitle(f"Session: {_describe(record)}; composite {scores['composite']:.2f}", fontsize=12)
    _save(plt, fig, path)


def _prediction_panel(ax, s, scores, organism, why, phen, colour) -> None:
    """(c) each task's predictions (open circles) against the truth ± threshold (diamonds, bars)."""
    task_scores = scores.get("task_scores") or []
    tasks = sorted(set(s["tasks"]) | set(s["predictions"]) | set(range(len(task_scores))))
    truth = np.asarray(organism.arrays.task_truth) if organism is not None else None
    names = list(organism.meta.phenotype_names) if organism is not None else phen
    gap = len(phen) + 1
    for t in tasks:
        centre = t * gap + (len(phen) - 1) / 2
        score = f"score {task_scores[t]:.2f}" if t < len(task_scores) else "not scored"
        ax.text(centre, 1.04, f"task {t + 1}: {_intervention_text(s['tasks'].get(t))}\n{score}", ha="center", va="bottom",
                fontsize=7.5, transform=ax.get_xaxis_transform())
        pred = s["predictions"].get(t, (None, {}))[1]
        for j, p in enumerate(phen):
            x = t * gap + j
            if truth is not None and t < truth.shape[0] and p in names:
                true = truth[t, names.index(p)]
                ax.errorbar(x, true, yerr=ACCURACY_THRESHOLD, fmt="D", color=colour[p], ms=6, capsize=4, alpha=0.6)
            if p in pred:
                ax.plot(x, pred[p], marker="o", ms=9, mfc="none", mec=colour[p], mew=2, ls="none")
        if not pred:
            ax.text(centre, 0.5, "no prediction", ha="center", color="0.4", fontsize=8)
    ax.set_xticks([t * gap + j for t in tasks for j in range(len(phen))])
    ax.set_xticklabels([p for _ in tasks for p in phen], rotation=25, ha="right", fontsize=7)
    ax.axhspan(*HEALTHY_RANGE, color="tab:green", alpha=0.06)
    ax.set_ylim(-0.12, 1.12)  # room for the threshold bars of a truth near 0 or 1
    ax.set_ylabel("phenotype")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", mfc="none", mec="0.3", mew=2, ls="none", label="predicted")]
    if truth is not None:
        handles.append(Line2D([], [], marker="D", color="0.5", ls="none", label=f"truth ± {ACCURACY_THRESHOLD:.2f}"))
    ax.legend(handles=handles, fontsize=7, loc="best", framealpha=0.8)
    title = "(c) predictions vs truth" if truth is not None else f"(c) predictions ({why or 'truth unknown'})"
    ax.set_title(title, fontsize=10, loc="left", pad=30)


def _summary_panel(ax, record, s, organism) -> None:
    """(d) diagnosis vs the true malfunction, rescues and scores, as text."""
    scores = record["scores"]
    ax.axis("off")
    lines = []
    if record["mode"] == "disease":
        if s["diagnosis"]:
            i, target, kind = s["diagnosis"]
            lines.append(f"diagnosis committed : {target} {kind}  (call {i})")
        else:
            lines.append("diagnosis committed : none")
        lines.append(f"true malfunction    : {_true_malfunction(record, organism)}  (n_alt {scores.get('n_alt', 0)})")
        lines.append(f"diagnosis score     : {scores['diagnosis']:.2f}")
        for i, interventions, restored, in_range in s["rescues"]:
            ok = sum(bool(v) for v in in_range.values())
            rest = "?" if restored is None else f"{restored:.2f}"
            lines.append(f"rescue (call {i:>3})   : {_intervention_text(interventions)}")
            lines.append(f"                      restored {rest}, {ok}/{len(in_range)} phenotypes in range")
        if not s["rescues"]:
            lines.append("rescue              : none tested")
        lines.append(f"rescue score        : {scores['rescue']:.2f}")
    else:
        lines.append("healthy mode: no malfunction; diagnosis and rescue not scored")
    lines.append("")
    lines.append(f"composite {scores['composite']:.2f}   prediction {scores['prediction']:.2f}")
    if "network_f1" in scores:
        lines.append(f"network F1 {scores['network_f1']:.2f}")
    budget = record.get("budget")
    used = f"{scores['budget_fraction']:.2f} of budget {budget}" if budget else f"{scores['budget_fraction']:.2f} of the budget"
    lines.append(f"budget used {used}; gene coverage {scores['gene_coverage']:.2f}")
    lines.append(f"{len(s['labels'])} calls; ended by {record.get('end_reason') or 'end'}"
                 f"{' (truncated)' if record.get('truncated') else ''}")
    ax.text(0.0, 1.0, "\n".join(lines), family="monospace", fontsize=8.5, va="top", ha="left", transform=ax.transAxes)
    ax.set_title("(d) diagnosis vs truth, rescue, scores", fontsize=10, loc="left")
