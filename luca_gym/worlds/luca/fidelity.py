"""Fidelity to the paper: our world's figures against the paper's Tables 3, 6,
7, 8 and 11, each with a band and a verdict (``luca-gym fidelity``).

The functions are pure and importable, so a calibration loop can call them:

* :func:`organism_statistics` -- Table 3 (and Table 1's loop counts) for one
  tier: per-seed arrays and summaries, from :func:`luca_gym.worlds.luca.generator.generate`
  (it and the graph algorithms it stands on live in :mod:`luca_gym.worlds.luca.graph_stats`).
* :func:`baseline_scores` -- per-seed composite, prediction, diagnosis and
  rescue of batched baselines (:data:`luca_gym.worlds.luca.baselines.batched.POLICIES`)
  for one condition; the scores are the core's
  (:func:`luca_gym.worlds.luca.core.session_scores` over each final session state).
* :func:`compare` -- verdict rows: ours against the paper within a band.
* :func:`run` -- all of the above for a set of seeds; :func:`write_report`
  writes ``fidelity.md``, ``fidelity.json`` and PNG figures.

The paper's numbers are data (``PAPER_TABLE*`` in :mod:`luca_gym.worlds.luca.paper`;
baselines only, mean and population std where the paper gives them), as are the
bands below (``BAND_*``, ...); this module runs ours, judges them and writes the
report, its figures drawn with the shared helpers of :mod:`luca_gym.results.figures`.

How each figure is measured, and its band (the verdict is "in band", or "out"
with the signed distance past the nearer edge):

* Tables 6 and 7 (composite, healthy and disease, N=20): the mean over the
  seeds within ``BAND_COMPOSITE`` (0.10) of the paper's mean.
* Table 8 (disease sub-scores): prediction accuracy, diagnosis and rescue
  within ``BAND_SUBSCORE`` (0.15).
* Table 11 (medium healthy prediction accuracy against N): within
  ``BAND_SCALING`` (0.10) at each N. The paper used 10 seeds per cell; by
  default the first 10 of the seeds.
* Table 3, at N=20 on healthy organisms unless noted:
  - agent-targetable, readout and latent genes: the mean, exactly the paper's.
  - GRN edges (non-zero weights): the mean within the paper's range, and the
    fraction of seeds within the range at least ``EDGES_IN_RANGE_MIN`` (0.80:
    the paper's range is the min and max of its 20 seeds, so a fresh seed
    falls outside it with probability about 2/21 and ~0.90 of 20 fresh seeds
    are expected inside).
  - additive residual of an organism: the largest, over its two tasks and
    three phenotypes, of |joint - (baseline + effect_a + effect_b)|, where
    joint is the task's truth and the effects are the noise-free single
    interventions minus the baseline, all on the organism as the agent
    studies it. Band: the paper's mean +/- the paper's std. The disease
    organisms' residual is shown beside it, not judged.
  - additive task rate: the fraction of tasks whose largest residual is at
    most the accuracy threshold (0.10); exactly 0.
  - n_alt (disease organisms): the mean within the paper's mean +/- (2
    sqrt(mean / n) + 1 / n) for our n seeds -- two Poisson standard errors of
    an n-seed mean, plus one count in n for the discreteness (20 seeds: easy
    0.05 -> [0, 0.20], medium 0.50 -> [0.13, 0.87], hard 1.25 -> [0.70,
    1.80]). The max is shown, not judged.
  - feedback edges (paper Table 1, "0 / ~3 / ~5"): the size of a minimum
    feedback arc set, the fewest edges whose removal leaves the graph acyclic
    -- the injected edges that run against the topological order, which is
    what the paper counts. (Counting every edge on a directed cycle counts
    each injected edge's whole loop, several times the paper's figure.)
    Exact for strongly connected components of up to ``EXACT_FAS_MAX_GENES``
    genes (a dynamic programme over gene subsets: always at N=20), else the
    Eades-Lin-Smyth greedy upper bound; ``feedback_exact`` says which. Band:
    the paper's count +/- ``FEEDBACK_BAND`` (1), and exactly 0 on easy (the
    paper gives 0, not ~0).
  - feed-forward loops (paper Table 1, "~1 / ~3 / ~4"): the number of
    triangles a->b, b->c, a->c in the final graph. The paper's figure is the
    number of loops injected onto the random backbone (pipeline step 4), and
    the backbone forms such triangles by chance as well (about ten on an easy
    organism), so only the lower side is judged: at least the paper's count
    minus ``FFL_BAND`` (1).
"""

from __future__ import annotations

import json
import math
import os
import time
from functools import cache

import jax
import numpy as np

from luca_gym.results import figures as fig_helpers
from luca_gym.worlds.luca import core, functional, spec
from luca_gym.worlds.luca.graph_stats import (
    check_seeds,
    generate_organisms,
    organism_statistics,
    say_to,
    stderr_log,
)
from luca_gym.worlds.luca.paper import (
    BAND_COMPOSITE,
    BAND_SCALING,
    BAND_SUBSCORE,
    EDGES_IN_RANGE_MIN,
    FEEDBACK_BAND,
    FFL_BAND,
    PAPER_TABLE1_LOOPS,
    PAPER_TABLE3,
    PAPER_TABLE6,
    PAPER_TABLE7,
    PAPER_TABLE8,
    PAPER_TABLE11,
    SCALING_SEEDS,
    TABLES,
    TOLERANCE,
    n_alt_band,
)
from luca_gym.worlds.luca.spec import TIER_NAMES

DEFAULT_AGENTS = ("causal-sweep", "heuristic", "random")
DEFAULT_SCALING_N = (20, 40, 80, 160)
SUBSCORES = ("prediction", "diagnosis", "rescue")
SCORES = ("composite",) + SUBSCORES


# -- baseline scores ---------------------------------------------------------------------
def _policies() -> dict:
    from luca_gym.worlds.luca.baselines.batched import POLICIES

    return POLICIES


@cache
def _policy(make, params: core.EnvParams):
    """One policy function per (maker, settings): the policy is a static
    argument of the compiled sessions, so reusing it reuses the compile."""
    return make(params)


def check_agents(agents) -> list[str]:
    """Agent names, each a key of :data:`luca_gym.worlds.luca.baselines.batched.POLICIES` (looked up now)."""
    policies = _policies()
    agents = list(agents)
    if not agents:
        raise ValueError(f"agents: empty; allowed {', '.join(policies)}")
    for a in agents:
        if a not in policies:
            raise ValueError(f"agents: {a!r} unknown; allowed {', '.join(policies)} (batched baselines)")
    return agents


def baseline_scores(seeds, tier: str, mode: str, n_genes: int = 20, agents=DEFAULT_AGENTS, *, key: int = 0,
                    log=stderr_log, cache: dict | None = None) -> dict:
    """Per-seed scores of batched baselines on one condition.

    Each agent's policy runs one session per organism for ``params.max_steps``
    calls (``core.make_params(tier, n_genes, mode)``) from
    ``jax.random.PRNGKey(key)``, as :func:`luca_gym.worlds.luca.functional.rollout` does.
    Returns ``tier``, ``mode``, ``n_genes``, ``seeds`` and ``agents``
    {name: {composite, prediction, diagnosis, rescue: list (one per seed)}}.
    Raises RuntimeError if a session did not end.
    """
    seeds = check_seeds(seeds)
    tier, n_genes, mode, _ = spec.check_organism(tier, n_genes, mode)
    agents = check_agents(agents)
    params = core.make_params(tier, n_genes, mode)
    organisms = generate_organisms(cache, seeds, tier, n_genes, mode, log)
    noise_keys = core.noise_keys(np.asarray(seeds, np.int64), tier, n_genes)  # as functional.organism_batch
    out = {"tier": tier, "mode": mode, "n_genes": n_genes, "seeds": seeds, "agents": {}}
    for name in agents:
        started = time.perf_counter()
        scores = functional.rollout_scores(_policy(_policies()[name], params), jax.random.PRNGKey(key), organisms,
                                           noise_keys, params, params.max_steps)
        if not np.asarray(scores["ended"]).all():
            raise RuntimeError(f"{name} {tier} {mode} N={n_genes}: a session did not end within {params.max_steps} calls")
        out["agents"][name] = {s: np.asarray(scores[s], np.float64).tolist() for s in SCORES}
        composite = np.mean(out["agents"][name]["composite"])
        say_to(log, f"  {name} {tier} {mode} N={n_genes}: composite {composite:.3f} ({time.perf_counter() - started:.1f} s)")
    return out


# -- verdicts ------------------------------------------------------------------------------
def _verdict(figure: str, ours, paper, low, high) -> dict:
    """One row: ``in_band`` True / False, or None where nothing is judged (no
    band, or no figure of ours); ``off_by`` the signed distance past the
    nearer edge (+ above, - below, 0 inside)."""
    row = {"figure": figure, "ours": None if ours is None else float(ours), "paper": paper, "low": low, "high": high,
           "in_band": None, "off_by": None}
    if ours is None or not math.isfinite(float(ours)) or (low is None and high is None):
        return row
    above = high is not None and ours > high + TOLERANCE
    below = low is not None and ours < low - TOLERANCE
    row["in_band"] = not (above or below)
    row["off_by"] = float(ours - high) if above else float(ours - low) if below else 0.0
    return row


def compare(ours, paper, band) -> list[dict]:
    """Verdict rows, one per figure of ``paper``, in its order.

    Args:
        ours: {figure: number or None} (None: not measured).
        paper: {figure: number or None} (None: the paper has no such figure;
            the row is shown, not judged).
        band: a half-width h (the band is paper +/- h), an absolute interval
            (low, high) with None for an open side, or {figure: either}.
    Returns dicts with figure, ours, paper, low, high, in_band (bool, or None
    where not judged) and off_by (signed distance outside the band).
    """
    rows = []
    for figure, p in paper.items():
        b = band[figure] if isinstance(band, dict) else band
        if p is None and not isinstance(b, tuple):
            low = high = None
        elif isinstance(b, tuple):
            low, high = b
        else:
            low, high = p - b, p + b
        rows.append(_verdict(figure, ours.get(figure), p, low, high))
    return rows


def table3_rows(stats: dict) -> list[dict]:
    """Verdict rows of Table 3 (and Table 1's loop counts) for one tier's
    :func:`organism_statistics`."""
    tier, s, per = stats["tier"], stats["summary"], stats["per_seed"]
    p, loops, n = PAPER_TABLE3[tier], PAPER_TABLE1_LOOPS[tier], len(stats["seeds"])
    edges = np.asarray(per["edges"])
    in_range = float(np.mean((edges >= p["edges_low"]) & (edges <= p["edges_high"])))
    residual = (p["additive_residual_mean"], p["additive_residual_std"])
    figures = [
        # (figure, ours (a summary or a number), paper, paper std, band or None: shown, not judged)
        ("agent-targetable genes", s["targetable"], p["targetable"], None, (p["targetable"],) * 2),
        ("readout genes", s["readout"], p["readout"], None, (p["readout"],) * 2),
        ("latent genes", s["latent"], p["latent"], None, (p["latent"],) * 2),
        ("GRN edges (mean within the range)", s["edges"], p["edges_mean"], None, (p["edges_low"], p["edges_high"])),
        ("GRN edges (fraction of seeds in range)", in_range, 1.0, None, (EDGES_IN_RANGE_MIN, 1.0)),
        ("additive task rate", stats["additive_task_rate"], p["additive_task_rate"], None, (0.0, 0.0)),
        ("additive residual (mean)", s["additive_residual"], residual[0], residual[1],
         (residual[0] - residual[1], residual[0] + residual[1])),
        ("additive residual, disease organisms (mean)", s["additive_residual_disease"], residual[0], residual[1], None),
        ("n_alt (mean, disease)", s["n_alt"], p["n_alt_mean"], None, n_alt_band(p["n_alt_mean"], n)),
        ("n_alt (max, disease)", s["n_alt"]["max"], p["n_alt_max"], None, None),
        ("feedback edges (min feedback arc set)", s["feedback"], loops["feedback"], None,
         (0, 0) if loops["feedback"] == 0 else (loops["feedback"] - FEEDBACK_BAND, loops["feedback"] + FEEDBACK_BAND)),
        ("edges on directed cycles", s["cyclic_edges"], None, None, None),
        ("feed-forward loops (triangles)", s["ffl"], loops["ffl"], None, (loops["ffl"] - FFL_BAND, None)),
    ]
    rows = []
    for figure, ours, paper, paper_std, band in figures:
        value = ours["mean"] if isinstance(ours, dict) else ours
        row = compare({figure: value}, {figure: paper}, {figure: band if band is not None else (None, None)})[0]
        row.update(table="3", condition=f"{tier} N={stats['n_genes']}", agent=None,
                   ours_std=ours["std"] if isinstance(ours, dict) else None, paper_std=paper_std)
        rows.append(row)
    return rows


def _score_rows(table: str, result: dict, figures, paper_of, band: float, condition: str) -> list[dict]:
    """Rows for each agent of a :func:`baseline_scores` result: ``paper_of(agent,
    figure)`` gives (mean, std or None) or None."""
    rows = []
    for agent, scores in result["agents"].items():
        for figure in figures:
            v = np.asarray(scores[figure])
            paper = paper_of(agent, figure)
            row = compare({figure: float(v.mean())}, {figure: None if paper is None else paper[0]}, band)[0]
            row.update(table=table, condition=condition, agent=agent, ours_std=float(v.std()),
                       paper_std=None if paper is None else paper[1])
            rows.append(row)
    return rows


def composite_rows(result: dict) -> list[dict]:
    """Table 6 (healthy) or 7 (disease) rows of one :func:`baseline_scores` result."""
    paper = PAPER_TABLE6 if result["mode"] == "healthy" else PAPER_TABLE7
    table = "6" if result["mode"] == "healthy" else "7"
    return _score_rows(table, result, ("composite",), lambda a, f: paper.get(a, {}).get(result["tier"]), BAND_COMPOSITE,
                       f"{result['tier']} {result['mode']}")


def subscore_rows(result: dict) -> list[dict]:
    """Table 8 rows (prediction, diagnosis, rescue) of one disease :func:`baseline_scores` result."""
    paper = PAPER_TABLE8[result["tier"]]

    def paper_of(agent, figure):
        return None if agent not in paper else (paper[agent][figure], None)

    return _score_rows("8", result, SUBSCORES, paper_of, BAND_SUBSCORE, f"{result['tier']} disease")


def scaling_rows(result: dict) -> list[dict]:
    """Table 11 rows (prediction accuracy) of one medium healthy :func:`baseline_scores` result."""
    n = result["n_genes"]
    return _score_rows("11", result, ("prediction",), lambda a, f: PAPER_TABLE11.get(a, {}).get(n), BAND_SCALING,
                       f"medium healthy N={n}")


# -- the whole comparison ------------------------------------------------------------------
def check_arguments(seeds=range(20), tiers=TIER_NAMES, agents=DEFAULT_AGENTS, n_genes=DEFAULT_SCALING_N,
                    scaling_seeds=None, tables=TABLES) -> tuple:
    """:func:`run`'s arguments checked and normalised, nothing computed or
    written: ``(seeds, tiers, agents, n_genes, scaling_seeds, tables)``, or a
    ValueError naming the argument, its value and what is allowed. A caller
    checks with it before creating the output folder, so a refused call
    (``--tables 5``) leaves no empty folder behind."""
    seeds = check_seeds(seeds)
    tiers = [spec.check_tier(t) for t in dict.fromkeys(tiers)]
    if not tiers:
        raise ValueError(f"tiers: empty; allowed {', '.join(TIER_NAMES)}")
    agents = check_agents(dict.fromkeys(agents))
    tables = list(dict.fromkeys(str(t) for t in tables))
    for t in tables:
        if t not in TABLES:
            raise ValueError(f"tables: {t!r} unknown; allowed {', '.join(TABLES)}")
    n_genes = [spec.check_n_genes(n) for n in dict.fromkeys(n_genes)]
    if "11" in tables and not n_genes:
        raise ValueError("n_genes: empty; Table 11 needs at least one size, e.g. 20,40,80")
    scaling_seeds = seeds[:SCALING_SEEDS] if scaling_seeds is None else check_seeds(scaling_seeds, "scaling_seeds")
    return seeds, tiers, agents, n_genes, scaling_seeds, tables


def run(seeds=range(20), tiers=TIER_NAMES, agents=DEFAULT_AGENTS, n_genes=DEFAULT_SCALING_N, scaling_seeds=None,
        tables=TABLES, *, key: int = 0, log=stderr_log) -> dict:
    """Measure the figures of ``tables`` and judge them against the paper.

    Args:
        seeds: organisms for Tables 3, 6, 7 and 8 (N=20; the paper used 20).
        tiers: the tiers of Tables 3, 6, 7 and 8.
        agents: batched baselines (names of
            :data:`luca_gym.worlds.luca.baselines.batched.POLICIES`, looked up now).
        n_genes: sizes of Table 11 (medium healthy).
        scaling_seeds: Table 11's organisms; default the first 10 of ``seeds``.
        tables: which of :data:`TABLES` to compute.
        key: the policies' PRNG key (the random baseline draws from it).
        log: progress lines (``None``: quiet).

    Returns a JSON-ready dict: ``settings``, ``statistics`` {tier: Table 3
    statistics}, ``scores`` {condition: :func:`baseline_scores` result},
    ``rows`` (verdict rows, each with its table, condition and agent),
    ``summary`` {judged, in_band} and ``wall_s``. Arguments are checked before
    any work (ValueError naming the argument).
    """
    started = time.perf_counter()
    seeds, tiers, agents, n_genes, scaling_seeds, tables = check_arguments(seeds, tiers, agents, n_genes, scaling_seeds,
                                                                           tables)
    clock = time.perf_counter()

    def say(message):
        say_to(log, f"[{time.perf_counter() - clock:6.1f}s] {message}")

    cache: dict = {}
    statistics, scores, rows = {}, {}, []
    if "3" in tables:
        for tier in tiers:
            statistics[tier] = organism_statistics(seeds, tier, 20, log=say, cache=cache)
            rows += table3_rows(statistics[tier])
    modes = [m for m, needed in (("healthy", "6" in tables), ("disease", "7" in tables or "8" in tables)) if needed]
    for mode in modes:
        for tier in tiers:
            say(f"scoring {', '.join(agents)} on {tier} {mode} N=20 ({len(seeds)} seeds)")
            result = baseline_scores(seeds, tier, mode, 20, agents, key=key, log=say, cache=cache)
            scores[f"{tier} {mode} N=20"] = result
            if mode == "healthy":
                rows += composite_rows(result)
            else:
                rows += composite_rows(result) if "7" in tables else []
                rows += subscore_rows(result) if "8" in tables else []
    if "11" in tables:
        for n in n_genes:
            say(f"scoring {', '.join(agents)} on medium healthy N={n} ({len(scaling_seeds)} seeds, Table 11)")
            result = baseline_scores(scaling_seeds, "medium", "healthy", n, agents, key=key, log=say, cache=cache)
            scores[f"medium healthy N={n} (Table 11)"] = result
            rows += scaling_rows(result)
            cache.clear()  # large organisms are not needed again
    judged = [r for r in rows if r["in_band"] is not None]
    return {
        "settings": {"seeds": seeds, "tiers": tiers, "agents": agents, "n_genes": n_genes, "scaling_seeds": scaling_seeds,
                     "tables": tables, "key": key, "backend": jax.default_backend()},
        "statistics": statistics,
        "scores": scores,
        "rows": rows,
        "summary": {"judged": len(judged), "in_band": sum(r["in_band"] for r in judged)},
        "wall_s": time.perf_counter() - started,
    }


# -- the report ------------------------------------------------------------------------------
TABLE_TITLES = {
    "3": "Table 3 (and Table 1's loop counts): organisms at N=20",
    "6": "Table 6: healthy composite (N=20)",
    "7": "Table 7: disease composite (N=20)",
    "8": "Table 8: disease sub-scores (N=20)",
    "11": "Table 11: scaling, medium healthy prediction accuracy",
}


def _number(x) -> str:
    if x is None:
        return "–"
    if isinstance(x, (int, np.integer)):  # the paper's counts
        return str(int(x))
    x = float(x)
    if abs(x) >= 10:
        return str(int(x)) if x == int(x) else f"{x:.2f}"
    return f"{x:.3f}"


def _band_text(row) -> str:
    low, high = row["low"], row["high"]
    if low is None and high is None:
        return "–"
    if high is None:
        return f"≥ {_number(low)}"
    if low is None:
        return f"≤ {_number(high)}"
    if low == high:
        return f"= {_number(low)}"
    return f"[{_number(low)}, {_number(high)}]"


def verdict_text(row) -> str:
    """"in", "OUT +0.123" (above the band) / "OUT -0.050" (below), or "–" (not judged)."""
    if row["in_band"] is None:
        return "–"
    return "in" if row["in_band"] else f"OUT {row['off_by']:+.3f}" if abs(row["off_by"]) >= 0.001 else f"OUT {row['off_by']:+.1e}"


def format_rows(rows) -> str:
    """A markdown table of verdict rows."""
    lines = ["| condition | agent | figure | ours | paper | band | verdict |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = _number(r["ours"]) + (f" ± {_number(r['ours_std'])}" if r.get("ours_std") is not None else "")
        paper = _number(r["paper"]) + (f" ± {_number(r['paper_std'])}" if r.get("paper_std") is not None else "")
        lines.append(f"| {r['condition']} | {r['agent'] or ''} | {r['figure']} | {ours} | {paper} | {_band_text(r)} | {verdict_text(r)} |")
    return "\n".join(lines)


def summary_line(report: dict) -> str:
    s = report["summary"]
    return f"{s['in_band']} of {s['judged']} figures in band"


def format_tables(report: dict, figures: dict | None = None) -> str:
    """Markdown: one verdict table per table of the report, with a figure link
    per table where ``figures`` {table: file name} has one."""
    parts = []
    for table in report["settings"]["tables"]:
        rows = [r for r in report["rows"] if r["table"] == table]
        if rows:
            parts += [f"## {TABLE_TITLES[table]}", format_rows(rows)]
            if figures and table in figures:
                parts.append(f"![table {table}]({figures[table]})")
    return "\n\n".join(parts) + "\n"


def format_report(report: dict, figures: dict | None = None) -> str:
    """The whole report as markdown: settings, the summary line and :func:`format_tables`."""
    st = report["settings"]
    seeds, scaling = st["seeds"], st["scaling_seeds"]
    head = [
        "# Fidelity to the paper",
        (f"Seeds {_seed_text(seeds)} ({len(seeds)}), tiers {', '.join(st['tiers'])}, agents {', '.join(st['agents'])}; "
         f"Table 11 at N={', '.join(map(str, st['n_genes']))} on seeds {_seed_text(scaling)}. "
         "Ours: mean ± population std over seeds. Verdict: in band, or OUT with the signed distance past the band. "
         f"Bands and definitions: the docstring of `luca_gym.worlds.luca.fidelity`. {report['wall_s']:.0f} s on {st['backend']}."),
        f"**{summary_line(report)}.**",
    ]
    return "\n\n".join(head) + "\n\n" + format_tables(report, figures)


def _seed_text(seeds) -> str:
    seeds = list(seeds)
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ",".join(map(str, seeds))


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    return x


def write_report(report: dict, out: str) -> str:
    """Write ``fidelity.md``, ``fidelity.json`` and the figures (PNG) into
    folder ``out`` (created if missing). Returns the markdown text."""
    os.makedirs(out, exist_ok=True)
    figures = {}
    for table, (name, draw) in FIGURES.items():
        rows = [r for r in report["rows"] if r["table"] == table]
        if rows:
            draw(report, rows, os.path.join(out, name))
            figures[table] = name
    text = format_report(report, figures)
    with open(os.path.join(out, "fidelity.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(out, "fidelity.json"), "w", encoding="utf-8") as f:
        json.dump(_jsonable(report), f, indent=1)
    return text


# -- figures (matplotlib through luca_gym.results.figures) ---------------------------------
def _paper_marks(ax, x, rows) -> None:
    """The paper's figure (black diamond) and its band (error bar) at positions ``x``."""
    for xi, r in zip(x, rows):
        if r["paper"] is None:
            continue
        low = r["paper"] if r["low"] is None else r["low"]
        high = r["paper"] if r["high"] is None else r["high"]
        ax.errorbar([xi], [r["paper"]], yerr=[[r["paper"] - low], [high - r["paper"]]], fmt="D", color="black",
                    markersize=4, capsize=3, lw=1)


def figure_organisms(report, rows, path: str) -> None:
    """Table 3: per-seed values of ours (dots) by tier, the paper's band (bar)."""
    plt = fig_helpers.pyplot()
    panels = (("edges", "GRN edges (mean within the range)"), ("additive_residual", "additive residual (mean)"),
              ("n_alt", "n_alt (mean, disease)"), ("feedback", "feedback edges (min feedback arc set)"),
              ("ffl", "feed-forward loops (triangles)"))
    tiers = list(report["statistics"])
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, (key, figure) in zip(axes[0], panels):
        for i, tier in enumerate(tiers):
            values = np.asarray(report["statistics"][tier]["per_seed"][key], np.float64)
            ax.scatter(i + rng.uniform(-0.15, 0.15, values.size), values, s=8, alpha=0.6, color="tab:blue")
            ax.plot([i - 0.25, i + 0.25], [values.mean()] * 2, color="tab:blue", lw=2)
        band_rows = [next(r for r in rows if r["figure"] == figure and r["condition"].startswith(t + " ")) for t in tiers]
        _paper_marks(ax, np.arange(len(tiers)) + 0.35, band_rows)
        ax.set_xticks(range(len(tiers)))
        ax.set_xticklabels(tiers)
        ax.set_title(figure.split(" (")[0], fontsize=9)
    axes[0][0].set_ylabel("ours: seeds (dots), mean (bar)\npaper ◆ ± band", fontsize=8)
    fig.tight_layout()
    fig_helpers.save(plt, fig, path)


def _figure_scores(rows, path: str, title: str, groups) -> None:
    """Per group (a condition): bars of our means, one colour per agent and
    one cluster per figure, hatched where out of band; the paper's figure and
    band (black) on each bar."""
    plt = fig_helpers.pyplot()
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.4 * len(groups), 3.6), squeeze=False)
    width = 0.8 / len(agents)
    for ax, (name, group) in zip(axes[0], groups):
        figures = list(dict.fromkeys(r["figure"] for r in group))
        for i, agent in enumerate(agents):
            mine = [r for r in group if r["agent"] == agent]
            x = np.array([figures.index(r["figure"]) for r in mine]) + (i - (len(agents) - 1) / 2) * width
            ax.bar(x, [r["ours"] for r in mine], width, color=fig_helpers.agent_color(agent), label=agent if ax is axes[0][0] else None,
                   edgecolor="white")
            for xi, r in zip(x, mine):
                if r["in_band"] is False:
                    ax.bar([xi], [r["ours"]], width, fill=False, hatch="///", edgecolor="tab:red", lw=0)
            _paper_marks(ax, x, mine)
        ax.set_xticks(range(len(figures)))
        ax.set_xticklabels(figures, fontsize=8)
        ax.set_ylim(0, 1.3)  # headroom: the legend sits above the bars
        ax.set_title(name, fontsize=9)
    axes[0][0].set_ylabel(f"{title}: ours (bars, hatched: out); paper ◆ ± band", fontsize=8)
    axes[0][0].legend(fontsize=7, ncol=len(agents), loc="upper center")
    fig.tight_layout()
    fig_helpers.save(plt, fig, path)


def figure_composite(report, rows, path: str) -> None:
    conditions = list(dict.fromkeys(r["condition"] for r in rows))
    _figure_scores(rows, path, "composite", [(c, [r for r in rows if r["condition"] == c]) for c in conditions])


def figure_subscores(report, rows, path: str) -> None:
    conditions = list(dict.fromkeys(r["condition"] for r in rows))
    _figure_scores(rows, path, "sub-score", [(c, [r for r in rows if r["condition"] == c]) for c in conditions])


def figure_scaling(report, rows, path: str) -> None:
    """Table 11: ours against N (solid), the paper (dashed) with its band shaded."""
    plt = fig_helpers.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for agent in dict.fromkeys(r["agent"] for r in rows):
        mine = [r for r in rows if r["agent"] == agent]
        ns = [int(r["condition"].rsplit("N=", 1)[1]) for r in mine]
        color = fig_helpers.agent_color(agent)  # an agent's colour in every figure of the project
        ax.plot(ns, [r["ours"] for r in mine], marker="o", color=color, label=f"{agent} (ours)")
        paper = [(n, r) for n, r in zip(ns, mine) if r["paper"] is not None]
        if paper:
            pn = [n for n, _ in paper]
            ax.plot(pn, [r["paper"] for _, r in paper], ls="--", marker="D", color=color, alpha=0.7, label=f"{agent} (paper)")
            ax.fill_between(pn, [r["low"] for _, r in paper], [r["high"] for _, r in paper], color=color, alpha=0.12)
    ns = sorted({int(r["condition"].rsplit("N=", 1)[1]) for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("genes N")
    ax.set_ylabel("prediction accuracy")
    ax.set_ylim(0, 1.15)
    ax.set_title("Table 11: medium healthy (band shaded)")
    ax.legend(fontsize=7, ncol=2, loc="lower left")
    fig.tight_layout()
    fig_helpers.save(plt, fig, path)


# table -> (file name, draw(report, that table's rows, path)); Tables 6 and 7 share one figure each.
FIGURES = {
    "3": ("organisms.png", figure_organisms),
    "6": ("composite_healthy.png", figure_composite),
    "7": ("composite_disease.png", figure_composite),
    "8": ("disease_subscores.png", figure_subscores),
    "11": ("scaling.png", figure_scaling),
}
