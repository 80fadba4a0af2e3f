"""A fake OpenAI-compatible model provider, for tests and dry runs without a network.

:class:`MockClient` has the one method the harness calls,
``client.chat.completions.create(model=, messages=, tools=, ...)``, and
answers with objects shaped like the ``openai`` SDK's (``choices[0].message``
with ``content`` and ``tool_calls``, ``usage.prompt_tokens`` and
``usage.completion_tokens``). Its "model" is a deterministic strategy over the
conversation (:func:`scripted_strategy` by default). It can fail a share of its
calls with a :class:`RateLimitError` (HTTP 429, recognised as retryable by its
``status_code`` alone, :func:`luca_gym.llm.providers.is_retryable`) and answer a
share in a malformed shape (:data:`MALFORMED`)::

    from luca_gym.llm.providers import OpenAIChatAgent
    from luca_gym.worlds.luca.tools import ToolSession
    from luca_gym.llm.loop import run_agent
    from luca_gym.llm.mock import MockClient

    agent = OpenAIChatAgent("mock", client=MockClient(fail_rate=0.1, malformed_rate=0.05, seed=0))
    record = run_agent(agent, ToolSession(0, tier="easy"), backoff=0)

One client per session: its draws come from its own ``seed``, in call order,
so a session's failures are the same whatever else runs beside it.

:func:`mock_agent` is ``luca-gym eval --agents mock``: this client behind
the OpenAI agent, playing :func:`mock_strategy` on any world, with no key
and no network (its turns carry token counts and no text, as a model that
only calls tools gives).
"""

from __future__ import annotations

import json
import random
import threading
import time
from types import SimpleNamespace
from typing import Callable

__all__ = ["MALFORMED", "AuthenticationError", "MockClient", "MockProviderError", "RateLimitError", "mock_agent", "mock_strategy",
           "schema_strategy", "scripted_strategy"]


class MockProviderError(Exception):
    """An error of the mock provider, with the HTTP ``status_code`` a real SDK's error carries."""

    status_code = 500


class RateLimitError(MockProviderError):
    """Too many requests (429): retryable."""

    status_code = 429


class AuthenticationError(MockProviderError):
    """A bad key (401): not retryable."""

    status_code = 401


# The malformed answers. The first four carry a tool call the session refuses
# (the agent's error, in the call log); the last three cannot be read at all
# (a failed provider call, retried).
MALFORMED = (
    "arguments_list",  # arguments: JSON text of a list
    "arguments_number",  # arguments: a number, not text
    "arguments_not_json",  # arguments: text that is not JSON
    "no_name",  # a tool call without a function name
    "tool_calls_not_list",  # message.tool_calls: a string
    "content_not_text",  # message.content: a number, no tool calls
    "no_choices",  # a response without choices (usage still reported)
)
REFUSED_BY_SESSION = MALFORMED[:4]

Strategy = Callable[[list, list], "list[tuple[str, dict]] | None"]


def _conversation(messages: list) -> list[tuple[str | None, dict]]:
    """(tool name, result) of every tool result in OpenAI-format ``messages``, in order."""
    names, results = {}, []
    for m in messages:
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                names[c.get("id")] = (c.get("function") or {}).get("name")
        elif m.get("role") == "tool":
            try:
                result = json.loads(m.get("content") or "")
            except ValueError:
                continue
            if isinstance(result, dict):
                results.append((names.get(m.get("tool_call_id")), result))
    return results


def scripted_strategy(messages: list, tools: list, experiments: int = 3) -> list[tuple[str, dict]] | None:
    """A small deterministic "model": get_organism_info; BLOCK each of the
    first ``experiments`` genes in turn; then reveal each prediction task and
    predict the baseline phenotypes for it; end when every task is revealed.
    Decided from the conversation alone (the results that came back), so a
    call the session refused is simply made again. Returns the next turn's
    calls, or None to answer in text only."""
    results = _conversation(messages)
    accepted = [(name, r) for name, r in results if "error" not in r]
    info = next((r for name, r in accepted if name == "get_organism_info"), None)
    if info is None:
        return [("get_organism_info", {})]
    if any(r.get("ended") for _, r in results):
        return None
    genes = info["gene_names"]
    done = sum(name == "run_experiment" for name, _ in accepted)
    if done < min(experiments, len(genes)):
        return [("run_experiment", {"interventions": {genes[done]: {"type": "BLOCK"}}})]
    revealed = sum(name == "get_next_prediction_task" for name, _ in accepted)
    predicted = sum(name == "submit_prediction" for name, _ in accepted)
    if revealed > predicted:
        return [("submit_prediction", {"predictions": dict(info["baseline_phenotypes"])})]
    if any(name == "get_next_prediction_task" and "error" in r for name, r in results):
        return [("end", {})]  # every task revealed (or revealing refused): done
    return [("get_next_prediction_task", {})]


def example_arguments(schema) -> object:
    """A value that ``schema`` (the JSON-schema subset of the tools' parameters)
    accepts: an object's required properties, arrays at their least length, an
    enum's first value, numbers at their minimum (0 without one), "1" for text
    (a formula that parses)."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {name: example_arguments(properties.get(name)) for name in schema.get("required") or ()}
    if kind == "array":
        return [example_arguments(schema.get("items")) for _ in range(int(schema.get("minItems") or 0))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + 1 if "minimum" not in schema and "exclusiveMinimum" in schema else low
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "string":
        return "1"
    return None


def _tool_name(tool) -> str | None:
    return (tool.get("function") or {}).get("name") if isinstance(tool, dict) else None


def schema_strategy(messages: list, tools: list) -> list[tuple[str, dict]] | None:
    """A "model" for any world: one call of each tool, in the order offered,
    with :func:`example_arguments` for its parameters; the tools that submit
    (named ``submit...``) after the others, ``end`` last. It knows nothing of
    the instance, so it scores near the floor, and a refused call is simply
    passed over. Returns the next turn's calls, or None (text only) once every
    tool has been called."""
    calls = sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")
    if any(r.get("ended") for _, r in _conversation(messages)):
        return None
    named = [t for t in tools if _tool_name(t)]
    order = ([t for t in named if not _tool_name(t).startswith("submit") and _tool_name(t) != "end"]
             + [t for t in named if _tool_name(t).startswith("submit")] + [t for t in named if _tool_name(t) == "end"])
    if calls >= len(order):
        return None
    tool = order[calls]
    return [(_tool_name(tool), example_arguments((tool.get("function") or {}).get("parameters")))]


def mock_strategy(messages: list, tools: list) -> list[tuple[str, dict]] | None:
    """The scripted model of ``--agents mock``: :func:`scripted_strategy` on
    LUCA (its tools include ``get_organism_info``), :func:`schema_strategy`
    on every other world."""
    if any(_tool_name(t) == "get_organism_info" for t in tools):
        return scripted_strategy(messages, tools)
    return schema_strategy(messages, tools)


def mock_agent(cassette=None, **request):
    """The ``mock`` agent: an OpenAI chat agent (model ``"mock"``) whose client
    is a :class:`MockClient` playing :func:`mock_strategy`, one client per
    agent (per session); ``cassette`` records or replays its responses and
    ``request`` (e.g. ``max_tokens``) goes with every call, as a real model's
    settings do. Needs neither the ``openai`` package nor a key."""
    from luca_gym.llm.providers import OpenAIChatAgent

    return OpenAIChatAgent("mock", client=None if cassette is not None and cassette.replaying else MockClient(mock_strategy),
                           cassette=cassette, **request)


class MockClient:
    """An OpenAI-compatible client whose model plays ``strategy``.

    Args:
        strategy: (OpenAI-format messages, tools) -> the next turn's calls as
            ``[(name, arguments)]``, or None for a text-only answer.
        fail_rate: the share of calls that raise ``error`` instead of answering.
        malformed_rate: the share of calls answered in a malformed shape (one
            of :data:`MALFORMED`, drawn).
        seed: the seed of this client's draws.
        error: the exception class a failing call raises (:class:`RateLimitError`,
            or :class:`AuthenticationError` for a non-retryable one).
        latency: seconds each call takes (a network's round trip), 0 by default.

    ``requests`` lists every call's keyword arguments; ``outcomes`` what each
    call did: ``"ok"``, ``"failed"`` or the malformed kind; ``reported`` the
    (prompt, completion) tokens each answer reported (None for a failed call).
    The model ignores the results of its own deliberately malformed calls, so
    faults change the calls a session makes, never the accepted ones.
    """

    def __init__(self, strategy: Strategy = scripted_strategy, *, fail_rate: float = 0.0, malformed_rate: float = 0.0,
                 seed: int = 0, error: type[Exception] = RateLimitError, latency: float = 0.0):
        if not (0 <= fail_rate and 0 <= malformed_rate and fail_rate + malformed_rate <= 1):
            raise ValueError(f"fail_rate {fail_rate!r}, malformed_rate {malformed_rate!r}: allowed shares >= 0 that sum to at most 1")
        self.strategy, self.fail_rate, self.malformed_rate, self.error, self.latency = strategy, fail_rate, malformed_rate, error, latency
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._malformed_ids: set[str] = set()
        self._ids = 0
        self.requests: list[dict] = []
        self.outcomes: list[str] = []
        self.reported: list[tuple[int, int] | None] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, *, model: str, messages: list, tools: list | None = None, **kwargs):
        """A chat completion in the OpenAI client's shape (after ``latency`` seconds), one call at a time."""
        if self.latency:
            time.sleep(self.latency)
        with self._lock:
            return self._create(model=model, messages=messages, tools=tools, **kwargs)

    def _create(self, **request):
        self.requests.append(request)
        draw = self._rng.random()
        if draw < self.fail_rate:
            self.outcomes.append("failed")
            self.reported.append(None)
            raise self.error(f"mock provider: {self.error.__name__} (status {self.error.status_code})")
        kind = self._rng.choice(MALFORMED) if draw < self.fail_rate + self.malformed_rate else "ok"
        seen = [m for m in request["messages"] if not (m.get("role") == "tool" and m.get("tool_call_id") in self._malformed_ids)]
        planned = self.strategy(seen, request.get("tools") or [])
        calls = [self._tool_call(name, json.dumps(arguments)) for name, arguments in planned or []]
        usage = (len(json.dumps(request["messages"])) // 4, 8 + len(json.dumps(planned)) // 4)
        self.outcomes.append(kind)
        self.reported.append(usage)
        content = None if calls else "Done."
        if kind in REFUSED_BY_SESSION:
            if not calls:
                calls = [self._tool_call("end", "{}")]
            bad = calls[0]
            self._malformed_ids.add(bad.id)
            if kind == "arguments_list":
                bad.function.arguments = "[1, 2]"
            elif kind == "arguments_number":
                bad.function.arguments = 42
            elif kind == "arguments_not_json":
                bad.function.arguments = "{'interventions': None"
            else:
                bad.function = SimpleNamespace(arguments=bad.function.arguments)
            calls = [bad]  # the rest of the turn is left for later
        elif kind == "tool_calls_not_list":
            calls = "get_organism_info"
        elif kind == "content_not_text":
            content, calls = 3.14, None
        message = SimpleNamespace(role="assistant", content=content, tool_calls=calls or None)
        reported = SimpleNamespace(prompt_tokens=usage[0], completion_tokens=usage[1], total_tokens=sum(usage))
        if kind == "no_choices":
            return SimpleNamespace(id="mock", object="chat.completion", model=request["model"], usage=reported)
        choice = SimpleNamespace(index=0, message=message, finish_reason="tool_calls" if calls else "stop")
        return SimpleNamespace(id="mock", object="chat.completion", model=request["model"], choices=[choice], usage=reported)

    def _tool_call(self, name: str, arguments: str):
        self._ids += 1
        return SimpleNamespace(id=f"call_mock_{self._ids}", type="function", function=SimpleNamespace(name=name, arguments=arguments))
