"""``gymnasium.make_vec`` of every world's flat id takes the world's settings,
as keyword arguments or as ``settings=dict(...)``, and steps under them
(tiny non-default configs): the batched flat env of a world with a flat
codec, Gymnasium's vector env of the single flat env for one without
(biobank)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from luca_gym import worlds

# Non-default, small settings per world (its flat codec's, or its flat env's for a world without a codec).
SETTINGS = {
    "dag": {"n_nodes": 5, "n_states": 3},
    "relational": {"n_houses": 4, "edge_density": 0.5},
    "equation": {"n_variables": 2, "family_size": 64, "budget": 5},
    "luca": {"n_genes": 8, "tier": "easy"},
    "biobank": {"tier": "hard", "budget": "limited"},
}


def _builtin(name: str) -> bool:
    """A world shipped in luca_gym (other tests register plug-in worlds in the same process)."""
    return worlds.get(name).config.startswith("luca_gym.worlds.")


def _flat_worlds() -> list[str]:
    return [n for n in worlds.names() if _builtin(n) and worlds.get(n).flat_env is not None]


def test_every_world_with_a_flat_env_is_covered():
    assert set(_flat_worlds()) == set(SETTINGS)
    assert {n for n in worlds.names() if _builtin(n) and worlds.get(n).flat is not None} == set(SETTINGS) - {"biobank"}


def _step_once(envs, num_envs: int) -> None:
    obs, info = envs.reset(seed=0)
    assert obs.shape[0] == num_envs
    actions = np.array([np.flatnonzero(mask)[0] for mask in info["action_mask"]])
    obs, reward, terminated, truncated, info = envs.step(actions)
    assert obs.shape[0] == num_envs and reward.shape == (num_envs,)


@pytest.mark.parametrize("world", [w for w in SETTINGS if w != "biobank"])
@pytest.mark.parametrize("how", ["kwargs", "settings"])
def test_make_vec_takes_the_settings_and_steps(world, how):
    w = worlds.get(world)
    given = SETTINGS[world]
    extra = given if how == "kwargs" else {"settings": dict(given)}
    envs = gym.make_vec(f"luca_gym/{w.gym_stem}Flat-v0", num_envs=4, pool_size=4, **extra)
    try:
        assert type(envs).__name__ == "FlatVectorEnv"
        described = repr(envs.env)
        for name, value in given.items():
            assert f"{name}={value!r}" in described, (name, described)
        _step_once(envs, 4)
    finally:
        envs.close()


def test_make_vec_of_biobank_takes_the_settings_both_ways():
    ident = "luca_gym/BiobankFlat-v0"
    given = SETTINGS["biobank"]
    envs = gym.make_vec(ident, num_envs=1, **given)  # built, not stepped: a biobank is seconds to generate
    assert all(getattr(envs.envs[0].unwrapped.config, k) == v for k, v in given.items())
    envs.close()
    envs = gym.make_vec(ident, num_envs=1, settings=dict(given))
    try:
        assert all(getattr(envs.envs[0].unwrapped.config, k) == v for k, v in given.items())
        _step_once(envs, 1)
    finally:
        envs.close()


def test_a_setting_given_twice_or_a_settings_not_a_dict_is_refused():
    with pytest.raises(ValueError, match="n_nodes given twice"):
        gym.make_vec("luca_gym/DagDiscoveryFlat-v0", num_envs=2, n_nodes=5, settings={"n_nodes": 4})
    with pytest.raises(ValueError, match="settings: .* a dict"):
        gym.make_vec("luca_gym/DagDiscoveryFlat-v0", num_envs=2, settings=[("n_nodes", 5)])
    with pytest.raises(ValueError, match="settings: 'bogus' not taken"):
        gym.make_vec("luca_gym/DagDiscoveryFlat-v0", num_envs=2, settings={"bogus": 1})
