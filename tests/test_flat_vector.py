"""The batched flat Gymnasium vector env (luca_gym.envs.flat_vector) that
``gym.make_vec`` of a flat id builds, and the curriculum over it: the JAX
batch on a pool, Gymnasium's same-step autoreset, hostile actions refused on
the host with nothing moved. Easy healthy N=20 (programs other tests compile),
a pool of 8, three envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from luca_gym.curriculum import Curriculum, CurriculumVectorWrapper
from luca_gym.envs.flat_vector import FlatVectorEnv

SETTINGS = dict(tier="easy", mode="healthy", n_genes=20, pool_size=8)


def legal(info, rng) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(row)) for row in info["action_mask"]])


@pytest.fixture(scope="module")
def env():
    return gym.make_vec("luca_gym/LucaFlat-v0", num_envs=3, **SETTINGS)


def test_make_vec_of_the_flat_id_is_the_jax_batch(env):
    assert isinstance(env, FlatVectorEnv) and env.num_envs == 3
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    single = gym.make("luca_gym/LucaFlat-v0", tier="easy", mode="healthy", n_genes=20)
    assert env.single_observation_space.shape == single.observation_space.shape
    assert env.single_action_space.n == single.action_space.n
    sync = gym.make_vec("luca_gym/LucaFlat-v0", num_envs=2, vectorization_mode="sync", tier="easy")
    assert isinstance(sync, gym.vector.SyncVectorEnv)  # every option of the single env stays one word away


def test_sessions_run_autoreset_on_the_pool_and_report_their_scores(env):
    obs, info = env.reset(seed=0)
    again, info_again = env.reset(seed=0)
    np.testing.assert_array_equal(obs, again)  # a seed gives the same sessions
    assert set(info["instance_seed"]) <= set(range(10_000, 10_008))
    assert env.observation_space.contains(obs)
    pool_obs, pool_seeds = np.asarray(env.pool.obs), np.asarray(env.pool.seeds)
    rng, ended, returns = np.random.default_rng(0), 0, np.zeros(3)
    for _ in range(120):
        obs, reward, terminated, truncated, info = env.step(legal(info, rng))
        returns += reward
        done = terminated | truncated
        assert (info["error"] == 0).all()  # legal actions are never refused
        if done.any():
            ended += int(done.sum())
            assert (info["_score"] == done).all() and (info["_final_obs"] == done).all()
            np.testing.assert_allclose(info["score"][done], returns[done], atol=1e-5)  # unshaped: return == score
            np.testing.assert_allclose(info["composite"], info["score"])  # also under the headline's name
            for i in np.flatnonzero(done):  # the step shows the new session's opening (same-step autoreset)
                np.testing.assert_array_equal(obs[i], pool_obs[pool_seeds == info["instance_seed"][i]][0])
                assert not np.array_equal(info["final_obs"][i], obs[i])
            returns[done] = 0.0
    assert ended >= 3


@pytest.mark.parametrize("actions, words", [
    (np.array([0, 0]), "shape"),
    (np.array([0, 0, 10**6]), "actions[2]: 1000000 not allowed"),
    (np.array([0, -1, 0]), "actions[1]: -1 not allowed"),
    (np.array([0.0, 1.0, 2.0]), "not allowed"),
    ("0 0 0", "not allowed"),
    (None, "not allowed"),
])
def test_bad_actions_are_refused_on_the_host_and_change_nothing(actions, words):
    a = FlatVectorEnv(3, world="luca", **SETTINGS)
    b = FlatVectorEnv(3, world="luca", **SETTINGS)
    _, info = a.reset(seed=3)
    b.reset(seed=3)
    with pytest.raises(ValueError) as error:
        a.step(actions)
    assert words in str(error.value)
    first = legal(info, np.random.default_rng(1))
    for x, y in zip(a.step(first), b.step(first)):
        if isinstance(x, dict):
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        else:
            np.testing.assert_array_equal(x, y)


def test_bad_settings_name_what_is_allowed():
    with pytest.raises(ValueError, match="render_mode.*vectorization_mode='sync'"):
        gym.make_vec("luca_gym/LucaFlat-v0", num_envs=2, render_mode="ansi", **SETTINGS)
    with pytest.raises(ValueError, match="^tier"):
        FlatVectorEnv(2, world="luca", tier="extreme")
    with pytest.raises(ValueError, match="pool_size and pool_seeds"):
        FlatVectorEnv(2, world="luca", pool_size=4, pool_seeds=[1, 2])
    with pytest.raises(ValueError, match="num_envs"):
        FlatVectorEnv(0, world="luca", **SETTINGS)
    with pytest.raises(RuntimeError, match="reset"):
        FlatVectorEnv(2, world="luca", **SETTINGS).step(np.zeros(2, int))
    with pytest.raises(ValueError, match="options"):
        FlatVectorEnv(2, world="luca", **SETTINGS).reset(options={"organism_seeds": [0, 1]})


def test_the_discovery_worlds_flat_ids_batch_too():
    env = gym.make_vec("luca_gym/DagDiscoveryFlat-v0", num_envs=2, pool_size=4)
    assert isinstance(env, FlatVectorEnv) and env.world.name == "dag"
    obs, info = env.reset(seed=1)
    assert obs.shape == (2, env.observation_size) and info["action_mask"].shape == (2, env.num_actions)


def test_the_curriculum_follows_a_vector_env_and_rebuilds_it_at_reset():
    built = []

    def make(num_envs, **settings):
        built.append(settings["budget"])
        return FlatVectorEnv(num_envs, world="luca", **settings)

    c = Curriculum({"budget": [None, 6]}, world="luca", defaults={"tier": "easy", "mode": "healthy", "n_genes": 20, "pool_size": 8},
                   advance_at=1.0, success_score=-1.0, window=4)  # every episode succeeds: four episodes a level
    env = CurriculumVectorWrapper(c, make, num_envs=3)
    obs, info = env.reset(seed=0)
    assert info["curriculum_level"] == 0 and not env.level_changed
    while not env.level_changed:  # "end" (the last legal action) ends every session at once
        obs, reward, terminated, truncated, info = env.step(np.array([np.flatnonzero(r)[-1] for r in info["action_mask"]]))
    assert env.env.env.params.budget != 6  # the batch changes only at the next reset
    obs, info = env.reset(seed=1)
    assert info["curriculum_level"] == 1 and env.env.env.params.budget == 6 and built == [None, 6]
    assert env.observation_space.contains(obs)
    by_id = CurriculumVectorWrapper(Curriculum({"budget": [6]}, world="luca", defaults={"tier": "easy", "pool_size": 8}),
                                    "luca_gym/LucaFlat-v0", num_envs=2)
    assert isinstance(by_id.env, FlatVectorEnv) and by_id.env.env.params.budget == 6
    with pytest.raises(ValueError, match="num_envs"):
        CurriculumVectorWrapper(c, make, num_envs=0)
    with pytest.raises(ValueError, match="curriculum"):
        CurriculumVectorWrapper({"budget": [6]}, make, num_envs=2)
