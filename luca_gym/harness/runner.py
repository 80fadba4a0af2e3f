"""One session of one agent: :func:`run_session` (a policy, through the
world's policy loop over its tool session), :func:`run_tool_session` (a
tool-calling agent on the tool session) and the JSON-ready record both
write; :func:`record_tool_session` for sessions driven from outside
(``luca-gym mcp --out``)."""

from __future__ import annotations

import os
import time
from typing import Callable

from luca_gym import seal as seal_mod
from luca_gym import worlds
from luca_gym.protocol import POLICY, TOOL_AGENT, SessionSpec, load, runner_kind
from luca_gym.harness.agents import check_price, session_cost
from luca_gym.harness.spec import ResultsError, expected_fields, session_key
from luca_gym.harness.results import SESSIONS_FILE, append_record, describe_key, trim_unfinished, folder_lock, read_results, run_config
from luca_gym.tools.session import tool_options


def run_session(policy, spec: SessionSpec, env=None, max_calls: int | None = None, *, sealed=None) -> dict:
    """Run one session of ``policy`` (a baseline or learned
    :class:`~luca_gym.protocol.Policy`) through the world's ``World.play``
    (the generic policy loop over its tool session) and return its
    JSON-ready record. ``env``, if given, is the session to reuse (LUCA's:
    its host session), built from ``spec``'s settings (and ``sealed``,
    :mod:`luca_gym.seal`)."""
    seal = seal_mod.make_seal(sealed)
    world = worlds.get(spec.world)
    if runner_kind(policy) != POLICY:
        raise ValueError(f"agent {spec.agent!r}: a tool agent, not a policy (reset and act); run it with run_tool_session")
    if world.play is None:
        raise ValueError(f"agent {spec.agent!r}: world {spec.world!r} has no policy runner (World.play); its agents are tool agents")
    started = time.perf_counter()
    try:
        out = load(world.play)(policy, spec.seed, env=env, max_calls=max_calls, sealed=seal, **spec.options())
    except RuntimeError as exc:
        raise RuntimeError(f"agent {spec.agent!r}: {exc}") from None
    return _record(spec, out["fields"], out["calls"], out["scores"], out["return"], time.perf_counter() - started,
                   truncated=out["truncated"], end_reason=out["end_reason"], seal=seal)


def run_tool_session(
    agent, spec: SessionSpec, env=None, *, sealed=None, base_url: str | None = None,
    retries: int | None = None, backoff: float | None = None, price=None, sleep: Callable[[float], object] = time.sleep,
    python: bool = False, analysis_tools: bool = False, request: dict | None = None,
) -> dict:
    """Run one session of a tool-calling agent (a language model, or a world's
    tool-agent baseline) through the world's tool session (``World.tools``);
    same record format, plus
    ``usage`` (tokens, provider calls, retries and the failed calls, see
    :func:`~luca_gym.llm.loop.run_agent`), ``price_usd_per_mtok`` and
    ``cost_usd`` (None without a ``price``, (input, output) USD per million
    tokens). A failed provider call is retried ``retries`` times, waiting
    ``backoff`` seconds and more (run_agent's defaults when None); if it still
    fails, the ProviderError is raised and nothing is returned to record.

    ``python=True`` offers the generic ``python`` tool (a world whose tool
    session offers it, sealed: :func:`~luca_gym.tools.session.tool_options`):
    the agent then has the session's turns (the paper harness's 30,
    :data:`~luca_gym.tools.session.PYTHON_TURNS`), as agent turns here and as
    calls in the session, and the record says ``python: true``. Such a
    session drops the world's structured analysis tools unless
    ``analysis_tools=True`` (the record then says ``analysis_tools: true``).

    ``request``: the run's request settings, kept in a model agent's record
    as ``request`` (None without any); its ``max_turns`` caps the agent's
    turns (below the session's own limit, where it has one)."""
    from luca_gym.harness.agents import is_llm_agent
    from luca_gym.llm.loop import run_agent

    if runner_kind(agent) != TOOL_AGENT:
        raise ValueError(f"agent {spec.agent!r}: a policy (reset and act), not a tool agent; run it with run_session")
    price = check_price(price)
    retry = {k: v for k, v in (("retries", retries), ("backoff", backoff)) if v is not None}
    started = time.perf_counter()
    session = open_tool_session(spec, sealed, env=env, python=python, analysis_tools=analysis_tools)
    try:
        limits = [n for n in (session.turn_limit, (request or {}).get("max_turns")) if n is not None]
        turns = {"max_turns": min(limits)} if limits else {}
        result = run_agent(agent, session, sleep=sleep, **retry, **turns)
    finally:
        session.close()  # its sandbox, should the agent's provider fail mid-session
    record = _tool_record(spec, session, result, time.perf_counter() - started, base_url=base_url, price=price)
    if is_llm_agent(spec.agent):
        record["request"] = request or None
    return record


def open_tool_session(spec: SessionSpec, sealed=None, env=None, *, python: bool = False, analysis_tools: bool = False):
    """The world's tool session for ``spec`` (``env``: the world's host session
    to reuse, where it takes one; ``python``: offer the python tool, where the
    world does, and ``analysis_tools``: keep the world's analysis tools beside
    it: else ValueError naming the world)."""
    open_tools = load(worlds.get(spec.world).tools)
    options = tool_options(open_tools, python=python, sealed=sealed, analysis_tools=analysis_tools)
    return open_tools(spec.seed, sealed=sealed, **options, **spec.options(), **({} if env is None else {"env": env}))


# What a session's own record holds that the harness writes itself.
_HARNESS_FIELDS = ("calls", "scores", "return", "end_reason", "messages", "usage")
# A transcript kept inline in the results line (whole, in order; documented in the results guide).
TRANSCRIPT = "messages"


def _tool_record(spec: SessionSpec, session, result: dict, wall: float, base_url: str | None = None, price=None) -> dict:
    record = _record(
        spec, session.record_fields(), result["calls"], session.scores, result["return"], wall, truncated=session.truncated,
        end_reason=session.end_reason, seal=session.seal, base_url=base_url,
    )
    record.update({k: v for k, v in result.items() if k not in _HARNESS_FIELDS and k not in record})  # e.g. hypotheses
    if session.python:  # a session offered the python tool; a folder holds such sessions only (sweep, check_recordable)
        record["python"] = True
    if session.analysis_tools:  # ... and kept the world's analysis tools beside it
        record["analysis_tools"] = True
    record["usage"] = result.get("usage")  # None for a session driven from outside (MCP)
    if result.get(TRANSCRIPT) is not None:  # the whole conversation, inline (a session driven from outside has none)
        record[TRANSCRIPT] = result[TRANSCRIPT]
    record["price_usd_per_mtok"] = None if price is None else list(price)
    record["cost_usd"] = session_cost(record["usage"], price)
    return record


def session_spec(session, agent: str) -> SessionSpec:
    """The spec of a tool session (its world's key settings from ``session.key_settings()``)."""
    world = worlds.get(session.world)
    settings = session.key_settings()
    return SessionSpec(agent, session.seed, world.name, tuple((k, settings[k]) for k in world.session_keys if k != "seed"))


def record_tool_session(session, out_dir: str, *, agent: str = "mcp-client", wall_s: float = 0.0, wait_s: float = 5.0,
                        messages: list | None = None) -> str:
    """Append an ended tool session (driven from outside the harness, e.g.
    over MCP) to ``out_dir/sessions.jsonl`` in the harness format, under the
    folder's lock (waiting up to ``wait_s`` seconds for it); ``luca-gym
    report`` reads it. ``messages``: the session's transcript where its
    driver kept one (``luca-gym play``'s shell), kept inline as the line's
    ``messages``. Returns the file's path. Refuses an open session, and
    whatever :func:`check_recordable` refuses."""
    if not session.ended:
        raise ValueError("session: still open; a session is recorded once it has ended")
    result = session.record() if messages is None else {**session.record(), TRANSCRIPT: messages}
    record = _tool_record(session_spec(session, agent), session, result, wall_s)
    path = os.path.join(out_dir, SESSIONS_FILE)
    with folder_lock(out_dir, wait_s=wait_s):
        check_recordable(session, out_dir, agent=agent)
        trim_unfinished(path)
        with open(path, "a", encoding="utf-8") as f:
            append_record(f, record, session.seal)
    return path


def check_recordable(session, out_dir: str, *, agent: str = "mcp-client") -> None:
    """Raise ResultsError (file and line) if tool session ``session`` could
    not be recorded in ``out_dir`` under ``agent``: the file written by
    another configuration (build, seal, the world's expected fields such as
    LUCA's budget and call limit) or this session already there."""
    spec = session_spec(session, agent)
    fields = session.record_fields()
    check_recordable_spec(out_dir, spec, session.seal, {k: fields[k] for k in expected_fields(spec) if k in fields},
                          python=session.python, analysis_tools=session.analysis_tools)


def check_recordable_spec(out_dir: str, spec: SessionSpec, seal, fields: dict, *, python: bool = False,
                          analysis_tools: bool = False) -> None:
    """:func:`check_recordable` from a session's spec, seal and the record
    fields the folder must agree on (:func:`~luca_gym.harness.spec.expected_fields`'s
    names with the session's values), before the instance is generated;
    ``python``: whether the session offers the python tool, ``analysis_tools``
    whether it kept the analysis tools beside it (a folder holds sessions of
    one kind, never both)."""
    path = os.path.join(out_dir, SESSIONS_FILE)
    if not os.path.exists(path) or not os.path.getsize(path):
        return
    results = read_results(path, seal=seal)
    results.check_config({**run_config(spec.agent, seal), **python_config(python, analysis_tools)}, {session_key(spec): dict(fields)})
    recorded = results.keys()
    if session_key(spec) in recorded:
        raise ResultsError(f"{path}:{recorded[session_key(spec)]}: this session ({describe_key(session_key(spec))}) is already recorded; "
                           f"use another --out folder or agent name")


def python_config(python: bool, analysis_tools: bool = False) -> dict:
    """The results folder's python fields: a line of a session with the python
    tool says ``python: true`` (and ``analysis_tools: true`` where it kept
    the world's analysis tools), one without has no such field (None), so a
    folder's lines are compared on them like the run configuration."""
    return {"python": True if python else None, "analysis_tools": True if analysis_tools else None}


def _record(spec: SessionSpec, fields: dict, log, scores, total, wall, truncated: bool = False, *, end_reason=None,
            seal=None, base_url=None) -> dict:
    """A results line: the world, the session's key fields, the world's own
    ``fields`` (LUCA: organism id, budget, call limit, n_alt), the calls, the
    scores, the return and the run's configuration."""
    return {
        "world": spec.world,
        "world_version": worlds.get(spec.world).version,
        "agent": spec.agent,
        **spec.options(),
        "seed": spec.seed,
        **fields,
        "calls": log,
        "scores": scores,
        "return": total,
        "truncated": truncated,
        "end_reason": end_reason,
        "wall_s": round(wall, 4),
        **run_config(spec.agent, seal, base_url),
    }
