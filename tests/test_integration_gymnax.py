"""The gymnax 1.0 interface (:mod:`luca_gym.integrations.gymnax`) over LUCA
and dag: shapes and types, autoreset with ``info["final_observation"]``,
jit/vmap over keys and params, determinism, no recompile per pool, the
benchmark's purejaxrl-style PPO running a few updates, clear errors, and no
import of gymnax."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym.integrations import gymnax

pytestmark = pytest.mark.xdist_group("gymnax")

POOL = range(10_000, 10_008)  # small training pools: generating 1024 instances is the benchmark's business
NUM_ENVS = 4
WORLDS = ("luca", "dag")


class World:
    """One world's env, params and its jitted, vmapped reset and step."""

    def __init__(self, name):
        self.env, self.params = gymnax.make(name, instance_seeds=POOL)
        self.reset = jax.jit(jax.vmap(self.env.reset, in_axes=(0, None)))
        self.step = jax.jit(jax.vmap(self.env.step, in_axes=(0, 0, 0, None)))


@pytest.fixture(scope="module")
def made():
    return {name: World(name) for name in WORLDS}


def legal(key, mask):
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


@pytest.mark.parametrize("name", WORLDS)
def test_interface_shapes_and_types(made, name):
    w = made[name]
    env, params = w.env, w.params
    space, actions = env.observation_space(params), env.action_space(params)
    assert actions.n == env.num_actions == env.codec.num_actions and actions.shape == ()
    assert space.shape == (env.codec.observation_size,)
    sample = actions.sample(jax.random.key(0))
    assert sample.shape == () and sample.dtype == jnp.int32 and bool(actions.contains(sample))
    assert not bool(actions.contains(env.num_actions)) and not bool(actions.contains(-1))
    assert space.sample(jax.random.key(1)).shape == space.shape
    assert env.default_params is params and isinstance(params, gymnax.EnvParams)

    obs, state = env.reset(jax.random.key(2), params)
    assert obs.shape == space.shape and obs.dtype == jnp.float32 and bool(space.contains(obs))
    mask = env.action_mask(state, params)
    assert mask.shape == (env.num_actions,) and mask.dtype == jnp.bool_ and bool(mask.any())
    assert int(state.time) == 0
    out = env.step(jax.random.key(3), state, legal(jax.random.key(4), mask), params)
    assert len(out) == 6
    obs2, state2, reward, terminated, truncated, info = out
    assert obs2.shape == space.shape and obs2.dtype == jnp.float32
    assert isinstance(state2, gymnax.EnvState)
    for value, dtype in ((reward, jnp.float32), (terminated, jnp.bool_), (truncated, jnp.bool_)):
        assert value.shape == () and value.dtype == dtype
    for key in ("terminated", "truncated", "final_observation", "action_mask", "score", env.codec.headline,
                "return", "length", "error"):
        assert key in info
    assert info["final_observation"].shape == space.shape
    assert np.array_equal(info["action_mask"], env.action_mask(state2, params))


@pytest.mark.parametrize("name", WORLDS)
def test_autoreset_reports_the_terminal_observation(made, name):
    """Random legal actions until a session ends: before, final_observation is
    the returned observation; at the end, it is the codec's own observation
    after that action, while the returned obs and state are a new session's
    opening, and the info's score is the ended session's return."""
    w = made[name]
    env, params, codec = w.env, w.params, w.env.codec
    _, state = env.reset(jax.random.key(5), params)
    total, key = 0.0, jax.random.key(6)
    for _ in range(400):
        key, k_act, k_step = jax.random.split(key, 3)
        action = legal(k_act, env.action_mask(state, params))
        new_obs, new_state, reward, terminated, truncated, info = env.step(k_step, state, action, params)
        total += float(reward)
        if not bool(terminated | truncated):
            assert np.array_equal(info["final_observation"], new_obs)
            assert int(new_state.time) == int(state.time) + 1
            state = new_state
            continue
        _, terminal_obs, *_ = codec.step(state.flat.session, action)
        assert np.array_equal(info["final_observation"], terminal_obs)
        assert not np.array_equal(info["final_observation"], new_obs)
        opening = np.flatnonzero(np.asarray(params.pool.seeds) == int(new_state.flat.seed))[0]
        assert np.array_equal(new_obs, params.pool.obs[opening])
        assert np.array_equal(info["action_mask"], params.pool.mask[opening])
        assert int(new_state.time) == 0 and float(new_state.flat.episode_return) == 0.0
        assert np.isclose(float(info["score"]), total, atol=1e-5) and np.isclose(float(info["return"]), total, atol=1e-5)
        assert bool(info["terminated"]) == bool(terminated) and bool(info["truncated"]) == bool(truncated)
        break
    else:
        pytest.fail("no session ended within 400 legal actions")


@pytest.mark.parametrize("name", WORLDS)
def test_vmap_jit_and_determinism(made, name):
    w = made[name]
    keys = jax.random.split(jax.random.key(7), NUM_ENVS)
    obs, state = w.reset(keys, w.params)
    assert obs.shape == (NUM_ENVS, w.env.codec.observation_size)
    actions = jax.vmap(legal)(jax.random.split(jax.random.key(8), NUM_ENVS), state.action_mask)
    first = w.step(keys, state, actions, w.params)
    again = w.step(keys, *w.reset(keys, w.params)[1:], actions, w.params)
    for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(again)):
        assert np.array_equal(a, b)
    assert first[2].shape == (NUM_ENVS,) and first[5]["final_observation"].shape == obs.shape
    other = w.reset(jax.random.split(jax.random.key(9), NUM_ENVS), w.params)[1]
    seeds = np.concatenate([np.asarray(state.flat.seed), np.asarray(other.flat.seed)])
    assert set(seeds) <= set(POOL) and len(set(seeds)) > 1  # keys draw different instances


def test_one_compile_serves_every_pool_of_a_size(made):
    """Params are traced: a pool on other seeds of the same size reuses the
    compiled step; per-instance params vmap over seeds, one session each."""
    w = made["dag"]
    env = w.env
    obs, state = env.reset(jax.random.key(0), w.params)
    env.step(jax.random.key(1), state, 0, w.params)
    compiled = gymnax._step._cache_size()
    held_out = env.make_params(range(len(POOL)))  # seeds 0-7
    obs, state = env.reset(jax.random.key(0), held_out)
    assert int(state.flat.seed) in range(len(POOL))
    env.step(jax.random.key(1), state, 0, held_out)
    assert gymnax._step._cache_size() == compiled

    seeds = [3, 1, 4, 15]
    per = env.per_instance_params(seeds)
    keys = jax.random.split(jax.random.key(2), len(seeds))
    _, state = jax.vmap(env.reset, in_axes=(0, 0))(keys, per)
    assert list(np.asarray(state.flat.seed)) == seeds
    _, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, 0))(keys, state, jnp.full(len(seeds), env.num_actions - 1), per)
    assert list(np.asarray(state.flat.seed)) == seeds  # an autoreset reopens the same instance


def _benchmark():
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gymnax_ppo.py"
    spec = importlib.util.spec_from_file_location("gymnax_ppo_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", WORLDS)
def test_a_purejaxrl_style_ppo_loop_trains(made, name):
    """The benchmark's PPO (written against the gymnax interface only): two
    updates run, its loss and training score are finite, the weights move,
    and the greedy evaluation on held-out seeds gives a score in [0, 1]."""
    ppo = _benchmark()
    w = made[name]
    config = {"LR": 1e-3, "NUM_ENVS": NUM_ENVS, "NUM_STEPS": 8, "TOTAL_TIMESTEPS": 2 * NUM_ENVS * 8, "UPDATE_EPOCHS": 1,
              "NUM_MINIBATCHES": 2, "GAMMA": 1.0, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
              "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ANNEAL_LR": True}
    init, update, num_updates = ppo.make_train(config, w.env, w.params)
    assert num_updates == 2
    runner = jax.jit(init)(jax.random.key(0))
    before = runner[0]
    update = jax.jit(update)
    for _ in range(num_updates):
        runner, metrics = update(runner, None)
        assert np.isfinite(float(metrics["loss"]))
        assert int(metrics["episodes"]) == 0 or 0.0 <= float(metrics["mean_score"]) <= 1.0
    moved = jax.tree_util.tree_map(lambda a, b: bool(jnp.any(a != b)), before, runner[0])
    assert any(jax.tree_util.tree_leaves(moved))
    if name == "dag":  # the evaluation is one more compiled program: once is enough
        score, ended = ppo.evaluate(w.env, runner[0], [0, 1], max_steps=64)
        assert ended == 2 and 0.0 <= score <= 1.0


def test_bad_inputs_give_clear_errors(made):
    w = made["luca"]
    env, params = w.env, w.params
    with pytest.raises(ValueError, match="world: 'nowhere' unknown"):
        gymnax.make("nowhere")
    with pytest.raises(ValueError, match="no flat codec"):
        gymnax.make("tracking")  # (equation has one since its batched world)
    with pytest.raises(ValueError, match="tier"):
        gymnax.make("luca", tier="impossible")
    with pytest.raises(ValueError, match="seeds"):
        gymnax.make("dag", instance_seeds=[-1])
    obs, state = env.reset(jax.random.key(0), params)
    for action in (env.num_actions, -1, 2.0, True, "1", [0, 1]):
        with pytest.raises(ValueError, match="action"):
            env.step(jax.random.key(1), state, action, params)
    with pytest.raises(ValueError, match="action: a float32"):
        jax.vmap(env.step, in_axes=(0, 0, 0, None))(jax.random.split(jax.random.key(1), 1),
                                                    jax.tree_util.tree_map(lambda x: x[None], state),
                                                    jnp.zeros(1, jnp.float32), params)
    with pytest.raises(ValueError, match="params"):
        env.step(jax.random.key(1), state, 0, {"pool": params.pool})
    with pytest.raises(ValueError, match="params: made for"):
        env.reset(jax.random.key(1), made["dag"].params)
    with pytest.raises(ValueError, match="state"):
        env.step(jax.random.key(1), obs, 0, params)

    # A traced action outside [0, K) reaches LUCA's core, which refuses it at no cost: no reward, the same legal actions
    # (the observation reports the refusal).
    keys = jax.random.split(jax.random.key(1), NUM_ENVS)
    obs, state = w.reset(keys, params)
    new_obs, new_state, reward, terminated, truncated, info = w.step(keys, state, jnp.full(NUM_ENVS, env.num_actions + 3), params)
    assert np.all(np.asarray(info["error"]) != 0) and not np.any(reward) and not np.any(terminated | truncated)
    assert np.array_equal(new_state.action_mask, state.action_mask)


def test_gymnax_is_not_imported(made):
    assert "gymnax" not in sys.modules
