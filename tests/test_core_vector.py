"""The generic vector env over any core (:class:`luca_gym.envs.core_vector.CoreVectorEnv`):
``make_vec`` of a world with a core and no vector env of its own reaches it,
and its sessions are the single :class:`~luca_gym.envs.core.CoreEnv`'s, row
for row, through autoresets."""

import gymnasium as gym
import jax
import numpy as np
import pytest

import luca_gym  # noqa: F401  (registers the environments)
from luca_gym.envs import core_vector
from luca_gym.envs.core import CoreEnv
from luca_gym.envs.core_vector import CoreVectorEnv
from luca_gym.worlds.luca.envs import LucaVectorEnv

B = 3
DAG = dict(n_nodes=3, n_states=3)
POOL = 8


@pytest.mark.parametrize("env_id, world", [("luca_gym/DagDiscovery-v0", "dag"), ("luca_gym/RelationalDiscovery-v0", "relational"),
                                           ("luca_gym/StateTracking-v0", "tracking")])
def test_make_vec_of_a_world_with_a_core_is_the_generic_batch(env_id, world):
    env = gym.make_vec(env_id, num_envs=2, pool_size=POOL)
    assert isinstance(env, CoreVectorEnv) and env.world.name == world
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert all(10_000 <= s < 10_000 + POOL for s in info["instance_seed"])
    with pytest.raises(ValueError, match="world"):
        gym.make_vec(env_id, num_envs=2, world="luca")
    assert isinstance(gym.make_vec("luca_gym/Luca-v0", num_envs=2, pool_size=4, tier="easy"), LucaVectorEnv)


def _random_actions(env, rng):
    actions = env.action_space.sample()
    actions["kind"] = rng.choice([0, 0, 1, 2], size=env.num_envs)  # intervene mostly, so sessions run a while
    return actions


@pytest.mark.parametrize("autoreset_mode", ["next_step", "same_step"])
def test_rows_are_the_single_envs_sessions_through_autoresets(autoreset_mode):
    env = CoreVectorEnv(B, world="dag", pool_size=POOL, autoreset_mode=autoreset_mode, **DAG)
    env.action_space.seed(1)
    rng = np.random.default_rng(2)
    singles = [CoreEnv("dag", **DAG) for _ in range(B)]
    obs, info = env.reset(seed=5)
    for i, single in enumerate(singles):
        first, _ = single.reset(options={"instance_seed": int(info["instance_seed"][i])})
        for key in first:
            np.testing.assert_array_equal(obs[key][i], first[key])
    ended_rows, pending, compiled = 0, np.zeros(B, bool), None
    for _ in range(25):
        actions = _random_actions(env, rng)
        obs, reward, terminated, truncated, info = env.step(actions)
        compiled = compiled or core_vector._step._cache_size()
        for i, single in enumerate(singles):
            if pending[i]:  # next_step: this step opened a new session and ignored the action
                assert reward[i] == 0 and not terminated[i] and info["error_code"][i] == 0
                first, _ = single.reset(options={"instance_seed": int(env.instance_seeds[i])})
                expected = first
            else:
                row = {key: np.asarray(value)[i] for key, value in actions.items()}
                expected, r, term, trunc, single_info = single.step(row)
                assert (reward[i], terminated[i], truncated[i]) == (np.float32(r), term, trunc)
                assert info["error_code"][i] == single_info["error_code"]
                if term or trunc:
                    ended_rows += 1
                    assert info["_scores"][i] and info["scores"][i] == single_info["scores"]
                    assert info["instance_seed"][i] == single.instance_seed
                    if autoreset_mode == "same_step":
                        for key in expected:
                            np.testing.assert_array_equal(info["final_obs"][key][i], expected[key])
                        expected, _ = single.reset(options={"instance_seed": int(env.instance_seeds[i])})
            for key in expected:
                np.testing.assert_array_equal(obs[key][i], expected[key])
        pending = (terminated | truncated) if autoreset_mode == "next_step" else np.zeros(B, bool)
    assert ended_rows >= 3, "the rollout must end sessions for the autoreset to be checked"
    assert core_vector._step._cache_size() == compiled, "one compiled step serves every instance and autoreset"


def test_reset_replays_and_pins_instances():
    env = CoreVectorEnv(B, world="tracking", instances="fresh", generation_batch=4)
    first = env.reset(seed=3)
    again = env.reset(seed=3)
    np.testing.assert_array_equal(first[1]["instance_seed"], again[1]["instance_seed"])
    np.testing.assert_array_equal(first[0], again[0])
    assert len(set(first[1]["instance_seed"].tolist())) == B and min(first[1]["instance_seed"]) >= 10_000
    obs, info = env.reset(options={"instance_seeds": [4, 4, 9]})
    single = CoreEnv("tracking")
    np.testing.assert_array_equal(obs[1], single.reset(options={"instance_seed": 4})[0])
    np.testing.assert_array_equal(info["instance_seed"], [4, 4, 9])
    with pytest.raises(ValueError, match="instance_seeds"):
        env.reset(options={"instance_seeds": [1, 2]})
    with pytest.raises(ValueError, match="instances"):
        CoreVectorEnv(B, world="tracking", instances="stale")


def test_an_action_outside_the_space_raises_and_changes_nothing():
    env = CoreVectorEnv(2, world="dag", pool_size=POOL, **DAG)
    env.reset(seed=0)
    before = jax.device_get(env.state)
    for bad in ({"kind": np.array([0, 7]), "node": np.array([0, 0]), "adjacency": np.zeros((2, 3, 3), np.int8)},
                {"kind": np.array([0, 0])}, "intervene", None):
        with pytest.raises(ValueError, match="actions"):
            env.step(bad)
    for a, b in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(jax.device_get(env.state))):
        np.testing.assert_array_equal(a, b)
