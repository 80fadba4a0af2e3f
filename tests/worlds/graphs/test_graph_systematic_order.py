"""The graph worlds' ``systematic`` revisits its open rows fewest
interventions first, then lowest index, whatever the budget: the flat
vector holds each node's interventions over the budget (2N), so the order
is taken on the counts (before 2026-12-05 it compared ``interventions /
budget * (N + 1)`` with ``index / N``, and a node intervened on once came
back before an untouched node of index above about N/2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.baselines import systematic_policy
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig
from luca_gym.worlds.graphs.flat import GraphFlat


def _vector(config, counts, budget_left) -> np.ndarray:
    """An evidence vector with every pair unknown (every row open) and these interventions per node."""
    n, budget = config.n, config.budget
    return np.concatenate([np.full(n * n, core.UNKNOWN, np.float32), np.asarray(counts, np.float32) / budget,
                           [np.float32(budget_left / budget)]]).astype(np.float32)


@pytest.mark.parametrize("config", [DagConfig(n_nodes=10, n_states=5, redraw_may_repeat=True),
                                    RelationalConfig(n_houses=10, observation_noise=0.05),
                                    DagConfig(n_nodes=64, n_states=5, redraw_may_repeat=True)])
def test_systematic_takes_the_fewest_interventions_first_then_the_lowest_index(config):
    n = config.n
    policy = systematic_policy(GraphFlat(config))
    cases = [
        (np.r_[1, np.zeros(n - 1)], n - 1, 1),  # node 0 once: node 1 next, not node 0 again
        (np.r_[np.ones(n - 1), 0], 1, n - 1),  # every node once but the last: the last (was: node 0 again)
        (np.r_[np.ones(n // 2), np.zeros(n - n // 2)], n - n // 2, n // 2),
        (np.r_[2, np.ones(n - 1)], n + 1, 1),  # node 0 twice, the others once: node 1
        (np.ones(n), n, 0),  # a tie: the lowest index
    ]
    for counts, spent, expected in cases:
        vector = _vector(config, counts, config.budget - spent)
        mask = np.ones(n + 1, bool)
        action = int(policy(None, None, jnp.asarray(vector)[None], jnp.asarray(mask)[None])[0])
        assert action == expected, (list(counts), action)


def test_systematic_sweeps_every_node_once_before_any_twice():
    """A whole session with repeats (rows stay open after an intervention): the first N interventions
    are the N nodes in order (before 2026-12-05: 0..5, then node 0 again)."""
    config = DagConfig(n_nodes=10, n_states=5, redraw_may_repeat=True)
    codec = GraphFlat(config)
    policy = systematic_policy(codec)
    state, vector, mask = codec.open(jax.tree_util.tree_map(lambda a: a[0], codec.instances([7101])))
    chosen = []
    for _ in range(config.n):
        chosen.append(int(policy(None, None, vector[None], mask[None])[0]))
        state, vector, mask, *_ = codec.step(state, chosen[-1])
    assert chosen == list(range(config.n))
