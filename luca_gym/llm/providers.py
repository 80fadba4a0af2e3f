"""Provider adapters (optional extra: ``pip install "luca-gym[llm]"``):
OpenAI-compatible chat models (local servers too) and Anthropic models as
agents of :func:`luca_gym.llm.loop.run_agent`, and the one place a
provider's exception becomes a :class:`~luca_gym.llm.loop.ProviderError`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re

from luca_gym.llm.loop import Agent, AgentTurn, ProviderError, ToolCall, is_count
from luca_gym.tools.session import to_anthropic_tools, to_openai_tools

# What goes back to a provider is what it accepts even when the model's own
# call was malformed: a tool name in the pattern the APIs allow and arguments
# as JSON text (OpenAI) or an object (Anthropic). What the session saw and the
# error it answered are unchanged.
def _echo_name(name) -> str:
    text = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] if isinstance(name, str) else ""
    return text or "invalid_name"


def _arguments_text(arguments) -> str:
    # A server may parse the arguments it is sent back (llama.cpp answers 500
    # to a call its token cap cut mid-JSON): text that is not a JSON object
    # goes back wrapped in one, as Anthropic's echo does.
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        return arguments if isinstance(parsed, dict) else json.dumps({"_unparsed": arguments[:2048]})
    if not isinstance(arguments, dict):
        return json.dumps({"_unparsed": _plain_text(arguments)})
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError, RecursionError, OverflowError):
        return json.dumps({"_unparsed": repr(arguments)[:2048]})


def _plain_text(arguments) -> str:
    try:
        return json.dumps(arguments)[:2048]
    except (TypeError, ValueError, RecursionError, OverflowError):
        return repr(arguments)[:2048]


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
    return {"_unparsed": arguments[:2048] if isinstance(arguments, str) else _plain_text(arguments)}


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
    """``parse(response, turn)`` -> (content, tool calls, reasoning, finish
    reason) as an AgentTurn with the response's token usage; an unreadable
    answer raises a retryable :class:`ProviderError`, the model's failure,
    that keeps the tokens it reported. ``turn``: the session's turn (from 0),
    naming the calls the response gave no id."""
    try:
        usage = _usage(_field(response, "usage"), *usage_keys)
    except Exception:  # noqa: BLE001 -- usage in an odd shape is not counted, the answer still is
        usage = None
    try:
        content, tool_calls, reasoning, finish = parse(response, turn)
    except Exception as exc:  # noqa: BLE001 -- a provider's answer must never crash the harness
        what = str(exc) if isinstance(exc, _Unusable) else f"{type(exc).__name__}: {str(exc)[:120]}"
        raise ProviderError(f"{where}: malformed response: {what}", retryable=True, usage=usage, model_failure=True) from None
    return AgentTurn(content=content, tool_calls=tool_calls, usage=usage, reasoning=reasoning,
                     finish_reason=finish if isinstance(finish, str) and finish else None)


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
    return content, tool_calls, _openai_reasoning(message), _field(choices[0], "finish_reason")


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
    return "".join(texts) or None, tool_calls, "\n\n".join(thoughts) or None, _field(response, "stop_reason")


class _ModelAgent:
    """What the providers' agents share: their client, the SDK's made when
    first needed (``_sdk_client``) unless one was given, seen through a
    ``cassette`` (:class:`luca_gym.llm.recording.Cassette`) where there is
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
    :class:`~luca_gym.llm.mock.MockClient`; ``cassette``: record
    the responses, or replay them (:mod:`luca_gym.llm.recording`). A
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


# A request refused because the conversation outgrew the model's context
# (OpenAI's context_length_exceeded, llama.cpp's "exceeds the available
# context size", vLLM's "maximum context length").
_CONTEXT_FULL = re.compile(r"context[_ ](length|size|window)|maximum context|exceeds? the available context", re.IGNORECASE)


def is_model_failure(exc: BaseException) -> bool:
    """Whether a provider's exception is the model's failure rather than the
    service's: HTTP 500, the status a server answers when it cannot parse
    what the model generated (llama.cpp's "Failed to parse tool call
    arguments as JSON" when the token cap cut a call, Ollama's "error parsing
    tool call"), or HTTP 400 for a conversation past the model's context.
    Overload, rate limits, gateways (502-504, 529), timeouts and lost
    connections are the service's: a session that meets them past the
    retries is left unrecorded, to run again."""
    status = _status_code(exc)
    return status == 500 or (status == 400 and bool(_CONTEXT_FULL.search(str(exc))))


@contextlib.contextmanager
def provider_errors(agent: str):
    """Turn an SDK or network exception (or any carrying an HTTP
    ``status_code``) into a one-line :class:`ProviderError`, saying whether it
    is retryable (:func:`is_retryable`) and whether it is the model's failure
    (:func:`is_model_failure`); other exceptions pass unchanged."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 -- the SDKs raise many types; each becomes one clear line
        module = type(exc).__module__.split(".")[0]
        if module not in _PROVIDER_MODULES and not isinstance(exc, OSError) and _status_code(exc) is None:
            raise
        message = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ProviderError(f"{agent}: {type(exc).__name__}: {message}", retryable=is_retryable(exc), cause=exc,
                            model_failure=is_model_failure(exc)) from exc


MOCK_AGENT = "mock"  # the offline scripted model: make_agent("mock")
TOOL_CHOICES = ("auto", "required", "none")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_request(settings: dict | None, spec: str = "openai:MODEL") -> dict:
    """The request settings a model agent ``spec`` sends with every call, checked:
    ``max_tokens`` (an integer >= 1: the most tokens a turn may generate),
    ``temperature`` (a number >= 0), ``seed`` (an integer; OpenAI-compatible
    servers only), ``tool_choice`` (``auto``, ``required``, ``none``, or a
    tool's name: every turn must call that tool, which some servers need before
    they parse tool calls at all) and ``timeout`` (seconds > 0 a call may
    take). Those not given (None) are left out. ValueError names a bad one."""
    out = {}
    for name, value in (settings or {}).items():
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if name == "max_tokens" and not (number and isinstance(value, int) and value >= 1):
            raise ValueError(f"max_tokens: {value!r}; allowed an integer >= 1 (tokens a model turn may generate)")
        if name == "temperature" and not (number and 0 <= value < float("inf")):
            raise ValueError(f"temperature: {value!r}; allowed a number >= 0")
        if name == "seed" and not (number and isinstance(value, int)):
            raise ValueError(f"seed: {value!r}; allowed an integer (the model's sampling seed)")
        if name == "seed" and spec.startswith("anthropic:"):
            raise ValueError(f"seed: {value!r}; {spec} takes no sampling seed (OpenAI-compatible servers only)")
        if name == "timeout" and not (number and 0 < value < float("inf")):
            raise ValueError(f"timeout: {value!r}; allowed a number of seconds > 0 (how long one call may take)")
        if name == "tool_choice" and not (isinstance(value, str) and (value in TOOL_CHOICES or _TOOL_NAME.fullmatch(value))):
            raise ValueError(f"tool_choice: {value!r}; allowed {', '.join(TOOL_CHOICES)} or a tool's name")
        if name not in ("max_tokens", "temperature", "seed", "timeout", "tool_choice"):
            raise ValueError(f"request setting {name!r} unknown; allowed max_tokens, temperature, seed, tool_choice, timeout")
        out[name] = value
    return out


def _request_kwargs(settings: dict, provider: str) -> dict:
    """Checked settings (:func:`check_request`) in ``provider``'s request shape."""
    kwargs = dict(settings)
    choice = kwargs.pop("tool_choice", None)
    if choice is None:
        return kwargs
    if provider == "anthropic":
        kwargs["tool_choice"] = ({"type": "auto"} if choice == "auto" else {"type": "any"} if choice == "required"
                                 else {"type": "none"} if choice == "none" else {"type": "tool", "name": choice})
    else:
        kwargs["tool_choice"] = choice if choice in TOOL_CHOICES else {"type": "function", "function": {"name": choice}}
    return kwargs


def make_agent(spec: str, base_url: str | None = None, cassette=None, request: dict | None = None) -> Agent:
    """``openai:MODEL``, ``anthropic:MODEL`` or ``mock`` (the offline scripted
    model, :func:`~luca_gym.llm.mock.mock_agent`) -> an agent
    callable, recording or replaying its responses with ``cassette`` (a
    :class:`~luca_gym.llm.recording.Cassette`; a replaying agent needs no
    SDK), sending ``request`` settings (:func:`check_request`) with every
    call. ValueError for an unknown spec, a bad setting or a missing SDK (with
    the install line)."""
    settings = check_request(request, spec)
    if spec == MOCK_AGENT:
        from luca_gym.llm.mock import mock_agent

        return mock_agent(cassette=cassette, **_request_kwargs(settings, "openai"))
    provider, _, model = spec.partition(":")
    if not model or provider not in ("openai", "anthropic"):
        raise ValueError(f"agent: {spec!r} unknown; allowed openai:MODEL, anthropic:MODEL or {MOCK_AGENT}")
    if cassette is None or not cassette.replaying:
        try:
            importlib.import_module(provider)
        except ImportError:
            raise ValueError(f"agent {spec!r}: the {provider} package is not installed; {LLM_EXTRA}") from None
    kwargs = _request_kwargs(settings, provider)
    if provider == "openai":
        return OpenAIChatAgent(model, base_url=base_url, cassette=cassette, **kwargs)
    max_tokens = kwargs.pop("max_tokens", 4096)
    return AnthropicAgent(model, cassette=cassette, max_tokens=max_tokens, **kwargs)


# -- before a sweep: is a model server there, and does it call tools? ------------------------------
NO_TOOL_CALLS = ("the server returned no tool call: it parses tool calls only with a chat template that renders tools "
                 "(llama.cpp's llama-server: --jinja, and --chat-template-file for a model whose GGUF has none), or only "
                 "when tool_choice names a tool (llama-cpp-python's server: --tool-choice TOOL); or the model did not "
                 "call one (a base model, or a token cap that cut it: --max-tokens)")


def no_tool_call_warning(records) -> str | None:
    """A warning where every model session of ``records`` ended on its first
    turn without a tool call (``end_reason`` ``"no_tool_call"``, one turn):
    the sign of a server that returns no tool calls at all. None otherwise."""
    from luca_gym.harness.agents import is_llm_agent

    models = [r for r in records if is_llm_agent(r.get("agent"))]
    first = [r for r in models if r.get("end_reason") == "no_tool_call"
             and sum(m.get("role") == "assistant" and not m.get("harness") for m in r.get("messages") or ()) == 1]
    if not models or len(first) < len(models):
        return None
    return (f"all {len(models)} model session(s) ended on turn 1 with no tool call (score 0): {NO_TOOL_CALLS}. "
            "Try one call first: luca-gym check-model --base-url URL --model NAME")


def server_reachable(base_url: str, timeout: float = 3.0) -> str | None:
    """None where something accepts a TCP connection at ``base_url``'s host and
    port within ``timeout`` seconds; else one line saying why not (no server
    there, a name that does not resolve). No request is sent."""
    import socket
    import urllib.parse

    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{base_url!r} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"{base_url!r}: {exc}"
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        return f"no server at {parts.hostname}:{port} ({exc.strerror or type(exc).__name__})"
    return None


PING_TOOL = {"type": "function", "function": {
    "name": "record_number", "description": "Record a number.",
    "parameters": {"type": "object", "properties": {"number": {"type": "integer", "description": "the number"}},
                   "required": ["number"], "additionalProperties": False}}}


def check_model(model: str, base_url: str | None = None, *, api_key_env: str = "OPENAI_API_KEY", timeout: float = 60.0,
                client=None, **request) -> dict:
    """One call to an OpenAI-compatible model asking it to call a one-argument
    tool (``record_number``), with no retry: ``{"ok", "server", "tool_call",
    "finish_reason", "content", "latency_s", "error"}``. ``server``: something
    answered at ``base_url`` (checked first by a TCP connection, so a wrong
    port fails in seconds); ``tool_call``: the answer held a tool call (its
    name and arguments); ``ok``: both. ``request``: settings as
    :func:`check_request` takes them (``tool_choice``, ``max_tokens``...)."""
    import os
    import time

    out = {"ok": False, "server": None, "tool_call": None, "finish_reason": None, "content": None, "latency_s": None,
           "error": None}
    if client is None and base_url is not None:
        why = server_reachable(base_url)
        if why is not None:
            out.update(server=False, error=why)
            return out
    kwargs = _request_kwargs(check_request({**request, "timeout": request.get("timeout") or timeout}), "openai")
    if client is None:
        try:
            from openai import OpenAI
        except ImportError:
            raise ValueError(f"check-model needs the openai package; {LLM_EXTRA}") from None
        client = OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env, "not-set"), max_retries=0)
    messages = [{"role": "user", "content": "Call the record_number tool with the number 7."}]
    started = time.perf_counter()
    try:
        with provider_errors(f"openai:{model}" + (f" at {base_url}" if base_url else "")):
            response = client.chat.completions.create(model=model, messages=messages, tools=[PING_TOOL], **kwargs)
        turn = _answer(f"openai:{model}", response, _openai_parse, ("prompt_tokens", "completion_tokens"), 0)
    except ProviderError as exc:
        reached = not isinstance(exc.cause, OSError) and "Connect" not in type(exc.cause).__name__
        out.update(server=reached, error=str(exc), latency_s=round(time.perf_counter() - started, 3))
        return out
    out.update(server=True, latency_s=round(time.perf_counter() - started, 3), finish_reason=turn.finish_reason,
               content=turn.content)
    if turn.tool_calls:
        call = turn.tool_calls[0]
        out["tool_call"] = {"name": call.name, "arguments": call.arguments}
        out["ok"] = True
    else:
        out["error"] = NO_TOOL_CALLS
    return out
