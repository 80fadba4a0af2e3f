"""A coin-weighing world written as config + core + tool table only: one of N
coins is counterfeit (heavier); a balance compares two pans of coins, for a
budget of weighings; naming a coin ends the session (score ``found``: 1 if
it is the counterfeit). Everything else -- the Gymnasium env, the tool
session's refusals, rewards and ending, the text env, MCP, the harness and
the report -- comes from the generic layers."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Annotated

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from luca_gym import register_world
from luca_gym.config import ConfigBase, int_in, pytree, setting
from luca_gym.envs.codec import CodecEnv
from luca_gym.envs.table_codec import table_codec
from luca_gym.llm.loop import AgentTurn, ToolCall
from luca_gym.protocol import World
from luca_gym.tools.play import table_play
from luca_gym.tools.table import Field, TableToolSession, tool, tool_table
from luca_gym.validate import check_seed


# -- config ---------------------------------------------------------------------------------------
@pytree
@dataclass(frozen=True)
class CoinConfig(ConfigBase):
    """n_coins (static: fixes the pans' shape), weighings (traced: one compiled step serves every budget)."""

    n_coins: int = setting(12, int_in(3, 64), static=True)
    weighings: int = setting(3, int_in(0, 32))


# -- core -----------------------------------------------------------------------------------------
WEIGH, GUESS, END = 0, 1, 2
ERRORS = ("", "the session has ended", "no weighings left", "a coin is on the balance twice")
READINGS = ("none yet", "left heavier", "balance", "right heavier")  # by state.reading


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Action:
    """kind int32 () (WEIGH, GUESS or END); left, right int32 (N,): each coin's count on a pan; coin int32 ()."""

    kind: jax.Array
    left: jax.Array
    right: jax.Array
    coin: jax.Array

    @classmethod
    def make(cls, kind, config, left=(), right=(), coin=0):
        count = lambda pan: np.bincount(np.asarray(pan, np.int64), minlength=config.n_coins).astype(np.int32)  # noqa: E731
        return cls(np.int32(kind), count(left), count(right), np.int32(coin))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class CoinState:
    """counterfeit int32 (); weighings_left int32 (); reading int32 () (READINGS); ended bool (); found float32 ()."""

    counterfeit: jax.Array
    weighings_left: jax.Array
    reading: jax.Array
    ended: jax.Array
    found: jax.Array


def instance(seed, config, seal=None):
    """The counterfeit coin of instance ``seed``, int32 ()."""
    seed = check_seed(seed) if seal is None else seal.organism_seed(seed)
    key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(0xC014), seed >> 32), seed & 0xFFFFFFFF)
    return jax.random.randint(key, (), 0, config.n_coins, jnp.int32)


def reset(counterfeit, config):
    return CoinState(jnp.int32(counterfeit), jnp.int32(config.weighings), jnp.int32(0), jnp.bool_(False), jnp.float32(0))


@jax.jit
def step(state, action, config):
    """(state, reward, error): a refusal changes nothing; the reward is ``found``, paid when a guess ends the session."""
    heavy = jax.nn.one_hot(state.counterfeit, config.n_coins, dtype=jnp.int32)
    weight = lambda pan: jnp.sum(pan * (2 + heavy))  # noqa: E731
    weigh = action.kind == WEIGH
    error = jnp.select([state.ended, weigh & (state.weighings_left <= 0), weigh & ((action.left + action.right) > 1).any()],
                       [1, 2, 3], 0).astype(jnp.int32)
    ok = error == 0
    found = (action.coin == state.counterfeit).astype(jnp.float32)
    guessed = ok & (action.kind == GUESS)
    new = CoinState(state.counterfeit, state.weighings_left - (ok & weigh),
                    jnp.where(ok & weigh, 2 - jnp.sign(weight(action.left) - weight(action.right)), state.reading),
                    state.ended | (ok & ~weigh), jnp.where(guessed, found, state.found))
    return new, jnp.where(guessed, found, 0.0), error


def ended(state):
    return state.ended


def scores(state, config=None) -> dict:
    return {"found": float(state.found), "weighings_left": int(state.weighings_left)}


def public_view(state, config):
    return {"weighings_left": state.weighings_left, "reading": state.reading}


def observation_space(config):
    return spaces.Dict({"weighings_left": spaces.Box(0, 32, (), np.int32), "reading": spaces.Discrete(len(READINGS))})


def action_space(config):
    n = config.n_coins
    return spaces.Dict({"kind": spaces.Discrete(3), "left": spaces.MultiBinary(n), "right": spaces.MultiBinary(n),
                        "coin": spaces.Discrete(n)})


def to_action(sample, config):
    return Action(np.int32(sample["kind"]), np.asarray(sample["left"], np.int32), np.asarray(sample["right"], np.int32),
                  np.int32(sample["coin"]))


def flat_actions(config):
    """The flat action table: weigh coin i against coin j (i < j), then guess each coin."""
    pairs = [(i, j) for i in range(config.n_coins) for j in range(i + 1, config.n_coins)]
    rows = [Action.make(WEIGH, config, [i], [j]) for i, j in pairs] + [Action.make(GUESS, config, coin=c)
                                                                          for c in range(config.n_coins)]
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *rows)


def render(state, config) -> str:
    return f"weighings left {int(state.weighings_left)}; last reading: {READINGS[int(state.reading)]}"


# -- tool table -----------------------------------------------------------------------------------
Pan = Annotated[list[Annotated[int, Field(minimum=0, maximum=lambda c: c.n_coins - 1)]],
                Field(max_items=lambda c: c.n_coins, description="the coins on this pan, by number")]
Coin = Annotated[int, Field(minimum=0, maximum=lambda c: c.n_coins - 1, description="the coin's number")]


class CoinToolSession(TableToolSession):
    world, core, config_class = "coin", sys.modules[__name__], CoinConfig
    opening = "The coins are on the table. Find the counterfeit."
    status_keys = ("weighings_left",)
    title = "Coin weighing"

    @tool(title="Weigh two pans of coins (one weighing)", readOnlyHint=False)
    def weigh(self, left: Pan, right: Pan):
        """Costs one weighing: put coins on the two pans; the balance says which side is heavier."""
        return Action.make(WEIGH, self.config, left, right)

    @tool(title="Name the counterfeit (ends the session)", readOnlyHint=False, destructiveHint=True)
    def guess(self, coin: Coin):
        """Name the counterfeit coin (one of the {c.n_coins}); the session ends, scored 1 if right."""
        return Action.make(GUESS, self.config, coin=coin)

    @tool(title="End without a guess", readOnlyHint=False, destructiveHint=True)
    def end(self):
        """End the session without a guess (score 0)."""
        return Action.make(END, self.config)

    tools = tool_table(weigh, guess, end)

    def answer(self, name, args):
        return {"reading": READINGS[int(self.state.reading)]} if name == "weigh" else {}

    def status(self):
        return {"weighings_left": int(self.state.weighings_left)}

    def system_prompt(self):
        c = self.config
        return (f"{c.n_coins} coins, numbered 0..{c.n_coins - 1}, look alike; one is heavier. You have {c.weighings} "
                "weighings on a balance (weigh), then name the heavy coin (guess).")

    def demo_calls(self):
        pairs = range(min(self.config.weighings, self.config.n_coins // 2, 2))
        return [("weigh", {"left": [2 * i], "right": [2 * i + 1]}) for i in pairs] + [("guess", {"coin": 0})]


# -- a baseline: ternary search ---------------------------------------------------------------------
class TernarySearch:
    """A tool agent: split the candidates in three, weigh two thirds, keep the third the balance points to."""

    def __call__(self, messages, tools):
        n = next(t for t in tools if t["name"] == "guess")["input_schema"]["properties"]["coin"]["maximum"] + 1
        candidates, left, right = list(range(n)), [], []
        for m in messages:
            if m["role"] == "assistant" and m.get("tool_calls"):
                left, right = (m["tool_calls"][0]["arguments"].get(k, []) for k in ("left", "right"))
            if m["role"] == "tool" and "reading" in (answer := json.loads(m["content"])):
                pick = {"left heavier": left, "right heavier": right}.get(answer["reading"])
                candidates = pick if pick is not None else [c for c in candidates if c not in left + right]
                if answer["weighings_left"] == 0 or len(candidates) == 1:
                    return AgentTurn(tool_calls=[ToolCall("guess", {"coin": candidates[0]}, f"c{len(messages)}")])
        third = (len(candidates) + 2) // 3
        return AgentTurn(tool_calls=[ToolCall("weigh", {"left": candidates[:third], "right": candidates[third:2 * third]},
                                              f"c{len(messages)}")])


BASELINES = {"ternary-search": TernarySearch}
play = table_play(CoinToolSession)  # a reset/act policy through the same tool session
flat = table_codec("coin", CoinConfig)  # the flat codec over flat_actions: the functional env, the PPO


class CoinFlatEnv(CodecEnv):  # luca_gym/CoinWeighingFlat-v0
    world = "coin"


WORLD = register_world(World(
    name="coin", version="1", gym_stem="CoinWeighing", summary="the counterfeit coin, found by weighings on a balance",
    config="coin_world:CoinConfig", headline="found", core="coin_world", tools="coin_world:CoinToolSession",
    baselines="coin_world:BASELINES", session_keys=("n_coins", "weighings", "seed"), flat="coin_world:flat",
    flat_env="coin_world:CoinFlatEnv", play="coin_world:play",
))
