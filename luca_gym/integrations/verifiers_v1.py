"""Any world with tools as a verifiers 0.4 (``verifiers.v1``) environment.

verifiers 0.4 dropped ``MultiTurnEnv``; an environment is now a *taskset*
(tasks in, rewards out), a *harness* (the program that plays a task: it
talks to the model through verifiers' interception server and runs the
tools) and a *runtime* the harness runs in. This module supplies all three
for our worlds, in process and offline:

* :class:`LucaTaskset`: one :class:`LucaTask` per instance ``(world,
  settings, seed)``; its prompt is the instance's system prompt and opening
  message (a world's prompt and tools may differ between instances).
* :class:`LucaHarness`: the chat loop, in this process (the Harness
  contract allows it: every model call goes to the rollout's interception
  endpoint): it opens the world's tool session for the task, offers the
  session's tools, sends each tool call to ``session.call`` (the same
  schemas, checks and rules as our harness, the MCP server and the 0.2
  adapter), and ends the session as our harness's loop does (a turn with
  no tool call: "no_tool_call"; the turn limit: "turn_limit"). The
  session's record lands in ``trace.info["luca_gym"]``.
* :class:`LucaTask`'s reward is the session's return, our scorer's
  headline score; nothing here re-implements a rule.
* :class:`LucaEnv`: the single-agent env with the local subprocess runtime
  as its default (verifiers' own default is a remote Prime sandbox).

Why not verifiers' built-in ``null`` harness with our tools as an MCP
``Toolset``: that harness runs a PEP 723 chat program that verifiers
prepares with ``uv sync --script`` (installing ``uv`` with pip or
``curl https://astral.sh/uv/install.sh`` when missing and resolving
``openai``, ``mcp==2.0.0``, ... from the network:
``verifiers/v1/runtimes/base.py`` ``_ENSURE_UV`` and ``prepare_uv_script``,
``verifiers/v1/harnesses/utils/launch.py`` ``CHAT_PROGRAM``), so it cannot
run offline; and verifiers' default runtime is a remote Prime sandbox.

verifiers 0.4 pins ``mcp==2.0.0`` and so cannot share an environment with
the ``llm`` extra (``mcp>=2.3``): install it in its own
(``pip install -e . "verifiers==0.4.*"``; ``make test-verifiers`` builds
one). Importing this module imports ``verifiers.v1`` (its classes subclass
verifiers'); :func:`luca_gym.integrations.verifiers.load_environment`
dispatches here when verifiers >= 0.4 is installed::

    from luca_gym.integrations.verifiers import load_environment
    env = load_environment(world="dag", num_examples=8, n_nodes=4)   # a verifiers.v1 Env
    episodes = await run(env, model="gpt-4.1-mini", client=vf.EvalClientConfig(base_url=..., api_key_var=...))

verifiers finds a taskset by a top-level module name; once this module is
imported it is also importable as :data:`TASKSET_ID` (``luca_gym_verifiers``),
the id its configs carry (``vf.EnvConfig(taskset={"id": "luca_gym_verifiers",
"world": "dag"})``). The ``vf-eval`` command imports the id before anything
of ours, so it needs that module on disk (not shipped yet).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import Field, field_validator

try:
    import verifiers.v1 as vf
    from verifiers.v1.configs.select import SelectConfig
except ImportError:  # not verifiers 0.4 (0.2 has a different verifiers.v1, or none)
    raise ImportError('luca_gym.integrations.verifiers_v1 needs verifiers >= 0.4 (pip install "verifiers==0.4.*" '
                      'in an environment without the llm extra); for verifiers 0.2 use luca_gym.integrations.verifiers') from None

from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.validate import DRAWN_SEED_LIMIT, check_seed

TASKSET_ID = "luca_gym_verifiers"
"""The taskset and harness id verifiers resolves to this module (an alias in ``sys.modules``)."""
DEFAULT_MAX_TURNS = 300  # model turns of one rollout, as the harness's run_agent

__all__ = ["TASKSET_ID", "LucaTasksetConfig", "LucaData", "LucaTask", "LucaTaskset", "LucaHarnessConfig",
           "LucaHarness", "LucaEnvConfig", "LucaEnv", "load_environment", "run"]


def _check(world: str, settings: Mapping) -> None:
    """ValueError (one line) for a world without tools or a setting it does not take."""
    from luca_gym.integrations.verifiers import _check_settings

    spec = worlds.get(world)
    if spec.tools is None:
        raise ValueError(f"world: {spec.name!r} has no tools; allowed a world with tools")
    _check_settings(spec, dict(settings))
    fields = spec.config_fields()
    spec.make_config(**{k: v for k, v in settings.items() if k in fields})


def _open_session(world: str, seed: int, settings: Mapping, sealed: bool):
    return load(worlds.get(world).tools)(seed, sealed=True if sealed else None, **dict(settings))


class LucaTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which world, which instances, which settings."""

    id: str = TASKSET_ID
    # The default of vf-eval's command line (``vf-eval luca_gym_verifiers`` without
    # ``--env.taskset.world``), as ``luca-gym``'s own --world: load_environment
    # always names its world.
    world: str = "luca"
    """A registered world with tools (``luca``, ``dag``, ...)."""
    seeds: list[int] | None = None
    """The instance seeds, one task each; default ``range(num_examples)``."""
    num_examples: int = Field(16, ge=1, le=DRAWN_SEED_LIMIT)
    settings: dict[str, Any] = Field(default_factory=dict)
    """The world's settings (its config's fields, e.g. ``{"tier": "easy"}``) and its tool session's options."""
    sealed: bool = False
    """Play the sealed instances (secret in ``LUCA_GYM_SECRET``; their ids opaque). Only True/False:
    a secret given here would be recorded in every trace."""
    max_turns: int = Field(DEFAULT_MAX_TURNS, ge=1)
    """The most model turns of a rollout: the last turn's calls run, then the session is ended ("turn_limit")."""

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds):
        if seeds is None:
            return None
        seeds = [check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]
        if not seeds:
            raise ValueError("seeds: empty; give at least one instance seed")
        return seeds


class LucaData(vf.TaskData):
    """One instance: the task's wire data (recorded on each trace)."""

    world: str
    seed: int
    settings: dict[str, Any] = Field(default_factory=dict)
    sealed: bool = False
    max_turns: int = DEFAULT_MAX_TURNS


class LucaTask(vf.Task[LucaData, vf.State, vf.TaskConfig]):
    """A world instance; its reward is the tool session's return (our scorer's headline score)."""

    @property
    def key(self) -> str:
        d = self.data
        return json.dumps({"world": d.world, "seed": d.seed, "settings": d.settings, "sealed": d.sealed}, sort_keys=True)

    @vf.reward
    async def session_return(self, trace) -> float:
        record = trace.info.get("luca_gym")
        if record is None:
            raise ValueError(f"no luca-gym session ran in this rollout: play it with harness {TASKSET_ID!r} "
                             f"(the taskset's default), which runs the world's tools")
        return float(record["return"])

    @vf.metric
    async def calls(self, trace) -> float:
        return float((trace.info.get("luca_gym") or {}).get("calls", 0))


class LucaTaskset(vf.Taskset[LucaTask, LucaTasksetConfig]):
    """One task per seed of ``config.world`` under ``config.settings``."""

    def __init__(self, config: LucaTasksetConfig) -> None:
        super().__init__(config)
        _check(config.world, config.settings)

    def load(self) -> Iterator[LucaTask]:
        c = self.config
        for seed in c.seeds if c.seeds is not None else range(c.num_examples):
            session = _open_session(c.world, seed, c.settings, c.sealed)
            try:
                yield LucaTask(LucaData(id=f"{c.world}/{session.instance_id}", name=session.instance_id,
                                        prompt=session.opening, system_prompt=session.system_prompt(),
                                        world=c.world, seed=seed, settings=c.settings, sealed=c.sealed,
                                        max_turns=c.max_turns), c.task)
            finally:
                session.close()


class LucaHarnessConfig(vf.HarnessConfig):
    id: str = TASKSET_ID


class LucaHarness(vf.Harness[LucaHarnessConfig]):
    """The chat loop in process: model calls through the rollout's interception
    endpoint, tool calls to the world's tool session (no program, no MCP, no network)."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        import openai
        from verifiers.v1.dialects.chat import message_to_wire

        if not isinstance(data, LucaData):  # the wire form (extra fields kept) of a replayed trace
            data = LucaData.model_validate(data.model_dump())
        session = await asyncio.to_thread(_open_session, data.world, data.seed, data.settings, data.sealed)
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [message_to_wire(m) for m in prompt or []]
        tools = session.tools_openai()
        client = openai.AsyncOpenAI(base_url=endpoint, api_key=secret)
        reason = None
        try:
            for _ in range(data.max_turns):
                try:
                    completion = await client.chat.completions.create(model=ctx.model, messages=messages, tools=tools)
                except openai.APIStatusError:
                    if trace.stop_condition is None:
                        raise
                    reason = trace.stop_condition  # verifiers refused the turn (its limits, a @stop)
                    break
                message = completion.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    reason = "no_tool_call"
                    break
                for call in message.tool_calls:
                    try:
                        arguments = json.loads(call.function.arguments or "{}")
                    except json.JSONDecodeError:
                        arguments = call.function.arguments  # the session refuses it, clearly, at no cost
                    result = await asyncio.to_thread(session.call, call.function.name, arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
                    if session.ended:
                        break
                if session.ended:
                    break
            else:
                reason = "turn_limit"
        except BaseException:
            reason = reason or "error"
            raise
        finally:
            await client.close()
            session.finish(reason or "stopped")  # no-op when the model ended it
            record = session.record()
            trace.info["luca_gym"] = {"return": record["return"], "scores": record["scores"],
                                      "end_reason": record["end_reason"], "calls": len(record["calls"]),
                                      "instance_id": session.instance_id}
            session.close()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class LucaEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The one seat; its runtime is local (the harness runs in this process), not verifiers' Prime default."""


class LucaEnv(vf.Env[LucaEnvConfig]):
    """The single-agent env over :class:`LucaTaskset`, local by default."""

    async def run(self, task, agents) -> None:
        await agents.agent.run(task)


# verifiers resolves a taskset id to a module by its top-level name; this dotted one would not import
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


def load_environment(world: str, seeds=None, num_examples: int = 16, sealed=None,
                     max_turns: int = DEFAULT_MAX_TURNS, **config) -> LucaEnv:
    """A verifiers 0.4 environment (:class:`LucaEnv`) over ``world``'s tools,
    with the arguments of :func:`luca_gym.integrations.verifiers.load_environment`:
    ``seeds`` (default ``range(num_examples)``), ``sealed`` (None/False, or True:
    the secret in ``LUCA_GYM_SECRET``), ``max_turns`` and the world's settings
    (``**config``, checked here). ValueError names a bad argument."""
    if sealed is not None and not isinstance(sealed, bool):
        raise ValueError("sealed: with verifiers 0.4 only None, False or True (the secret in LUCA_GYM_SECRET); "
                         "a secret given here would be recorded in every trace")
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns: {max_turns!r}; allowed an integer >= 1")
    if seeds is None and (isinstance(num_examples, bool) or not isinstance(num_examples, int)
                          or not 1 <= num_examples <= DRAWN_SEED_LIMIT):
        raise ValueError(f"num_examples: {num_examples!r}; allowed an integer from 1 to {DRAWN_SEED_LIMIT}")
    _check(world, config)
    taskset = {"id": TASKSET_ID, "world": worlds.get(world).name, "num_examples": num_examples, "settings": config,
               "sealed": bool(sealed), "max_turns": max_turns}
    if seeds is not None:
        taskset["seeds"] = list(seeds)
    return vf.load_environment(vf.resolve_env_config({"taskset": taskset}))


async def run(env: LucaEnv, model: str, client, *, num_rollouts: int = 1, limit: int | None = None,
              max_concurrent: int | None = None, sampling=None) -> list:
    """Play ``env``'s tasks (the first ``limit``) with ``model`` behind ``client``
    (a ``vf.EvalClientConfig``): ``num_rollouts`` episodes each, as ``vf-eval``
    does in process; returns the episodes (``episode.traces[0].reward``,
    ``.info["luca_gym"]``)."""
    ctx = vf.ModelContext(client=client, model=model, sampling=sampling or vf.Sampling())
    tasks = list(env.taskset.select(SelectConfig(limit=limit)))
    semaphore = asyncio.Semaphore(max_concurrent) if max_concurrent else None
    async with env.serving():
        slots = [slot for task in tasks for slot in env.slots(task, num_rollouts)]
        return list(await asyncio.gather(*(env.run_slot(slot, ctx, semaphore) for slot in slots)))
