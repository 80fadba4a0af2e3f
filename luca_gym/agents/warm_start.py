"""A PPO run that starts from another run's weights (``luca-gym train --algo
ppo --init RUN``; e.g. a network cloned from a scripted teacher by
:mod:`luca_gym.agents.bc`): the run folder's network loaded for this world,
and checked against the new run's flat codec before anything trains.

The new run keeps the loaded network's architecture (:data:`ARCHITECTURE`);
its other hyperparameters (learning rate, entropy bonus, steps, ...) are its
own. Errors are ValueErrors naming ``init`` (the run folder), the problem and
what is allowed.
"""

from __future__ import annotations

import jax

from luca_gym.agents import ppo

# The network's own hyperparameters: a warm start keeps its run's (the rest of the PPO's are the new run's).
ARCHITECTURE = ("network", "hidden", "token_width", "attention_layers", "attention_heads", "memory_width")


def load_warm_start(init: str, world: str) -> tuple:
    """(network, its run's :class:`~luca_gym.agents.ppo.PPOConfig`) of the run
    folder ``init``, trained on world ``world`` (a name); ValueError for a
    folder that holds no readable run or a run of another world."""
    try:
        config, network = ppo.load_network(init)
    except ppo.CheckpointError as exc:  # it names the file and the problem
        raise ValueError(f"init: {exc}") from None
    if config.world != world:
        raise ValueError(f"init: {init} was trained on world {config.world!r}, not {world!r}")
    return network, config


def check_warm_start(init: str, network, trained: ppo.PPOConfig, config: ppo.PPOConfig) -> None:
    """ValueError where ``network`` (from the run folder ``init``, trained
    under ``trained``) does not fit the observation and action layout of
    ``config``'s flat codec."""
    env = config.make_env()
    like = jax.eval_shape(lambda: ppo.make_network(jax.random.PRNGKey(0), config, env))
    if not ppo.network_fits(network, like):
        given = ", ".join(f"{k}={v}" for k, v in trained.settings)
        raise ValueError(f"init: {init}'s {trained.network} network does not fit {env.describe()} (observation size "
                         f"{env.observation_size}, {env.num_actions} actions); it was trained with {given}: give the "
                         "settings that change the observation or action layout as they were"
                         + (" (its entity network plays any number of entities)" if trained.network == "entity" else ""))
