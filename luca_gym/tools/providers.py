"""Provider adapters (optional extra: ``pip install "luca-gym[llm]"``):
OpenAI-compatible chat models (local servers too) and Anthropic models as
agents of :func:`luca_gym.tools.loop.run_agent`, and the one place a
provider's exception becomes a :class:`~luca_gym.tools.loop.ProviderError`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re

from luca_gym.tools.loop import Agent, AgentTurn, ProviderError, ToolCall, is_count
from luca_gym.tools.session import to_anthropic_tools, to_openai_tools

# What goes back to a provider is what it accepts even when the model's own
# call was malformed: a tool name in the pattern the APIs allow and arguments
# as JSON text (OpenAI) or an object (Anthropic). What the session saw and the
# error it answered are unchanged.
def _echo_name(name) -> str:
    text = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] if isinstance(name, str) else ""
    return text or "invalid_name"


def _arguments_text(arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError, RecursionError, OverflowError):
        return json.dumps(repr(arguments)[:2048])


def _arguments_object(arguments) -> dict:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"_unparsed": _arguments_text(arguments)}


def _openai_messages(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        if m["role"] == "assistant":
            msg = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": _echo_name(c["name"]), "arguments": _arguments_text(c["arguments"])}}
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def _anthropic_messages(messages: list[dict]) -> tuple[str, list[dict]]:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    out: list[dict] = []
    for m in messages:
        if m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for c in m.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": c["id"], "name": _echo_name(c["name"]), "input": _arguments_object(c["arguments"])})
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "(no content)"}]})
        elif m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if m.get("is_error"):
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return system, out


# -- reading a provider's answer -------------------------------------------------
# An answer is untrusted input. A tool call in the wrong shape (no name,
# arguments a list or a number) goes to the session as it came, which refuses
# it with a clear error, changing nothing; an answer that cannot be read at all
# (no choices, tool calls not a list, content not text) is a failed provider
# call: a retryable ProviderError, retried by run_agent and listed in the record.
class _Unusable(Exception):
    pass


def _field(obj, name: str):
    """``obj.name`` or ``obj[name]`` (SDK objects and plain dicts alike); None when absent."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _kind(value) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


def _call_id(value, fallback: str) -> str:
    # A call without an id (some local servers) gets one from its place in the
    # conversation: unique in the session, and the same when the run is replayed.
    return value if isinstance(value, str) and value else fallback


def _text(content, where: str) -> str | None:
    """A message's text: a string, None, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [_field(part, "text") for part in content]
        if all(isinstance(t, str) for t in parts):
            return "".join(parts) or None
    raise _Unusable(f"{where} is {_kind(content)}, not text")


def _usage(reported, input_key: str, output_key: str) -> dict | None:
    if reported is None:
        return None
    values = {"input_tokens": _field(reported, input_key), "output_tokens": _field(reported, output_key)}
    return {k: v if is_count(v) else None for k, v in values.items()}


def _answer(where: str, response, parse, usage_keys: tuple[str, str], turn: int) -> AgentTurn:
    """``parse(response, turn)`` -> (content, tool calls, reasoning) as an
    AgentTurn with the response's token usage; an unreadable answer raises a
    retryable :class:`ProviderError` that keeps the tokens it reported.
    ``turn``: the session's turn (from 0), naming the calls the response gave no id."""
    try:
        usage = _usage(_field(response, "usage"), *usage_keys)
    except Exception:  # noqa: BLE001 -- usage in an odd shape is not counted, the answer still is
        usage = None
    try:
        content, tool_calls, reasoning = parse(response, turn)
    except Exception as exc:  # noqa: BLE001 -- a provider's answer must never crash the harness
        what = str(exc) if isinstance(exc, _Unusable) else f"{type(exc).__name__}: {str(exc)[:120]}"
        raise ProviderError(f"{where}: malformed response: {what}", retryable=True, usage=usage) from None
    return AgentTurn(content=content, tool_calls=tool_calls, usage=usage, reasoning=reasoning)


# Where OpenAI-compatible servers put a reasoning model's thinking: vLLM and
# DeepSeek ``message.reasoning_content``, OpenRouter and newer vLLM
# ``message.reasoning`` (the openai SDK keeps such extra fields on the message).
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _reasoning_text(value) -> str | None:
    """Reasoning the transcript keeps: non-empty text; anything else (absent,
    empty, a structure such as OpenRouter's ``reasoning_details``) is left
    out, never failing the turn."""
    return value if isinstance(value, str) and value.strip() else None


def _openai_reasoning(message) -> str | None:
    """The message's reasoning text (:data:`REASONING_FIELDS`, the first that holds text), or None."""
    for name in REASONING_FIELDS:
        try:
            text = _reasoning_text(_field(message, name))
        except Exception:  # noqa: BLE001 -- an odd attribute is no reasoning, the answer still counts
            text = None
        if text is not None:
            return text
    return None


def _turn(messages: list[dict]) -> int:
    """The turn a call asks for (from 0, as run_agent counts): the assistant turns so far."""
    return sum(m.get("role") == "assistant" for m in messages)


def _openai_parse(response, turn: int) -> tuple:
    choices = _field(response, "choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        raise _Unusable(f"choices is {_kind(choices)}, not a non-empty list" if choices is not None else "no choices")
    message = _field(choices[0], "message")
    if message is None:
        raise _Unusable("choices[0] has no message")
    content = _text(_field(message, "content"), "message.content")
    raw = _field(message, "tool_calls")
    raw = [] if raw is None else raw
    if not isinstance(raw, (list, tuple)):
        raise _Unusable(f"message.tool_calls is {_kind(raw)}, not a list")
    tool_calls = []
    for i, c in enumerate(raw):
        function = _field(c, "function")
        call_id = _call_id(_field(c, "id"), f"call_t{turn}_{i}")
        tool_calls.append(ToolCall(_field(function, "name"), _field(function, "arguments"), call_id))
    return content, tool_calls, _openai_reasoning(message)


def _anthropic_parse(response, turn: int) -> tuple:
    blocks = _field(response, "content")
    if not isinstance(blocks, (list, tuple)):
        raise _Unusable(f"content is {_kind(blocks)}, not a list of blocks")
    texts, tool_calls, thoughts = [], [], []
    for b in blocks:
        kind = _field(b, "type")
        if kind == "text":
            texts.append(_text(_field(b, "text"), "a text block's text") or "")
        elif kind == "tool_use":
            call_id = _call_id(_field(b, "id"), f"call_t{turn}_{len(tool_calls)}")
            tool_calls.append(ToolCall(_field(b, "name"), _field(b, "input"), call_id))
        elif kind == "thinking":  # extended thinking; redacted_thinking holds no text, only an encrypted blob
            thought = _reasoning_text(_field(b, "thinking"))
            if thought is not None:
                thoughts.append(thought)
    return "".join(texts) or None, tool_calls, "\n\n".join(thoughts) or None


class _ModelAgent:
    """What the providers' agents share: their client, the SDK's made when
    first needed (``_sdk_client``) unless one was given, seen through a
    ``cassette`` (:class:`luca_gym.tools.recording.Cassette`) where there is
    one: recording wraps the client; replaying replaces it, so no SDK, key or
    network is needed."""

    def _use_client(self, client, cassette) -> None:
        self._cassette = cassette
        if cassette is not None and (client is not None or cassette.replaying):
            client = cassette.client(client)
        self._client = client

    def _get_client(self):
        if self._client is None:
            self._client = self._sdk_client()
            if self._cassette is not None:
                self._client = self._cassette.client(self._client)
        return self._client


class OpenAIChatAgent(_ModelAgent):
    """An OpenAI-compatible chat-completions model (``base_url`` for local
    servers). The API key is read from ``api_key_env`` when the client is made
    and is never stored on this object or written to a transcript. ``client``:
    an OpenAI client to use instead, e.g. a
    :class:`~luca_gym.tools.mock_provider.MockClient`; ``cassette``: record
    the responses, or replay them (:mod:`luca_gym.tools.recording`). A
    reasoning model's thinking, where the server returns it
    (``reasoning_content`` or ``reasoning`` on the message), is the turn's
    ``reasoning`` (the transcript keeps it); it is not sent back in later
    turns (DeepSeek refuses a request that carries it)."""

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY", client=None,
                 cassette=None, **kwargs):
        self.model, self.base_url, self.api_key_env, self.kwargs = model, base_url, api_key_env, kwargs
        self._use_client(client, cassette)

    def _sdk_client(self):
        import os

        from openai import OpenAI

        # max_retries=0: run_agent retries (with backoff, counted in the
        # record's usage); the SDK's own silent retries would hide failures.
        return OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env, "not-set"), max_retries=0)

    def __call__(self, messages, tools) -> AgentTurn:
        where = f"openai:{self.model}" + (f" at {self.base_url}" if self.base_url else "")
        with provider_errors(where):
            response = self._get_client().chat.completions.create(
                model=self.model, messages=_openai_messages(messages), tools=to_openai_tools(tools), **self.kwargs
            )
        return _answer(where, response, _openai_parse, ("prompt_tokens", "completion_tokens"), _turn(messages))

    def __repr__(self) -> str:
        return f"OpenAIChatAgent(model={self.model!r}, base_url={self.base_url!r})"


class AnthropicAgent(_ModelAgent):
    """An Anthropic messages-API model; the key comes from ``api_key_env``;
    ``client`` and ``cassette`` as :class:`OpenAIChatAgent`'s. The text of
    the response's ``thinking`` blocks (extended thinking, e.g.
    ``thinking={"type": "enabled", "budget_tokens": N}`` in ``kwargs``) is
    the turn's ``reasoning`` (the transcript keeps it)."""

    def __init__(self, model: str, api_key_env: str = "ANTHROPIC_API_KEY", client=None, max_tokens: int = 4096,
                 cassette=None, **kwargs):
        self.model, self.api_key_env, self.max_tokens, self.kwargs = model, api_key_env, max_tokens, kwargs
        self._use_client(client, cassette)

    def _sdk_client(self):
        import os

        from anthropic import Anthropic

        return Anthropic(api_key=os.environ.get(self.api_key_env), max_retries=0)  # run_agent retries

    def __call__(self, messages, tools) -> AgentTurn:
        system, msgs = _anthropic_messages(messages)
        where = f"anthropic:{self.model}"
        with provider_errors(where):
            response = self._get_client().messages.create(
                model=self.model, system=system, messages=msgs, tools=to_anthropic_tools(tools), max_tokens=self.max_tokens,
                **self.kwargs,
            )
        return _answer(where, response, _anthropic_parse, ("input_tokens", "output_tokens"), _turn(messages))

    def __repr__(self) -> str:
        return f"AnthropicAgent(model={self.model!r})"


LLM_EXTRA = 'pip install "luca-gym[llm]"'


# HTTP statuses worth retrying: timeout, conflict, too early, rate limit, and
# server errors (529: Anthropic's "overloaded").
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_RETRYABLE_NAMES = ("RateLimit", "Timeout", "Connect", "Overloaded", "InternalServer", "ServiceUnavailable", "RemoteProtocol",
                    "NetworkError", "ReadError", "WriteError")
_PROVIDER_MODULES = ("openai", "anthropic", "httpx", "httpcore")


def _status_code(exc: BaseException) -> int | None:
    for value in (getattr(exc, "status_code", None), getattr(getattr(exc, "response", None), "status_code", None)):
        if is_count(value):
            return value
    return None


def is_retryable(exc: BaseException) -> bool:
    """Whether a provider's exception may pass if the call is made again: an
    HTTP status in RETRYABLE_STATUS or >= 500; without one, a lost connection
    or a timeout (an OSError, or a type named like the SDKs' RateLimitError,
    APIConnectionError, APITimeoutError...). Told by status and name, so any
    client's exceptions are classed without importing its SDK."""
    status = _status_code(exc)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    names = [k.__name__ for k in type(exc).__mro__]
    return isinstance(exc, OSError) or any(part in name for name in names for part in _RETRYABLE_NAMES)


@contextlib.contextmanager
def provider_errors(agent: str):
    """Turn an SDK or network exception (or any carrying an HTTP
    ``status_code``) into a one-line :class:`ProviderError`, saying whether it
    is retryable (:func:`is_retryable`); other exceptions pass unchanged."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 -- the SDKs raise many types; each becomes one clear line
        module = type(exc).__module__.split(".")[0]
        if module not in _PROVIDER_MODULES and not isinstance(exc, OSError) and _status_code(exc) is None:
            raise
        message = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ProviderError(f"{agent}: {type(exc).__name__}: {message}", retryable=is_retryable(exc), cause=exc) from exc


def make_agent(spec: str, base_url: str | None = None, cassette=None) -> Agent:
    """``openai:MODEL`` or ``anthropic:MODEL`` -> an agent callable, recording
    or replaying its responses with ``cassette`` (a
    :class:`~luca_gym.tools.recording.Cassette`; a replaying agent needs no
    SDK). ValueError for an unknown spec or a missing SDK (with the install line)."""
    provider, _, model = spec.partition(":")
    if not model or provider not in ("openai", "anthropic"):
        raise ValueError(f"agent: {spec!r} unknown; allowed openai:MODEL or anthropic:MODEL")
    if cassette is None or not cassette.replaying:
        try:
            importlib.import_module(provider)
        except ImportError:
            raise ValueError(f"agent {spec!r}: the {provider} package is not installed; {LLM_EXTRA}") from None
    if provider == "openai":
        return OpenAIChatAgent(model, base_url=base_url, cassette=cassette)
    return AnthropicAgent(model, cassette=cassette)
