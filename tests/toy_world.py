"""A toy world outside the package, on the world protocol alone: N hidden
switches (bits drawn from the seed); ``probe`` reads one for a budget unit,
``submit`` guesses them all and ends the session, scored by the fraction
right. A pure JAX core (jit, static params), a config, a tool session on the
generic dispatcher, and registration: nothing generic knows it exists."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import register_world
from luca_gym import seal as seal_mod
from luca_gym.protocol import World
from luca_gym.llm.loop import AgentTurn, ToolCall
from luca_gym.tools.session import ToolSessionBase
from luca_gym.validate import check_positive_int, check_seed

PROBE, SUBMIT, END = 0, 1, 2
ERRORS = ("", "the budget is spent", "the session has ended")


@dataclass(frozen=True)
class ToyConfig:
    n_bits: int = 8

    def __post_init__(self):
        check_positive_int(self.n_bits, "n_bits")

    @property
    def budget(self) -> int:
        return self.n_bits - 2


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class ToyState:
    bits: jax.Array  # bool (N,): the hidden truth
    budget_left: jax.Array  # int32 ()
    ended: jax.Array  # bool ()
    score: jax.Array  # float32 (): fraction right, once submitted


def instance(seed: int, config: ToyConfig, seal=None) -> jax.Array:
    """The hidden bits of instance ``seed`` (sealed: of its sealed seed)."""
    seed = check_seed(seed) if seal is None else seal.organism_seed(seed)
    return jax.random.bernoulli(jax.random.PRNGKey(seed % 2**31), 0.5, (config.n_bits,))


def reset(bits: jax.Array, config: ToyConfig) -> ToyState:
    return ToyState(bits, jnp.int32(config.budget), jnp.bool_(False), jnp.float32(0.0))


@partial(jax.jit, static_argnames=("config",))
def step(state: ToyState, kind, index, guess, config: ToyConfig):
    """(state, reward, error code, the probed bit): refusals change nothing."""
    error = jnp.where(state.ended, 2, jnp.where((kind == PROBE) & (state.budget_left <= 0), 1, 0))
    ok = error == 0
    score = jnp.mean(guess == state.bits).astype(jnp.float32)
    submitted = ok & (kind == SUBMIT)
    new = ToyState(
        state.bits,
        state.budget_left - (ok & (kind == PROBE)).astype(jnp.int32),
        state.ended | (ok & (kind != PROBE)),
        jnp.where(submitted, score, state.score),
    )
    return new, jnp.where(submitted, score, 0.0), error, state.bits[index]


class ToyToolSession(ToolSessionBase):
    world = "toy"
    opening = "A new row of switches is ready. Begin."
    status_keys = ("budget_remaining",)
    title = "Toy switches"

    def __init__(self, seed: int = 0, *, sealed=None, n_bits: int = 8):
        super().__init__()
        self.config, self.seed = ToyConfig(n_bits), seed
        self.seal = seal_mod.make_seal(sealed)
        self.state = reset(instance(seed, self.config, self.seal), self.config)
        self.instance_id = seal_mod.instance_id(seed, self.seal, prefix="toy")
        n = self.config.n_bits
        bit = {"type": "integer", "minimum": 0, "maximum": 1}
        self.set_specs([
            {"name": "probe", "description": "Costs 1 unit: read one switch.",
             "input_schema": {"type": "object", "properties": {"index": {"type": "integer", "minimum": 0, "maximum": n - 1}},
                              "required": ["index"], "additionalProperties": False}},
            {"name": "submit", "description": "Guess every switch; ends the session.",
             "input_schema": {"type": "object", "properties": {"bits": {"type": "array", "items": bit, "minItems": n, "maxItems": n}},
                              "required": ["bits"], "additionalProperties": False}},
            {"name": "end", "description": "End without a guess.",
             "input_schema": {"type": "object", "properties": {}, "required": [], "additionalProperties": False}},
        ])

    def system_prompt(self) -> str:
        return f"Find {self.config.n_bits} hidden switches with {self.config.budget} probes, then submit them."

    def status(self) -> dict:
        return {"budget_remaining": int(self.state.budget_left)}

    def dispatch(self, name: str, args: dict) -> dict:
        kind = {"probe": PROBE, "submit": SUBMIT, "end": END}[name]
        guess = np.asarray(args.get("bits", [0] * self.config.n_bits), bool)
        self.state, reward, error, bit = step(self.state, kind, args.get("index", 0), guess, self.config)
        if int(error):
            return self.error(ERRORS[int(error)])
        self.total_reward += float(reward)
        result = {"bit": int(bit)} if kind == PROBE else {}
        if bool(self.state.ended):
            self.ended, self.end_reason = True, "end"
            self.scores = {"accuracy": float(self.state.score)}
            result.update(ended=True, end_reason="end", scores=self.scores)
        return {**result, **self.status()}

    def key_settings(self) -> dict:
        return {"n_bits": self.config.n_bits}

    def record(self) -> dict:
        return {"instance_id": self.instance_id, **super().record()}

    def demo_calls(self) -> list[tuple[str, dict]]:
        return [("probe", {"index": i}) for i in range(self.config.budget)] + [("submit", {"bits": [1] * self.config.n_bits})]


class ProbeThenGuess:
    """A baseline as a tool agent: probe while the budget lasts, guess 1 for the rest."""

    def __call__(self, messages, tools) -> AgentTurn:
        seen = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        n = next(t for t in tools if t["name"] == "submit")["input_schema"]["properties"]["bits"]["minItems"]
        if not seen or seen[-1]["budget_remaining"] > 0:
            return AgentTurn(tool_calls=[ToolCall("probe", {"index": len(seen)})])
        return AgentTurn(tool_calls=[ToolCall("submit", {"bits": [r["bit"] for r in seen] + [1] * (n - len(seen))})])


BASELINES = {"probe-then-guess": ProbeThenGuess}
WORLD = register_world(World(
    name="toy", version="1", gym_stem="Toy", summary="hidden switches, probed under a budget",
    config="toy_world:ToyConfig", headline="accuracy", tools="toy_world:ToyToolSession",
    baselines="toy_world:BASELINES", session_keys=("n_bits", "seed"), flat="toy_flat:ToyFlat",
    flat_baselines="toy_flat:FLAT_BASELINES",
))
