"""LUCA's viewer: an organism's true network and one recorded session as a
timeline (the report and ``luca-gym info --graph`` / ``luca-gym show`` draw
with these). Names only: nothing here reads what an agent cannot, except the
true network and, for an unsealed record of this build, the organism
regenerated from its seed to show the truth beside the agent's answers.
"""

from __future__ import annotations

import math
import re

import numpy as np

from luca_gym import __version__
from luca_gym.results.figures import pyplot, save
from luca_gym.worlds.luca import WORLD, calls
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.spec import (
    ACCURACY_THRESHOLD,
    HEALTHY_RANGE,
    INTERVENTION_TYPES,
    MALFUNCTION_TYPES,
    NO_MALFUNCTION,
)
from luca_gym.worlds.luca.vocabulary import gene_names


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
    plt = pyplot()
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
    save(plt, fig, path)


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
    return [record[f] for f, default in WORLD.key_defaults if record.get(f, default) != default]


def describe_session(record: dict) -> str:
    back = " backwards" if record.get("backwards") else ""
    arms = "".join(f" {a}" for a in _arms(record))
    return f"{record['agent']} {record['tier']} {record['mode']} N={record['n_genes']}{back}{arms} seed {record['seed']}"


def rebuilt_organism(record: dict):
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
    plt = pyplot()
    from matplotlib.lines import Line2D

    s = _parse_session(record)
    scores = record["scores"]
    organism, why = rebuilt_organism(record)
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
    fig.suptitle(f"Session: {describe_session(record)}; composite {scores['composite']:.2f}", fontsize=12)
    save(plt, fig, path)


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


class _Viewer:
    """What ``luca-gym show`` asks of a world's viewer (``World.viewer``)."""

    draw_session = staticmethod(draw_session)
    session_file_name = staticmethod(session_file_name)
    describe_session = staticmethod(describe_session)


VIEWER = _Viewer()
