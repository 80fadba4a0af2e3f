"""One dispatcher over a world's tool specs: :class:`ToolSessionBase`.

A world's tool session (LUCA's :class:`~luca_gym.worlds.luca.tools.ToolSession`,
a toy world's in the tests) subclasses it and supplies what only the world
knows: its tool specs (name, description, JSON Schema of the arguments), how a
checked call runs (:meth:`~ToolSessionBase.dispatch`), its status fields (what
every answer, a refusal included, reports: LUCA's ``budget_remaining``), its
system prompt and its record. Everything an agent's input crosses first lives
here, once, for every world:

- the arguments are parsed once (a dict, or JSON text of at most
  :data:`MAX_PAYLOAD` characters; NaN, Infinity, lone surrogates and
  non-objects refused) and checked against the published schema, so the
  schemas accept exactly what the dispatcher accepts;
- ``call`` never raises: a malformed or refused call comes back as
  ``{"error": ..., **status}``, changes nothing and is logged (abbreviated
  when it failed the check, in full when it passed, so a replay is exact);
- the specs in the OpenAI, Anthropic and MCP formats are copies: editing one
  cannot change what the session accepts.

The ``python`` tool (:mod:`luca_gym.sandbox`) is generic too: a world
whose session sets ``offers_python`` takes ``python=True`` and calls
:meth:`ToolSessionBase.open_sandbox`, which adds the tool, runs its blocks
(this class dispatches them, never the world) and bounds the session to
:data:`PYTHON_TURNS` turns, as the DrugTargetWorld harness does. Such a
session drops the world's structured analysis tools (its
``analysis_tool_names``): the paper's code agents had the sandbox, the data
and the world's actions only; ``analysis_tools=True`` keeps them. The
harness, the tools Gymnasium env and the MCP server reach both options
through :func:`tool_options`, which refuses them, by name, for a world that
does not offer them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from luca_gym.tools.schema import validate
from luca_gym.validate import short_repr

MAX_PAYLOAD = 64 * 1024  # characters of JSON arguments
PYTHON_TURNS = 30  # the turns of a session that runs code (the DrugTargetWorld harness's: "up to 30 turns")
MAX_CODE = 32_000  # characters of one python block


def tool_options(tools, *, python=False, sealed=None, analysis_tools=False) -> dict:
    """The tool-session options a harness, env or server passes on to a
    world's tool session (``tools``: the session's class, a world's
    ``World.tools`` loaded): ``{"python": True}`` where asked (with
    ``"analysis_tools": True`` where asked too, and ``"limits"`` where
    ``python`` is a :class:`~luca_gym.sandbox.Limits`: the python tool
    under those limits, :func:`python_with_limits`), else nothing. ValueError
    names a ``python`` that is not a bool or Limits, a world whose session does not
    offer the python tool (``offers_python``), python without a seal
    (``sealed``: what the session will be given), or an ``analysis_tools``
    :func:`check_analysis_tools` refuses."""
    from luca_gym.sandbox import Limits

    limits = {"limits": python} if isinstance(python, Limits) else {}
    if not isinstance(python, bool) and not limits:
        raise ValueError(f"python: {python!r} not allowed; True or False (or a Limits: True, under those limits)")
    if not python:
        check_analysis_tools(tools, python, analysis_tools)
        return {}
    if not getattr(tools, "offers_python", False):
        raise ValueError(f"python: world {_world_name(tools)!r} does not offer the python tool; leave python off for this world")
    check_sealed_for_code(sealed)
    check_analysis_tools(tools, python, analysis_tools)
    return {"python": True, **limits, **({"analysis_tools": True} if analysis_tools else {})}


def python_with_limits(python, limits=None, *, sandbox_memory=None, sandbox_time=None):
    """``python`` (True or False) with its sandbox's limits where any is given:
    ``limits`` (a :class:`~luca_gym.sandbox.Limits`) with the session's
    memory ``sandbox_memory`` (a size: ``8G``, ``512M`` or bytes) and each
    block's wall clock ``sandbox_time`` (seconds) set
    (:func:`~luca_gym.sandbox.sandbox_limits`), which :func:`tool_options`
    takes as ``python``; else ``python`` itself. ValueError names a bad value,
    or one given without python."""
    from luca_gym.sandbox import sandbox_limits

    given = {"limits": limits, "sandbox_memory": sandbox_memory, "sandbox_time": sandbox_time}
    resolved = sandbox_limits(limits, sandbox_memory=sandbox_memory, sandbox_time=sandbox_time)
    if resolved is None:
        return python
    if python is not True:
        name = next(k for k, v in given.items() if v is not None)
        raise ValueError(f"{name}: {given[name]!r} given without the python tool; the limits are its sandbox's "
                         "(python=True, --python)")
    return resolved


def check_analysis_tools(tools, python: bool, analysis_tools) -> None:
    """ValueError unless ``analysis_tools`` (keep the world's structured
    analysis tools beside the python tool, which drops them by default) is a
    bool, True only with ``python`` and for a world (``tools``: its tool
    session's class) that has such tools (``analysis_tool_names``)."""
    if not isinstance(analysis_tools, bool):
        raise ValueError(f"analysis_tools: {analysis_tools!r} not allowed; True or False")
    if analysis_tools and not python:
        raise ValueError("analysis_tools: True only with the python tool (python=True, --python); a session without it "
                         "has the world's analysis tools already")
    if analysis_tools and not getattr(tools, "analysis_tool_names", ()):
        raise ValueError(f"analysis_tools: world {_world_name(tools)!r} has no structured analysis tools to keep beside the "
                         "python tool; leave analysis_tools (--python-analysis-tools) off for this world")


def _world_name(tools) -> str:
    return getattr(tools, "world", None) or getattr(tools, "__name__", type(tools).__name__)


def check_sealed_for_code(sealed) -> None:
    """ValueError unless ``sealed`` (a seal, a secret or True) is given: a
    session that runs code must be sealed, or code that reached the public
    package could regenerate its world."""
    if sealed is None or sealed is False:
        raise ValueError("python: True not allowed for an unsealed session; a session that runs code must be sealed "
                         "(sealed=..., luca-gym --sealed), or the public package would regenerate its world")


class ToolSessionBase:
    """The generic half of a world's tool session.

    A subclass calls ``super().__init__()``, then :meth:`set_specs` with its
    tools, and implements :meth:`dispatch`, :meth:`status`,
    :meth:`system_prompt` and :meth:`record`. Class attributes:

    * ``opening``: the first user message of an agent loop;
    * ``end_tool``: the tool that ends the session (the loop calls it for an
      agent that stops);
    * ``status_keys``: the keys of :meth:`status`, copied from every answer
      into its transcript entry;
    * ``title``: the server title (MCP);
    * ``world``: the world's registry name (a results line of a session
      driven from outside, :func:`luca_gym.harness.record_tool_session`);
    * ``offers_python``: whether the session takes ``python=True`` (and then
      calls :meth:`open_sandbox`): :func:`tool_options` refuses it elsewhere;
    * ``analysis_tool_names``: the world's structured analysis tools, which
      :meth:`open_sandbox` drops unless asked to keep them (``analysis_tools``).

    A session with a ``turn_limit`` (one that runs code: :data:`PYTHON_TURNS`)
    ends, truncated (``end_reason: "turn_limit"``, the scores of its end tool),
    after that many calls that passed their schema check; a malformed call
    costs nothing, as everywhere.
    """

    world: str | None = None
    offers_python = False
    analysis_tool_names: tuple[str, ...] = ()
    opening = "Begin."
    end_tool = "end"
    status_keys: tuple[str, ...] = ()
    title = "luca-gym"

    def __init__(self):
        self.seed: int | None = None  # the instance's seed (the subclass sets it)
        self.instance_id: str | None = None  # what the session calls its instance (sealed: opaque)
        self.seal = None  # the session's luca_gym.seal.Seal, or None unsealed
        self.transcript: list[dict] = []
        self.ended = False
        self.truncated = False
        self.end_reason: str | None = None
        self.scores: dict | None = None
        self.total_reward = 0.0
        self._specs: list[dict] = []
        self._schemas: dict[str, dict] = {}
        self.sandbox = None  # the python tool's Sandbox (open_sandbox), or None
        self.analysis_tools = False  # whether a session with the python tool kept the analysis tools (open_sandbox)
        self.turn_limit: int | None = None  # calls that passed their check before the session ends; None: no limit
        self.turns = 0  # calls that passed their check so far

    # -- what a world supplies ---------------------------------------------------------
    def set_specs(self, specs: list[dict]) -> None:
        """The session's tools: ``[{"name", "description", "input_schema"}]``
        (kept as copies)."""
        self._specs = copy.deepcopy(list(specs))
        self._schemas = {s["name"]: s["input_schema"] for s in self._specs}

    def dispatch(self, name: str, args: dict) -> dict:
        """Run a call whose arguments passed its schema; return the answer."""
        raise NotImplementedError

    def status(self) -> dict:
        """What every answer reports (a refusal too), e.g. the budget left."""
        return {}

    def system_prompt(self) -> str:
        """The world's rules for an agent (a subclass writes them)."""
        raise NotImplementedError

    def record(self) -> dict:
        """The session as one JSON-ready record."""
        return {"calls": self.transcript, "scores": self.scores, "return": self.total_reward, "end_reason": self.end_reason}

    def demo_calls(self) -> list[tuple[str, dict]]:
        """A short legal session that ends: ``[(tool name, arguments)]``
        (:func:`luca_gym.testing.check_world` plays it, refused calls between)."""
        raise NotImplementedError

    def record_fields(self) -> dict:
        """What a results line holds of this session beside its key, calls and scores."""
        return {"instance_id": self.instance_id}

    def key_settings(self) -> dict:
        """The session's key settings (the world's ``session_keys`` but the
        seed), for a results line of a session driven from outside the harness."""
        raise NotImplementedError(f"{type(self).__name__}.key_settings: needed to record a session driven from outside")

    def annotations(self, name: str) -> dict | None:
        """MCP ToolAnnotations fields of a tool (title, readOnlyHint, ...), or None."""
        return None

    def output_schema(self, name: str) -> dict | None:
        """JSON Schema of what a tool returns (MCP ``outputSchema``), or None."""
        return None

    # -- the python tool ----------------------------------------------------------------
    def open_sandbox(self, data: str, limits=None, isolation: str = "auto", turns: int | None = PYTHON_TURNS,
                     analysis_tools: bool = False):
        """Offer the ``python`` tool: start a :class:`~luca_gym.sandbox.Sandbox`
        (``limits``, ``isolation``: its own), add the tool to the specs (its
        description says ``data``, what the world puts in the read-only data
        folder, which it writes into ``self.sandbox.release_dir`` next), drop
        the world's ``analysis_tool_names`` unless ``analysis_tools`` and
        bound the session to ``turns`` turns (None: no bound). Returns the
        sandbox. ValueError for an unsealed session (code that could reach the
        package would regenerate its world), a bad ``turns`` or
        ``analysis_tools``; SandboxUnavailable where no isolation works."""
        from luca_gym.sandbox import RELEASE, WORKDIR, Sandbox

        check_sealed_for_code(self.seal)
        check_analysis_tools(type(self), True, analysis_tools)
        if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
            raise ValueError(f"turns: {turns!r} not allowed; a positive integer, or None for no bound")
        self.sandbox = Sandbox(limits, isolation)
        self.turn_limit = turns
        self.analysis_tools = analysis_tools
        bound = "" if turns is None else f" The session allows {turns} turns (calls of any tool), then ends."
        kept = [s for s in self.tool_specs() if analysis_tools or s["name"] not in self.analysis_tool_names]
        self.set_specs(kept + [{
            "name": "python",
            "description": f"Free. Run a block of Python 3 code in a fresh process, working directory {WORKDIR} (its files "
                           f"are kept between blocks; variables are not). {data} (in {WORKDIR}/{RELEASE}, read-only). "
                           f"{self.sandbox.packages_words()}; no network. Limits: "
                           f"{self.sandbox.describe()}; print what you need to see.{bound}",
            "input_schema": {"type": "object", "properties": {
                "code": {"type": "string", "minLength": 1, "maxLength": MAX_CODE, "description": "the Python block"}},
                "required": ["code"], "additionalProperties": False}}])
        return self.sandbox

    def run_python(self, code: str) -> dict:
        """One checked ``python`` call: the block's output (truncated to the
        sandbox's ``output_chars``), whether it was truncated and its exit
        status, with the status; a block stopped by a limit or an error is
        ``{"error": ...}`` with the same fields. The session goes on either way."""
        if self.ended:
            return self.error("the session has ended")
        if self.sandbox.closed:
            return self.error("python: the sandbox was closed (its env or server closed the session); nothing ran")
        ran = self.sandbox.run(code)
        answer = {"output": ran["output"], "truncated": ran["truncated"], "exit_status": ran["exit_status"]}
        limits = self.sandbox.limits
        if ran["limit"] == "time":
            message = (f"python: the block ran past its {limits.timeout_s:g} s wall-clock limit and was stopped, with every "
                       "process it started; files written before then are kept")
        elif ran["limit"] == "cpu":
            message = f"python: the block used its {limits.process_cpu_s} s of CPU time (or was killed) and was stopped"
        elif ran["limit"] == "memory":
            message = f"python: the block ran out of memory (at most {self.sandbox.memory_words()})"
        elif ran["exit_status"] != 0:
            message = f"python: the block stopped with an error (exit status {ran['exit_status']}); its output ends with the traceback"
        else:
            return {**answer, **self.status()}
        return {**self.error(message), **answer}

    def close(self) -> None:
        """Stop the python tool's sandbox and remove its folder (no-op without
        one; an env calls it when it starts another session or closes)."""
        if self.sandbox is not None:
            self.sandbox.close()

    def _end_at_turn_limit(self, result: dict) -> dict:
        """End the session at its turn limit, as its end tool ends it
        (truncated, ``end_reason: "turn_limit"``); ``result`` with the ending."""
        ended = self.dispatch(self.end_tool, {})
        self.truncated, self.end_reason = True, "turn_limit"
        note = f"the session's limit of {self.turn_limit} turns is reached; it has ended"
        return {**result, "ended": True, "end_reason": "turn_limit", "scores": ended.get("scores"), "note": note, **self.status()}

    @property
    def python(self) -> bool:
        """Whether the session offers the ``python`` tool (:meth:`open_sandbox`)."""
        return self.sandbox is not None

    # -- specs -------------------------------------------------------------------------
    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(s["name"] for s in self._specs)

    def tool_specs(self) -> list[dict]:
        """Neutral specs: ``{"name", "description", "input_schema"}`` (copies:
        editing one cannot change what the session accepts)."""
        return copy.deepcopy(self._specs)

    def tools_openai(self) -> list[dict]:
        """The tools in OpenAI's function-calling format."""
        return to_openai_tools(self.tool_specs())

    def tools_anthropic(self) -> list[dict]:
        """The tools in Anthropic's tool format."""
        return to_anthropic_tools(self.tool_specs())

    def tools_mcp(self) -> list[dict]:
        """The tools in MCP's format (``inputSchema``)."""
        return [{"name": s["name"], "description": s["description"], "inputSchema": s["input_schema"]} for s in self.tool_specs()]

    # -- dispatch ----------------------------------------------------------------------
    def call(self, name: Any, arguments: Any = None) -> dict:
        """Dispatch one call. Never raises; errors come back as ``{"error": ...}``.

        The arguments are parsed and checked once; what was checked is what
        runs and what the transcript logs, in full (so a replay is exact);
        arguments that failed the check are logged abbreviated."""
        logged, checked = arguments, False
        try:
            try:
                args = self._checked(name, arguments)
            except ValueError as exc:
                result = self.error(str(exc))
            else:
                logged, checked = args, True
                open_ = not self.ended
                result = self.run_python(args["code"]) if name == "python" and self.sandbox is not None else self.dispatch(name, args)
                if open_:
                    self.turns += 1
                    if self.turn_limit is not None:
                        result = {**result, **self.status()}  # the answer counts its own turn
                        if not self.ended and self.turns >= self.turn_limit:
                            result = self._end_at_turn_limit(result)
                if self.ended:
                    self.close()
        except Exception as exc:  # noqa: BLE001 -- hostile input must never escape
            result = self.error(f"internal error while handling the call ({type(exc).__name__}); the session is unchanged")
        self.transcript.append(
            {
                "call": name[:64] if isinstance(name, str) and is_unicode(name) else f"<{type(name).__name__}>",
                "arguments": self._loggable(logged, abbreviate=not checked),
                "result": result,
                **{key: result.get(key) for key in self.status_keys},
            }
        )
        return result

    def error(self, message: str) -> dict:
        """A refusal: the message and the session's status."""
        return {"error": message, **self.status()}

    def finish(self, reason: str) -> None:
        """End the session for an agent that stopped (``end_reason`` says why)."""
        if not self.ended:
            self.call(self.end_tool, {})
            self.end_reason = reason

    @staticmethod
    def _loggable(arguments, abbreviate: bool = True):
        """A copy of the arguments fit for the transcript (later changes by the
        caller cannot alter the log); non-JSON ones, and long ones when
        ``abbreviate`` (checked arguments are at most MAX_PAYLOAD), are abbreviated."""
        try:
            text = arguments if isinstance(arguments, str) else json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError, RecursionError, OverflowError):
            return "<not JSON-serialisable>"
        if not is_unicode(text if isinstance(arguments, str) else json.loads(text)):
            return "<not valid Unicode>"
        if abbreviate and len(text) > 2048:
            return text[:2048] + "...<truncated>"
        return text if isinstance(arguments, str) else json.loads(text)

    def parse_arguments(self, arguments: Any) -> dict:
        """Arguments as a dict, from a dict or a JSON string. Raises ValueError."""
        return parse_arguments(arguments)

    def validate(self, name: Any, arguments: Any) -> str | None:
        """None if the call's arguments pass its schema, else the message."""
        try:
            self._checked(name, arguments)
        except ValueError as exc:
            return str(exc)
        return None

    def _checked(self, name: Any, arguments: Any) -> dict:
        """The call's arguments parsed (once) and checked against its schema.
        Raises ValueError naming the tool or argument, the problem and what is allowed."""
        allowed = ", ".join(self.tool_names)
        if not isinstance(name, str):
            raise ValueError(f"unknown tool: the name must be a string, got {type(name).__name__}; allowed {allowed}")
        if name not in self._schemas:
            raise ValueError(f"unknown tool {short_repr(name)}; allowed {allowed}")
        args = self.parse_arguments(arguments)
        error = validate(args, self._schemas[name])
        if error:
            raise ValueError(f"invalid arguments for {name}: {error}")
        return args


def parse_arguments(arguments: Any) -> dict:
    """A call's arguments as a dict, from a dict or a JSON string (at most
    :data:`MAX_PAYLOAD` characters; NaN, Infinity and lone surrogates refused).
    Raises ValueError."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if len(arguments) > MAX_PAYLOAD:
            raise ValueError(f"arguments: {len(arguments)} characters; at most {MAX_PAYLOAD}")
        try:
            parsed = json.loads(arguments, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise ValueError("arguments: JSON nested too deeply") from None
        except ValueError as exc:
            if str(exc).startswith("arguments:"):
                raise
            raise ValueError("arguments: not valid JSON (a number is too large)") from None
    elif isinstance(arguments, dict):
        try:
            text = json.dumps(arguments, allow_nan=False, ensure_ascii=False)
        except ValueError as exc:
            message = str(exc)
            hint = "NaN and Infinity are not allowed" if "float" in message else message[:80]
            raise ValueError(f"arguments: not JSON data ({hint})") from None
        except (TypeError, RecursionError, OverflowError) as exc:
            raise ValueError(f"arguments: not JSON data ({type(exc).__name__}: {str(exc)[:80]})") from None
        if len(text) > MAX_PAYLOAD:
            raise ValueError(f"arguments: {len(text)} characters of JSON; at most {MAX_PAYLOAD}")
        parsed = json.loads(text)
    else:
        raise ValueError(f"arguments: expected a JSON object or a dict, got {type(arguments).__name__}")
    if not isinstance(parsed, dict):
        raise ValueError(f"arguments: expected a JSON object, got {type(parsed).__name__}")
    if not is_unicode(parsed):
        raise ValueError("arguments: a string holds a lone surrogate (e.g. \\ud800), which is not valid Unicode text")
    return parsed


def is_unicode(value) -> bool:
    """Whether every string in ``value`` (JSON data) is valid Unicode text (no lone surrogates)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str):
    raise ValueError(f"arguments: {name} is not allowed")


def to_openai_tools(specs: list[dict]) -> list[dict]:
    """Tool specs (name, description, input_schema) in OpenAI's function-calling format."""
    return [
        {"type": "function", "function": {"name": s["name"], "description": s["description"], "parameters": s["input_schema"]}}
        for s in specs
    ]


def to_anthropic_tools(specs: list[dict]) -> list[dict]:
    """Tool specs (name, description, input_schema) in Anthropic's tool format."""
    return [{"name": s["name"], "description": s["description"], "input_schema": s["input_schema"]} for s in specs]
