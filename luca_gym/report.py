"""Markdown tables and PNG figures from a results folder (``luca-gym report``)."""

from __future__ import annotations

import os

import numpy as np

from luca_gym import eval as ev
from luca_gym.spec import MODES, TIER_NAMES


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(plt, fig, ax, path: str, ylabel: str, title: str) -> None:
    """Score axis, title, legend; save and close."""
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.25)  # headroom: the legend sits above the bars
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=3, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_composite(records, path: str, n_genes: int = 20) -> None:
    """Grouped bars: composite by condition and agent, ±1 std."""
    plt = _pyplot()
    s = ev.summary([r for r in records if r["n_genes"] == n_genes])
    agents = ev.agents_in(records)
    conds = [(t, m) for m in MODES for t in TIER_NAMES if any((a, t, m, n_genes) in s for a in agents)]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(agents))
    for i, a in enumerate(agents):
        stats = [s.get((a, t, m, n_genes), {}).get("composite", (np.nan, 0, 0)) for t, m in conds]
        ax.bar(np.arange(len(conds)) + i * width, [x[0] for x in stats], width, yerr=[x[1] for x in stats], label=a, capsize=2)
    ax.set_xticks(np.arange(len(conds)) + width * (len(agents) - 1) / 2)
    ax.set_xticklabels([f"{t}\n{m}" for t, m in conds])
    _finish(plt, fig, ax, path, "composite score", f"Composite by condition (N={n_genes})")


def figure_disease(records, path: str, n_genes: int = 20) -> None:
    """Disease sub-scores per tier and agent; the rescue - diagnosis gap."""
    plt = _pyplot()
    s = ev.summary([r for r in records if r["n_genes"] == n_genes and r["mode"] == "disease"])
    agents = ev.agents_in(records)
    tiers = [t for t in TIER_NAMES if any((a, t, "disease", n_genes) in s for a in agents)]
    fig, axes = plt.subplots(1, max(1, len(tiers)), figsize=(4 * max(1, len(tiers)), 3.6), squeeze=False)
    for ax, t in zip(axes[0], tiers):
        for j, metric in enumerate(("prediction", "diagnosis", "rescue")):
            vals = [s.get((a, t, "disease", n_genes), {}).get(metric, (np.nan,))[0] for a in agents]
            ax.bar(np.arange(len(agents)) + j * 0.27, vals, 0.27, label=metric)
        ax.set_xticks(np.arange(len(agents)) + 0.27)
        ax.set_xticklabels(agents, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{t} disease")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_scaling(records, path: str, tier: str = "medium", mode: str = "healthy") -> None:
    """Prediction accuracy against N, shaded ±1 std."""
    plt = _pyplot()
    rs = [r for r in records if (r["tier"], r["mode"]) == (tier, mode)]
    s = ev.summary(rs)
    ns = sorted({r["n_genes"] for r in rs})
    fig, ax = plt.subplots(figsize=(6, 4))
    for a in ev.agents_in(rs):
        pts = [(n, *s[(a, tier, mode, n)]["prediction"][:2]) for n in ns if (a, tier, mode, n) in s]
        if not pts:
            continue
        x, m, sd = map(np.asarray, zip(*pts))
        ax.plot(x, m, marker="o", label=a)
        ax.fill_between(x, m - sd, m + sd, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("genes N")
    _finish(plt, fig, ax, path, "prediction accuracy", f"Scaling ({tier} {mode})")


def write_report(results: str, out_dir: str | None = None) -> str:
    """Write ``report.md`` and figures next to the results (or in ``out_dir``).
    Returns the markdown text."""
    records = ev.load_sessions(results)
    if not records:
        raise ev.ResultsError(f"{results}: no sessions to report")
    folder = results if os.path.isdir(results) else os.path.dirname(results) or "."
    out_dir = out_dir or folder
    os.makedirs(out_dir, exist_ok=True)
    ns = sorted({r["n_genes"] for r in records})
    n0 = 20 if 20 in ns else ns[0]
    parts = [
        "# LUCA results",
        f"{len(records)} sessions from `{results}`; mean ± population std; paper figures in brackets.",
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
    if len(ns) > 1:
        parts += ["## Scaling (medium healthy, prediction accuracy)", ev.scaling_table(records), "![scaling](scaling.png)"]
        figure_scaling(records, os.path.join(out_dir, "scaling.png"))
    text = "\n\n".join(parts) + "\n"
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def draw_network(organism, path: str) -> None:
    """The organism's true network (ground truth, for researchers): genes by
    module on a circle, readout genes green, latent grey, edges red/blue by
    sign, phenotype readouts as purple links to three outer nodes."""
    plt = _pyplot()
    a, m = organism.arrays, organism.meta
    n = m.n_genes
    module = np.asarray(a.module)
    order = np.argsort(module, kind="stable")
    angle = np.empty(n)
    angle[order] = 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    weights = np.asarray(a.weights)
    fig, ax = plt.subplots(figsize=(7, 7))
    for i, j in zip(*np.nonzero(weights)):
        ax.annotate("", xy=xy[i], xytext=xy[j], arrowprops=dict(arrowstyle="->", lw=0.4, alpha=0.5, color="tab:red" if weights[i, j] > 0 else "tab:blue"))
    readout = np.asarray(a.readout)
    pxy = 1.5 * np.stack([np.cos(2 * np.pi * np.arange(3) / 3), np.sin(2 * np.pi * np.arange(3) / 3)], axis=1)
    for k, g in zip(*np.nonzero(readout)):
        ax.plot(*zip(xy[g], pxy[k]), color="tab:purple", lw=0.5, alpha=0.5)
    colors = np.where(np.asarray(a.latent_mask), "lightgrey", np.where(np.asarray(a.readout_mask), "tab:green", "white"))
    ax.scatter(xy[:, 0], xy[:, 1], s=120 if n <= 80 else 10, c=list(colors), edgecolors="black", zorder=3)
    if n <= 80:
        for g in range(n):
            ax.text(*(1.12 * xy[g]), m.gene_names[g], fontsize=6, ha="center", va="center")
    ax.scatter(pxy[:, 0], pxy[:, 1], s=300, c="plum", edgecolors="black", zorder=3)
    for k in range(3):
        ax.text(*pxy[k], m.phenotype_names[k], fontsize=7, ha="center", va="center")
    ax.set_title(f"{m.tier} seed {m.seed} N={n} ({m.mode}); red activates, blue inhibits")
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
