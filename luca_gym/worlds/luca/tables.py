"""LUCA's paper-format tables over results lines: composite, disease,
strategy and scaling (Tables 6-8, 10, 11), the paper's figures beside ours,
and :func:`summary` (mean, std and n per cell of the score and strategy
metrics)."""

from __future__ import annotations

from luca_gym.results.summaries import agents_in, cell as _cell, group, markdown_table, stats as _stats
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.evaluation import SCORE_FIELDS, STRATEGY_FIELDS
from luca_gym.worlds.luca.spec import MODES, TIER_NAMES

# Paper figures for the baselines (SPEC §4 and the paper's Tables 6-8, 11).
PAPER_COMPOSITE = {
    "causal-sweep": {("easy", "healthy"): 1.000, ("medium", "healthy"): 0.983, ("hard", "healthy"): 0.550,
                     ("easy", "disease"): 0.553, ("medium", "disease"): 0.561, ("hard", "disease"): 0.650},
    "heuristic": {("easy", "healthy"): 0.708, ("medium", "healthy"): 0.575, ("hard", "healthy"): 0.350,
                  ("easy", "disease"): 0.511, ("medium", "disease"): 0.475, ("hard", "disease"): 0.361},
    "random": {("easy", "healthy"): 0.667, ("medium", "healthy"): 0.633, ("hard", "healthy"): 0.350,
               ("easy", "disease"): 0.358, ("medium", "disease"): 0.225, ("hard", "disease"): 0.144},
}


PAPER_SCALING = {
    "causal-sweep": {20: 0.983, 40: 0.950, 80: 0.883, 160: 0.933, 320: 0.800, 640: 0.883, 1280: 0.800},
    "heuristic": {20: 0.550, 40: 0.567, 80: 0.583, 160: 0.583, 320: 0.667, 640: 0.667, 1280: 0.667},
    "random": {20: 0.650, 40: 0.617, 80: 0.650, 160: 0.667, 320: 0.667, 640: 0.667, 1280: 0.667},
}


# What the paper's floor does, said under the composite table: its steady
# 0.667 ± 0.000 (easy healthy) otherwise reads as a bug.
RANDOM_NOTE = ("random is the paper's floor: it runs no experiment and predicts 0.5 for every phenotype (in disease mode "
               "it also commits a random diagnosis and rescue); its prediction score is the share of phenotypes whose "
               "true value lies within 0.10 of 0.5, often the same on every seed (hence ± 0.000).")


def baseline_notes(records) -> list[str]:
    """The lines to print under :func:`composite_table` of ``records``: what
    ``random`` does, where it ran (none otherwise)."""
    return [RANDOM_NOTE] if "random" in agents_in(records) else []


def summary(records, fields=("agent", "tier", "mode", "n_genes")) -> dict:
    """{group key: {metric: (mean, population std, count)}} for the score and
    strategy metrics."""
    return {
        key: {m: _stats([r["scores"][m] for r in rs]) for m in (*SCORE_FIELDS, *STRATEGY_FIELDS, "n_alt")}
        for key, rs in group(records, *fields).items()
    }


def composite_table(records, n_genes: int = 20, with_paper: bool = True) -> str:
    """Markdown: composite (mean ± std) per agent over the six conditions, with
    the paper's baseline figures beside ours (Tables 6-7)."""
    s = summary([r for r in records if r["n_genes"] == n_genes])
    conds = [(t, m) for m in MODES for t in TIER_NAMES if any((a, t, m, n_genes) in s for a in agents_in(records))]
    lines = []
    for a in agents_in(records):
        cells = []
        for t, m in conds:
            st = s.get((a, t, m, n_genes))
            cell = _cell(st["composite"]) if st else "-"
            paper = PAPER_COMPOSITE.get(a, {}).get((t, m))
            if with_paper and paper is not None and st:
                cell += f" (paper {paper:.3f})"
            cells.append(cell)
        lines.append([a, *cells])
    return markdown_table(["agent", *(f"{t} {m[0].upper()}" for t, m in conds)], lines)


def disease_table(records, n_genes: int = 20) -> str:
    """Markdown: disease sub-scores and the rescue - diagnosis gap (Table 8)."""
    s = summary([r for r in records if r["n_genes"] == n_genes and r["mode"] == "disease"])
    lines = []
    for t in TIER_NAMES:
        for a in agents_in(records):
            st = s.get((a, t, "disease", n_genes))
            if st:
                gap = st["rescue"][0] - st["diagnosis"][0]
                lines.append([t, a, *(f"{st[k][0]:.3f}" for k in ("prediction", "diagnosis", "rescue", "composite")),
                              f"{gap:+.3f}"])
    return markdown_table(["tier", "agent", "prediction", "diagnosis", "rescue", "composite", "rescue - diagnosis"], lines)


def strategy_table(records, tier: str = "medium", mode: str = "healthy", n_genes: int = 20) -> str:
    """Markdown: budget fraction, single-gene %, coverage % (Table 10)."""
    s = summary([r for r in records if (r["tier"], r["mode"], r["n_genes"]) == (tier, mode, n_genes)])
    lines = []
    for a in agents_in(records):
        st = s.get((a, tier, mode, n_genes))
        if st:
            lines.append([a, f"{st['budget_fraction'][0]:.2f}", f"{100 * st['single_gene_fraction'][0]:.1f}%",
                          f"{100 * st['gene_coverage'][0]:.1f}%", f"{100 * st['block_fraction'][0]:.1f}%",
                          f"{st['redundancy'][0]:.2f}", f"{st['commit_point'][0]:.2f}"])
    return markdown_table(["agent", "budget frac", "single-gene %", "coverage %", "BLOCK %", "redundancy", "commit point"],
                          lines)


def scaling_table(records, tier: str = "medium", mode: str = "healthy", with_paper: bool = True) -> str:
    """Markdown: prediction accuracy by N (Table 11), paper figures beside."""
    rs = [r for r in records if (r["tier"], r["mode"]) == (tier, mode)]
    s = summary(rs)
    ns = sorted({r["n_genes"] for r in rs})
    agents = agents_in(rs)
    lines = []
    for n in ns:
        cells = []
        for a in agents:
            st = s.get((a, tier, mode, n))
            cell = _cell(st["prediction"]) if st else "-"
            paper = PAPER_SCALING.get(a, {}).get(n)
            if with_paper and paper is not None and st:
                cell += f" (paper {paper:.3f})"
            cells.append(cell)
        lines.append([n, world.sizes(n).budget, *cells])
    return markdown_table(["N", "budget", *agents], lines)
