"""LUCA's host ``Session`` is the generic host session over its core
(:class:`luca_gym.host.CoreSession`), not a Gymnasium env; ``LucaEnv`` is that
session plus Gymnasium (:class:`luca_gym.envs.core.CoreEnv`). On the same
organisms and the same seeded actions, refused and ending ones included, the
two give the same observations, rewards, flags and infos bit for bit."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from luca_gym.envs.core import CoreEnv
from luca_gym.host import CoreSession
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.spec import N_PHENOTYPES

N = 20  # the default size: the compiled programs are the other env tests' too


def test_session_is_no_gymnasium_env_and_luca_env_is():
    session, env = Session(tier="easy", n_genes=N), LucaEnv(tier="easy", n_genes=N)
    assert isinstance(session, CoreSession) and not isinstance(session, gym.Env)
    assert not any(hasattr(session, name) for name in ("reset", "render", "np_random", "render_mode", "metadata"))
    assert isinstance(env, gym.Env) and isinstance(env, CoreEnv)
    for name in ("params", "organism_settings", "vocabulary", "tier", "mode", "n_genes", "backwards", "config", "seal"):
        assert getattr(session, name) == getattr(env, name), name
    assert session.organism is None and env.organism is None
    with pytest.raises(RuntimeError, match="step\\(\\) called before reset"):
        session.step({"kind": core.END})
    with pytest.raises(RuntimeError, match="only once the session has ended"):
        session.scores()


def _action(rng: np.random.Generator, n_signals: int) -> dict:
    """A dict action of a random kind (END rarely): many are refused (a diagnosis in healthy mode, ...)."""
    codes = np.zeros(N, np.int8)
    codes[rng.choice(N, 2, replace=False)] = rng.integers(1, 4)
    action = {"kind": core.END if rng.random() < 0.05 else int(rng.integers(0, core.END)), "gene_codes": codes,
              "prediction": rng.random(N_PHENOTYPES).astype(np.float32)}
    if rng.random() < 0.3:
        action["signal_flags"] = (rng.random(n_signals) < 0.5).astype(np.int8)
    if rng.random() < 0.5:
        action["diagnosis_target"], action["diagnosis_type"] = int(rng.integers(0, N + n_signals)), int(rng.integers(0, 2))
    return action


def _same_obs(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


@pytest.mark.parametrize("mode, max_steps", [("healthy", None), ("disease", 4)])
def test_session_and_luca_env_play_alike(mode, max_steps):
    session = Session(tier="easy", mode=mode, n_genes=N, max_steps=max_steps)
    env = LucaEnv(tier="easy", mode=mode, n_genes=N, max_steps=max_steps)
    rng = np.random.default_rng(5)
    endings = refused = truncations = 0
    for episode in range(2):
        obs, info = env.reset(seed=episode)
        session_obs, session_info = session.open(info["organism_seed"])
        assert _same_obs(obs, session_obs) and info == session_info
        assert session.organism.meta == env.organism.meta
        for _ in range(25):
            action = _action(rng, session.params.n_signals)
            stepped, session_stepped = env.step(action), session.step(action)
            assert _same_obs(stepped[0], session_stepped[0])
            assert stepped[1:] == session_stepped[1:]  # reward, terminated, truncated, info (scores included)
            refused += stepped[4]["error_code"] != 0
            if stepped[2] or stepped[3]:
                endings += 1
                truncations += stepped[3]
                assert session.scores() == env.scores() == stepped[4]["scores"]
                break
    assert refused and endings and (truncations if max_steps else True)  # refusals, an ending, a truncation at a limit
    session.close()
    with pytest.raises(RuntimeError, match="no session is open"):
        session.step(_action(rng, session.params.n_signals))
