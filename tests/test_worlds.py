"""The world API test (luca_gym.testing.check_world) on LUCA and on a toy
world that lives outside the package, and proof that it fails when a world
breaks a rule: a refusal that costs, a return that is not the headline score,
a retrace per instance, results the text env cannot reproduce."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import pytest

import toy_world
from luca_gym import worlds
from luca_gym.protocol import World
from luca_gym.testing import check_world, count_traces

ALL_CHECKS = ["registry", "return-equals-headline", "refusals", "schemas", "replay", "sealed", "no-retrace", "text-env",
              "mcp", "check_env"]


@pytest.mark.slow
def test_check_world_passes_on_luca():
    assert check_world("luca", settings={"tier": "easy", "mode": "disease", "n_genes": 12}) == ALL_CHECKS


def test_the_toy_world_registers_itself_and_passes():
    assert "toy" in worlds.names() and worlds.get("toy") is toy_world.WORLD
    assert "luca_gym/ToyTools-v0" in gym.registry and "luca_gym/Toy-v0" not in gym.registry  # tools only
    assert check_world("toy") == ALL_CHECKS
    env = gym.make("luca_gym/ToyTools-v0", n_bits=6)
    text, info = env.reset(options={"seed": 4})
    assert info["instance_id"] == "toy_00000004" and "[system]\nFind 6 hidden switches" in text


def test_count_traces_sees_a_new_shape():
    f = jax.jit(lambda x: x * 2)
    f(jax.numpy.ones(3))
    x, y = jax.numpy.ones(3), jax.numpy.ones(4)
    with count_traces() as traced:
        f(x)
    assert traced == []
    with count_traces() as traced:
        f(y)
    assert traced == ["<lambda>"]


class CostlyRefusals(toy_world.ToyToolSession):
    def error(self, message):
        self.state = self.state.__class__(self.state.bits, self.state.budget_left - 1, self.state.ended, self.state.score)
        return super().error(message)


class DoubledReturn(toy_world.ToyToolSession):
    def dispatch(self, name, args):
        before = self.total_reward
        result = super().dispatch(name, args)
        self.total_reward += self.total_reward - before
        return result


@partial(jax.jit, static_argnames=("salt",))
def _per_instance(x, salt):
    return x + salt


class RetracePerInstance(toy_world.ToyToolSession):
    def dispatch(self, name, args):
        _per_instance(1.0, salt=int(self.state.bits.sum()) + 100 * len(self.transcript) + hash(self.instance_id) % 997)
        return super().dispatch(name, args)


class IncompleteRecord(toy_world.ToyToolSession):
    """Its record drops the last call, so a replay cannot reproduce the session."""

    def record(self):
        record = super().record()
        return {**record, "calls": record["calls"][:-1]}


@pytest.mark.parametrize("cls, check", [
    ("CostlyRefusals", "refusals"),
    ("DoubledReturn", "return-equals-headline"),
    ("RetracePerInstance", "no-retrace"),
    ("IncompleteRecord", "replay"),
])
def test_check_world_fails_when_a_rule_breaks(cls, check):
    broken = World(name=f"broken_{cls.lower()}", version="1", gym_stem=f"Broken{cls}", summary="a broken toy",
                   config="toy_world:ToyConfig", headline="accuracy", tools=f"test_worlds:{cls}")
    with pytest.raises(AssertionError, match=rf"check_world \[{check}\]"):
        check_world(broken, gym_ids=False, mcp=False)
