"""``LucaVectorEnv`` replays bit for bit what it did when the fixture was recorded.

A short seeded rollout per case (random actions from the action space, a
low call limit and random ``end`` calls so sub-envs end and autoreset
several times, explicit resets with and without ``organism_seeds``) is
hashed: every observation, reward, flag and info array (names, dtypes,
shapes and bytes), the organism seeds and the organism arrays and noise keys
of the sessions the env holds after each call. The hashes in
``tests/data/luca_vector_replay.json`` were recorded on this platform's CPU
(``python tests/worlds/luca/test_vector_replay.py --record`` records them
again: only for a change meant to move the vector env's sessions).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import jax
import numpy as np
import pytest

from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.envs import LucaVectorEnv

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "data", "luca_vector_replay.json")
B = 4
POOL = 16
STEPS = 14
CASES = [f"{organisms}-{mode}-n{n}-{autoreset}" for organisms in ("pool", "fresh") for mode in ("healthy", "disease")
         for n in (10, 20) for autoreset in ("next_step", "same_step") if autoreset == "next_step" or n == 10]
QUICK = {"pool-healthy-n10-next_step", "fresh-disease-n20-next_step"}


def _feed(digest, value) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            digest.update(repr(key).encode())
            _feed(digest, value[key])
        return
    array = np.asarray(jax.device_get(value))
    digest.update(f"{array.dtype}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())


def _sessions(env) -> dict:
    """What the env holds now: its organism seeds, organisms and noise keys."""
    state = env.state
    organism = {f: getattr(state.organism, f) for f in state.organism.__dataclass_fields__}
    return {"organism_seeds": env.organism_seeds, "organism": organism, "noise_key": state.noise_key}


def replay(case: str) -> str:
    organisms, mode, n, autoreset = case.split("-")
    env = LucaVectorEnv(B, "easy", mode, int(n[1:]), autoreset_mode=autoreset, organisms=organisms, pool_size=POOL,
                        max_steps=3)
    rng = np.random.default_rng(7)
    env.action_space.seed(11)
    digest = hashlib.sha256()
    for label, reset in (("seed", dict(seed=3)), ("pinned", dict(options={"organism_seeds": [5, 1, 5, 2]})),
                         ("none", {}), ("seed again", dict(seed=3))):
        obs, info = env.reset(**reset)
        digest.update(label.encode())
        _feed(digest, {"obs": obs, "info": info, "sessions": _sessions(env)})
        for _ in range(STEPS):
            action = env.action_space.sample()
            action["kind"] = np.where(rng.random(B) < 0.1, core.END, action["kind"])
            obs, reward, terminated, truncated, info = env.step(action)
            _feed(digest, {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info,
                           "sessions": _sessions(env)})
    return digest.hexdigest()


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c in QUICK else pytest.mark.slow) for c in CASES])
def test_vector_env_replays_the_recorded_sessions(case):
    with open(FIXTURE) as f:
        recorded = json.load(f)
    assert replay(case) == recorded[case]


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    with open(FIXTURE, "w") as f:
        json.dump({case: replay(case) for case in CASES}, f, indent=1)
        f.write("\n")
