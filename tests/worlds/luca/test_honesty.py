"""The rules that keep the benchmark honest (SPEC §2), one test or more each.

Hidden state (task genes before their reveal, task answers, the malfunction)
is read from ``env.unwrapped.state.organism`` here, in the tests only, to build
the actions an honest environment must refuse or must not reward early.
"""

from __future__ import annotations

import dataclasses
import functools

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import luca_gym  # noqa: F401  (registers luca_gym/Luca-v0)
from luca_gym.worlds.luca import core, generator as world
from luca_gym.boundary import to_numpy_observation
from luca_gym.worlds.luca.session import render_text
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, N_TASKS, PERSIST

TIERS = ("easy", "medium", "hard")
MODES = ("healthy", "disease")
N = 20
SEED = 1
E = core.ERROR_CODES
FREE_OF_STATE = {".step_count", ".last_error"}


@functools.lru_cache(maxsize=None)
def make_env(tier: str, mode: str):
    """One env per (tier, mode) per test process; tests always reset it first."""
    return gymnasium.make("luca_gym/Luca-v0", tier=tier, mode=mode, n_genes=N).unwrapped


def fresh(tier: str, mode: str, seed: int = SEED):
    env = make_env(tier, mode)
    obs, info = env.reset(options={"organism_seed": seed})
    return env, obs


def hidden(env):
    """The hidden organism arrays, as numpy (tests only)."""
    return jax.device_get(env.state.organism)


def codes_on(genes, code=BLOCK, n=N) -> np.ndarray:
    codes = np.zeros(n, np.int64)
    codes[list(genes)] = code
    return codes


def experiment(genes=(), code=BLOCK, signals=()):
    flags = np.zeros(world.sizes(N).n_signals, np.int64)
    flags[list(signals)] = 1
    return {"kind": core.EXPERIMENT, "gene_codes": codes_on(genes, code), "signal_flags": flags}


def rescue(genes=(), code=BLOCK, signals=()):
    return {**experiment(genes, code, signals), "kind": core.TEST_RESCUE}


def diagnosis(target, type_):
    return {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": int(target), "diagnosis_type": int(type_)}


def true_diagnosis(env):
    o = hidden(env)
    return diagnosis(o.malfunction_target, o.malfunction_type)


def wrong_diagnosis(env):
    """A well-formed diagnosis with the wrong target."""
    o = hidden(env)
    targetable = np.flatnonzero(~o.latent_mask)
    gene = next(int(g) for g in targetable if g != int(o.malfunction_target))
    return diagnosis(gene, LOCK_HI)


def leaves(state) -> dict[str, bytes]:
    return {
        jax.tree_util.keystr(p): (np.asarray(x).dtype, np.asarray(x).shape, np.asarray(x).tobytes())
        for p, x in jax.tree_util.tree_leaves_with_path(jax.device_get(state))
    }


def step_ok(env, action):
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["error_code"] == 0, info["error"]
    assert info["error"] is None
    return obs, reward, terminated, truncated, info


def assert_refused(env, action, reason: str):
    """``action`` is refused for ``reason``: no cost, reward 0, the session and
    every observation field unchanged except ``last_error``."""
    before_state = leaves(env.state)
    before_obs = to_numpy_observation(core.observe(env.state, env.params))
    obs, reward, terminated, truncated, info = env.step(action)
    code = E[reason]
    assert info["error_code"] == code, (reason, core.ERRORS[info["error_code"]][0])
    assert info["error"] == core.ERROR_MESSAGES[code]
    assert set(info) == {"error", "error_code"}
    assert reward == 0.0 and not terminated and not truncated
    assert int(obs["last_error"]) == code
    for name in obs:
        if name != "last_error":
            assert np.array_equal(obs[name], before_obs[name], equal_nan=obs[name].dtype.kind == "f"), name
    after_state = leaves(env.state)
    assert {k for k in before_state if before_state[k] != after_state[k]} <= FREE_OF_STATE
    assert int(obs["budget_left"]) == int(before_obs["budget_left"])
    return obs


# -- held-out tasks ---------------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("mode", MODES)
def test_experiment_on_both_genes_of_a_held_out_task_is_refused_free(tier, mode):
    env, obs = fresh(tier, mode)
    task_genes = hidden(env).task_genes
    signals = (0,)
    for t in range(N_TASKS):
        pair = [int(g) for g in task_genes[t]]
        for code in (BLOCK, BOOST, DAMPEN):
            assert_refused(env, experiment(pair, code), "held_out_pair")
        # Extra targets do not launder the pair.
        others = [g for g in np.flatnonzero(obs["targetable"]) if g not in task_genes.ravel()][:2]
        assert_refused(env, experiment(pair + [int(g) for g in others], BOOST, signals), "held_out_pair")
    # Still refused once the task is public.
    step_ok(env, {"kind": core.REVEAL_TASK})
    assert_refused(env, experiment([int(g) for g in task_genes[0]]), "held_out_pair")
    # One gene of a pair is an ordinary experiment, at the ordinary cost.
    budget = int(env.state.budget_left)
    obs, *_ = step_ok(env, experiment([int(task_genes[0][0])]))
    assert int(obs["budget_left"]) == budget - 1


@pytest.mark.parametrize("tier", TIERS)
def test_rescue_on_both_genes_of_a_held_out_task_is_refused_free(tier):
    env, _ = fresh(tier, "disease")
    step_ok(env, true_diagnosis(env))
    task_genes = hidden(env).task_genes
    for t in range(N_TASKS):
        assert_refused(env, rescue([int(g) for g in task_genes[t]]), "held_out_pair")
        assert_refused(env, rescue([int(g) for g in task_genes[t]], BOOST, (1,)), "held_out_pair")
    budget = int(env.state.budget_left)
    obs, *_ = step_ok(env, rescue([int(task_genes[1][1])]))
    assert int(obs["budget_left"]) == budget - 1


# -- diagnosis and rescue ---------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
def test_rescue_before_a_diagnosis_is_refused_free(tier):
    env, obs = fresh(tier, "disease")
    gene = int(np.flatnonzero(obs["targetable"])[0])
    assert_refused(env, rescue([gene]), "not_committed")
    assert_refused(env, rescue(signals=(0,)), "not_committed")
    step_ok(env, true_diagnosis(env))
    step_ok(env, rescue([gene]))


@pytest.mark.parametrize("first_right", [True, False])
def test_second_diagnosis_is_refused_and_the_first_stands(first_right):
    env, _ = fresh("medium", "disease")
    right, wrong = true_diagnosis(env), wrong_diagnosis(env)
    first, second = (right, wrong) if first_right else (wrong, right)
    step_ok(env, first)
    assert_refused(env, second, "already_committed")
    assert_refused(env, first, "already_committed")
    *_, info = env.step({"kind": core.END})
    assert info["scores"]["diagnosis"] == (1.0 if first_right else 0.0)


def test_diagnosis_score_is_withheld_until_the_end():
    """Two sessions on one organism, one with the right diagnosis and one with
    a wrong one, look identical until END: every observation, reward and info."""
    right_env = gymnasium.make("luca_gym/Luca-v0", tier="hard", mode="disease").unwrapped
    wrong_env = gymnasium.make("luca_gym/Luca-v0", tier="hard", mode="disease").unwrapped
    obs_r, info_r = right_env.reset(options={"organism_seed": 4})
    obs_w, info_w = wrong_env.reset(options={"organism_seed": 4})
    assert set(info_r) == {"organism_seed", "budget"} and info_r == info_w
    targetable = np.flatnonzero(obs_r["targetable"])
    pair = set(int(g) for g in hidden(right_env).task_genes.ravel())
    gene = int(next(g for g in targetable if g not in pair))
    script = [
        experiment([gene]),
        experiment(signals=(1,)),
        {"kind": core.REVEAL_TASK},
        {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(3, 0.5, np.float32)},
        rescue([gene], BOOST),
        rescue([int(targetable[0])]),
        {"kind": core.SUBMIT_NETWORK, "network": np.ones((N, 3), np.int64)},
        diagnosis(N + 99, PERSIST),  # refused: already committed
    ]
    for env in (right_env, wrong_env):
        with pytest.raises(RuntimeError):
            env.scores()
    step_r = right_env.step(true_diagnosis(right_env))
    step_w = wrong_env.step(wrong_diagnosis(wrong_env))
    for action in [None] + script:
        if action is not None:
            step_r, step_w = right_env.step(action), wrong_env.step(action)
        (o_r, rew_r, term_r, trunc_r, i_r), (o_w, rew_w, term_w, trunc_w, i_w) = step_r, step_w
        assert "scores" not in i_r and "scores" not in i_w
        assert set(i_r) == {"error", "error_code"}
        assert i_r == i_w
        assert rew_r == rew_w and (term_r, trunc_r) == (term_w, trunc_w) == (False, False)
        assert set(o_r) == set(o_w)
        for name in o_r:
            assert np.array_equal(o_r[name], o_w[name]), name
        for env in (right_env, wrong_env):
            with pytest.raises(RuntimeError):
                env.scores()
    *_, end_r = right_env.step({"kind": core.END})
    *_, end_w = wrong_env.step({"kind": core.END})
    assert end_r["scores"]["diagnosis"] == 1.0 and end_w["scores"]["diagnosis"] == 0.0
    assert right_env.scores()["diagnosis"] == 1.0


# -- nothing hidden leaks ---------------------------------------------------------


def with_other_hidden_parts(a):
    """The organism with different hidden parts that neither the dynamics nor a
    public field read: task answers, n_alt, malfunction labels, readout mask,
    modules."""
    n, s = a.n_genes, a.n_signals
    truth = jnp.where(a.task_truth > 0.5, a.task_truth - 0.3, a.task_truth + 0.3)
    target = int(a.malfunction_target)
    targetable = np.flatnonzero(~np.asarray(a.latent_mask))
    if 0 <= target < n:  # a gene lock: another gene, the other lock
        other_type = LOCK_HI if int(a.malfunction_type) == LOCK_LO else LOCK_LO
        other_target = int(next(g for g in targetable if g != target))
    elif target >= n:  # a persistent signal: a gene lock instead
        other_target, other_type = int(targetable[0]), LOCK_HI
    else:  # healthy: no malfunction; label one anyway
        other_target, other_type = n + s - 1, PERSIST
    return dataclasses.replace(
        a,
        task_truth=truth.astype(jnp.float32),
        n_alt=a.n_alt + 3,
        malfunction_target=jnp.int32(other_target),
        malfunction_type=jnp.int32(other_type),
        readout_mask=~a.readout_mask,
        module=(a.module + 1) % (int(a.module.max()) + 1),
    )


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("mode", MODES)
def test_no_observation_or_info_depends_on_hidden_parts(tier, mode):
    o = world.make_organism(SEED + 1, tier, N, mode)
    params = core.make_params(tier, N, mode)
    a, b = o.arrays, with_other_hidden_parts(o.arrays)
    o_b = dataclasses.replace(o, arrays=b)
    for name in ("task_truth", "n_alt", "malfunction_target", "malfunction_type", "readout_mask", "module"):
        assert not np.array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name))), name
    key = core.noise_key(SEED + 1, tier, N)
    task_genes = np.asarray(a.task_genes)
    targetable = [int(g) for g in np.flatnonzero(~np.asarray(a.latent_mask))]
    free = [g for g in targetable if g not in task_genes.ravel()]
    truth0 = np.asarray(a.task_truth[0])
    c = lambda genes, code=BLOCK: codes_on(genes, code).astype(np.int8)  # noqa: E731
    flags = np.eye(params.n_signals, dtype=bool)
    script = [
        core.make_action(params, core.EXPERIMENT, gene_codes=c([free[0]])),
        core.make_action(params, core.EXPERIMENT, gene_codes=c([free[0]])),
        core.make_action(params, core.EXPERIMENT, gene_codes=c([free[1]], DAMPEN)),
        core.make_action(params, core.EXPERIMENT, signal_flags=flags[0]),
        core.make_action(params, core.EXPERIMENT, gene_codes=c(free[:4], BOOST), signal_flags=flags[1]),
        core.make_action(params, core.EXPERIMENT, gene_codes=c(task_genes[1])),  # held-out pair
        core.make_action(params, core.EXPERIMENT, gene_codes=c([free[2]], 7)),  # unknown code
        core.make_action(params, core.REVEAL_TASK),
        core.make_action(params, core.SUBMIT_PREDICTION, prediction=truth0),
        core.make_action(params, core.REVEAL_TASK),
        core.make_action(params, core.SUBMIT_PREDICTION, prediction=np.full(3, 0.5)),
        core.make_action(params, core.SUBMIT_NETWORK, network=np.ones((N, 3), np.int8)),
        core.make_action(
            params, core.COMMIT_DIAGNOSIS, diagnosis_target=int(a.malfunction_target), diagnosis_type=int(a.malfunction_type)
        ),
        core.make_action(params, core.TEST_RESCUE, gene_codes=c([free[3]], BOOST)),
        core.make_action(params, core.TEST_RESCUE, signal_flags=flags[2]),
        core.make_action(params, core.COMMIT_DIAGNOSIS, diagnosis_target=N, diagnosis_type=PERSIST),
        core.make_action(params, core.END),
    ]
    obs_a, state_a = core.reset(key, a, params)
    obs_b, state_b = core.reset(key, b, params)
    reward_differs = []
    for k, action in enumerate([None] + script):
        if action is not None:
            obs_a, state_a, rew_a, term_a, trunc_a, info_a = core.step(state_a, action, params)
            obs_b, state_b, rew_b, term_b, trunc_b, info_b = core.step(state_b, action, params)
            assert jax.device_get(info_a) == jax.device_get(info_b)
            assert (bool(term_a), bool(trunc_a)) == (bool(term_b), bool(trunc_b))
            scored = int(action.kind) in (core.SUBMIT_PREDICTION, core.END)
            if not scored:
                assert float(rew_a) == float(rew_b), k
            reward_differs.append(float(rew_a) != float(rew_b))
        assert set(obs_a) == set(obs_b)
        for name in obs_a:
            assert np.asarray(obs_a[name]).tobytes() == np.asarray(obs_b[name]).tobytes(), (k, name)
        assert render_text(state_a, params, o) == render_text(state_b, params, o_b)
    # The hidden parts did matter (the test is not vacuous): the exact answer of
    # task 1 scores on organism a, not on b.
    assert reward_differs[8] and int(script[8].kind) == core.SUBMIT_PREDICTION
    if mode == "disease":  # and the diagnosis is scored against each one's label
        assert reward_differs[-1]
    assert bool(obs_a["ended"])


# -- budget ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_spent_budget_refuses_experiments_and_rescues_but_free_calls_work(mode):
    env, obs = fresh("medium", mode)
    targetable = np.flatnonzero(obs["targetable"])
    budget = env.params.budget
    for k in range(budget):
        obs, *_ = step_ok(env, experiment([int(targetable[k % targetable.size])], BLOCK + k % 2))
        assert int(obs["budget_left"]) == budget - k - 1
    assert int(obs["action_mask"][core.EXPERIMENT]) == 0
    assert_refused(env, experiment([int(targetable[0])]), "budget_spent")
    assert_refused(env, experiment(signals=(0,)), "budget_spent")
    if mode == "disease":
        step_ok(env, true_diagnosis(env))
        assert_refused(env, rescue([int(targetable[0])]), "budget_spent")
    step_ok(env, {"kind": core.REVEAL_TASK})
    step_ok(env, {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(3, 0.5)})
    step_ok(env, {"kind": core.SUBMIT_NETWORK, "network": np.zeros((N, 3), np.int64)})
    obs, _, terminated, truncated, info = step_ok(env, {"kind": core.END})
    assert terminated and not truncated
    assert int(obs["budget_left"]) == 0
    assert info["scores"]["budget_fraction"] == 1.0


# -- malformed calls ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_latent_gene_cannot_be_targeted(mode):
    env, obs = fresh("hard", mode)
    latent = np.flatnonzero(obs["targetable"] == 0)
    targetable = np.flatnonzero(obs["targetable"])
    assert latent.size > 0
    for g in latent:
        assert_refused(env, experiment([int(g)]), "latent_target")
    assert_refused(env, experiment([int(latent[0]), int(targetable[0])], BOOST, (0,)), "latent_target")
    if mode == "disease":
        assert_refused(env, diagnosis(latent[0], LOCK_HI), "bad_diagnosis")
        assert_refused(env, diagnosis(latent[0], LOCK_LO), "bad_diagnosis")
        step_ok(env, true_diagnosis(env))
        assert_refused(env, rescue([int(latent[0])], DAMPEN), "latent_target")


@pytest.mark.parametrize("mode", MODES)
def test_bad_predictions_are_refused(mode):
    env, _ = fresh("easy", mode)
    assert_refused(env, {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(3, 0.5)}, "no_current_task")
    step_ok(env, {"kind": core.REVEAL_TASK})
    for bad in (np.nan, np.inf, -np.inf, 2.0, -0.01, 1.0000002):
        prediction = np.array([0.5, bad, 0.5], np.float32)
        assert_refused(env, {"kind": core.SUBMIT_PREDICTION, "prediction": prediction}, "bad_prediction")
    obs, *_ = step_ok(env, {"kind": core.SUBMIT_PREDICTION, "prediction": np.array([0.0, 1.0, 0.5], np.float32)})
    assert obs["predicted"].tolist() == [1, 0]
    assert_refused(env, {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(3, 0.5)}, "already_predicted")


@pytest.mark.parametrize("code", [7, 4, -1, 257, -255, 2**31 - 1])
def test_unknown_gene_codes_are_refused(code):
    """Out-of-range codes are refused, including those an int8 cast would wrap
    into a legal code (257 -> 1)."""
    env, obs = fresh("medium", "disease")
    gene = int(np.flatnonzero(obs["targetable"])[0])
    assert_refused(env, experiment([gene], code), "unknown_code")
    step_ok(env, true_diagnosis(env))
    assert_refused(env, rescue([gene], code), "unknown_code")


def test_bad_network_is_refused():
    env, _ = fresh("easy", "healthy")
    for value in (2, -2, 257):
        network = np.zeros((N, 3), np.int64)
        network[3, 1] = value
        assert_refused(env, {"kind": core.SUBMIT_NETWORK, "network": network}, "bad_network")


@pytest.mark.parametrize("mode", MODES)
def test_every_call_after_end_is_refused(mode):
    env, obs = fresh("hard", mode)
    gene = int(np.flatnonzero(obs["targetable"])[0])
    step_ok(env, {"kind": core.END})
    calls = [
        experiment([gene]),
        {"kind": core.REVEAL_TASK},
        {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(3, 0.5)},
        {"kind": core.SUBMIT_NETWORK},
        true_diagnosis(env),
        rescue([gene]),
        {"kind": core.END},
        {"kind": 99},
    ]
    for call in calls:
        assert_refused(env, call, "session_ended")


def test_healthy_mode_refuses_diagnosis_and_rescue():
    env, obs = fresh("medium", "healthy")
    gene = int(np.flatnonzero(obs["targetable"])[0])
    assert_refused(env, diagnosis(gene, LOCK_HI), "healthy_mode")
    assert_refused(env, diagnosis(N, PERSIST), "healthy_mode")
    assert_refused(env, rescue([gene]), "healthy_mode")
    assert int(obs["action_mask"][core.COMMIT_DIAGNOSIS]) == 0
    assert int(obs["action_mask"][core.TEST_RESCUE]) == 0
