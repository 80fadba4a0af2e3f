"""PPO in pure JAX (:mod:`luca_gym.agents.ppo`): the command trains a tiny run
and writes its folder; the checkpoint loads back to the same greedy actions;
the harness evaluates it like any agent; the pieces (masked sampling, GAE,
the config's checks) hold on their own.

One tiny run (16 envs, 2 updates, 16 training organisms) serves the module.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym import functional as F
from luca_gym.agents import FlatPolicy, entity_attention, ppo
from luca_gym.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TINY = ["--tier", "easy", "--mode", "healthy", "--n-genes", "20", "--steps", "1024", "--num-envs", "16", "--pool-size", "16"]


# One worker runs the module: its module fixtures (a trained run) are built once, not once per worker.
pytestmark = pytest.mark.xdist_group("ppo")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder written by ``luca-gym train --algo ppo`` (2 updates of 16 x 32 steps)."""
    out = tmp_path_factory.mktemp("ppo") / "run"
    assert main(["train", "--algo", "ppo", *TINY, "--out", str(out), "--seed", "3", "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def pool():
    return F.make_pool(F.make_env("easy", 20, "healthy", world="luca"), F.training_seeds(16))


def test_train_writes_the_run_folder(run, capsys):
    for name in (ppo.CONFIG_FILE, ppo.PARAMS_FILE, ppo.CURVE_CSV, ppo.CURVE_PNG, ppo.SUMMARY_FILE):
        assert (run / name).is_file(), name
    assert (run / ppo.CURVE_PNG).read_bytes().startswith(PNG_MAGIC)
    meta = json.loads((run / ppo.CONFIG_FILE).read_text())
    assert meta["algo"] == "ppo" and meta["config"]["steps"] == 1024 and meta["config"]["seed"] == 3
    assert meta["config"]["pool_start"] >= len(F.EVAL_SEEDS)
    with open(run / ppo.CURVE_CSV) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["update"]) for r in rows] == [1, 2]
    assert [int(r["env_steps"]) for r in rows] == [512, 1024]
    assert tuple(rows[0]) == ppo.curve_fields("composite")  # LUCA's headline names the score column, as before worlds
    for r in rows:
        for field in ("wall_s", "policy_loss", "value_loss", "entropy", "approx_kl"):
            assert np.isfinite(float(r[field])), field
        assert int(r["episodes"]) > 0 and 0 <= float(r["mean_composite"]) <= 1
    summary = json.loads((run / ppo.SUMMARY_FILE).read_text())
    assert summary["env_steps"] == 1024 and summary["updates"] == 2


def test_checkpoint_round_trip_gives_the_same_actions(run, tmp_path, pool):
    config, network = ppo.load_network(str(run))
    ppo.save(str(tmp_path), config, network)
    again_config, again = ppo.load_network(str(tmp_path))
    assert again_config == config
    for a, b in zip(jax.tree_util.tree_leaves(network), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    policy = ppo.load(str(tmp_path))
    assert isinstance(policy, FlatPolicy) and policy.analyst == config.analyst
    obs, mask = np.array(pool.obs), np.array(pool.mask)
    mask[1::2, : mask.shape[1] // 2] = False  # other legal sets too
    want = np.asarray(ppo.greedy_policy(network, None, jnp.asarray(obs), jnp.asarray(mask)))
    got = [policy.choose(obs[i], mask[i], np.random.default_rng(0)) for i in range(len(obs))]
    assert got == want.tolist()
    assert mask[np.arange(len(obs)), want].all()


def test_harness_evaluates_the_checkpoint(run, tmp_path, capsys):
    out = tmp_path / "results"
    argv = ["eval", "--agents", f"ppo:{run}", "--seeds", "0-1", "--tiers", "easy", "--modes", "healthy",
            "--out", str(out), "--quiet"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert f"ppo:{run}" in table
    records = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in records) == [0, 1] and {r["agent"] for r in records} == {f"ppo:{run}"}
    assert all(0 <= r["scores"]["composite"] <= 1 and r["calls"][-1]["result"] for r in records)


def test_the_checkpoint_refuses_another_size(run):
    policy = ppo.load(str(run))
    with pytest.raises(ValueError, match="trained on easy healthy N=20"):
        policy.choose(np.zeros(40, np.float32), np.ones(10, bool), np.random.default_rng(0))


def test_policies_never_pick_a_masked_action():
    rng = np.random.default_rng(0)

    def layer(a, b):
        return {"w": rng.normal(size=(a, b)).astype(np.float32), "b": np.zeros(b, np.float32)}

    network = {"actor": [layer(6, 8), layer(8, 9)], "actor_linear": {"w": layer(6, 9)["w"]}, "critic": [layer(6, 8), layer(8, 1)]}
    network["actor"][-1]["b"][0] = 100.0  # masked action 0 has by far the largest logit
    obs = rng.normal(size=(512, 6)).astype(np.float32)
    mask = rng.random((512, 9)) < 0.4
    mask[:, 0], mask[:, 5] = False, True
    sampled = np.asarray(ppo.sample_policy(network, jax.random.PRNGKey(2), obs, mask))
    greedy = np.asarray(ppo.greedy_policy(network, None, obs, mask))
    assert mask[np.arange(512), sampled].all() and mask[np.arange(512), greedy].all()
    assert len(set(sampled.tolist())) > 1


def test_gae_matches_the_recursion():
    rng = np.random.default_rng(0)
    t, b, gamma, lam = 7, 3, 0.9, 0.8
    reward, value = rng.normal(size=(t, b)).astype(np.float32), rng.normal(size=(t, b)).astype(np.float32)
    done, last = rng.random((t, b)) < 0.3, rng.normal(size=b).astype(np.float32)
    advantage, target = ppo.gae(jnp.asarray(reward), jnp.asarray(value), jnp.asarray(done), jnp.asarray(last), gamma, lam)
    want = np.zeros((t, b), np.float32)
    following, next_value = np.zeros(b, np.float32), last
    for i in reversed(range(t)):
        live = 1.0 - done[i]
        delta = reward[i] + gamma * next_value * live - value[i]
        following = delta + gamma * lam * live * following
        want[i], next_value = following, value[i]
    np.testing.assert_allclose(np.asarray(advantage), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(target), want + value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"pool_start": 5}, ["pool_start", "evaluation seeds", ">= 20"]),
        ({"steps": 100}, ["steps", "100", "one update"]),
        ({"minibatches": 7}, ["minibatches", "7", "divisor"]),
        ({"ent_coef": -0.1}, ["ent_coef", "-0.1"]),
        ({"gamma": 1.5}, ["gamma", "1.5"]),
        ({"hidden": (64, 0)}, ["hidden", "(64, 0)"]),
        ({"tier": "extreme"}, ["tier", "'extreme'"]),
        ({"analyst": "oracle"}, ["analyst", "'oracle'"]),
    ],
)
def test_config_names_bad_settings(settings, words):
    with pytest.raises(ValueError) as err:
        ppo.PPOConfig("luca", **settings)
    for w in words:
        assert w in str(err.value)


def test_plan_states_the_steps_run_and_that_they_set_the_learning_rate_horizon():
    rounded = ppo.plan(ppo.PPOConfig("luca", tier="easy", steps=1_500_000))
    assert rounded.startswith("1,474,560 env steps = 45 updates x 1024 envs x 32 steps (1,500,000 rounded down to whole updates); ")
    assert ("annealed linearly to 0 over these 45 updates (the step count sets both the run's length and the "
            "schedule's horizon)") in rounded
    exact = ppo.PPOConfig("luca", tier="easy", steps=65_536, num_envs=256, anneal_lr=False)
    assert ppo.plan(exact) == "65,536 env steps = 8 updates x 256 envs x 32 steps; learning rate 0.001, constant"


def test_a_corrupt_checkpoint_is_named(run, tmp_path):
    with pytest.raises(ppo.CheckpointError, match="no such run folder"):
        ppo.load(str(tmp_path / "missing"))
    (tmp_path / ppo.CONFIG_FILE).write_text((run / ppo.CONFIG_FILE).read_text())
    with pytest.raises(ppo.CheckpointError, match="params.npz: missing"):
        ppo.load(str(tmp_path))
    (tmp_path / ppo.PARAMS_FILE).write_bytes(b"not a zip")
    with pytest.raises(ppo.CheckpointError, match="params.npz: corrupt"):
        ppo.load(str(tmp_path))
    meta = json.loads((run / ppo.CONFIG_FILE).read_text())
    meta["config"]["hidden"] = [32, 32]
    (tmp_path / ppo.CONFIG_FILE).write_text(json.dumps(meta))
    (tmp_path / ppo.PARAMS_FILE).write_bytes((run / ppo.PARAMS_FILE).read_bytes())
    with pytest.raises(ppo.CheckpointError, match="has shape"):
        ppo.load(str(tmp_path))
    (tmp_path / ppo.CONFIG_FILE).write_text("{not json")
    with pytest.raises(ppo.CheckpointError, match="config.json: corrupt"):
        ppo.load(str(tmp_path))


PERGENE_RUN = Path(__file__).parent / "data" / "ppo_run_pergene"


def test_a_run_folder_that_says_pergene_loads_as_the_entity_network_and_acts_the_same(tmp_path, capsys, monkeypatch):
    """"pergene", the entity network's former name: ``tests/data/ppo_run_pergene``
    was written by the code before the rename (``ppo.save`` of a dag config,
    n_nodes 4, n_states 3, ``network="pergene"``, width 8, one attention
    block of 2 heads, its weights moved off their initial values by seeded
    noise); ``expected.json`` holds that code's masked logits, values and
    greedy actions on 16 seeded random vectors and masks. The folder loads
    as the entity network and acts as it did; saved again it says "entity";
    ``PPOConfig(network="pergene")`` and ``train --network pergene`` (a
    warm start from the folder included) read as "entity"."""
    old = json.loads((PERGENE_RUN / ppo.CONFIG_FILE).read_text())["config"]
    assert old["network"] == "pergene"
    config, network = ppo.load_network(str(PERGENE_RUN))
    assert config.network == "entity" and isinstance(network, entity_attention.EntityAttentionNetwork)
    assert config == ppo.PPOConfig.from_json({**old, "network": "entity"})
    assert ppo.PPOConfig("dag", config.settings, network="pergene") == ppo.PPOConfig("dag", config.settings, network="entity")
    expected = json.loads((PERGENE_RUN / "expected.json").read_text())
    obs, mask = np.array(expected["obs"], np.float32), np.array(expected["mask"], bool)
    logits, value = jax.jit(ppo.apply)(network, jnp.asarray(obs), jnp.asarray(mask))  # eager, op by op, takes 10 s
    np.testing.assert_allclose(np.asarray(logits), expected["logits"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(value), expected["value"], rtol=1e-5, atol=1e-5)
    policy = ppo.load(str(PERGENE_RUN))
    assert [policy.choose(o, m, np.random.default_rng(0)) for o, m in zip(obs, mask)] == expected["actions"]
    assert len(set(expected["actions"])) > 2  # not one action everywhere
    ppo.save(str(tmp_path / "again"), config, network)
    assert json.loads((tmp_path / "again" / ppo.CONFIG_FILE).read_text())["config"]["network"] == "entity"

    seen = []

    def fake_ppo(config, out, progress, network=None, started_from=None):
        seen.append((config.network, network is not None))
        return {"env_steps": 1, "steps": 1, "wall_s": 1.0, "steps_per_s": None, "final_score": 0.5}

    monkeypatch.setattr(ppo, "train", fake_ppo)
    dag = ["train", "--world", "dag", "--set", "n_nodes=4", "--set", "n_states=3", "--steps", "512", "--num-envs", "16",
           "--quiet", "--network", "pergene"]
    assert main([*dag, "--out", str(tmp_path / "fresh")]) == 0
    assert main([*dag, "--init", str(PERGENE_RUN), "--out", str(tmp_path / "warm")]) == 0
    capsys.readouterr()
    assert seen == [("entity", False), ("entity", True)]


def test_train_starts_from_a_given_network(run):
    config, network = ppo.load_network(str(run))
    still = ppo.PPOConfig("luca", tier="easy", mode="healthy", n_genes=20, steps=512, num_envs=16, pool_size=16,
                          learning_rate=0.0)
    trained = ppo.train(still, network=network)["network"]
    for got, want in zip(jax.tree_util.tree_leaves(trained), jax.tree_util.tree_leaves(network)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_returns_to_go_sum_each_sessions_rewards():
    from luca_gym.agents import bc

    reward = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32)
    done = np.array([[0, 1], [1, 0], [0, 0], [1, 0]], bool)
    rtg, complete = bc.returns_to_go(jnp.asarray(reward), jnp.asarray(done))
    np.testing.assert_allclose(np.asarray(rtg), [[4, 2], [3, 18], [12, 14], [7, 8]])
    np.testing.assert_array_equal(np.asarray(complete), [[True, True], [True, False], [True, False], [True, False]])


@pytest.fixture(scope="module")
def disease_codecs():
    """Easy disease N=20 at budget 8: the default codec and the same with
    rescue_features, each with its pool of the same 8 organisms."""
    plain = F.make_env("easy", 20, "disease", world="luca", budget=8)
    extended = F.make_env("easy", 20, "disease", world="luca", budget=8, rescue_features=True)
    return plain, extended, F.make_pool(plain, F.training_seeds(8)), F.make_pool(extended, F.training_seeds(8))


def test_rescue_features_are_opt_in_and_read_the_measured_table(disease_codecs):
    from luca_gym.worlds.luca.baselines.sweep_flat import _slices, flat_policy
    from luca_gym.worlds.luca.spec import DAMPEN, HEALTHY_HIGH, HEALTHY_LOW, N_PHENOTYPES as P

    plain, extended, pool, extended_pool = disease_codecs
    params = plain.params
    n, s, e = params.n_genes, params.n_signals, DAMPEN * params.n_genes + params.n_signals
    assert plain.settings()["rescue_features"] is False and extended.settings()["rescue_features"] is True
    assert extended.observation_size == plain.observation_size + 2 * e + 5
    teacher = flat_policy(params)
    key = jax.random.PRNGKey(4)
    base = F.flat_rollout(teacher, None, key, plain, pool, 8, 12, trajectories=True)["trajectory"]
    more = F.flat_rollout(teacher, None, key, extended, extended_pool, 8, 12, trajectories=True)["trajectory"]
    d = plain.observation_size
    # The default observation is untouched; the extended one starts with it, bit for bit.
    np.testing.assert_array_equal(np.asarray(more["obs"][..., :d]), np.asarray(base["obs"]))
    np.testing.assert_array_equal(np.asarray(more["action"]), np.asarray(base["action"]))
    vectors, features = np.asarray(base["obs"]).reshape(-1, d), np.asarray(more["obs"][..., d:]).reshape(-1, 2 * e + 5)
    part = {name: vectors[:, where] for name, where in _slices(params).items()}
    singles = part["singles"].reshape(-1, n, DAMPEN, P).transpose(0, 2, 1, 3).reshape(-1, DAMPEN * n, P)
    phenotypes = np.concatenate([singles, part["signals"].reshape(-1, s, P)], axis=1) + part["baseline"][:, None]
    measured = np.concatenate([part["single_mask"].reshape(-1, n, DAMPEN).transpose(0, 2, 1).reshape(-1, DAMPEN * n),
                               part["signal_mask"]], axis=1) > 0
    aberrant = part["aberrant"][:, None] > 0
    count = np.maximum(aberrant.sum(-1), 1)
    fraction = ((phenotypes >= HEALTHY_LOW) & (phenotypes <= HEALTHY_HIGH) & aberrant).sum(-1) / count
    nearness = np.clip(1 - 2 * (np.abs(phenotypes - 0.5) * aberrant).sum(-1) / count, 0, 1)
    assert measured.any()
    np.testing.assert_allclose(features[:, :e], np.where(measured, fraction, 0), atol=1e-6)
    np.testing.assert_allclose(features[:, e:2 * e], np.where(measured, nearness, 0), atol=1e-5)
    # The budget units left, one-hot as 0, 1, 2, 3, 4 or more.
    units = np.minimum(np.round(part["budget_left"][:, 0] * params.budget), 4).astype(int)
    np.testing.assert_array_equal(features[:, 2 * e:], np.eye(5)[units])
    assert set(units) >= {1, 4}
    with pytest.raises(ValueError, match="rescue_features"):
        F.make_env("easy", 20, "disease", world="luca", rescue_features="yes")


def test_train_refuses_a_network_of_other_shapes(run):
    _, network = ppo.load_network(str(run))
    other = ppo.PPOConfig("luca", tier="easy", mode="healthy", n_genes=20, steps=512, num_envs=16, pool_size=16, hidden=(32, 32))
    with pytest.raises(ValueError, match="network: not a network of this config"):
        ppo.train(other, network=network)


# -- the recurrent network (observation="raw": the learner keeps the history) ---------
RAW = {"observation": "raw", "raw_actions": "commit", "n_nodes": 4, "n_states": 3}
RAW_FLAGS = ["--world", "dag", *[f"--set={k}={v}" for k, v in RAW.items()]]


@pytest.fixture(scope="module")
def recurrent_run(tmp_path_factory):
    """A run folder of ``luca-gym train --network recurrent`` (2 updates of 16 x 32 steps) on a small raw dag."""
    out = tmp_path_factory.mktemp("ppo") / "recurrent"
    assert main(["train", "--algo", "ppo", *RAW_FLAGS, "--network", "recurrent", "--steps", "1024", "--num-envs", "16",
                 "--pool-size", "16", "--out", str(out), "--quiet"]) == 0
    return out


def test_the_memory_starts_from_zero_at_each_session():
    network = ppo.make_network(jax.random.PRNGKey(0), ppo.PPOConfig("dag", RAW, network="recurrent", memory_width=8),
                               F.make_env(world="dag", **RAW))
    obs = jax.random.uniform(jax.random.PRNGKey(1), (3, 4 * 4 + 5 * 4 + 2))
    mask = jnp.ones((3, 10), bool)
    carried = jax.random.normal(jax.random.PRNGKey(2), (3, 8))
    fresh = ppo.apply_step(network, jnp.zeros((3, 8)), obs, mask, jnp.zeros(3, bool))
    started = ppo.apply_step(network, carried, obs, mask, jnp.ones(3, bool))
    going = ppo.apply_step(network, carried, obs, mask, jnp.zeros(3, bool))
    assert all(np.allclose(a, b) for a, b in zip(fresh, started))
    assert not np.allclose(going[0], fresh[0])  # the memory matters where a session goes on
    with pytest.raises(ValueError, match="apply_step"):
        ppo.apply(network, obs, mask)


def test_the_update_unrolls_each_trajectory_from_its_first_memory(recurrent_run):
    """At learning rate 0 the update's unroll reproduces every step's
    log-probability of the rollout (approx_kl ~ 0), the second update's
    included, whose sessions began in the first (a memory not carried over,
    or not reset where a session starts, would make them differ)."""
    # The shapes of recurrent_run's (16 envs x 32 steps, 8 minibatches): its compiled update serves.
    config = ppo.PPOConfig("dag", RAW, network="recurrent", steps=1024, num_envs=16, pool_size=16)
    env = config.make_env()
    pool = F.make_pool(env, F.training_seeds(16))
    runner = ppo.init_runner(jax.random.PRNGKey(0), config, env, pool)
    # A policy that leans on its memory (the fresh head's gain 0.01 would hide a memory lost: logits near uniform).
    network = dataclasses.replace(runner.network, actor={k: v * 300 for k, v in runner.network.actor.items()})
    runner = dataclasses.replace(runner, network=network)
    for _ in range(3):
        runner, metrics = ppo.update(runner, pool, ppo.hyperparameters(config, 0.0), env, config.num_steps,
                                     config.epochs, config.minibatches)
        assert abs(float(metrics["approx_kl"])) < 1e-6 and float(metrics["entropy"]) > 0.1
    assert not bool(runner.start.all()) and np.abs(np.asarray(runner.memory)).max() > 0


def test_a_recurrent_run_plays_the_harness_as_the_batch(recurrent_run):
    config, network = ppo.load_network(str(recurrent_run))
    assert config.network == "recurrent" and ppo.is_recurrent(network)
    env = config.make_env()
    seeds = [0, 1, 2, 3, 4]
    batch = jax.device_get(ppo.play_greedy(network, env, env.instances(seeds), env.max_calls))
    assert batch["ended"].all()
    from luca_gym.worlds.graphs.tools import play_dag

    policy = ppo.load(str(recurrent_run))
    for i, seed in enumerate(seeds):
        record = play_dag(policy, seed, **{k: v for k, v in RAW.items() if k not in ("observation", "raw_actions")})
        assert record["scores"] == {k: float(v[i]) if k in ("success", "edge_f1") else int(v[i])
                                    for k, v in batch["scores"].items()}


@pytest.mark.parametrize("settings, hyper, words", [
    ({"n_nodes": 4}, {"network": "recurrent"}, ["network: 'recurrent'", "observation='raw'"]),
    ({}, {"network": "recurrent"}, ["network: 'recurrent'", "observation='raw'"]),
    (RAW, {"network": "lstm"}, ["network: 'lstm' not allowed"]),
    (RAW, {"network": "recurrent", "num_envs": 12, "minibatches": 8, "num_steps": 32}, ["minibatches: 8", "num_envs 12"]),
    (RAW, {"num_envs": 16, "devices": 3}, ["devices: 3 does not divide num_envs 16"]),
])
def test_recurrent_and_device_settings_are_refused_by_name(settings, hyper, words):
    world = "luca" if not settings else "dag"
    with pytest.raises(ValueError) as err:
        ppo.PPOConfig(world, settings, **hyper)
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("flags, words", [
    (["--world", "dag", "--network", "recurrent"], "--network: 'recurrent' remembers"),
    (["--world", "dag", "--network", "gru"], "--network: 'gru' not allowed"),
    ([*RAW_FLAGS, "--network", "recurrent", "--devices", "3"], "--devices: 3 does not divide"),
    ([*RAW_FLAGS, "--devices", "8"], "--devices: 8 not allowed; JAX sees"),
    ([*RAW_FLAGS, "--algo", "bc", "--network", "recurrent"], "--network: recurrent trains with --algo ppo only"),
])
def test_train_refuses_a_bad_policy_or_device_count_in_one_line(flags, words, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", *flags, "--steps", "1024", "--num-envs", "16", "--pool-size", "16", "--out", str(out), "--quiet"]
    assert main(argv if "--algo" in flags else ["train", "--algo", "ppo", *argv[1:]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not out.exists()


def test_a_rollout_refuses_a_device_count_that_does_not_divide_the_envs(pool):
    env = F.make_env("easy", 20, "healthy", world="luca")
    with pytest.raises(ValueError, match="devices: 3 does not divide num_envs 16"):
        F.flat_rollout(F.masked_random, None, jax.random.PRNGKey(0), env, pool, 16, 4, devices=3)
    with pytest.raises(ValueError, match="devices: 8 not allowed; JAX sees"):
        F.flat_rollout(F.masked_random, None, jax.random.PRNGKey(0), env, pool, 16, 4, devices=8)
