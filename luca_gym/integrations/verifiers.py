"""Any world with tools as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_
environment: :func:`load_environment`, so ``vf-eval`` and verifiers-based
trainers (prime-rl) run our worlds.

The environment is a thin ``verifiers.MultiTurnEnv`` over the world's tool
session (:class:`~luca_gym.tools.session.ToolSessionBase`): each rollout opens
the session of its dataset row's instance seed, every tool call the model
makes goes to ``session.call`` (the same schemas, checks and rules as our
harness, the MCP server and the text env; a malformed call comes back as the
session's clear error, costs nothing and changes nothing), and the rubric's
reward is the session's return, our scorer's headline score. A rollout that
stops without ending the session (a turn with no tool call, or the turn
limit) is ended for it as the harness does (:func:`luca_gym.llm.loop.run_agent`),
so the same calls score exactly the same through either (tested).

Which release: verifiers 0.4 pins ``mcp==2.0.0`` and 0.3 and 0.2.1 pin
``mcp<2``, while our ``llm`` extra needs ``mcp>=2.3``; verifiers 0.2.0 asks
``mcp>=1.14.1`` and installs beside it, so that is the release this adapter
is written and tested against (``pip install "luca-gym[verifiers]"``).
verifiers 0.4 also dropped the API this adapter stands on (``MultiTurnEnv``,
``Rubric``, ``verifiers.types``: 0.4 keeps only ``verifiers.v1``'s
taskset, harness and MCP-toolset design), so with it installed
:func:`load_environment` returns :mod:`luca_gym.integrations.verifiers_v1`'s
environment for the same arguments (and where ``verifiers.v1`` is not one it
knows, says so in one line, ImportError, rather than failing inside
verifiers). verifiers is imported when :func:`load_environment`
is called, never at import time. verifiers finds it by module name::

    import verifiers as vf
    env = vf.load_environment("luca_gym.integrations.verifiers", world="dag", num_examples=8)

(``vf-eval luca_gym.integrations.verifiers -a '{"world": "dag"}'`` the same).

verifiers reloads an environment by its ``env_id`` and ``env_args``:
``vf-eval``'s env server (its default; ``--disable-env-server`` plays in the
one process) spawns worker processes that each call
``vf.load_environment(env.env_id, **env.env_args)``, which imports the module
the id names (its last ``/`` part, ``-`` read as ``_``). So the environment's
``env_id`` is this module's name, :data:`ENV_ID`, and its ``env_args`` are
the arguments that rebuild it (the world, its rows, the seal, the turn limit
and the settings); they are also what ``vf-eval --save-results`` writes to
``metadata.json``, so a seal travels as a :class:`~luca_gym.seal.Seal`, which
shows its fingerprint only, never the secret.
"""

from __future__ import annotations

import functools
import inspect
import json

from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.seal import make_seal
from luca_gym.llm.loop import opening_messages
from luca_gym.validate import DRAWN_SEED_LIMIT, check_seed

INSTALL_HINT = 'verifiers is not installed; pip install "luca-gym[verifiers]"'
DEFAULT_MAX_TURNS = 300  # model turns of one rollout, as the harness's run_agent
ENV_ID = __name__  # verifiers' worker processes import the environment's env_id: this module


def _import_verifiers():
    try:
        import verifiers
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    if not hasattr(verifiers, "MultiTurnEnv"):  # 0.4 keeps only verifiers.v1 (tasksets, harnesses, MCP toolsets)
        raise ImportError(f"verifiers {getattr(verifiers, '__version__', '?')} is installed; this adapter needs "
                          f"verifiers' MultiTurnEnv API (0.2.0, which 0.4 removed): pip install \"luca-gym[verifiers]\"")
    return verifiers


def _verifiers_v1():
    """:mod:`luca_gym.integrations.verifiers_v1` where verifiers >= 0.4 (no
    ``MultiTurnEnv``, a working ``verifiers.v1``) is installed, else None."""
    try:
        import verifiers
    except ImportError:
        return None
    if hasattr(verifiers, "MultiTurnEnv"):
        return None
    try:
        from luca_gym.integrations import verifiers_v1
    except ImportError:
        return None  # not a verifiers.v1 we know: _import_verifiers names the release
    return verifiers_v1


# Tool-session parameters that are not settings a user gives: the seed comes
# from the dataset row, sealed is load_environment's own, env is the harness's.
_NOT_SETTINGS = frozenset({"seed", "sealed", "env"})


def _check_settings(spec, config: dict) -> None:
    """ValueError, one line, naming each of ``config`` (names) that is
    neither a field of world ``spec``'s config nor an option its tool
    session takes, with those allowed; nothing is built."""
    fields = set(spec.config_fields())
    params = inspect.signature(load(spec.tools)).parameters.values()
    options = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - _NOT_SETTINGS
    unknown = sorted(set(config) - fields - options)
    if unknown:
        allowed = ", ".join(sorted(fields | options)) or "none"
        raise ValueError(f"setting{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} unknown for world "
                         f"{spec.name!r}; allowed {allowed}")


def load_environment(world: str, seeds=None, num_examples: int = 16, sealed=None,
                     max_turns: int = DEFAULT_MAX_TURNS, **config):
    """A verifiers environment over ``world``'s tools.

    Args:
        world: a registered world with tools (``luca``, ``dag``, ...); required
            (``vf-eval``: ``-a '{"world": "dag"}'``).
        seeds: the instance seeds of the dataset's rows (each row plays one
            instance); default ``range(num_examples)``.
        num_examples: the number of rows when ``seeds`` is not given.
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True: the
            rows play the sealed instances (their ids opaque), as ``luca-gym
            eval --sealed`` does.
        max_turns: the most model turns of a rollout: the last turn's calls
            run, then the session is ended for it (``end_reason``
            "turn_limit"), as the harness's loop does.
        **config: the world's settings (its config's fields, checked here,
            e.g. ``tier="easy"``) and its tool session's options.

    Returns (verifiers 0.2) a ``verifiers.MultiTurnEnv`` whose dataset and eval dataset
    (built when first asked for) hold one row per seed: ``prompt``, the
    instance's system prompt and opening user message; ``info``, JSON text
    of ``{"seed": k, "tool_defs": [...]}``, the instance's tools (a world's
    prompt and tools may differ between instances: LUCA's name the
    organism's genes). The rubric's reward is the session's return; a
    rollout's state keeps ``state["luca_gym"]``: the session's return,
    scores, end_reason, number of calls and instance_id (opaque when
    sealed). Its ``env_id`` is :data:`ENV_ID` and its ``env_args`` rebuild it
    (``vf.load_environment(env.env_id, **env.env_args)``, as ``vf-eval``'s env
    server workers do). ImportError with the install hint when verifiers is
    missing; ValueError naming a bad argument.
    """
    spec = worlds.get(world)
    if spec.tools is None:
        raise ValueError(f"world: {spec.name!r} has no tools; allowed a world with tools")
    _check_settings(spec, config)  # an unknown one at once, not as a TypeError when the first row is built
    fields = spec.config_fields()
    spec.make_config(**{k: v for k, v in config.items() if k in fields})  # checks them now
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns: {max_turns!r}; allowed an integer >= 1")
    row_args = {}  # how env_args rebuild the rows: as they were given
    if seeds is None:
        if isinstance(num_examples, bool) or not isinstance(num_examples, int) or not 1 <= num_examples <= DRAWN_SEED_LIMIT:
            raise ValueError(f"num_examples: {num_examples!r}; allowed an integer from 1 to {DRAWN_SEED_LIMIT}")
        seeds, row_args = range(num_examples), {"num_examples": num_examples}
    seeds = [check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]
    if not seeds:
        raise ValueError("seeds: empty; give at least one instance seed")
    row_args = row_args or {"seeds": seeds}
    seal = make_seal(sealed)  # a bad secret now; a Seal in env_args shows its fingerprint, never the secret
    v1 = _verifiers_v1()
    if v1 is not None:  # verifiers >= 0.4: its verifiers.v1 taskset/harness design
        return v1.load_environment(spec.name, seeds=seeds, sealed=sealed, max_turns=max_turns, **config)
    vf = _import_verifiers()
    from datasets import Dataset  # a dependency of verifiers

    open_tools = load(spec.tools)

    def open_session(seed: int):
        return open_tools(seed, sealed=seal, **config)

    @functools.cache
    def dataset():
        rows = []
        for i, seed in enumerate(seeds):
            session = open_session(seed)
            info = json.dumps({"seed": seed, "tool_defs": _tool_defs(session)})  # text: Arrow keeps the schemas as they are
            rows.append({"prompt": opening_messages(session), "info": info, "example_id": i})
        return Dataset.from_list(rows)

    # env_id and env_args are how verifiers rebuilds this environment in another process
    # (vf-eval's env server workers: vf.load_environment(env_id, **env_args)), so the id is
    # this module's importable name and the args everything that was given
    env_args = {"world": spec.name, **row_args, **({"sealed": seal} if seal is not None else {}),
                "max_turns": max_turns, **config}
    env_class = _environment_class(vf)
    return env_class(open_session=open_session, turn_limit=max_turns, dataset=dataset, eval_dataset=dataset,
                     rubric=_rubric(vf), env_id=ENV_ID, env_args=env_args)


def _tool_defs(session) -> list[dict]:
    """The session's tools as verifiers' tool definitions (name, description, parameters)."""
    return [{"name": s["name"], "description": s["description"], "parameters": s["input_schema"]} for s in session.tool_specs()]


def _rubric(vf):
    """Our scorer as the rubric: the reward is the session's return (its
    headline score, as our harness reports it)."""

    def session_return(state) -> float:
        return float(state["luca_gym"]["return"])

    return vf.Rubric(funcs=[session_return], weights=[1.0])


_CLASSES: dict = {}


def _environment_class(vf):
    """The ``MultiTurnEnv`` subclass, built once verifiers is imported."""
    if "env" in _CLASSES:
        return _CLASSES["env"]
    from verifiers.types import ToolMessage
    from verifiers.utils.message_utils import normalize_messages

    class WorldToolsEnv(vf.MultiTurnEnv):
        """A world's tool session per rollout; each tool call goes to ``session.call``."""

        def __init__(self, open_session, turn_limit: int, **kwargs):
            # verifiers stops at max_turns before running that turn's calls; the harness runs them,
            # so the limit is ours (env_response) and verifiers' own is one turn later, unused
            super().__init__(max_turns=turn_limit + 1, **kwargs)
            self.open_session, self.turn_limit = open_session, turn_limit

        async def setup_state(self, state):
            seed = check_seed((state.get("info") or {}).get("seed"), "info['seed']")
            session = self.open_session(seed)
            state["session"] = session
            # the session is the source of truth for what the model is shown (a dataset row says the same)
            state["prompt"] = normalize_messages(opening_messages(session), field_name="prompt")
            state["tool_defs"] = self._normalize_tool_defs(_tool_defs(session))
            return state

        async def env_response(self, messages, state, **kwargs):
            session = state["session"]
            answers = []
            for call in getattr(messages[-1], "tool_calls", None) or []:
                result = session.call(call.name, call.arguments)  # never raises: refusals come back as {"error": ...}
                answers.append(ToolMessage(role="tool", tool_call_id=call.id, content=json.dumps(result)))
                if session.ended:
                    break
            if session.ended or len(state["trajectory"]) >= self.turn_limit:
                state["final_env_response"] = answers  # the results are shown, and the rollout stops
            return answers

        @vf.stop
        async def no_tool_call(self, state) -> bool:
            """The model answered without a tool call: the rollout ends (as the harness's loop does)."""
            if not state["trajectory"]:
                return False
            last = state["trajectory"][-1]["completion"][-1]
            return last.role == "assistant" and not getattr(last, "tool_calls", None)

        @vf.cleanup
        async def end_session(self, state) -> None:
            """End a session the model left open (``end_reason``: "no_tool_call", "turn_limit", or
            verifiers' stop condition, e.g. "has_error" for a failed model call), and keep its
            record (JSON) in the state."""
            session = state.pop("session", None)
            if session is None:
                return
            condition = state.get("stop_condition")
            if condition != "no_tool_call" and len(state["trajectory"]) >= self.turn_limit:
                condition = "turn_limit"
            session.finish(condition or "stopped")
            record = session.record()
            state["luca_gym"] = {"return": record["return"], "scores": record["scores"],
                                 "end_reason": record["end_reason"], "calls": len(record["calls"]),
                                 "instance_id": session.instance_id}

    _CLASSES["env"] = WorldToolsEnv
    return WorldToolsEnv
