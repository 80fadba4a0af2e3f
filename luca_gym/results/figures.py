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
# a white rim shows on a dark bar too; not clipped, so a diamond at 0 or 1 shows whole
PAPER_MARK = dict(marker="D", markersize=5, color="black", markeredgecolor="white", markeredgewidth=0.6,
                  linestyle="none", clip_on=False, zorder=6)


# One colour per agent in every figure of every world: known baselines get a fixed
# colour; any other name (``ppo:<run>``, ``openai:<model>``...) a colour chosen from its
# name by a stable hash (not by its position in a figure's list, which changes).
AGENT_PALETTE = {
    "null": "#7f7f7f", "random": "#bcbd22", "heuristic": "#1f77b4", "causal-sweep": "#2ca02c",
    "task-directed": "#d62728", "model-fit": "#9467bd", "causal-sweep-flat": "#98df8a",
    "systematic": "#1f77b4", "forgetful": "#ff7f0e", "correlation-screen": "#ff7f0e", "cis-mr": "#9467bd",
    "mr-experiments": "#2ca02c", "oracle": "#000000", "causal-pipeline": "#e6550d", "cue-spotter": "#636363",
}
# none of the palette's colours, so a learned or LLM agent never looks like a baseline
_FALLBACK = ("#8c564b", "#e377c2", "#17becf", "#aec7e8", "#ffbb78", "#ff9896", "#c5b0d5",
             "#c49c94", "#f7b6d2", "#9edae5", "#393b79", "#637939", "#843c39", "#7b4173")


def agent_color(agent: str) -> str:
    """The colour of ``agent`` in every figure: a fixed one for the known
    baselines, otherwise one picked by a stable hash (CRC-32) of its short name."""
    import zlib

    name = short_name(agent)
    if name in AGENT_PALETTE:
        return AGENT_PALETTE[name]
    return _FALLBACK[zlib.crc32(name.encode("utf-8")) % len(_FALLBACK)]


def agent_colors(agents) -> dict:
    """``{agent: colour}`` from :func:`agent_color` (the same for an agent in every figure)."""
    return {a: agent_color(a) for a in agents}


def short_name(agent: str) -> str:
    """A legend-sized agent name: ``ppo:results/run/x/policy.eqx`` -> ``ppo:x``
    (the run folder's name, not its path); other names unchanged."""
    import os

    agent = str(agent)
    kind, sep, rest = agent.partition(":")
    if not sep or ("/" not in rest and os.sep not in rest):
        return agent
    parts = [q for q in rest.replace(os.sep, "/").split("/") if q and q != "."]
    if parts and "." in parts[-1] and len(parts) > 1:  # a file in the run folder: name the folder
        parts = parts[:-1]
    return f"{kind}:{parts[-1]}" if parts else agent


def clip_to_score(mean, std, low: float = 0.0, high: float = 1.0):
    """Means clipped to [low, high] and asymmetric error bars (2, n) that stop at
    ``low`` and ``high``: a score's ±1 std drawn without running past the range."""
    mean = np.clip(np.asarray(mean, float), low, high)
    std = np.abs(np.asarray(std, float))
    lower = np.minimum(std, mean - low)
    upper = np.minimum(std, high - mean)
    return mean, np.vstack([lower, upper])


def panel_letters(axes, titles=None) -> None:
    """Prefix each axis' title with a unique letter, (a), (b), ... in order."""
    for i, ax in enumerate(axes):
        title = ax.get_title() if titles is None else titles[i]
        ax.set_title(f"({chr(ord('a') + i)}) {title}", fontsize=ax.title.get_fontsize())


def score_axis(ax, ylabel: str, lines: bool = False) -> None:
    """A 0..1 score axis. Bars (``lines`` False) stand on the bottom edge at 0,
    so nothing is drawn below a score of 0; line plots (``lines`` True) keep a
    little room below 0 so a marker at 0 shows whole."""
    ax.set_ylim(-0.03 if lines else 0.0, 1.05)
    ax.axhline(0, color="0.3", lw=0.6, zorder=1)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def bars(ax, x, stats, width: float, color, label=None) -> None:
    """Bars of means with ±1 std error bars, both clipped to the score range
    [0, 1] (:func:`clip_to_score`). A mean of 0 gets a thick stroke on the zero
    line in the bar's colour (its lower half falls outside the axes of
    :func:`score_axis` and is clipped, so it shows above 0, not below), so it
    reads as a zero, not as a missing bar."""
    x = np.asarray(x, float)
    mean, err = clip_to_score([s[0] for s in stats], [s[1] for s in stats])
    ax.bar(x, mean, width, yerr=err, color=color, label=label, capsize=2, error_kw=dict(lw=0.8, ecolor="0.2"), zorder=2)
    zero = np.isclose(mean, 0.0)
    if zero.any():
        ax.hlines(np.zeros(zero.sum()), x[zero] - width / 2, x[zero] + width / 2, colors=color, lw=3, zorder=3, gid="zero-bar")


def paper_marks(ax, x, values, label: str) -> None:
    """The paper's figures (black diamonds) at ``x``; ``None`` values are skipped."""
    pts = [(xi, v) for xi, v in zip(x, values) if v is not None]
    if pts:
        ax.plot(*zip(*pts), label=label, **PAPER_MARK)


def legend_right(ax) -> None:
    """The legend just right of the axes, top-aligned, labels shortened (:func:`short_name`)."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, [short_name(lab) for lab in labels], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, borderaxespad=0.0)


def seed_counts(stats) -> str:
    """'k seeds' or 'k-m seeds' over the cells drawn."""
    counts = sorted({s[2] for s in stats})
    if not counts:
        return "no sessions"
    if len(counts) == 1:
        return f"{counts[0]} seed{'' if counts[0] == 1 else 's'}"
    return f"{counts[0]}-{counts[-1]} seeds"
