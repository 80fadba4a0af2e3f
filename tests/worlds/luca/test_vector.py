"""LucaVectorEnv and the pure rollout (first part of the batched-rollout work)."""

import gymnasium as gym
import jax
import numpy as np
import pytest

import luca_gym  # noqa: F401  (registers the environments)
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.baselines.batched import causal_sweep_policy, heuristic_policy, random_policy, task_directed_policy
from luca_gym.worlds.luca.envs import LucaEnv, LucaVectorEnv
from luca_gym.worlds.luca.functional import organism_batch, rollout
from luca_gym.harness import run_session
from luca_gym.worlds.luca.evaluation import luca_spec

B = 6
POOL = 16  # a pool small enough to generate in a test (the default 1024: benchmarks/rollout.py)


def end_all(b):
    return {"kind": np.full(b, core.END)}


def test_make_vec_reaches_the_vector_env():
    env = gym.make_vec("luca_gym/Luca-v0", num_envs=B, tier="easy", mode="healthy")
    assert isinstance(env, LucaVectorEnv)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert env.organisms == "pool" and env.episodes.pool_size == 1024 and env.episodes.seeds[0] == 10_000


def test_observations_stay_in_the_batched_space():
    env = LucaVectorEnv(B, "hard", "disease", organisms="fresh")
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert len(set(info["organism_seed"].tolist())) == B
    codes = np.zeros((B, 20), np.int64)
    codes[np.arange(B), np.arange(B)] = 1
    obs, reward, terminated, truncated, info = env.step({"kind": np.zeros(B, np.int64), "gene_codes": codes})
    assert env.observation_space.contains(obs)
    assert reward.shape == (B,) and terminated.dtype == bool and truncated.dtype == bool
    assert info["error_code"].shape == (B,)


def test_next_step_autoreset_draws_new_organisms():
    env = LucaVectorEnv(B, "easy", "healthy", organisms="fresh")
    obs, info = env.reset(seed=0)
    first = info["organism_seed"].copy()
    codes = np.eye(20, dtype=np.int64)[np.arange(B)]
    obs, *_ = env.step({"kind": np.zeros(B, np.int64), "gene_codes": codes})
    assert (obs["budget_left"] == 30).all()
    obs, reward, terminated, truncated, info = env.step(end_all(B))
    assert terminated.all() and info["_composite"].all()
    np.testing.assert_array_equal(info["organism_seed"], first)
    obs, reward, terminated, truncated, info = env.step(end_all(B))  # ignored: this step resets
    assert not terminated.any() and (reward == 0).all()
    assert (obs["budget_left"] == 31).all() and not obs["ended"].any()
    assert not set(env.organism_seeds.tolist()) & set(first.tolist())


@pytest.mark.parametrize("organisms", ["pool", "fresh"])
def test_same_step_autoreset_returns_the_final_observation_in_info(organisms):
    env = LucaVectorEnv(B, "easy", "healthy", autoreset_mode="same_step", organisms=organisms, pool_size=POOL)
    env.reset(seed=1)
    first = env.organism_seeds.copy()
    obs, reward, terminated, truncated, info = env.step(end_all(B))
    assert terminated.all() and info["_final_obs"].all()
    assert info["final_obs"]["ended"].all() and not obs["ended"].any()
    np.testing.assert_array_equal(info["organism_seed"], first)
    assert (obs["budget_left"] == 31).all()
    if organisms == "pool":
        assert all(10_000 <= s < 10_000 + POOL for s in env.organism_seeds)


def test_rollout_random_matches_the_single_env_harness_in_healthy_mode():
    """The jittable random baseline (healthy: reveal, predict 0.5, end) gives the
    per-session harness's composite score, seed for seed."""
    params = core.make_params("easy", 20, "healthy")
    seeds = list(range(8))
    organisms, keys = organism_batch(seeds, "easy", 20, "healthy")
    total, composite, ended = rollout(random_policy(params), jax.random.PRNGKey(0), organisms, keys, params, 8)
    assert np.asarray(ended).all()
    env = LucaEnv("easy", "healthy")
    harness = [run_session(make_policy("random"), luca_spec("random", "easy", "healthy", 20, s), env)["scores"]["composite"] for s in seeds]
    np.testing.assert_allclose(np.asarray(composite), harness, atol=1e-6)
    np.testing.assert_allclose(np.asarray(total), np.asarray(composite), atol=1e-6)


def test_rollout_random_disease_sessions_end_without_refusals():
    params = core.make_params("medium", 20, "disease")
    organisms, keys = organism_batch(range(6), "medium", 20, "disease")
    total, composite, ended = rollout(random_policy(params), jax.random.PRNGKey(1), organisms, keys, params, 8)
    assert np.asarray(ended).all()
    np.testing.assert_allclose(np.asarray(total), np.asarray(composite), atol=1e-6)


@pytest.mark.parametrize(
    "actions, field",
    [
        ({"kind": np.zeros(B + 1, np.int64)}, "kind"),
        ({"kind": np.zeros(B, np.int64), "gene_codes": np.zeros((B, 19), np.int64)}, "gene_codes"),
        ({"kind": np.zeros(B, np.int64), "bogus": 1}, "bogus"),
        ({"gene_codes": np.zeros((B, 20), np.int64)}, "kind"),
    ],
)
def test_malformed_batched_actions_raise_naming_the_field(actions, field):
    env = LucaVectorEnv(B, "easy", "healthy", pool_size=POOL)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=field):
        env.step(actions)


def test_bad_construction_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        LucaVectorEnv(0)
    with pytest.raises(ValueError, match="autoreset_mode"):
        LucaVectorEnv(2, autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="organisms: 'stale' not allowed; allowed 'pool', 'fresh'"):
        LucaVectorEnv(2, organisms="stale")


SHARD_SCRIPT = """
import sys
import jax, numpy as np
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.baselines.batched import random_policy
from luca_gym.worlds.luca.functional import rollout
from luca_gym.worlds.luca.types import OrganismArrays
assert len(jax.local_devices()) == 2, jax.local_devices()
saved = np.load(sys.argv[1])
organisms = OrganismArrays(**{k[2:]: saved[k] for k in saved.files if k.startswith("o_")})
keys = saved["keys"]
params = core.make_params("medium", 20, "disease")
policy = random_policy(params)
plain = rollout(policy, jax.random.PRNGKey(4), organisms, keys, params, 8)
sharded = rollout(policy, jax.random.PRNGKey(4), organisms, keys, params, 8, shard=True)
assert len(sharded[1].sharding.device_set) == 2
for a, b in zip(plain, sharded):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
three = jax.tree_util.tree_map(lambda x: x[:3], organisms)
try:
    rollout(policy, jax.random.PRNGKey(4), three, keys[:3], params, 8, shard=True)
except ValueError as exc:
    assert "batch" in str(exc)
else:
    raise AssertionError("an uneven batch was accepted")
print("sharded ok")
"""


@pytest.mark.slow
def test_sharded_and_unsharded_rollouts_agree_on_two_cpu_devices(tmp_path):
    """The rollout sharded over two CPU devices (a process of its own, for the
    device count) equals the unsharded one; the organisms come from this
    process, generated with the shapes the other tests compile."""
    import dataclasses
    import os
    import subprocess
    import sys

    organisms, keys = organism_batch(range(8), "medium", 20, "disease")
    path = tmp_path / "organisms.npz"
    np.savez(path, keys=np.asarray(keys), **{f"o_{f.name}": np.asarray(getattr(organisms, f.name))
                                              for f in dataclasses.fields(organisms)})
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SHARD_SCRIPT, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sharded ok" in out.stdout


@pytest.mark.parametrize(
    "agent, tier, mode",
    [
        ("heuristic", "easy", "healthy"),
        ("heuristic", "hard", "healthy"),
        ("heuristic", "medium", "disease"),
        ("heuristic", "hard", "disease"),
        ("causal-sweep", "medium", "healthy"),  # the README's GPU block's program (batch 6, 48 steps)
        ("causal-sweep", "hard", "healthy"),
        ("causal-sweep", "easy", "disease"),
        ("causal-sweep", "hard", "disease"),
        ("task-directed", "medium", "healthy"),
        ("task-directed", "hard", "disease"),
    ],
)
def test_batched_baseline_matches_the_single_env_harness_score_for_score(agent, tier, mode):
    policies = {"heuristic": heuristic_policy, "causal-sweep": causal_sweep_policy, "task-directed": task_directed_policy}
    params = core.make_params(tier, 20, mode)
    seeds = list(range(6))
    organisms, keys = organism_batch(seeds, tier, 20, mode)
    total, composite, ended = rollout(policies[agent](params), jax.random.PRNGKey(0), organisms, keys, params, 48)
    assert np.asarray(ended).all()
    env = LucaEnv(tier, mode)
    records = [run_session(make_policy(agent), luca_spec(agent, tier, mode, 20, s), env) for s in seeds]
    np.testing.assert_allclose(np.asarray(composite), [r["scores"]["composite"] for r in records], atol=1e-6)
    np.testing.assert_allclose(np.asarray(total), np.asarray(composite), atol=1e-5)


def test_reset_to_the_same_seeds_reuses_their_organisms(monkeypatch):
    """Resetting to the seeds of the last explicit reset generates nothing
    (an organism is a pure function of its seed) and starts the same
    sessions; other seeds are generated, drawn ones come from the pool."""
    from luca_gym.worlds.luca import pools  # the env's organisms are its source's (EpisodeOrganisms)

    made = []
    real = pools.organism_batch
    monkeypatch.setattr(pools, "organism_batch", lambda seeds, *a, **k: made.append(list(seeds)) or real(seeds, *a, **k))
    env = LucaVectorEnv(2, "medium", "healthy", pool_size=POOL)
    first, _ = env.reset(options={"organism_seeds": [4, 5]})
    env.step({"kind": np.full(2, core.EXPERIMENT), "gene_codes": np.eye(2, env.params.n_genes, dtype=np.int64)})
    again, _ = env.reset(options={"organism_seeds": [4, 5]})
    assert made == [[4, 5]]
    for key in first:
        np.testing.assert_array_equal(np.asarray(first[key]), np.asarray(again[key]))
    env.reset(options={"organism_seeds": [4, 6]})
    env.reset(seed=0)
    assert made == [[4, 5], [4, 6]]
