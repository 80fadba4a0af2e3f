"""The pure, functional API for training and batched evaluation: whole
batches of sessions as one jit-compiled program, no Python in the loop.

* :func:`organism_batch` -- stacked organism arrays and noise keys for seeds.
* :func:`rollout` -- one session per organism for a fixed number of steps
  (``lax.scan`` over ``vmap(core.step)``), optionally sharded over devices.
* :func:`fresh_rollout` -- the same, with the organisms generated inside the
  compiled program from a key.
* :func:`shard_batch` -- place a batch across local devices.

The Gymnasium vector env (:class:`luca_gym.envs.LucaVectorEnv`) is an adapter
over the same core; this module does not depend on Gymnasium.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import core, spec, world


def organism_batch(seeds, tier: str, n_genes: int, mode: str, backwards: bool = False):
    """Stacked organism arrays (generated as one batch, :func:`world.generate`)
    and session noise keys (B, 2) for ``seeds``."""
    seeds = np.asarray(list(seeds))
    return world.generate(seeds, tier, n_genes, mode, backwards), core.noise_keys(seeds, tier, n_genes)


def shard_batch(tree, devices=None):
    """Place every array of ``tree`` split along its leading (batch) axis across
    ``devices`` (default: all local devices). The batch must divide evenly."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = list(devices or jax.local_devices())
    leaves = jax.tree_util.tree_leaves(tree)
    batch = leaves[0].shape[0]
    if batch % len(devices):
        raise ValueError(f"batch: {batch} organisms do not split over {len(devices)} devices; use a multiple of {len(devices)}")
    sharding = NamedSharding(Mesh(np.array(devices), ("batch",)), PartitionSpec("batch"))
    return jax.tree_util.tree_map(lambda x: jax.device_put(x, sharding), tree)


def rollout(policy_fn, key: jax.Array, organisms, noise_keys, params: core.EnvParams, num_steps: int, shard: bool = False):
    """Run one session per organism for ``num_steps`` steps as one jitted
    ``lax.scan`` (no Python in the loop).

    Args:
        policy_fn: jittable ``(key, obs) -> core.Action`` over a batch.
        organisms: stacked organism arrays (B leading); noise_keys: (B, 2) keys.
        shard: split the batch across all local devices (``jax.sharding``);
            the results are the same as unsharded.
    Returns (returns float32 (B,), composite float32 (B,), ended bool (B,)).
    """
    if shard:
        organisms, noise_keys = shard_batch((organisms, noise_keys))
    return _rollout(policy_fn, key, organisms, noise_keys, params, num_steps)


@partial(jax.jit, static_argnames=("policy_fn", "params", "num_steps"))
def _rollout(policy_fn, key, organisms, noise_keys, params, num_steps):
    return _sessions(policy_fn, key, organisms, noise_keys, params, num_steps)


def _sessions(policy_fn, key, organisms, noise_keys, params, num_steps):
    obs, state = jax.vmap(core.reset, in_axes=(0, 0, None))(noise_keys, organisms, params)

    def body(carry, k):
        obs, state, total = carry
        action = policy_fn(k, obs)
        obs, state, reward, _, _, _ = jax.vmap(core.step, in_axes=(0, 0, None))(state, action, params)
        return (obs, state, total + reward), None

    (obs, state, total), _ = jax.lax.scan(body, (obs, state, jnp.zeros(noise_keys.shape[0], jnp.float32)), jax.random.split(key, num_steps))
    scores = jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None))(state, params)
    return total, scores["composite"], state.ended


def fresh_rollout(policy_fn, key: jax.Array, params: core.EnvParams, tier: str, num_envs: int, num_steps: int,
                  backwards: bool = False):
    """Draw ``num_envs`` organism seeds from ``key``, generate the organisms
    inside the jit (:func:`luca_gym.world.traced_generate`) and run one session
    on each for ``num_steps`` steps: generation and sessions in one compiled
    program, no Python in the loop.

    Returns a dict: ``returns``, ``composite``, ``ended`` (B,), ``seeds`` int64
    (B,) (``make_organism(seeds[i], tier, ...)`` is env i's organism) and
    ``generated`` bool (B,) (False only if an organism met no guarantee within
    ``world.MAX_ATTEMPTS`` attempts; its session is then meaningless).
    """
    num_envs = spec.check_positive_int(num_envs, "num_envs")
    mode = "disease" if params.disease else "healthy"
    tier, n_genes, mode, backwards = spec.check_organism(tier, params.n_genes, mode, backwards)
    plan = world.plan(n_genes, mode, backwards)
    t = world.tier_params(tier, n_genes)
    out = _fresh_rollout(policy_fn, key, params, t, plan, num_envs, num_steps, world.map_batch(), world.MAX_ATTEMPTS)
    out["seeds"] = np.asarray(out["seeds"]).astype(np.int64)
    return out


@partial(jax.jit, static_argnames=("policy_fn", "params", "plan", "num_envs", "num_steps", "group", "max_attempts"))
def _fresh_rollout(policy_fn, key, params, t, plan, num_envs, num_steps, group, max_attempts):
    seed_key, run_key = jax.random.split(key)
    seeds = jax.random.randint(seed_key, (num_envs,), 0, spec.DRAWN_SEED_LIMIT).astype(jnp.uint32)
    zeros = jnp.zeros(num_envs, jnp.uint32)
    organisms, ok = jax.lax.map(
        lambda lo: world.traced_generate(jnp.uint32(0), lo, t, plan, max_attempts), seeds, batch_size=min(group, num_envs)
    )
    noise_keys = core.traced_noise_keys(zeros, seeds, t.index.astype(jnp.uint32), jnp.uint32(params.n_genes))
    returns, composite, ended = _sessions(policy_fn, run_key, organisms, noise_keys, params, num_steps)
    return {"returns": returns, "composite": composite, "ended": ended, "seeds": seeds, "generated": ok}
