"""``LucaEnv``: the Gymnasium adapter over the session core.

One env per (tier, mode) per test process (so ``core.step`` compiles once per
setting); every test resets it before use.
"""

from __future__ import annotations

import functools
import math
import sys
import types
import warnings

import gymnasium
import jax
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import RecordVideo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import luca_gym  # noqa: F401  (registers luca_gym/Luca-v0)
from luca_gym.worlds.luca import core, generator as world
from luca_gym.worlds.luca.envs import LucaEnv
from luca_gym.worlds.luca.envs.env import RGB_SHAPE
from luca_gym.worlds.luca.spec import DRAWN_SEED_LIMIT
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, N_PHENOTYPES

TIERS = ("easy", "medium", "hard")
MODES = ("healthy", "disease")
N = 20
S = world.sizes(N).n_signals
SCORE_KEYS = {
    "composite",
    "prediction",
    "diagnosis",
    "rescue",
    "network_f1",
    "budget_fraction",
    "gene_coverage",
    "single_gene_fraction",
    "block_fraction",
    "redundancy",
    "commit_point",
    "n_alt",
}


@functools.lru_cache(maxsize=None)
def make_env(tier: str, mode: str, **kwargs) -> LucaEnv:
    return gymnasium.make("luca_gym/Luca-v0", tier=tier, mode=mode, **kwargs).unwrapped


def experiment(genes=(), code=BLOCK, signals=(), kind=core.EXPERIMENT):
    codes = np.zeros(N, np.int64)
    codes[list(genes)] = code
    flags = np.zeros(S, np.int64)
    flags[list(signals)] = 1
    return {"kind": kind, "gene_codes": codes, "signal_flags": flags}


def hidden(env):
    return jax.device_get(env.state.organism)


def free_genes(env) -> list[int]:
    """Targetable genes outside every prediction task (any mix is legal)."""
    o = hidden(env)
    return [int(g) for g in np.flatnonzero(~o.latent_mask) if g not in o.task_genes.ravel()]


# -- Gymnasium conformance -----------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("mode", MODES)
def test_check_env_passes(tier, mode):
    env = gymnasium.make("luca_gym/Luca-v0", tier=tier, mode=mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    complaints = [str(w.message) for w in caught if "WARN" in str(w.message)]
    assert complaints == []


def test_make_hard_disease_with_n_genes():
    env = gymnasium.make("luca_gym/Luca-v0", tier="hard", mode="disease", n_genes=20)
    obs, info = env.reset(seed=3)
    assert obs["targetable"].shape == (20,)
    assert int(obs["targetable"].sum()) == 15  # a quarter of the genes are latent
    assert int(obs["aberrant"].sum()) >= 1
    assert info["budget"] == world.sizes(20).budget
    gene = free_genes(env.unwrapped)[0]
    obs, reward, terminated, truncated, info = env.step(experiment([gene]))
    assert info["error_code"] == 0 and int(obs["budget_left"]) == env.unwrapped.params.budget - 1
    env.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tier": "impossible"},
        {"mode": "sick"},
        {"n_genes": 3},
        {"n_genes": 20.0},
        {"render_mode": "human"},
        {"backwards": "yes"},
        {"max_steps": 0},
    ],
)
def test_bad_constructor_arguments_raise(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LucaEnv(**kwargs)


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError):
        LucaEnv(tier="easy").step({"kind": core.END})


# -- reset -----------------------------------------------------------------------------


def test_reset_seed_draws_the_organism_seed():
    env = make_env("easy", "healthy")
    _, first = env.reset(seed=5)
    fingerprint = env.organism.fingerprint()
    _, again = env.reset(seed=5)
    assert again["organism_seed"] == first["organism_seed"]
    assert env.organism.fingerprint() == fingerprint
    _, other = env.reset(seed=6)
    assert other["organism_seed"] != first["organism_seed"]
    assert env.organism.fingerprint() != fingerprint
    assert 0 <= other["organism_seed"] < DRAWN_SEED_LIMIT
    # Unseeded resets continue the seeded stream: the sequence replays.
    runs = []
    for _ in range(2):
        seeds = [env.reset(seed=9)[1]["organism_seed"]]
        seeds += [env.reset()[1]["organism_seed"] for _ in range(3)]
        runs.append(seeds)
    assert runs[0] == runs[1] and len(set(runs[0])) == 4


def test_reset_option_pins_the_organism():
    env = make_env("medium", "disease")
    for seed in (0, 17):
        _, info = env.reset(seed=123, options={"organism_seed": seed})
        assert info["organism_seed"] == seed
        assert env.organism.fingerprint() == world.make_organism(seed, "medium", N, "disease").fingerprint()


def test_reset_refuses_unknown_options():
    env = make_env("medium", "healthy")
    with pytest.raises(ValueError, match="organism_sed"):
        env.reset(options={"organism_sed": 3})


# -- the Gymnasium boundary --------------------------------------------------------------


def test_random_actions_keep_observations_in_space_and_python_types():
    env = make_env("hard", "disease")
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    for _ in range(60):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert type(reward) is float and math.isfinite(reward)
        assert type(terminated) is bool and type(truncated) is bool
        assert type(info["error_code"]) is int
        assert ("scores" in info) == (terminated or truncated)
        if terminated or truncated:
            obs, _ = env.reset()
            assert env.observation_space.contains(obs)


@pytest.mark.parametrize("mode", MODES)
def test_scores_appear_only_when_the_episode_ends(mode):
    env = make_env("medium", mode)
    env.reset(seed=2)
    genes = free_genes(env)
    total = 0.0
    script = [
        experiment([genes[0]]),
        experiment([genes[1]], BOOST),
        experiment(genes[:3], DAMPEN, (0,)),
        {"kind": core.REVEAL_TASK},
        {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(N_PHENOTYPES, 0.5)},
        {"kind": core.SUBMIT_NETWORK, "network": np.ones((N, N_PHENOTYPES), np.int64)},
        {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": genes[0], "diagnosis_type": 1},
        experiment([genes[2]], kind=core.TEST_RESCUE),
    ]
    for action in script:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert "scores" not in info and not terminated and not truncated
        with pytest.raises(RuntimeError):
            env.scores()
    _, reward, terminated, truncated, info = env.step({"kind": core.END})
    total += reward
    assert terminated and not truncated
    scores = info["scores"]
    assert SCORE_KEYS <= set(scores)
    for key in SCORE_KEYS:
        assert type(scores[key]) in (float, int), key
        assert math.isfinite(scores[key]), key
    assert total == pytest.approx(scores["composite"], abs=1e-6)
    assert scores == env.scores()
    assert scores["gene_coverage"] > 0 and scores["network_f1"] > 0


def test_render_ansi_names_the_tier_and_budget():
    env = LucaEnv(tier="medium", mode="disease", render_mode="ansi")
    env.reset(seed=1)
    budget = env.params.budget
    text = env.render()
    assert isinstance(text, str)
    assert "medium" in text and f"budget {budget}/{budget}" in text
    env.step(experiment([free_genes(env)[0]]))
    assert f"budget {budget - 1}/{budget}" in env.render()
    env.step({"kind": 99})
    assert core.ERROR_MESSAGES[core.ERROR_CODES["unknown_kind"]] in env.render()
    assert make_env("medium", "disease").render() is None  # no render mode


def test_render_rgb_array_draws_the_public_state():
    env = make_env("medium", "disease", render_mode="rgb_array")
    assert env.metadata["render_modes"] == ["ansi", "rgb_array"]
    env.reset(seed=1)
    first = env.render()
    assert first.shape == RGB_SHAPE and first.dtype == np.uint8
    np.testing.assert_array_equal(first, env.render())
    env.step(experiment([free_genes(env)[0]]))
    spent = env.render()
    assert not np.array_equal(first, spent)  # the budget bar shrank, a cell of the grid darkened
    env.step({"kind": core.END})
    assert not np.array_equal(env.render()[0], spent[0])  # the frame turned red
    env.reset(seed=1)
    np.testing.assert_array_equal(env.render(), first)  # a pure function of the observation


def test_record_video_gets_a_frame_per_call(tmp_path, monkeypatch):
    """RecordVideo on Luca-v0: one frame for the reset and one per step,
    handed to moviepy at the episode's end. moviepy (Gymnasium's optional
    extra) is stood in for by a recorder of the clips it is given."""
    clips = []

    class ImageSequenceClip:
        def __init__(self, frames, fps):
            self.frames, self.fps = list(frames), fps

        def write_videofile(self, path, logger=None):
            clips.append((path, self))

    module = types.ModuleType("moviepy.video.io.ImageSequenceClip")
    module.ImageSequenceClip = ImageSequenceClip
    for name in ("moviepy", "moviepy.video", "moviepy.video.io"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, module.__name__, module)

    env = RecordVideo(gymnasium.make("luca_gym/Luca-v0", tier="medium", mode="disease", render_mode="rgb_array"),
                      str(tmp_path / "videos"), episode_trigger=lambda episode: episode == 0)
    env.reset(seed=1)
    env.step(experiment([free_genes(env.unwrapped)[0]]))
    env.step({"kind": core.END})
    env.reset(seed=2)  # a new episode closes the first one's clip
    env.close()
    [(path, clip)] = clips
    assert path == str(tmp_path / "videos" / "rl-video-episode-0.mp4") and clip.fps == env.metadata["render_fps"]
    assert len(clip.frames) == 3 and all(f.shape == RGB_SHAPE and f.dtype == np.uint8 for f in clip.frames)


# -- truncation ------------------------------------------------------------------------------


def test_episode_truncates_at_max_steps_with_scores():
    env = make_env("easy", "disease", max_steps=5)
    env.reset(seed=4)
    o = hidden(env)
    total = 0.0
    actions = [
        {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": int(o.malfunction_target), "diagnosis_type": int(o.malfunction_type)},
        {"kind": core.SUBMIT_NETWORK},
        {"kind": 42},  # refused: counts toward nothing
        {"kind": core.REVEAL_TASK},
        {"kind": core.SUBMIT_NETWORK},
    ]
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert not terminated and not truncated and "scores" not in info
    obs, reward, terminated, truncated, info = env.step({"kind": core.SUBMIT_NETWORK})
    total += reward
    assert truncated and not terminated
    assert bool(obs["ended"])
    assert info["scores"]["diagnosis"] == 1.0
    assert reward == pytest.approx(1 / 3, abs=1e-6)  # the closing credit is paid on truncation
    assert total == pytest.approx(info["scores"]["composite"], abs=1e-6)
    # The session is closed: further calls are refused.
    _, reward, terminated, truncated, info = env.step({"kind": core.END})
    assert info["error_code"] == core.ERROR_CODES["session_ended"] and reward == 0.0


def test_end_on_the_last_allowed_call_terminates_without_truncating():
    env = make_env("easy", "disease", max_steps=5)
    env.reset(seed=4)
    for _ in range(4):
        env.step({"kind": core.SUBMIT_NETWORK})
    _, _, terminated, truncated, info = env.step({"kind": core.END})
    assert terminated and not truncated and "scores" in info


def test_refused_calls_never_truncate():
    """A refused call changes nothing, the call count included: however many
    there are, the session stays open, and the limit's call is still the
    max_steps-th accepted one."""
    env = make_env("easy", "disease", max_steps=5)
    env.reset(seed=4)
    for _ in range(4):
        env.step({"kind": core.SUBMIT_NETWORK})
    for _ in range(50):
        _, reward, terminated, truncated, info = env.step({"kind": core.TEST_RESCUE})  # not committed
        assert info["error_code"] == core.ERROR_CODES["not_committed"]
        assert not truncated and not terminated and "scores" not in info and reward == 0.0
    assert int(env.state.step_count) == 4 and not bool(env.state.ended)
    _, _, terminated, truncated, info = env.step({"kind": core.SUBMIT_NETWORK})
    assert truncated and not terminated and "scores" in info


# -- action structure -----------------------------------------------------------------------

MALFORMED = [
    ({"kind": 0, "gene_codes": np.zeros(N + 1, np.int64)}, "gene_codes"),
    ({"kind": 0, "gene_codes": np.zeros((1, N), np.int64)}, "gene_codes"),
    ({"kind": 0, "gene_codes": np.zeros(N, np.float32)}, "gene_codes"),
    ({"kind": 0, "target": 3}, "target"),
    ({"kind": 1.0}, "kind"),
    ({"kind": np.array([0])}, "kind"),
    ({"kind": True}, "kind"),
    ({"kind": 2**40}, "kind"),
    ({"gene_codes": np.zeros(N, np.int64)}, "kind"),
    ({"kind": 2, "prediction": np.zeros(N_PHENOTYPES + 1)}, "prediction"),
    ({"kind": 2, "prediction": "0.5"}, "prediction"),
    ({"kind": 0, "signal_flags": np.zeros(S + 1, np.int64)}, "signal_flags"),
    ({"kind": 0, "signal_flags": np.array([2] + [0] * (S - 1))}, "signal_flags"),
    ({"kind": 4, "diagnosis_target": 1.5}, "diagnosis_target"),
    ({"kind": 4, "diagnosis_type": np.array([1, 2])}, "diagnosis_type"),
    ({"kind": 3, "network": np.zeros((N, N_PHENOTYPES - 1), np.int64)}, "network"),
    ([0], "expected a dict"),
    (0, "expected a dict"),
    (None, "expected a dict"),
    ("experiment", "expected a dict"),
]


@pytest.mark.parametrize("action, field", MALFORMED, ids=[f"{f}-{k}" for k, (_, f) in enumerate(MALFORMED)])
def test_action_outside_the_space_raises_naming_the_field(action, field):
    env = make_env("medium", "healthy")
    env.reset(seed=0)
    before = int(env.state.step_count)
    with pytest.raises(ValueError, match=field):
        env.step(action)
    assert int(env.state.step_count) == before  # not a call: nothing recorded


int32 = st.integers(-(2**31), 2**31 - 1)
small = st.integers(-300, 300)


@st.composite
def well_typed_actions(draw):
    """Dicts of the right fields, shapes and dtypes with arbitrary values."""
    action = {"kind": draw(st.one_of(st.integers(-2, 8), int32))}
    if draw(st.booleans()):
        action["gene_codes"] = np.array(draw(st.lists(st.one_of(st.integers(0, 3), small), min_size=N, max_size=N)))
    if draw(st.booleans()):
        action["signal_flags"] = np.array(draw(st.lists(st.booleans(), min_size=S, max_size=S)))
    if draw(st.booleans()):
        values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1))
        dtype = draw(st.sampled_from([np.float32, np.float64]))
        with np.errstate(over="ignore"):
            action["prediction"] = np.array(draw(st.lists(values, min_size=3, max_size=3))).astype(dtype)
    if draw(st.booleans()):
        action["diagnosis_target"] = draw(st.one_of(st.integers(-2, N + S + 1), int32))
    if draw(st.booleans()):
        action["diagnosis_type"] = draw(st.one_of(st.integers(-1, 4), int32))
    if draw(st.booleans()):
        action["network"] = np.array(draw(st.lists(st.one_of(st.integers(-1, 1), small), min_size=3 * N, max_size=3 * N))).reshape(N, 3)
    return action


# A float64 prediction beyond float32's range becomes inf (then refused); numpy
# warns about the cast.
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(actions=st.lists(well_typed_actions(), min_size=1, max_size=6))
def test_well_typed_illegal_actions_never_raise_and_explain(actions):
    env = make_env("hard", "disease")
    env.reset(options={"organism_seed": 6})
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        code = info["error_code"]
        assert type(code) is int and 0 <= code < len(core.ERRORS)
        assert int(obs["last_error"]) == code
        if code:
            assert isinstance(info["error"], str) and info["error"] == core.ERROR_MESSAGES[code]
            assert reward == 0.0 or truncated
        else:
            assert info["error"] is None
        if terminated or truncated:
            break


def test_a_wrapped_gene_code_is_refused_not_read_as_block():
    """257 would be BLOCK after an int8 cast; the env refuses it."""
    env = make_env("medium", "healthy")
    env.reset(seed=0)
    _, _, _, _, info = env.step(experiment([free_genes(env)[0]], 257))
    assert info["error_code"] == core.ERROR_CODES["unknown_code"]
    network = np.zeros((N, 3), np.int64)
    network[0, 0] = 255  # -1 after an int8 cast
    _, _, _, _, info = env.step({"kind": core.SUBMIT_NETWORK, "network": network})
    assert info["error_code"] == core.ERROR_CODES["bad_network"]


# -- determinism and noise ---------------------------------------------------------------------


def replay_script(env) -> list[dict]:
    genes = free_genes(env)
    script = [
        experiment([genes[0]]),
        experiment([genes[0]]),
        experiment(signals=(0,)),
        experiment(genes[:4], BOOST, (1,)),
        {"kind": core.REVEAL_TASK},
        {"kind": core.SUBMIT_PREDICTION, "prediction": np.full(N_PHENOTYPES, 0.4)},
        experiment([genes[0]]),
    ]
    if env.params.disease:
        script += [
            {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": genes[1], "diagnosis_type": 2},
            experiment([genes[1]], BOOST, kind=core.TEST_RESCUE),
            experiment([genes[1]], BOOST, kind=core.TEST_RESCUE),
        ]
    return script + [{"kind": core.END}]


def play(env, seed: int) -> list:
    obs, info = env.reset(seed=seed)
    trace = [(obs, 0.0, info["organism_seed"])]
    for action in replay_script(env):
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["error_code"] == 0, info["error"]
        trace.append((obs, reward, terminated, truncated))
    return trace


@pytest.mark.parametrize("tier, mode", [(t, "healthy") for t in TIERS] + [("hard", "disease")])
def test_replaying_a_seed_reproduces_every_observation_bitwise(tier, mode):
    env = make_env(tier, mode)
    first = play(env, 11)
    other = LucaEnv(tier=tier, mode=mode)
    for trace in (play(other, 11), play(env, 11)):
        assert len(trace) == len(first)
        for (obs_a, *rest_a), (obs_b, *rest_b) in zip(first, trace):
            assert rest_a == rest_b
            assert set(obs_a) == set(obs_b)
            for name in obs_a:
                assert obs_a[name].dtype == obs_b[name].dtype
                assert obs_a[name].tobytes() == obs_b[name].tobytes(), name


@pytest.mark.parametrize("tier, mode", [(t, "healthy") for t in TIERS] + [("hard", "disease")])
def test_repeated_experiments_give_different_noisy_phenotypes(tier, mode):
    env = make_env(tier, mode)
    trace = play(env, 11)
    first, second = trace[1][0], trace[2][0]  # the same single BLOCK, twice
    assert not np.array_equal(first["last_phenotypes"], second["last_phenotypes"])
    # The noise is small: the two measurements agree to a few sigma.
    assert np.max(np.abs(first["last_phenotypes"] - second["last_phenotypes"])) < 0.2
    if mode == "disease":
        rescue_a, rescue_b = trace[-3][0], trace[-2][0]
        assert not np.array_equal(rescue_a["last_phenotypes"], rescue_b["last_phenotypes"])


# -- rewards ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode, credit", [("healthy", 1 / 2), ("disease", 1 / 6)])
def test_exact_prediction_earns_its_task_credit(mode, credit):
    env = make_env("medium", mode)
    env.reset(seed=8)
    truth = hidden(env).task_truth
    total = 0.0
    env.step({"kind": core.REVEAL_TASK})
    _, reward, *_ = env.step({"kind": core.SUBMIT_PREDICTION, "prediction": truth[0]})
    assert reward == pytest.approx(credit, abs=1e-6)
    total += reward
    env.step({"kind": core.REVEAL_TASK})
    wrong = np.where(truth[1] > 0.5, truth[1] - 0.3, truth[1] + 0.3).astype(np.float32)
    _, reward, *_ = env.step({"kind": core.SUBMIT_PREDICTION, "prediction": wrong})
    assert reward == 0.0
    _, reward, terminated, _, info = env.step({"kind": core.END})
    total += reward
    assert terminated and reward == 0.0
    assert info["scores"]["prediction"] == pytest.approx(0.5, abs=1e-6)
    assert total == pytest.approx(info["scores"]["composite"], abs=1e-6)


@pytest.mark.parametrize("tier", TIERS)
def test_correct_diagnosis_scores_one_and_pays_a_third_at_the_end(tier):
    env = make_env(tier, "disease")
    env.reset(seed=5)
    o = hidden(env)
    total = 0.0
    for t in range(2):
        env.step({"kind": core.REVEAL_TASK})
        _, reward, *_ = env.step({"kind": core.SUBMIT_PREDICTION, "prediction": o.task_truth[t]})
        total += reward
    _, reward, *_ = env.step(
        {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": int(o.malfunction_target), "diagnosis_type": int(o.malfunction_type)}
    )
    assert reward == 0.0  # withheld until the end
    for gene in free_genes(env)[:3]:
        _, reward, *_ = env.step(experiment([gene], BLOCK, kind=core.TEST_RESCUE))
        assert reward == 0.0
    _, reward, terminated, _, info = env.step({"kind": core.END})
    total += reward
    scores = info["scores"]
    assert terminated and scores["diagnosis"] == 1.0 and scores["prediction"] == 1.0
    assert reward == pytest.approx((1.0 + scores["rescue"]) / 3, abs=1e-6)
    assert reward >= 1 / 3 - 1e-6
    assert total == pytest.approx(scores["composite"], abs=1e-6)
    assert scores["n_alt"] == int(o.n_alt)
