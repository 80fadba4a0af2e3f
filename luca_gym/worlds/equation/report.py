"""The equation world's part of ``luca-gym report``: the paper's Table 1 cells,
success rate and average iterations over successful sessions only (∞ where
none succeeded), by protocol, setting and agent, with the floors beside every
setting, computed here from the core for the folder's own seeds and settings
(:func:`floor_scores`: the commonest formula stated at once, and ``random``
as the harness plays it), and the paper's best model where its text quotes
it, beside runs of the paper's protocol only; and :func:`figure_sessions`,
sessions on one instance as their agents played them (:func:`session_of`
reads one from its messages)."""

from __future__ import annotations

import json
import logging
from functools import lru_cache

import numpy as np

from luca_gym.results.figures import agent_color, legend_right, panel_letters, pyplot, save
from luca_gym.results.summaries import agents_in, group, markdown_table

KEYS = ("complexity", "n_variables", "n_distractors")
log = logging.getLogger("luca_gym.results.report")  # what the report is computing (luca-gym report prints it)
PAPERS_PROTOCOL = "every"
PROTOCOLS = {
    "every": "the paper's loop: a formula stated with every query, the session ended the first time it is right",
    "final": "one submitted formula, not the paper's protocol (no paper figure beside it)",
}
# The paper's best model per setting, as its text quotes it (Auto-Discovery-Bench, Table 1):
# (success, mean iterations as quoted, model). With 3 variables and no distractor the text gives
# Grok-4's range over the three complexities.
PAPER_BEST = {
    ("simple", 3, 0): (1.00, "1.00-1.30", "Grok-4, range over the 3 complexities"),
    ("medium", 3, 0): (1.00, "1.00-1.30", "Grok-4, range over the 3 complexities"),
    ("complex", 3, 0): (1.00, "1.00-1.30", "Grok-4, range over the 3 complexities"),
    ("complex", 3, 2): (1.00, "1.40", "Grok-4"),
    ("complex", 5, 2): (0.90, "3.22", "Grok-4"),
}
# The floors, computed for the folder's seeds (floor_scores): (key, the row's name).
FLOORS = (("fixed", "floor: commonest formula at once"), ("random", "floor: random (computed)"))


@lru_cache(maxsize=None)
def _solves():
    """Jitted: (programs (F leading), held-out inputs (B, P, m), outputs (B, P)) -> bool (F, B), formula f right on instance b."""
    import jax

    from luca_gym.worlds.equation import core
    from luca_gym.worlds.equation.grammar import evaluate

    def right(program, x, y):
        return core.agrees(evaluate(program, x), y)

    return jax.jit(jax.vmap(jax.vmap(right, (None, 0, 0)), (0, None, None)))


def floor_scores(config, seeds, random: bool = True) -> dict:
    """The floors' scores on ``seeds`` under ``config`` (an
    :class:`~luca_gym.worlds.equation.config.EquationConfig`), from the core,
    with no agent run: ``{"fixed": scores, "random": scores}``, each score
    (``success``, ``iterations``) a numpy (B,). ``fixed``: the commonest
    formula stated at once (1 iteration), learnt from the other seeds: each
    instance gets the formula (over the inputs' positions) that solves the
    most of the other instances (ties: the first seed's; none where no
    formula solves two instances), a floor for any answer given without a
    query. ``random``: the ``random`` baseline's
    session (:func:`~luca_gym.worlds.equation.baselines.random_plan`) played
    on the core, so it equals ``luca-gym eval --agents random`` on those seeds
    (``random=False``: left out, for a caller that holds those sessions)."""
    import jax

    from luca_gym.worlds.equation import core, grammar
    from luca_gym.worlds.equation.baselines import random_plan
    from luca_gym.worlds.equation.config import INPUT_HIGH, INPUT_LOW
    from luca_gym.worlds.equation.formula import parse

    seeds = [int(s) for s in seeds]
    batch = grammar.instances_of(seeds, config)
    with jax.enable_x64(True):
        solves = np.asarray(_solves()(batch.program, batch.heldout_x, batch.heldout_y))
    others = solves.sum(axis=1)[:, None] - solves  # (F, B): the other instances each formula solves
    best = np.argmax(others, axis=0)
    fixed = {"success": (solves[best, np.arange(len(seeds))] & (others.max(axis=0) > 0)).astype(float),
             "iterations": np.ones(len(seeds))}
    if not random:
        return {"fixed": fixed}
    random = {"success": [], "iterations": []}
    for i in range(len(seeds)):
        instance = jax.tree.map(lambda a: a[i], batch)
        names = grammar.names_of(instance)
        info = {"variables": names, "input_range": [INPUT_LOW, INPUT_HIGH], "budget": config.budget,
                "complexity": config.complexity, "n_distractors": config.n_distractors, "proposals": config.proposals}
        points, stated, final = random_plan(info)
        state = core.reset(instance, config)
        for k, x in enumerate(points):
            query = core.Action.make(core.QUERY, config, x, parse(stated[k], names) if stated else None)
            state, *_ = core.step(state, query, config)
            if bool(state.ended):
                break
        else:
            state, *_ = core.step(state, core.Action.make(core.SUBMIT, config, submission=parse(final, names)), config)
        random["success"].append(float(state.success))
        random["iterations"].append(int(state.iterations))
    return {"fixed": fixed, "random": {k: np.asarray(v, float) for k, v in random.items()}}


def _config_of(record):
    from luca_gym.worlds.equation.config import EquationConfig

    return EquationConfig(record["complexity"], record["n_variables"], record["n_distractors"], record.get("budget", 10),
                          record["proposals"], measurement_noise=record.get("measurement_noise", 0.0),
                          grammar_shown=record.get("grammar_shown", "listed"))


def _row(name: str, key, scores) -> list:
    """One table row's cells: name, the setting, sessions, success, iterations over the successful and over all."""
    success, iterations = np.asarray(scores["success"], float), np.asarray(scores["iterations"], float)
    won = iterations[success == 1.0]
    mean_won = f"{won.mean():.2f}" if len(won) else "∞"
    return [name, *key, len(success), f"{success.mean():.0%}", mean_won, f"{iterations.mean():.2f}"]


def table(records, floors=None, papers_settings: bool = True) -> str:
    """Markdown for ``records`` of one protocol: per setting, each agent's
    sessions, success rate, iterations over the successful ones and over
    all; then the floors (``floors``: {setting: :func:`floor_scores`}); then
    the paper's best model where the paper quotes it and the records ran the
    paper's protocol at its settings (``papers_settings``: no measurement
    noise, the grammar listed)."""
    lines = []
    papers = papers_settings and {r.get("proposals", "final") for r in records} == {PAPERS_PROTOCOL}  # no field: version 1
    for key, rs in group(records, *KEYS).items():
        by_agent = group(rs, "agent")
        for agent in agents_in(rs):
            scores = {k: [r["scores"][k] for r in by_agent[(agent,)]] for k in ("success", "iterations")}
            lines.append(_row(agent, key, scores))
        for name_key, name in FLOORS if key in (floors or {}) else ():
            lines.append(_row(f"*{name}*", key, floors[key][name_key]))
        if papers and key in PAPER_BEST:
            success, iterations, model = PAPER_BEST[key]
            lines.append([f"*paper's best ({model})*", *key, "-", f"{success:.0%}", iterations, "-"])
    return markdown_table(["agent", "complexity", "Var", "Dis", "sessions", "success", "iterations (successful)",
                           "iterations (all)"], lines)


def _floors(records) -> dict:
    """:func:`floor_scores` on the seeds of ``records`` (one setting); where
    they hold ``random``'s own sessions on every one of those seeds, its floor
    is those sessions (the same numbers), not played again."""
    seeds = sorted({r["seed"] for r in records})
    played = {r["seed"]: r for r in records if r["agent"] == "random"}
    reuse = set(seeds) <= set(played)
    log.info(f"equation: computing the floors on {len(seeds)} seed{'' if len(seeds) == 1 else 's'} "
             f"({'the commonest formula; random: its sessions here' if reuse else 'the commonest formula and random'})")
    floors = floor_scores(_config_of(records[0]), seeds, random=not reuse)
    if reuse:
        floors["random"] = {k: np.asarray([played[s]["scores"][k] for s in seeds], float) for k in ("success", "iterations")}
    return floors


def sections(records, out_dir, *, source=None, notes=None) -> list[str]:
    """``luca-gym report``'s markdown parts for this world's records: one table per protocol."""
    parts = ["## equation (symbolic equation discovery)",
             "Success rate, and iterations averaged over successful sessions as the paper does (∞ where none "
             "succeeded) and over all. Iterations are the paper's cycles: the queries made before the formula that "
             "ended the session (at least 1: one query and then the right formula is 1 iteration). The floors are "
             "computed from the world's core on the same seeds and settings, with no agent run: the commonest formula "
             "stated at once (for each seed, the formula that solves the most of the other seeds), and `random` as "
             "the harness plays it (where the folder holds `random`'s own sessions on every seed of a setting, its "
             "row is those sessions: the same numbers).",
             *(f"Note: {note}" for note in notes or ())]
    sealed = any(r.get("sealed") for r in records)
    if sealed:
        parts.append("Note: sealed instances: the floors are not computed (the report does not read the secret).")
    beyond = [{**r, "measurement_noise": r.get("measurement_noise", 0.0), "grammar_shown": r.get("grammar_shown", "listed")}
              for r in records]
    for (protocol, noise, shown), rs in sorted(group(beyond, "proposals", "measurement_noise", "grammar_shown").items()):
        floors = {} if sealed else {key: _floors(group_rs) for key, group_rs in group(rs, *KEYS).items()}
        paper_settings = noise == 0.0 and shown == "listed"
        title = f"### Table 1 (protocol: proposals={protocol}, {PROTOCOLS[protocol]})" if paper_settings else (
            f"### Beyond the paper (protocol: proposals={protocol}; measurement_noise={noise:g}, grammar {shown})")
        parts += [title, table(rs, floors, papers_settings=paper_settings)]
    return parts


def session_of(messages) -> dict:
    """What a finished session's messages (``run_agent``'s ``record["messages"]``)
    show of it: ``variables`` (from ``describe``; ``None`` if never called),
    ``queries`` (each ``(inputs {name: value}, output)``, in order: the
    queries made), the ``formula`` that ended the session (submitted, or
    stated with a query under the paper's loop; ``None`` if none) and the
    ``scores``. Reads only the tool calls and their answers: what the agent saw."""
    calls = {c["id"]: c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()}
    out = {"variables": None, "queries": [], "formula": None, "scores": None}
    for m in messages:
        if m.get("role") != "tool" or m.get("is_error"):
            continue
        answer, call = json.loads(m["content"]), calls.get(m.get("tool_call_id"), {})
        if "error" in answer:
            continue
        if m["name"] == "describe":
            out["variables"] = list(answer["variables"])
        elif m["name"] == "query" and "output" in answer:
            out["queries"].append((dict(answer["inputs"]), float(answer["output"])))
        if "scores" in answer:
            out["scores"] = dict(answer["scores"])
            out["formula"] = call.get("arguments", {}).get("formula")
    return out


def figure_sessions(sessions: dict, path: str, *, title: str = "") -> None:
    """Sessions on one instance, ``{agent: session_of(...)}``, to the PNG
    ``path``: (a) where each agent queried, each variable's input range with
    the agent's queries on it (numbered in order), and (b) the output each
    query read (a log axis where every output is positive), then the formula
    that ended each agent's session with its success and iterations. Shows only the calls
    and their answers, never the hidden formula or the held-out inputs."""
    plt = pyplot()
    variables = next(s["variables"] for s in sessions.values() if s["variables"])
    low, high = 1.0, 5.0
    fig, (ax_in, ax_out) = plt.subplots(1, 2, figsize=(10.5, 0.45 * len(variables) + 3.2),
                                        gridspec_kw={"width_ratios": [1.25, 1]})
    rows = np.arange(len(variables))[::-1]
    shift = np.linspace(-0.18, 0.18, len(sessions)) if len(sessions) > 1 else [0.0]
    outputs = []
    for k, (agent, session) in enumerate(sessions.items()):
        color = agent_color(agent)
        for q, (inputs, output) in enumerate(session["queries"], start=1):
            xs = [inputs[v] for v in variables]
            ax_in.scatter(xs, rows + shift[k], s=70, color=color, edgecolor="white", zorder=3,
                          label=agent if q == 1 else None)
            for x, y in zip(xs, rows + shift[k]):
                ax_in.text(x, y, str(q), ha="center", va="center", fontsize=6, color="white", zorder=4)
            outputs.append(output)
        if session["queries"]:
            ax_out.plot(range(1, len(session["queries"]) + 1), [o for _, o in session["queries"]], marker="o",
                        color=color, label=agent)
    ax_in.set_yticks(rows, variables)
    ax_in.set_xlim(low - 0.2, high + 0.2)
    ax_in.set_ylim(-0.6, len(variables) - 0.4)
    ax_in.grid(axis="x", alpha=0.3)
    ax_in.set_xlabel(f"input (each in [{low:g}, {high:g}]); a dot: one query, numbered in order")
    ax_in.set_title("where each agent queried", fontsize=10)
    if outputs and min(outputs) > 0:
        from matplotlib.ticker import FormatStrFormatter

        ax_out.set_yscale("log")
        ax_out.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax_out.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax_out.set_xlabel("query")
    ax_out.set_ylabel("the output it read")
    ax_out.xaxis.get_major_locator().set_params(integer=True)
    ax_out.grid(alpha=0.3)
    ax_out.set_title("what each query answered", fontsize=10)
    legend_right(ax_out)
    panel_letters([ax_in, ax_out])
    lines = []
    for agent, session in sessions.items():
        scores = session["scores"] or {}
        verdict = "succeeded" if scores.get("success") == 1.0 else "failed"
        iterations = scores.get("iterations", "?")
        lines.append(f"{agent}: ended on {session['formula'] or '(nothing)'}; {verdict}, "
                     f"{iterations} iteration{'' if iterations == 1 else 's'}")
    fig.text(0.02, -0.02, "\n".join(lines), ha="left", va="top", fontsize=9, family="monospace")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    save(plt, fig, path)
