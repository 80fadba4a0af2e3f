"""Figure helpers every world's report and viewer share (matplotlib, Agg)."""

from __future__ import annotations

import numpy as np


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt, fig, path: str) -> None:
    """Save with every outside legend and label inside the image; close."""
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


# -- score figures: bars of means with ±1 std, reference figures as black diamonds --
PAPER_MARK = dict(marker="D", markersize=5, color="black", linestyle="none", zorder=6)


def agent_colors(agents) -> dict:
    return {a: f"C{i % 10}" for i, a in enumerate(agents)}


def score_axis(ax, ylabel: str) -> None:
    """A 0..1 score axis with a little room below 0, so a zero bar shows as a stroke on the zero line."""
    ax.set_ylim(-0.04, 1.08)
    ax.axhline(0, color="0.3", lw=0.6, zorder=1)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def bars(ax, x, stats, width: float, color, label=None) -> None:
    """Bars of means with ±1 std error bars. A mean of 0 gets a thick stroke
    at 0 in the bar's colour, so it reads as a zero, not as a missing bar."""
    x = np.asarray(x, float)
    mean = np.array([s[0] for s in stats], float)
    std = np.array([s[1] for s in stats], float)
    ax.bar(x, mean, width, yerr=std, color=color, label=label, capsize=2, error_kw=dict(lw=0.8, ecolor="0.2"), zorder=2)
    zero = np.isclose(mean, 0.0)
    if zero.any():
        ax.hlines(np.zeros(zero.sum()), x[zero] - width / 2, x[zero] + width / 2, colors=color, lw=3, zorder=3, gid="zero-bar")


def paper_marks(ax, x, values, label: str) -> None:
    """The paper's figures (black diamonds) at ``x``; ``None`` values are skipped."""
    pts = [(xi, v) for xi, v in zip(x, values) if v is not None]
    if pts:
        ax.plot(*zip(*pts), label=label, **PAPER_MARK)


def legend_right(ax) -> None:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def seed_counts(stats) -> str:
    """'k seeds' or 'k-m seeds' over the cells drawn."""
    counts = sorted({s[2] for s in stats})
    if not counts:
        return "no sessions"
    return f"{counts[0]} seeds" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} seeds"
