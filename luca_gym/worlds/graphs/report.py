"""The graph worlds' sections of ``luca-gym report`` (``World.report``): the
paper's Table 1 (success rate, and mean iterations over the successful
sessions, per setting and agent; infinity where none succeeded) with the
floors beside every agent, computed here from the core for the folder's own
seeds and settings (:func:`floor_scores`: the empty matrix submitted at once,
and ``random`` as the harness plays it), and the paper's best model where
the paper's text quotes it, beside runs of the paper's protocol only; the
process figures the paper does not give (edge F1 and structural Hamming
distance of the final proposal, interventions, interventions wasted); and
:func:`figure_session`, one session drawn as its agent left it. Every table
names its protocol."""

from __future__ import annotations

import logging
from dataclasses import fields
from functools import lru_cache

import numpy as np

from luca_gym.results.figures import agent_color, panel_letters, pyplot, save
from luca_gym.results.summaries import agents_in, group, markdown_table

# The paper's best model per setting, as its text quotes it (Auto-Discovery-Bench, Table 1):
# (success, mean iterations, model).
PAPER_BEST = {
    ("dag", (3, 3)): (1.00, 4.15, "GPT-4o"),
    ("dag", (3, 5)): (1.00, 4.35, "GPT-4o"),
    ("dag", (10, 5)): (1.00, 11.0, "Grok-4"),
    ("relational", (3,)): (1.00, 3.10, "Grok-4"),
    ("relational", (5,)): (1.00, 5.00, "Grok-4"),
    ("relational", (10,)): (1.00, 10.40, "Grok-4"),
}
# What a setting is, per world (the paper's columns), and what else a table holds fixed.
SIZE = {"dag": ("n_nodes", "n_states"), "relational": ("n_houses",)}
# The settings beyond the paper (named in a table's title only where they are not off).
HARDER = {"observation_noise": 0.0, "n_latent": 0, "intervention_cost": 0.0}
CONDITION = {"dag": ("edge_density", "redraw_may_repeat", "proposals", *HARDER),
             "relational": ("edge_density", "proposals", *HARDER)}
PAPERS_PROTOCOL = "every"
PROTOCOLS = {
    "every": "the paper's loop: a matrix proposed every cycle, the session ended the first time it is right",
    "final": "one submitted matrix, not the paper's protocol (no paper figure beside it)",
}
log = logging.getLogger("luca_gym.results.report")  # what the report is computing (luca-gym report prints it)
# The floors, computed for the folder's seeds (floor_scores): (key, the row's name).
FLOORS = (("empty", "floor: empty matrix at once"), ("random", "floor: random (computed)"))


def _setting_text(world: str, setting) -> str:
    return f"({setting[0]} nodes, {setting[1]} states)" if world == "dag" else f"{setting[0]} houses"


def _config_of(world: str, record):
    """The config a results line was played under."""
    from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig

    config_class = DagConfig if world == "dag" else RelationalConfig
    return config_class(**{f.name: record[f.name] for f in fields(config_class)})


@lru_cache(maxsize=None)
def _empty_at_once(config):
    """One jitted function per config: instances (B leading) -> the scores of the empty matrix submitted at once."""
    import jax
    import jax.numpy as jnp

    from luca_gym.worlds.graphs import core

    def one(instance):
        state = core.reset(instance, config)
        state, _, _ = core.step_pure(state, core.Action(core.SUBMIT, 0, jnp.zeros((config.n, config.n), bool)), config)
        return core.score_arrays(state, bool(config.intervention_cost))

    return jax.jit(jax.vmap(one))


def floor_scores(config, seeds, random: bool = True) -> dict:
    """The floors' scores on ``seeds`` under ``config``
    (``DagConfig`` or
    ``RelationalConfig``), from the core,
    with no agent run: ``{"empty": scores, "random": scores}``, each score a
    numpy (B,). ``empty``: the empty matrix submitted at once (1 iteration;
    its success is the share of instances with no edge). ``random``: the
    ``random`` baseline as the harness plays it, each session from its
    seed's key (:func:`~luca_gym.worlds.graphs.flat.play_batch`), so it
    equals ``luca-gym eval --agents random`` on those seeds (``random=False``:
    left out, for a caller that holds those sessions)."""
    import jax

    from luca_gym.worlds.graphs import core
    from luca_gym.worlds.graphs.baselines import random_policy
    from luca_gym.worlds.graphs.flat import GraphFlat, play_batch, session_keys

    seeds = [int(s) for s in seeds]
    instances = core.instances(seeds, config)
    codec = GraphFlat(config)
    out = {"empty": _empty_at_once(config)(instances)}
    if random:
        out["random"] = play_batch(random_policy(codec), None, session_keys(seeds), codec, instances, config.max_calls)
    return {name: {k: np.asarray(v) for k, v in jax.device_get(scores).items()} for name, scores in out.items()}


def _as_records(scores: dict) -> list:
    """A floor's scores (numpy (B,) each) as results-like lines ``{"scores": {...}}``."""
    n = len(next(iter(scores.values())))
    return [{"scores": {k: float(v[i]) for k, v in scores.items()}} for i in range(n)]


def _condition_text(settings: dict) -> str:
    """A table's fixed settings as ``k=v``: the paper's always, those beyond it where they are not off."""
    return ", ".join(f"{k}={v}" for k, v in settings.items() if k not in HARDER or v != HARDER[k])


def floors_of(records, world: str) -> dict:
    """``{setting: {floor key: records}}`` for ``records`` of one condition
    (same protocol, density, ...): each setting's floors on the seeds its
    lines hold (every agent's, together). Empty for sealed lines: their
    instances come from a secret the report does not read. Where ``records``
    hold ``random``'s own sessions on every one of those seeds, its floor is
    those sessions (the same numbers: the floor plays it as the harness does),
    not played again."""
    if any(r.get("sealed") for r in records):
        return {}
    out = {}
    for setting, rs in group(records, *SIZE[world]).items():
        seeds = sorted({r["seed"] for r in rs})
        played = {r["seed"]: r for r in rs if r["agent"] == "random"}
        reuse = set(seeds) <= set(played)
        count = f"{len(seeds)} seed{'' if len(seeds) == 1 else 's'}"
        log.info(f"{world} {_setting_text(world, setting)}: computing the floors on {count} "
                 f"({'the empty matrix; random: its sessions here' if reuse else 'the empty matrix and random'})")
        out[setting] = {k: _as_records(v) for k, v in floor_scores(_config_of(world, rs[0]), seeds, random=not reuse).items()}
        if reuse:
            out[setting]["random"] = [{"scores": played[s]["scores"]} for s in seeds]
    return out


def success_cell(records) -> str:
    """``success % / mean iterations over the successful (n)``; ∞ where none succeeded."""
    success = np.array([r["scores"]["success"] for r in records], float)
    solved = [r["scores"]["iterations"] for r in records if r["scores"]["success"] >= 1]
    iterations = f"{np.mean(solved):.2f}" if solved else "∞"
    return f"{100 * success.mean():.0f}% / {iterations} ({len(records)})"


def table1(records, world: str, floors=None) -> str:
    """Markdown: Table 1's cells per agent (rows) and setting (columns) for
    ``records`` of one protocol; then the floors (``floors``:
    :func:`floors_of`), then the paper's best model where the paper quotes it
    and the records ran the paper's protocol."""
    size = SIZE[world]
    settings = sorted(group(records, *size))
    cells = group(records, "agent", *size)
    floors = floors or {}
    lines = [[agent, *(success_cell(cells[(agent, *s)]) if (agent, *s) in cells else "-" for s in settings)]
             for agent in agents_in(records)]
    if floors:
        for key, name in FLOORS:
            lines.append([f"*{name}*", *(f"*{success_cell(floors[s][key])}*" if s in floors else "-" for s in settings)])
    paper = [PAPER_BEST.get((world, s)) for s in settings]
    if any(paper) and {r["proposals"] for r in records} == {PAPERS_PROTOCOL}:
        lines.append(["*paper's best*", *(f"*{100 * p[0]:.0f}% / {p[1]:.2f} ({p[2]})*" if p else "-" for p in paper)])
    return markdown_table(["agent", *(_setting_text(world, s) for s in settings)], lines)


def _return_of(record) -> float:
    """A session's return: its scores' ``return`` where interventions cost, else its success."""
    return record["scores"].get("return", record["scores"]["success"])


def process_table(records, world: str, floors=None) -> str:
    """Markdown: per agent (then floor) and setting, the means of edge F1, SHD,
    interventions and wasted interventions, and where interventions cost, of
    the return (success less the cost)."""
    size = SIZE[world]
    priced = any(r.get("intervention_cost", 0) for r in records)
    rows = [(agent, tuple(setting), rs) for (agent, *setting), rs in sorted(
        group(records, "agent", *size).items(), key=lambda kv: (agents_in(records).index(kv[0][0]), kv[0][1:]))]
    for key, name in FLOORS:
        rows += [(f"*{name}*", setting, by_floor[key]) for setting, by_floor in sorted((floors or {}).items())]
    lines = []
    for agent, setting, rs in rows:
        mean = lambda k: np.mean([r["scores"][k] for r in rs])  # noqa: E731
        paid = [f"{np.mean([_return_of(r) for r in rs]):.3f}"] if priced else []
        lines.append([agent, _setting_text(world, setting), f"{mean('edge_f1'):.3f}", f"{mean('shd'):.2f}",
                      f"{mean('interventions'):.2f}", f"{mean('wasted'):.2f}", *paid, len(rs)])
    return markdown_table(["agent", "setting", "edge F1", "SHD", "interventions", "wasted", *(["return"] if priced else []),
                           "sessions"], lines)


@lru_cache(maxsize=None)
def _play_design(config):
    """One jitted :func:`~luca_gym.worlds.graphs.analyst.play_design` per config."""
    import jax

    from luca_gym.worlds.graphs.analyst import play_design

    return jax.jit(lambda instances, designs: play_design(instances, designs, config))


def value_of_design(config, instances, designs, keys) -> dict:
    """The value of design of a batch of sessions (B leading): ``agent``, the
    score (success, or the return where interventions cost) of each
    session's experiments ``designs`` int32 (B, L) (in order; padded with
    N) read by the posterior analyst
    (:func:`~luca_gym.worlds.graphs.analyst.play_design`); ``random``, the
    score of a random design of the same budget (a uniformly random node
    until the budget is spent, each session drawing from ``keys``
    (:func:`~luca_gym.worlds.graphs.flat.session_keys`)) read by the same
    analyst; ``value``, the first less the second. Numpy (B,) each."""
    import jax

    from luca_gym.worlds.graphs.baselines import random_policy
    from luca_gym.worlds.graphs.flat import GraphFlat, play_batch

    codec = GraphFlat(config, analyst="posterior")
    measure = "return" if config.intervention_cost else "success"
    agent = _play_design(config)(instances, designs)[measure]
    random = play_batch(random_policy(codec), None, keys, codec, instances, config.max_calls)[measure]
    agent, random = (np.asarray(x, float) for x in jax.device_get((agent, random)))
    return {"agent": agent, "random": random, "value": agent - random}


def design_of(record, config) -> list[int]:
    """The interventions a session made, in order (its calls' results that show states)."""
    return [int(c["result"][config.node_noun]) for c in record.get("calls") or []
            if c.get("call") == config.intervene_tool and "states" in (c.get("result") or {})]


def design_table(records, world: str) -> str | None:
    """Markdown: per agent and setting, the mean score of the agents'
    experiments read by the posterior analyst, a random design's read alike,
    and their difference, the value of design (:func:`value_of_design`) ±
    one standard error. None for sealed lines (their instances need the
    secret)."""
    from luca_gym.worlds.graphs import core
    from luca_gym.worlds.graphs.flat import session_keys

    if any(r.get("sealed") for r in records):
        return None
    lines = []
    for (agent, *setting), rs in sorted(group(records, "agent", *SIZE[world]).items(),
                                        key=lambda kv: (agents_in(records).index(kv[0][0]), kv[0][1:])):
        config = _config_of(world, rs[0])
        seeds = [int(r["seed"]) for r in rs]
        designs = np.full((len(rs), config.budget), config.n, np.int32)
        for i, r in enumerate(rs):
            made = design_of(r, config)[: config.budget]
            designs[i, : len(made)] = made
        log.info(f"{world} {_setting_text(world, tuple(setting))}: the value of {agent}'s design on {len(rs)} sessions")
        v = value_of_design(config, core.instances(seeds, config), designs, session_keys(seeds))
        se = v["value"].std(ddof=1) / np.sqrt(len(rs)) if len(rs) > 1 else float("nan")
        lines.append([agent, _setting_text(world, tuple(setting)), f"{v['agent'].mean():.3f}", f"{v['random'].mean():.3f}",
                      f"{v['value'].mean():+.3f} ± {se:.3f}", len(rs)])
    return markdown_table(["agent", "setting", "agent's experiments, posterior analyst", "random design, same analyst",
                           "value of design", "sessions"], lines)


def _reading_uncertain(settings: dict) -> bool:
    """Whether a condition's readings leave the edges uncertain (noise, latent nodes, repeats): where the analyst matters."""
    return bool(settings.get("observation_noise") or settings.get("n_latent") or settings.get("redraw_may_repeat"))


def sections(records: list, out_dir: str, *, source: str, notes=()) -> list[str]:
    """The report's sections for one graph world's lines ``records`` of
    results ``source`` (``notes``: what reading the file noted)."""
    world = records[0]["world"]
    title = "Directed graph discovery" if world == "dag" else "Undirected relational discovery"
    parts = [
        f"# {title} results ({world})",
        (f"{len(records)} sessions from `{source}`. Table 1's cells: success rate / mean iterations over the "
         "successful sessions (sessions); iterations are the paper's cycles, the interventions made before the "
         "matrix that ended the session (at least 1: one intervention and then the right matrix is 1 iteration); "
         "∞ where no session succeeded. The budget is 2N interventions. The floors are computed from the world's "
         "core on the same seeds and settings, with no agent run: the empty matrix submitted at once (its success "
         "is the share of instances with no edge) and `random` as the harness plays it (where the folder holds `random`'s "
         "own sessions on every seed of a setting, its row is those sessions: the same numbers). A table's title names the "
         "settings beyond the paper (observation noise, latent nodes, a cost per intervention) where they are on; "
         "with a cost, the process table adds the mean return (success less the cost times the interventions)."),
        *(f"Note: {note}" for note in notes),
    ]
    if any(r.get("sealed") for r in records):
        parts.append("Note: sealed instances: the floors are not computed (the report does not read the secret).")
    for condition, rs in sorted(group(records, *CONDITION[world]).items(), key=lambda kv: str(kv[0])):
        settings = dict(zip(CONDITION[world], condition))
        protocol = settings.pop("proposals")
        text = f"protocol: proposals={protocol}, {PROTOCOLS[protocol]}; " + _condition_text(settings)
        floors = floors_of(rs, world)
        parts += [f"## Table 1: success rate and iterations ({text})", table1(rs, world, floors),
                  f"## Process ({text})", process_table(rs, world, floors)]
        design = design_table(rs, world) if _reading_uncertain(settings) else None
        if design:
            parts += [f"## The value of design ({text})",
                      "Each session's experiments (its interventions, in order) read by the posterior analyst (the edge "
                      "posterior bayes-edges keeps, its most probable unrefuted matrix stated with each intervention, "
                      "then submitted), against a random design of the same budget read by the same analyst: what the "
                      "choice of experiments earned, whatever the agent made of the readings" +
                      (" (the return: success less the cost of the interventions)" if settings.get("intervention_cost")
                       else " (success)") + ".", design]
    return parts


# What the evidence implies of a pair (core.EDGE, NO_EDGE, UNKNOWN), as drawn by figure_session.
KNOWLEDGE_COLORS = {1: "#2ca02c", -1: "#d9d9d9", 0: "#ffffff"}
KNOWLEDGE_NAMES = {1: "edge seen", -1: "no edge", 0: "unknown"}


def figure_session(state, config, path: str, *, agent: str = "") -> None:
    """One session of a graph world, as its agent saw and left it, to the PNG
    ``path``: (a) what the evidence implies of each pair
    (:func:`~luca_gym.worlds.graphs.core.knowledge`: edge seen, no edge,
    unknown), with each node's interventions, and (b) the adjacency matrix the
    session proposed last (nodes on a circle; arrows directed, lines
    undirected), titled with its scores. Reads the public view and the
    proposal, never the hidden graph, and the scores only once the session
    has ended (an ended session's scores are public): a session that succeeded
    shows the truth because its agent found it. ``state``: a
    :class:`~luca_gym.worlds.graphs.core.GraphState` (one session);
    ``config``: its ``DagConfig`` or
    ``RelationalConfig``; ``agent``: who
    played it, for the title and the edges' colour."""
    import jax
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Circle, FancyArrowPatch, Patch

    from luca_gym.worlds.graphs import core

    view = jax.device_get(core.public_view(state))
    n, noun = config.n, config.node_noun
    known = np.asarray(view["knowledge"], int)
    intervened = np.asarray(view["intervened"], int)
    proposal = np.asarray(jax.device_get(state.hypothesis), bool)
    scores = {k: float(v) for k, v in jax.device_get(core.score_arrays(state)).items()}
    plt = pyplot()
    fig, (ax_k, ax_g) = plt.subplots(1, 2, figsize=(9.6, 4.6), gridspec_kw={"width_ratios": [1, 1.05]})

    order = (-1, 0, 1)
    ax_k.imshow(known + 1, cmap=ListedColormap([KNOWLEDGE_COLORS[v] for v in order]), vmin=0, vmax=2)
    ax_k.set_xticks(range(n))
    ax_k.set_yticks(range(n), [f"{i} ({intervened[i]}x)" for i in range(n)])
    ax_k.set_xticks(np.arange(-0.5, n), minor=True)
    ax_k.set_yticks(np.arange(-0.5, n), minor=True)
    ax_k.grid(which="minor", color="0.6", lw=0.5)
    ax_k.tick_params(which="minor", length=0)
    pair = "row -> column" if config.directed else "row - column"
    ax_k.set_xlabel(f"{noun} ({pair})")
    ax_k.set_ylabel(f"{noun} (its interventions)")
    ax_k.set_title("what the evidence implies", fontsize=10)
    ax_k.legend(handles=[Patch(facecolor=KNOWLEDGE_COLORS[v], edgecolor="0.6", label=KNOWLEDGE_NAMES[v]) for v in (1, -1, 0)],
                fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)

    angle = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    radius = 0.13
    color = agent_color(agent) if agent else "#1f77b4"
    edges = [(i, j) for i, j in zip(*np.nonzero(proposal)) if config.directed or i < j]
    for i, j in edges:
        ax_g.add_patch(FancyArrowPatch(xy[i], xy[j], arrowstyle="-|>" if config.directed else "-", mutation_scale=12,
                                       color=color, lw=1.4, shrinkA=radius * 72 * 1.6, shrinkB=radius * 72 * 1.6,
                                       connectionstyle="arc3,rad=0.08" if config.directed else "arc3", zorder=2))
    for i, (x, y) in enumerate(xy):
        ax_g.add_patch(Circle((x, y), radius, facecolor="white", edgecolor="0.2", lw=1.0, zorder=3))
        ax_g.text(x, y, str(i), ha="center", va="center", fontsize=9, zorder=4)
    ax_g.set_xlim(-1.3, 1.3)
    ax_g.set_ylim(-1.3, 1.3)
    ax_g.set_aspect("equal")
    ax_g.axis("off")
    if view["ended"]:
        verdict = "correct" if scores["success"] >= 1 else "wrong"
        title = (f"the proposal ({verdict}): edge F1 {scores['edge_f1']:.2f}, SHD {scores['shd']:.0f}, "
                 f"{scores['iterations']:.0f} iteration{'' if scores['iterations'] == 1 else 's'}")
    else:  # the scores read the hidden graph: an open session shows none
        title = f"the last proposal (open session: scored at its end), {scores['interventions']:.0f} interventions"
    ax_g.set_title(title, fontsize=10)
    panel_letters([ax_k, ax_g])
    who = f"{agent} on " if agent else ""
    fig.suptitle(f"{who}{config.describe()}", fontsize=11)
    save(plt, fig, path)
