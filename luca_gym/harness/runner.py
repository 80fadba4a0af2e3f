"""One session of one agent: :func:`run_session` (a policy on the host
session), :func:`run_tool_session` (a tool-calling agent on the tool session)
and the JSON-ready record both write; :func:`record_tool_session` for
sessions driven from outside (``luca-gym mcp --out``)."""

from __future__ import annotations

import os
import time
from typing import Callable

from luca_gym.worlds.luca import calls
from luca_gym import seal as seal_mod
from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.worlds.luca import WORLD as LUCA
from luca_gym.worlds.luca.baselines import Policy
from luca_gym.worlds.luca.session import Session
from luca_gym.harness.agents import check_price, session_cost
from luca_gym.harness.spec import ResultsError, SessionSpec, luca_spec
from luca_gym.harness.results import SESSIONS_FILE, append_record, describe_key, trim_unfinished, folder_lock, read_results, run_config


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
    if spec.world != LUCA.name:
        raise ValueError(f"agent {spec.agent!r}: run_session plays LUCA's policies; on world {spec.world!r} agents are tool agents")
    env, obs = calls.open_session(**_organism_settings(spec), env=env, sealed=seal)
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
    fields = {"organism_id": seal_mod.instance_id(spec.seed, seal), "budget": env.params.budget,
              "call_limit": env.params.max_steps, "n_alt": info["scores"]["n_alt"]}
    return _record(spec, fields, log, info["scores"], total, time.perf_counter() - started, truncated=bool(truncated),
                   end_reason="call_limit" if truncated else "end", seal=seal)


def _organism_settings(spec: SessionSpec) -> dict:
    """A LUCA spec's organism settings and seed, as :func:`luca_gym.worlds.luca.calls.open_session`
    takes them (the stance is the prompt's, not the organism's)."""
    return {"seed": spec.seed, **{k: v for k, v in spec.settings if k != "stance"}}


def run_tool_session(
    agent, spec: SessionSpec, env: Session | None = None, *, sealed=None, base_url: str | None = None,
    retries: int | None = None, backoff: float | None = None, price=None, sleep: Callable[[float], object] = time.sleep,
) -> dict:
    """Run one session of a tool-calling agent (a language model, or a world's
    tool-agent baseline) through the world's tool session (LUCA's:
    :class:`~luca_gym.worlds.luca.tools.ToolSession`); same record format, plus
    ``usage`` (tokens, provider calls, retries and the failed calls, see
    :func:`~luca_gym.tools.loop.run_agent`), ``price_usd_per_mtok`` and
    ``cost_usd`` (None without a ``price``, (input, output) USD per million
    tokens). A failed provider call is retried ``retries`` times, waiting
    ``backoff`` seconds and more (run_agent's defaults when None); if it still
    fails, the ProviderError is raised and nothing is returned to record."""
    from luca_gym.tools.loop import run_agent

    price = check_price(price)
    retry = {k: v for k, v in (("retries", retries), ("backoff", backoff)) if v is not None}
    started = time.perf_counter()
    session = open_tool_session(spec, sealed, env=env)
    result = run_agent(agent, session, sleep=sleep, **retry)
    return _tool_record(spec, session, result, time.perf_counter() - started, base_url=base_url, price=price)


def open_tool_session(spec: SessionSpec, sealed=None, env=None):
    """The world's tool session for ``spec`` (``env``: LUCA's Session to reuse)."""
    open_tools = load(worlds.get(spec.world).tools)
    return open_tools(spec.seed, sealed=sealed, **spec.options(), **({} if env is None else {"env": env}))


# What a session's own record holds that the harness writes itself.
_HARNESS_FIELDS = ("calls", "scores", "return", "end_reason", "messages", "usage")


def _tool_record(spec: SessionSpec, session, result: dict, wall: float, base_url: str | None = None, price=None) -> dict:
    record = _record(
        spec, session.record_fields(), result["calls"], session.scores, result["return"], wall, truncated=session.truncated,
        end_reason=session.end_reason, seal=session.seal, base_url=base_url,
    )
    record.update({k: v for k, v in result.items() if k not in _HARNESS_FIELDS and k not in record})  # e.g. hypotheses
    record["usage"] = result.get("usage")  # None for a session driven from outside (MCP)
    record["price_usd_per_mtok"] = None if price is None else list(price)
    record["cost_usd"] = session_cost(record["usage"], price)
    return record


def record_tool_session(session, out_dir: str, *, agent: str = "mcp-client", wall_s: float = 0.0, wait_s: float = 5.0) -> str:
    """Append an ended :class:`~luca_gym.worlds.luca.tools.ToolSession` (driven
    from outside the harness, e.g. over MCP) to ``out_dir/sessions.jsonl`` in
    the harness format, under the folder's lock (waiting up to ``wait_s``
    seconds for it); ``luca-gym report`` reads it. Returns the file's path.
    Refuses an open session, and whatever :func:`check_recordable` refuses."""
    if not session.ended:
        raise ValueError("session: still open; a session is recorded once it has ended")
    m = session.meta
    spec = luca_spec(agent, m.tier, m.mode, m.n_genes, session.seed, m.backwards, m.vocabulary, session.stance)
    record = _tool_record(spec, session, session.record(), wall_s)
    path = os.path.join(out_dir, SESSIONS_FILE)
    with folder_lock(out_dir, wait_s=wait_s):
        check_recordable(session, out_dir, agent=agent)
        trim_unfinished(path)
        with open(path, "a", encoding="utf-8") as f:
            append_record(f, record, session.seal)
    return path


def check_recordable(session, out_dir: str, *, agent: str = "mcp-client") -> None:
    """Raise ResultsError (file and line) if ``session`` could not be recorded
    in ``out_dir`` under ``agent``: the file written by another configuration
    (build, seal, budget, call limit) or this session already there.
    ``session``: a :class:`~luca_gym.worlds.luca.tools.ToolSession`, or a
    :class:`SessionSpec` (``agent`` is then its agent) with ``seal=`` and
    ``params=`` given through :func:`check_recordable_spec`."""
    m = session.meta
    spec = luca_spec(agent, m.tier, m.mode, m.n_genes, session.seed, m.backwards, m.vocabulary, session.stance)
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
        raise ResultsError(f"{path}:{recorded[spec.key()]}: this session ({describe_key(spec.key())}) is already recorded; "
                           f"use another --out folder or agent name")


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
