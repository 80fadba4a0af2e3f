"""The API test over every built-in world: each passes
:func:`luca_gym.testing.check_world` at small settings, with every check its
declared parts call for (tools, a core, a flat codec, flat baselines, the
Gymnasium ids). A world added to the registry without settings here fails
the first test, so none is left out. The worlds' own test folders
(``tests/worlds/<package>/``) test their rules; this file tests that each
world keeps the protocol every generic layer relies on."""

from __future__ import annotations

import pytest

from luca_gym import worlds
from luca_gym.protocol import POLICY, runner_kind
from luca_gym.testing import check_world

pytestmark = pytest.mark.usefixtures("no_cache_writes")  # see tests/conftest.py

# Small settings per built-in world: shapes other tests compile too (N=20 LUCA, tiny biobank).
SMALL = {
    "luca": {"tier": "easy", "mode": "disease", "n_genes": 20},
    "dag": {"n_nodes": 4, "n_states": 3},
    "relational": {"n_houses": 4},
    "equation": {"complexity": "complex", "n_variables": 3, "n_distractors": 2},
    "tracking": {"length": 4, "n_nodes": 3},
    "biobank": {"profile": "tiny"},
}


def expected_checks(world) -> set[str]:
    """The checks ``check_world`` must run on ``world``, from the parts it declares."""
    checks = {"registry", "check_env"}
    if world.tools is not None:
        checks |= {"return-equals-headline", "refusals", "schemas", "replay", "sealed", "text-env", "mcp"}
        if "tools" not in world.host_side:
            checks.add("no-retrace")  # a pure tool session compiles once for every instance
    if world.play is not None and world.tools is not None and any(
            runner_kind(runner) == POLICY for runner in world.baseline_policies().values()):
        checks.add("policy-record")  # a scripted policy's record is its tool session's transcript
    if world.core is not None:
        checks.add("core")
    if world.flat is not None:
        checks |= {"flat", "flat-no-retrace"} | ({"flat-baselines"} if world.flat_baselines else set())
    return checks


def test_every_builtin_world_has_its_small_settings_here():
    assert set(SMALL) == set(worlds.BUILTIN)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_registered_world_passes_check_world(name):
    world = worlds.get(name)
    ran = check_world(world, settings=SMALL[name])
    missing = expected_checks(world) - set(ran)
    assert not missing, f"{name}: check_world did not run {sorted(missing)} (ran {ran})"
