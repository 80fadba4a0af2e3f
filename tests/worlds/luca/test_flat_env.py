"""``LucaFlatEnv``: the Gymnasium adapter over the flat encodings.

One env per (tier, mode) per test process, so ``flat.reset`` / ``flat.step``
compile once per setting (the tier is not a setting of the core: healthy and
disease are the two compiles); every test resets it before use.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import warnings

import gymnasium
import jax
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import luca_gym  # noqa: F401  (registers luca_gym/LucaFlat-v0)
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.envs import LucaEnv, LucaFlatEnv
from luca_gym.worlds.luca.envs import flat as flat_env
from luca_gym.worlds.luca.envs.env import RGB_SHAPE
from luca_gym.worlds.luca.spec import DRAWN_SEED_LIMIT, N_TASKS

TIERS = ("easy", "medium", "hard")
MODES = ("healthy", "disease")
N = 20
ANALYST = "logit-additive"


@functools.cache
def make_env(tier: str, mode: str) -> LucaFlatEnv:
    return gymnasium.make("luca_gym/LucaFlat-v0", tier=tier, mode=mode, n_genes=N).unwrapped


@functools.cache
def core_legal(params: core.EnvParams):
    """jit: state -> bool (K,), the core's verdict (no refusal) on every flat
    action decoded from the observation of ``state``, less a resubmission of
    the network, which the flat space masks by design (``flat.mask``)."""
    lay = flat.layout(params)

    def legal(state):
        obs = core.observe(state, params)

        def verdict(k):
            return core.refusal(state, flat.decode(k, obs, params, ANALYST), params)

        accepted = jax.vmap(verdict)(np.arange(lay.size)) == 0
        return accepted.at[lay.network].set(accepted[lay.network] & ~state.network_submitted)

    return jax.jit(legal)


def random_masked_episode(env: LucaFlatEnv, organism_seed: int, rng: np.random.Generator, check_mask: bool = False):
    """Play one episode choosing uniformly among the legal actions. Returns
    (undiscounted return, number of calls, last info, terminated)."""
    _, info = env.reset(options={"organism_seed": organism_seed})
    mask, total, calls = info["action_mask"], 0.0, 0
    while True:
        if check_mask:
            np.testing.assert_array_equal(mask, np.asarray(core_legal(env.params)(env.state)))
        _, reward, terminated, truncated, info = env.step(rng.choice(np.flatnonzero(mask)))
        total += reward
        calls += 1
        assert info["error_code"] == 0  # a legal action is never refused
        mask = env.action_masks()
        np.testing.assert_array_equal(mask, info["action_mask"])
        if terminated or truncated:
            return total, calls, info, terminated


# -- conformance ------------------------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("mode", MODES)
def test_check_env_gymnasium_and_sb3_pass_without_a_warning(tier, mode):
    env = make_env(tier, mode)
    wrapped = gymnasium.make("luca_gym/LucaFlat-v0", tier=tier, mode=mode, n_genes=N)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", flat_env.TorchThreadsWarning)  # the process's first reset may put torch on one thread
        gymnasium_check_env(env)
        sb3_check_env(env, warn=True)
        # Gymnasium's passive checker on the first reset and step of a made env.
        _, info = wrapped.reset(seed=0)
        wrapped.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []


def test_spaces_and_mask_shapes():
    env = make_env("medium", "disease")
    lay = flat.layout(env.params)
    assert env.action_space == gymnasium.spaces.Discrete(lay.size)
    assert env.observation_space.shape == (flat.observation_size(env.params),)
    assert env.observation_space.dtype == np.float32
    obs, info = env.reset(seed=1)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    mask = env.action_masks()
    assert mask.dtype == np.bool_ and mask.shape == (lay.size,)
    np.testing.assert_array_equal(mask, info["action_mask"])
    assert mask[lay.end] and mask[lay.reveal] and not mask[lay.predict]
    assert info["budget"] == env.params.budget


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tier": "impossible"},
        {"mode": "sick"},
        {"n_genes": 3},
        {"budget": 0},
        {"analyst": "oracle"},
        {"backwards": "yes"},
        {"render_mode": "human"},
        {"max_steps": 0},
        {"shaping_gamma": 0.0},
    ],
)
def test_bad_constructor_arguments_raise_naming_them(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LucaFlatEnv(**kwargs)


def test_settings_reach_the_params():
    env = LucaFlatEnv("easy", "healthy", N, budget=12, max_steps=40, dense_shaping=True, shaping_scale=0.2, shaping_gamma=0.9)
    p = env.params
    assert (p.budget, p.max_steps, p.dense_shaping, p.shaping_scale, p.shaping_gamma) == (12, 40, True, 0.2, 0.9)


def test_calls_before_reset_raise():
    env = LucaFlatEnv("easy")
    with pytest.raises(RuntimeError):
        env.step(0)
    with pytest.raises(RuntimeError):
        env.action_masks()


# -- reset ------------------------------------------------------------------------------


def test_reset_seed_draws_and_option_pins_the_organism():
    env = make_env("easy", "healthy")
    first = env.reset(seed=5)
    again = env.reset(seed=5)
    assert first[1]["organism_seed"] == again[1]["organism_seed"] < DRAWN_SEED_LIMIT
    np.testing.assert_array_equal(first[0], again[0])
    assert env.reset(seed=6)[1]["organism_seed"] != first[1]["organism_seed"]
    _, info = env.reset(seed=123, options={"organism_seed": 7})
    assert info["organism_seed"] == 7 and env.organism.meta.seed == 7


@pytest.mark.parametrize("options", [{"organism_sed": 3}, {"organism_seed": 3.0}, {"organism_seed": -1}, "seed"])
def test_reset_refuses_bad_options(options):
    with pytest.raises(ValueError, match="options"):
        make_env("easy", "healthy").reset(options=options)


# -- actions ----------------------------------------------------------------------------


def test_integer_actions_of_every_spelling_are_accepted():
    env = make_env("easy", "healthy")
    reveal = flat.layout(env.params).reveal
    for action in (reveal, np.int64(reveal), np.uint16(reveal), np.array(reveal, np.int32)):
        env.reset(options={"organism_seed": 0})
        _, _, _, _, info = env.step(action)
        assert info["error_code"] == 0


_K = flat.layout(core.make_params("easy", N, "healthy")).size
MALFORMED = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=_K),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(0, _K - 1), min_size=1, max_size=3),
    st.just(np.array([1])),
    st.just(np.float32(1.0)),
    st.just(np.bool_(True)),
    st.just({"kind": 0}),
)


@given(action=MALFORMED)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_malformed_actions_raise_naming_the_action_and_change_nothing(action):
    env = make_env("easy", "healthy")
    if env.state is None:
        env.reset(options={"organism_seed": 0})
    state, mask = env.state, env.action_masks()
    with pytest.raises(ValueError, match=r"^action: .*not allowed; an integer in 0\.\."):
        env.step(action)
    assert env.state is state
    np.testing.assert_array_equal(env.action_masks(), mask)


@pytest.mark.parametrize("mode", MODES)
def test_masked_actions_are_refused_at_no_cost(mode):
    env = make_env("medium", mode)
    lay = flat.layout(env.params)
    obs, info = env.reset(options={"organism_seed": 4})
    masked = np.flatnonzero(~info["action_mask"])
    assert lay.predict in masked  # no task revealed yet
    before = jax.device_get(env.state)
    for index in masked:
        obs_after, reward, terminated, truncated, info = env.step(int(index))
        assert info["error_code"] != 0 and info["error"]
        assert reward == 0.0 and not terminated and not truncated
        assert obs_after[0] == obs[0] == 1.0  # budget left / budget
    after = jax.device_get(env.state)
    for name in vars(before):
        if name not in ("step_count", "last_error"):
            jax.tree_util.tree_map(np.testing.assert_array_equal, getattr(before, name), getattr(after, name))
    assert int(after.step_count) == 0  # refused calls count toward nothing, max_steps included


# -- episodes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("tier", "mode"), [("easy", "healthy"), ("hard", "healthy"), ("medium", "disease"), ("hard", "disease")])
def test_random_masked_episodes_follow_the_core(tier, mode):
    """Along random masked episodes: the mask is the core's verdict on every
    one of the K actions, the episode ends well under max_steps, and the
    undiscounted return is the composite score."""
    env = make_env(tier, mode)
    rng = np.random.default_rng(0)
    bound = env.params.budget + 2 * N_TASKS + 3
    assert bound < env.params.max_steps
    for organism_seed in range(3):
        total, calls, info, terminated = random_masked_episode(env, organism_seed, rng, check_mask=organism_seed == 0)
        assert terminated and calls <= bound
        assert total == pytest.approx(info["scores"]["composite"], abs=1e-5)
        assert not env.action_masks().any()  # nothing is legal once the session has ended
        assert math.isfinite(total)


def test_a_planned_episode_scores_the_analysts_predictions():
    """Reveal, measure the task's two singles, let the analyst predict, for
    both tasks, then end: the return is the composite the core computes."""
    env = make_env("easy", "healthy")
    lay = flat.layout(env.params)
    env.reset(options={"organism_seed": 2})
    total = 0.0
    for _ in range(N_TASKS):
        total += env.step(lay.reveal)[1]
        task = jax.device_get(core.observe(env.state, env.params))
        for gene, code in zip(task["task_genes"], task["task_codes"]):
            _, reward, _, _, info = env.step(int((code - 1) * N + gene))  # experiment: code-major, gene within
            assert info["error_code"] == 0
        _, reward, _, _, info = env.step(lay.predict)
        assert info["error_code"] == 0 and reward > 0
        total += reward
    _, reward, terminated, _, info = env.step(lay.end)
    assert terminated
    assert total + reward == pytest.approx(info["scores"]["composite"], abs=1e-5)
    assert info["scores"]["prediction"] > 0.5


def test_render_ansi():
    env = LucaFlatEnv("easy", render_mode="ansi")
    env.reset(options={"organism_seed": 0})
    assert "LUCA easy healthy N=20" in env.render()


def test_render_rgb_array_is_the_single_envs_picture():
    """The flat env draws the same frame as LucaEnv for the same organism's opening observation."""
    env = LucaFlatEnv("easy", render_mode="rgb_array")
    assert env.render() is None and "rgb_array" in env.metadata["render_modes"]
    env.reset(options={"organism_seed": 0})
    frame = env.render()
    assert frame.shape == RGB_SHAPE and frame.dtype == np.uint8
    single = LucaEnv("easy", render_mode="rgb_array")
    single.reset(options={"organism_seed": 0})
    np.testing.assert_array_equal(frame, single.render())


class FakeTorch:
    def __init__(self, threads: int):
        self.threads = threads

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, threads: int) -> None:
        self.threads = threads


@pytest.mark.parametrize("threads, cores, after", [(2, 2, 1), (4, 2, 1), (8, 16, 8), (1, 2, 1), (None, 2, None)])
def test_torch_goes_to_one_thread_once_and_only_where_its_threads_take_every_core(monkeypatch, threads, cores, after):
    torch = FakeTorch(threads) if threads else None
    if torch is None:
        monkeypatch.delitem(sys.modules, "torch", raising=False)  # torch not imported: nothing to do
    else:
        monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(flat_env, "_torch_checked", False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    env = make_env("easy", "healthy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.reset(seed=0)
        first = torch and torch.threads
        if torch is not None:
            torch.threads = 3  # the user's own choice after the first reset stands
        env.reset(seed=1)
    warned = [str(w.message) for w in caught if issubclass(w.category, flat_env.TorchThreadsWarning)]
    if after == threads:
        assert warned == []
    else:
        assert len(warned) == 1 and f"torch set to 1 thread (was {threads}, on {cores} cores)" in warned[0]
        assert "torch.set_num_threads(n)" in warned[0]
    assert first == after and (torch is None or torch.threads == 3)
