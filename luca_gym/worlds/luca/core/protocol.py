"""LUCA's pure core in the shape every world's core has
(:class:`luca_gym.protocol.Core`): ``World.core`` of LUCA.

The rules stay where they are (:func:`~luca_gym.worlds.luca.core.reset`,
:func:`~luca_gym.worlds.luca.core.step`, the observation and the scorer);
this module gives them the protocol's names and arguments, so the generic
Gymnasium env (:class:`luca_gym.envs.core.CoreEnv`), the generic tool session
(:class:`luca_gym.tools.table.TableToolSession`) and the policy loop serve
LUCA as they serve every other world:

* the config is a :class:`SessionConfig`: the organism's settings
  (:class:`~luca_gym.worlds.luca.config.LucaConfig`, with the budget) and
  the core's static :class:`~luca_gym.worlds.luca.core.EnvParams` (the
  call limit and the reward shaping besides). :func:`make_config` builds
  one from keyword settings; every LUCA setting fixes a shape or a branch,
  so all are static (one compiled step per config, as the core always was);
* an instance is :class:`Instance`: organism ``seed`` (memoised: an
  organism is a pure function of its seed and settings) and its session's
  noise key;
* :func:`step` steps a typed :class:`~luca_gym.worlds.luca.core.Action`
  and returns ``(state, reward, error)``; a session that reached its call
  limit has ended and is :func:`truncated`;
* what LUCA's env has always offered, declared for the generic env:
  :data:`SEED_OPTION` (``reset(options={"organism_seed": k})``),
  :data:`DRAWN_SEEDS` (a seeded reset draws from 0 up),
  :func:`reset_info` (the budget), :data:`RENDER_MODES` with :func:`render`
  (the text needs the organism's names, so render takes the instance) and
  :data:`TO_ACTION_CHECKS` (:func:`to_action` checks a dict action field by
  field, and takes one that leaves out the fields its kind does not use).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax

from luca_gym import seal as seal_mod
from luca_gym.boundary import to_python
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.core import observation, session, types
from luca_gym.worlds.luca.core.keys import noise_key
from luca_gym.validate import DRAWN_SEED_LIMIT
from luca_gym.worlds.luca.types import Organism

ERRORS = types.ERROR_MESSAGES  # by error code; 0: no error
Action = types.Action
SEED_OPTION = "organism_seed"  # reset(options={"organism_seed": k}) pins organism k; the reset info's key for it
DRAWN_SEEDS = (0, DRAWN_SEED_LIMIT)  # a seeded reset draws organism seeds from 0 up, as LUCA's env always has
RENDER_MODES = ("ansi", "rgb_array")  # render(state, config, mode, instance)
TO_ACTION_CHECKS = True  # to_action checks any action itself: a dict may leave out the fields its kind does not use
_observe = jax.jit(observation.observe, static_argnums=1)  # eager, observe runs op by op (16 ms); jitted 1 ms


@dataclass(frozen=True)
class SessionConfig:
    """A LUCA session's settings: ``organism`` (a :class:`LucaConfig`:
    what, with a seed, names an organism, and the budget) and ``params``
    (the core's static :class:`~luca_gym.worlds.luca.core.EnvParams`)."""

    organism: LucaConfig
    params: types.EnvParams

    def settings(self) -> dict:
        """The organism's settings and the budget, as keyword settings (:meth:`LucaConfig.settings`)."""
        return self.organism.settings()


def make_config(*, max_steps: int | None = None, dense_shaping: bool = False, shaping_scale: float = 0.1,
                shaping_gamma: float = 1.0, **settings) -> SessionConfig:
    """A :class:`SessionConfig` from keyword settings: the
    :class:`LucaConfig` fields (tier, mode, n_genes, backwards, vocabulary,
    budget) and the session's options (``max_steps``: accepted calls
    before the session ends itself, default 4 x budget + 64; the
    potential-based reward shaping, :func:`~luca_gym.worlds.luca.core.make_params`).
    ValueError names a bad one (an unknown name too)."""
    organism = LucaConfig(**settings)
    return SessionConfig(organism, organism.params(max_steps=max_steps, dense_shaping=dense_shaping,
                                                   shaping_scale=shaping_scale, shaping_gamma=shaping_gamma))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Instance:
    """Instance ``seed``: its :class:`~luca_gym.worlds.luca.types.Organism`
    (arrays and the static, public names) and its session's noise key."""

    organism: Organism
    key: jax.Array
    seed: int = field(metadata=dict(static=True))


def instance(seed: int, config: SessionConfig, seal=None) -> Instance:
    """Organism ``seed`` of ``config`` (sealed: of its sealed seed; the seed is checked first)."""
    from luca_gym.worlds.luca.session import config_organism  # the organism memo

    seal = seal_mod.make_seal(seal)
    organism = config_organism(seed, config.organism, sealed=seal)
    return Instance(organism, noise_key(int(seed), config.organism.tier, config.organism.n_genes, seal), int(seed))


def reset(instance: Instance, config: SessionConfig) -> types.EnvState:
    """A fresh session on ``instance`` (its baseline measured)."""
    return session.reset(instance.key, instance.organism.arrays, config.params)[1]


def step(state: types.EnvState, action: types.Action, config: SessionConfig):
    """One action: ``(state, reward float32 (), error int32 ())``; a refused one changes nothing but the error code."""
    _, new, reward, _, _, info = session.step(state, action, config.params)
    return new, reward, info["error"]


def ended(state: types.EnvState):
    """Whether the session has ended (by ``end`` or at its call limit), bool ()."""
    return state.ended


def truncated(state: types.EnvState, config: SessionConfig):
    """Whether the session ended at its call limit (not by ``end``), bool ()."""
    return state.truncated


def scores(state: types.EnvState, config: SessionConfig) -> dict:
    """The score breakdown (:func:`~luca_gym.worlds.luca.core.session_scores`) as Python values; refuses while open."""
    if not bool(state.ended):
        raise RuntimeError("scores are revealed only once the session has ended")
    return to_python(observation.session_scores(state, config.params))


def reset_info(instance: Instance, config: SessionConfig) -> dict:
    """What a reset reports beside the organism seed: ``{"budget"}`` (experiment and rescue units)."""
    return {"budget": config.params.budget}


def public_view(state: types.EnvState, config: SessionConfig) -> dict:
    """The observation (:func:`~luca_gym.worlds.luca.core.observe`, jitted): public information only."""
    return _observe(state, config.params)


def render(state: types.EnvState, config: SessionConfig, mode: str, instance: Instance):
    """``mode`` "ansi": the session as text (:func:`~luca_gym.worlds.luca.render.render_text`,
    in the organism's names); "rgb_array": as a picture, uint8 (112, 160, 3)
    (:func:`~luca_gym.worlds.luca.render.render_rgb`). Public information only."""
    from luca_gym.worlds.luca.render import render_rgb, render_text

    if mode == "rgb_array":
        return render_rgb(state, config.params)
    return render_text(state, config.params, instance.organism)


def observation_space(config: SessionConfig):
    """The Gymnasium observation space (:func:`~luca_gym.worlds.luca.envs.spaces.observation_space`: a Dict of Boxes)."""
    from luca_gym.worlds.luca.envs import spaces

    return spaces.observation_space(config.params)


def action_space(config: SessionConfig):
    """The Gymnasium action space (:func:`~luca_gym.worlds.luca.envs.spaces.action_space`: the dict action's every field)."""
    from luca_gym.worlds.luca.envs import spaces

    return spaces.action_space(config.params)


def to_action(sample, config: SessionConfig) -> types.Action:
    """A dict action (:func:`~luca_gym.worlds.luca.core.parse_action`: ValueError naming a malformed field)."""
    return types.parse_action(sample, config.params)


__all__ = ["DRAWN_SEEDS", "ERRORS", "RENDER_MODES", "SEED_OPTION", "TO_ACTION_CHECKS", "Action", "Instance",
           "SessionConfig", "action_space", "ended", "instance", "make_config", "observation_space", "public_view",
           "render", "reset", "reset_info", "scores", "step", "to_action", "truncated"]
