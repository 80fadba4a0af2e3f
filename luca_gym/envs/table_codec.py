"""A flat codec over any pure core with a discrete action table:
:class:`TableCodec` and :func:`table_codec`.

A core that lays its experiments out as K typed actions (``flat_actions(config)``:
its ``Action`` pytree with a leading axis of K, host side) gets a flat codec
(:class:`luca_gym.protocol.FlatCodec`) for the functional env, the PPO and a
``CodecEnv`` without writing one: action i is row i of the table, stepped by
the core's own ``step``; the mask is the rows the core would not refuse now
(every row stepped under ``vmap``, their error codes read: cheap for tables of
tens or hundreds of rows, and never a second copy of the rules); the
observation is ``public_view`` flattened to float32 (its leaves in key order);
the score is the return so far (the core's contract makes an ended session's
return its headline); the observation's bounds are the core's observation
space's. An index outside [0, K) is refused with the code ``len(ERRORS)`` at
no cost.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from luca_gym import worlds
from luca_gym.protocol import load


@lru_cache(maxsize=None)
def _core(world: str):
    return load(worlds.get(world).core)


@lru_cache(maxsize=None)
def _table(world: str, config):
    return jax.tree_util.tree_map(np.asarray, _core(world).flat_actions(config))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class TableState:
    """core: the core's state; total: float32 (), the return so far."""

    core: object
    total: jax.Array


@dataclass(frozen=True)
class TableCodec:
    """The flat codec of ``world``'s core under ``config`` (hashable: the functional env's static settings)."""

    world: str
    headline: str
    config: object

    @property
    def num_actions(self) -> int:
        """K: the rows of the core's action table."""
        return int(jax.tree_util.tree_leaves(_table(self.world, self.config))[0].shape[0])

    @property
    def observation_size(self) -> int:
        """D: the length of the flattened public view."""
        state = _core(self.world).reset(_one(self), self.config)
        return int(self._vector(state).shape[0])

    @property
    def observation_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high), float32 (D,): the bounds of the core's observation space, in the vector's order."""
        low, high = _bounds(_core(self.world).observation_space(self.config))
        return np.asarray(low, np.float32), np.asarray(high, np.float32)

    def settings(self) -> dict:
        """The config's fields (they rebuild the codec through the world's ``flat`` factory)."""
        return self.config.settings()

    def describe(self) -> str:
        """The settings in a few words."""
        return ", ".join(f"{k}={v}" for k, v in self.settings().items())

    def instances(self, seeds):
        """The instances of ``seeds``, stacked (host side)."""
        core = _core(self.world)
        return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *[np.asarray(core.instance(int(s), self.config)) for s in seeds])

    def _vector(self, state):
        view = _core(self.world).public_view(state, self.config)
        return jnp.concatenate([jnp.ravel(jnp.asarray(x, jnp.float32)) for x in jax.tree_util.tree_leaves(view)])

    def _mask(self, state):
        core = _core(self.world)
        _, _, errors = jax.vmap(lambda action: core.step(state, action, self.config))(_table(self.world, self.config))
        return errors == 0

    def open(self, instance):
        """A session on ``instance``: (state, vector float32 (D,), mask bool (K,)); pure."""
        state = TableState(_core(self.world).reset(instance, self.config), jnp.float32(0.0))
        return state, self._vector(state.core), self._mask(state.core)

    def step(self, state, action):
        """Row ``action`` (int32 ()) of the table: (state, vector, mask, reward, terminated, truncated, error); pure."""
        core = _core(self.world)
        table = _table(self.world, self.config)
        k = self.num_actions
        inside = (action >= 0) & (action < k)
        chosen = jax.tree_util.tree_map(lambda rows: jnp.asarray(rows)[jnp.clip(action, 0, k - 1)], table)
        stepped, reward, error = core.step(state.core, chosen, self.config)
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(inside, a, b), stepped, state.core)
        reward = jnp.where(inside, reward, 0.0).astype(jnp.float32)
        error = jnp.where(inside, error, len(core.ERRORS)).astype(jnp.int32)
        after = TableState(new, state.total + reward)
        return (after, self._vector(new), self._mask(new), reward, jnp.asarray(core.ended(new), bool), jnp.bool_(False), error)

    def score(self, state):
        """The return so far, float32 (): an ended session's headline."""
        return state.total


def _bounds(space):
    """(low, high) lists of a space's leaves, flattened as ``jax.tree_util.tree_leaves`` orders a view (dict keys sorted)."""
    if isinstance(space, spaces.Dict):
        parts = [_bounds(space[key]) for key in sorted(space.spaces)]
        return [x for low, _ in parts for x in low], [x for _, high in parts for x in high]
    if isinstance(space, spaces.Discrete):
        return [int(space.start)], [int(space.start + space.n - 1)]
    if isinstance(space, spaces.MultiBinary):
        return [0] * int(np.prod(space.shape)), [1] * int(np.prod(space.shape))
    if isinstance(space, spaces.Box):
        return list(np.ravel(space.low)), list(np.ravel(space.high))
    size = int(np.prod(space.shape))
    return [-np.inf] * size, [np.inf] * size


def _one(codec: TableCodec):
    return jax.tree_util.tree_map(lambda x: x[0], codec.instances([0]))


def table_codec(world: str, config_class):
    """The flat-codec factory (``World.flat``) of ``world``: keyword settings
    (its config's fields, named in the factory's signature) -> :class:`TableCodec`."""

    def make(**settings) -> TableCodec:
        return TableCodec(world, worlds.get(world).headline, config_class(**settings))

    make.__signature__ = inspect.Signature(
        [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in fields(config_class)])
    return make


__all__ = ["TableCodec", "TableState", "table_codec"]
