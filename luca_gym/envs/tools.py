"""A world's tools as a Gymnasium text env: :class:`ToolsEnv` (registered
as ``luca_gym/<Stem>Tools-v0`` for every world with tools; a world may
subclass it, as LUCA's :class:`~luca_gym.worlds.luca.envs.LucaToolsEnv`), for
LLM-for-RL frameworks that drive text environments.

The observation is the conversation so far as text: the system prompt, the
tool specs (JSON), then each tool call and its result (JSON). The action is
one tool call as text, ``{"name": ..., "arguments": {...}}``. The env is a
thin layer over the world's tool session (a
:class:`~luca_gym.tools.session.ToolSessionBase`): the same registry, schemas,
dispatcher and rules, so a scripted sequence of calls scores the same through
either (tested). The reward is the change in the session's return, so the
undiscounted return equals the world's headline score, as in every other env.
A malformed action gets the session's clear error as its tool result, costs
nothing and changes nothing; like every refused call, it never ends the
episode (bound episodes of refusals with ``gymnasium.wrappers.TimeLimit``).
``terminated`` when the agent ends the session; ``truncated`` when a limit
ends it.

The same conversation also comes as chat messages, for chat templates and
LLM-RL trainers (``tokenizer.apply_chat_template(info["messages"],
tools=info["tools"])``): ``info["messages"]`` at every step (and at reset)
holds OpenAI-style messages (system, user, then per call an assistant
message with one ``tool_calls`` entry and a ``tool`` message with its
result), and ``info["tools"]`` at reset the tools as OpenAI function
schemas (:meth:`ToolsEnv.chat_messages`, :meth:`ToolsEnv.chat_tools` give
them at any time). Their text is exactly the string observation's, in other
wrapping: nothing more is shown.

The episode's transcript, in the format of a results line's ``messages``
(:func:`luca_gym.llm.loop.run_agent`; ``luca-gym show --transcript`` and
:func:`luca_gym.results.transcripts.transcript_text` read it), is
``env.unwrapped.transcript`` at any time and ``info["transcript"]`` at the
step that ends the session: the system prompt and opening, then per step
the agent's action text verbatim as an assistant message (``tool_calls``:
the call the env read from it, none for text that is not a call) and the
tool result it was shown (``tool``, or ``user`` for the refusal of text
that is not a call). Only what the agent was shown and what it sent.
"""

from __future__ import annotations

import copy
import json
import string

import gymnasium as gym
from gymnasium import spaces

from luca_gym import worlds
from luca_gym.boundary import reset_options
from luca_gym.protocol import load
from luca_gym.llm.loop import ToolCall, assistant_message, opening_messages, tool_message
from luca_gym.tools.session import MAX_PAYLOAD, ToolSessionBase, python_with_limits, tool_options
from luca_gym.validate import DRAWN_SEED_LIMIT, check_render_mode, check_seed

MAX_TEXT = 1 << 24  # characters of the conversation (the space's bound; a whole session is far below it)
CHARSET = frozenset(string.printable)  # JSON is written with ASCII escapes


def parse_tool_call(text) -> tuple[object, object]:
    """``'{"name": ..., "arguments": {...}}'`` -> (name, arguments), or
    ValueError naming what is wrong; the session checks name and arguments."""
    if not isinstance(text, str):
        raise ValueError(f"action: expected text, got {type(text).__name__}")
    if len(text) > MAX_PAYLOAD + 1024:
        raise ValueError(f"action: {len(text)} characters; at most {MAX_PAYLOAD + 1024}")
    try:
        call = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError('action: not JSON; write one tool call as {"name": TOOL, "arguments": {...}}') from None
    if not isinstance(call, dict) or "name" not in call or not set(call) <= {"name", "arguments"}:
        raise ValueError('action: expected an object {"name": TOOL, "arguments": {...}} (arguments optional)')
    return call["name"], call.get("arguments", {})


class ToolsEnv(gym.Env):
    """One session of a world's tools per episode, driven by tool calls as text.

    Args:
        world: a registered world's name (or a :class:`~luca_gym.protocol.World`);
            required (the registered ``luca_gym/<Stem>Tools-v0`` ids give it).
        render_mode: None or "ansi" (the conversation).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True.
        python: offer the generic ``python`` tool (a world whose tool session
            offers it, e.g. biobank, sealed only: :func:`~luca_gym.tools.session.tool_options`;
            ValueError names another world). Such a session allows
            :data:`~luca_gym.tools.session.PYTHON_TURNS` turns, then ends
            ``truncated``; each block's output is cut to the sandbox's limit.
            It drops the world's structured analysis tools (the paper's setting).
        analysis_tools: with ``python``, keep them beside the python tool
            (ValueError without python, or for a world that has none:
            :func:`~luca_gym.tools.session.check_analysis_tools`).
        limits, sandbox_memory, sandbox_time: with ``python``, its sandbox's
            limits (a :class:`~luca_gym.sandbox.Limits`), the session's
            memory (``"8G"``) and each block's wall clock (seconds) in them
            (:func:`~luca_gym.tools.session.python_with_limits`).
        **settings: the world's settings (its config's fields, checked here)
            and its tool session's options, passed to the world's ``tools``
            factory at every reset.

    ``reset(seed=...)`` seeds the draw of instance seeds; ``options={
    "instance_seed": k}`` pins instance k, as in the world's Gymnasium env
    (:attr:`seed_option`; ``"seed"`` is kept as its alias,
    :attr:`seed_aliases`: both given with different values is a
    ValueError). Reset's ``info`` carries ``instance_seed`` and
    ``instance_id``. ``info`` holds the last call's
    ``result`` (a dict), the conversation as chat ``messages`` and, once the
    session has ended, ``scores`` and ``end_reason`` (as the agent is shown
    them) and the episode's ``transcript`` (:attr:`transcript`); reset's
    ``info`` also holds ``messages`` and ``tools``.
    """

    metadata = {"render_modes": ["ansi"]}
    seed_option = "instance_seed"  # the reset option that pins an instance, and its key in reset's info
    seed_aliases: tuple[str, ...] = ("seed",)  # older names of seed_option, still accepted

    def __init__(self, world, render_mode=None, sealed=None, python=False, analysis_tools=False, **settings):
        check_render_mode(render_mode)
        self.world = worlds.get(world)
        if self.world.tools is None:
            raise ValueError(f"world {self.world.name!r} has no tools")
        config_fields = self.world.config_fields()
        self.world.make_config(**{k: v for k, v in settings.items() if k in config_fields})  # checks them now
        self._open_tools = load(self.world.tools)
        python = python_with_limits(python, settings.pop("limits", None), sandbox_memory=settings.pop("sandbox_memory", None),
                                    sandbox_time=settings.pop("sandbox_time", None))
        self._tool_options = tool_options(self._open_tools, python=python, sealed=sealed,  # refused now, not at reset
                                          analysis_tools=analysis_tools)
        self.settings, self.sealed = settings, sealed
        self.render_mode = render_mode
        self.observation_space = spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_PAYLOAD + 1024, min_length=0, charset=CHARSET)
        self.session: ToolSessionBase | None = None
        self._parts: list[str] = []
        self._messages: list[dict] = []
        self._transcript: list[dict] = []

    def _new_session(self, seed: int) -> ToolSessionBase:
        return self._open_tools(seed, sealed=self.sealed, **self._tool_options, **self.settings)

    def _seed_of(self, options) -> int:
        names = (self.seed_option, *self.seed_aliases)
        options = reset_options(options, names)
        given = {name: check_seed(options[name], f"options[{name!r}]") for name in names if name in options}
        if len(set(given.values())) > 1:
            raise ValueError(f"options: {' and '.join(f'{k!r} ({v})' for k, v in given.items())} name different "
                             f"instances; give {self.seed_option!r} only ({' and '.join(map(repr, self.seed_aliases))}: its alias)")
        return next(iter(given.values())) if given else int(self.np_random.integers(0, DRAWN_SEED_LIMIT))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        instance_seed = self._seed_of(options)  # as every single env draws or pins it
        self.close()  # the last episode's session: its sandbox, if it runs code
        self.session = self._new_session(instance_seed)
        system_prompt = self.session.system_prompt()
        self._parts = [
            "[system]\n" + system_prompt,
            "[tools]\n" + json.dumps(self.session.tool_specs()),
            "[user]\n" + self.session.opening,
        ]
        self._messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": self.session.opening}]
        self._transcript = opening_messages(self.session)
        info = {self.seed_option: instance_seed, "instance_id": self.session.instance_id}
        return self._observation(), {**info, "messages": self.chat_messages(), "tools": self.chat_tools()}

    def step(self, action):
        if self.session is None:
            raise RuntimeError("step() called before reset()")
        before = self.session.total_reward
        try:
            name, arguments = parse_tool_call(action)
        except ValueError as exc:
            result = self.session.error(str(exc))
            shown = {"name": None, "raw": action if isinstance(action, str) else repr(action)}
        else:
            result = self.session.call(name, arguments)  # never raises; checks and rules live there
            shown = {"name": name if isinstance(name, str) else repr(name), "arguments": arguments}
        self._parts.append("[assistant tool call]\n" + _ascii_json(shown, limit=4096))
        self._parts.append("[tool result]\n" + _ascii_json(result))
        call_id = f"call_{len(self.session.transcript)}"
        self._messages.extend(_chat_turn(shown, result, call_id=call_id))
        self._transcript.extend(_transcript_turn(action, shown, result, call_id))
        reward = float(self.session.total_reward - before)
        ended = bool(result.get("ended"))
        info = {"result": result, "messages": self.chat_messages()}
        if ended:
            info["scores"], info["end_reason"] = result["scores"], result["end_reason"]
            info["transcript"] = self.transcript
        terminated = ended and result.get("end_reason") == "end"
        truncated = ended and not terminated
        return self._observation(), reward, terminated, truncated, info

    def _observation(self) -> str:
        return "\n\n".join(self._parts)

    def chat_messages(self) -> list[dict]:
        """The conversation so far as OpenAI-style chat messages (a copy):
        ``{"role": "system"|"user", "content"}``, then per call ``{"role":
        "assistant", "content": None, "tool_calls": [{"id", "type":
        "function", "function": {"name", "arguments"}}]}`` (``arguments`` as
        JSON text, cut at 4096 characters as the string observation cuts
        them) and ``{"role": "tool", "tool_call_id", "name", "content"}`` (the
        result as JSON text). An action that is not a tool call comes as
        ``{"role": "assistant", "content": ...}`` (the action as the string
        observation quotes it, JSON text) and its error as a ``user``
        message, since a ``tool`` message must answer a tool call. Empty
        before reset."""
        return [_copied(m) for m in self._messages]

    @property
    def transcript(self) -> list[dict]:
        """The episode so far in the format of a results line's ``messages``
        (a copy): ``{"role": "system"}`` and ``{"role": "user"}`` (the
        prompt and opening), then per step ``{"role": "assistant",
        "content": the action text as sent, "tool_calls": [{"id", "name",
        "arguments"}]}`` (the call the env read from the text; empty for
        text that is not a call) and ``{"role": "tool", "tool_call_id",
        "name", "content", "is_error"}`` (the result as JSON text, as the
        observation shows it), or ``{"role": "user", "content"}`` for the
        refusal of text that is not a call. Empty before reset; built by the
        same helpers as :func:`luca_gym.llm.loop.run_agent`'s."""
        return copy.deepcopy(self._transcript)

    def chat_tools(self) -> list[dict]:
        """The session's tools as OpenAI function schemas (``{"type":
        "function", "function": {"name", "description", "parameters"}}``), the
        ``tools=`` of a chat template. RuntimeError before reset."""
        if self.session is None:
            raise RuntimeError("chat_tools() called before reset()")
        return self.session.tools_openai()

    def render(self):
        return self._observation() if self.render_mode == "ansi" and self.session is not None else None

    def close(self):
        """Close the session's sandbox (a session that runs code), if any."""
        if self.session is not None:
            self.session.close()


def _copied(message: dict) -> dict:
    """A copy of one chat message (its strings shared: they cannot change);
    at every step, so about six times cheaper than ``copy.deepcopy``."""
    message = dict(message)
    if "tool_calls" in message:
        message["tool_calls"] = [{**call, "function": dict(call["function"])} for call in message["tool_calls"]]
    return message


def _chat_turn(shown: dict, result: dict, call_id: str) -> list[dict]:
    """One step as chat messages: the same text as the string observation's
    ``[assistant tool call]`` and ``[tool result]`` parts."""
    content = _ascii_json(result)
    if shown["name"] is None:  # not a tool call: no tool_calls entry for a tool message to answer
        return [{"role": "assistant", "content": _ascii_json(shown["raw"], limit=4096)}, {"role": "user", "content": content}]
    call = {"id": call_id, "type": "function",
            "function": {"name": shown["name"], "arguments": _ascii_json(shown["arguments"], limit=4096)}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "name": shown["name"], "content": content}]


def _transcript_turn(action, shown: dict, result: dict, call_id: str) -> list[dict]:
    """One step as transcript messages: the action as the agent sent it (text
    beyond the action space's bound, or an action that is not text, as the
    observation quotes it) and the result it was shown."""
    if isinstance(action, str) and len(action) <= MAX_PAYLOAD + 1024:
        text = action
    else:
        text = _ascii_json(action if isinstance(action, str) else repr(action), limit=4096)
    content = _ascii_json(result)
    if shown["name"] is None:  # not a tool call: the refusal answers no call
        return [assistant_message(text), {"role": "user", "content": content}]
    call = ToolCall(shown["name"], shown["arguments"], call_id)
    return [assistant_message(text, [call]), tool_message(call_id, shown["name"], result, content=content)]


def _ascii_json(value, limit: int | None = None) -> str:
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = json.dumps(repr(value))
    if limit is not None and len(text) > limit:
        text = text[:limit] + "...<truncated>"
    return text
