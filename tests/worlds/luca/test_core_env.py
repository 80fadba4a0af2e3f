"""LUCA's Gymnasium env is the generic one over its protocol core
(:class:`luca_gym.envs.core.CoreEnv` with :mod:`luca_gym.worlds.luca.core.protocol`):
the same seeded random actions played through ``LucaEnv`` and through the
raw core (:func:`~luca_gym.worlds.luca.core.reset` / :func:`~luca_gym.worlds.luca.core.step`
under :func:`~luca_gym.worlds.luca.core.make_params`) give the same
observations, rewards, flags and scores bit for bit, refused actions and a
truncation included; and the protocol module's functions are the core's."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from luca_gym.boundary import to_numpy_observation, to_python
from luca_gym.envs.core import CoreEnv
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.core import protocol
from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.worlds.luca.session import cached_organism
from luca_gym.worlds.luca.spec import N_PHENOTYPES

N = 20  # the default size: the compiled programs are the other env tests' too


def _random_action(rng: np.random.Generator, n_signals: int) -> dict:
    """A dict action of a random kind (END rarely) with random fields: many are refused (a diagnosis in
    healthy mode, a rescue before one, a repeated submission, ...)."""
    action = {"kind": core.END if rng.random() < 0.04 else int(rng.integers(0, core.END))}
    codes = np.zeros(N, np.int8)
    codes[rng.choice(N, int(rng.integers(1, 3)), replace=False)] = rng.integers(1, 4)
    action["gene_codes"] = codes
    if rng.random() < 0.3:
        action["signal_flags"] = (rng.random(n_signals) < 0.5).astype(np.int8)
    if rng.random() < 0.5:
        action["prediction"] = rng.random(N_PHENOTYPES).astype(np.float32)
    if rng.random() < 0.5:
        action["diagnosis_target"] = int(rng.integers(0, N + n_signals))
        action["diagnosis_type"] = int(rng.integers(0, 2))
    return action


def _same(a, b) -> bool:
    """Bitwise equality of two observations (dtype, shape and bytes, key by key)."""
    return list(a) == list(b) and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
                                      and a[k].tobytes() == b[k].tobytes() for k in a)


@pytest.mark.parametrize("mode, max_steps", [("healthy", None), ("disease", None), ("disease", 4)])
def test_luca_env_plays_exactly_as_the_raw_core(mode, max_steps):
    env = LucaEnv(tier="easy", mode=mode, n_genes=N, max_steps=max_steps)
    assert isinstance(env, CoreEnv)
    params = core.make_params("easy", N, mode, max_steps=max_steps)
    assert env.params == params
    rng = np.random.default_rng(11)
    refused = ended = truncations = 0
    for episode in range(4):
        obs, info = env.reset(seed=episode)
        seed = info["organism_seed"]
        assert info == {"organism_seed": seed, "budget": params.budget}
        organism = cached_organism(seed, "easy", N, mode)
        raw_obs, state = core.reset(core.noise_key(seed, "easy", N, None), organism.arrays, params)
        assert _same(obs, to_numpy_observation(raw_obs))
        for _ in range(60):
            action = _random_action(rng, params.n_signals)
            if rng.random() < 0.1:  # malformed: one clear error, nothing changed (the raw core is not stepped)
                before = jax.tree_util.tree_leaves(jax.device_get(env.state))
                with pytest.raises(ValueError, match="prediction"):
                    env.step({**action, "prediction": np.zeros(N_PHENOTYPES + 1, np.float32)})
                assert all(np.array_equal(a, b) for a, b in zip(before, jax.tree_util.tree_leaves(jax.device_get(env.state))))
                continue
            obs, reward, terminated, truncated, info = env.step(action)
            raw_obs, state, raw_reward, raw_terminated, raw_truncated, raw_info = core.step(
                state, core.parse_action(action, params), params)
            assert _same(obs, to_numpy_observation(raw_obs))
            assert (reward, terminated, truncated) == (float(raw_reward), bool(raw_terminated), bool(raw_truncated))
            code = int(raw_info["error"])
            assert info["error_code"] == code and info["error"] == (core.ERROR_MESSAGES[code] or None)
            refused += code != 0
            if terminated or truncated:
                assert info["scores"] == to_python(core.session_scores(state, params))
                ended += 1
                truncations += truncated
                break
            assert "scores" not in info
        assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(jax.device_get(env.state)),
                                                        jax.tree_util.tree_leaves(jax.device_get(state))))
    assert refused > 0 and ended > 0  # the sequences held refusals and endings
    if max_steps is not None:
        assert truncations > 0


def test_the_protocol_module_is_the_core_under_the_protocol_names():
    config = protocol.make_config(tier="easy", mode="disease", n_genes=N, max_steps=4)
    params = core.make_params("easy", N, "disease", max_steps=4)
    assert config.params == params and config.organism.n_genes == N
    instance = protocol.instance(3, config)
    assert instance.seed == 3 and instance.organism is cached_organism(3, "easy", N, "disease")
    assert np.array_equal(jax.random.key_data(instance.key), jax.random.key_data(core.noise_key(3, "easy", N, None)))
    state = protocol.reset(instance, config)
    _, raw = core.reset(instance.key, instance.organism.arrays, params)
    rng = np.random.default_rng(5)
    for _ in range(40):
        action = core.parse_action(_random_action(rng, params.n_signals), params)
        state, reward, error = protocol.step(state, action, config)
        _, raw, raw_reward, _, raw_truncated, info = core.step(raw, action, params)
        assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(raw)))
        assert float(reward) == float(raw_reward) and int(error) == int(info["error"])
        assert _same(to_numpy_observation(protocol.public_view(state, config)), to_numpy_observation(core.observe(raw, params)))
        if bool(protocol.ended(state)):
            break
    assert bool(protocol.ended(state)) and bool(protocol.truncated(state, config)) == bool(raw.truncated)
    assert protocol.scores(state, config) == to_python(core.session_scores(raw, params))
    with pytest.raises(ValueError, match="shaping_scale"):  # a bad option is one clear error, not a cache's TypeError
        protocol.make_config(shaping_scale=[1])


def test_the_generic_env_serves_luca_as_luca_env_does():
    """CoreEnv("luca") is LucaEnv under other argument names: the same organism, observations and picture."""
    generic = CoreEnv("luca", render_mode="ansi", tier="easy", n_genes=N)
    luca = LucaEnv(tier="easy", n_genes=N, render_mode="ansi")
    (a, info_a), (b, info_b) = generic.reset(seed=4), luca.reset(seed=4)
    assert info_a == info_b and _same(a, b) and generic.render() == luca.render()
    assert generic.metadata["render_modes"] == ["ansi", "rgb_array"] == LucaEnv.metadata["render_modes"]
    action = {"kind": core.EXPERIMENT, "gene_codes": np.eye(N, dtype=np.int8)[int(np.argmax(a["targetable"]))]}
    (a, *rest_a), (b, *rest_b) = generic.step(action), luca.step(action)
    assert _same(a, b) and rest_a == rest_b and generic.render() == luca.render()
    with pytest.raises(ValueError, match=r"options\['organism_seed'\]"):
        generic.reset(options={"organism_seed": -1})
    with pytest.raises(ValueError, match="unknown key 'instance_seed'"):
        generic.reset(options={"instance_seed": 1})
