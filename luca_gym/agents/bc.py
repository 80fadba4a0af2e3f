"""Behaviour cloning of a scripted flat policy: a warm start for PPO
(:mod:`luca_gym.agents.ppo`).

:func:`clone` plays a teacher (any :func:`luca_gym.functional.flat_rollout`
policy, e.g. LUCA's ``causal-sweep-flat``,
:func:`luca_gym.worlds.luca.baselines.sweep_flat.flat_policy`) on the training
pool, then fits a fresh network of the run's config to it: the actor by
cross-entropy on the teacher's actions (the masked logits: the student reads
only the observation vector and the mask, as the teacher does), the critic
on the teacher's return-to-go (undiscounted, the PPO's ``gamma`` 1), so the
PPO that follows starts from the teacher's policy and a value that already
knows it. ``ppo.train(config, network=clone(...)["network"])`` fine-tunes it.
"""

from __future__ import annotations

import time
from functools import partial

import jax
import jax.numpy as jnp
import optax

from luca_gym import functional as F
from luca_gym.agents import ppo
from luca_gym.validate import check_positive_int


class TooFewSamples(ValueError):
    """The teacher's rollout kept fewer steps than one minibatch (``samples``: how many it kept)."""

    def __init__(self, samples: int, message: str):
        super().__init__(message)
        self.samples = samples


def returns_to_go(reward: jax.Array, done: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(return-to-go float32 (T, B), complete bool (T, B)) of a rollout's
    rewards and done flags (T, B): the undiscounted sum of the session's
    rewards from each step on; ``complete`` is False on the steps after an
    env's last ended session (their session did not end inside the rollout,
    so their return is not known)."""
    def back(carry, x):
        r, d = x
        carry = r + carry * (1.0 - d)
        return carry, carry

    _, rtg = jax.lax.scan(back, jnp.zeros(reward.shape[1], jnp.float32),
                          (reward.astype(jnp.float32), done.astype(jnp.float32)), reverse=True)
    complete = jnp.cumsum(done[::-1].astype(jnp.int32), axis=0)[::-1] > 0
    return rtg, complete


def _loss(network, obs, mask, action, target):
    logits, value = ppo.apply(network, obs, mask)
    log_probs = jax.nn.log_softmax(logits)
    cross_entropy = -jnp.take_along_axis(log_probs, action[:, None], axis=1)[:, 0].mean()
    accuracy = (jnp.argmax(logits, axis=-1) == action).mean()
    return cross_entropy + 0.5 * ((value - target) ** 2).mean(), (cross_entropy, accuracy)


@partial(jax.jit, static_argnames=("optimizer", "minibatch"))
def _epoch(network, opt_state, key, data, optimizer, minibatch):
    count = data["obs"].shape[0] // minibatch
    order = jax.random.permutation(key, data["obs"].shape[0])[: count * minibatch].reshape(count, minibatch)

    def step(carry, rows):
        network, opt_state = carry
        batch = {k: v[rows] for k, v in data.items()}
        (_, (cross_entropy, accuracy)), grads = jax.value_and_grad(_loss, has_aux=True)(
            network, batch["obs"], batch["mask"], batch["action"], batch["target"])
        updates, opt_state = optimizer.update(grads, opt_state, network)
        return (optax.apply_updates(network, updates), opt_state), (cross_entropy, accuracy)

    (network, opt_state), (cross_entropy, accuracy) = jax.lax.scan(step, (network, opt_state), order)
    return network, opt_state, cross_entropy.mean(), accuracy.mean()


def clone(config: ppo.PPOConfig, teacher, *, envs: int = 2048, steps: int = 64, epochs: int = 40,
          learning_rate: float = 1e-3, minibatch: int = 2048, pool: F.Pool | None = None,
          progress=None) -> dict:
    """A network of ``config`` fitted to ``teacher``'s actions.

    Args:
        config: the PPO run's config (its codec, network and seed).
        teacher: a :func:`~luca_gym.functional.flat_rollout` policy
            ``(params, key, obs (B, D), mask (B, K)) -> int32 (B,)`` reading
            only the observation and the mask (called with params None).
        envs, steps: the teacher's rollout on the training pool (envs x
            steps samples; steps after an env's last ended session dropped).
        epochs, learning_rate, minibatch: Adam passes over the samples.
        pool: the training pool (default: the config's, seeds pool_start up).
        progress: called with {"epoch", "epochs" (the total),
            "cross_entropy", "accuracy", "wall_s"} after each epoch.

    Raises :class:`TooFewSamples` (a ValueError) where the rollout kept fewer
    steps than ``minibatch``.

    Returns {"network", "teacher_score" (the teacher's mean headline score on
    the pool), "samples", "cross_entropy", "accuracy" (the last epoch's),
    "wall_s"}.
    """
    for name, value in (("envs", envs), ("steps", steps), ("epochs", epochs), ("minibatch", minibatch)):
        check_positive_int(value, name)
    started = time.perf_counter()
    env = config.make_env()
    if pool is None:
        pool = F.make_pool(env, F.training_seeds(config.pool_size, config.pool_start))
    rollout_key, net_key, shuffle_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)
    out = F.flat_rollout(teacher, None, rollout_key, env, pool, envs, steps, trajectories=True)
    trajectory = out["trajectory"]
    target, complete = returns_to_go(trajectory["reward"], trajectory["done"])
    keep = jax.device_get(complete)
    data = {"obs": trajectory["obs"][keep], "mask": trajectory["mask"][keep], "action": trajectory["action"][keep],
            "target": target[keep]}
    samples = int(data["obs"].shape[0])
    if samples < minibatch:
        raise TooFewSamples(samples, f"minibatch: {minibatch} is more than the {samples} samples of the teacher's rollout "
                         f"({envs} envs x {steps} steps); allowed at most {samples}")
    network = ppo.make_network(net_key, config, env)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))
    opt_state = optimizer.init(network)
    for e in range(epochs):
        network, opt_state, cross_entropy, accuracy = _epoch(network, opt_state, jax.random.fold_in(shuffle_key, e),
                                                             data, optimizer, minibatch)
        if progress:
            progress({"epoch": e + 1, "epochs": epochs, "cross_entropy": float(cross_entropy), "accuracy": float(accuracy),
                      "wall_s": round(time.perf_counter() - started, 3)})
    return {"network": network, "teacher_score": float(out["mean_score"]), "samples": samples,
            "cross_entropy": float(cross_entropy), "accuracy": float(accuracy),
            "wall_s": round(time.perf_counter() - started, 3)}
