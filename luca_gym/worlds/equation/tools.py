"""The equation world's tools, on the generic dispatcher:
:class:`EquationToolSession`.

Tools: ``describe`` (free: the variables, their range, the budget, the
protocol and the grammar, listed or in words as the config says, and the
measurement noise where there is some), ``query`` (one unit of the budget: the output at
chosen inputs; under ``proposals="every"``, the paper's loop and the default,
with the formula the agent believes so far, which ends the session solved
when it is right), ``submit_formula`` (ends the session with the scores) and
``end`` (ends it without a formula, success 0). A formula that cannot be read
(:mod:`~luca_gym.worlds.equation.formula`) is refused: it costs nothing and
changes nothing. No answer, error or record field holds the hidden formula,
which variables are distractors, or the held-out inputs.
"""

from __future__ import annotations

from luca_gym import seal as seal_mod
from luca_gym.tools.session import ToolSessionBase
from luca_gym.worlds.equation import core
from luca_gym.worlds.equation.config import INPUT_HIGH, INPUT_LOW, N_HELDOUT, TOLERANCE, EquationConfig
from luca_gym.worlds.equation.formula import MAX_CHARS, FormulaError, parse
from luca_gym.worlds.equation.grammar import names_of

_NO_ARGUMENTS = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
ANNOTATIONS = {
    "describe": {"title": "Describe the task", "readOnlyHint": True},
    "query": {"title": "Measure the output", "readOnlyHint": False},
    "submit_formula": {"title": "Submit the formula (ends the session)", "destructiveHint": True},
    "end": {"title": "End without a formula", "destructiveHint": True},
}


class EquationToolSession(ToolSessionBase):
    """One equation-discovery session driven by tool calls.

    Args:
        seed: the instance seed.
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True: the
            instance is generated from its sealed seed and its id is opaque.
        complexity, n_variables, n_distractors, budget, proposals, measurement_noise, grammar_shown: the
            :class:`~luca_gym.worlds.equation.config.EquationConfig`.

    Raises ValueError naming a bad setting and what is allowed.
    """

    world = "equation"
    opening = "A new hidden formula is ready. Begin."
    status_keys = ("budget_remaining",)
    title = "luca-gym equation discovery"

    def __init__(self, seed: int = 0, *, sealed=None, complexity: str = "simple", n_variables: int = 3,
                 n_distractors: int = 0, budget: int = 10, proposals: str = "every", measurement_noise: float = 0.0,
                 grammar_shown: str = "listed"):
        super().__init__()
        self.config = EquationConfig(complexity, n_variables, n_distractors, budget, proposals, measurement_noise,
                                     grammar_shown)
        self.seal = seal_mod.make_seal(sealed)
        self.seed = int(seed)
        instance = core.instance(seed, self.config, self.seal)
        self.variables = names_of(instance)
        self.state = core.reset(instance, self.config)
        self.instance_id = seal_mod.instance_id(self.seed, self.seal, prefix="eq")
        number = {"type": "number", "minimum": INPUT_LOW, "maximum": INPUT_HIGH}
        formula = {"type": "string", "minLength": 1, "maxLength": MAX_CHARS}
        query = {"inputs": {"type": "object", "properties": {v: number for v in self.variables},
                            "required": list(self.variables), "additionalProperties": False}}
        query_doc = (f"Costs 1 of the budget of {self.config.budget}: the hidden formula's output at the inputs you "
                     f"choose, one number in [{INPUT_LOW:g}, {INPUT_HIGH:g}] for every variable"
                     + (f", measured with a relative error of about {self.config.measurement_noise:g}."
                        if self.config.measurement_noise else "."))
        if self.every:
            query["formula"] = {**formula, "description": "the formula you believe from the answers so far"}
            query_doc += (" State with it the formula you believe from the answers so far: if it is right the session "
                          "ends, solved, and the query is not made. A formula that cannot be read is refused and costs "
                          "nothing.")
        self.set_specs([
            {"name": "describe", "description": "Free: the variables, their range, the budget, the protocol and the grammar "
                                                "of the hidden formula.",
             "input_schema": _NO_ARGUMENTS},
            {"name": "query", "description": query_doc,
             "input_schema": {"type": "object", "properties": query, "required": list(query), "additionalProperties": False}},
            {"name": "submit_formula",
             "description": "Submit the formula as Python-style text over the variables (e.g. 3*mass*velocity**2/radius; "
                            "+ - * /, ** with an integer exponent, sin cos exp log sqrt); ends the session with the scores. "
                            "A formula that cannot be read is refused and costs nothing.",
             "input_schema": {"type": "object", "properties": {"formula": formula},
                              "required": ["formula"], "additionalProperties": False}},
            {"name": "end", "description": "End the session without a formula (success 0).", "input_schema": _NO_ARGUMENTS},
        ])

    @property
    def every(self) -> bool:
        """Whether the session runs the paper's loop (a formula stated with every query)."""
        return self.config.proposals == "every"

    def system_prompt(self) -> str:
        """The rules for an agent: the variables, the grammar, the budget, the protocol and how a formula is scored."""
        c = self.config
        distractors = (f"{c.n_distractors} of the {c.n_inputs} variables are distractors that do not enter the formula; "
                       "which ones, you must find out.") if c.n_distractors else "Every variable enters the formula."
        loop = ("With each query, state the formula you believe from the answers so far (`formula`, Python syntax over "
                "the variable names): the session ends, solved, the first time it is right. `submit_formula` states a "
                "last formula and ends the session either way." if self.every else
                "When you know the formula, submit it with `submit_formula` (Python syntax over the variable names); "
                "this ends the session.")
        answer = ("the exact output at inputs you choose" if not c.measurement_noise else
                  f"the output at inputs you choose, measured with noise (the true output times 1 + "
                  f"{c.measurement_noise:g} z, z a standard normal drawn afresh for each query),")
        scored = (" (on the hidden formula itself: the noise is on your measurements only)" if c.measurement_noise
                  else "")
        return (
            f"You are discovering a hidden formula y = F({', '.join(self.variables)}) ({c.complexity} complexity). "
            f"{distractors}\n\n{c.grammar_text}\n\n"
            f"Each query (tool `query`) gives {answer} and costs 1 of your budget of {c.budget}. "
            f"{loop} A formula is right if it matches the hidden formula within a relative error of {TOLERANCE:g} on "
            f"{N_HELDOUT} held-out inputs in the same range{scored}. Your iterations are the queries made before the "
            "right formula (at least 1): use as few as you can. `describe` is free."
        )

    def describe(self) -> dict:
        """What ``describe`` answers: the variables, their range, the complexity, the budget, the protocol and the grammar."""
        c = self.config
        noise = {"measurement_noise": c.measurement_noise} if c.measurement_noise else {}
        return {"variables": list(self.variables), "input_range": [INPUT_LOW, INPUT_HIGH], "complexity": c.complexity,
                "n_distractors": c.n_distractors, "budget": c.budget, "proposals": c.proposals,
                "grammar": c.grammar_text, **noise, **self.status()}

    def dispatch(self, name: str, args: dict) -> dict:
        if name == "describe":
            return self.describe()
        if name == "end":
            return self._step(core.END)
        program = None
        if name == "submit_formula" or self.every:
            if self.ended:
                return self.error(core.ERRORS[1])
            try:
                program = parse(args["formula"], self.variables)
            except FormulaError as exc:
                return self.error(f"{exc}; nothing was spent")
        if name == "query":
            inputs = [args["inputs"][v] for v in self.variables]
            return self._step(core.QUERY, inputs=inputs, submission=program,
                              echo={"inputs": {v: args["inputs"][v] for v in self.variables}})
        return self._step(core.SUBMIT, submission=program)

    def _step(self, kind: int, inputs=None, submission=None, echo=None) -> dict:
        state, reward, error, output = core.step(self.state, kind, inputs, submission, config=self.config)
        if int(error):
            return self.error(core.ERRORS[int(error)])
        self.state = state
        if not bool(state.ended):
            return {**echo, "output": float(output), **({"formula_correct": False} if self.every else {}), **self.status()}
        self.total_reward += float(reward)
        self.ended, self.end_reason = True, "end"
        self.scores = {"success": float(state.success), "iterations": int(state.iterations)}
        return {"ended": True, "end_reason": "end", "scores": dict(self.scores), **self.status()}

    def status(self) -> dict:
        return {"budget_remaining": int(self.state.budget_left)}

    def record_fields(self) -> dict:
        return {"instance_id": self.instance_id, "budget": self.config.budget}

    def key_settings(self) -> dict:
        c = self.config
        return {"complexity": c.complexity, "n_variables": c.n_variables, "n_distractors": c.n_distractors,
                "proposals": c.proposals, "measurement_noise": c.measurement_noise, "grammar_shown": c.grammar_shown}

    def record(self) -> dict:
        return {"instance_id": self.instance_id, **super().record()}

    def annotations(self, name: str) -> dict | None:
        return ANNOTATIONS.get(name)

    def demo_calls(self) -> list[tuple[str, dict]]:
        """A short legal session that ends: describe, two queries (each with a likely wrong
        formula under the paper's loop), a (likely wrong) formula."""
        guess = {"formula": f"2*{self.variables[0]}"}
        low = {"inputs": {v: INPUT_LOW + 1.0 for v in self.variables}, **(guess if self.every else {})}
        high = {"inputs": {v: INPUT_HIGH - 1.5 for v in self.variables}, **(guess if self.every else {})}
        return [("describe", {}), ("query", low), ("query", high), ("submit_formula", guess)]
