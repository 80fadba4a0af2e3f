"""Evaluation harness: sessions, resumable sweeps and the paper's summary tables.

A sweep runs agents x tiers x modes x N x seeds. Each session is appended to
``<out>/sessions.jsonl`` as one JSON line the moment it ends (agent, triple,
mode, every call with its arguments, result and budget left, the scores, the
strategy metrics and ``n_alt``). Run the same sweep again and it resumes: a
session already on file is skipped, so none is lost and none is run twice.

Every session opens its env through :func:`luca_gym.worlds.luca.calls.open_session` from
its :class:`SessionSpec` (``backwards`` included), baseline policies and
tool-calling agents alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import hmac
import json
import os
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from luca_gym import __version__
from luca_gym.worlds.luca import calls, generator as world
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.baselines import BASELINES, Policy, make_policy
from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.spec import (
    MODES,
    TIER_NAMES,
    check_bool,
    check_mode,
    check_n_genes,
    check_seed,
    check_stance,
    check_tier,
    check_vocabulary,
)

SESSIONS_FILE = "sessions.jsonl"
KEY_FIELDS = ("agent", "tier", "mode", "n_genes", "seed", "backwards", "vocabulary", "stance")
# Key fields added after records were first written: a line without one reads
# as this value (a session of the default condition).
KEY_DEFAULTS = {"vocabulary": "invented", "stance": "suppress"}
REQUIRED_KEY_FIELDS = tuple(k for k in KEY_FIELDS if k not in KEY_DEFAULTS)
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
    vocabulary: str = "invented"  # gene names, invented or real (appendix E.2)
    stance: str = "suppress"  # the prompt's stance on biological knowledge (tool-calling agents; appendix E.2)

    def key(self) -> tuple:
        return (self.agent, self.tier, self.mode, self.n_genes, self.seed, self.backwards, self.vocabulary, self.stance)

    def settings(self) -> dict:
        """The organism's settings, as :func:`luca_gym.worlds.luca.calls.open_session` and
        :class:`~luca_gym.worlds.luca.tools.ToolSession` take them (the stance is
        the prompt's, not the organism's: ToolSession takes it apart)."""
        return {"seed": self.seed, "tier": self.tier, "mode": self.mode, "n_genes": self.n_genes, "backwards": self.backwards,
                "vocabulary": self.vocabulary}


def run_session(
    policy: Policy,
    spec: SessionSpec,
    env: Session | None = None,
    max_calls: int | None = None,
    *,
    sealed=None,
) -> dict:
    """Run one session of ``policy`` and return its JSON-ready record.
    ``env``, if given, must have been built from ``spec``'s settings (and
    ``sealed``, :mod:`luca_gym.seal`)."""
    seal = seal_mod.make_seal(sealed)
    env, obs = calls.open_session(**spec.settings(), env=env, sealed=seal)
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
    organism_id = seal_mod.instance_id(spec.seed, seal)
    return _record(spec, env, log, info["scores"], total, time.perf_counter() - started, truncated=bool(truncated),
                   end_reason="call_limit" if truncated else "end", organism_id=organism_id, seal=seal)


def run_tool_session(
    agent, spec: SessionSpec, env: Session | None = None, *, sealed=None, base_url: str | None = None,
    retries: int | None = None, backoff: float | None = None, price=None, sleep: Callable[[float], object] = time.sleep,
) -> dict:
    """Run one session of a tool-calling (LLM) agent through
    :class:`~luca_gym.worlds.luca.tools.ToolSession`; same record format, plus
    ``usage`` (tokens, provider calls, retries and the failed calls, see
    :func:`~luca_gym.tools.loop.run_agent`), ``price_usd_per_mtok`` and
    ``cost_usd`` (None without a ``price``, (input, output) USD per million
    tokens). A failed provider call is retried ``retries`` times, waiting
    ``backoff`` seconds and more (run_agent's defaults when None); if it still
    fails, the ProviderError is raised and nothing is returned to record."""
    from luca_gym.worlds.luca.tools import ToolSession
    from luca_gym.tools.loop import run_agent

    price = check_price(price)
    retry = {k: v for k, v in (("retries", retries), ("backoff", backoff)) if v is not None}
    started = time.perf_counter()
    session = ToolSession(**spec.settings(), stance=spec.stance, env=env, sealed=sealed)
    result = run_agent(agent, session, sleep=sleep, **retry)
    return _tool_record(spec, session, result, time.perf_counter() - started, base_url=base_url, price=price)


def _tool_record(spec: SessionSpec, session, result: dict, wall: float, base_url: str | None = None, price=None) -> dict:
    record = _record(
        spec, session.env, result["calls"], session.scores, result["return"], wall, truncated=session.truncated,
        end_reason=session.end_reason, organism_id=session.organism_id, seal=session.seal, base_url=base_url,
    )
    record["hypotheses"] = result["hypotheses"]
    record["usage"] = result.get("usage")  # None for a session driven from outside (MCP)
    record["price_usd_per_mtok"] = None if price is None else list(price)
    record["cost_usd"] = session_cost(record["usage"], price)
    return record


def check_price(price) -> tuple[float, float] | None:
    """None, or ``(input, output)`` USD per million tokens, each a number >= 0;
    ValueError naming the bad value otherwise."""
    if price is None:
        return None
    try:
        values = tuple(price)
    except TypeError:
        values = ()
    ok = len(values) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf") for v in values)
    if not ok:
        raise ValueError(f"price: {price!r}; allowed (input, output) USD per million tokens, two numbers >= 0, e.g. 2.5,10")
    return float(values[0]), float(values[1])


def session_cost(usage: dict | None, price) -> float | None:
    """USD for a session's tokens at ``price`` (input, output) USD per million
    tokens; None without a price or when no call reported its tokens."""
    if price is None or not usage or (usage.get("input_tokens") is None and usage.get("output_tokens") is None):
        return None
    tokens = (usage.get("input_tokens") or 0, usage.get("output_tokens") or 0)
    return round((tokens[0] * price[0] + tokens[1] * price[1]) / 1e6, 6)


def record_tool_session(session, out_dir: str, *, agent: str = "mcp-client", wall_s: float = 0.0, wait_s: float = 5.0) -> str:
    """Append an ended :class:`~luca_gym.worlds.luca.tools.ToolSession` (driven
    from outside the harness, e.g. over MCP) to ``out_dir/sessions.jsonl`` in
    the harness format, under the folder's lock (waiting up to ``wait_s``
    seconds for it); ``luca-gym report`` reads it. Returns the file's path.
    Refuses an open session, and whatever :func:`check_recordable` refuses."""
    if not session.ended:
        raise ValueError("session: still open; a session is recorded once it has ended")
    m = session.meta
    spec = SessionSpec(agent, m.tier, m.mode, m.n_genes, session.seed, m.backwards, m.vocabulary, session.stance)
    record = _tool_record(spec, session, session.record(), wall_s)
    path = os.path.join(out_dir, SESSIONS_FILE)
    with folder_lock(out_dir, wait_s=wait_s):
        check_recordable(session, out_dir, agent=agent)
        _trim_unfinished(path)
        with open(path, "a", encoding="utf-8") as f:
            _append(f, record, session.seal)
    return path


def check_recordable(session, out_dir: str, *, agent: str = "mcp-client") -> None:
    """Raise ResultsError (file and line) if ``session`` could not be recorded
    in ``out_dir`` under ``agent``: the file written by another configuration
    (build, seal, budget, call limit) or this session already there.
    ``session``: a :class:`~luca_gym.worlds.luca.tools.ToolSession`, or a
    :class:`SessionSpec` (``agent`` is then its agent) with ``seal=`` and
    ``params=`` given through :func:`check_recordable_spec`."""
    m = session.meta
    spec = SessionSpec(agent, m.tier, m.mode, m.n_genes, session.seed, m.backwards, m.vocabulary, session.stance)
    check_recordable_spec(out_dir, spec, session.seal, session.env.params)


def check_recordable_spec(out_dir: str, spec: SessionSpec, seal, params) -> None:
    """:func:`check_recordable` from a session's spec, seal and ``core.EnvParams``
    alone (before the organism is generated)."""
    path = os.path.join(out_dir, SESSIONS_FILE)
    if not os.path.exists(path) or not os.path.getsize(path):
        return
    results = read_results(path, seal=seal)
    results.check_config(run_config(spec.agent, seal), {spec.key(): {"budget": params.budget, "call_limit": params.max_steps}})
    recorded = results.keys()
    if spec.key() in recorded:
        raise ResultsError(f"{path}:{recorded[spec.key()]}: this session ({_describe_key(spec.key())}) is already recorded; "
                           f"use another --out folder or agent name")


def _record(spec: SessionSpec, env: Session, log, scores, total, wall, truncated: bool = False, *, end_reason=None,
            organism_id=None, seal=None, base_url=None) -> dict:
    return {
        "agent": spec.agent,
        "tier": spec.tier,
        "mode": spec.mode,
        "n_genes": spec.n_genes,
        "seed": spec.seed,
        "backwards": spec.backwards,
        "vocabulary": spec.vocabulary,
        "stance": spec.stance,
        "organism_id": organism_id or seal_mod.instance_id(spec.seed, seal),
        "budget": env.params.budget,
        "call_limit": env.params.max_steps,
        "calls": log,
        "scores": scores,
        "n_alt": scores["n_alt"],
        "return": total,
        "truncated": truncated,
        "end_reason": end_reason,
        "wall_s": round(wall, 4),
        **run_config(spec.agent, seal, base_url),
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
        from luca_gym.tools.providers import make_agent

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


# -- the results file --------------------------------------------------------------
# Every line carries the configuration it was run under (CONFIG_FIELDS) and a
# digest of its content (a signature too when sealed), so a line from another
# build, model server or seal, or a line edited by hand, is refused by name
# instead of being mixed into the tables.
CONFIG_FIELDS = ("version", "sealed", "base_url", "budget", "call_limit")


def run_config(agent: str, seal=None, base_url: str | None = None) -> dict:
    """The configuration a session line records beside its key: the package
    version, the seal's fingerprint (None unsealed) and, for ``openai:``
    agents, the model server's base URL. (The agent spec names the model.)"""
    return {
        "version": __version__,
        "sealed": None if seal is None else seal.fingerprint,
        "base_url": base_url if str(agent).startswith("openai:") else None,
    }


def _canonical(record: dict) -> bytes:
    body = {k: v for k, v in record.items() if k not in ("digest", "signature")}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _append(f, record: dict, seal=None) -> None:
    """Write ``record`` as one line with its digest (and signature under a seal), then sync."""
    record = dict(record)
    data = _canonical(record)
    record["digest"] = hashlib.sha256(data).hexdigest()
    if seal is not None:
        record["signature"] = seal.sign(data)
    f.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")
    f.flush()
    os.fsync(f.fileno())


def _describe_key(key) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(KEY_FIELDS, key))


def _parse_line(path: str, lineno: int, raw: bytes, seal=None) -> dict:
    where = f"{path}:{lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); fix or remove that line") from None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{where}: corrupt line ({exc.msg}); fix or remove that line") from None
    except RecursionError:
        raise ResultsError(f"{where}: corrupt line (nested too deeply); fix or remove that line") from None
    missing = [k for k in (*REQUIRED_KEY_FIELDS, "scores") if not isinstance(record, dict) or k not in record]
    if not missing:
        scores = record["scores"]
        missing = [f"scores.{k}" for k in (*SCORE_FIELDS, *STRATEGY_FIELDS, "n_alt") if not isinstance(scores, dict) or k not in scores]
    if missing:
        raise ResultsError(f"{where}: corrupt line (missing {', '.join(missing)}); fix or remove that line")
    if "digest" in record:
        data = _canonical(record)
        if record["digest"] != hashlib.sha256(data).hexdigest():
            raise ResultsError(f"{where}: the line was changed after it was written (its digest does not match); "
                               f"remove it to run that session again")
        if seal is not None and record.get("sealed") == seal.fingerprint:
            if not hmac.compare_digest(str(record.get("signature", "")), seal.sign(data)):
                raise ResultsError(f"{where}: the line's signature does not match this seal; it was not written by a "
                                   f"sealed sweep with this secret, or was changed since; remove it")
    for field, default in KEY_DEFAULTS.items():  # after the digest check: a line written before the field existed
        record.setdefault(field, default)
    return record


def _complete(text: str) -> bool:
    """Whether a last line without its newline is nonetheless a whole record."""
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(record, dict) and all(k in record for k in (*REQUIRED_KEY_FIELDS, "scores"))


@dataclass
class Results:
    """A results file as read: the records (duplicates dropped), the line
    each came from, and the duplicate lines dropped (line, line kept)."""

    path: str
    records: list
    lines: list
    duplicates: list

    def keys(self) -> dict:
        """{session key: line number}."""
        return {tuple(r[k] for k in KEY_FIELDS): n for r, n in zip(self.records, self.lines)}

    def notes(self) -> list[str]:
        """What reading did beyond parsing (one line each), e.g. duplicates dropped."""
        if not self.duplicates:
            return []
        shown = ", ".join(f"line {d} (same session as line {k})" for d, k in self.duplicates[:5])
        more = f" and {len(self.duplicates) - 5} more" if len(self.duplicates) > 5 else ""
        return [f"{self.path}: {len(self.duplicates)} duplicate session line(s) ignored: {shown}{more}"]

    def check_config(self, config: dict, expected: dict | None = None, agents=None) -> None:
        """Refuse (ResultsError naming file and line) a line whose configuration
        differs from ``config`` or from ``expected`` ({key: {field: value}})
        for its session. The base URL is compared on ``openai:`` lines only
        (of ``agents``, when given: the agents this run uses)."""
        for record, lineno in zip(self.records, self.lines):
            for field, ours in config.items():
                agent = str(record["agent"])
                if field == "base_url" and not (agent.startswith("openai:") and (agents is None or agent in agents)):
                    continue
                theirs = record.get(field)
                if theirs != ours:
                    raise ResultsError(
                        f"{self.path}:{lineno}: written with {field}={theirs!r}; this run has {field}={ours!r}. "
                        f"Results of different configurations are never mixed: use another --out folder, or remove that line"
                    )
            want = (expected or {}).get(tuple(record[k] for k in KEY_FIELDS), {})
            for field, ours in want.items():
                if record.get(field) != ours:
                    raise ResultsError(
                        f"{self.path}:{lineno}: written with {field}={record.get(field)!r}; this run has {field}={ours!r} "
                        f"for that session. Use another --out folder, or remove that line"
                    )


def read_results(path: str, seal=None) -> Results:
    """A results file or folder, checked line by line (ResultsError names the
    file and line of the first problem): every line whole JSON in UTF-8 with
    the key and score fields, its digest intact (and its signature, for lines
    sealed with ``seal``), and the whole file from one build and one seal.
    A line cut short by an interrupted write (the last line, without its
    newline) is ignored; a repeated session keeps its first line."""
    if os.path.isdir(path):
        path = os.path.join(path, SESSIONS_FILE)
    if not os.path.exists(path):
        raise ResultsError(f"{path}: no such results file")
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last = lines[-1].decode("utf-8", errors="replace")
    complete = lines if _complete(last) else lines[:-1]
    records, linenos, duplicates, seen = [], [], [], {}
    first_config = None
    for lineno, raw in enumerate(complete, 1):
        if not raw.strip():
            continue
        record = _parse_line(path, lineno, raw, seal)
        config = {k: record.get(k) for k in ("version", "sealed")}
        if first_config is None:
            first_config = (config, lineno)
        elif config != first_config[0]:
            field = next(k for k in config if config[k] != first_config[0][k])
            raise ResultsError(
                f"{path}:{lineno}: written with {field}={config[field]!r}, but line {first_config[1]} with "
                f"{field}={first_config[0][field]!r}; a results file holds one build and one seal. Move those lines to another folder"
            )
        key = tuple(record[k] for k in KEY_FIELDS)
        if key in seen:
            duplicates.append((lineno, seen[key]))
            continue
        seen[key] = lineno
        records.append(record)
        linenos.append(lineno)
    return Results(path, records, linenos, duplicates)


def load_sessions(path: str) -> list[dict]:
    """Every session record of a results file or folder (see :func:`read_results`);
    duplicate lines are dropped with a :class:`ResultsWarning` saying which."""
    results = read_results(path)
    for note in results.notes():
        warnings.warn(note, ResultsWarning, stacklevel=2)
    return results.records


class ResultsWarning(UserWarning):
    """Something a reader of a results file should know (e.g. duplicate lines dropped)."""


@contextlib.contextmanager
def folder_lock(out_dir: str, wait_s: float = 0.0):
    """Hold ``out_dir``'s lock (an advisory ``flock`` on its sessions file,
    created empty if absent) while writing: two sweeps, or a sweep and an MCP
    recording, never write one folder at once. Waits up to ``wait_s``
    seconds, then raises ResultsError naming the folder."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, SESSIONS_FILE)
    f = open(path, "ab")
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ResultsError(
                        f"{out_dir}: another luca-gym run is writing this folder (it holds the lock on {path}); "
                        f"wait for it to finish or use another --out folder"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        f.close()  # closing releases the lock


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


def plan(agents, tiers, modes, n_genes, seeds, backwards=False, vocabulary="invented", stance="suppress") -> list[SessionSpec]:
    """The sessions of a sweep, validated (ValueError names the bad value and
    what is allowed). ``backwards``, ``vocabulary`` and ``stance`` each take
    one value or a list of them; every combination is planned, e.g.
    ``backwards=[False, True]`` for both arms of the paper's appendix E.1
    ablation, paired by seed (:mod:`luca_gym.ablation`)."""
    unique = lambda xs: list(dict.fromkeys(xs))  # noqa: E731 -- a repeated name runs once
    agents = unique(check_agent(a) for a in agents)
    tiers = unique(check_tier(t) for t in tiers)
    modes = unique(check_mode(m) for m in modes)
    n_genes = unique(check_n_genes(n) for n in n_genes)
    seeds = unique(check_seed(s) for s in seeds)
    backwards = unique(check_bool(b, "backwards") for b in _arms(backwards, "backwards"))
    vocabulary = unique(check_vocabulary(v) for v in _arms(vocabulary, "vocabulary"))
    stance = unique(check_stance(st) for st in _arms(stance, "stance"))
    for v in vocabulary:
        for n in n_genes:
            check_vocabulary(v, n)
    for a in agents:
        # A baseline that cannot play every mode and size says so before anything runs.
        check = getattr(BASELINES.get(a), "check_session", None)
        for m in modes if check else ():
            for n in n_genes:
                check(m, n)
    conditions = [(b, v, st) for b in backwards for v in vocabulary for st in stance]
    return [SessionSpec(a, t, m, n, s, *c) for n in n_genes for t in tiers for m in modes for c in conditions for a in agents for s in seeds]


def _arms(value, name: str) -> list:
    """One value, or a list or tuple of them (at least one)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name}: an empty list; give one value or several")
    return values


def sweep(
    specs: Iterable[SessionSpec],
    out_dir: str,
    policy_factory: Callable[[str], object] = make_runner,
    progress: Callable[[int, int, SessionSpec], None] | None = None,
    *,
    sealed=None,
    base_url: str | None = None,
    concurrency: int = 1,
    retries: int | None = None,
    backoff: float | None = None,
    price=None,
) -> str:
    """Run every session of ``specs`` not yet in ``out_dir``, appending each
    record as it ends. Returns the results file's path.

    ``sealed`` (:mod:`luca_gym.seal`) runs sealed organisms; ``base_url`` is
    recorded for ``openai:`` agents (pass the one their runner uses). The
    folder is locked for the whole sweep; a line already there from another
    configuration (build, seal, model server, budget) is refused with its file
    and line, never mixed in or counted as done.

    Tool-calling (LLM) agents: a failed provider call is retried ``retries``
    times with exponential ``backoff`` (:func:`~luca_gym.tools.loop.run_agent`),
    and ``price`` ((input, output) USD per million tokens) gives each record its
    ``cost_usd``. ``concurrency`` K > 1 runs up to K of their sessions at once
    (:func:`_run_concurrently`); baseline and learned policies run one at a
    time first (their sessions are compute, not waiting, and a learned policy
    is one shared object). Records are written by this thread alone, whole
    lines in the order sessions end, so an interrupted sweep loses only the
    sessions in flight and a rerun runs exactly those left.

    A session whose provider still fails after its retries is not recorded: a
    line on file is a session its agent played to the end, so a provider's
    outage never enters the scores, and a rerun runs it again. At concurrency
    1 it stops the sweep, as does any error; at K the sweep goes on (a
    ProviderError at the end counts the unrecorded sessions) until K sessions
    in a row give up or a non-retryable error (bad key, unknown model, bad
    request: every session would fail alike) stops it. Sessions in flight then
    finish and are recorded; no new one starts."""
    from luca_gym.tools.loop import check_retry

    specs = list(dict.fromkeys(specs))
    seal = seal_mod.make_seal(sealed)
    concurrency = check_concurrency(concurrency)
    check_retry(retries if retries is not None else 0, backoff if backoff is not None else 0)
    price = check_price(price)
    path = os.path.join(out_dir, SESSIONS_FILE)

    def run(runner, spec, sleep=time.sleep) -> dict:
        if hasattr(runner, "act"):
            return run_session(runner, spec, sealed=seal)
        return run_tool_session(runner, spec, sealed=seal, base_url=base_url, retries=retries, backoff=backoff, price=price,
                                sleep=sleep)

    with folder_lock(out_dir):
        done = set()
        if os.path.getsize(path):
            results = read_results(path, seal=seal)
            expected = {s.key(): _expected_fields(s) for s in specs}
            config = {"version": __version__, "sealed": None if seal is None else seal.fingerprint, "base_url": base_url}
            results.check_config(config, expected, agents={s.agent for s in specs})
            done = set(results.keys())
            _trim_unfinished(path)
        todo = [s for s in specs if s.key() not in done]
        with open(path, "a", encoding="utf-8") as f:
            written = [0]

            def write(record: dict) -> None:
                _append(f, record, seal)
                written[0] += 1

            def started(spec: SessionSpec) -> None:
                if progress:
                    progress(written[0], len(todo), spec)

            queued = []
            for spec in todo:
                runner = policy_factory(spec.agent)
                if concurrency > 1 and not hasattr(runner, "act"):
                    queued.append((spec, functools.partial(_stoppable_run, run, runner, spec)))
                    continue
                started(spec)
                write(run(runner, spec))
            if queued:
                started(queued[0][0])
                _compile_once([spec for spec, _ in queued], seal)
            outcome = _run_concurrently(queued, concurrency, write, started) if queued else ([], 0)
            if progress:
                progress(len(todo), len(todo), None)
    _raise_unrecorded(*outcome, concurrency)
    return path


def check_concurrency(concurrency) -> int:
    """``concurrency`` an integer >= 1; ValueError naming it otherwise."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency: {concurrency!r}; allowed an integer >= 1 (sessions at once; 1: one after another)")
    return concurrency


def _compile_once(specs, seal) -> None:
    """Compile what the sessions of ``specs`` run, once per organism
    configuration, before they run side by side: JAX does not share a compile
    in progress, so K threads meeting an uncompiled program would compile it
    K times over (measured on 2 CPU cores, a cold cache, 64 sessions in 4
    configurations at concurrency 16: 18 min without this, 66 s with it, 61 s
    one at a time). Each configuration's first organism
    is opened and ended (no agent, nothing recorded); the session that follows
    reuses the organism and the compiled programs."""
    from luca_gym.worlds.luca.tools import ToolSession

    configurations = {(s.tier, s.mode, s.n_genes, s.backwards, s.vocabulary): s for s in reversed(specs)}
    for spec in configurations.values():
        ToolSession(**spec.settings(), sealed=seal).call("end")


class _Stopped(Exception):
    """The sweep was interrupted while this session ran: it ends, unrecorded."""


def _stoppable_run(run, runner, spec: SessionSpec, stop: threading.Event) -> dict:
    """``run(runner, spec)`` that ends (raising _Stopped) at its next provider
    call or backoff wait once ``stop`` is set."""

    def turn(messages, tools):
        if stop.is_set():
            raise _Stopped
        return runner(messages, tools)

    def sleep(seconds: float) -> None:
        if stop.wait(seconds):
            raise _Stopped

    return run(turn, spec, sleep=sleep)


def _run_concurrently(jobs, concurrency: int, write, started) -> tuple[list, int]:
    """Run ``jobs`` ([(spec, run)], ``run(stop)`` -> record) at most
    ``concurrency`` at once; ``write(record)`` as each ends and ``started(spec)``
    as each begins, both in the calling thread. Returns the sessions that gave
    up on a retryable provider error ([(spec, ProviderError)]) and how many
    were never started; raises the first other error once those in flight end.

    Whole sessions run in threads, each scheduled by asyncio under a semaphore
    of ``concurrency``: an agent is a synchronous callable and a session is
    owned by one thread from start to end (no session state crosses threads),
    while provider calls and backoff waits, nearly all of an LLM session's
    time, release the GIL. Awaiting a thread per provider call instead would
    hop a session between threads for no gain. Interrupted (Ctrl-C cancels the
    asyncio task; a record is written between awaits, so never half), no new
    session starts and those in flight end, unrecorded, at their next provider
    call or backoff wait: this returns once their calls in flight come back
    (a thread cut off inside the simulator at exit can abort the process)."""
    from luca_gym.tools.loop import ProviderError

    stop, threads = threading.Event(), []

    async def main():
        slots = asyncio.Semaphore(concurrency)
        state = {"error": None, "streak": 0, "not_started": 0}
        gave_up = []

        async def one(spec, run):
            async with slots:
                if stop.is_set() or state["error"] is not None or state["streak"] >= concurrency:
                    state["not_started"] += 1
                    return
                started(spec)
                try:
                    record = await _in_thread(functools.partial(run, stop), threads)
                except _Stopped:
                    return
                except ProviderError as exc:
                    if exc.retryable:
                        gave_up.append((spec, exc))
                        state["streak"] += 1
                    elif state["error"] is None:
                        state["error"] = exc
                    return
                except Exception as exc:  # noqa: BLE001 -- kept, and raised once the sessions in flight are recorded
                    if state["error"] is None:
                        state["error"] = exc
                    return
                state["streak"] = 0
                write(record)

        try:
            await asyncio.gather(*(one(spec, run) for spec, run in jobs))
        finally:
            stop.set()  # sessions still running (the sweep was interrupted) end at their next call
        if state["error"] is not None:
            raise state["error"]
        return gave_up, state["not_started"]

    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(main())
        # Called from a running event loop (a notebook): ours runs in a thread of its own.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(asyncio.run, main())
            try:
                return future.result()
            except BaseException:
                stop.set()  # leaving the block waits for the loop, whose sessions now end at their next call
                raise
    finally:
        stop.set()
        for thread in threads:
            thread.join()


async def _in_thread(fn, threads: list):
    """``fn()`` in a thread of its own (appended to ``threads``); its result, or its exception, here."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if future.cancelled():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def work() -> None:
        try:
            outcome = (fn(), None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the awaiting task
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: the sweep was interrupted
            loop.call_soon_threadsafe(settle, *outcome)

    thread = threading.Thread(target=work, name="luca-gym-session")
    threads.append(thread)
    thread.start()
    return await future


def _raise_unrecorded(gave_up: list, not_started: int, concurrency: int) -> None:
    """A ProviderError counting the sessions a concurrent sweep left unrecorded, if any."""
    if not gave_up:
        return
    from luca_gym.tools.loop import ProviderError

    spec, first = gave_up[0]
    stopped = (f"; the sweep stopped after {concurrency} in a row gave up, {not_started} not started" if not_started else "")
    raise ProviderError(
        f"{len(gave_up)} session(s) not recorded, their provider still failing after the retries "
        f"(first: {_describe_key(spec.key())}: {first}){stopped}",
        retryable=True, cause=first,
    )


def _expected_fields(spec: SessionSpec) -> dict:
    """What a session of ``spec`` run now records beside its key (the default budget and call limit)."""
    from luca_gym.worlds.luca.core import make_params

    params = make_params(spec.tier, spec.n_genes, spec.mode)
    return {"budget": params.budget, "call_limit": params.max_steps}


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
    "KEY_DEFAULTS",
    "PAPER_COMPOSITE",
    "PAPER_SCALING",
    "ResultsError",
    "ResultsWarning",
    "Results",
    "SessionSpec",
    "agents_in",
    "check_agent",
    "is_learned_agent",
    "composite_table",
    "disease_table",
    "load_sessions",
    "group",
    "folder_lock",
    "read_results",
    "record_tool_session",
    "check_recordable",
    "check_recordable_spec",
    "run_config",
    "plan",
    "run_session",
    "run_tool_session",
    "check_price",
    "check_concurrency",
    "session_cost",
    "scaling_table",
    "strategy_table",
    "summary",
    "sweep",
]
