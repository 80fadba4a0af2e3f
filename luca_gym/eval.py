"""Evaluation harness: sessions, resumable sweeps and the paper's summary tables.

A sweep runs agents x tiers x modes x N x seeds. Each session is appended to
``<out>/sessions.jsonl`` as one JSON line the moment it ends (agent, triple,
mode, every call with its arguments, result and budget left, the scores, the
strategy metrics and ``n_alt``). Run the same sweep again and it resumes: a
session already on file is skipped, so none is lost and none is run twice.

Every session opens its env through :func:`luca_gym.calls.open_session` from
its :class:`SessionSpec` (``backwards`` included), baseline policies and
tool-calling agents alike.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from luca_gym import __version__, calls, world
from luca_gym.baselines import BASELINES, Policy, make_policy
from luca_gym.envs.luca_env import LucaEnv
from luca_gym.spec import MODES, TIER_NAMES, check_bool, check_mode, check_n_genes, check_seed, check_tier

SESSIONS_FILE = "sessions.jsonl"
KEY_FIELDS = ("agent", "tier", "mode", "n_genes", "seed", "backwards")
SCORE_FIELDS = ("composite", "prediction", "diagnosis", "rescue")
STRATEGY_FIELDS = ("budget_fraction", "single_gene_fraction", "gene_coverage", "block_fraction", "redundancy", "commit_point")
AGENTS_ALLOWED = f"{', '.join(BASELINES)}, openai:MODEL, anthropic:MODEL, ppo:RUN_DIR or sb3:FILE.zip"
RL_EXTRA = 'pip install -e ".[rl]"'

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


class ResultsError(ValueError):
    """A results file that cannot be read (names the file, line and problem)."""


@dataclass(frozen=True)
class SessionSpec:
    agent: str
    tier: str
    mode: str
    n_genes: int
    seed: int
    backwards: bool = False

    def key(self) -> tuple:
        return (self.agent, self.tier, self.mode, self.n_genes, self.seed, self.backwards)

    def settings(self) -> dict:
        """The organism's settings, as :func:`luca_gym.calls.open_session` and
        :class:`~luca_gym.wrappers.llm.ToolSession` take them."""
        return {"seed": self.seed, "tier": self.tier, "mode": self.mode, "n_genes": self.n_genes, "backwards": self.backwards}


def run_session(
    policy: Policy,
    spec: SessionSpec,
    env: LucaEnv | None = None,
    max_calls: int | None = None,
) -> dict:
    """Run one session of ``policy`` and return its JSON-ready record.
    ``env``, if given, must have been built from ``spec``'s settings."""
    env, obs = calls.open_session(**spec.settings(), env=env)
    meta = env.organism.meta
    policy.reset(env.params, spec.seed)
    log, total = [], 0.0
    started = time.perf_counter()
    limit = max_calls or env.params.max_steps
    for _ in range(limit):
        action = policy.act(obs)
        record = calls.describe_action(meta, action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        record["result"] = calls.describe_result(meta, int(action["kind"]), obs, info)
        record["budget_remaining"] = int(obs["budget_left"])
        log.append(record)
        if terminated or truncated:
            break
    else:
        raise RuntimeError(f"agent {spec.agent!r} did not end the session within {limit} calls")
    return _record(spec, env, log, info["scores"], total, time.perf_counter() - started, truncated=bool(truncated))


def run_tool_session(agent, spec: SessionSpec, env: LucaEnv | None = None) -> dict:
    """Run one session of a tool-calling (LLM) agent through
    :class:`~luca_gym.wrappers.llm.ToolSession`; same record format."""
    from luca_gym.wrappers.llm import ToolSession, run_agent

    started = time.perf_counter()
    session = ToolSession(**spec.settings(), env=env)
    result = run_agent(agent, session)
    record = _record(
        spec, session.env, result["calls"], session.scores, result["return"], time.perf_counter() - started, truncated=session.truncated
    )
    record["hypotheses"] = result["hypotheses"]
    return record


def _record(spec: SessionSpec, env: LucaEnv, log, scores, total, wall, truncated: bool = False) -> dict:
    return {
        "agent": spec.agent,
        "tier": spec.tier,
        "mode": spec.mode,
        "n_genes": spec.n_genes,
        "seed": spec.seed,
        "backwards": spec.backwards,
        "budget": env.params.budget,
        "calls": log,
        "scores": scores,
        "n_alt": scores["n_alt"],
        "return": total,
        "truncated": truncated,
        "wall_s": round(wall, 4),
        "version": __version__,
    }


def is_llm_agent(name: str) -> bool:
    return str(name).startswith(("openai:", "anthropic:"))


def is_learned_agent(name: str) -> bool:
    """``ppo:RUN_DIR`` (a run folder of ``luca-gym train --algo ppo``) or
    ``sb3:FILE.zip`` (the model.zip, or its run folder, of ``--algo maskable-ppo``)."""
    return str(name).startswith(("ppo:", "sb3:"))


def check_agent(name) -> str:
    """A baseline's name, ``openai:MODEL``, ``anthropic:MODEL``, ``ppo:RUN_DIR``
    (an existing folder) or ``sb3:FILE.zip`` (an existing file or run folder); ValueError
    otherwise."""
    if not isinstance(name, str) or not (name in BASELINES or ((is_llm_agent(name) or is_learned_agent(name)) and name.partition(":")[2])):
        raise ValueError(f"agent: {name!r} unknown; allowed {AGENTS_ALLOWED}")
    algo, _, path = name.partition(":")
    if algo == "ppo" and not os.path.isdir(path):
        raise ValueError(f"agent {name!r}: no such run folder {path!r}; write one with `luca-gym train --algo ppo --out {path}`")
    if algo == "sb3" and not os.path.exists(path):
        raise ValueError(f"agent {name!r}: no such file {path!r}; write one with `luca-gym train --algo maskable-ppo --out DIR` "
                         f"(DIR/model.zip)")
    return name


def make_runner(name: str, base_url: str | None = None):
    """A baseline policy; an LLM agent callable for ``openai:MODEL`` /
    ``anthropic:MODEL``; or a learned agent's :class:`~luca_gym.agents.FlatPolicy`
    loaded from ``ppo:RUN_DIR`` or ``sb3:FILE.zip`` (ValueError names a
    missing or corrupt checkpoint, or the missing ``rl`` extra)."""
    if is_llm_agent(name):
        from luca_gym.wrappers.llm import make_agent

        return make_agent(name, base_url)
    if is_learned_agent(name):
        algo, _, path = check_agent(name).partition(":")
        if algo == "ppo":
            from luca_gym.agents import ppo

            return ppo.load(path)
        try:
            from luca_gym.agents.sb3 import load_policy
        except ImportError as exc:
            raise ValueError(f"agent {name!r}: needs the rl extra ({exc}); {RL_EXTRA}") from None
        return load_policy(path)
    return make_policy(name)


def _parse_line(path: str, lineno: int, line: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}:{lineno}: corrupt line ({exc.msg}); fix or remove that line") from None
    missing = [k for k in (*KEY_FIELDS, "scores") if not isinstance(record, dict) or k not in record]
    if not missing:
        scores = record["scores"]
        missing = [f"scores.{k}" for k in (*SCORE_FIELDS, *STRATEGY_FIELDS, "n_alt") if not isinstance(scores, dict) or k not in scores]
    if missing:
        raise ResultsError(f"{path}:{lineno}: corrupt line (missing {', '.join(missing)}); fix or remove that line")
    return record


def _complete(text: str) -> bool:
    """Whether a last line without its newline is nonetheless a whole record."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and all(k in record for k in (*KEY_FIELDS, "scores"))


def load_sessions(path: str) -> list[dict]:
    """Every session record of a results file or folder. A line cut short by an
    interrupted write (the last line, without its newline) is ignored; any
    other unreadable line raises :class:`ResultsError`."""
    if os.path.isdir(path):
        path = os.path.join(path, SESSIONS_FILE)
    if not os.path.exists(path):
        raise ResultsError(f"{path}: no such results file")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    # Text after the last newline is an unfinished write, unless it is whole.
    complete = lines if _complete(lines[-1]) else lines[:-1]
    records = []
    for lineno, line in enumerate(complete, 1):
        if line.strip():
            records.append(_parse_line(path, lineno, line))
    return records


def _trim_unfinished(path: str) -> None:
    """Cut an unfinished last line (a write killed half-way) so appends start
    clean; a whole record that only lacks its newline gets the newline."""
    with open(path, "rb+") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end == len(data):
            return
        if _complete(data[end:].decode("utf-8", errors="replace")):
            f.write(b"\n")
        else:
            f.truncate(end)


def plan(agents, tiers, modes, n_genes, seeds, backwards=False) -> list[SessionSpec]:
    """The sessions of a sweep, validated (ValueError names the bad value and
    what is allowed)."""
    unique = lambda xs: list(dict.fromkeys(xs))  # noqa: E731 -- a repeated name runs once
    agents = unique(check_agent(a) for a in agents)
    tiers = unique(check_tier(t) for t in tiers)
    modes = unique(check_mode(m) for m in modes)
    n_genes = unique(check_n_genes(n) for n in n_genes)
    seeds = unique(check_seed(s) for s in seeds)
    backwards = check_bool(backwards, "backwards")
    return [SessionSpec(a, t, m, n, s, backwards) for n in n_genes for t in tiers for m in modes for a in agents for s in seeds]


def sweep(
    specs: Iterable[SessionSpec],
    out_dir: str,
    policy_factory: Callable[[str], object] = make_runner,
    progress: Callable[[int, int, SessionSpec], None] | None = None,
) -> str:
    """Run every session of ``specs`` not yet in ``out_dir``, appending each
    record as it ends. Returns the results file's path."""
    specs = list(dict.fromkeys(specs))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, SESSIONS_FILE)
    done = set()
    if os.path.exists(path):
        done = {tuple(r[k] for k in KEY_FIELDS) for r in load_sessions(path)}
        _trim_unfinished(path)
    todo = [s for s in specs if s.key() not in done]
    with open(path, "a", encoding="utf-8") as f:
        for i, spec in enumerate(todo):
            if progress:
                progress(i, len(todo), spec)
            runner = policy_factory(spec.agent)
            record = (run_session if hasattr(runner, "act") else run_tool_session)(runner, spec)
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if progress:
            progress(len(todo), len(todo), None)
    return path


# -- summaries -----------------------------------------------------------------
def _stats(values) -> tuple[float, float, int]:
    v = np.asarray(values, float)
    return float(v.mean()), float(v.std()), int(v.size)  # population std, as the paper


def group(records, *fields) -> dict:
    out: dict = {}
    for r in records:
        out.setdefault(tuple(r[f] for f in fields), []).append(r)
    return out


def summary(records, fields=("agent", "tier", "mode", "n_genes")) -> dict:
    """{group key: {metric: (mean, population std, count)}} for the score and
    strategy metrics."""
    return {
        key: {m: _stats([r["scores"][m] for r in rs]) for m in (*SCORE_FIELDS, *STRATEGY_FIELDS, "n_alt")}
        for key, rs in group(records, *fields).items()
    }


def _cell(stats) -> str:
    mean, std, _ = stats
    return f"{mean:.3f} ± {std:.3f}"


def agents_in(records) -> list:
    """The agents of ``records``: the baselines in their usual order, then the others by name."""
    order = list(BASELINES)
    return sorted({r["agent"] for r in records}, key=lambda a: (order.index(a) if a in order else len(order), a))


def composite_table(records, n_genes: int = 20, with_paper: bool = True) -> str:
    """Markdown: composite (mean ± std) per agent over the six conditions, with
    the paper's baseline figures beside ours (Tables 6-7)."""
    s = summary([r for r in records if r["n_genes"] == n_genes])
    conds = [(t, m) for m in MODES for t in TIER_NAMES if any((a, t, m, n_genes) in s for a in agents_in(records))]
    header = "| agent | " + " | ".join(f"{t} {m[0].upper()}" for t, m in conds) + " |"
    lines = [header, "|" + " --- |" * (len(conds) + 1)]
    for a in agents_in(records):
        cells = []
        for t, m in conds:
            st = s.get((a, t, m, n_genes))
            cell = _cell(st["composite"]) if st else "-"
            paper = PAPER_COMPOSITE.get(a, {}).get((t, m))
            if with_paper and paper is not None and st:
                cell += f" (paper {paper:.3f})"
            cells.append(cell)
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def disease_table(records, n_genes: int = 20) -> str:
    """Markdown: disease sub-scores and the rescue - diagnosis gap (Table 8)."""
    s = summary([r for r in records if r["n_genes"] == n_genes and r["mode"] == "disease"])
    lines = ["| tier | agent | prediction | diagnosis | rescue | composite | rescue - diagnosis |", "|" + " --- |" * 7]
    for t in TIER_NAMES:
        for a in agents_in(records):
            st = s.get((a, t, "disease", n_genes))
            if st:
                gap = st["rescue"][0] - st["diagnosis"][0]
                lines.append(
                    f"| {t} | {a} | {st['prediction'][0]:.3f} | {st['diagnosis'][0]:.3f} | {st['rescue'][0]:.3f} "
                    f"| {st['composite'][0]:.3f} | {gap:+.3f} |"
                )
    return "\n".join(lines)


def strategy_table(records, tier: str = "medium", mode: str = "healthy", n_genes: int = 20) -> str:
    """Markdown: budget fraction, single-gene %, coverage % (Table 10)."""
    s = summary([r for r in records if (r["tier"], r["mode"], r["n_genes"]) == (tier, mode, n_genes)])
    lines = ["| agent | budget frac | single-gene % | coverage % | BLOCK % | redundancy | commit point |", "|" + " --- |" * 7]
    for a in agents_in(records):
        st = s.get((a, tier, mode, n_genes))
        if st:
            lines.append(
                f"| {a} | {st['budget_fraction'][0]:.2f} | {100 * st['single_gene_fraction'][0]:.1f}% "
                f"| {100 * st['gene_coverage'][0]:.1f}% | {100 * st['block_fraction'][0]:.1f}% "
                f"| {st['redundancy'][0]:.2f} | {st['commit_point'][0]:.2f} |"
            )
    return "\n".join(lines)


def scaling_table(records, tier: str = "medium", mode: str = "healthy", with_paper: bool = True) -> str:
    """Markdown: prediction accuracy by N (Table 11), paper figures beside."""
    rs = [r for r in records if (r["tier"], r["mode"]) == (tier, mode)]
    s = summary(rs)
    ns = sorted({r["n_genes"] for r in rs})
    agents = agents_in(rs)
    lines = ["| N | budget | " + " | ".join(agents) + " |", "|" + " --- |" * (len(agents) + 2)]
    for n in ns:
        cells = []
        for a in agents:
            st = s.get((a, tier, mode, n))
            cell = _cell(st["prediction"]) if st else "-"
            paper = PAPER_SCALING.get(a, {}).get(n)
            if with_paper and paper is not None and st:
                cell += f" (paper {paper:.3f})"
            cells.append(cell)
        lines.append(f"| {n} | {world.sizes(n).budget} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = [
    "AGENTS_ALLOWED",
    "PAPER_COMPOSITE",
    "PAPER_SCALING",
    "ResultsError",
    "SessionSpec",
    "agents_in",
    "check_agent",
    "is_learned_agent",
    "composite_table",
    "disease_table",
    "load_sessions",
    "plan",
    "run_session",
    "run_tool_session",
    "scaling_table",
    "strategy_table",
    "summary",
    "sweep",
]
