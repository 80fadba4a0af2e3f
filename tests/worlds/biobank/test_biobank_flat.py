"""``luca_gym/BiobankFlat-v0`` (luca_gym/worlds/biobank/flat.py): the biobank
tools as a flat, masked, multi-step env. Gymnasium's checker; a scripted
episode scores exactly what a tool session scores for the same calls;
refusals (masked actions) change nothing and cost nothing, hostile actions
raise; the step limit truncates at score 0; determinism; nothing of the
truth in the observation's shape or the info. Every world is of the
``tiny`` profile, on panel seeds 0 (two drivers) and 8 (the null world), the
worlds tests/worlds/biobank/test_biobank.py uses (one generation each per process)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import luca_gym  # noqa: F401  (registers the Gymnasium ids)
from luca_gym.worlds.biobank.config import PROFILES
from luca_gym.worlds.biobank.design import PANEL
from luca_gym.worlds.biobank.flat import CONFIDENCE, ERROR_CODES, KINDS, BiobankFlatEnv
from luca_gym.worlds.biobank.generator import IMAGING
from luca_gym.worlds.biobank.tools import BiobankToolSession

DRIVER_SEED, NULL_SEED = 0, 8
P, M = PROFILES["tiny"].proteins, len(IMAGING)
K = M + 5 * P + 1
SUBMIT = K - 1
STEP_KEYS = {"action_mask", "error_code", "error"}


def experiment(kind: str, i: int) -> int:
    return M + KINDS.index(kind) * P + i


def nominate(direction: str, i: int) -> int:
    return M + 2 * P + ("down", "up", "clear").index(direction) * P + i


@pytest.fixture(scope="module")
def envs():
    """One env per budget regime, shared by the file (the worlds are cached across them)."""
    return {budget: BiobankFlatEnv(profile="tiny", budget=budget) for budget in ("none", "limited")}


def test_gymnasium_check_env_passes():
    env = gym.make("luca_gym/BiobankFlat-v0", profile="tiny")
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.action_space.n == K


def test_the_spaces_and_the_layout(envs):
    env = envs["limited"]
    obs, info = env.reset(options={"instance_seed": DRIVER_SEED})
    assert env.action_space.n == K == 487 and obs.shape == env.observation_space.shape == (2 * P * M + 8 * P + 4 * M + 1,)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert sum(s.stop - s.start for s in env.slices.values()) == obs.size
    assert obs[env.slices["budget_left"]].tolist() == [1.0] and not obs[env.slices["experiments"]].any()
    assert info["action_mask"].dtype == bool and info["action_mask"].shape == (K,)
    assert (info["action_mask"] == env.action_masks()).all()
    assert env.describe_action(experiment("knockdown", 2)) == f"experiment knockdown {info['proteins'][2]}"
    assert env.describe_action(nominate("up", 5)) == f"nominate up {info['proteins'][5]}"
    assert (env.describe_action(0), env.describe_action(SUBMIT)) == (f"phenotype imaging.{IMAGING[0]}", "submit")
    # everything is allowed but the clears (nothing is nominated yet)
    assert not info["action_mask"][nominate("clear", 0):SUBMIT].any() and info["action_mask"][:nominate("clear", 0)].all()


def test_a_scripted_episode_scores_as_the_tool_session(envs):
    env = envs["limited"]
    obs, info = env.reset(options={"instance_seed": DRIVER_SEED})
    endpoint = obs[env.slices["endpoint_r"]].reshape(M, 3)
    measure = int(np.abs(endpoint).mean(axis=1).argmax())
    mr = obs[env.slices["mr_z"]].reshape(P, M)[:, measure]
    top = int(np.abs(mr).argmax())
    direction = "down" if mr[top] > 0 else "up"
    rewards = []
    for action in (measure, experiment("knockdown", top), nominate(direction, top)):
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["error_code"] == 0 and info["error"] is None and not (terminated or truncated) and set(info) == STEP_KEYS
        rewards.append(reward)
    obs, reward, terminated, truncated, info = env.step(SUBMIT)
    rewards.append(reward)
    assert (terminated, truncated) == (True, False) and not info["action_mask"].any()

    protein = env.session.release.proteins[top]
    session = BiobankToolSession(DRIVER_SEED, profile="tiny", budget="limited")
    delivery = session.call("experiment", {"protein": protein, "kind": "knockdown"})
    session.call("submit", {"nominations": [{"protein": protein, "direction": direction, "confidence": CONFIDENCE}],
                            "phenotype": f"imaging.{IMAGING[measure]}"})
    assert info["scores"] == session.scores
    assert rewards[:3] == [0.0, 0.0, 0.0] and sum(rewards) == info["scores"]["total"] == session.total_reward
    experiments = obs[env.slices["experiments"]].reshape(5, P)[:, top]  # cell z, cell done, knockdown z, hazard z, done
    expected = [0.0, 0.0, delivery["imaging_effect"] / delivery["imaging_se"],
                delivery["log_hazard_ratio"] / delivery["log_hazard_ratio_se"], 1.0]
    assert np.allclose(experiments, expected, rtol=1e-6)
    assert obs[env.slices["budget_left"]][0] == pytest.approx(50_000 / 450_000)
    assert obs[env.slices["nominated"]].reshape(2, P)[:, top].tolist() == ([1.0, 0.0] if direction == "down" else [0.0, 1.0])
    assert obs[env.slices["phenotype"]].tolist() == [float(j == measure) for j in range(M)]
    with pytest.raises(RuntimeError, match="ended"):
        env.step(SUBMIT)


def _snapshot(env):
    return env._observation(), env.action_masks(), env.session.budget_left, len(env.session.audit), env.steps


def _assert_unchanged(before, after):
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1]) and before[2:] == after[2:]


def _refused(env, action, code: str):
    before = _snapshot(env)
    assert not before[1][action]
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["error_code"] == ERROR_CODES[code] and info["error"] and set(info) == STEP_KEYS
    assert (reward, terminated, truncated) == (0.0, False, False) and np.array_equal(obs, before[0])
    _assert_unchanged(before, _snapshot(env))


def test_a_masked_action_is_refused_and_changes_nothing(envs):
    env = envs["none"]
    _, info = env.reset(options={"instance_seed": DRIVER_SEED})
    assert not info["action_mask"][M:M + 2 * P].any()  # no budget: every experiment masked
    _refused(env, experiment("cell_perturbation", 0), "over_budget")
    _refused(env, experiment("knockdown", 3), "over_budget")
    _refused(env, nominate("clear", 1), "nomination_unchanged")
    env.step(1)
    _refused(env, 1, "phenotype_chosen")
    env.step(nominate("up", 4))
    _refused(env, nominate("up", 4), "nomination_unchanged")

    env = envs["limited"]
    env.reset(options={"instance_seed": DRIVER_SEED})
    _, _, _, _, info = env.step(experiment("cell_perturbation", 7))
    assert info["error_code"] == 0 and env.session.budget_left == 300_000
    _refused(env, experiment("cell_perturbation", 7), "experiment_done")
    env.step(experiment("cell_perturbation", 8))  # $150,000 left: a knockdown is over the budget now
    _refused(env, experiment("knockdown", 9), "over_budget")
    assert env.action_masks()[experiment("cell_perturbation", 9)] and not env.session.ended


@pytest.mark.parametrize("action", [-1, K, 2**31 - 1, 2**63, 1.5, 3.0, "x", None, True, [1], np.array([1, 2])])
def test_an_action_outside_the_space_raises_and_changes_nothing(envs, action):
    env = envs["limited"]
    if env.session is None or env.session.ended:
        env.reset(options={"instance_seed": DRIVER_SEED})
    before = _snapshot(env)
    with pytest.raises(ValueError, match="action"):
        env.step(action)
    _assert_unchanged(before, _snapshot(env))


def test_the_step_limit_truncates_at_score_zero_and_refusals_do_not_count():
    env = BiobankFlatEnv(profile="tiny", max_steps=3)
    env.reset(options={"instance_seed": NULL_SEED})  # an empty submission would score full marks here
    for action in (0, nominate("down", 0), 0, 0, nominate("down", 0)):  # two accepted, three refused
        _, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated) == (0.0, False, False)
    _, reward, terminated, truncated, info = env.step(nominate("clear", 0))
    assert (terminated, truncated, reward) == (False, True, 0.0) and env.session.ended
    assert info["scores"]["total"] == 0.0 and not info["action_mask"].any()


@pytest.mark.parametrize("settings,message", [({"max_steps": 0}, "max_steps"), ({"max_steps": True}, "max_steps"),
                                              ({"budget": "lots"}, "budget"), ({"seed": 3}, "settings"),
                                              ({"render_mode": "human"}, "render_mode")])
def test_a_bad_setting_is_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        BiobankFlatEnv(**{"profile": "tiny", **settings})


def test_the_same_instance_gives_the_same_observations_and_another_differs(envs):
    env, fresh = envs["limited"], BiobankFlatEnv(profile="tiny", budget="limited")  # fresh: observes the world anew
    actions = (2, experiment("knockdown", 11), nominate("up", 11))
    first = [env.reset(options={"instance_seed": DRIVER_SEED})[0]] + [env.step(a)[0] for a in actions]
    again = [fresh.reset(options={"instance_seed": DRIVER_SEED})[0]] + [fresh.step(a)[0] for a in actions]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    other, _ = env.reset(options={"instance_seed": NULL_SEED})
    assert not np.array_equal(first[0], other)
    drawn, drawn_info = env.reset(seed=123)
    redrawn, redrawn_info = fresh.reset(seed=123)
    assert drawn_info["instance_seed"] == redrawn_info["instance_seed"] >= 10_000 and np.array_equal(drawn, redrawn)


def test_nothing_of_the_truth_shapes_the_observation_or_the_info(envs):
    assert PANEL[NULL_SEED].n_drivers == 0 and PANEL[DRIVER_SEED].n_drivers > 0
    env = envs["limited"]
    seen = {}
    for seed in (DRIVER_SEED, NULL_SEED):
        obs, info = env.reset(options={"instance_seed": seed})
        assert set(info) == {"instance_seed", "proteins", "measures", "action_mask"}
        infos = [env.step(a)[4] for a in (0, experiment("knockdown", 0), nominate("down", 0), nominate("down", 0))]
        assert all(set(i) == STEP_KEYS for i in infos)
        seen[seed] = (obs.shape, obs.dtype, info["action_mask"].tolist(), [i["action_mask"].tolist() for i in infos],
                      [(i["error_code"], i["error"]) for i in infos])
    assert seen[DRIVER_SEED] == seen[NULL_SEED]


class _Pinned(BiobankFlatEnv):
    """Every episode on the driver world (no world generated during training)."""

    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed, options={"instance_seed": DRIVER_SEED})


def test_maskable_ppo_learns_a_few_steps():
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from luca_gym.agents.sb3 import one_torch_thread

    env = DummyVecEnv([lambda: Monitor(_Pinned(profile="tiny", budget="limited", max_steps=12))])
    with one_torch_thread():
        model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
        model.learn(32)
    assert model.num_timesteps == 32 and len(model.ep_info_buffer) >= 2  # episodes end: by submit or at the step limit
