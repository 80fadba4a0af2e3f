"""The one API test every world passes: :func:`check_world`.

In the spirit of pgx's ``api_test`` and jumanji's env checks, and public so
that a world written outside the package can run it on itself. It uses only
what the world declares to the registry (:class:`luca_gym.protocol.World`)
and its tool session's generic surface
(:class:`luca_gym.tools.session.ToolSessionBase` plus ``demo_calls()``, a
short legal session that ends), so it names no world.

What it checks (each failure raises AssertionError naming the check):

* ``registry`` -- the world is registered, its config checks its settings,
  its Gymnasium ids are registered;
* ``return-equals-headline`` -- a played session's undiscounted return equals
  its headline score;
* ``refusals`` -- hostile calls (an unknown tool, non-JSON text, a list, an
  unknown argument, NaN, a name that is not a string) are refused with the
  session's status unchanged, and a session with refusals between its calls
  gives the same results and scores as one without: they changed nothing and
  cost nothing;
* ``schemas`` -- the published JSON Schemas accept exactly what the dispatcher
  accepts (jsonschema's verdict equals the session's on every call made);
* ``replay`` -- a recorded session replays exactly;
* ``sealed`` -- a sealed instance is another instance (its id and its results
  differ);
* ``no-retrace`` -- after one session, a session on another instance of the
  same config traces no JAX function (not for a world whose tools are marked
  host-side, ``World.host_side``: a released data set, a code sandbox);
* ``text-env`` and ``mcp`` -- the text env and the MCP server (in process)
  give the same results and return as the tool session;
* ``policy-record`` (a world with ``World.play`` and a scripted policy
  among its baselines) -- the first such policy's record is its tool
  session's transcript, as a model's is: replayed call by call through a
  fresh tool session it gives the same calls, results and scores;
* ``core`` (a world with ``World.core``) -- the core's env
  (:class:`luca_gym.envs.core.CoreEnv`) refuses an action outside its space
  with ValueError and the state unchanged, and sessions of random actions
  from the space end with a return equal to the headline score;
* ``check_env`` -- Gymnasium's ``check_env`` passes on each registered id;
* ``flat`` (a world with a flat codec) -- the functional env
  (:mod:`luca_gym.functional`) under a policy that tries masked actions
  too: an action the mask allows is never refused, a refused one changes
  nothing and costs nothing (the same mask and score, reward 0; the
  observation may report the refusal), and an
  ended session's return equals its headline score; ``flat-baselines``
  (a world with ``World.flat_baselines``) -- each flat baseline, the
  teachers of ``luca-gym train --algo bc``, chooses only actions the codec
  takes and ends sessions; ``flat-no-retrace`` -- a rollout on a pool of
  other instances traces no JAX function (not for a codec marked host-side).
"""

from __future__ import annotations

import contextlib
import json
import math

from luca_gym import worlds
from luca_gym.protocol import World, load
from luca_gym.llm.loop import ReplayAgent, run_agent

SECRET = "luca-gym check_world secret"
# Hostile calls: (name, arguments). None as a name stands for "the first tool".
HOSTILE = (
    ("__no_such_tool__", {}),
    (None, "{not json"),
    (None, [1, 2]),
    (None, {"__unknown_argument__": 1}),
    (None, {"__unknown_argument__": math.nan}),
    (7, {}),
)


@contextlib.contextmanager
def count_traces():
    """Count the JAX functions traced for jit inside the block (a list of
    their names), from JAX's own monitoring events: no counter in production code."""
    from jax import monitoring
    from jax._src import dispatch

    traced: list[str] = []

    def listener(event, duration, **kwargs):
        if event == dispatch.JAXPR_TRACE_EVENT:
            traced.append(kwargs.get("fun_name", "?"))

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield traced
    finally:
        monitoring.unregister_event_duration_listener(listener)


def _play(session, calls) -> list[dict]:
    return [session.call(name, arguments) for name, arguments in calls]


def _check(condition, check: str, message: str) -> None:
    if not condition:
        raise AssertionError(f"check_world [{check}]: {message}")


def check_world(world, *, settings: dict | None = None, seeds=(0, 1), gym_ids: bool = True, mcp: bool = True) -> list[str]:
    """Run the API test on ``world`` (a name, an entry point or a
    :class:`~luca_gym.protocol.World`), with ``settings`` (the world's config
    fields and tool options) on instances ``seeds[0]`` and ``seeds[1]``.
    Returns the names of the checks that ran; raises AssertionError naming
    the first that failed."""
    world = worlds.get(world)
    settings = dict(settings or {})
    ran: list[str] = []

    _check(isinstance(world, World) and world.name in worlds.names(), "registry", f"{world.name!r} is not registered")
    config_fields = set(world.config_fields())
    world.make_config(**{k: v for k, v in settings.items() if k in config_fields})
    import gymnasium

    for env_id in world.gym_ids():
        _check(env_id in gymnasium.registry, "registry", f"{env_id} is not registered with Gymnasium")
    ran.append("registry")

    if world.tools is not None:
        ran += _check_tools(world, load(world.tools), settings, seeds, mcp)
    if world.tools is not None and world.play is not None:
        ran += _check_policy_record(world, load(world.tools), settings, seeds)
    if world.core is not None:
        ran += _check_core(world, {k: v for k, v in settings.items() if k in config_fields}, seeds)
    if world.flat is not None:
        ran += _check_flat(world, settings, seeds)
    if gym_ids:
        ran += _check_gym_ids(world, settings, config_fields)
    return ran


FLAT_ENVS, FLAT_STEPS = 4, 96
CORE_STEPS = 200  # random actions a core's session may take before check_world says it did not end


def _check_core(world: World, settings: dict, seeds) -> list[str]:
    import jax
    import numpy as np

    from luca_gym.envs.core import CoreEnv

    env = CoreEnv(world.name, **settings)
    env.action_space.seed(0)
    for seed in seeds:
        env.reset(options={env.seed_option: seed})
        before = jax.tree_util.tree_leaves(jax.device_get(env.state))
        for bad in (None, "__not_an_action__", [[-1]]):
            try:
                env.step(bad)
            except ValueError:
                pass
            else:
                _check(False, "core", f"an action outside the space ({bad!r}) was taken")
        after = jax.tree_util.tree_leaves(jax.device_get(env.state))
        _check(all(np.array_equal(a, b) for a, b in zip(before, after)), "core", "a refused action changed the state")
        total, terminated = 0.0, False
        for _ in range(CORE_STEPS):
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            total += reward
            if terminated or truncated:
                break
        _check(terminated, "core", f"random actions did not end a session within {CORE_STEPS} steps")
        headline = info["scores"][world.headline]
        _check(abs(total - headline) <= 1e-5, "core", f"return {total} != {world.headline} {headline}")
    env.close()
    return ["core"]


def _probing_policy(params, key, obs, mask):
    """Mostly a random legal action; about one step in three a masked one
    (where any is), and one in eight an index outside [0, K) (-1, K or
    2**31 - 1: hostile input the codec must refuse)."""
    import jax
    import jax.numpy as jnp

    pick, coin, wild = jax.random.split(key, 3)
    legal = jax.random.categorical(pick, jnp.where(mask, 0.0, -jnp.inf))
    masked = jax.random.categorical(pick, jnp.where(mask, -jnp.inf, 0.0))
    try_masked = jax.random.bernoulli(coin, 1 / 3, legal.shape) & ~mask.all(axis=-1)
    action = jnp.where(try_masked, masked, legal).astype(jnp.int32)
    outside = jnp.array([-1, mask.shape[-1], 2**31 - 1], jnp.int32)[jax.random.randint(wild, legal.shape, 0, 3)]
    return jnp.where(jax.random.bernoulli(wild, 1 / 8, legal.shape), outside, action)


def _check_flat(world: World, settings: dict, seeds) -> list[str]:
    import inspect

    import jax
    import numpy as np

    from luca_gym import functional as F

    accepted = inspect.signature(load(world.flat)).parameters
    codec = world.make_flat(**{k: v for k, v in settings.items() if k in accepted})
    _check(codec == world.make_flat(**{k: v for k, v in settings.items() if k in accepted}) and hash(codec) is not None,
           "flat", "the flat codec is not a hashable value (two builds of the same settings differ)")
    pool = F.make_pool(codec, list(seeds))
    out = jax.device_get(F.flat_rollout(_probing_policy, None, jax.random.PRNGKey(0), codec, pool, FLAT_ENVS, FLAT_STEPS,
                                        trajectories=True))
    t = out["trajectory"]
    actions = t["action"]
    inside = (actions >= 0) & (actions < t["mask"].shape[-1])
    chosen_legal = inside & np.take_along_axis(t["mask"], np.where(inside, actions, 0)[..., None], axis=-1)[..., 0]
    refused = t["error"] != 0
    _check(not (refused & chosen_legal).any(), "flat", "an action the mask allows was refused")
    _check(refused[~inside].all(), "flat", "an action outside [0, K) was not refused (the codec took it as a legal one)")
    k, b = np.nonzero(refused[1:-1])
    k = k + 1  # refusals with a step before and after them
    _check(not t["done"][k, b].any() and (t["reward"][k, b] == 0).all(), "flat", "a refused action cost something or ended a session")
    fresh = t["done"][k - 1, b]  # a session opened at k - 1: its score before step k is not in the record
    _check((t["mask"][k + 1, b] == t["mask"][k, b]).all() and (t["score"][k, b] == t["score"][k - 1, b])[~fresh].all(),
           "flat", "a refused action changed the mask or the score")
    done = t["done"]
    _check(done.any(), "flat", f"no session ended within {FLAT_STEPS} steps")
    _check(np.allclose(t["return"][done], t["score"][done], atol=1e-5), "flat",
           f"an ended session's return differs from its {world.headline}")
    ran = ["flat"]
    for name, make in world.flat_baseline_policies().items():  # each teacher of `train --algo bc` plays legal actions
        played = jax.device_get(F.flat_rollout(make(codec), None, jax.random.PRNGKey(2), codec, pool, FLAT_ENVS, FLAT_STEPS,
                                               trajectories=True))["trajectory"]
        _check((played["error"] == 0).all(), "flat-baselines", f"flat baseline {name!r} chose an action the codec refused")
        _check(played["done"].any(), "flat-baselines", f"flat baseline {name!r} ended no session within {FLAT_STEPS} steps")
        ran = ["flat", "flat-baselines"]
    if "flat" in world.host_side:  # a host-side codec is not held to the jit checks
        return ran
    other = F.make_pool(codec, [s + 1000 for s in seeds])
    with count_traces() as traced:
        jax.block_until_ready(F.flat_rollout(_probing_policy, None, jax.random.PRNGKey(1), codec, other, FLAT_ENVS, FLAT_STEPS,
                                             trajectories=True))
    _check(not traced, "flat-no-retrace", f"a rollout on other instances traced {traced}")
    return [*ran, "flat-no-retrace"]


def _check_tools(world: World, open_tools, settings: dict, seeds, mcp: bool) -> list[str]:
    ran = []
    first = open_tools(seeds[0], **settings)
    script = first.demo_calls()
    _check(len(script) > 0, "return-equals-headline", "demo_calls() is empty")
    results = _play(first, script)
    _check(first.ended, "return-equals-headline", "the demo calls did not end the session")
    headline = first.scores[world.headline]
    _check(abs(first.total_reward - headline) <= 1e-5, "return-equals-headline",
           f"return {first.total_reward} != {world.headline} {headline}")
    ran.append("return-equals-headline")

    hostile_session = open_tools(seeds[0], **settings)
    hostile_results = []
    made = []  # (name, arguments, accepted) of every call, for the schema check
    for name, arguments in script:
        for bad_name, bad_arguments in HOSTILE:
            bad_name = name if bad_name is None else bad_name
            before = hostile_session.status()
            answer = hostile_session.call(bad_name, bad_arguments)
            _check("error" in answer, "refusals", f"{bad_name!r}({str(bad_arguments)[:40]}) was not refused: {answer}")
            _check(hostile_session.status() == before, "refusals", f"a refusal changed the status {before} -> {hostile_session.status()}")
            made.append((bad_name, bad_arguments))
        hostile_results.append(hostile_session.call(name, arguments))
        made.append((name, arguments))
    _check(hostile_results == results, "refusals", "refusals between the calls changed their results")
    _check(hostile_session.scores == first.scores and hostile_session.total_reward == first.total_reward, "refusals",
           "refusals between the calls changed the scores")
    ran.append("refusals")

    with contextlib.suppress(ImportError):
        import jsonschema

        schemas = {s["name"]: s["input_schema"] for s in first.tool_specs()}
        fresh = open_tools(seeds[0], **settings)
        for name, arguments in made:
            if not isinstance(name, str) or name not in schemas or not isinstance(arguments, dict):
                continue
            if any(isinstance(v, float) and not math.isfinite(v) for v in arguments.values()):
                continue  # not JSON: refused before any schema (tested above)
            published = jsonschema.Draft202012Validator(schemas[name]).is_valid(arguments)
            _check(published == (fresh.validate(name, arguments) is None), "schemas",
                   f"{name}({json.dumps(arguments)[:80]}): the schema says {published}, the dispatcher the opposite")
        ran.append("schemas")

    replayed = open_tools(seeds[0], **settings)
    record = first.record()
    run_agent(ReplayAgent(record), replayed, retries=0)
    _check([c["result"] for c in replayed.transcript] == results, "replay", "the replayed results differ")
    _check(replayed.scores == first.scores, "replay", "the replayed scores differ")
    ran.append("replay")

    sealed = open_tools(seeds[0], sealed=SECRET, **settings)
    _check(sealed.instance_id != first.instance_id, "sealed", "a sealed instance shows the unsealed id")
    _check(_play(sealed, sealed.demo_calls()) != results, "sealed", "a sealed instance gives the unsealed results")
    ran.append("sealed")

    if "tools" not in world.host_side:  # a host-side tool session is not held to the jit checks
        with count_traces() as traced:
            other = open_tools(seeds[1], **settings)
            _play(other, other.demo_calls())
        _check(not traced, "no-retrace", f"a second instance of the same config traced {sorted(set(traced))}")
        ran.append("no-retrace")

    from luca_gym.envs.tools import ToolsEnv

    env = ToolsEnv(world, **settings)
    env.reset(options={env.seed_option: seeds[0]})
    env_results, total = [], 0.0
    for name, arguments in script:
        _, reward, terminated, truncated, info = env.step(json.dumps({"name": name, "arguments": arguments}))
        env_results.append(info["result"])
        total += reward
    _check(env_results == results, "text-env", "the text env's results differ from the tool session's")
    _check(abs(total - first.total_reward) <= 1e-5 and (terminated or truncated), "text-env",
           "the text env's return differs, or it did not end")
    ran.append("text-env")

    if mcp:
        with contextlib.suppress(ImportError):
            ran += _check_mcp(open_tools(seeds[0], **settings), script, results)
    return ran


def _check_policy_record(world: World, open_tools, settings: dict, seeds) -> list[str]:
    """A scripted policy's record (``World.play``) is written by the tool
    session, as a model's is: its calls, replayed one by one through a fresh
    tool session, give the same calls, results and scores."""
    from luca_gym.harness.agents import make_runner
    from luca_gym.protocol import POLICY, runner_kind

    policies = [name for name, runner in world.baseline_policies().items() if runner_kind(runner) == POLICY]
    if not policies:
        return []
    played = load(world.play)(make_runner(policies[0], world=world.name), seeds[0], **settings)
    _check(len(played["calls"]) > 0, "policy-record", f"{policies[0]!r} made no call")
    replayed = open_tools(seeds[0], **settings)
    run_agent(ReplayAgent({"calls": played["calls"]}), replayed, retries=0)
    entry = lambda c: (c["call"], c["arguments"], c["result"])  # noqa: E731
    _check([entry(c) for c in replayed.transcript] == [entry(c) for c in played["calls"]], "policy-record",
           f"{policies[0]!r}'s record, replayed through a tool session, gives other calls or results")
    _check(replayed.scores == played["scores"], "policy-record", f"{policies[0]!r}'s record replays to other scores")
    return ["policy-record"]


def _check_mcp(session, script, results) -> list[str]:
    import anyio
    from mcp import Client

    from luca_gym.mcp.server import build_server

    server = build_server(session)

    async def drive():
        async with Client(server, mode="legacy") as client:
            return [(await client.call_tool(name, arguments)).structured_content for name, arguments in script]

    _check(anyio.run(drive) == json.loads(json.dumps(results)), "mcp", "the MCP server's results differ")
    return ["mcp"]


def _check_gym_ids(world: World, settings: dict, config_fields: set) -> list[str]:
    import gymnasium
    from gymnasium.utils.env_checker import check_env

    config_settings = {k: v for k, v in settings.items() if k in config_fields}
    for env_id, (_, kwargs) in world.gym_ids().items():
        extra = settings if env_id.endswith("Tools-v0") else config_settings
        env = gymnasium.make(env_id, **{**kwargs, **extra})
        try:
            check_env(env.unwrapped, skip_render_check=True)
        except Exception as exc:
            raise AssertionError(f"check_world [check_env]: {env_id}: {type(exc).__name__}: {exc}") from exc
        finally:
            env.close()
    return ["check_env"]


__all__ = ["check_world", "count_traces"]
