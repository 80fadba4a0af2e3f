"""The batched equation env: its family against the host world's grammar and
evaluator, instances as pure functions of a key, one compile for every
instance, the rules (queries, proposals, the budget, refusals), the
baselines' floor and ceiling, and the flat codec under the functional env's
checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luca_gym.protocol import World
from luca_gym.testing import _check_flat
from luca_gym.worlds.equation import batched as B
from luca_gym.worlds.equation import grammar
from luca_gym.worlds.equation.formula import parse

CONFIG = B.BatchedConfig(n_variables=2, family_size=64)  # simple, 2 variables, grid 4 (G = 16), budget 10: K = 80
G, F, K = CONFIG.num_query_points, CONFIG.family_size, CONFIG.num_actions
EPISODES = 300
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)


@pytest.fixture(scope="module")
def params():
    return B.default_params(CONFIG)


@pytest.fixture(scope="module")
def step_env():
    return jax.jit(B.step_env)


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def opened(params, hidden: int):
    return B.open_session(jnp.int32(hidden), params)[1]


# -- settings ---------------------------------------------------------------------------------
@pytest.mark.parametrize("change, match", [
    ({"family_size": 1}, "family_size: 1 not allowed"),
    ({"family_size": B.MAX_FAMILY + 1}, "family_size"),
    ({"family_size": 8.0}, "family_size: 8.0 not allowed"),
    ({"grid": 1}, "grid: 1 not allowed"),
    ({"grid": True}, "grid: True not allowed"),
    ({"n_variables": 5, "n_distractors": 4, "grid": 3}, r"grid: 3 not allowed with 9 inputs .* grid 2\.\.2"),
    ({"complexity": "hard"}, "complexity: 'hard' not allowed"),
    ({"budget": 0}, "budget: 0 not allowed"),
    ({"proposals": "sometimes"}, "proposals: 'sometimes' not allowed"),
])
def test_config_refuses_bad_settings_by_name(change, match):
    with pytest.raises(ValueError, match=match):
        B.BatchedConfig(**change)


@pytest.mark.parametrize("name, value", [("noise", -0.1), ("noise", float("nan")), ("query_cost", "1"), ("query_cost", True)])
def test_params_refuse_bad_noise_and_cost(params, name, value):
    with pytest.raises(ValueError, match=f"{name}: .* not allowed; a finite number >= 0"):
        B.default_params(CONFIG, **{name: value})


# -- the family ---------------------------------------------------------------------------------
def test_the_family_is_distinct_formulas_of_the_host_grammar_tabulated_by_the_host_evaluator(params):
    """Each candidate is a host formula: its text, parsed by the host parser
    and run by the host evaluator, gives the table. No two candidates agree
    on the check points. A smaller family is the start of a larger one."""
    fam = B.family(CONFIG)
    points = B.query_points(fam.grid)
    evaluate = grammar.x64(lambda program, x: np.asarray(jax.jit(grammar.evaluate)(program, x)))
    for i in range(0, F, 8):
        text = B.formula(CONFIG, i)
        program = parse(text, B.input_names(CONFIG))
        np.testing.assert_allclose(evaluate(program, points), fam.values[i], rtol=1e-12, err_msg=text)
        np.testing.assert_allclose(evaluate(program, fam.check_x), fam.check[i], rtol=1e-12, err_msg=text)
    check = np.asarray(params.check, np.float64)
    close = np.abs(check[:, None] - check[None]) <= 1e-6 * np.maximum(np.abs(check[None]), 1e-12)
    assert (close.all(axis=2) == np.eye(F, dtype=bool)).all()
    smaller = B.family(B.BatchedConfig(n_variables=2, family_size=32))
    np.testing.assert_array_equal(smaller.values, fam.values[:32])
    assert len({B.formula(CONFIG, i) for i in range(F)}) == F


def test_a_grammar_smaller_than_the_family_is_refused():
    with pytest.raises(ValueError, match=r"family_size: 64 not allowed .* the grammar gave 36 distinct formulas .* at most 36"):
        B.family(B.BatchedConfig(n_variables=1, family_size=64))  # simple, one variable: 9 constants x 4 exponents


def test_no_two_inputs_share_a_query_value():
    grid = B.query_grid(5, 4)
    assert grid.shape == (5, 4) and (grid > 1.0).all() and (grid < 5.0).all()
    assert len(np.unique(grid)) == grid.size and (np.diff(grid, axis=1) > 0).all()


# -- instances from keys ------------------------------------------------------------------------
def test_the_same_key_gives_the_same_instance_and_episode(params):
    key = jax.random.PRNGKey(11)
    assert same(B.reset(key, params), B.reset(key, params))
    first, again = (jax.device_get(B.play(B.eliminate_policy, params, jax.random.PRNGKey(5), 64)) for _ in range(2))
    assert same(first, again)
    hidden = np.asarray(jax.vmap(lambda k: B.reset(k, params)[1].hidden)(jax.random.split(key, 256)))
    assert len(set(hidden.tolist())) > F // 2 and hidden.min() >= 0 and hidden.max() < F
    codec = B.flat_codec(n_variables=2, family_size=F)
    seeds = [0, 7, 12345]
    from_seeds = np.asarray(codec.instances(seeds)["hidden"])
    assert from_seeds.tolist() == [int(B.reset(jax.random.PRNGKey(s), params)[1].hidden) for s in seeds]


def test_the_vmapped_step_and_reset_compile_once_for_every_instance_noise_and_cost(params):
    traces = []

    def counted_step(key, state, action, params_):
        traces.append("step")  # runs once per trace, never per call
        return B.step(key, state, action, params_)

    def counted_reset(key, params_):
        traces.append("reset")
        return B.reset(key, params_)

    step = jax.jit(jax.vmap(counted_step, (0, 0, 0, None)))
    reset = jax.jit(jax.vmap(counted_reset, (0, None)))
    for i, (noise, cost) in enumerate([(0.0, 0.0), (0.05, 0.1), (0.2, 0.01)]):
        p = B.default_params(CONFIG, noise=noise, query_cost=cost)
        keys = jax.random.split(jax.random.PRNGKey(i), 256)
        obs, state = reset(keys, p)
        for t in range(3):
            actions = jax.random.randint(jax.random.PRNGKey(100 * i + t), (256,), -2, K + 2)
            obs, state, reward, done, info = step(jax.random.split(keys[t], 256), state, actions, p)
        assert obs.shape == (256, CONFIG.observation_size) and info["mask"].shape == (256, K)
    assert traces == ["reset", "step"]


# -- the rules ----------------------------------------------------------------------------------
def test_a_query_answers_the_table_value_at_the_grid_point(params, step_env):
    state = opened(params, 5)
    obs, new, reward, done, info = step_env(jax.random.PRNGKey(0), state, jnp.int32(6), params)
    point = B.query_points(B.family(CONFIG).grid)[6]
    np.testing.assert_allclose(np.asarray(new.history[0, :2]), point, rtol=1e-6)
    assert float(new.history[0, 2]) == float(params.values[5, 6])
    assert (int(new.queries), int(new.cycles), float(reward), bool(done), int(info["error"])) == (1, 1, 0.0, False, 0)
    assert np.asarray(obs)[-2:].tolist() == [1.0, 1.0] and (np.asarray(obs)[3:-2] == 0).all()


def test_noise_is_relative_gaussian_and_drawn_from_the_key(step_env):
    noisy = B.default_params(CONFIG, noise=0.1)
    state = opened(noisy, 5)
    keys = jax.random.split(jax.random.PRNGKey(3), 2000)
    values = np.asarray(jax.vmap(lambda k: step_env(k, state, jnp.int32(6), noisy)[1].history[0, 2])(keys))
    relative = values / float(noisy.values[5, 6]) - 1.0
    assert abs(relative.mean()) < 0.01 and 0.09 < relative.std() < 0.11
    assert float(step_env(keys[0], state, jnp.int32(6), noisy)[1].history[0, 2]) == values[0]


def test_a_right_proposal_ends_the_episode_solved(params, step_env):
    state = opened(params, 9)
    obs, state, reward, done, info = step_env(jax.random.PRNGKey(0), state, jnp.int32(3), params)  # one query
    obs, state, reward, done, info = step_env(jax.random.PRNGKey(1), state, jnp.int32(G + 9), params)
    assert (float(reward), bool(done), float(info["success"]), int(info["iterations"])) == (1.0, True, 1.0, 1)
    assert not np.asarray(info["mask"]).any()
    guessed = step_env(jax.random.PRNGKey(1), opened(params, 9), jnp.int32(G + 9), params)
    assert int(guessed[4]["iterations"]) == 1  # a right guess before any query counts 1, as in the host world


def test_a_wrong_proposal_takes_a_cycle_and_the_last_one_ends_the_episode(step_env):
    cost = 0.25
    p = B.default_params(CONFIG, query_cost=cost)
    state, total = opened(p, 9), 0.0
    for t in range(CONFIG.budget):  # half queries, half wrong proposals: every one spends a unit of budget
        action = jnp.int32(t % G if t % 2 else G + 10)
        obs, state, reward, done, info = step_env(jax.random.PRNGKey(t), state, action, p)
        total += float(reward)
        assert int(info["error"]) == 0 and not bool(done) and int(state.cycles) == t + 1
    assert int(state.queries) == CONFIG.budget // 2 and total == pytest.approx(-cost * CONFIG.budget)
    mask = np.asarray(info["mask"])
    assert not mask[:G].any() and mask[G:].all()  # the budget is spent: proposals only
    obs, refused, reward, done, info = step_env(jax.random.PRNGKey(99), state, jnp.int32(0), p)
    assert int(info["error"]) == 2 and same(refused, state) and float(reward) == 0.0 and not bool(done)
    obs, end, reward, done, info = step_env(jax.random.PRNGKey(99), state, jnp.int32(G + 10), p)  # the final one, wrong
    assert (bool(done), float(end.success), int(end.iterations), float(reward)) == (True, 0.0, CONFIG.budget, 0.0)


def test_under_final_any_proposal_ends_the_episode(step_env):
    final = B.default_params(B.BatchedConfig(n_variables=2, family_size=F, proposals="final"))
    np.testing.assert_array_equal(final.values, B.default_params(CONFIG).values)  # the same family
    state = step_env(jax.random.PRNGKey(0), opened(final, 9), jnp.int32(1), final)[1]
    obs, end, reward, done, info = step_env(jax.random.PRNGKey(1), state, jnp.int32(G + 10), final)
    assert (bool(done), float(end.success), int(end.iterations), int(end.cycles), float(reward)) == (True, 0.0, 1, 1, 0.0)
    obs, end, reward, done, info = step_env(jax.random.PRNGKey(1), state, jnp.int32(G + 9), final)
    assert (bool(done), float(end.success), float(reward)) == (True, 1.0, 1.0)


@pytest.mark.parametrize("action", [-1, K, K + 7, 2**31 - 1, -(2**31)])
def test_an_action_out_of_range_is_refused_at_no_cost(params, step_env, action):
    state = step_env(jax.random.PRNGKey(0), opened(params, 4), jnp.int32(2), params)[1]
    obs, new, reward, done, info = step_env(jax.random.PRNGKey(1), state, jnp.int32(action), params)
    assert int(info["error"]) == 3 and B.ERRORS[3] == "action out of range"
    assert same(new, state) and float(reward) == 0.0 and not bool(done)
    assert np.array_equal(obs, B.observation(state)) and np.asarray(info["mask"]).all()


def test_after_the_end_every_action_is_refused_and_changes_nothing(params, step_env):
    ended = step_env(jax.random.PRNGKey(0), opened(params, 4), jnp.int32(G + 4), params)[1]
    for action in (0, G + 4, K):
        obs, new, reward, done, info = step_env(jax.random.PRNGKey(1), ended, jnp.int32(action), params)
        assert int(info["error"]) == 1 and same(new, ended) and float(reward) == 0.0 and bool(done)


@PROPERTY
@given(hidden=st.integers(0, F - 1), actions=st.lists(st.integers(-(2**31), 2**31 - 1) | st.integers(-3, K + 3), max_size=14))
def test_any_action_sequence_keeps_the_rules(params, step_env, hidden, actions):
    """Whatever an agent sends: a legal action (inside, allowed by the mask)
    is taken; any other is refused, changing nothing and earning nothing;
    the return is the success (no cost)."""
    state, total = opened(params, hidden), 0.0
    for t, action in enumerate(actions):
        mask = np.asarray(B.action_mask(state, params))
        obs, new, reward, done, info = step_env(jax.random.PRNGKey(t), state, jnp.int32(action), params)
        legal = 0 <= action < K and mask[action]
        assert (int(info["error"]) == 0) == legal
        if not legal:
            assert same(new, state) and float(reward) == 0.0
        total += float(reward)
        state = new
    assert total == float(state.success)


def test_the_autoreset_step_opens_a_fresh_episode_and_reports_the_ended_one(params):
    state = opened(params, 9)
    obs, new, reward, done, info = jax.jit(B.step)(jax.random.PRNGKey(2), state, jnp.int32(G + 9), params)
    assert bool(done) and float(reward) == 1.0 and float(info["success"]) == 1.0 and int(info["iterations"]) == 1
    assert not bool(new.ended) and int(new.cycles) == 0 and (np.asarray(obs) == 0).all() and np.asarray(info["mask"]).all()


# -- baselines ----------------------------------------------------------------------------------
def test_eliminate_solves_nearly_every_instance_and_random_almost_none(params):
    eliminate = B.summary(B.play(B.eliminate_policy, params, jax.random.PRNGKey(1), EPISODES))
    random = jax.device_get(B.play(B.random_policy, params, jax.random.PRNGKey(1), EPISODES))
    assert eliminate["success"] >= 0.95 and eliminate["iterations"] <= 3
    assert random["ended"].all() and (random["iterations"] == CONFIG.budget).all()
    assert B.summary(random)["success"] <= 0.1  # one random proposal: 1/F on average
    np.testing.assert_array_equal(random["return"], random["success"])


def test_eliminate_reads_the_values_an_agent_sees(params, step_env):
    """The candidates consistent with an observation are exactly those whose
    table values at the asked points equal the values shown."""
    state = opened(params, 17)
    for t, q in enumerate((1, 14)):
        obs, state, *_ = step_env(jax.random.PRNGKey(t), state, jnp.int32(q), params)
    alive = np.asarray(B.consistent(obs, params))
    values = np.asarray(params.values)
    assert alive[17] and (alive == ((values[:, 1] == values[17, 1]) & (values[:, 14] == values[17, 14]))).all()


# -- the flat codec -----------------------------------------------------------------------------
def test_the_flat_codec_passes_the_functional_env_checks():
    """What check_world runs on a world's flat codec: refusals, masks, return
    = headline, the flat baselines' legal actions, no retrace on other instances."""
    probe = World(name="equation", version="0", gym_stem="EquationDiscovery", summary="the batched equation env",
                  config="luca_gym.worlds.equation.batched:BatchedConfig", headline="success",
                  flat="luca_gym.worlds.equation.batched:flat_codec",
                  flat_baselines="luca_gym.worlds.equation.batched:FLAT_BASELINES")
    assert _check_flat(probe, {"n_variables": 2, "family_size": F}, (0, 1)) == ["flat", "flat-baselines", "flat-no-retrace"]
    codec = B.flat_codec(n_variables=2, family_size=F)
    assert codec == B.flat_codec(**codec.settings()) and hash(codec) == hash(B.flat_codec(n_variables=2, family_size=F))
