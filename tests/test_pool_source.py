"""The functional env's pool (:func:`luca_gym.functional.make_pool`) is
built from the one instance source (:mod:`luca_gym.pools`): its contents
(opened start states, observations, masks, seeds) replay bit for bit what
they were when the fixture was recorded, for LUCA (N=10 and 20, healthy and
disease: organisms read from the disk store), the dag and relational worlds
and the equation world. The hashes in ``tests/data/functional_pool.json``
were recorded on this platform's CPU (``python tests/test_pool_source.py
--record``: only for a change meant to move these pools).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import jax
import numpy as np
import pytest

from luca_gym import functional as F

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "functional_pool.json")
SEEDS = [10_000, 10_001, 10_002, 10_005, 3, 10_003]  # training seeds, one evaluation seed, out of order
CASES = {
    "luca-easy-10-healthy": dict(world="luca", tier="easy", n_genes=10, mode="healthy"),
    "luca-easy-10-disease": dict(world="luca", tier="easy", n_genes=10, mode="disease"),
    "luca-medium-20-healthy": dict(world="luca", tier="medium", n_genes=20, mode="healthy"),
    "luca-easy-20-disease": dict(world="luca", tier="easy", n_genes=20, mode="disease"),
    "dag": dict(world="dag", n_nodes=3, n_states=3),
    "relational": dict(world="relational"),
    "equation": dict(world="equation"),
    "luca-ppo-default": dict(world="luca", tier="easy", n_genes=20, mode="healthy"),  # PPO's default pool: 1024 seeds
}
QUICK = {"luca-easy-10-healthy", "dag"}  # the rest compile a program each (about 5 s here): the slow tier


def pool_digest(pool: F.Pool) -> str:
    """sha256 over the pool's arrays (start state leaves in tree order, then
    observations, masks, seeds): dtype, shape and bytes of each."""
    digest = hashlib.sha256()
    leaves = jax.tree_util.tree_leaves(jax.device_get((pool.start, pool.obs, pool.mask, pool.seeds)))
    for leaf in leaves:
        array = np.asarray(leaf)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def build(case: str, **kwargs) -> F.Pool:
    return F.make_pool(F.make_env(**CASES[case]), None if case == "luca-ppo-default" else SEEDS, **kwargs)


@pytest.mark.parametrize("case", [c if c in QUICK else pytest.param(c, marks=pytest.mark.slow) for c in CASES])
def test_the_pool_replays_its_recorded_contents(case):
    with open(FIXTURE) as f:
        recorded = json.load(f)
    assert pool_digest(build(case)) == recorded[case]


def test_luca_pool_is_read_from_the_store_on_a_second_run(monkeypatch, tmp_path):
    """A second process's pool opens from the disk store: no organism is generated."""
    from luca_gym.worlds.luca import pools
    from luca_gym.worlds.luca import generator

    monkeypatch.setattr(pools, "pool_dir", lambda: str(tmp_path))
    monkeypatch.setattr(pools, "_POOLS", {})
    first = pool_digest(build("luca-easy-10-healthy"))  # generates the organisms and stores them
    assert len(list(tmp_path.glob("pool-easy-healthy-n10-*.npz"))) == 1
    monkeypatch.setattr(pools, "_POOLS", {})  # a new process: nothing in memory

    def refuse(*args, **kwargs):
        raise AssertionError("organisms generated again; the store holds them")

    monkeypatch.setattr(generator, "generate", refuse)
    assert pool_digest(build("luca-easy-10-healthy")) == first


def test_a_given_source_gives_the_same_pool_and_bad_sources_are_refused():
    from luca_gym.pools import InstanceSource
    from luca_gym.worlds.luca.config import LucaConfig
    from luca_gym.worlds.luca.pools import EpisodeOrganisms

    with open(FIXTURE) as f:
        recorded = json.load(f)["luca-easy-10-healthy"]
    env = F.make_env(**CASES["luca-easy-10-healthy"])
    source = EpisodeOrganisms("pool", LucaConfig(tier="easy", mode="healthy", n_genes=10), None, seeds=SEEDS)
    assert pool_digest(F.make_pool(env, source=source)) == recorded
    assert pool_digest(F.make_pool(env, SEEDS, source=source)) == recorded
    for bad, words in [
        (dict(source=EpisodeOrganisms("fresh", LucaConfig(tier="easy", mode="healthy", n_genes=10), None)), ["source", "pool"]),
        (dict(source="pool"), ["source", "not a pool"]),
        (dict(seeds=SEEDS[:-1], source=source), ["seeds", "source's pool seeds"]),
    ]:
        with pytest.raises(ValueError) as error:
            F.make_pool(env, **bad)
        assert all(w in str(error.value) for w in words), str(error.value)
    fresh = InstanceSource("fresh", lambda seeds: (seeds, None))
    with pytest.raises(ValueError, match="a fresh source has no pool"):
        fresh.pool_instances()


if __name__ == "__main__" and "--record" in sys.argv:
    with open(FIXTURE, "w") as f:
        json.dump({case: pool_digest(build(case)) for case in CASES}, f, indent=1, sort_keys=True)
        f.write("\n")
