"""``luca_gym/EquationDiscovery-v0``: the equation world as a Gymnasium env.

The action is a ``Dict``: ``kind`` (0 query, 1 submit, 2 end), ``inputs``
(``Box(1, 5, (m,), float64)``, read by a query) and ``formula`` (``Text``,
read by a submission and, under ``proposals="every"``, the paper's loop and
the default, by a query: the formula stated with it, which ends the session
solved when it is right). The observation holds the queries so far,
zero-padded to the budget: ``inputs`` (budget, m), ``outputs`` (budget,) and
``queries`` (how many rows are real), and ``budget_left``. The variable
names (the formula's text speaks of them) are in the reset ``info``.

Each action is the tool session's call (:class:`~luca_gym.worlds.equation.tools.EquationToolSession`:
the same parsing and rules), so a refused one (a formula that cannot be
read, a query beyond the budget) earns nothing and changes nothing, and says
why in ``info["error"]``.

Why the world keeps this env rather than the generic
:class:`~luca_gym.envs.core.CoreEnv` over its core (which serves every other
world with a pure core, LUCA's included): the action carries the formula as
text, which the host reads (:mod:`~luca_gym.worlds.equation.formula`) before
the core sees a parsed program, and text that cannot be read is a refusal at
no cost, with its words in ``info["error"]`` and the session going on; a
core's ``to_action``, where CoreEnv turns an action into the core's, can
only take an action or raise ValueError, so an unreadable formula would be
an exception, not a refusal (and a core's refusal is one of its fixed
``ERRORS``, where the parser's words say what in the text it could not
read). And the observation is the history of queries,
which the tool session's transcript holds and the core's state (whose shapes
do not depend on the budget) does not, so no ``public_view`` of the state can
give it.
"""

from __future__ import annotations

import string

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from luca_gym.boundary import check_flat_actions
from luca_gym.envs.codec import CodecEnv, instance_seed
from luca_gym.validate import check_render_mode, short_repr
from luca_gym.worlds.equation.config import INPUT_HIGH, INPUT_LOW, EquationConfig
from luca_gym.worlds.equation.formula import MAX_CHARS
from luca_gym.worlds.equation.tools import EquationToolSession

KINDS = ("query", "submit_formula", "end")


class EquationEnv(gym.Env):
    """One equation session per episode (keyword settings: :class:`EquationConfig`'s
    fields). ``reset`` seeds the draw of instance seeds (from 10,000 up);
    ``options={"instance_seed": k}`` pins instance k. ``info["scores"]`` once
    the session has ended."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None, **settings):
        self.config = c = EquationConfig(**settings)
        self.settings = settings
        self.render_mode = check_render_mode(render_mode)
        m = c.n_inputs
        self.observation_space = spaces.Dict({
            "inputs": spaces.Box(0.0, INPUT_HIGH, (c.budget, m), np.float64),
            "outputs": spaces.Box(-np.inf, np.inf, (c.budget,), np.float64),
            "queries": spaces.Box(0, c.budget, (), np.int64),
            "budget_left": spaces.Box(0, c.budget, (), np.int64),
        })
        self.action_space = spaces.Dict({
            "kind": spaces.Discrete(len(KINDS)),
            "inputs": spaces.Box(INPUT_LOW, INPUT_HIGH, (m,), np.float64),
            "formula": spaces.Text(MAX_CHARS, charset=string.ascii_letters + string.digits + "+-*/() ."),
        })
        self.session: EquationToolSession | None = None

    def _obs(self) -> dict:
        c, s = self.config, self.session
        inputs, outputs = np.zeros((c.budget, c.n_inputs)), np.zeros(c.budget)
        rows = [call for call in s.transcript if call["call"] == "query" and "output" in call["result"]]  # queries made
        for i, call in enumerate(rows):
            inputs[i] = [call["result"]["inputs"][v] for v in s.variables]
            outputs[i] = call["result"]["output"]
        return {"inputs": inputs, "outputs": outputs, "queries": np.array(len(rows), np.int64),
                "budget_left": np.array(s.status()["budget_remaining"], np.int64)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        seed_ = instance_seed(self.np_random, options)
        self.session = EquationToolSession(seed_, **self.settings)
        return self._obs(), {"instance_seed": seed_, "variables": list(self.session.variables)}

    def step(self, action):
        if self.session is None:
            raise RuntimeError("step() called before reset()")
        allowed = f"a dict of kind (0..2), inputs ({self.config.n_inputs} numbers) and formula (text)"
        if not isinstance(action, dict) or set(action) != {"kind", "inputs", "formula"}:
            raise ValueError(f"action: {short_repr(action)} not allowed; {allowed}")
        # kind 2.7 or True would pass int(): only an integer 0..2 is a kind
        kind = KINDS[int(check_flat_actions(action["kind"], len(KINDS), name="kind"))]
        try:
            inputs = np.asarray(action["inputs"], np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"action: inputs {short_repr(action['inputs'])} not allowed; {allowed}") from None
        stated = {"formula": str(action["formula"])} if self.config.proposals == "every" else {}
        arguments = {"query": lambda: {"inputs": dict(zip(self.session.variables, map(float, inputs))), **stated},
                     "submit_formula": lambda: {"formula": str(action["formula"])}, "end": dict}[kind]()
        before = self.session.total_reward
        answer = self.session.call(kind, arguments)
        info = {"error": answer.get("error")}
        if self.session.ended:
            info["scores"] = dict(self.session.scores)
        return self._obs(), self.session.total_reward - before, self.session.ended, False, info

    def render(self):
        if self.render_mode != "ansi" or self.session is None:
            return None
        obs = self._obs()
        return f"{self.config.complexity} equation, {int(obs['queries'])} queries, {int(obs['budget_left'])} left"

    def close(self):
        self.session = None


class EquationFlatEnv(CodecEnv):
    """``luca_gym/EquationDiscoveryFlat-v0``: the batched equation world's flat codec
    (:mod:`~luca_gym.worlds.equation.batched`: a family of the grammar's formulas, query
    points on a grid, a proposal among the family), one instance an episode."""

    world = "equation"
