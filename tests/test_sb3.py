"""``LucaSB3VecEnv`` and Maskable PPO: the SB3 VecEnv over the JAX batch, its
same-step autoreset on fresh organisms, agreement with ``LucaFlatEnv``, SB3's
own ``make_vec_env`` on the Gymnasium ids, and a short training run (the JAX
PPO's curve files) loaded back into the evaluation harness."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.env_util import make_vec_env

from luca_gym.testing import count_traces
from luca_gym import harness
from luca_gym.agents import FlatPolicy
from luca_gym.agents import ppo
from luca_gym import functional
from luca_gym.agents.sb3 import PPO_SETTINGS, LinearPathPolicy, load_policy, plan, train_maskable_ppo
from luca_gym.envs.sb3_vec import FlatSB3VecEnv
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.envs import LucaFlatEnv, LucaSB3VecEnv
from luca_gym.worlds.luca.envs.env import RGB_SHAPE
from luca_gym.worlds.luca.envs.sb3 import TRAINING_SEED_LOW
from luca_gym.worlds.luca.evaluation import luca_spec

N = 20
B = 4
POOL = 8  # a pool small enough to generate in a test


def masked_random(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One legal action per row of ``masks`` bool (B, K)."""
    return np.array([rng.choice(np.flatnonzero(row)) for row in masks])


@pytest.fixture()
def venv():
    env = LucaSB3VecEnv(B, "easy", "healthy", N, seed=0, organisms="fresh")
    env.reset()
    return env


def test_spaces_masks_and_sb3_contrib_finds_them(venv):
    lay = flat.layout(venv.params)
    obs = venv.reset()
    assert obs.shape == (B, flat.observation_size(venv.params)) and obs.dtype == np.float32
    assert venv.action_space.n == lay.size
    masks = get_action_masks(venv)
    assert is_masking_supported(venv)
    assert masks.shape == (B, lay.size) and masks.dtype == np.bool_
    np.testing.assert_array_equal(masks, venv.action_masks())
    seeds = venv.get_attr("organism_seed")
    assert all(TRAINING_SEED_LOW <= s for s in seeds) and len(set(seeds)) == B
    assert venv.get_attr("n_genes", indices=[1, 2]) == [N, N]
    assert venv.env_is_wrapped(object) == [False] * B
    with pytest.raises(AttributeError, match="render"):
        venv.env_method("render")
    with pytest.raises(AttributeError, match="tier"):
        venv.set_attr("tier", "hard")


@pytest.mark.parametrize("organisms", ["pool", "fresh"])
def test_seed_then_reset_replays_the_organisms(organisms):
    env = LucaSB3VecEnv(B, "easy", "healthy", N, min_organism_seed=123, organisms=organisms, pool_size=POOL)
    env.seed(7)
    first = env.reset()
    seeds = list(env.organism_seeds)
    keys = np.asarray(env.state.noise_key).copy()
    env.seed(7)
    np.testing.assert_array_equal(env.reset(), first)
    assert list(env.organism_seeds) == seeds and all(s >= 123 for s in seeds)
    assert [i["organism_seed"] for i in env.reset_infos] == seeds
    np.testing.assert_array_equal(np.asarray(env.state.noise_key), keys)
    if organisms == "pool":
        assert all(s < 123 + POOL for s in seeds)
    assert env.pool_size == (POOL if organisms == "pool" else None)  # what the env draws from, as FlatSB3VecEnv says it


def test_pool_episodes_draw_pool_organisms_with_fresh_noise_keys_beside_pinned_ones():
    """The default ``organisms="pool"``: every new episode on a pool organism
    (seeds min_organism_seed + 0..pool_size-1) with a fresh noise key; a
    pinned sub-env opens with its seed's own key, as LucaFlatEnv does."""
    from luca_gym.worlds.luca import core, pools

    env = LucaSB3VecEnv(B, "easy", "healthy", N, pool_size=POOL, seed=0)
    assert env.organisms == "pool"
    env.set_options([{"organism_seed": 3}, {}, {}, {}])
    env.reset()
    assert env.organism_seeds[0] == 3
    np.testing.assert_array_equal(np.asarray(env.state.noise_key)[0], np.asarray(core.noise_key(3, "easy", N)))
    pool = pools.stored_organisms(pools.pool_seeds(POOL), "easy", N, "healthy")
    lay = flat.layout(env.params)
    seen, keys = [], set()
    for _ in range(4):
        _, _, dones, infos = env.step(np.full(B, lay.end))
        assert dones.all()
        for i, seed in enumerate(env.organism_seeds):
            assert TRAINING_SEED_LOW <= seed < TRAINING_SEED_LOW + POOL
            weights = np.asarray(env.state.organism.weights)[i]
            np.testing.assert_array_equal(weights, np.asarray(pool.weights)[seed - TRAINING_SEED_LOW])
            keys.add(tuple(np.asarray(env.state.noise_key)[i]))
        seen += list(env.organism_seeds)
    assert len(seen) > len(set(seen)) and len(keys) == len(seen)  # 16 draws from 8, each with its own noise


def test_same_step_autoreset_opens_a_fresh_organism(venv):
    lay = flat.layout(venv.params)
    before = venv.organism_seeds.copy()
    actions = np.full(B, lay.reveal)
    actions[0] = lay.end
    obs, rewards, dones, infos = venv.step(actions)
    np.testing.assert_array_equal(dones, [True, False, False, False])
    info = infos[0]
    terminal = info["terminal_observation"]
    assert terminal[-1] == 1.0  # the vector's last entry: ended
    assert obs[0, -1] == 0.0 and obs[0, 0] == 1.0  # a new session with its whole budget
    assert info["episode"]["l"] == 1 and info["episode"]["r"] == rewards[0]
    assert info["TimeLimit.truncated"] is False
    assert info["scores"]["composite"] == pytest.approx(info["episode"]["r"])
    assert info["organism_seed"] == before[0]
    fresh = venv.organism_seeds[0]
    assert fresh != before[0] and fresh not in before and fresh >= TRAINING_SEED_LOW
    np.testing.assert_array_equal(venv.organism_seeds[1:], before[1:])
    assert all("terminal_observation" not in i and i["error_code"] == 0 for i in infos[1:])
    assert venv.action_masks()[0, lay.reveal] and not venv.action_masks()[1, lay.reveal]

    # Further episodes on further fresh organisms compile nothing new.
    seen = set(venv.organism_seeds)
    with count_traces() as traced:
        for _ in range(3):
            _, _, dones, _ = venv.step(np.full(B, lay.end))
            assert dones.all() and not seen & set(venv.organism_seeds)
            seen |= set(venv.organism_seeds)
    assert not {"step", "reset"} & set(traced)


@pytest.mark.parametrize("actions", [np.zeros(B, np.float32), np.zeros(B + 1, np.int64), np.full(B, -1), [0, 1, 2, 10**6]])
def test_malformed_actions_raise_and_change_nothing(venv, actions):
    state = venv.state
    with pytest.raises(ValueError, match="actions"):
        venv.step(actions)
    assert venv.state is state


def test_agrees_with_the_single_flat_env_on_the_same_organisms():
    """Pinned organisms, the same masked random actions: the batch and B
    single envs see the same observations, masks and rewards, until the
    first episode ends (where the batch moves on to a drawn organism)."""
    venv = LucaSB3VecEnv(B, "easy", "healthy", N, pool_size=POOL)
    venv.set_options([{"organism_seed": s} for s in range(B)])
    obs = venv.reset()
    singles = [LucaFlatEnv("easy", "healthy", N) for _ in range(B)]
    first = [env.reset(options={"organism_seed": s}) for s, env in enumerate(singles)]
    np.testing.assert_allclose(obs, np.stack([o for o, _ in first]), atol=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(60):
        actions = masked_random(venv.action_masks(), rng)
        obs, rewards, dones, infos = venv.step(actions)
        results = [env.step(int(a)) for env, a in zip(singles, actions)]
        for i, (o, r, terminated, truncated, info) in enumerate(results):
            np.testing.assert_allclose(infos[i].get("terminal_observation", obs[i]), o, atol=1e-6)
            assert rewards[i] == pytest.approx(r, abs=1e-6) and dones[i] == (terminated or truncated)
            if dones[i]:
                assert infos[i]["scores"]["composite"] == pytest.approx(info["scores"]["composite"], abs=1e-6)
            else:
                np.testing.assert_array_equal(venv.action_masks()[i], singles[i].action_masks())
        if dones.any():
            break
    else:
        pytest.fail("no random masked episode ended in 60 calls")


def test_maskable_ppo_trains_saves_and_runs_in_the_harness(tmp_path, monkeypatch):
    stray = tmp_path / "sb3-default-log"
    monkeypatch.setenv("SB3_LOGDIR", str(stray))  # where SB3's default logger would make its folder
    rows = []
    summary = train_maskable_ppo("easy", "healthy", N, world="luca", steps=300, num_envs=B, out=str(tmp_path), seed=0, pool_size=POOL,
                                 progress=rows.append)
    assert plan(300, B).startswith("512 env steps = 2 updates x 4 envs x 64 steps (300 rounded up to whole rollouts)")
    assert plan(300, B, POOL).endswith("a pool of 8 training instances") and plan(300, B, None).endswith("per episode")
    assert summary["steps"] == 512 and summary["updates"] == 2 and summary["steps_per_s"] > 0
    assert not stray.exists()  # the run folder is the record: no SB3-<date> folder left in the temp folder
    assert [(r["update"], r["updates"], r["env_steps"]) for r in rows] == [(1, 2, 256), (2, 2, 512)]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["world"] == "luca"
    assert {k: config["settings"][k] for k in ("tier", "mode", "n_genes", "analyst")} == {
        "tier": "easy", "mode": "healthy", "n_genes": N, "analyst": "logit-additive"}
    assert config["min_instance_seed"] == TRAINING_SEED_LOW and config["pool_size"] == POOL
    assert config["ppo"]["gamma"] == 1.0 and config["policy"] == "LinearPathPolicy"
    assert (tmp_path / ppo.CURVE_PNG).read_bytes().startswith(b"\x89PNG")
    with open(tmp_path / ppo.CURVE_CSV) as f:
        curve = list(csv.DictReader(f))
    assert tuple(curve[0]) == ppo.curve_fields("composite")  # the JAX PPO's columns
    assert [int(r["env_steps"]) for r in curve] == [256, 512] and sum(int(r["episodes"]) for r in curve) == summary["episodes"]
    for field in ("wall_s", "policy_loss", "value_loss", "entropy", "approx_kl"):
        assert np.isfinite(float(curve[-1][field])), field

    for path in (str(tmp_path), str(tmp_path / "model.zip")):
        policy = load_policy(path)
        assert isinstance(policy, FlatPolicy) and policy.analyst == "logit-additive" and policy.name == f"sb3:{path}"
    session = luca_spec(policy.name, "easy", "healthy", N, seed=0)
    record = harness.run_session(policy, session)
    assert not record["truncated"] and 0.0 <= record["scores"]["composite"] <= 1.0
    assert record["return"] == pytest.approx(record["scores"]["composite"], abs=1e-5)
    assert len(record["calls"]) <= record["budget"] + 7

    # Sampling from the masked policy draws from the harness's per-session RNG: a session replays.
    sampling = load_policy(str(tmp_path), deterministic=False)
    first, again = (harness.run_session(sampling, session)["calls"] for _ in range(2))
    assert first == again

    model = MaskablePPO.load(str(tmp_path / "model.zip"), device="cpu")
    assert isinstance(model.policy, LinearPathPolicy)  # saved and loaded back with its linear path

    # A run written before runs kept their codec's settings apart (LUCA's at its top level, the world "luca" or
    # unnamed) loads as the same codec, read through the world's flat codec factory, and acts the same.
    rng = np.random.default_rng(0)
    vectors = rng.uniform(0, 1, (6, policy.codec.observation_size)).astype(np.float32)
    masks = rng.random((6, policy.codec.num_actions)) < 0.5
    masks[:, 0] = True
    acts = [policy.choose(v, m, rng) for v, m in zip(vectors, masks)]
    old = {k: v for k, v in config.items() if k not in ("settings", "min_instance_seed", "pool_size", "policy")}
    old.update({k: config["settings"][k] for k in ("tier", "mode", "n_genes", "budget", "analyst")}, min_organism_seed=10_000)
    for world in ({"world": "luca"}, {}):
        folder = tmp_path / f"old{len(world)}"
        folder.mkdir()
        (folder / "model.zip").write_bytes((tmp_path / "model.zip").read_bytes())
        (folder / "config.json").write_text(json.dumps({**{k: v for k, v in old.items() if k != "world"}, **world}))
        legacy = load_policy(str(folder))
        assert legacy.codec.settings() == policy.codec.settings()
        assert [legacy.choose(v, m, rng) for v, m in zip(vectors, masks)] == acts


def test_linear_path_policy_adds_a_linear_map_from_the_observation_to_the_logits():
    """The action head reads the MLP's latent and the observation itself:
    its logits are head(MLP(obs)) + W obs, and W starts near zero."""
    import torch

    venv = LucaSB3VecEnv(B, "easy", "healthy", N, pool_size=POOL, seed=0)
    model = MaskablePPO(LinearPathPolicy, venv, seed=0, device="cpu", **dict(PPO_SETTINGS, batch_size=64))
    policy = model.policy
    size, hidden = venv.observation_space.shape[0], policy.mlp_extractor.policy_net[-2].out_features
    assert policy.action_net.in_features == hidden + size and policy.mlp_extractor.latent_dim_vf == hidden
    obs = torch.as_tensor(venv.reset())
    with torch.no_grad():
        latent_pi, _ = policy.mlp_extractor(policy.extract_features(obs))
        head, path = policy.action_net.weight[:, :hidden], policy.action_net.weight[:, hidden:]
        expected = policy.mlp_extractor.policy_net(obs) @ head.T + obs @ path.T + policy.action_net.bias
        torch.testing.assert_close(policy.action_net(latent_pi), expected)
        assert 0 < float(path.abs().max()) < 0.05


def test_flat_vec_env_pool_draws_every_episode_from_its_instances():
    """``pool_size`` M: episodes only on the M instances from min_instance_seed,
    each drawn again and again; without it, never the same instance twice."""
    codec = functional.make_env("easy", N, "healthy", world="luca")
    env = FlatSB3VecEnv(codec, B, min_instance_seed=500, seed=0, pool_size=3)
    env.reset()
    end = np.full(B, flat.layout(codec.params).end)
    seen = list(env.get_attr("instance_seed"))
    for _ in range(3):
        assert env.step(end)[2].all()
        seen += list(env.get_attr("instance_seed"))
    assert set(seen) == {500, 501, 502}
    # A pool of one: every sub-env on the same instance, each session with noise of its own.
    one = FlatSB3VecEnv(codec, B, min_instance_seed=500, seed=0, pool_size=1)
    opening = one.reset()
    assert (opening == opening[0]).all()  # the same opening everywhere (the baseline is the instance's)
    experiment = int(np.argmax(one.action_masks()[0][: flat.layout(codec.params).targets]))
    measured = one.step(np.full(B, experiment))[0]  # one experiment in every sub-env
    assert len({row.tobytes() for row in measured}) == B
    with pytest.raises(ValueError, match="pool_size"):
        FlatSB3VecEnv(codec, B, pool_size=0)


def test_load_policy_refuses_a_folder_without_a_run_or_with_a_damaged_one(tmp_path):
    with pytest.raises(ValueError, match="config.json|model.zip"):
        load_policy(str(tmp_path))
    (tmp_path / "model.zip").write_bytes(b"not a zip")
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(ValueError, match="config.json"):
        load_policy(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"analyst": "logit-additive", "n_genes": N}))
    with pytest.raises(ValueError, match="model.zip.*not a readable MaskablePPO model"):
        load_policy(str(tmp_path / "model.zip"))


@pytest.mark.parametrize("kwargs", [{"num_envs": 0}, {"min_organism_seed": -1}, {"min_organism_seed": 2**40},
                                    {"generation_batch": 0}, {"analyst": "oracle"}, {"tier": "impossible"},
                                    {"organisms": "stale"}, {"pool_size": 0}])
def test_bad_arguments_raise_naming_them(kwargs):
    args = {"num_envs": 2, **kwargs}
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LucaSB3VecEnv(**args)


def test_sb3_make_vec_env_trains_on_the_flat_id_and_renders_every_id():
    """SB3's own ``make_vec_env`` asks for ``render_mode="rgb_array"``: both
    ids accept it; MaskablePPO finds the flat env's masks through SB3's Monitor."""
    kwargs = dict(tier="easy", mode="healthy", n_genes=N)
    venv = make_vec_env("luca_gym/LucaFlat-v0", n_envs=2, env_kwargs=kwargs, seed=0)
    model = MaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    assert model.num_timesteps == 64 and get_action_masks(venv).shape == (2, venv.action_space.n)
    assert [image.shape for image in venv.get_images()] == [RGB_SHAPE] * 2
    dict_venv = make_vec_env("luca_gym/Luca-v0", n_envs=2, env_kwargs=kwargs, seed=0)
    assert dict_venv.reset()["budget_left"].shape == (2,)
    assert [image.shape for image in dict_venv.get_images()] == [RGB_SHAPE] * 2
