"""A recurrent actor-critic for the PPO (:mod:`luca_gym.agents.ppo`,
``network="recurrent"``): a GRU over the flat observations of a session,
for codecs whose observation leaves the session's history to the learner
(the graph worlds' ``observation="raw"``).

Each step the observation (float32 (D,)) is encoded (one tanh layer of the
memory's width H), a GRU cell updates the memory (float32 (H,)) from it,
and the actor's logits (K) and the critic's value are read from the new
memory beside the encoding; the actor also has the MLP's linear path from
the observation straight to the logits (:func:`luca_gym.agents.ppo.init_network`
says why). The memory is zero at the start of every session: a step whose
``start`` is set (the first observation of a session) sees zeros, whatever
the previous session left.

The PPO keeps each rollout's memory at its first step per env and, in the
update, unrolls the network again over whole env trajectories from it
(:func:`unroll`), so the minibatches are sets of envs, not of steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class RecurrentNetwork:
    """The weights (D observation entries, K actions, H memory width).

    Attributes:
        encoder: {"w": float32 (D, H), "b": float32 (H,)}.
        gru: {"wx": float32 (H, 3H), "wh": float32 (H, 3H), "b": float32
            (3H,)}: the update, reset and candidate gates, in that order.
        actor: {"w": float32 (2H, K), "b": float32 (K,)} over [memory, encoding].
        actor_linear: {"w": float32 (D, K)} from the observation.
        critic: [{"w": float32 (2H, H), "b": (H,)}, {"w": float32 (H, 1), "b": (1,)}].
    """

    encoder: dict
    gru: dict
    actor: dict
    actor_linear: dict
    critic: list

    @property
    def width(self) -> int:
        """H, the memory's width."""
        return int(self.encoder["w"].shape[1])

    @property
    def sizes(self) -> tuple[int, int]:
        """(D, K): the observation size and the number of actions it was made for."""
        return int(self.actor_linear["w"].shape[0]), int(self.actor_linear["w"].shape[1])


def init(key: jax.Array, observation_size: int, num_actions: int, width: int) -> RecurrentNetwork:
    """A fresh network: orthogonal weights (gain sqrt 2 in the encoder and
    the critic's hidden layer, 1 in the GRU, 0.01 on the actor's head, 1 on
    the critic's) and a zero linear path, so the first policy is near
    uniform over the legal actions."""
    keys = jax.random.split(key, 6)
    orthogonal = lambda k, shape, gain: jax.nn.initializers.orthogonal(gain)(k, shape, jnp.float32)  # noqa: E731
    zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
    return RecurrentNetwork(
        encoder={"w": orthogonal(keys[0], (observation_size, width), np.sqrt(2.0)), "b": zeros(width)},
        gru={"wx": orthogonal(keys[1], (width, 3 * width), 1.0), "wh": orthogonal(keys[2], (width, 3 * width), 1.0),
             "b": zeros(3 * width)},
        actor={"w": orthogonal(keys[3], (2 * width, num_actions), 0.01), "b": zeros(num_actions)},
        actor_linear={"w": zeros(observation_size, num_actions)},
        critic=[{"w": orthogonal(keys[4], (2 * width, width), np.sqrt(2.0)), "b": zeros(width)},
                {"w": orthogonal(keys[5], (width, 1), 1.0), "b": zeros(1)}],
    )


def initial_memory(network: RecurrentNetwork, batch: int) -> jax.Array:
    """float32 (batch, H) zeros: the memory at a session's start."""
    return jnp.zeros((batch, network.width), jnp.float32)


def step(network: RecurrentNetwork, memory: jax.Array, obs: jax.Array, start: jax.Array):
    """One step of a batch: memory float32 (B, H), obs float32 (B, D), start
    bool (B,) (a session's first observation: its memory starts from zero).
    Returns (logits float32 (B, K), unmasked; value float32 (B,); memory
    float32 (B, H))."""
    memory = jnp.where(start[:, None], 0.0, memory)
    encoded = jnp.tanh(obs @ network.encoder["w"] + network.encoder["b"])
    x_gates = encoded @ network.gru["wx"] + network.gru["b"]
    h_gates = memory @ network.gru["wh"]
    width = network.width
    update = jax.nn.sigmoid(x_gates[:, :width] + h_gates[:, :width])
    reset = jax.nn.sigmoid(x_gates[:, width:2 * width] + h_gates[:, width:2 * width])
    candidate = jnp.tanh(x_gates[:, 2 * width:] + reset * h_gates[:, 2 * width:])
    memory = (1.0 - update) * memory + update * candidate
    features = jnp.concatenate([memory, encoded], axis=-1)
    logits = features @ network.actor["w"] + network.actor["b"] + obs @ network.actor_linear["w"]
    hidden = jnp.tanh(features @ network.critic[0]["w"] + network.critic[0]["b"])
    value = (hidden @ network.critic[1]["w"] + network.critic[1]["b"])[..., 0]
    return logits, value, memory


def unroll(network: RecurrentNetwork, memory: jax.Array, obs: jax.Array, start: jax.Array):
    """The network over whole trajectories: memory float32 (B, H) before the
    first step, obs float32 (T, B, D), start bool (T, B). Returns (logits
    float32 (T, B, K), unmasked; values float32 (T, B))."""

    def body(memory, x):
        logits, value, memory = step(network, memory, *x)
        return memory, (logits, value)

    _, (logits, values) = jax.lax.scan(body, memory, (obs, start))
    return logits, values
