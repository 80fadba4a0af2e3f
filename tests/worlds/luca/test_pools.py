"""Organism pools (:mod:`luca_gym.worlds.luca.pools`) and ``LucaVectorEnv``
drawing from them: a stored pool reads back bitwise what ``generate`` gives,
every episode on a pool organism gets a fresh noise key, and
``organisms="fresh"`` keeps one new organism per episode, generated ahead of
need; the settings travel as one LucaConfig. (``LucaSB3VecEnv``'s pool:
tests/test_sb3.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from luca_gym.testing import count_traces
from luca_gym.worlds.luca import core, pools
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.envs import LucaVectorEnv

TIER, MODE, N = "easy", "healthy", 20
SIZE = 8  # a pool small enough to generate in a test
B = 4


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    """A pool store of this test's own, and no pool kept from another test."""
    folder = tmp_path / "pools"
    monkeypatch.setattr(pools, "pool_dir", lambda: str(folder))
    monkeypatch.setattr(pools, "_POOLS", {})
    return folder


def same_bits(a, b) -> list[str]:
    """The fields of two organism batches that differ in shape, dtype or any bit."""
    out = []
    for field in dataclasses.fields(a):
        x, y = np.asarray(getattr(a, field.name)), np.asarray(getattr(b, field.name))
        if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
            out.append(field.name)
    return out


def end_all(b=B):
    return {"kind": np.full(b, core.END)}


def test_a_stored_pool_reads_back_bitwise_what_generate_gives(store, monkeypatch):
    seeds = pools.pool_seeds(SIZE)
    np.testing.assert_array_equal(seeds, np.arange(10_000, 10_000 + SIZE))
    expected = world.generate(seeds, TIER, N, MODE)
    store.mkdir()
    stale = store / f"pool-{TIER}-{MODE}-n{N}-forwards-cpu-10000-{SIZE}-0123456789abcdef01234567.npz"
    stale.write_bytes(b"an entry of an older source")
    made = pools.stored_organisms(seeds, TIER, N, MODE)
    assert not same_bits(made, expected)
    [entry] = store.glob("*.npz")  # the older entry of the same pool was removed
    assert entry != stale

    def no_generation(*args, **kwargs):
        raise AssertionError("a stored pool was generated again")

    monkeypatch.setattr(pools, "_POOLS", {})
    with monkeypatch.context() as m:
        m.setattr(pools.world, "generate", no_generation)
        read = pools.stored_organisms(seeds, TIER, N, MODE)
    assert not same_bits(read, expected)

    entry.write_bytes(entry.read_bytes()[:100])  # damaged: generated again, same bits
    monkeypatch.setattr(pools, "_POOLS", {})
    assert not same_bits(pools.stored_organisms(seeds, TIER, N, MODE), expected)
    assert same_bits(pools.stored_organisms(seeds, TIER, N, MODE, sealed="a secret of sixteen+ chars"), expected)
    assert len(list(store.glob("*.npz"))) == 1  # sealed organisms are never written to disk


def test_the_vector_env_draws_pool_organisms_with_fresh_noise_keys():
    env = LucaVectorEnv(B, TIER, MODE, N, pool_size=SIZE)
    pool = pools.stored_organisms(pools.pool_seeds(SIZE), TIER, N, MODE)
    _, info = env.reset(seed=0)
    first_keys = np.asarray(env._keys).copy()
    seen, keys = list(info["organism_seed"]), [tuple(k) for k in first_keys]
    for _ in range(3):
        env.step(end_all())
        _, _, terminated, _, _ = env.step(end_all())  # the autoreset step
        assert not terminated.any()
        seen += list(env.organism_seeds)
        keys += [tuple(k) for k in np.asarray(env._keys)]
        organisms = env._organisms
        for i, seed in enumerate(env.organism_seeds):
            row = {f.name: np.asarray(getattr(organisms, f.name))[i] for f in dataclasses.fields(organisms)}
            assert all(np.array_equal(v, np.asarray(getattr(pool, k))[seed - 10_000]) for k, v in row.items()), seed
    assert set(seen) <= set(range(10_000, 10_000 + SIZE)) and len(seen) > len(set(seen))  # 16 draws from 8
    assert len(set(keys)) == len(keys)  # an organism met again is measured with other noise
    assert all(tuple(np.asarray(core.noise_key(int(s), TIER, N))) not in keys for s in seen)

    # reset(seed=...) replays the draws, noise keys included; pinned seeds open with their own key.
    _, again = env.reset(seed=0)
    np.testing.assert_array_equal(again["organism_seed"], seen[:B])
    np.testing.assert_array_equal(np.asarray(env._keys), first_keys)
    env.reset(options={"organism_seeds": [10_001, 3, 4, 5]})
    np.testing.assert_array_equal(np.asarray(env._keys)[0], np.asarray(core.noise_key(10_001, TIER, N)))

    # Further autoresets compile nothing new.
    env.step(end_all())
    env.step(end_all())
    with count_traces() as traced:
        for _ in range(2):
            env.step(end_all())
            env.step(end_all())
    assert not traced, traced


def test_fresh_organisms_are_generated_ahead_of_need_and_never_reused(monkeypatch):
    batches = []
    real = pools.organism_batch
    monkeypatch.setattr(pools, "organism_batch", lambda seeds, *a, **k: batches.append(len(seeds)) or real(seeds, *a, **k))
    env = LucaVectorEnv(B, TIER, MODE, N, organisms="fresh", generation_batch=6)
    _, info = env.reset(seed=1)
    seen = list(info["organism_seed"])
    for _ in range(2):
        env.step(end_all())
        env.step(end_all())
        seen += list(env.organism_seeds)
        np.testing.assert_array_equal(np.asarray(env._keys), np.asarray(core.noise_keys(env.organism_seeds, TIER, N)))
    assert len(set(seen)) == len(seen) == 3 * B
    assert batches == [6, 6]  # reset: 6 made, 4 used; first autoreset: 6 more; the second from the stock


@pytest.mark.parametrize("kwargs, name", [({"organisms": "stale"}, "organisms"), ({"organisms": None}, "organisms"),
                                          ({"pool_size": 0}, "pool_size"), ({"pool_size": 2**31}, "pool_size"),
                                          ({"generation_batch": 0}, "generation_batch")])
def test_bad_pool_arguments_raise_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        LucaVectorEnv(2, TIER, MODE, N, **kwargs)


def test_episode_organisms_take_the_settings_as_one_config():
    with pytest.raises(ValueError, match="settings"):
        pools.EpisodeOrganisms("pool", (TIER, N, MODE), None)
    episodes = pools.EpisodeOrganisms("pool", LucaConfig(tier=TIER, mode=MODE, n_genes=N, budget=12), None, pool_size=2)
    assert (episodes.tier, episodes.mode, episodes.n_genes, episodes.backwards) == (TIER, MODE, N, False)


def test_the_organism_memo_keys_on_the_organism_settings_not_the_budget():
    from luca_gym.worlds.luca.session import cached_organism, config_organism

    organism = config_organism(0, LucaConfig(tier=TIER, mode=MODE, n_genes=N, budget=12))
    assert organism is config_organism(0, LucaConfig(tier=TIER, mode=MODE, n_genes=N)) is cached_organism(0, TIER, N, MODE)
    assert not same_bits(organism.arrays, world.make_organism(0, TIER, N, MODE).arrays)
