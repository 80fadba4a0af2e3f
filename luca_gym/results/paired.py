"""Ablations of any world, paired by seed, from session records.

A world declares its ablations as :class:`~luca_gym.protocol.Contrast`\\ s
(``World.contrasts``): two arms of one key setting, everything else fixed.
``luca-gym eval --ablation NAME`` runs both arms; this module pairs them.

For each agent and each value of the world's other key settings, the sessions
of the two arms are paired by seed (the seeds both have: ``n``). Per pair the
difference of the metric (the world's headline by default); reported: each
arm's mean ± population std over the paired seeds, Δ (the mean difference,
minuend arm minus the other), its percentile-bootstrap 95% interval
(:func:`bootstrap_ci`: 10,000 resamples of the pairs, seeded, so the same
records give the same interval) and the two-sided paired Wilcoxon
signed-rank p (:func:`wilcoxon_p`, scipy; zero differences dropped). When
every difference is zero the test is undefined: p is None, shown "n/a".
:func:`difference` is that comparison for any two paired arrays (a world's
report compares agents on the same worlds with it).

:func:`section` writes the "Ablations" markdown of ``luca-gym report`` for a
world whose report hook does not write its own; :func:`main_records` keeps
the default arm of every contrast for the main tables.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from luca_gym import worlds
from luca_gym.protocol import LEGACY_WORLD, Contrast, World
from luca_gym.results.summaries import markdown_table

RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
LEVEL = 0.95


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
class Difference:
    """Two arrays of one metric paired element by element (the same seeds),
    compared: each one's (mean, population std), Δ (the mean of minuend minus
    subtrahend), its percentile-bootstrap interval and the paired Wilcoxon p."""

    minuend: tuple
    subtrahend: tuple
    delta: float
    ci: tuple
    p: float | None


def difference(minuend, subtrahend, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Difference:
    """The paired comparison of ``minuend`` and ``subtrahend`` (equal-length
    1-D sequences, pair i in place i): what every paired table reports, an
    ablation's arms (:func:`paired`) or two agents on the same worlds (a
    world's report). ValueError names arrays that do not pair."""
    a, b = np.asarray(minuend, float), np.asarray(subtrahend, float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"minuend, subtrahend: shapes {a.shape} and {b.shape}; two 1-D arrays of the same positive length")
    d = a - b
    return Difference((float(a.mean()), float(a.std())), (float(b.mean()), float(b.std())), float(d.mean()),
                      bootstrap_ci(d, resamples, seed), wilcoxon_p(d))


def format_p(p: float | None) -> str:
    """p as papers print it (0.50, 0.017); ``n/a`` when undefined."""
    if p is None:
        return "n/a"
    return f"{p:.2f}" if p >= 0.095 else f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def format_ci(ci) -> str:
    """A confidence interval as text with signs, e.g. ``[-0.167, +0.058]``."""
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


@dataclass(frozen=True)
class Paired:
    """One contrast of one agent at one value of the other key settings, over
    its paired seeds. A setting reads as an attribute (``p.tier``)."""

    contrast: str
    agent: str
    setting: tuple  # ((field, value), ...): the world's other key settings, in key order
    seeds: tuple
    arms: dict  # arm value -> (mean, population std) over the paired seeds
    delta: float
    ci: tuple
    p: float | None

    @property
    def n(self) -> int:
        return len(self.seeds)

    def __getattr__(self, name: str):
        for field, value in object.__getattribute__(self, "setting"):
            if field == name:
                return value
        raise AttributeError(name)


def _world(world) -> World:
    return world if isinstance(world, World) else worlds.get(world)


def key_value(world: World, record: dict, field: str):
    """A record's key setting; for a line without it, the world's key default
    (else a contrast's default arm): the condition of a line written before
    the field existed."""
    if field in record:
        return record[field]
    defaults = {**{c.field: c.default for c in world.contrasts}, **dict(world.key_defaults)}
    return defaults.get(field)


def paired(records, world, contrast: str, metric: str | None = None, resamples: int = RESAMPLES,
           seed: int = BOOTSTRAP_SEED) -> list[Paired]:
    """Every paired comparison of the world's ``contrast`` (by name) that
    ``records`` of that world hold both arms of, with at least one seed in
    common; in the order the records first show them. ``metric``: a score
    field (default the world's headline)."""
    world = _world(world)
    c = world.contrast(contrast)
    metric = world.headline if metric is None else metric
    others = tuple(f for f in world.session_keys if f not in ("seed", c.field))
    cells: dict = {}
    for r in records:
        if r.get("world", LEGACY_WORLD) != world.name:
            continue
        arm = key_value(world, r, c.field)
        if arm not in c.arms:
            continue
        if metric not in r["scores"]:
            raise ValueError(f"metric: {metric!r} is not a score of world {world.name!r} (a line has {', '.join(r['scores'])})")
        group = (r["agent"], tuple((f, key_value(world, r, f)) for f in others))
        cells.setdefault(group, {}).setdefault(arm, {})[r["seed"]] = float(r["scores"][metric])
    out = []
    for (agent, setting), arms in cells.items():
        if len(arms) < 2:
            continue
        seeds = tuple(sorted(set(arms[c.arms[0]]) & set(arms[c.arms[1]])))
        if not seeds:
            continue
        d = difference([arms[c.minuend][s] for s in seeds], [arms[c.subtrahend][s] for s in seeds], resamples, seed)
        stats = {c.minuend: d.minuend, c.subtrahend: d.subtrahend}
        out.append(Paired(c.name, agent, setting, seeds, {arm: stats[arm] for arm in c.arms}, d.delta, d.ci, d.p))
    return out


def _pm(stats) -> str:
    return f"{stats[0]:.3f} ± {stats[1]:.3f}"


def contrast_table(rows: list[Paired], c: Contrast) -> str:
    """Markdown: one row per paired comparison of contrast ``c``: Model | the
    other settings | n | each arm | Δ | 95% CI | p."""
    if not rows:
        return ""
    fields = [f for f, _ in rows[0].setting]
    head = ["Model", *fields, "n", *c.labels, f"Δ ({c.delta_text})", "95% CI", "p"]
    return markdown_table(head, [[p.agent, *(v for _, v in p.setting), p.n, *(_pm(p.arms[a]) for a in c.arms),
                                  f"{p.delta:+.3f}", format_ci(p.ci), format_p(p.p)] for p in rows])


def main_records(records, world) -> tuple[list, str | None]:
    """The records the main tables show: where a file holds ablation arms,
    those of the default arm of every contrast, so no table averages over
    arms; a note says so (None when nothing was left out)."""
    world = _world(world)
    if not world.contrasts:
        return list(records), None
    default = lambda r: all(key_value(world, r, c.field) == c.default for c in world.contrasts)  # noqa: E731
    main = [r for r in records if default(r)]
    if not main or len(main) == len(records):
        return list(records), None
    arms = ", ".join(f"{c.name} {c.label(c.default)}" for c in world.contrasts)
    return main, (f"the main tables show only the {len(main)} sessions of the default condition ({arms}); the other "
                  f"{len(records) - len(main)} are ablation arms, compared in \"Ablations\"")


def section(records, world, metric: str | None = None) -> str:
    """The "Ablations" markdown for ``world``: a table per contrast whose two
    arms the records hold; empty when none."""
    world = _world(world)
    metric = world.headline if metric is None else metric
    parts = []
    for c in world.contrasts:
        rows = paired(records, world, c.name, metric)
        if rows:
            parts += [f"#### {c.title or c.name}", contrast_table(rows, c)]
    if not parts:
        return ""
    head = (f"Metric: {metric}; sessions paired by seed, mean ± population std over the paired seeds. CI: percentile "
            f"bootstrap 95% ({RESAMPLES} resamples); p: paired Wilcoxon signed-rank, two-sided (n/a where every "
            "difference is zero).")
    return "\n\n".join(["### Ablations", head, *parts])
