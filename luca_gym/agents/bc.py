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

:func:`plan_cloning` and :func:`train_by_cloning` are ``luca-gym train --algo
bc``: one of a world's flat baselines cloned into a PPO run folder.
"""

from __future__ import annotations

import csv
import os
import time
from dataclasses import dataclass
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


# -- a run folder cloned from one of a world's flat baselines (luca-gym train --algo bc) --
CLONING_CSV = "cloning_curve.csv"  # the run folder's learning curve: one row per epoch


@dataclass(frozen=True)
class Cloning:
    """A checked plan of :func:`train_by_cloning` (from :func:`plan_cloning`):
    the teacher (``teacher``, one of the world's flat baselines, and its
    ``policy`` on ``env``), the PPO run's ``config`` the network is made for,
    ``envs`` x ``length`` steps of the teacher's rollout and ``epochs`` passes
    over them in minibatches of ``minibatch``."""

    teacher: str
    policy: object
    config: ppo.PPOConfig
    env: F.FlatEnv
    envs: int
    length: int
    epochs: int
    minibatch: int

    def describe(self) -> str:
        """The plan in one line."""
        return (f"{self.teacher}'s sessions on {self.env.describe()}, {self.envs} envs x {self.length} steps "
                f"({self.envs * self.length:,} steps; the steps after an env's last ended session are dropped), "
                f"fitted into the {self.config.network} network for {self.epochs} epochs")


def plan_cloning(world, settings: dict, *, steps: int, num_envs: int, epochs: int, teacher: str | None = None,
                 seed: int = 0, minibatch: int = 512, **hyper) -> Cloning:
    """Check a cloning run of ``world`` (a :class:`~luca_gym.protocol.World`
    with a flat codec and flat baselines) under the codec ``settings``, and
    build its PPO config (``hyper``: other :class:`~luca_gym.agents.ppo.PPOConfig`
    fields, e.g. ``network``, ``pool_size``). ``steps`` of the teacher over
    ``num_envs`` envs (each env ``steps // num_envs`` steps); ``teacher``
    defaults to the world's first flat baseline. ValueError naming the
    argument, its value and what is allowed; nothing is run or written."""
    if world.flat is None:
        raise ValueError(f"algo: bc needs a world with a flat codec (World.flat); world {world.name!r} has none")
    teachers = world.flat_baseline_policies()
    if not teachers:
        raise ValueError(f"algo: bc needs a teacher, and world {world.name!r} ships no flat baseline "
                         "(World.flat_baselines)")
    teacher = teacher if teacher is not None else next(iter(teachers))
    if teacher not in teachers:
        raise ValueError(f"teacher: {teacher!r} unknown for world {world.name!r}; allowed {', '.join(teachers)}")
    if isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"epochs: {epochs} not allowed; a positive integer")
    for name, value in (("num_envs", num_envs), ("steps", steps)):
        if value < 1:
            raise ValueError(f"{name}: {value} not allowed; a positive integer")
    length = steps // num_envs
    if length < 1:
        raise ValueError(f"steps: {steps} is less than one step per env ({num_envs} envs); allowed at least {num_envs}")
    config = ppo.PPOConfig(world.name, settings, steps=num_envs * length, num_envs=num_envs, num_steps=length,
                           minibatches=1, seed=seed, **hyper)
    env = config.make_env()
    return Cloning(teacher, teachers[teacher](env), config, env, num_envs, length, epochs, minibatch)


def train_by_cloning(plan: Cloning, out: str, progress=None) -> dict:
    """Run ``plan``: :func:`clone` the teacher into a network and write a PPO
    run folder ``out`` (``ppo:OUT`` plays it; ``--algo ppo --init OUT``
    fine-tunes it) with its learning curve (:data:`CLONING_CSV`).
    ``progress``: called with each epoch's row, as :func:`clone`'s. Raises
    :class:`TooFewSamples` where the teacher's rollout kept fewer steps than
    one minibatch. Returns :func:`clone`'s result (less the network)."""
    rows = []

    def record(row):
        rows.append(row)
        if progress:
            progress(row)

    cloned = clone(plan.config, plan.policy, envs=plan.envs, steps=plan.length, epochs=plan.epochs,
                   minibatch=plan.minibatch, progress=record)
    summary = {"algo": "bc", "teacher": plan.teacher, "teacher_score": cloned["teacher_score"],
               "samples": cloned["samples"], "epochs": plan.epochs, "cross_entropy": cloned["cross_entropy"],
               "accuracy": cloned["accuracy"], "wall_s": cloned["wall_s"], "out": out}
    ppo.save(out, plan.config, cloned["network"], summary)
    with open(os.path.join(out, CLONING_CSV), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ("epoch", "cross_entropy", "accuracy", "wall_s"), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return {k: v for k, v in cloned.items() if k != "network"}
