"""The flat functional env (:mod:`luca_gym.functional`): pools of training
organisms, autoreset inside the jit, episode statistics that equal the core's
composite, rollouts that do not recompile when the policy's weights change,
and masks that a masked policy never leaves.

One small pool (N=20, 16 organisms) and one compiled rollout shape serve the
whole module.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym.testing import count_traces
from luca_gym.worlds.luca import core, generator as world
from luca_gym import functional as F
from luca_gym.worlds.luca.functional import LucaFlatCodec
from luca_gym.worlds.luca.core import flat

# One worker runs the module: its module fixtures (sessions, a trained run) are built once, not once per worker.
pytestmark = pytest.mark.xdist_group("functional")

NUM_ENVS, NUM_STEPS = 16, 48  # 48 > the longest session (budget 31 + 2 tasks x 2 + 3 free calls)


def linear_policy(params, key, obs, mask):
    """Samples from softmax(obs @ w) over the legal actions; w = 0 is the
    masked uniform random policy."""
    return jax.random.categorical(key, jnp.where(mask, obs @ params["w"], -jnp.inf)).astype(jnp.int32)


@pytest.fixture(scope="module")
def env():
    return F.make_env("easy", 20, "healthy", world="luca")


@pytest.fixture(scope="module")
def pool(env):
    return F.make_pool(env, F.training_seeds(16))


@pytest.fixture(scope="module")
def organisms():
    """The pool's organisms as world.generate makes them (rows 10_000 ..)."""
    return world.generate(F.training_seeds(16), "easy", 20, "healthy")


def organism(organisms, seed: int):
    return jax.tree_util.tree_map(lambda x: x[seed - F.TRAINING_SEED_START], organisms)


@pytest.fixture(scope="module")
def weights(env):
    return {"w": jnp.zeros((env.observation_size, env.num_actions), jnp.float32)}


@pytest.fixture(scope="module")
def random_rollout(env, pool, weights):
    """The masked random policy's rollout with its trajectories, as numpy."""
    out = F.flat_rollout(linear_policy, weights, jax.random.PRNGKey(0), env, pool, NUM_ENVS, NUM_STEPS, trajectories=True)
    return jax.device_get(out)


def test_training_pool_is_disjoint_from_the_evaluation_seeds(env, pool):
    seeds = F.training_seeds()
    assert seeds[0] == F.TRAINING_SEED_START == 10_000 and seeds.size == F.DEFAULT_POOL_SIZE
    assert not set(seeds.tolist()) & set(F.EVAL_SEEDS)
    assert np.asarray(pool.seeds).tolist() == list(range(10_000, 10_016))
    assert pool.size == 16 and pool.env == env


def test_pool_holds_each_organisms_opened_session(env, pool, organisms):
    seed = 10_003
    obs, mask, state = flat.reset(core.noise_key(seed, "easy", 20), organism(organisms, seed), env.params, env.analyst)
    i = seed - 10_000
    np.testing.assert_array_equal(np.asarray(pool.obs[i]), np.asarray(obs))
    np.testing.assert_array_equal(np.asarray(pool.mask[i]), np.asarray(mask))
    for got, want in zip(jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda x: x[i], pool.start)), jax.tree_util.tree_leaves(state)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_autoreset_opens_a_new_pool_session_inside_the_jit(pool, random_rollout):
    t = random_rollout["trajectory"]
    done = t["done"][:-1]
    assert done.sum() >= NUM_ENVS  # most envs end a session (the random policy ends early)
    steps, envs = np.nonzero(done)
    seeds = np.asarray(pool.seeds)
    pool_obs, pool_mask = np.asarray(pool.obs), np.asarray(pool.mask)
    new_seeds = t["seed"][steps + 1, envs]
    assert set(new_seeds.tolist()) <= set(seeds.tolist())
    assert len(set(new_seeds.tolist())) > 1  # drawn from the pool, not one cached organism
    rows = np.searchsorted(seeds, new_seeds)
    # The step after an ending sees the new session's opening observation and mask ...
    np.testing.assert_array_equal(t["obs"][steps + 1, envs], pool_obs[rows])
    np.testing.assert_array_equal(t["mask"][steps + 1, envs], pool_mask[rows])
    # ... and counts from the new session's first call.
    assert (t["length"][steps + 1, envs] == 1).all()
    running = ~t["done"][:-1]
    assert (t["length"][1:][running] == t["length"][:-1][running] + 1).all()


def test_episode_return_equals_the_core_composite(env, organisms, random_rollout):
    t = random_rollout["trajectory"]
    done = t["done"]
    # No shaping: the undiscounted return is the composite score, paid as the session goes.
    np.testing.assert_allclose(t["return"][done], t["composite"][done], atol=1e-6)
    assert (t["composite"][done] > 0).any()
    assert random_rollout["episodes"] == done.sum()
    np.testing.assert_allclose(random_rollout["mean_composite"], t["composite"][done].mean(), rtol=1e-5)
    np.testing.assert_allclose(random_rollout["mean_return"], t["return"][done].mean(), rtol=1e-5)
    # Replay one env's first session on the core directly, from its seed and episode key: the same composite.
    b = int(np.argmax(done.any(axis=0)))
    end = int(np.argmax(done[:, b]))
    seed = int(t["seed"][end, b])
    _, _, state = flat.reset(core.noise_key(seed, "easy", 20), organism(organisms, seed), env.params, env.analyst)
    state = env.renew(state, t["episode_key"][end, b])
    for k in range(end + 1):
        _, _, state, _, terminated, truncated, _ = flat.step(state, jnp.int32(t["action"][k, b]), env.params, env.analyst)
    assert bool(terminated | truncated)
    assert int(t["length"][end, b]) == end + 1
    composite = float(core.session_scores(state, env.params, network=False)["composite"])
    np.testing.assert_allclose(t["composite"][end, b], composite, atol=1e-6)


def test_a_pool_instance_met_twice_is_met_with_fresh_noise(env, pool):
    keys = jax.random.split(jax.random.PRNGKey(5), 64)
    states, obs, masks = jax.vmap(lambda k: F.reset(k, env, pool))(keys)
    seeds = np.asarray(states.seed)
    first = int(np.argmax([np.sum(seeds == s) > 1 for s in seeds]))
    second = int(np.flatnonzero(seeds == seeds[first])[1])  # two draws of one instance
    np.testing.assert_array_equal(np.asarray(obs[first]), np.asarray(obs[second]))  # the same opening ...
    assert not np.array_equal(np.asarray(states.episode_key[first]), np.asarray(states.episode_key[second]))
    action = jnp.int32(int(np.argmax(np.asarray(masks[first][: flat.layout(env.params).targets]))))  # an experiment
    step = jax.jit(F.step, static_argnames="env")
    after = [np.asarray(step(keys[i], jax.tree_util.tree_map(lambda x: x[i], states), action, env, pool)[1])
             for i in (first, second)]
    assert not np.array_equal(after[0], after[1])  # ... and the same experiment measured with other noise
    again = np.asarray(step(keys[first], jax.tree_util.tree_map(lambda x: x[first], states), action, env, pool)[1])
    np.testing.assert_array_equal(again, after[0])  # one key, one session


def test_masked_policy_never_picks_a_masked_action(random_rollout):
    t = random_rollout["trajectory"]
    chosen = np.take_along_axis(t["mask"], t["action"][..., None], axis=-1)[..., 0]
    assert chosen.all()
    assert (t["error"] == 0).all()  # and so the core refuses nothing


def test_masked_random_draws_legal_actions_only():
    mask = np.zeros((256, 10), bool)
    mask[:, [1, 4, 7]] = True
    mask[:128, 4] = False
    actions = np.asarray(F.masked_random(None, jax.random.PRNGKey(3), jnp.zeros((256, 5)), jnp.asarray(mask)))
    assert mask[np.arange(256), actions].all()
    assert set(actions.tolist()) == {1, 4, 7}


def test_new_weights_do_not_recompile_the_rollout(env, pool, weights, random_rollout):
    others = {"w": jax.random.normal(jax.random.PRNGKey(1), weights["w"].shape) * 5.0}
    key = jax.random.PRNGKey(0)
    with count_traces() as traced:
        out = F.flat_rollout(linear_policy, others, key, env, pool, NUM_ENVS, NUM_STEPS, trajectories=True)
    assert "_flat_rollout" not in traced
    # The weights did reach the policy: the same key gives other actions.
    assert (np.asarray(out["trajectory"]["action"]) != random_rollout["trajectory"]["action"]).any()


def test_a_pool_made_for_another_env_is_refused(pool, weights):
    other = F.make_env("easy", 20, "healthy", world="luca", budget=12)
    with pytest.raises(ValueError, match="pool: opened for"):
        F.flat_rollout(linear_policy, weights, jax.random.PRNGKey(0), other, pool, NUM_ENVS, NUM_STEPS)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda env: F.make_pool(env, [2**31 - 1]), ["seeds", str(2**31 - 1), "0..2147483646"]),
        (lambda env: F.make_pool(env, []), ["seeds", "empty"]),
        (lambda env: F.make_pool(env, [-1]), ["seeds", "-1"]),
        (lambda env: F.make_pool("easy", None), ["env", "flat codec"]),
        (lambda env: LucaFlatCodec(env.params, "extreme"), ["tier", "'extreme'"]),
        (lambda env: LucaFlatCodec(env.params, "easy", "oracle"), ["analyst", "'oracle'", "logit-additive"]),
        (lambda env: F.training_seeds(0), ["size", "0", "positive integer"]),
    ],
)
def test_bad_arguments_are_named(env, call, words):
    with pytest.raises(ValueError) as err:
        call(env)
    for w in words:
        assert w in str(err.value)


def test_bad_rollout_sizes_are_named(env, pool, weights):
    with pytest.raises(ValueError, match="num_envs: 0"):
        F.flat_rollout(linear_policy, weights, jax.random.PRNGKey(0), env, pool, 0, NUM_STEPS)
    with pytest.raises(ValueError, match="num_steps: -1"):
        F.flat_rollout(linear_policy, weights, jax.random.PRNGKey(0), env, pool, NUM_ENVS, -1)
