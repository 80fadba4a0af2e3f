"""Any world with a flat codec behind `gymnax <https://github.com/RobertTLange/gymnax>`_
1.0's ``Environment`` interface: :func:`make`, so a purejaxrl-style script
written for gymnax trains on our worlds unchanged::

    from luca_gym.integrations import gymnax

    env, env_params = gymnax.make("luca", tier="easy", n_genes=20, mode="healthy")
    obs, state = env.reset(key_reset, env_params)
    obs, state, reward, terminated, truncated, info = env.step(key_step, state, action, env_params)

The interface, as gymnax 1.0 defines it:

* ``env.reset(key, params) -> (obs, state)``: a session opened on an instance
  of the pool in ``params`` drawn by ``key``.
* ``env.step(key, state, action, params) -> (obs, state, reward, terminated,
  truncated, info)``, with autoreset: where the session ends (``terminated |
  truncated``) the returned ``obs`` and ``state`` are a new session's, on a
  pool instance drawn by ``key``, and ``info["final_observation"]`` is the
  ended session's last observation (on other steps, the returned ``obs``).
  ``info["terminated"]`` and ``info["truncated"]`` repeat the flags; only
  ``terminated`` means zero continuation value.
* ``env.observation_space(params)`` (a :class:`Box`), ``env.action_space(params)``
  (a :class:`Discrete`; ``.n``, ``.shape``, ``.sample(key)``),
  ``env.num_actions``, ``env.default_params``, ``env.name``.

What a world adds, since its rules refuse actions: the mask of the legal
actions of the observation returned, as ``info["action_mask"]`` (bool (K,))
and ``env.action_mask(state, params)`` (the opening one after a reset). An
illegal action is refused by the world's core at no cost (``info["error"]``,
the world's refusal code). The step's ``info`` also carries, as
:func:`luca_gym.functional.step` reports them: ``done``, and the ended
session's ``return``, ``score`` (also under the world's headline name, e.g.
LUCA's ``composite``), ``length`` and ``seed`` (the running session's so far
where not ``done``).

``params`` (:class:`EnvParams`) is a pytree that carries the pool of
instances (:class:`luca_gym.functional.Pool`): one compiled step serves every
pool of the same size and settings, and ``vmap`` runs over params as gymnax
users do for meta-RL (:meth:`GymnaxEnv.per_instance_params` plays each of a
list of seeds exactly once that way). ``env.default_params`` is the pool of
the training seeds 10_000 .. 11_023 (:func:`luca_gym.functional.training_seeds`),
disjoint from the evaluation seeds 0-19; ``env.make_params(seeds)`` makes one
on others (held-out seeds for an evaluation).

This is a translation of :mod:`luca_gym.functional` (its ``reset`` and
``step``: the rules, the scorer and the autoreset are the functional env's);
it does not import gymnax (gymnax 1.0.1 pins ``gymnasium<1.4``), and it names
no world: worlds come from the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import functional as F
from luca_gym.boundary import check_flat_actions
from luca_gym.protocol import FlatCodec
from luca_gym.validate import short_repr


# -- spaces ---------------------------------------------------------------------
class Discrete:
    """gymnax's ``Discrete``: the integers 0 .. n-1, int32 actions of shape ().

    Attributes: n (the number of actions), shape ``()``, dtype int32.
    """

    def __init__(self, num_categories: int):
        self.n = int(num_categories)
        self.shape = ()
        self.dtype = jnp.int32

    def __repr__(self) -> str:
        return f"Discrete({self.n})"

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniformly drawn action, int32 () (legal or not: see the env's
        ``action_mask`` for the legal ones)."""
        return jax.random.randint(key, self.shape, 0, self.n, dtype=self.dtype)

    def contains(self, x) -> jax.Array:
        """bool (): ``x`` is an action of this space."""
        x = jnp.asarray(x)
        return jnp.issubdtype(x.dtype, jnp.integer) & (x >= 0) & (x < self.n)


class Box:
    """gymnax's ``Box``: float arrays of ``shape`` with entries in [low, high].

    Attributes: low, high (floats), shape (tuple), dtype float32.
    """

    def __init__(self, low: float, high: float, shape: tuple, dtype=jnp.float32):
        self.low, self.high = float(low), float(high)
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Box(low={self.low:g}, high={self.high:g}, shape={self.shape}, dtype={jnp.dtype(self.dtype).name})"

    def sample(self, key: jax.Array) -> jax.Array:
        """A point of the box: uniform where both bounds are finite, else a
        standard normal clipped to the bounds."""
        if np.isfinite(self.low) and np.isfinite(self.high):
            return jax.random.uniform(key, self.shape, self.dtype, self.low, self.high)
        return jnp.clip(jax.random.normal(key, self.shape, self.dtype), self.low, self.high)

    def contains(self, x) -> jax.Array:
        """bool (): ``x`` has the box's shape and lies within its bounds."""
        x = jnp.asarray(x)
        if x.shape != self.shape:
            return jnp.bool_(False)
        return jnp.all((x >= self.low) & (x <= self.high))


# -- params and state -------------------------------------------------------------
@partial(jax.tree_util.register_dataclass, data_fields=["pool"], meta_fields=[])
@dataclass(frozen=True)
class EnvParams:
    """The env's parameters: the instances sessions open on.

    Attributes:
        pool: a :class:`luca_gym.functional.Pool` (M instances; its codec is
            static), e.g. M training seeds; with a leading axis when params
            are batched for ``vmap`` (:meth:`GymnaxEnv.per_instance_params`).
    """

    pool: F.Pool


@partial(jax.tree_util.register_dataclass, data_fields=["flat", "action_mask"], meta_fields=[])
@dataclass(frozen=True)
class EnvState:
    """One env's state (``vmap`` batches it).

    Attributes:
        flat: the functional env's state (:class:`luca_gym.functional.FlatState`:
            the session, its instance seed, its return and calls so far).
        action_mask: bool (K,) the legal actions of the current observation.
    """

    flat: F.FlatState
    action_mask: jax.Array

    @property
    def time(self) -> jax.Array:
        """int32 (): calls made since the session opened (gymnax's ``state.time``)."""
        return self.flat.length


# -- the env ----------------------------------------------------------------------
@dataclass(frozen=True)
class GymnaxEnv:
    """A world's flat codec with gymnax 1.0's ``Environment`` methods (see the
    module's docstring). Made by :func:`make`; hashable and compared by its
    codec, so every env of the same settings shares one compiled step.

    Attributes:
        codec: the world's flat codec (:class:`luca_gym.protocol.FlatCodec`).
    """

    codec: FlatCodec
    _default_params: EnvParams | None = field(default=None, compare=False, repr=False)

    # -- gymnax's surface ---------------------------------------------------------
    @property
    def name(self) -> str:
        """The world and its settings in a few words."""
        described = self.codec.describe()
        return described if described.startswith(self.codec.world) else f"{self.codec.world} {described}"

    @property
    def num_actions(self) -> int:
        """K, the number of flat actions."""
        return int(self.codec.num_actions)

    @property
    def default_params(self) -> EnvParams:
        """The params :func:`make` built: a pool of its ``instance_seeds``
        (default the training seeds); built here for an env made directly."""
        if self._default_params is None:
            object.__setattr__(self, "_default_params", self.make_params())
        return self._default_params

    def action_space(self, params: EnvParams | None = None) -> Discrete:
        """``Discrete(K)``: the flat actions (the same for every params)."""
        return Discrete(self.num_actions)

    def observation_space(self, params: EnvParams | None = None) -> Box:
        """``Box`` of float32 (D,): the observation vector, within the codec's
        ``observation_bounds`` where it states them."""
        low, high = getattr(self.codec, "observation_bounds", (-np.inf, np.inf))
        return Box(low, high, (int(self.codec.observation_size),), jnp.float32)

    def reset(self, key: jax.Array, params: EnvParams | None = None) -> tuple[jax.Array, EnvState]:
        """Open a session on a pool instance drawn by ``key``. Returns (obs
        float32 (D,), state); the state's ``action_mask`` is the opening mask.
        Pure, jitted; ``vmap`` over keys and over params."""
        params = self._params(params)
        return _reset(self, key, params)

    def step(self, key: jax.Array, state: EnvState, action, params: EnvParams | None = None):
        """Apply flat action ``action`` (an integer, int32 () under ``vmap``).
        Returns (obs float32 (D,), state, reward float32 (), terminated bool (),
        truncated bool (), info) with gymnax 1.0's autoreset (see the module's
        docstring for ``info``). Pure, jitted; ``vmap`` over every argument.

        An action given as a concrete value must be an integer in [0, K)
        (ValueError otherwise, nothing changes); a traced one must be an
        integer array of shape () (checked when traced) and goes to the
        world's codec as it is: a masked action is refused by the world's
        core at no cost (``info["error"]``)."""
        params = self._params(params)
        if not isinstance(state, EnvState):
            raise ValueError(f"state: {short_repr(state)} is not an EnvState; get one from env.reset(key, params)")
        return _step(self, key, state, self._action(action), params)

    # -- what a world with rules adds ---------------------------------------------
    def action_mask(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
        """bool (K,): the actions the world's rules accept in ``state`` (the
        same as the last step's ``info["action_mask"]``)."""
        if not isinstance(state, EnvState):
            raise ValueError(f"state: {short_repr(state)} is not an EnvState; get one from env.reset(key, params)")
        return state.action_mask

    def make_params(self, seeds=None) -> EnvParams:
        """Params whose pool is the instances of ``seeds`` (default: the
        training seeds 10_000 .. 11_023, :func:`luca_gym.functional.training_seeds`),
        generated once here (:func:`luca_gym.functional.make_pool`). A pool of
        the same size reuses the compiled step."""
        return EnvParams(pool=F.make_pool(self.codec, seeds))

    def per_instance_params(self, seeds) -> EnvParams:
        """Params batched along a leading axis, entry i a pool of ``seeds[i]``
        alone: ``jax.vmap(env.reset, in_axes=(0, 0))(keys, params)`` opens
        one session on each seed (and an autoreset reopens the same one), so
        an evaluation plays each seed exactly once."""
        pool = F.make_pool(self.codec, seeds)
        return EnvParams(pool=jax.tree_util.tree_map(lambda x: x[:, None], pool))

    # -- checks on what callers give ----------------------------------------------
    def _params(self, params) -> EnvParams:
        if params is None:
            return self.default_params
        if not isinstance(params, EnvParams):
            raise ValueError(f"params: {short_repr(params)} is not an EnvParams; use env.default_params or "
                             "env.make_params(seeds)")
        if not isinstance(params.pool, F.Pool) or params.pool.env != self.codec:
            raise ValueError(f"params: made for {short_repr(getattr(params.pool, 'env', params.pool))}, not for "
                             f"{self.name}; make them with this env's make_params")
        return params

    def _action(self, action):
        if isinstance(action, jax.core.Tracer):
            if action.shape != () or not jnp.issubdtype(action.dtype, jnp.integer):
                raise ValueError(f"action: a {action.dtype} array of shape {action.shape} not allowed; an integer of "
                                 f"shape () in 0..{self.num_actions - 1} (vmap a batch of actions)")
            return action.astype(jnp.int32)
        return jnp.int32(check_flat_actions(action, self.num_actions))


@partial(jax.jit, static_argnames=("env",))
def _reset(env: GymnaxEnv, key, params: EnvParams):
    flat, obs, mask = F.reset(key, env.codec, params.pool)
    return obs, EnvState(flat=flat, action_mask=mask)


@partial(jax.jit, static_argnames=("env",))
def _step(env: GymnaxEnv, key, state: EnvState, action, params: EnvParams):
    flat, obs, mask, reward, done, info = F.step(key, state.flat, action, env.codec, params.pool)
    # The functional step returns the next session's observation where one
    # ended; the ended one's comes from the codec's step on the same inputs,
    # which XLA computes once (common subexpression elimination).
    _, final_obs, _, _, terminated, truncated, _ = env.codec.step(state.flat.session, action)
    info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": final_obs,
            "action_mask": mask}
    return obs, EnvState(flat=flat, action_mask=mask), reward, terminated, truncated, info


def make(world: str, *, instance_seeds=None, **config) -> tuple[GymnaxEnv, EnvParams]:
    """``(env, env_params)`` for ``world`` (a registered world with a flat
    codec: ``luca``, ``dag``, ``relational``) with gymnax 1.0's interface.

    Args:
        world: the world's registry name (or ``"package.module:attribute"``).
        instance_seeds: the seeds of the default params' pool (default: the
            training seeds 10_000 .. 11_023, disjoint from the evaluation
            seeds 0-19).
        **config: the world's flat-codec settings (LUCA: ``tier``,
            ``n_genes``, ``mode``, ``budget``, ``analyst``, ...; dag:
            ``n_nodes``, ``n_states``, ...), checked by the world.

    Raises ValueError naming an unknown world, a world without a flat codec,
    a bad setting or a bad seed.
    """
    codec = F.make_env(world=world, **config)
    env = GymnaxEnv(codec, EnvParams(pool=F.make_pool(codec, instance_seeds)))
    return env, env.default_params
