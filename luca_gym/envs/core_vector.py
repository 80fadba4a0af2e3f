"""``CoreVectorEnv``: any world's pure core (``World.core``,
:class:`luca_gym.protocol.Core`) as one Gymnasium vector env, ``num_envs``
sessions stepped by one ``jit(vmap(core.step))``; the registry registers it
as the ``make_vec`` of ``luca_gym/<Stem>-v0`` for a world that declares a
core and no vector env of its own (the graph worlds, tracking).

Design. What every world's batch needs is here once; a world configures it
with two things and nothing else:

* a *program* (a hashable, static object with pure ``open(instance, key)
  -> (obs, state)`` and ``step(state, action) -> (obs, state, reward,
  terminated, truncated, error, extras)``), which the env vmaps and jits.
  :class:`CoreProgram` builds it from the core's protocol functions; a world
  whose core has faster batched forms gives its own (LUCA: its session's
  own ``reset`` and ``step``, which return the observation they compute
  anyway, and its jitted scorer as ``extras``; its protocol ``Instance``
  carries the seed and the gene names as static fields, so a batch of
  them is its organisms' arrays and noise keys instead);
* an *instance source* (:class:`luca_gym.pools.InstanceSource`): each new
  episode's instance seed, instance and noise key, drawn with the env's
  numpy RNG, from a pool of M instances (the training seeds 10 000 up by
  default, built once) or fresh (a new seed every episode, built ahead).

The rest is generic and shared: the batched state stays on the device; an
autoreset opens new sessions on the finished rows only, in one jitted call
padded to a power of two of at least :data:`REOPEN_ROWS` rows (few shapes to
compile) that gathers pool instances on the device (no instance crosses per
step) and updates the state in place (donated: the env holds the only
reference); everything the host reads after a step crosses in one transfer.
Autoreset is Gymnasium 1.x's ``NEXT_STEP`` by default (the step after an
episode ends opens a new one in that sub-env and ignores its action) or
``SAME_STEP`` (the ending step returns the new episode's first observation,
the last one in ``info["final_obs"]``). A refused action costs nothing and
changes nothing; its code is in ``info["error_code"]`` (0: accepted). Where
an episode ended, ``info`` holds its scores and its instance seed (with the
``_name`` masks Gymnasium uses). ``reset(options={"instance_seeds": [...]})``
pins every sub-env's instance (with the key the world builds beside it: the
sessions a single env opens); an explicit reset to the seeds of the last
pinned reset reuses their instances. A core's ``SEED_OPTION`` names the seed
(``<name>`` in infos, ``<name>s`` in options) and its ``DRAWN_SEEDS`` the
range fresh seeds start from, as for :class:`luca_gym.envs.core.CoreEnv`.

A generic core's ``scores`` are host-side Python values (they refuse while
a session is open), read for the rows that ended only: ``info["scores"]``
is an object array of dicts there. A pool of a deterministic world opens
the same session each time it meets an instance (no noise key to renew);
an agent trained on a pool has met only its M instances, so a score on them
is a training score.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from luca_gym.boundary import reset_options
from luca_gym.functional import DEFAULT_POOL_SIZE, TRAINING_SEED_START, training_seeds
from luca_gym.host import open_core
from luca_gym.pools import InstanceSource, take
from luca_gym.validate import check_bool, check_positive_int, check_seed, short_repr

REOPEN_ROWS = 16  # the fewest rows one autoreset opens (padding), so few shapes compile
AUTORESET_MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}


@dataclass(frozen=True)
class CoreProgram:
    """A world's session as the vector env vmaps it, from its core's protocol
    functions (static: one compile per core and config)."""

    core: Any
    config: Any

    def open(self, instance, key):
        """(observation, state) of a fresh session on ``instance`` (``key``: unused, the core has no renewal)."""
        state = self.core.reset(instance, self.config)
        return self.core.public_view(state, self.config), state

    def step(self, state, action):
        """(observation, state, reward, terminated, truncated, error, {}) after ``action``."""
        was_ended = jnp.asarray(self.core.ended(state), bool)
        state, reward, error = self.core.step(state, action, self.config)
        ended = jnp.asarray(self.core.ended(state), bool) & ~was_ended  # this step ended it
        truncated = getattr(self.core, "truncated", None)
        truncated = ended & (False if truncated is None else jnp.asarray(truncated(state, self.config), bool))
        return self.core.public_view(state, self.config), state, reward, ended & ~truncated, truncated, error, {}


@partial(jax.jit, static_argnames=("program",))
def _open(instances, keys, program):
    """(observations, states) of sessions on ``instances`` (B leading), each with its row of ``keys`` (or None)."""
    return jax.vmap(program.open)(instances, keys)


@partial(jax.jit, static_argnames=("program",))
def _step(state, action, program):
    return jax.vmap(program.step)(state, action)


# ``state`` is donated (updated in place, not copied): callers pass a state no one else holds.
@partial(jax.jit, static_argnames=("program",), donate_argnames=("state",))
def _open_rows(rows, keys, source, index, obs, state, program):
    """``obs`` and ``state`` with the sessions at ``rows`` (int32 (R,)) opened
    anew on the instances ``source[index]`` (index (R,)) with ``keys`` (R, 2)
    (or None); a row may repeat with the same instance and key (padding)."""
    new_obs, new_state = jax.vmap(program.open)(take(source, index), keys)
    put = lambda full, new: full.at[rows].set(new)  # noqa: E731
    return jax.tree_util.tree_map(put, obs, new_obs), jax.tree_util.tree_map(put, state, new_state)


def _pad(tree, pad):
    return None if tree is None else take(tree, pad)


def check_seeds(values: Any, count: int, name: str) -> np.ndarray:
    """``count`` instance seeds as int64 (count,), each checked by
    :func:`luca_gym.validate.check_seed` (a list's items one by one, so
    ``True`` or ``3.0`` is refused, not converted)."""
    if isinstance(values, (list, tuple)):
        items = list(values)
    else:
        array = np.asarray(values)
        if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
            raise ValueError(f"{name}: expected {count} integer seeds, got an array of shape {array.shape} and dtype {array.dtype}")
        items = list(array)
    if len(items) != count:
        raise ValueError(f"{name}: expected {count} seeds, got {len(items)}")
    return np.asarray([check_seed(s, f"{name}[{i}]") for i, s in enumerate(items)], np.int64)


def _as_batch(value, space):
    """A batched view as numpy values of the single ``space``'s dtypes (a Dict: its keys only)."""
    if isinstance(space, spaces.Dict):
        return {key: _as_batch(value[key], sub) for key, sub in space.spaces.items()}
    return np.asarray(value, space.dtype)


def _row(sample, i: int):
    """Row ``i`` of a batched action (a dict: key by key)."""
    if isinstance(sample, dict):
        return {key: _row(value, i) for key, value in sample.items()}
    return np.asarray(sample)[i]


class CoreVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` sessions of ``world``'s core stepped together.

    Args:
        num_envs: the batch size.
        world: the world's registry name (``make_vec`` of its id passes it).
        instances: ``"pool"`` (default: each new episode on an instance
            drawn uniformly from those of the training seeds 10 000 ..
            10 000 + pool_size - 1, built at the first draw) or ``"fresh"``
            (a new instance seed per episode from 10 000 up, never an
            evaluation seed; its instance built ahead of need).
        pool_size: the pool's instances (default 1024).
        generation_batch: ``instances="fresh"`` builds at least this many per call (default 16).
        autoreset_mode: ``"next_step"`` (default) or ``"same_step"``.
        numpy: numpy observations (default) or JAX arrays.
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True: instances of their sealed seeds.
        settings: the world's config fields (the core's ``make_config``'s
            where it has one).

    Spaces: the core's, with a leading ``num_envs`` axis (observations: the
    keys of its observation space). ``info`` holds ``error_code`` per
    sub-env and, where an episode ended on this step, ``scores`` (the core's
    dict) and ``instance_seed``.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    # The key of an episode's seed in infos (``<seed_name>s`` in reset options); a core may name it (``SEED_OPTION``).
    seed_name = "instance_seed"

    def __init__(self, num_envs: int, *, world: str, instances: str = "pool", pool_size: int = DEFAULT_POOL_SIZE,
                 generation_batch: int = 16, autoreset_mode: str = "next_step", numpy: bool = True, sealed=None,
                 **settings):
        self.world, self.core, self.config, self.seal = open_core(world, sealed, settings, "CoreVectorEnv")
        self.seed_name = getattr(self.core, "SEED_OPTION", self.seed_name)
        seeds = training_seeds(check_positive_int(pool_size, "pool_size")) if instances == "pool" else None
        low = getattr(self.core, "DRAWN_SEEDS", (TRAINING_SEED_START,))[0]
        source = InstanceSource(instances, self._build, pool_seeds=seeds, generation_batch=generation_batch,
                                low=low, kind_name="instances")
        self._setup(num_envs, CoreProgram(self.core, self.config), source, self.core.observation_space(self.config),
                    self.core.action_space(self.config), autoreset_mode, numpy)

    def _setup(self, num_envs, program, source: InstanceSource, observation_space, action_space, autoreset_mode,
               numpy) -> None:
        """The generic part of construction: a world's configuration calls it with its program and source."""
        self.num_envs = check_positive_int(num_envs, "num_envs")
        if autoreset_mode not in AUTORESET_MODES and autoreset_mode not in AUTORESET_MODES.values():
            raise ValueError(f"autoreset_mode: {autoreset_mode!r} not allowed; allowed 'next_step' or 'same_step'")
        self.autoreset_mode = AUTORESET_MODES.get(autoreset_mode, autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.program, self.source = program, source
        self.numpy = check_bool(numpy, "numpy")
        self.single_observation_space, self.single_action_space = observation_space, action_space
        self.observation_space = batch_space(observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self.state = None
        self._given = None  # (seeds, (instances, keys)) of the last reset with pinned seeds
        self._pool = None  # the pool's instances on the device, once drawn from
        self.instance_seeds = np.zeros(self.num_envs, np.int64)
        self._autoreset = np.zeros(self.num_envs, bool)

    # -- what a world's configuration may override ---------------------------------
    def _build(self, seeds: np.ndarray):
        """(instances numpy (B leading), None) of ``seeds``: the core's batched
        ``instances`` where it has one, else its instances stacked."""
        many = getattr(self.core, "instances", None)
        if many is not None:
            return jax.device_get(many(seeds, self.config, self.seal)), None
        each = [jax.device_get(self.core.instance(int(s), self.config, self.seal)) for s in seeds]
        return jax.tree_util.tree_map(lambda *rows: np.stack(rows), *each), None

    def _parse_actions(self, actions):
        """The batched action as the core's typed action (B leading); ValueError for one outside the space."""
        try:
            inside = self.action_space.contains(actions)
        except Exception:  # noqa: BLE001 -- hostile input: an action the space cannot even check is outside it
            inside = False
        if not inside and not getattr(self.core, "TO_ACTION_CHECKS", False):
            raise ValueError(f"actions: {short_repr(actions)} not allowed; an element of {self.action_space}")
        try:
            rows = [self.core.to_action(_row(actions, i), self.program.config) for i in range(self.num_envs)]
        except (IndexError, KeyError, TypeError):  # a core that checks actions itself: a batch of another shape
            raise ValueError(f"actions: {short_repr(actions)} not allowed; {self.num_envs} actions of "
                             f"{self.single_action_space}") from None
        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *rows)

    def _to_numpy(self, obs):
        return _as_batch(obs, self.single_observation_space)

    def _observation(self, obs):
        """What the env hands out of a batched view: numpy, or JAX arrays of the space's keys."""
        if self.numpy:
            return self._to_numpy(obs)
        if isinstance(self.single_observation_space, spaces.Dict):
            return {key: obs[key] for key in self.single_observation_space.spaces}
        return obs

    def _ended_info(self, info: dict, done: np.ndarray, state, extras: dict) -> None:
        """Add what ``info`` reports of the episodes that ended (``done``): the core's scores, read on the host."""
        rows = np.flatnonzero(done)
        host = jax.device_get(take(state, rows))
        scores = np.full(self.num_envs, None, object)
        for j, i in enumerate(rows):
            scores[i] = self.core.scores(take(host, j), self.program.config)
        info["scores"], info["_scores"] = scores, done.copy()

    # -- sessions ------------------------------------------------------------------
    def _reopen(self, mask: np.ndarray, obs, state):
        """``obs`` and ``state`` with new sessions in the sub-envs of ``mask``
        (instances from :attr:`source`), opened in one jitted call."""
        rows = np.flatnonzero(mask)
        size = 1 << (max(rows.size, min(REOPEN_ROWS, self.num_envs)) - 1).bit_length()
        pad = np.concatenate([np.arange(rows.size), np.zeros(size - rows.size, np.int64)])
        if self.source.kind == "pool":
            if self._pool is None:
                self._pool = jax.device_put(self.source.pool)  # gathered on the device: no instance crosses per step
            seeds, index, keys = self.source.draw_rows(self.np_random, rows.size)
            source, index = self._pool, index[pad]
        else:
            seeds, instances, keys = self.source.draw(self.np_random, rows.size)
            source, index = take(instances, pad), np.arange(size)
        obs, state = _open_rows(rows[pad].astype(np.int32), _pad(keys, pad), source, index, obs, state, self.program)
        self.instance_seeds = self.instance_seeds.copy()  # the arrays handed out in infos stay as they were
        self.instance_seeds[rows] = seeds
        return obs, state

    def _pinned(self, seeds: np.ndarray):
        """(instances, keys) of ``seeds``, each instance with the key the world builds beside it."""
        if self._given is not None and np.array_equal(self._given[0], seeds):
            # The same instances asked for again (an instance is a pure function of its seed): not built again.
            return self._given[1]
        built = self.source.build(seeds)
        self._given = (np.array(seeds, copy=True), built)
        return built

    # -- gymnasium API -------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.source.clear()
        pinned = f"{self.seed_name}s"
        options = reset_options(options, (pinned,))
        if pinned in options:
            seeds = check_seeds(options[pinned], self.num_envs, f"options[{pinned!r}]")
            instances, keys = self._pinned(seeds)
        else:
            seeds, instances, keys = self.source.draw(self.np_random, self.num_envs)
        obs, self.state = _open(instances, keys, self.program)
        self.instance_seeds = np.array(seeds, np.int64)
        self._autoreset[:] = False
        return self._observation(obs), {self.seed_name: self.instance_seeds.copy()}

    def step(self, actions):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        action = self._parse_actions(actions)
        obs, state, reward, terminated, truncated, error, extras = _step(self.state, action, self.program)
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset.any()
        if next_step:
            # Sub-envs whose episode ended last step start a new one; their action is ignored.
            obs, state = self._reopen(self._autoreset, obs, state)
        # One transfer of everything the host reads (the reopening above runs meanwhile).
        host_obs, reward, terminated, truncated, error, extras = jax.device_get(
            (obs if self.numpy else None, reward, terminated, truncated, error, extras))
        info = {"error_code": error}
        if next_step:
            reward = np.where(self._autoreset, 0.0, reward)
            terminated = np.where(self._autoreset, False, terminated)
            truncated = np.where(self._autoreset, False, truncated)
            info["error_code"] = np.where(self._autoreset, 0, info["error_code"])
        done = terminated | truncated
        if done.any():
            self._ended_info(info, done, state, extras)
            info[self.seed_name] = np.where(done, self.instance_seeds, -1)
            info[f"_{self.seed_name}"] = done.copy()
        if self.autoreset_mode == AutoresetMode.SAME_STEP and done.any():
            info["final_obs"] = self._to_numpy(host_obs) if self.numpy else self._observation(obs)
            info["_final_obs"] = done.copy()
            obs, state = self._reopen(done, obs, state)
            host_obs = obs
        else:
            self._autoreset = done
        self.state = state
        return (self._to_numpy(host_obs) if self.numpy else self._observation(obs)), reward.astype(np.float32), \
            terminated, truncated, info

    def close(self, **kwargs):
        """Drop the sessions (a closed env must be reset before it steps)."""
        self.state = None
        super().close(**kwargs)


__all__ = ["AUTORESET_MODES", "CoreProgram", "CoreVectorEnv", "REOPEN_ROWS", "check_seeds"]
