"""Curricula: a schedule over a world's settings, in the manner of
reasoning-gym's curricula (each attribute a list of values from easiest to
hardest, a level per attribute, the caller or a rule moving them).

    from luca_gym.curriculum import Curriculum, CurriculumWrapper, CurriculumVectorWrapper

    c = Curriculum({"tier": ["easy", "medium", "hard"], "budget": [None, 16, 8]}, world="luca",
                   defaults={"mode": "disease", "n_genes": 20}, advance_at=0.8, success_score=0.7)
    c.settings()          # {'mode': 'disease', 'n_genes': 20, 'tier': 'easy', 'budget': None}
    c.increment("budget") # one attribute up a level; c.increment(): every attribute (the global level)
    c.record(scores)      # ended episodes' headline scores: the rule may advance the global level

* The functional env (:mod:`luca_gym.functional`): a level is a codec, the
  static settings of the compiled program. :meth:`Curriculum.make_env` gives
  the current level's; build the pool and step with it, feed the ended
  episodes' scores (``info["score"]`` where ``info["done"]``) to
  :meth:`Curriculum.record`, and build again when :attr:`Curriculum.level`
  changed. Each level compiles once (a new N or budget is a new program).
* A Gymnasium env: :class:`CurriculumWrapper` records each ended episode and,
  at the next ``reset``, rebuilds the inner env when the level has changed.
  Its spaces are the inner env's, so a level that changes N changes them
  (a flat policy sized for one N cannot follow; the entity network can).
* A Gymnasium vector env: :class:`CurriculumVectorWrapper` records the
  episodes that end in each step and rebuilds the whole batch (one compiled
  program per level) at the next ``reset`` once the level has changed
  (``level_changed`` says when), e.g. over ``gym.make_vec("luca_gym/LucaFlat-v0", ...)``.

The rule (``advance_at``): once ``window`` episodes have ended at the current
level, the level goes up when at least ``advance_at`` of the last ``window``
scored ``success_score`` or more; the window then starts afresh. Without a
rule, only the caller moves levels. A level's settings are checked by the
world's config (ValueError naming the field) when the curriculum is made, so
a schedule that cannot be played fails before training starts.
"""

from __future__ import annotations

import math
from typing import Callable

import gymnasium as gym
import numpy as np

from luca_gym import worlds
from luca_gym.validate import check_positive_int, short_repr


class Curriculum:
    """A schedule over ``world``'s settings.

    Args:
        attributes: ``{setting: [value at level 0, level 1, ...]}``, easiest
            first (e.g. ``tier``, ``budget``, ``n_genes``); each at least one value.
        world: a registered world's name (keyword-only, required).
        defaults: the settings no attribute moves (e.g. ``mode``, ``analyst``).
        advance_at: the success rate in (0, 1] that moves every attribute up
            a level (:meth:`record`); None: the caller alone moves levels.
        success_score: the headline score at or above which an episode succeeds.
        window: the ended episodes the rate is measured over.

    Settings that are the world's config fields are checked by its config for
    every global level (each attribute at ``min(level, its last)``); the others
    (a flat codec's ``analyst``, an env's options) by whatever is built from them.
    """

    def __init__(self, attributes: dict, *, world: str, defaults: dict | None = None,
                 advance_at: float | None = None, success_score: float = 0.8, window: int = 64):
        self.world = worlds.get(world).name
        if not isinstance(attributes, dict) or not attributes:
            raise ValueError(f"attributes: {short_repr(attributes)} not allowed; a non-empty dict {{setting: [values]}}")
        defaults = {} if defaults is None else defaults
        if not isinstance(defaults, dict):
            raise ValueError(f"defaults: {short_repr(defaults)} not allowed; a dict {{setting: value}}")
        self.attributes = {}
        for name, values in attributes.items():
            if not isinstance(name, str) or not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"attributes: {short_repr(name)}: {short_repr(values)} not allowed; a setting's name "
                                 f"and a non-empty list of its values, easiest first")
            if name in defaults:
                raise ValueError(f"defaults: {name!r} is also an attribute; give it in one place")
            self.attributes[name] = tuple(values)
        self.defaults = dict(defaults)
        if advance_at is not None and (not _is_number(advance_at) or not 0 < advance_at <= 1):
            raise ValueError(f"advance_at: {short_repr(advance_at)} not allowed; a success rate in (0, 1], or None")
        if not _is_number(success_score):
            raise ValueError(f"success_score: {short_repr(success_score)} not allowed; a finite number")
        self.advance_at, self.success_score = advance_at, float(success_score)
        self.window = check_positive_int(window, "window")
        self.levels = {name: 0 for name in self.attributes}
        for level in range(self.num_levels):
            self._check({name: min(level, len(values) - 1) for name, values in self.attributes.items()})
        self._scores: list[float] = []

    @property
    def num_levels(self) -> int:
        """The global levels: the longest attribute's count of values."""
        return max(len(v) for v in self.attributes.values())

    @property
    def level(self) -> int:
        """The global level: the lowest attribute level (every attribute is at least this far)."""
        return min(self.levels.values())

    def settings(self) -> dict:
        """The current level's settings: the defaults, then each attribute's value."""
        return {**self.defaults, **{name: values[self.levels[name]] for name, values in self.attributes.items()}}

    def _check(self, levels: dict) -> None:
        settings = {**self.defaults, **{name: self.attributes[name][i] for name, i in levels.items()}}
        world = worlds.get(self.world)
        fields = world.config_fields()
        world.make_config(**{k: v for k, v in settings.items() if k in fields})

    def _move(self, name: str | None, step: int) -> bool:
        names = list(self.attributes) if name is None else [self._name(name)]
        levels = {**self.levels, **{n: min(max(self.levels[n] + step, 0), len(self.attributes[n]) - 1) for n in names}}
        if levels == self.levels:
            return False
        self._check(levels)
        self.levels, self._scores = levels, []
        return True

    def _name(self, name) -> str:
        if name not in self.attributes:
            raise ValueError(f"attribute: {short_repr(name)} unknown; allowed {', '.join(self.attributes)}")
        return name

    def increment(self, name: str | None = None) -> bool:
        """Move attribute ``name`` (None: every attribute) up one level where
        it has one; True if anything moved. The rule's window starts afresh."""
        return self._move(name, 1)

    def decrement(self, name: str | None = None) -> bool:
        """Move attribute ``name`` (None: every attribute) down one level; True if anything moved."""
        return self._move(name, -1)

    def set_level(self, level: int, name: str | None = None) -> None:
        """Put attribute ``name`` (None: every attribute, each at most its last) at ``level``."""
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level < self.num_levels:
            raise ValueError(f"level: {short_repr(level)} not allowed; an integer in 0..{self.num_levels - 1}")
        names = list(self.attributes) if name is None else [self._name(name)]
        levels = {**self.levels, **{n: min(int(level), len(self.attributes[n]) - 1) for n in names}}
        self._check(levels)
        if levels != self.levels:
            self.levels, self._scores = levels, []

    def record(self, scores, done=None) -> bool:
        """Count ended episodes' headline ``scores`` (a number or an array;
        with ``done``, a bool array of the same shape, only where it is True)
        at the current level; with a rule, advance every attribute a level
        when the rule is met. Returns True if the level changed."""
        try:
            scores = np.asarray(scores, np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"scores: {short_repr(scores)} not allowed; finite numbers") from None
        if done is not None:
            done = np.asarray(done).reshape(-1)
            if done.dtype != bool or done.shape != scores.shape:
                raise ValueError(f"done: {short_repr(done)} not allowed; a bool array shaped like scores {scores.shape}")
            scores = scores[done]
        if not np.isfinite(scores).all():
            raise ValueError(f"scores: {short_repr(scores.tolist())} not allowed; finite numbers")
        self._scores = (self._scores + scores.tolist())[-self.window:]
        if self.advance_at is None or len(self._scores) < self.window:
            return False
        rate = float(np.mean(np.asarray(self._scores) >= self.success_score))
        return rate >= self.advance_at and self.increment()

    def success_rate(self) -> float | None:
        """The success rate over the episodes counted at this level (None before any)."""
        return float(np.mean(np.asarray(self._scores) >= self.success_score)) if self._scores else None

    def make_env(self, **settings):
        """The world's flat codec (:func:`luca_gym.functional.make_env`) for
        the current level, ``settings`` added: the functional env's static
        settings for the next pool and compile."""
        from luca_gym import functional

        return functional.make_env(world=self.world, **{**self.settings(), **settings})


def _is_number(value) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


class CurriculumWrapper(gym.Wrapper):
    """A Gymnasium env that follows a :class:`Curriculum`: each ended
    episode's score goes to :meth:`Curriculum.record`, and ``reset`` rebuilds
    the inner env when the curriculum's settings changed (by the rule or by
    the caller). ``info["curriculum_level"]`` at reset is the global level.

    Args:
        curriculum: the schedule.
        make: a Gymnasium id (built as ``gymnasium.make(id, **settings)``) or
            a callable ``settings -> env``.
        score_of: ``(final step's info, episode return) -> score``; default the
            episode return (every front end's undiscounted return is the
            world's headline score; pass one that reads ``info`` when the
            reward is shaped).
    """

    def __init__(self, curriculum: Curriculum, make: str | Callable[..., gym.Env],
                 score_of: Callable[[dict, float], float] | None = None):
        if not isinstance(curriculum, Curriculum):
            raise ValueError(f"curriculum: {short_repr(curriculum)} is not a Curriculum")
        if not (isinstance(make, str) or callable(make)):
            raise ValueError(f"make: {short_repr(make)} not allowed; a Gymnasium id or a callable settings -> env")
        self.curriculum, self._make = curriculum, make
        self._score_of = score_of or (lambda info, episode_return: episode_return)
        self._built = curriculum.settings()
        super().__init__(self._build(self._built))
        self._return = 0.0

    def _build(self, settings: dict) -> gym.Env:
        return gym.make(self._make, **settings) if isinstance(self._make, str) else self._make(**settings)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        settings = self.curriculum.settings()
        if settings != self._built:
            self.env.close()
            self.env, self._built = self._build(settings), settings
        self._return = 0.0
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "curriculum_level": self.curriculum.level}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        if terminated or truncated:
            self.curriculum.record(float(self._score_of(info, self._return)))
        return obs, reward, terminated, truncated, info


class CurriculumVectorWrapper(gym.vector.VectorWrapper):
    """A Gymnasium vector env that follows a :class:`Curriculum`: the scores
    of the episodes that end in each step go to :meth:`Curriculum.record`,
    and ``reset`` rebuilds the whole batch when the curriculum's settings
    changed (every env of one batch shares one compiled program, so a level
    is a batch, not an env). A level change during training takes effect at
    the next ``reset``: :attr:`level_changed` says when one is due, and
    ``info["curriculum_level"]`` at reset is the global level.

    Args:
        curriculum: the schedule.
        make: a Gymnasium id (built as ``gymnasium.make_vec(id, num_envs=num_envs,
            **settings)``: for LUCA the JAX batch, :class:`LucaVectorEnv`)
            or a callable ``(num_envs, **settings) -> vector env``.
        num_envs: the batch size, the same at every level.
        score_of: ``(step's info, episode returns (num_envs,), done (num_envs,)) ->
            scores (num_envs,)``, read where ``done``; default the episode
            returns (the world's headline score while the reward is unshaped).
    """

    def __init__(self, curriculum: Curriculum, make: str | Callable[..., gym.vector.VectorEnv], num_envs: int,
                 score_of: Callable | None = None):
        if not isinstance(curriculum, Curriculum):
            raise ValueError(f"curriculum: {short_repr(curriculum)} is not a Curriculum")
        if not (isinstance(make, str) or callable(make)):
            raise ValueError(f"make: {short_repr(make)} not allowed; a Gymnasium id or a callable (num_envs, **settings) -> vector env")
        self.curriculum, self._make = curriculum, make
        self._num_envs = check_positive_int(num_envs, "num_envs")
        self._score_of = score_of or (lambda info, returns, done: returns)
        self._built = curriculum.settings()
        super().__init__(self._build(self._built))
        self._returns = np.zeros(self._num_envs)

    def _build(self, settings: dict) -> gym.vector.VectorEnv:
        if isinstance(self._make, str):
            env = gym.make_vec(self._make, num_envs=self._num_envs, **settings)
        else:
            env = self._make(self._num_envs, **settings)
        if env.num_envs != self._num_envs:
            raise ValueError(f"make: built {env.num_envs} envs for num_envs={self._num_envs}")
        return env

    @property
    def level_changed(self) -> bool:
        """True when the curriculum's settings differ from the batch's: the next ``reset`` rebuilds it."""
        return self.curriculum.settings() != self._built

    def reset(self, *, seed=None, options: dict | None = None):
        """Reset the batch, rebuilt first if the curriculum's level changed."""
        if self.level_changed:
            self.env.close()
            settings = self.curriculum.settings()
            self.env, self._built = self._build(settings), settings
            # the spaces follow the level (a new N changes them)
            self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
            self.single_observation_space = self.env.single_observation_space
            self.single_action_space = self.env.single_action_space
        self._returns[:] = 0.0
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "curriculum_level": self.curriculum.level}

    def step(self, actions):
        """Step the batch; the scores of the episodes that end go to the curriculum."""
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self._returns += np.asarray(reward, np.float64)
        done = np.asarray(terminated) | np.asarray(truncated)
        if done.any():
            scores = np.asarray(self._score_of(info, self._returns.copy(), done), np.float64)
            self.curriculum.record(scores, done)
            self._returns[done] = 0.0
        return obs, reward, terminated, truncated, info
