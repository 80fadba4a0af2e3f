"""The paper's ablations (appendix E), paired by seed, from session records.

Three contrasts, each between two arms of one condition with all else fixed
(:data:`CONTRASTS`):

- ``backwards`` (E.1, Table 13): forward vs backwards organisms (every signed
  quantity inverted); Δ = forward - backward, as the paper.
- ``vocabulary`` (E.2, Table 14): invented (G001...) vs real human gene
  names; Δ = real - invented.
- ``stance`` (E.2, Table 14): the prompt suppresses vs permits biological
  knowledge; Δ = permit - suppress.

For each agent x tier x mode x N x the other two conditions, the sessions of
the two arms are paired by seed (the seeds both have: ``n``). Per pair the
difference of the metric (composite by default); reported: each arm's mean ±
population std over the paired seeds, Δ (the mean difference), its
percentile-bootstrap 95% interval (:func:`bootstrap_ci`: 10,000 resamples of
the pairs, seeded, so the same records give the same interval) and the
two-sided paired Wilcoxon signed-rank p (:func:`wilcoxon_p`, scipy; zero
differences dropped, the Wilcoxon method). When every difference is zero the
test is undefined: p is None, shown "n/a". For the backwards contrast,
Δ - Δheuristic subtracts the heuristic's Δ in the same condition (the
paper's null control for a substrate effect), when the heuristic is there.

:func:`section` writes the markdown ``luca-gym report`` adds as "Ablations".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from luca_gym.summaries import agents_in
from luca_gym.worlds.luca.evaluation import KEY_DEFAULTS, SCORE_FIELDS
from luca_gym.worlds.luca.spec import MODES, TIER_NAMES

CONDITION_FIELDS = ("backwards", "vocabulary", "stance")
DEFAULT_CONDITION = {"backwards": False, **KEY_DEFAULTS}
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
LEVEL = 0.95
NULL_CONTROL = "heuristic"  # the agent whose Δ the backwards table subtracts (the paper's)


@dataclass(frozen=True)
class Contrast:
    """Two arms of one condition field; Δ = ``minuend`` arm - ``subtrahend`` arm."""

    field: str
    arms: tuple  # (default arm, manipulated arm), in table order
    labels: tuple  # the arms' names in tables
    minuend: object

    @property
    def subtrahend(self):
        return self.arms[1] if self.minuend == self.arms[0] else self.arms[0]

    def label(self, value) -> str:
        return self.labels[self.arms.index(value)]

    @property
    def delta_text(self) -> str:
        return f"{self.label(self.minuend)} - {self.label(self.subtrahend)}"


CONTRASTS = {
    "backwards": Contrast("backwards", (False, True), ("forward", "backward"), minuend=False),
    "vocabulary": Contrast("vocabulary", ("invented", "real"), ("invented", "real"), minuend="real"),
    "stance": Contrast("stance", ("suppress", "permit"), ("suppress", "permit"), minuend="permit"),
}


def condition(record: dict) -> dict:
    """A record's ``backwards``, ``vocabulary`` and ``stance`` (defaults for a record without them)."""
    return {f: record.get(f, DEFAULT_CONDITION[f]) for f in CONDITION_FIELDS}


# -- statistics ----------------------------------------------------------------
def bootstrap_ci(differences, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = LEVEL) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``differences``: the pairs
    resampled with replacement ``resamples`` times (numpy, ``seed``), the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled means."""
    d = np.asarray(differences, float)
    if d.size == 0:
        raise ValueError("differences: empty; a bootstrap needs at least one pair")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def wilcoxon_p(differences) -> float | None:
    """Two-sided paired Wilcoxon signed-rank p of ``differences``
    (``scipy.stats.wilcoxon``, zero differences dropped); None when every
    difference is zero (or there are none): the test is then undefined."""
    from scipy.stats import wilcoxon

    d = np.asarray(differences, float)
    if not np.any(d != 0):
        return None
    with warnings.catch_warnings():  # scipy warns on ties and few pairs; the p it returns stands
        warnings.simplefilter("ignore")
        return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


@dataclass(frozen=True)
class Paired:
    """One contrast of one agent in one condition, over its paired seeds."""

    contrast: str
    agent: str
    tier: str
    mode: str
    n_genes: int
    fixed: tuple  # ((field, value), ...): the other two condition fields
    seeds: tuple
    arms: dict  # arm value -> (mean, population std) over the paired seeds
    delta: float
    ci: tuple
    p: float | None

    @property
    def n(self) -> int:
        return len(self.seeds)


def paired(records, contrast: str, metric: str = "composite", resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> list[Paired]:
    """Every paired comparison of ``contrast`` (a key of :data:`CONTRASTS`)
    that ``records`` hold both arms of, with at least one seed in common."""
    if contrast not in CONTRASTS:
        raise ValueError(f"contrast: {contrast!r} unknown; allowed {', '.join(CONTRASTS)}")
    if metric not in SCORE_FIELDS:
        raise ValueError(f"metric: {metric!r} unknown; allowed {', '.join(SCORE_FIELDS)}")
    c = CONTRASTS[contrast]
    others = tuple(f for f in CONDITION_FIELDS if f != c.field)
    cells: dict = {}
    for r in records:
        cond = condition(r)
        if cond[c.field] not in c.arms:
            continue
        group = (r["agent"], r["tier"], r["mode"], r["n_genes"], tuple((f, cond[f]) for f in others))
        cells.setdefault(group, {}).setdefault(cond[c.field], {})[r["seed"]] = float(r["scores"][metric])
    out = []
    for (agent, tier, mode, n, fixed), arms in cells.items():
        if len(arms) < 2:
            continue
        seeds = tuple(sorted(set(arms[c.arms[0]]) & set(arms[c.arms[1]])))
        if not seeds:
            continue
        values = {arm: np.array([arms[arm][s] for s in seeds]) for arm in c.arms}
        diffs = values[c.minuend] - values[c.subtrahend]
        out.append(Paired(
            contrast, agent, tier, mode, n, fixed, seeds,
            {arm: (float(v.mean()), float(v.std())) for arm, v in values.items()},
            float(diffs.mean()), bootstrap_ci(diffs, resamples, seed), wilcoxon_p(diffs),
        ))
    order = agents_in([{"agent": p.agent} for p in out])
    arm_order = lambda fixed: tuple(CONTRASTS[f].arms.index(v) for f, v in fixed)  # noqa: E731 -- default arms first
    out.sort(key=lambda p: (p.n_genes, MODES.index(p.mode), TIER_NAMES.index(p.tier), arm_order(p.fixed), order.index(p.agent)))
    return out


# -- tables --------------------------------------------------------------------
def _pm(stats) -> str:
    return f"{stats[0]:.3f} ± {stats[1]:.3f}"


def format_p(p: float | None) -> str:
    """p as the paper prints it (0.50, 0.017); ``n/a`` when undefined."""
    if p is None:
        return "n/a"
    return f"{p:.2f}" if p >= 0.095 else f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _ci(ci) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _fixed_text(fixed) -> str:
    names = {"backwards": {False: "forward", True: "backwards"}}
    return ", ".join(str(names.get(f, {}).get(v, v)) for f, v in fixed)


def backwards_table(records, metric: str = "composite") -> str:
    """Markdown in the paper's Table 13 format, one table per condition:
    Model | n | Forward | Backward | Δ | 95% CI | p | Δ - Δheur. Empty when
    ``records`` hold no paired forward and backwards sessions."""
    rows = paired(records, "backwards", metric)
    blocks = []
    for cond in dict.fromkeys((p.tier, p.mode, p.n_genes, p.fixed) for p in rows):
        group = [p for p in rows if (p.tier, p.mode, p.n_genes, p.fixed) == cond]
        heur = next((p for p in group if p.agent == NULL_CONTROL), None)
        tier, mode, n, fixed = cond
        lines = [f"**{tier} {mode}, N={n}, {_fixed_text(fixed)}** ({metric}; Δ = forward - backward)", "",
                 "| Model | n | Forward | Backward | Δ | 95% CI | p | Δ - Δheur |", "|" + " --- |" * 8]
        for p in group:
            adjusted = "—" if heur is None or p is heur else f"{p.delta - heur.delta:+.3f}"
            lines.append(f"| {p.agent} | {p.n} | {_pm(p.arms[False])} | {_pm(p.arms[True])} | {p.delta:+.3f} | {_ci(p.ci)} "
                         f"| {format_p(p.p)} | {adjusted} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


CELLS_2X2 = (("invented", "suppress"), ("real", "suppress"), ("invented", "permit"), ("real", "permit"))
CELL_NAMES = {"invented": "inv", "real": "real", "suppress": "sup", "permit": "per"}


def vocabulary_stance_table(records, metric: str = "composite") -> str:
    """Markdown in the paper's Table 14 format: Tier | Model | inv / sup |
    real / sup | inv / per | real / per (mean ± population std of each cell's
    sessions, ``-`` for a cell not run; n the sessions per cell), one table
    per mode and direction. Empty unless some agent has two cells."""
    cells: dict = {}
    for r in records:
        cond = condition(r)
        key = (r["mode"], cond["backwards"])
        cells.setdefault(key, {}).setdefault((r["tier"], r["n_genes"], r["agent"]), {}).setdefault(
            (cond["vocabulary"], cond["stance"]), []).append(float(r["scores"][metric]))
    blocks = []
    for (mode, backwards) in sorted(cells, key=lambda k: (MODES.index(k[0]), k[1])):
        table = {k: v for k, v in cells[(mode, backwards)].items() if len(v) > 1}
        if not table:
            continue
        order = agents_in([{"agent": a} for _, _, a in table])
        head = " | ".join(f"{CELL_NAMES[v]} / {CELL_NAMES[s]}" for v, s in CELLS_2X2)
        lines = [f"**{mode}{', backwards' if backwards else ''}** ({metric}, mean ± std)", "",
                 f"| Tier | Model | {head} | n |", "|" + " --- |" * 7]
        for tier, n, agent in sorted(table, key=lambda k: (TIER_NAMES.index(k[0]), k[1], order.index(k[2]))):
            got = table[(tier, n, agent)]
            values = [got.get(c) for c in CELLS_2X2]
            counts = sorted({len(v) for v in values if v})
            shown = " | ".join("-" if v is None else f"{np.mean(v):.3f} ± {np.std(v):.3f}" for v in values)
            lines.append(f"| {tier}, N={n} | {agent} | {shown} | {'/'.join(map(str, counts))} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def contrast_table(records, contrasts=("vocabulary", "stance"), metric: str = "composite") -> str:
    """Markdown: the paired tests of ``contrasts``, one row per agent and
    condition: Tier | Model | Contrast (Δ = ...) | At | n | Δ | 95% CI | p."""
    lines = ["| Tier | Model | Contrast | At | n | Δ | 95% CI | p |", "|" + " --- |" * 8]
    rows = [p for name in contrasts for p in paired(records, name, metric)]
    for p in rows:
        c = CONTRASTS[p.contrast]
        at = _fixed_text(p.fixed) + ("" if p.mode == "healthy" else f", {p.mode}")
        lines.append(f"| {p.tier}, N={p.n_genes} | {p.agent} | {c.delta_text} | {at} | {p.n} | {p.delta:+.3f} | {_ci(p.ci)} "
                     f"| {format_p(p.p)} |")
    return "\n".join(lines) if rows else ""


def main_records(records) -> tuple[list, str | None]:
    """The records the main tables show: with several conditions (ablation
    arms) in one file, those of the default one (forward, invented,
    suppress), so no table averages over arms; a note says so."""
    conds = {tuple(condition(r).values()) for r in records}
    default = tuple(DEFAULT_CONDITION.values())
    if len(conds) < 2 or default not in conds:
        return list(records), None
    main = [r for r in records if tuple(condition(r).values()) == default]
    return main, (f"the main tables show only the {len(main)} sessions of the default condition (forward, invented "
                  f"names, suppress); the other {len(records) - len(main)} are ablation arms, compared in \"Ablations\"")


def section(records, metric: str = "composite") -> str:
    """The "Ablations" section of ``luca-gym report``: markdown for each
    contrast whose two arms the records hold; empty when none."""
    parts = []
    back = backwards_table(records, metric)
    if back:
        parts += ["### Backwards organisms (paper appendix E.1, Table 13)",
                  "Every signed quantity inverted; sessions paired by seed. Δ = forward - backward; CI: percentile "
                  f"bootstrap 95% ({RESAMPLES} resamples); p: paired Wilcoxon signed-rank, two-sided; Δ - Δheur subtracts "
                  "the heuristic's Δ (a substrate effect, not prior reliance).", back]
    if paired(records, "vocabulary", metric) or paired(records, "stance", metric):
        parts += ["### Vocabulary and prompt stance (paper appendix E.2, Table 14)",
                  "inv = invented gene names (G001...), real = real human gene symbols; sup = the prompt suppresses "
                  "biological knowledge, per = it permits it. The same organism in every cell.",
                  vocabulary_stance_table(records, metric),
                  "Paired by seed: Δ = real - invented (vocabulary), permit - suppress (stance).",
                  contrast_table(records, metric=metric)]
    if not parts:
        return ""
    note = ("p is n/a where every paired difference is zero (the arms scored identically; the signed-rank test is "
            "undefined). Agents that never read names or prompts (the baselines) score identically under every "
            "vocabulary and stance.")
    return "\n\n".join(["## Ablations (paper appendix E)", f"Metric: {metric}, mean ± population std. {note}", *parts])
