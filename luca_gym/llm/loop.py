"""The agent loop over any world's tool session: :func:`run_agent` with
retries and backoff on provider errors, token accounting, and the scripted
agents (:class:`ScriptedAgent`, :class:`ReplayAgent`) that drive a session
without a network. The provider adapters are in :mod:`luca_gym.llm.providers`.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from luca_gym.tools.session import ToolSessionBase


@dataclass
class ToolCall:
    """One tool call an agent made: the tool's name, its arguments (as the agent gave them) and a call id."""
    name: str
    arguments: Any
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")


@dataclass
class AgentTurn:
    """What an agent returns: optional text, the tool calls it makes and, for a
    provider's model, the tokens the call used (``{"input_tokens",
    "output_tokens"}``, each an int or None when the provider did not say) and
    the reasoning text where the provider returns one, and why the model
    stopped (``finish_reason``: the provider's word, e.g. ``"tool_calls"``,
    ``"stop"``, ``"length"``: the token cap cut the turn)."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict | None = None
    reasoning: str | None = None  # the model's reasoning text, where its provider returns it
    finish_reason: str | None = None


# An agent: (messages, tool specs) -> AgentTurn. Messages use a neutral format:
# {"role": "system"|"user", "content"}, {"role": "assistant", "content",
# "tool_calls": [{"id", "name", "arguments"}]}, {"role": "tool", "tool_call_id",
# "name", "content"}.
Agent = Callable[[list, list], AgentTurn]


def tool_results(messages) -> list[dict]:
    """The tool results in ``messages`` so far (JSON objects, in order),
    refusals and anything that is not a JSON object left out: what a
    scripted tool agent reads back."""
    return [result for _, result in tool_results_with_ids(messages)]


def tool_results_with_ids(messages) -> list[tuple]:
    """``(tool_call_id, result)`` for :func:`tool_results`' results: which call each answers."""
    out = []
    for m in messages:
        if m.get("role") == "tool":
            try:
                result = json.loads(m["content"])
            except (TypeError, ValueError):
                continue
            if isinstance(result, dict) and "error" not in result:
                out.append((m.get("tool_call_id"), result))
    return out


# The transcript's messages, built in one place for every path that keeps one
# (run_agent, the text env, play): see run_agent for the format.
def opening_messages(session) -> list[dict]:
    """A transcript's first messages: the session's system prompt
    (``{"role": "system"}``) and its opening (``{"role": "user"}``)."""
    return [{"role": "system", "content": session.system_prompt()}, {"role": "user", "content": session.opening}]


def assistant_message(content, tool_calls=(), *, latency_s: float | None = None, reasoning: str | None = None,
                      usage=None, finish_reason: str | None = None) -> dict:
    """One assistant turn of a transcript: its text (``content``, None for
    none), its ``tool_calls`` (:class:`ToolCall` objects) as ``{"id", "name",
    "arguments"}``, and, where known, ``latency_s``, the provider's
    ``reasoning`` text, the turn's ``usage`` (``input_tokens``,
    ``output_tokens``) and its ``finish_reason``."""
    said = {"role": "assistant", "content": content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in tool_calls]}
    if latency_s is not None:
        said["latency_s"] = latency_s
    if reasoning:
        said["reasoning"] = reasoning
    if isinstance(usage, dict):
        said["usage"] = {k: usage.get(k) for k in ("input_tokens", "output_tokens")}
    if isinstance(finish_reason, str) and finish_reason:
        said["finish_reason"] = finish_reason
    return said


def tool_message(call_id, name, result, content: str | None = None) -> dict:
    """One tool result of a transcript: the call's id and tool name, the
    result as the agent read it (``content``; by default ``result`` as JSON)
    and ``is_error`` (the session refused the call)."""
    return {"role": "tool", "tool_call_id": call_id, "name": name,
            "content": json.dumps(result) if content is None else content,
            "is_error": isinstance(result, dict) and "error" in result}


RETRIES = 5  # times a failed provider call is made again (rate limit, overload, timeout, connection)
BACKOFF_S = 1.0  # seconds before the first retry, doubled at each one (with jitter)
MAX_BACKOFF_S = 60.0


def check_retry(retries, backoff) -> tuple[int, float]:
    """``retries`` a non-negative integer and ``backoff`` a non-negative number
    of seconds; ValueError naming the bad one otherwise."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries: {retries!r}; allowed an integer >= 0 (0: no retry)")
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not 0 <= backoff < float("inf"):
        raise ValueError(f"backoff: {backoff!r}; allowed a number of seconds >= 0 (0: retry at once)")
    return retries, float(backoff)


def backoff_delay(attempt: int, backoff: float, rng=random) -> float:
    """Seconds to wait before retrying after failed attempt ``attempt`` (from 0):
    ``backoff * 2**attempt``, at most MAX_BACKOFF_S, times a random factor in
    [0.5, 1), so that sessions throttled together do not retry in step."""
    return min(MAX_BACKOFF_S, backoff * 2**attempt) * (0.5 + 0.5 * rng.random())


MAX_TURNS = 300  # agent turns of a session unless the session or the caller sets fewer


def check_max_turns(max_turns) -> int:
    """``max_turns`` an integer >= 1; ValueError naming it otherwise."""
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns: {max_turns!r}; allowed an integer >= 1 (agent turns a session may take)")
    return max_turns


def run_agent(
    agent: Agent, session: ToolSessionBase, max_turns: int = MAX_TURNS, *, retries: int = RETRIES, backoff: float = BACKOFF_S,
    sleep: Callable[[float], Any] = time.sleep,
) -> dict:
    """Let ``agent`` drive ``session`` until it ends (or ``max_turns`` turns,
    or a turn with no tool call: then the session is ended for it, and
    ``record["end_reason"]`` says ``"turn_limit"`` or ``"no_tool_call"``).
    Returns the session record; the messages exchanged are in ``record["messages"]``:
    the whole transcript in order (system, user, each assistant turn with its
    text, reasoning where the provider returns it, tool calls, tokens and
    latency, each tool result), and, for a session the harness ended, the
    closing ``end`` call and its result (so tool messages and recorded calls
    match one for one).

    A provider call that fails with a retryable :class:`ProviderError` (rate
    limit, overload, timeout, lost connection, an answer in an unusable shape)
    is made again with the same messages, up to ``retries`` times, ``sleep``
    waiting :func:`backoff_delay` before each: the session is touched only by
    a turn that came back, so a failed call changes nothing. A non-retryable
    error (bad key, unknown model, bad request), or a retryable one that
    outlasts the retries, is raised and the session is left unfinished;
    except the model's own failure (``ProviderError.model_failure``: an
    answer that cannot be read, a server error on the model's output such as
    a tool call cut off mid-JSON, a conversation past the model's context):
    the session is then ended for it, ``end_reason`` ``"model_error"``, and
    ``record["model_error"]`` keeps the error; it is scored like any session
    the agent stopped.

    ``record["usage"]``: ``input_tokens`` and ``output_tokens`` summed over
    the calls that reported them (None if none did), ``provider_calls`` (every
    call, failed ones included), ``retries``, and ``failed_calls``, one
    ``{"turn", "attempt", "error"}`` per failed call (turn and attempt count from 0)."""
    retries, backoff = check_retry(retries, backoff)
    max_turns = check_max_turns(max_turns)
    messages: list[dict] = opening_messages(session)
    specs = session.tool_specs()
    usage = {"input_tokens": None, "output_tokens": None, "provider_calls": 0, "retries": 0, "failed_calls": []}
    reason, failure = "turn_limit", None
    for index in range(max_turns):
        asked = time.perf_counter()
        try:
            turn = _ask(agent, messages, specs, index, usage, retries, backoff, sleep)
        except ProviderError as exc:
            if not exc.model_failure:
                raise
            reason, failure = "model_error", str(exc)
            break
        messages.append(assistant_message(turn.content, turn.tool_calls, latency_s=round(time.perf_counter() - asked, 4),
                                          reasoning=turn.reasoning, usage=turn.usage, finish_reason=turn.finish_reason))
        if not turn.tool_calls:
            reason = "no_tool_call"
            break
        for c in turn.tool_calls:
            result = session.call(c.name, c.arguments)
            messages.append(tool_message(c.id, c.name, result))
            if session.ended:
                break
        if session.ended:
            break
    if not session.ended:  # the harness ends it for an agent that stopped, and says why; the transcript shows the end
        session.finish(reason)
        end = session.record()["calls"][-1]
        messages.append({"role": "assistant", "content": None, "harness": reason,
                         "tool_calls": [{"id": "harness_end", "name": end["call"], "arguments": end.get("arguments", {})}]})
        messages.append(tool_message("harness_end", end["call"], end.get("result")))
    record = session.record()
    record["messages"] = messages
    record["usage"] = usage
    if failure is not None:
        record["model_error"] = failure
    return record


def _ask(agent: Agent, messages: list, specs: list, turn: int, usage: dict, retries: int, backoff: float, sleep) -> AgentTurn:
    """One turn's provider call, retried as :func:`run_agent` says; ``usage`` counts it."""
    for attempt in range(retries + 1):
        usage["provider_calls"] += 1
        try:
            answer = agent(messages, specs)
        except ProviderError as exc:
            _add_tokens(usage, exc.usage)  # a malformed answer's tokens are billed all the same
            usage["failed_calls"].append({"turn": turn, "attempt": attempt, "error": str(exc)})
            if not exc.retryable:
                raise
            if attempt == retries:
                raise ProviderError(f"{exc} (gave up after {attempt + 1} attempts)", retryable=True, cause=exc.cause,
                                    model_failure=exc.model_failure) from exc
            usage["retries"] += 1
            sleep(backoff_delay(attempt, backoff))
            continue
        _add_tokens(usage, answer.usage)
        return answer


def _add_tokens(usage: dict, reported) -> None:
    for key in ("input_tokens", "output_tokens"):
        value = reported.get(key) if isinstance(reported, dict) else None
        if is_count(value):
            usage[key] = (usage[key] or 0) + value


def is_count(value) -> bool:
    """A non-negative int (not a bool): a token count a provider may report."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class ReplayAgent:
    """Replays a recorded session call by call: a line of ``sessions.jsonl``
    (``luca-gym eval`` for any agent, baselines included, or ``luca-gym mcp
    --out``). The organism, its noise and the calls are the same, so the
    replay scores exactly as the original (a published session can be
    re-scored, and tests run without a network). ValueError names a record
    that has no calls to replay."""

    def __init__(self, record: dict):
        calls = record.get("calls") if isinstance(record, dict) else None
        if not isinstance(calls, list):
            raise ValueError("record: no 'calls' list; give a session record (one line of sessions.jsonl)")
        script = []
        for i, entry in enumerate(calls):
            if not isinstance(entry, dict) or "call" not in entry:
                raise ValueError(f"record: calls[{i}] has no 'call'")
            script.append((entry["call"], entry.get("arguments", {})))
        self._script = ScriptedAgent(script)

    def __call__(self, messages, tools) -> "AgentTurn":
        return self._script(messages, tools)


class ScriptedAgent:
    """Replays a fixed list of (tool name, arguments) calls, one per turn."""

    def __init__(self, script: list[tuple[str, Any]]):
        self.script = list(script)
        self.turn = 0

    def __call__(self, messages, tools) -> AgentTurn:
        if self.turn >= len(self.script):
            return AgentTurn(content="done")
        name, arguments = self.script[self.turn]
        self.turn += 1
        return AgentTurn(tool_calls=[ToolCall(name, arguments, f"call_{self.turn - 1}")])  # ids as deterministic as the script


class ProviderError(RuntimeError):
    """A model provider's call failed (unreachable server, bad key, rate
    limit, an answer in an unusable shape...): one line naming the agent, the
    error type and its message.

    ``retryable``: whether the same call may succeed later (rate limit,
    overload, timeout, lost connection, a malformed answer) or not (bad key,
    unknown model, bad request); ``cause``: the SDK's exception, if any;
    ``usage``: the tokens a malformed answer reported (they are billed);
    ``model_failure``: the error is the model's, not the service's (an
    answer that cannot be read, a server error on the model's output, a
    conversation past its context): :func:`run_agent` ends the session as
    the model's failure rather than leave it unrecorded."""

    def __init__(self, message: str, *, retryable: bool = False, cause: BaseException | None = None, usage: dict | None = None,
                 model_failure: bool = False):
        super().__init__(message)
        self.retryable, self.cause, self.usage, self.model_failure = retryable, cause, usage, model_failure
