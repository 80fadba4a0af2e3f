"""The world protocol: what the generic layers know of a world.

A world is one folder, ``luca_gym/worlds/<name>/`` (or a package of its own,
registered through the entry-point group ``luca_gym.worlds``): its config, its
types, generator, pure ``reset``/``step``, rules, scorer, tools, baselines and
front ends. This module names only what crosses from a world to the generic
layers; it imports no world, and no world module is imported until something
asks for it (entry points are ``"package.module:attribute"`` strings).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

from luca_gym.validate import short_repr

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_STEM = re.compile(r"[A-Z][A-Za-z0-9]{0,31}")
_ENTRY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_MODULE_ENTRY = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?")  # a module may be the entry (World.core, World.audit)
# What a world may mark as host-side (World.host_side).
HOST_SIDE_PARTS = ("tools", "flat")
# A results line written before worlds existed has no ``world`` field: it is
# LUCA's. The one place a generic reader names a world (the harness re-exports
# it as luca_gym.harness.spec.LEGACY_WORLD).
LEGACY_WORLD = "luca"


def load(entry_point: str) -> Any:
    """``"package.module:attribute"`` -> the attribute (imported on demand);
    ``"package.module"`` -> the module."""
    module, _, attribute = entry_point.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class SessionSpec:
    """One session of a sweep: ``agent`` on instance ``seed`` of ``world``,
    under ``settings`` (the world's other key fields as ``(name, value)``
    pairs, in key order). A setting reads as an attribute (``spec.tier``);
    its results line's key is :func:`luca_gym.harness.session_key`.
    :func:`luca_gym.harness.plan_world` plans any world's; a world may offer
    a builder of its own (LUCA's :func:`~luca_gym.worlds.luca.evaluation.luca_spec`)."""

    agent: str
    seed: int
    world: str
    settings: tuple = ()

    def __getattr__(self, name):
        for key, value in object.__getattribute__(self, "settings"):
            if key == name:
                return value
        raise AttributeError(f"SessionSpec of world {object.__getattribute__(self, 'world')!r} has no setting {name!r}")

    def options(self) -> dict:
        """The settings as keyword arguments (as the world's tool session takes them)."""
        return dict(self.settings)



@runtime_checkable
class FlatCodec(Protocol):
    """A world's flat encoding for learners: what the functional env
    (:mod:`luca_gym.functional`), the PPO and a learned agent in the harness
    need of a world. It is the static settings of the flat env, so it must be
    hashable (a frozen dataclass): ``jit`` takes it as a static argument.

    Attributes:
        world: the world's registry name. headline: its headline score's name.
        num_actions: K, the size of the ``Discrete`` action.
        observation_size: D, the length of the float32 observation vector.

    Methods (``open``, ``step`` and ``score`` pure: jit and vmap apply):
        settings() -> dict: keyword settings that rebuild the codec through the
            world's ``flat`` factory (JSON-able: a run folder stores them).
        describe() -> str: a few words for titles and logs.
        instances(seeds) -> pytree: the instances of ``seeds`` (host side,
            batched, B leading); ``open`` takes one.
        instance_source(seeds) -> :class:`luca_gym.pools.InstanceSource`
            (optional): the pool of ``seeds`` the functional env opens
            (``make_pool``'s default source: LUCA's organisms from its disk
            store); without it the pool is ``instances(seeds)``.
        open(instance) -> (state, vector float32 (D,), mask bool (K,)).
        step(state, action int32 ()) -> (state, vector, mask, reward float32 (),
            terminated bool (), truncated bool (), error int32 ()): a refused
            action costs nothing and changes nothing (error != 0).
        score(state) -> float32 (): the headline score of the session so far;
            the undiscounted return of an ended session equals it.
        renew(state, key uint32 (2,)) -> state (optional, pure): a session just
            opened, its noise from here on drawn from ``key``, its opening
            observation unchanged; the functional env renews each session it
            draws from a pool, so an instance met twice is not met with the
            same noise (LUCA: the measurements after the baseline).
        for_session(params), encode(obs), decode(index, obs): a learned agent
            playing a host session (:class:`luca_gym.agents.FlatPolicy`): the
            codec for that session's settings, its observation as (vector,
            mask), a flat index as the session's action.
    """

    world: str
    headline: str

    @property
    def num_actions(self) -> int: ...

    @property
    def observation_size(self) -> int: ...

    def settings(self) -> dict:
        """The world's settings this codec was made for, as a dict (stored with a run)."""

    def describe(self) -> str:
        """The settings in a few words, for progress lines and figures."""

    def instances(self, seeds):
        """The instances of ``seeds``, a leading batch axis (host side)."""

    def open(self, instance):
        """Open a session on one instance: (state, vector float32 (D,), mask bool (K,)); pure."""

    def step(self, state, action):
        """One flat action: (state, vector, mask, reward, terminated, truncated, error); pure."""

    def score(self, state):
        """The headline score of the session so far, float32 (); pure."""


@runtime_checkable
class Core(Protocol):
    """A world's pure core (``World.core``): the one place its rules and
    scorer live; every front end (the Gymnasium env, the tool session, the
    harness) is an adapter over it. Settings come as the world's config (a
    :class:`luca_gym.config.ConfigBase`): those that fix shapes are static,
    the rest traced, so one compiled ``step`` serves every instance and
    every value of a traced setting (gymnax's environment parameters).

    Attributes:
        ERRORS: error code -> message (code 0: "", no error).
        Action: the typed action pytree (a registered frozen dataclass).

    Functions (``reset``, ``step``, ``public_view`` pure: jit and vmap apply):
        instance(seed, config, seal=None) -> pytree: the instance of ``seed``
            (sealed, :mod:`luca_gym.seal`: of its sealed seed).
        reset(instance, config) -> state: a fresh session.
        step(state, action, config) -> (state, reward float32 (), error
            int32 ()): a refused action (error != 0) costs nothing and
            changes nothing; a session's return equals its headline score.
        scores(state, config) -> dict: the scores as JSON-ready Python values.
        public_view(state, config) -> array or dict of arrays: what an agent may see.
        ended(state) -> bool (): whether the session has ended.
        action_space(config), observation_space(config): Gymnasium spaces.
        to_action(sample, config) -> Action: an element of the action space
            as the core's action (ValueError for one outside it).
        render(state, config) -> str (optional): a text picture (ansi).
        truncated(state, config) -> bool () (optional): the session ended at
            a limit (LUCA's call limit), not by the agent's own ending.
        make_config(**settings) (optional): the config a session runs under,
            where a session takes options beyond the world's config (LUCA's
            call limit and reward shaping); otherwise ``World.make_config``.

    Optional entries that fit the generic env (:class:`luca_gym.envs.core.CoreEnv`)
    to a world's own conventions (LUCA declares them all):
        RENDER_MODES: the render modes offered; a core that declares them
            renders with ``render(state, config, mode, instance)`` (the
            instance: what a picture may need beyond the state, such as
            LUCA's gene names), one without them with ``render(state, config)``
            in "ansi" alone.
        SEED_OPTION: the reset option that pins an instance and the reset
            info's key for its seed (default "instance_seed").
        DRAWN_SEEDS: (low, high), the seeds a seeded reset draws from
            (default the training seeds, ``TRAINING_SEED_START`` up).
        reset_info(instance, config) -> dict: what a reset reports beside the seed.
        TO_ACTION_CHECKS: True where ``to_action`` checks every action itself
            (ValueError naming what is wrong) and takes more than the space's
            elements (LUCA: a dict may leave out the fields its kind does not
            use); the env then leaves the check to it.
    """

    ERRORS: tuple

    def instance(self, seed, config, seal=None):
        """The instance of ``seed`` (host side)."""

    def reset(self, instance, config):
        """A fresh session on ``instance``; pure."""

    def step(self, state, action, config):
        """One typed action: (state, reward, error); pure."""

    def scores(self, state, config) -> dict:
        """The session's scores, JSON-ready."""

    def public_view(self, state, config):
        """What an agent may see of ``state``; pure."""

    def ended(self, state):
        """Whether the session has ended, bool ()."""

    def action_space(self, config):
        """The Gymnasium action space."""

    def observation_space(self, config):
        """The Gymnasium observation space (of ``public_view``)."""

    def to_action(self, sample, config):
        """An element of the action space as the typed action."""


@runtime_checkable
class Policy(Protocol):
    """A policy (a baseline, a learned agent): it plays a world's tool
    session through the world's ``play`` (:class:`luca_gym.tools.play.PolicyLoop`),
    one ``act`` a call, and its record is written as a tool agent's is."""

    def reset(self, params, seed: int) -> None:
        """Start a session: ``params`` the world's (its config, LUCA's ``EnvParams``), ``seed`` the instance's."""

    def act(self, observation):
        """The next action for ``observation`` (``{"tool", "arguments"}``, or the world's own action)."""


@runtime_checkable
class ToolAgent(Protocol):
    """A tool agent (a language model, a scripted tool-calling baseline, a
    user's ``module:attribute`` agent): called with the conversation's
    messages and the tool specs, it returns its turn
    (:class:`luca_gym.llm.loop.AgentTurn`); it plays the world's tool session
    (:func:`luca_gym.llm.loop.run_agent`)."""

    def __call__(self, messages: list, tools: list):
        """The agent's next turn."""


POLICY, TOOL_AGENT = "policy", "tool_agent"


def runner_kind(runner) -> str:
    """What plays a session: :data:`POLICY` for a :class:`Policy` (``reset``
    and ``act``; one that is also callable is still a policy),
    :data:`TOOL_AGENT` for a :class:`ToolAgent` (callable). A class is asked
    what its instances are (a world's ``baselines`` hold classes). TypeError
    names a runner that is neither."""
    if isinstance(runner, type):
        is_policy, is_agent = issubclass(runner, Policy), issubclass(runner, ToolAgent)
    else:
        is_policy, is_agent = isinstance(runner, Policy), isinstance(runner, ToolAgent)
    if is_policy:
        return POLICY
    if is_agent:
        return TOOL_AGENT
    raise TypeError(f"runner: {short_repr(runner)} is neither a policy (reset(params, seed) and act(observation)) "
                    "nor a tool agent (called with the messages and the tool specs)")


@dataclass(frozen=True)
class Contrast:
    """An ablation: two arms of one key setting, everything else fixed, paired
    by seed (``luca-gym eval --ablation NAME`` runs both arms; ``luca-gym
    report`` adds the paired tests, :mod:`luca_gym.results.paired`).

    Attributes:
        name: how ``--ablation`` names it.
        field: the key setting (one of the world's ``session_keys``).
        arms: (default arm, manipulated arm), in table order.
        labels: the arms' names in tables.
        minuend: the arm Δ is taken from: Δ = minuend - the other arm.
        title: a heading for the report (default: the name).
    """

    name: str
    field: str
    arms: tuple
    labels: tuple
    minuend: Any
    title: str = ""

    def __post_init__(self):
        if len(self.arms) != 2 or self.arms[0] == self.arms[1]:
            raise ValueError(f"Contrast.arms: {short_repr(self.arms)} not allowed; two different values")
        if len(self.labels) != 2:
            raise ValueError(f"Contrast.labels: {short_repr(self.labels)} not allowed; one name per arm")
        if self.minuend not in self.arms:
            raise ValueError(f"Contrast.minuend: {short_repr(self.minuend)} is not one of the arms {short_repr(self.arms)}")

    @property
    def default(self):
        return self.arms[0]

    @property
    def subtrahend(self):
        return self.arms[1] if self.minuend == self.arms[0] else self.arms[0]

    def label(self, value) -> str:
        """The label shown for the arm whose setting is ``value``."""
        return self.labels[self.arms.index(value)]

    @property
    def delta_text(self) -> str:
        return f"{self.label(self.minuend)} - {self.label(self.subtrahend)}"


@dataclass(frozen=True)
class World:
    """A world as the registry holds it.

    Attributes:
        name: the registry key and ``--world`` value, lower case
            (``"luca"``); results lines carry it as ``world``.
        version: the world's rules version, carried by results lines as
            ``world_version``; a change that moves instances or scores bumps it.
        gym_stem: the Gymnasium id stem (``"Luca"``): the registry registers
            ``luca_gym/<Stem>-v0`` and, where the world has them,
            ``<Stem>Flat-v0`` (its flat env for learners: ``flat_env``) and
            ``<Stem>Tools-v0`` (its tools as a text env).
        summary: one line for ``luca-gym worlds`` and the docs.
        config: entry point of the world's config class: a frozen value object
            whose fields are the world's settings, checked on construction.
        headline: the name of the headline score in a session's scores: the
            undiscounted return of every front end equals it.
        tools: entry point of the world's tool session factory,
            ``(seed, *, sealed=None, **settings) -> ToolSessionBase``
            (:mod:`luca_gym.tools.session`), or None: the text env
            (``<Stem>Tools-v0``), the MCP server and the harness's tool agents
            drive it.
        env: entry point of the ``gymnasium.Env`` (keyword arguments: the
            config's fields and the env's own options), or None.
        vector_env: entry point of the world's own vector env (``make_vec``
            of ``luca_gym/<Stem>-v0``), or None: a world that declares a
            ``core`` then gets the generic
            :class:`luca_gym.envs.core_vector.CoreVectorEnv` over it, and
            one without a core Gymnasium's own vector env of its single env.
        flat_env: entry point of the flat Gymnasium env, or None where the
            world has none. A world may have one without a ``flat`` codec
            (the biobank's step runs on the host): ``make_vec`` of its id is
            then Gymnasium's own vector env, and the JAX front ends (the
            functional env, the PPO, ``luca-gym train``) do not apply.
        flat: entry point of the world's flat codec factory,
            ``(*args, **settings) -> FlatCodec`` (:class:`FlatCodec`), or
            None: the functional env and the PPO run on any world that has one.
        tools_env: entry point of a text env of the world's own; by default
            the generic :class:`luca_gym.envs.tools.ToolsEnv` over ``tools``.
        baselines: entry point of ``{name: policy class}``, or None: a
            :class:`Policy` (``reset(params, seed)``, ``act(observation)``)
            plays through ``play``; a :class:`ToolAgent` (called with the
            messages and tools) plays the tool session through the agent
            loop; :func:`runner_kind` tells them apart.
        play: entry point of the harness's policy runner,
            ``(policy, seed, *, env=None, max_calls=None, sealed=None,
            **settings) -> {"fields", "calls", "scores", "return",
            "truncated", "end_reason"}`` (one session of a policy through the
            world's tool session, the record's calls its transcript, as a
            tool agent's: :class:`luca_gym.tools.play.PolicyLoop`, with
            ``table_play(session_class)`` where the policies act in tool
            calls; ``fields`` are the world's own record fields), or None
            where the world's agents are tool agents only.
        flat_baselines: entry point of ``{name: make(codec) -> policy}``, or
            None: scripted policies on the world's flat space, each made for
            one codec as a :func:`luca_gym.functional.flat_rollout` policy
            ``(params, key, obs (B, D), mask (B, K)) -> int32 (B,)`` that
            reads only the observation and the mask (called with params
            None): the teachers of ``luca-gym train --algo bc``
            (:func:`luca_gym.agents.bc.clone`).
        expected_fields: entry point of ``(**settings) -> dict``: what a
            session of these settings records beside its key (LUCA: budget
            and call limit), that a results folder must agree on; or None.
        check_settings: entry point of ``(**settings) -> None`` raising
            ValueError for a bad combination of key settings the config does
            not hold (LUCA's prompt stance); or None.
        report: entry point of the world's ``luca-gym report`` sections,
            ``(records, out_dir, *, source, notes) -> [markdown part]`` (it
            may write figures into ``out_dir``), or None: a table of the
            headline score by agent and settings.
        process: entry point of the world's own process analyses,
            ``(records) -> [markdown part]`` over its sessions that keep a
            transcript (a model's), after the generic ones (reasoning
            keywords, tokens per round: :mod:`luca_gym.results.process`); worlds
            naming the same entry get one call with all their sessions (the
            graph worlds' proposal accuracy by cycle); or None.
        viewer: entry point of an object with ``draw_session(record,
            path)``, ``session_file_name(record)`` and
            ``describe_session(record)`` (``luca-gym show``), or None.
        cli: entry point of the world's part of the ``luca-gym`` command (an
            object with any of ``default_agents``, ``add_eval_arguments(p)``
            / ``eval_settings(args)`` / ``eval_summary(records, specs)``,
            ``add_train_arguments`` / ``train_settings``,
            ``add_session_arguments`` / ``session_settings`` /
            ``instructions(settings)`` (mcp), ``add_show_arguments`` /
            ``show_filters`` and ``add_commands(subparsers)``), or None: the
            world's settings are then given as ``--set KEY=VALUE``.
        host_side: the parts of the world that run on the host, outside any
            jit (a released data set, a code sandbox): ``"tools"`` (its tool
            session) and/or ``"flat"`` (its flat codec's ``step``).
            :func:`luca_gym.testing.check_world` applies its jit checks
            (no retrace across instances) to the pure parts only.
        sweep_order: the key settings from the outermost loop of a sweep
            inwards (default: :attr:`session_keys` order).
        reference: the paper or document the world follows.
        session_keys: the fields of a results line that, with ``world`` and
            ``agent``, name a session (``seed`` among them, in key order).
        key_defaults: the value a key field takes on a line written before
            the field existed.
        required_scores: the score fields every results line must hold
            (default: the headline).
        contrasts: the world's ablations (:class:`Contrast`), each over a key
            setting other than the seed.
        core: entry point of the world's pure core (:class:`Core`: a module
            (``"package.module"``) or namespace with ``instance``, ``reset``, ``step``, ``scores``,
            ``public_view``, the spaces and ``ERRORS``), or None: a world
            that declares one and no ``env`` of its own gets
            ``luca_gym/<Stem>-v0`` from the generic
            :class:`luca_gym.envs.core.CoreEnv`.
        audit: the world's evidence audit module, ``"package.module"`` (its
            ``audit(record)`` and ``NOTES``, :mod:`luca_gym.results.audit`),
            or None where the world has none.
    """

    name: str
    version: str
    gym_stem: str
    summary: str
    config: str
    headline: str = "score"
    tools: str | None = None
    env: str | None = None
    vector_env: str | None = None
    flat_env: str | None = None
    flat: str | None = None
    tools_env: str | None = None
    baselines: str | None = None
    play: str | None = None
    flat_baselines: str | None = None
    expected_fields: str | None = None
    check_settings: str | None = None
    report: str | None = None
    process: str | None = None
    viewer: str | None = None
    cli: str | None = None
    host_side: tuple[str, ...] = ()
    sweep_order: tuple[str, ...] = ()
    reference: str = ""
    session_keys: tuple[str, ...] = ("seed",)
    key_defaults: tuple[tuple[str, object], ...] = ()
    required_scores: tuple[str, ...] = ()
    contrasts: tuple[Contrast, ...] = ()
    core: str | None = None
    audit: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"World.name: {short_repr(self.name)} not allowed; lower-case letters, digits and _, "
                             "starting with a letter, at most 32 characters")
        if not isinstance(self.version, str) or not self.version:
            raise ValueError(f"World.version: {short_repr(self.version)} not allowed; a non-empty string")
        if not isinstance(self.gym_stem, str) or not _STEM.fullmatch(self.gym_stem):
            raise ValueError(f"World.gym_stem: {short_repr(self.gym_stem)} not allowed; letters and digits, "
                             "starting with a capital, at most 32 characters")
        if "seed" not in self.session_keys:
            raise ValueError(f"World.session_keys: {self.session_keys!r} must name 'seed'")
        if not set(self.host_side) <= set(HOST_SIDE_PARTS):
            raise ValueError(f"World.host_side: {self.host_side!r} not allowed; a tuple of {', '.join(HOST_SIDE_PARTS)}")
        if not set(self.sweep_order) <= set(self.session_keys) - {"seed"}:
            raise ValueError(f"World.sweep_order: {self.sweep_order!r} must name key settings only "
                             f"({', '.join(k for k in self.session_keys if k != 'seed')})")
        for c in self.contrasts:
            if not isinstance(c, Contrast) or c.field not in set(self.session_keys) - {"seed"}:
                raise ValueError(f"World.contrasts: {short_repr(c)} not allowed; a Contrast over a key setting "
                                 f"({', '.join(k for k in self.session_keys if k != 'seed')})")
        if len({c.name for c in self.contrasts}) != len(self.contrasts):
            raise ValueError("World.contrasts: two contrasts share a name")
        for f in fields(self):
            if f.name in ("config", "tools", "env", "vector_env", "flat_env", "flat", "tools_env", "baselines", "play",
                           "flat_baselines", "expected_fields", "check_settings", "report", "process", "viewer", "cli", "core", "audit"):
                value = getattr(self, f.name)
                if value is None and f.name != "config":
                    continue
                pattern = _MODULE_ENTRY if f.name in ("core", "audit") else _ENTRY
                if not isinstance(value, str) or not pattern.fullmatch(value):
                    raise ValueError(f"World.{f.name}: {short_repr(value)} not allowed; an entry point "
                                     "'package.module:attribute'")

    def contrast(self, name: str) -> Contrast:
        """The contrast called ``name`` (ValueError naming the world's)."""
        for c in self.contrasts:
            if c.name == name:
                return c
        allowed = ", ".join(c.name for c in self.contrasts) or "none"
        raise ValueError(f"ablation: {name!r} unknown for world {self.name!r}; allowed {allowed}")

    def key_fields(self) -> tuple[str, ...]:
        """The fields of a results line that name a session: world, agent, then :attr:`session_keys`."""
        return ("world", "agent", *self.session_keys)

    def gym_ids(self) -> dict[str, tuple[str, dict]]:
        """Gymnasium id -> (entry point, keyword arguments), for every front end the world has."""
        ids = {}
        if self.env is not None:
            ids[f"luca_gym/{self.gym_stem}-v0"] = (self.env, {})
        elif self.core is not None:
            ids[f"luca_gym/{self.gym_stem}-v0"] = ("luca_gym.envs.core:CoreEnv", {"world": self.name})
        if self.flat_env is not None:
            ids[f"luca_gym/{self.gym_stem}Flat-v0"] = (self.flat_env, {})
        if self.tools_env is not None:
            ids[f"luca_gym/{self.gym_stem}Tools-v0"] = (self.tools_env, {})
        elif self.tools is not None:
            ids[f"luca_gym/{self.gym_stem}Tools-v0"] = ("luca_gym.envs.tools:ToolsEnv", {"world": self.name})
        return ids

    def make_config(self, **settings):
        """The world's config from keyword settings (checked by the config itself)."""
        return load(self.config)(**settings)

    def config_fields(self) -> tuple[str, ...]:
        """The names of the world's settings (its config's fields)."""
        return tuple(f.name for f in fields(load(self.config)))

    def make_flat(self, *args, **settings) -> FlatCodec:
        """The world's flat codec for ``settings`` (ValueError where the world has none)."""
        if self.flat is None:
            raise ValueError(f"world {self.name!r} has no flat codec (World.flat); the functional env and the PPO need one")
        return load(self.flat)(*args, **settings)

    def baseline_policies(self) -> dict:
        """``{name: policy class}`` (empty where the world ships none)."""
        return {} if self.baselines is None else dict(load(self.baselines))

    def flat_baseline_policies(self) -> dict:
        """``{name: make(codec) -> flat_rollout policy}`` (empty where the world ships none)."""
        return {} if self.flat_baselines is None else dict(load(self.flat_baselines))
