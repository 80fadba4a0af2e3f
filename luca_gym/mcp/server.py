"""``luca-gym mcp``: one session's tools over MCP (stdio), for any world,
with the official ``mcp`` SDK's lowlevel ``Server``.

The tools, their input schemas, annotations, output schemas, the title and
every answer come from the world's tool session (a
:class:`~luca_gym.tools.session.ToolSessionBase`, e.g. LUCA's
:class:`~luca_gym.worlds.luca.tools.ToolSession`); this module only carries them:

- ``initialize`` sends the session's rules (its ``system_prompt()``, with the
  call limit) as the server's ``instructions``.
- ``tools/list`` gives each tool the session's ``annotations(name)`` and
  ``outputSchema`` (``output_schema(name)``).
- ``tools/call`` returns the session's result as ``structuredContent`` and the
  same JSON as one text block (for clients without structured results); a
  refused call is ``isError`` and still conforms to the output schema. Names,
  not indices, and figures rounded by the session: nothing here adds a number.
  Calls run one at a time, in a worker thread, so the server answers other
  requests while a long one (a ``python`` block) runs.
- A session with the ``python`` tool (``luca-gym mcp --python``, a world that
  offers it, sealed) keeps its limits here as everywhere: the session's turns
  (it ends itself, ``end_reason: "turn_limit"``) and each block's output cut
  to the sandbox's limit.
- With ``out``, the session is appended to ``out/sessions.jsonl`` in the
  harness's format (:func:`luca_gym.harness.record_tool_session`) when it ends
  (``end``, or the call limit), or when the client disconnects after at least
  one tool call (the server then ends it, ``end_reason: "disconnected"``, as
  the harness ends a session for an agent that stops), so ``luca-gym report``
  reads it. One line on stderr says where; stdout is the MCP channel.

Malformed messages. The SDK's stdio transport drops, without a word, every
line it cannot parse as a JSON-RPC message, so a client waiting on such a
request would wait for ever. This server reads stdin itself
(:class:`CheckedStdin`) and answers each such line before the SDK sees it
(:func:`malformed_replies`):

- not JSON: ``-32700`` Parse error, id null (JSON that Python reads but the
  SDK does not, e.g. a lone surrogate escape: ``-32700`` with the request's id);
- JSON but not an object (a number, string, null): ``-32600`` Invalid Request, id null;
- a batch (array): ``-32600`` for each request in it, by its id (MCP
  2025-06-18 removed JSON-RPC batching); one with id null when it holds none;
- an object that is no JSON-RPC 2.0 message (``jsonrpc`` missing or not
  ``"2.0"``, ``method`` not a string, no ``method``/``result``/``error``):
  ``-32600``, with the request's id when it has a valid one, else id null;
- an id that is not a string or an integer (null, a fraction, a bool, an
  object): ``-32600``, id null (the id cannot be echoed: MCP allows none of these);
- a request whose ``params`` is not an object: ``-32602`` Invalid params, with its id;
- a line over :data:`MAX_MESSAGE_BYTES`: ``-32600``, with the id when it is
  one of the leading top-level members of the line, else id null; the rest of
  the line is skipped without being held in memory.

The SDK answers everything it parses: an unknown method ``-32601``; missing or
invalid params of a known method (``tools/call`` without a name, arguments
that are not an object...) ``-32602``; a tool call the session refuses is a
result with ``isError``. Limits, by the JSON-RPC spec: a notification (no id)
is never answered, not even one with bad ``params`` or an unknown method; a
response from the client (``result``/``error``) is never answered, even to an
id this server never used; a blank line is skipped.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time

from luca_gym.tools.session import ToolSessionBase

MAX_MESSAGE_BYTES = 1 << 20  # one line of stdin; a tool's arguments are at most 64 K characters of JSON
_ID_SCAN_BYTES = 1 << 16  # of an over-long line, where its id is looked for
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602

def tool_annotations(session, name: str):
    """The ``mcp_types.ToolAnnotations`` of a tool, from its world's tool
    session (closed world: no tool reaches outside the session)."""
    import mcp_types as types

    return types.ToolAnnotations(**{**(session.annotations(name) or {}), "openWorldHint": False})  # a world's own hint too


class OpeningSession:
    """A tool session being built in a background thread (generating the
    instance and compiling its session takes seconds), so the server can
    answer ``initialize`` at once; :meth:`get` waits for it."""

    def __init__(self, factory):
        self._done = threading.Event()
        self._session: ToolSessionBase | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._build, args=(factory,), daemon=True, name="luca-gym-session").start()

    def _build(self, factory) -> None:
        try:
            self._session = factory()
        except BaseException as exc:  # noqa: BLE001 -- re-raised by get() in the caller's thread
            self._error = exc
        finally:
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._done.is_set() and self._error is None

    def get(self) -> ToolSessionBase:
        """The opened session, waiting for it if it is still being opened; re-raises what stopped it."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._session


def _source(session) -> OpeningSession | None:
    return session if isinstance(session, OpeningSession) else None


class SessionRecorder:
    """Appends ``session`` to ``out/sessions.jsonl`` once it has ended
    (:func:`luca_gym.harness.record_tool_session`), once; reports on stderr. A
    failed attempt (e.g. the folder locked by a sweep) is tried again on the
    next call and when the client goes."""

    def __init__(self, session, out: str, agent: str = "mcp-client"):
        self._source, self.out, self.agent = session, out, agent
        self.started = time.perf_counter()
        self.path: str | None = None
        self.done = False

    @property
    def session(self) -> ToolSessionBase:
        opening = _source(self._source)
        return opening.get() if opening else self._source

    def check(self) -> None:
        """Raise (ResultsError, before any call is served) if the session could not be recorded:
        the file written by another build or seal, or this session already there."""
        from luca_gym import harness as ev

        ev.check_recordable(self.session, self.out, agent=self.agent)

    def __call__(self) -> None:
        """Record the session if it has ended and is not recorded yet."""
        if self.done or not self.session.ended:
            return
        from luca_gym.harness import record_tool_session

        try:
            self.path = record_tool_session(self.session, self.out, agent=self.agent,
                                            wall_s=time.perf_counter() - self.started)
        except Exception as exc:  # noqa: BLE001 -- the client's session goes on; the operator reads stderr
            print(f"luca-gym mcp: the session could not be recorded in {self.out}: {exc}", file=sys.stderr, flush=True)
            return
        self.done = True
        print(f"luca-gym mcp: session {self.session.instance_id} ({self.session.end_reason}) recorded in {self.path}",
              file=sys.stderr, flush=True)

    def disconnected(self) -> None:
        """The client has gone: end an open session it has called tools in, and record it."""
        opening = _source(self._source)
        if opening is not None and not opening.ready:
            return  # never opened: no call was made
        if not self.session.ended and self.session.transcript:
            self.session.finish("disconnected")
        self()


def build_server(session, on_call=None, instructions: str | None = None, title: str | None = None):
    """The lowlevel ``Server`` of ``session`` (a world's tool session, or an
    :class:`OpeningSession` still being built: then ``instructions`` and
    ``title`` must be given, and tool requests wait for the session);
    ``on_call()`` runs after every tool call."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from luca_gym import __version__

    opening = _source(session)
    get = opening.get if opening is not None else (lambda: session)
    tools: list = []
    one_at_a_time = anyio.Lock()  # calls run in a worker thread (a python block may take a minute), never two at once

    async def ready() -> ToolSessionBase:
        return get() if opening is None or opening.ready else await anyio.to_thread.run_sync(get)

    async def list_tools(ctx, params):
        s = await ready()
        if not tools:
            tools.extend(
                types.Tool(
                    name=t["name"],
                    description=t["description"],
                    input_schema=t["inputSchema"],
                    output_schema=s.output_schema(t["name"]),
                    annotations=tool_annotations(s, t["name"]),
                )
                for t in s.tools_mcp()
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        s = await ready()
        async with one_at_a_time:  # the server goes on answering (pings, lists) while a call runs
            result = await anyio.to_thread.run_sync(s.call, params.name, params.arguments or {})
            if on_call is not None:
                on_call()
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result))],
            structured_content=result,
            is_error="error" in result,
        )

    if instructions is None:
        instructions = get().system_prompt()
    if title is None:
        title = get().title
    return Server(
        "luca-gym", version=__version__, title=title, instructions=instructions,
        on_list_tools=list_tools, on_call_tool=call_tool,
    )


# -- malformed messages ----------------------------------------------------------
def _error(request_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _valid_id(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _request_id(message):
    """The id to answer ``message`` with: a request's (it has a method) valid id, else None (null)."""
    if isinstance(message, dict) and "method" in message and _valid_id(message.get("id")):
        return message["id"]
    return None


def _loads(line: str):
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def malformed_replies(line: str) -> list[dict] | None:
    """None if the SDK parses ``line`` as a JSON-RPC message (it answers it
    itself), else the JSON-RPC error responses ``line`` gets (none for a blank
    line or a notification whose only fault is its params)."""
    import mcp_types as types
    from pydantic import ValidationError

    if not line.strip():
        return []
    unread = None
    try:
        parsed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        unread = next((e["msg"] for e in exc.errors(include_url=False, include_input=False) if e["type"] == "json_invalid"), None)
    else:
        # The SDK reads a request whose id is not a string or an integer as a
        # notification (and drops it); only that one is answered here.
        raw = _loads(line)
        if not (isinstance(parsed, types.JSONRPCNotification) and isinstance(raw, dict) and "id" in raw):
            return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return [_error(None, PARSE_ERROR, f"Parse error: {unread or 'not JSON text'}")]
    if unread:  # JSON to Python, not to the SDK (e.g. a lone surrogate escape): the id is known
        return [_error(_request_id(message), PARSE_ERROR, f"Parse error: {unread}")]
    if isinstance(message, list):
        text = "Invalid Request: batches are not supported (MCP removed JSON-RPC batching); send each message on its own line"
        replies = [_error(rid, INVALID_REQUEST, text) for rid in map(_request_id, message) if rid is not None]
        return replies or [_error(None, INVALID_REQUEST, text)]
    if not isinstance(message, dict):
        return [_error(None, INVALID_REQUEST, f"Invalid Request: a message is a JSON object, not {type(message).__name__}")]
    rid = _request_id(message)
    if message.get("jsonrpc") != "2.0":
        return [_error(rid, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')]
    if "method" in message and not isinstance(message["method"], str):
        return [_error(rid, INVALID_REQUEST, 'Invalid Request: "method" must be a string')]
    if "id" in message and not _valid_id(message["id"]):
        return [_error(None, INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')]
    if "method" in message and message.get("params") is not None and not isinstance(message["params"], dict):
        if "id" not in message:
            return []  # a notification: never answered
        return [_error(rid, INVALID_PARAMS, 'Invalid params: "params" must be an object')]
    return [_error(rid, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, notification or response")]


_SPACE = re.compile(r"\s*")


def leading_id(prefix: str):
    """The id of a JSON object whose text starts with ``prefix``, if it is one
    of the top-level members that ``prefix`` holds whole; else None."""
    decoder = json.JSONDecoder()
    i = _SPACE.match(prefix).end()
    if not prefix.startswith("{", i):
        return None
    i += 1
    while True:
        try:
            i = _SPACE.match(prefix, i).end()
            key, i = decoder.raw_decode(prefix, i)
            i = _SPACE.match(prefix, i).end()
            if not prefix.startswith(":", i):
                return None
            i = _SPACE.match(prefix, i + 1).end()
            value, i = decoder.raw_decode(prefix, i)
        except (ValueError, RecursionError):
            return None
        i = _SPACE.match(prefix, i).end()
        if i >= len(prefix):  # the value may go on past the prefix
            return None
        if key == "id":
            return value if _valid_id(value) else None
        if not prefix.startswith(",", i):
            return None
        i += 1


class CheckedStdin:
    """The lines of a binary stream, as the SDK's ``stdio_server(stdin=...)``
    reads them (an async iterator of str), less the malformed ones: those are
    answered on the server's write stream (:meth:`answer_on`) and never reach the SDK.

    Lines are decoded as UTF-8 with replacement, as the SDK does; one over
    :data:`MAX_MESSAGE_BYTES` is answered and skipped in pieces."""

    def __init__(self, binary):
        import anyio

        self.binary = binary
        self._write = None
        self._ready = anyio.Event()

    def answer_on(self, write_stream) -> None:
        """Where replies to malformed lines go: the server's write stream."""
        self._write = write_stream
        self._ready.set()

    def _read_line(self) -> tuple[bytes, bool]:
        """(the line, or its first bytes if it is too long; whether it was too long). b"" at the end."""
        line = self.binary.readline(MAX_MESSAGE_BYTES + 1)
        if len(line) <= MAX_MESSAGE_BYTES or line.endswith(b"\n"):
            return line, False
        rest = line
        while rest and not rest.endswith(b"\n"):
            rest = self.binary.readline(1 << 16)
        return line[:_ID_SCAN_BYTES], True

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            raw, too_long = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if not raw:
                raise StopAsyncIteration
            text = raw.decode("utf-8", errors="replace")
            if too_long:
                replies = [_error(leading_id(text), INVALID_REQUEST,
                                  f"Invalid Request: a message longer than {MAX_MESSAGE_BYTES} bytes; it was skipped")]
            else:
                replies = malformed_replies(text)
                if replies is None:
                    return text
            await self._answer(replies)

    async def _answer(self, replies: list[dict]) -> None:
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        await self._ready.wait()
        for reply in replies:
            try:
                await self._write.send(SessionMessage(types.JSONRPCError.model_validate(reply)))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return


def serve(session, *, out: str | None = None, agent: str = "mcp-client", stdin=None, instructions: str | None = None,
          title: str | None = None) -> None:
    """Serve ``session`` over stdio until the client disconnects; with ``out``,
    record it there (see the module docstring). ``stdin``: a binary stream
    (default the process's standard input).

    ``session`` is a world's tool session, or a zero-argument callable that
    builds one: it is then built in a background thread while the server
    already answers ``initialize`` with ``instructions`` and ``title``
    (required then), so a client never waits on the instance's generation to
    connect. (With
    ``out``, check first that the session can be recorded:
    :func:`luca_gym.harness.check_recordable`.)"""
    import anyio
    from mcp.server.stdio import stdio_server

    if callable(session) and not isinstance(session, ToolSessionBase):
        if instructions is None or title is None:
            raise ValueError("instructions, title: required when the session is built in the background")
        session = OpeningSession(session)
    recorder = SessionRecorder(session, out, agent) if out else None
    if recorder is not None and _source(session) is None:
        recorder.check()
    server = build_server(session, on_call=recorder, instructions=instructions, title=title)

    async def main():
        checked = CheckedStdin(stdin if stdin is not None else sys.stdin.buffer)
        async with stdio_server(stdin=checked) as (read, write):
            checked.answer_on(write)
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        if recorder is not None:
            recorder.disconnected()


__all__ = ["MAX_MESSAGE_BYTES", "CheckedStdin", "OpeningSession", "SessionRecorder", "build_server",
           "leading_id", "malformed_replies", "serve", "tool_annotations"]
