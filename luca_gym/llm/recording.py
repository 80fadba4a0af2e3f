"""Recording a model's responses and playing them back without a network.

A :class:`Cassette` is a JSONL file, one line per provider call,
``{"key", "session", "request", "response"}`` (or ``"error"`` in place of
``"response"`` for a call that raised): ``request`` is what the provider
received (the endpoint, model, messages, tools and every other parameter
the agent passed), ``key`` the SHA-256 of its canonical JSON
(:func:`request_key`), ``session`` a name for the session that made the
call (sessions that open alike are told apart by it, :meth:`Cassette.take`).
:class:`RecordingClient` wraps a real client (the ``openai`` or
``anthropic`` SDK's, or a :class:`~luca_gym.llm.mock.MockClient`)
and appends each call; :class:`ReplayClient` answers each request with the
response recorded for it and never opens a connection. Both have the methods the agents of
:mod:`luca_gym.llm.providers` call (``chat.completions.create`` and
``messages.create``)::

    from luca_gym.llm.providers import OpenAIChatAgent
    from luca_gym.llm.recording import Cassette

    agent = OpenAIChatAgent("gpt-4o", cassette=Cassette("run.jsonl", "record"))   # calls the API, keeps each answer
    agent = OpenAIChatAgent("gpt-4o", cassette=Cassette("run.jsonl", "replay"))   # no network, no key

A replayed session makes the same calls, scores, token usage and transcript
as the recorded one (its wall time and latencies are its own): every request
of the replay is the recorded run's, since the world's instances, the
prompts and the tools are deterministic and each response (tool-call ids
included) is the recorded one. Failed calls are recorded too (the error's
type, module, HTTP status and message) and raised again at the same place,
so retries replay as well. A request that is not in the cassette (another
seed, setting, prompt, tool or model parameter than the recording's) raises
:class:`CassetteMiss`, naming the session's turn: never a silent call to the
network.

Nothing that authenticates is written: the API key lives in the SDK's
client, not in a request; the transport parameters (``timeout``,
``extra_headers``, ``extra_query``) are left out of the request and its key;
and an error message has the client's key, and anything shaped like one,
masked.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import json
import os
import re
import threading
import uuid
from types import SimpleNamespace

from luca_gym.llm.loop import ProviderError

__all__ = ["Cassette", "CassetteMiss", "RecordingClient", "ReplayClient", "canonical_request", "request_key"]

MODES = ("record", "replay")
ENDPOINTS = ("chat.completions", "messages")  # OpenAI's chat completions; Anthropic's messages
# How a request reaches the server, not what it asks: left out of the cassette and its key (headers may carry keys).
TRANSPORT_PARAMETERS = frozenset({"timeout", "extra_headers", "extra_query"})
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_*\-.]{6,}")  # OpenAI's and Anthropic's keys (sk-..., sk-proj-..., sk-ant-...)


def canonical_request(endpoint: str, parameters: dict) -> dict:
    """The request a provider receives as JSON values: ``{"endpoint", **parameters}``
    without :data:`TRANSPORT_PARAMETERS`. ValueError names a parameter that is not JSON."""
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint: {endpoint!r}; allowed {', '.join(ENDPOINTS)}")
    request = {"endpoint": endpoint}
    for name, value in parameters.items():
        if name in TRANSPORT_PARAMETERS:
            continue
        try:
            request[name] = json.loads(json.dumps(value))  # tuples become lists, as they come back from the file
        except (TypeError, ValueError) as exc:
            raise ValueError(f"request parameter {name!r}: {type(value).__name__} is not JSON, so it cannot be recorded "
                             f"or looked up ({exc})") from None
    return request


def request_key(request: dict) -> str:
    """SHA-256 (hex) of ``request``'s canonical JSON: keys sorted, no spaces, UTF-8."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def plain(value):
    """An SDK response (pydantic models, namespaces, lists, dicts) as JSON values."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "__dict__"):
        return {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def turn_of(request: dict) -> int:
    """The session's turn a request asks for (from 0, as ``usage["failed_calls"]`` counts):
    the assistant turns already in its messages."""
    messages = request.get("messages")
    return sum(isinstance(m, dict) and m.get("role") == "assistant" for m in messages) if isinstance(messages, list) else 0


class CassetteMiss(ProviderError):
    """A replayed request that the cassette does not hold (not retryable: the run stops)."""


class Cassette:
    """A JSONL file of provider calls, to ``"record"`` (appended, one whole
    line a call, safe across threads) or ``"replay"`` (read once, here).

    Args:
        path: the file. Record: its folder must exist; an existing file is
            appended to (a resumed sweep adds its calls). Replay: it must exist.
        mode: ``"record"`` or ``"replay"``.

    ValueError names a bad mode, a missing file or folder, or a line that is
    not a recorded call (with its line number); a last line cut off by a crash
    is dropped.
    """

    def __init__(self, path, mode: str):
        if mode not in MODES:
            raise ValueError(f"mode: {mode!r}; allowed {', '.join(MODES)}")
        self.path, self.mode = os.fspath(path), mode
        self._lock = threading.Lock()
        self._file = None
        self._recorded: collections.Counter = collections.Counter()  # calls recorded (record) or replayed (replay) per key
        # record: this run's sessions are "<run>-<n>", apart from another run's appended to the same file
        self._run, self._sessions = uuid.uuid4().hex[:8], itertools.count()
        # replay: every call in file order, the calls of each key (indices, in order), those replayed, and per
        # recorded session whether a replay follows it and whether its last call failed (a session that gave up)
        self._calls: list[dict] = []
        self._by_key: dict[str, list[int]] = {}
        self._used: set[int] = set()
        self._followed: set = set()
        self._gave_up: dict = {}
        if mode == "replay":
            self._load()
        elif not os.path.isdir(os.path.dirname(os.path.abspath(self.path))):
            raise ValueError(f"cassette {self.path!r}: its folder does not exist")
        elif os.path.isdir(self.path):
            raise ValueError(f"cassette {self.path!r}: a folder; give a file")

    @property
    def replaying(self) -> bool:
        """Whether this cassette answers requests (replay) rather than keeps them (record)."""
        return self.mode == "replay"

    def client(self, inner=None):
        """The client an agent calls: ``inner`` wrapped in a :class:`RecordingClient`
        (record) or a :class:`ReplayClient` (replay; ``inner`` is never called)."""
        if self.replaying:
            return ReplayClient(self)
        if inner is None:
            raise ValueError("inner: None; recording needs the provider's client to call")
        return RecordingClient(inner, self)

    def __len__(self) -> int:
        """The calls this cassette holds: recorded so far, or left to replay."""
        with self._lock:
            return len(self._calls) - len(self._used) if self.replaying else sum(self._recorded.values())

    def new_session(self) -> str:
        """A name for the calls of one session (one agent's client), unique in the file."""
        return f"{self._run}-{next(self._sessions)}"

    # -- record ----------------------------------------------------------------------
    def append(self, request: dict, *, response=None, error: dict | None = None, session: str | None = None) -> None:
        """Append one call: ``request`` (:func:`canonical_request`), its ``response``
        or ``error``, and the ``session`` it belongs to (:meth:`new_session`)."""
        if self.replaying:
            raise ValueError(f"cassette {self.path!r} is open to replay, not to record")
        entry = {"key": request_key(request), "session": session, "request": request}
        entry.update({"error": error} if error is not None else {"response": response})
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file is None:
                self._file = self._open_for_append()
            self._file.write(line)  # one whole line a call, flushed before the next call can start
            self._file.flush()
            os.fsync(self._file.fileno())
            self._recorded[entry["key"]] += 1

    def _open_for_append(self):
        f = open(self.path, "a+b")  # noqa: SIM115 -- kept open for the run (closed with close())
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(max(0, size - 1))
            if f.read(1) != b"\n":  # a line cut off by a crash: drop it, keep the whole ones
                f.seek(0)
                data = f.read()
                f.truncate(data.rfind(b"\n") + 1)
        f.close()
        return open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        """Close the file being recorded to (a later call opens it again, to append)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    # -- replay ----------------------------------------------------------------------
    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except OSError as exc:
            raise ValueError(f"cassette {self.path!r}: {exc.strerror or exc}") from None
        last = len(lines) - 1  # the text after the last newline: empty, or a line a crash cut off
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                if number - 1 == last:
                    continue
                raise ValueError(f"cassette {self.path}:{number}: not JSON") from None
            if not (isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("request"), dict)
                    and ("response" in entry or isinstance(entry.get("error"), dict))):
                raise ValueError(f"cassette {self.path}:{number}: not a recorded call "
                                 '({"key", "request", "response" or "error"})')
            self._by_key.setdefault(entry["key"], []).append(len(self._calls))
            self._calls.append(entry)
            self._gave_up[entry.get("session")] = "error" in entry  # its last call, once all are read

    def take(self, request: dict, follower=None) -> dict:
        """The recorded call that answers ``request``; :class:`CassetteMiss`
        naming the turn where there is none.

        A key names the whole conversation so far, so the calls of one key
        differ only where several were made: a retried call (one session), or
        sessions that opened alike (instances that look the same, or a session
        that gave up and ran again). ``follower`` (a :class:`ReplayClient`, one
        per session) follows one recorded session: its calls first, in the
        order recorded; else the earliest session no other replay follows,
        one that did not end on a failed call first (a session that gave up
        was run again, and the rerun is the one on file); else any."""
        key = request_key(request)
        with self._lock:
            following = getattr(follower, "session", None)
            left = [i for i in self._by_key.get(key, ()) if i not in self._used]
            if left:
                def rank(i):
                    session = self._calls[i].get("session")
                    mine = session is not None and session == following
                    return (not mine, session in self._followed, self._gave_up.get(session, False), i)
                chosen = min(left, key=rank)
                self._used.add(chosen)
                self._recorded[key] += 1
                entry = self._calls[chosen]
                if follower is not None and entry.get("session") is not None:
                    follower.session = entry["session"]
                    self._followed.add(entry["session"])
                return entry
            replayed = self._recorded[key]
        model = request.get("model")
        again = (f"; it was recorded {replayed} time(s) and all were replayed" if replayed
                 else "; the run differs from the recorded one here (another seed, setting, prompt, tool or model "
                      "parameter, or a different response before)")
        raise CassetteMiss(f"cassette {self.path}: no recorded response for the {request.get('endpoint')} request of model "
                           f"{model!r} at turn {turn_of(request)} (key {key[:16]}){again}; record the run again",
                           retryable=False)


class RecordingClient:
    """``inner``'s calls, each appended to ``cassette`` (its response, or the
    error it raised, which is then raised as it was)."""

    def __init__(self, inner, cassette: Cassette):
        self.inner, self.cassette, self.session = inner, cassette, cassette.new_session()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=functools.partial(self._create, "chat.completions")))
        self.messages = SimpleNamespace(create=functools.partial(self._create, "messages"))

    def _create(self, endpoint: str, **parameters):
        request = canonical_request(endpoint, parameters)
        create = self.inner.chat.completions.create if endpoint == "chat.completions" else self.inner.messages.create
        try:
            response = create(**parameters)
        except Exception as exc:  # noqa: BLE001 -- recorded, then raised unchanged
            self.cassette.append(request, error=self._error(exc), session=self.session)
            raise
        self.cassette.append(request, response=plain(response), session=self.session)
        return response

    def _error(self, exc: BaseException) -> dict:
        status = getattr(exc, "status_code", None)
        if status is None:
            status = getattr(getattr(exc, "response", None), "status_code", None)
        message = str(exc)
        key = getattr(self.inner, "api_key", None)
        if isinstance(key, str) and len(key) >= 4:
            message = message.replace(key, "***")
        return {"type": type(exc).__name__, "module": type(exc).__module__, "message": _KEY_LIKE.sub("sk-***", message),
                "status_code": status if isinstance(status, int) and not isinstance(status, bool) else None,
                "os_error": isinstance(exc, OSError)}


class ReplayClient:
    """Answers each request from ``cassette``; opens no connection. One per
    session: ``session`` is the recorded session it follows (:meth:`Cassette.take`)."""

    def __init__(self, cassette: Cassette):
        self.cassette, self.session = cassette, None
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=functools.partial(self._create, "chat.completions")))
        self.messages = SimpleNamespace(create=functools.partial(self._create, "messages"))

    def _create(self, endpoint: str, **parameters):
        entry = self.cassette.take(canonical_request(endpoint, parameters), follower=self)
        if "error" in entry:
            raise replayed_error(entry["error"])
        return entry["response"]


@functools.lru_cache(maxsize=None)
def _error_class(name: str, module: str, os_error: bool, status_code: int | None) -> type:
    # The recorded exception's name, module and status: providers.provider_errors
    # and is_retryable class it exactly as they classed the original.
    attributes = {"__module__": module, "__doc__": f"{module}.{name}, as recorded"}
    if status_code is not None:
        attributes["status_code"] = status_code
    return type(name, (OSError if os_error else Exception,), attributes)


def replayed_error(error: dict) -> Exception:
    """The exception a recorded ``error`` entry stands for."""
    name = error.get("type") if isinstance(error.get("type"), str) and error["type"].isidentifier() else "RecordedError"
    module = error.get("module") if isinstance(error.get("module"), str) else __name__
    status = error.get("status_code")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    return _error_class(name, module, bool(error.get("os_error")), status)(str(error.get("message", "")))
