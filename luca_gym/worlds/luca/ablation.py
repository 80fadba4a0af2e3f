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

import numpy as np

from luca_gym.results import paired as generic
from luca_gym.results.paired import (  # noqa: F401 -- the statistics are the generic ones, re-exported
    BOOTSTRAP_SEED,
    LEVEL,
    RESAMPLES,
    Paired,
    bootstrap_ci,
    format_p,
    wilcoxon_p,
)
from luca_gym.protocol import Contrast  # noqa: F401
from luca_gym.results.summaries import agents_in, markdown_table
from luca_gym.worlds.luca import WORLD
from luca_gym.worlds.luca.evaluation import SCORE_FIELDS
from luca_gym.worlds.luca.spec import MODES, TIER_NAMES

CONTRASTS = {c.name: c for c in WORLD.contrasts}  # backwards, vocabulary, stance
CONDITION_FIELDS = tuple(c.field for c in WORLD.contrasts)
DEFAULT_CONDITION = {c.field: c.default for c in WORLD.contrasts}
NULL_CONTROL = "heuristic"  # the agent whose Δ the backwards table subtracts (the paper's)


def condition(record: dict) -> dict:
    """A record's ``backwards``, ``vocabulary`` and ``stance`` (defaults for a record without them)."""
    return {f: record.get(f, DEFAULT_CONDITION[f]) for f in CONDITION_FIELDS}


def fixed(p: Paired) -> tuple:
    """((field, value), ...): the other two condition fields of a comparison."""
    own = CONTRASTS[p.contrast].field
    return tuple((f, getattr(p, f)) for f in CONDITION_FIELDS if f != own)


def paired(records, contrast: str, metric: str = "composite", resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> list[Paired]:
    """Every paired comparison of ``contrast`` (a key of :data:`CONTRASTS`)
    that ``records`` hold both arms of, with at least one seed in common
    (:func:`luca_gym.results.paired.paired`), in the paper's order: N,
    mode, tier, default arms first, agents in the baselines' order."""
    if contrast not in CONTRASTS:
        raise ValueError(f"contrast: {contrast!r} unknown; allowed {', '.join(CONTRASTS)}")
    if metric not in SCORE_FIELDS:
        raise ValueError(f"metric: {metric!r} unknown; allowed {', '.join(SCORE_FIELDS)}")
    out = generic.paired(records, WORLD, contrast, metric, resamples, seed)
    order = agents_in([{"agent": p.agent} for p in out])
    arm_order = lambda p: tuple(CONTRASTS[f].arms.index(v) for f, v in fixed(p))  # noqa: E731 -- default arms first
    out.sort(key=lambda p: (p.n_genes, MODES.index(p.mode), TIER_NAMES.index(p.tier), arm_order(p), order.index(p.agent)))
    return out


# -- tables --------------------------------------------------------------------
def _pm(stats) -> str:
    return f"{stats[0]:.3f} ± {stats[1]:.3f}"


_ci = generic.format_ci


def _fixed_text(fixed) -> str:
    names = {"backwards": {False: "forward", True: "backwards"}}
    return ", ".join(str(names.get(f, {}).get(v, v)) for f, v in fixed)


def backwards_table(records, metric: str = "composite") -> str:
    """Markdown in the paper's Table 13 format, one table per condition:
    Model | n | Forward | Backward | Δ | 95% CI | p | Δ - Δheur. Empty when
    ``records`` hold no paired forward and backwards sessions."""
    rows = paired(records, "backwards", metric)
    blocks = []
    for cond in dict.fromkeys((p.tier, p.mode, p.n_genes, fixed(p)) for p in rows):
        group = [p for p in rows if (p.tier, p.mode, p.n_genes, fixed(p)) == cond]
        heur = next((p for p in group if p.agent == NULL_CONTROL), None)
        tier, mode, n, arms = cond
        body = [[p.agent, p.n, _pm(p.arms[False]), _pm(p.arms[True]), f"{p.delta:+.3f}", _ci(p.ci), format_p(p.p),
                 "—" if heur is None or p is heur else f"{p.delta - heur.delta:+.3f}"] for p in group]
        blocks.append("\n".join([f"**{tier} {mode}, N={n}, {_fixed_text(arms)}** ({metric}; Δ = forward - backward)", "",
                                 markdown_table(["Model", "n", "Forward", "Backward", "Δ", "95% CI", "p", "Δ - Δheur"], body)]))
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
        head = ["Tier", "Model", *(f"{CELL_NAMES[v]} / {CELL_NAMES[s]}" for v, s in CELLS_2X2), "n"]
        body = []
        for tier, n, agent in sorted(table, key=lambda k: (TIER_NAMES.index(k[0]), k[1], order.index(k[2]))):
            got = table[(tier, n, agent)]
            values = [got.get(c) for c in CELLS_2X2]
            counts = sorted({len(v) for v in values if v})
            shown = ["-" if v is None else f"{np.mean(v):.3f} ± {np.std(v):.3f}" for v in values]
            body.append([f"{tier}, N={n}", agent, *shown, "/".join(map(str, counts))])
        blocks.append("\n".join([f"**{mode}{', backwards' if backwards else ''}** ({metric}, mean ± std)", "",
                                 markdown_table(head, body)]))
    return "\n\n".join(blocks)


def contrast_table(records, contrasts=("vocabulary", "stance"), metric: str = "composite") -> str:
    """Markdown: the paired tests of ``contrasts``, one row per agent and
    condition: Tier | Model | Contrast (Δ = ...) | At | n | Δ | 95% CI | p."""
    rows = [p for name in contrasts for p in paired(records, name, metric)]
    body = [[f"{p.tier}, N={p.n_genes}", p.agent, CONTRASTS[p.contrast].delta_text,
             _fixed_text(fixed(p)) + ("" if p.mode == "healthy" else f", {p.mode}"), p.n, f"{p.delta:+.3f}", _ci(p.ci),
             format_p(p.p)] for p in rows]
    return markdown_table(["Tier", "Model", "Contrast", "At", "n", "Δ", "95% CI", "p"], body) if rows else ""


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
