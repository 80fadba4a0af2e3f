"""LUCA's sections of ``luca-gym report`` (``World.report``): the paper-format
tables (:mod:`luca_gym.worlds.luca.tables`) and figures, and the ablations
(:mod:`luca_gym.worlds.luca.ablation`).

Every score figure shows our mean with ±1 population std (error bars, as the
paper's tables) and marks the paper's baseline figures as black diamonds where
the paper has them: composites (Tables 6-7, N=20), disease sub-scores
(Table 8, N=20), prediction accuracy against N (Table 11, medium healthy) and
budget use and gene coverage (Table 10, medium healthy, N=20).
"""

from __future__ import annotations

import os

import numpy as np

from luca_gym.results.figures import (agent_colors, bars, clip_to_score, legend_right, paper_marks, pyplot, save, score_axis,
                              seed_counts, short_name)
from luca_gym.results.summaries import agents_in, group
from luca_gym.worlds.luca import ablation, process, tables
from luca_gym.worlds.luca.core import make_params
from luca_gym.worlds.luca.paper import PAPER_TABLE8
from luca_gym.worlds.luca.spec import MODES, TIER_NAMES

# Table 10 (medium healthy, N=20): budget fraction and coverage of the
# baselines that run experiments (random runs none and is not in the table).
PAPER_STRATEGY = {
    "causal-sweep": {"budget_fraction": 1.00, "gene_coverage": 1.00},
    "heuristic": {"budget_fraction": 0.65, "gene_coverage": 1.00},
}
PAPER_N = 20  # the organism size of the paper's Tables 6-8 and 10
# greys, light to dark: a sub-score is not an agent, so it takes none of the agents' colours
METRIC_COLORS = {"prediction": "#c8c8c8", "diagnosis": "#8a8a8a", "rescue": "#3a3a3a"}


def figure_composite(records, path: str, n_genes: int = 20, paper: bool = True) -> None:
    """Grouped bars: composite (mean ± 1 std) by condition and agent at
    ``n_genes``; the paper's composites (Tables 6-7) as diamonds at N=20
    (unless ``paper`` is False: sessions at another budget than the paper's)."""
    plt = pyplot()
    rs = [r for r in records if r["n_genes"] == n_genes]
    s = tables.summary(rs)
    agents = agents_in(rs)
    colors = agent_colors(agents)
    conds = [(t, m) for m in MODES for t in TIER_NAMES if any((a, t, m, n_genes) in s for a in agents)]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 * len(conds) + 1.5), 4))
    width = 0.8 / max(1, len(agents))
    drawn, paper_x, paper_y = [], [], []
    for i, a in enumerate(agents):
        cells = [(k, s[(a, t, m, n_genes)]["composite"]) for k, (t, m) in enumerate(conds) if (a, t, m, n_genes) in s]
        x = [k + (i - (len(agents) - 1) / 2) * width for k, _ in cells]
        bars(ax, x, [st for _, st in cells], width, colors[a], a)
        drawn += [st for _, st in cells]
        if paper and n_genes == PAPER_N:
            paper_x += x
            paper_y += [tables.PAPER_COMPOSITE.get(a, {}).get(conds[k]) for k, _ in cells]
    paper_marks(ax, paper_x, paper_y, "paper (Tables 6-7)")
    ax.set_xticks(range(len(conds)))
    ax.set_xticklabels([f"{t}\n{m}" for t, m in conds])
    score_axis(ax, "composite score (mean ± 1 std)")
    ax.set_title(f"Composite by condition (N={n_genes}, {seed_counts(drawn)})")
    legend_right(ax)
    save(plt, fig, path)


def figure_disease(records, path: str, n_genes: int = 20, paper: bool = True) -> None:
    """(a) Disease sub-scores per tier and agent (mean ± 1 std; the paper's
    Table 8 as diamonds at N=20). (b) Diagnosis and rescue side by side per
    agent and tier, ordered by diagnosis within a tier, with the rescue -
    diagnosis gap (mean ± std of the per-seed gap) written beside: the
    paper's Fig. 3b. ``paper`` False: no paper figures (another budget)."""
    plt = pyplot()
    rs = [r for r in records if r["n_genes"] == n_genes and r["mode"] == "disease"]
    s = tables.summary(rs)
    agents = agents_in(rs)
    tiers = [t for t in TIER_NAMES if any((a, t, "disease", n_genes) in s for a in agents)] or ["easy"]
    rows = [(t, a) for t in tiers for a in sorted((a for a in agents if (a, t, "disease", n_genes) in s),
                                                    key=lambda a: -s[(a, t, "disease", n_genes)]["diagnosis"][0])]
    fig = plt.figure(figsize=(max(7.0, 3.6 * len(tiers) + 1.6), 4.2 + 0.34 * len(rows)))
    grid = fig.add_gridspec(2, len(tiers), height_ratios=[3.4, 0.9 + 0.34 * max(1, len(rows))], hspace=0.3)
    width = 0.26
    for c, t in enumerate(tiers):
        ax = fig.add_subplot(grid[0, c])
        present = [a for a in agents if (a, t, "disease", n_genes) in s]
        paper_x, paper_y = [], []
        for j, metric in enumerate(("prediction", "diagnosis", "rescue")):
            x = np.arange(len(present)) + (j - 1) * width
            bars(ax, x, [s[(a, t, "disease", n_genes)][metric] for a in present], width, METRIC_COLORS[metric],
                  metric if c == 0 else None)
            if paper and n_genes == PAPER_N:
                paper_x += list(x)
                paper_y += [PAPER_TABLE8.get(t, {}).get(a, {}).get(metric) for a in present]
        paper_marks(ax, paper_x, paper_y, "paper (Table 8)" if c == 0 else None)
        ax.set_xticks(range(len(present)))
        crowded = len(present) * max(map(len, present), default=0) > 40  # names would run into each other
        ax.set_xticklabels([short_name(a) for a in present], fontsize=8, rotation=25 if crowded else 0, ha="right" if crowded else "center")
        score_axis(ax, "score (mean ± 1 std)" if c == 0 else "")
        ax.set_title(f"({chr(ord('a') + c)}) {t} disease, N={n_genes} ({seed_counts([s[(a, t, 'disease', n_genes)]['rescue'] for a in present])})",
                     fontsize=9)
    # attached to the last top panel, as the gap panel's legend is to its own
    fig.axes[-1].legend(*fig.axes[0].get_legend_handles_labels(), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                        frameon=False, borderaxespad=0.0)
    _gap_panel(fig.add_subplot(grid[1, :]), rs, rows, n_genes, paper, letter=chr(ord("a") + len(tiers)))
    save(plt, fig, path)


def _gap_panel(ax, records, rows, n_genes: int, paper: bool = True, letter: str = "b") -> None:
    """The paper's Fig. 3b: per (tier, agent) row, diagnosis (open circle) and
    rescue (filled square) joined by a grey band (the gap), ±1 std whiskers,
    the gap written at the right; the paper's pair as black diamonds joined by
    a black line just below. Within a row the two are dodged apart (diagnosis
    above, rescue below), so their whiskers never lie on one line."""
    groups = group(records, "agent", "tier")
    y = np.arange(len(rows))[::-1].astype(float)
    dy_diagnosis, dy_rescue, dy_paper = 0.16, -0.08, -0.34  # a row's lanes, in rows
    for yi, (t, a) in zip(y, rows):
        d = np.array([r["scores"]["diagnosis"] for r in groups[(a, t)]], float)
        r_ = np.array([r["scores"]["rescue"] for r in groups[(a, t)]], float)
        middle = yi + (dy_diagnosis + dy_rescue) / 2
        ax.plot([d.mean(), r_.mean()], [middle, middle], color="0.85", lw=3, zorder=1, solid_capstyle="round")
        r_mean, r_err = clip_to_score([r_.mean()], [r_.std()])  # whiskers stop at 0 and 1
        d_mean, d_err = clip_to_score([d.mean()], [d.std()])
        ax.errorbar(r_mean, [yi + dy_rescue], xerr=r_err, fmt="s", color=METRIC_COLORS["rescue"], capsize=2, ms=6,
                    zorder=3)
        ax.errorbar(d_mean, [yi + dy_diagnosis], xerr=d_err, fmt="o", mfc="none", mec=METRIC_COLORS["diagnosis"],
                    mew=1.8, ecolor=METRIC_COLORS["diagnosis"], capsize=2, ms=8, zorder=4)
        gap = r_ - d
        ax.text(1.12, yi, f"{gap.mean():+.2f} ± {gap.std():.2f}", va="center", ha="left", fontsize=8)
        theirs = PAPER_TABLE8.get(t, {}).get(a) if paper and n_genes == PAPER_N else None
        if theirs:
            ax.plot([theirs["diagnosis"], theirs["rescue"]], [yi + dy_paper] * 2, color="black", lw=0.8, zorder=2)
            ax.plot([theirs["diagnosis"]], [yi + dy_paper], marker="D", ms=4, mfc="white", mec="black", ls="none",
                    zorder=4)
            ax.plot([theirs["rescue"]], [yi + dy_paper], marker="D", ms=4, color="black", ls="none", zorder=4)
    for k in range(1, len(rows)):
        if rows[k][0] != rows[k - 1][0]:
            ax.axhline(y[k] + 0.5, color="0.5", ls=":", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{short_name(a)} ({t})" for t, a in rows], fontsize=8)
    ax.set_xlim(-0.05, 1.45)
    ax.set_xticks(np.linspace(0, 1, 6))
    ax.set_ylim(-0.8, len(rows) + 0.3)
    ax.axvline(0, color="0.3", lw=0.6)
    ax.text(1.12, len(rows) - 0.3, "rescue - diagnosis", fontsize=8, fontweight="bold", va="center")
    ax.set_xlabel("score (mean ± 1 std over seeds)")
    ax.set_title(f"({letter}) rescue vs diagnosis per agent, ordered by diagnosis within a tier (N={n_genes})", fontsize=9)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", mfc="white", mec=METRIC_COLORS["diagnosis"], mew=1.6, ls="none", label="diagnosis"),
        Line2D([], [], marker="s", color=METRIC_COLORS["rescue"], ls="none", label="rescue"),
        Line2D([], [], color="0.85", lw=3, solid_capstyle="round", label="diagnosis to rescue"),
        Line2D([], [], marker="D", ms=4, mfc="white", mec="black", ls="none", label="paper diagnosis"),
        Line2D([], [], marker="D", ms=4, color="black", ls="none", label="paper rescue"),
        Line2D([], [], color="black", lw=0.8, label="paper diagnosis to rescue"),
    ]
    ax.legend(handles=handles if paper and n_genes == PAPER_N else handles[:3], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)


def figure_scaling(records, path: str, tier: str = "medium", mode: str = "healthy", paper: bool = True) -> None:
    """The paper's Fig. 5 for ``tier`` / ``mode``: (a) prediction accuracy,
    (b) budget used (fraction of B), (c) gene coverage (fraction of targetable
    genes perturbed), each against N on a log2 axis ticked at the N values of
    the records; mean with ±1 std error bars and shaded band. The paper's
    figures (Table 11; Table 10 at N=20) as diamonds on a dashed line, for
    medium healthy only (the condition they were measured on; none when
    ``paper`` is False: sessions at another budget)."""
    plt = pyplot()
    rs = [r for r in records if (r["tier"], r["mode"]) == (tier, mode)]
    s = tables.summary(rs)
    ns = sorted({r["n_genes"] for r in rs})
    agents = agents_in(rs)
    colors = agent_colors(agents)
    paper_cond = paper and (tier, mode) == ("medium", "healthy")
    panels = (
        ("prediction", "(a) prediction accuracy", lambda a, n: tables.PAPER_SCALING.get(a, {}).get(n)),
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
            m, err = clip_to_score(m, sd)  # every panel is a fraction in [0, 1]
            ax.errorbar(x, m, yerr=err, marker="o", capsize=3, color=colors[a], label=a, zorder=3)
            ax.fill_between(x, m - err[0], m + err[1], color=colors[a], alpha=0.12, lw=0)
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
        score_axis(ax, "", lines=True)
        ax.set_title(title, fontsize=10)
    axes[0][0].set_ylabel("mean ± 1 std over seeds")
    handles = {}
    for ax in axes[0]:
        handles.update(dict(zip(*ax.get_legend_handles_labels()[::-1])))
    order = [label for a in agents for label in (a, f"{a} (paper)") if label in handles]  # each agent beside its paper line
    axes[0][-1].legend([handles[k] for k in order], [short_name(k) for k in order], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"Scaling ({tier} {mode}); paper: diamonds, dashed" if paper_cond else f"Scaling ({tier} {mode})")
    fig.tight_layout()
    save(plt, fig, path)


def _scaling_condition(records):
    """The (tier, mode) the scaling figure shows: medium healthy (the paper's)
    when it has several N, else the first condition that has; None if none."""
    conds = [("medium", "healthy")] + [(t, m) for m in MODES for t in TIER_NAMES]
    for t, m in conds:
        if len({r["n_genes"] for r in records if (r["tier"], r["mode"]) == (t, m)}) > 1:
            return t, m
    return None


def _default_budget(record) -> int:
    """The paper's budget (N + S + 8) for a record's settings."""
    return make_params(record["tier"], record["n_genes"], record["mode"]).budget


def sections(every: list, out_dir: str, *, source: str, notes=()) -> list[str]:
    """The report's LUCA sections (markdown parts) and figures in ``out_dir``
    from LUCA's lines ``every`` of results ``source`` (``notes``: what reading
    the file noted)."""
    records, arms_note = ablation.main_records(every)  # the main tables never average over ablation arms
    ns = sorted({r["n_genes"] for r in records})
    n0 = 20 if 20 in ns else ns[0]
    budgets = sorted({r["budget"] for r in records if r.get("budget") is not None and r["budget"] != _default_budget(r)})
    paper = not budgets  # the paper's figures are at its default budget, N + S + 8
    parts = [
        "# LUCA results",
        (f"{len(every)} session{'' if len(every) == 1 else 's'} from `{source}`; mean ± population std; "
         + ("paper figures in brackets. " if paper else "")
         + "Figures: bars and lines are our means with ±1 std error bars"
         + ("; black diamonds are the paper's baseline figures." if paper else ".")),
        *([f"Note: sessions at budget {', '.join(map(str, budgets))}, not the paper's default (N + S + 8): "
           f"the paper's figures are left out, as not comparable."] if budgets else []),
        *(f"Note: {note}" for note in notes),
        *([f"Note: {arms_note}."] if arms_note else []),
        f"## Composite score (N={n0})",
        tables.composite_table(records, n0, with_paper=paper),
        *tables.baseline_notes(records),
        "![composite](composite.png)",
    ]
    figure_composite(records, os.path.join(out_dir, "composite.png"), n0, paper=paper)
    if any(r["mode"] == "disease" for r in records):
        parts += [f"## Disease sub-scores (N={n0})", tables.disease_table(records, n0), "![disease](disease.png)"]
        figure_disease(records, os.path.join(out_dir, "disease.png"), n0, paper=paper)
        diagnosis_process = process.section(records)
        if diagnosis_process:
            parts.append(diagnosis_process)
    if any((r["tier"], r["mode"]) == ("medium", "healthy") for r in records):
        parts += ["## Strategy (medium healthy)", tables.strategy_table(records, n_genes=n0)]
    scaling = _scaling_condition(records)
    if scaling:
        t, m = scaling
        parts += [f"## Scaling ({t} {m}, prediction accuracy)", tables.scaling_table(records, t, m, with_paper=paper),
                  "![scaling](scaling.png)"]
        figure_scaling(records, os.path.join(out_dir, "scaling.png"), t, m, paper=paper)
    ablations = ablation.section(every)
    if ablations:
        parts.append(ablations)
    return parts
