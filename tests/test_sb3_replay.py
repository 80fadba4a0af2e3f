"""The SB3 vec envs (``FlatSB3VecEnv`` over a flat codec, ``LucaSB3VecEnv``)
replay bit for bit what they did when the fixture was recorded.

A short seeded rollout per case (masked-random actions, same-step
autoresets on pool or fresh instances, a reseeded reset and a reset with
pinned seeds) is hashed: observations, masks, rewards, dones and infos
(every key but the episode's wall time) and the reset infos. The hashes in
``tests/data/sb3_replay.json`` were recorded on this platform's CPU
(``python tests/test_sb3_replay.py --record``: only for a change meant to
move these sessions).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "sb3_replay.json")
CASES = ["luca-pool-healthy", "luca-fresh-disease", "dag-pool", "dag-fresh"]
SLOW = {"luca-fresh-disease", "dag-fresh"}  # fresh instances: more generator calls (the pool cases stay quick)
B = 4
STEPS = 24


def _feed(digest, value) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            if key != "t":  # an episode's wall time
                digest.update(repr(key).encode())
                _feed(digest, value[key])
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _feed(digest, item)
        return
    array = np.asarray(value)
    digest.update(f"{array.dtype}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())


def _env(case: str):
    from luca_gym import functional
    from luca_gym.envs.sb3_vec import FlatSB3VecEnv
    from luca_gym.worlds.luca.envs import LucaSB3VecEnv

    world, kind, *mode = case.split("-")
    if world == "luca":
        return LucaSB3VecEnv(B, "easy", mode[0], 10, seed=3, organisms=kind, pool_size=8, generation_batch=4, max_steps=6)
    codec = functional.make_env(world="dag", n_nodes=3, n_states=3)
    return FlatSB3VecEnv(codec, B, seed=3, pool_size=8 if kind == "pool" else None, generation_batch=4)


def replay(case: str) -> str:
    env = _env(case)
    rng = np.random.default_rng(5)
    digest = hashlib.sha256()
    for label in ("first", "pinned", "reseeded"):
        if label == "pinned":
            env.set_options([{env.seed_name: 7}, {}, {env.seed_name: 2}, {}])
        if label == "reseeded":
            env.seed(11)
        obs = env.reset()
        _feed(digest, {"label": np.frombuffer(label.encode(), np.uint8), "obs": obs, "reset_infos": env.reset_infos,
                       "masks": env.action_masks()})
        for _ in range(STEPS):
            masks = env.action_masks()
            actions = np.array([rng.choice(np.flatnonzero(row)) for row in masks])
            obs, reward, dones, infos = env.step(actions)
            _feed(digest, {"obs": obs, "reward": reward, "dones": dones, "infos": infos, "masks": env.action_masks()})
    return digest.hexdigest()


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow if c in SLOW else ()) for c in CASES])
def test_sb3_vec_envs_replay_the_recorded_sessions(case):
    with open(FIXTURE) as f:
        recorded = json.load(f)
    assert replay(case) == recorded[case]


def test_luca_draws_from_its_instance_source_and_a_source_excludes_pool_size():
    from luca_gym import functional
    from luca_gym.envs.sb3_vec import FlatSB3VecEnv
    from luca_gym.worlds.luca.envs import LucaSB3VecEnv
    from luca_gym.worlds.luca.pools import EpisodeOrganisms

    env = LucaSB3VecEnv(2, "easy", "healthy", 10, organisms="pool", pool_size=8, min_organism_seed=20_000)
    assert isinstance(env.source, EpisodeOrganisms) and env.episodes is env.source
    assert env.source.seeds.tolist() == list(range(20_000, 20_008)) and env.pool_size == 8
    assert "_fresh" not in vars(LucaSB3VecEnv)  # the generic env's draw, from the source
    codec = functional.make_env(world="dag", n_nodes=3, n_states=3)
    for bad in ("pool", env.source):
        with pytest.raises(ValueError, match="source: .* not allowed; an InstanceSource, with pool_size None"):
            FlatSB3VecEnv(codec, 2, pool_size=4 if bad is env.source else None, source=bad)


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    with open(FIXTURE, "w") as f:
        json.dump({case: replay(case) for case in CASES}, f, indent=1)
        f.write("\n")
