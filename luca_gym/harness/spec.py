"""What names a session in a sweep: :class:`~luca_gym.protocol.SessionSpec`
(the key a results line is found by, :func:`record_key`) and
:func:`plan_world`, which checks a sweep's settings on any world and lists
its sessions."""

from __future__ import annotations

import inspect
import itertools
from dataclasses import MISSING, fields

from luca_gym import worlds
from luca_gym.protocol import LEGACY_WORLD, TOOL_AGENT, SessionSpec, load, runner_kind
from luca_gym.validate import check_seed
from luca_gym.harness.agents import check_agent, is_llm_agent, is_module_agent

# A line written before worlds existed has no ``world`` field: it is LUCA's
# (LEGACY_WORLD, defined beside the results line's format in luca_gym.protocol,
# so the results modules that worlds import read it without the harness).


def session_key(spec: SessionSpec) -> tuple:
    """The key of the results line ``spec`` writes: its world, then the
    world's key fields (:meth:`luca_gym.protocol.World.key_fields`)."""
    values = {**spec.options(), "agent": spec.agent, "seed": spec.seed}
    return (spec.world, *(values[k] for k in worlds.get(spec.world).key_fields()[1:]))


def record_key(record: dict) -> tuple:
    """The key a results line is found by: its world, then the world's key fields."""
    world = worlds.get(record.get("world", LEGACY_WORLD))
    return (world.name, *(record[k] for k in world.key_fields()[1:]))


class ResultsError(ValueError):
    """A results file that cannot be read (names the file, line and problem)."""


def complete_settings(world, settings: dict) -> dict:
    """One session's key settings (the world's ``session_keys`` but the seed,
    in key order): ``settings`` checked, each one left out at its default
    (ValueError names what is wrong)."""
    world = worlds.get(world)
    for name, values in settings.items():
        if isinstance(values, (list, tuple)):
            raise ValueError(f"{name}: {values!r}; one value for one session")
    plan_world(world, [], [0], **settings)  # no agent: nothing planned, every setting checked
    names = [k for k in world.session_keys if k != "seed"]
    defaults = _defaults(world)
    return {k: settings[k] if k in settings else defaults[k] for k in names}


def _defaults(world) -> dict:
    return {**dict(world.key_defaults), **{f.name: f.default for f in fields(load(world.config)) if f.default is not MISSING}}


def run_options(world) -> tuple[str, ...]:
    """The settings of ``world`` a sweep takes once for all its sessions: its
    config's fields that are not key fields (LUCA's and equation's
    ``budget``). A session's record holds them; they are not part of its key,
    so a results folder holds one value of each per session (the world's
    ``expected_fields`` say which it compares)."""
    world = worlds.get(world)
    return tuple(f for f in world.config_fields() if f not in world.session_keys)


def check_setting_names(world, settings) -> None:
    """ValueError naming each of ``settings`` (names) that is not a setting
    of ``world`` (a key field other than the seed, or a run option:
    :func:`run_options`), with those allowed; nothing is built."""
    world = worlds.get(world)
    allowed = [*(k for k in world.session_keys if k != "seed"), *run_options(world)]
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ValueError(f"settings: {', '.join(unknown)} unknown for world {world.name!r}; allowed "
                         f"{', '.join(allowed) or 'none'}")


def plan_world(world, agents, seeds, **settings) -> list[SessionSpec]:
    """The sessions of a sweep on any registered world: agents x every
    combination of ``settings`` (each the world's key field, one value or a
    list; a field left out takes its config default, else its key default)
    x seeds, the loops nested in the world's ``sweep_order``. A run option
    (:func:`run_options`, e.g. ``budget=8``) takes one value for the whole
    sweep; given and not None, it joins each spec's settings after the key
    fields. Each combination is checked by the world's config and
    ``check_settings``, each agent against the world's baselines and the tool
    and learned agents (and a run option against what plays it: the world's
    ``play`` for policies, its ``tools`` for tool agents), and a baseline with
    a ``check_session`` against each combination it names (ValueError names
    what is wrong, before anything runs)."""
    world = worlds.get(world)
    names = [k for k in world.session_keys if k != "seed"]
    options_allowed = run_options(world)
    check_setting_names(world, settings)
    options = {}
    for name in options_allowed:
        if name in settings:
            values = _arms(settings[name], name)
            if len(values) != 1:
                raise ValueError(f"{name}: {values!r}; one value for the whole sweep ({name} is not part of a session's "
                                 f"key: run each value into its own results folder)")
            if values[0] is not None:
                options[name] = values[0]
    defaults = _defaults(world)
    columns = {}
    for name in names:
        if name in settings:
            columns[name] = list(dict.fromkeys(_arms(settings[name], name)))
        elif name in defaults:
            columns[name] = [defaults[name]]
        else:
            raise ValueError(f"settings: {name} has no default in world {world.name!r}; give it")
    order = [*world.sweep_order, *(n for n in names if n not in world.sweep_order)]
    combos = [dict(zip(order, values)) for values in itertools.product(*(columns[n] for n in order))]
    config_fields = set(world.config_fields())
    check = load(world.check_settings) if world.check_settings else None
    for combo in combos:
        world.make_config(**{k: v for k, v in {**combo, **options}.items() if k in config_fields})
        if check:
            check(**combo)
    agents = list(dict.fromkeys(check_agent(a, world.name) for a in agents))
    baselines = world.baseline_policies()
    for a in agents:
        _check_options_played(world, a, baselines, options)
        # A baseline that cannot play every setting says so before anything runs.
        check_session = getattr(baselines.get(a), "check_session", None)
        if check_session is not None:
            wanted = inspect.signature(check_session).parameters
            for combo in combos:
                check_session(**{k: v for k, v in combo.items() if k in wanted})
    seeds = list(dict.fromkeys(check_seed(s) for s in seeds))
    # Settings in key order within each spec, whatever the loop order; then the run options.
    return [SessionSpec(a, s, world.name, (*((k, c[k]) for k in names), *options.items()))
            for c in combos for a in agents for s in seeds]


def _check_options_played(world, agent: str, baselines: dict, options: dict) -> None:
    """ValueError where what plays ``agent``'s sessions (the world's ``tools``
    for a tool agent, its ``play`` for a policy) takes no run option given."""
    if not options:
        return
    tool_agent = is_tool_agent(agent, world, baselines)
    entry = world.tools if tool_agent else world.play
    if entry is None:
        return  # nothing to play it: the runner refuses the agent with its own message
    parameters = inspect.signature(load(entry)).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    for name in options:
        if name not in parameters:
            what = "tool session" if tool_agent else "policy runner"
            raise ValueError(f"{name}: the {what} of world {world.name!r} ({entry}) takes no {name}, so agent {agent!r} "
                             f"cannot play at {name}={options[name]!r}; leave {name} at its default for this agent")


def is_tool_agent(agent: str, world, baselines: dict | None = None) -> bool:
    """Whether ``agent`` plays ``world`` through its tool session (a language
    model, a user's ``module:attribute`` agent, or a baseline that is a
    :class:`~luca_gym.protocol.ToolAgent`) rather than as a policy
    (:func:`~luca_gym.protocol.runner_kind`; ``baselines``: the world's,
    looked up when not given)."""
    if baselines is None:
        baselines = worlds.get(world).baseline_policies()
    if agent in baselines:
        return runner_kind(baselines[agent]) == TOOL_AGENT
    return is_llm_agent(agent) or is_module_agent(agent)


def _arms(value, name: str) -> list:
    """One value, or a list or tuple of them (at least one)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name}: an empty list; give one value or several")
    return values


def expected_fields(spec: SessionSpec) -> dict:
    """What a session of ``spec`` run now records beside its key (the world's
    ``expected_fields``, e.g. LUCA's default budget and call limit; else nothing)."""
    world = worlds.get(spec.world)
    return {} if world.expected_fields is None else dict(load(world.expected_fields)(**spec.options()))
