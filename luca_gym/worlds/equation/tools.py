"""The equation world's tools, a tool table on
:class:`~luca_gym.tools.table.TableToolSession`: :class:`EquationToolSession`.

Tools: ``describe`` (free: the variables, their range, the budget, the
protocol and the grammar, listed or in words as the config says, and the
measurement noise where there is some), ``query`` (one unit of the budget: the output at
chosen inputs; under ``proposals="every"``, the paper's loop and the default,
with the formula the agent believes so far, which ends the session solved
when it is right), ``submit_formula`` (ends the session with the scores) and
``end`` (ends it without a formula, success 0). The schemas are built from
the handlers' signatures; the query's inputs are an object whose properties
are the instance's variable names. A formula that cannot be read
(:mod:`~luca_gym.worlds.equation.formula`) is refused by the handler before
the core sees it: it costs nothing and changes nothing. Every rule and the
scorer are the core's (:mod:`~luca_gym.worlds.equation.core`). No answer,
error or record field holds the hidden formula, which variables are
distractors, or the held-out inputs.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated

from luca_gym.tools.table import Field, Refusal, TableToolSession, per_session, tool, tool_table
from luca_gym.worlds.equation import core
from luca_gym.worlds.equation.config import INPUT_HIGH, INPUT_LOW, N_HELDOUT, TOLERANCE, EquationConfig
from luca_gym.worlds.equation.formula import MAX_CHARS, FormulaError, parse
from luca_gym.worlds.equation.grammar import names_of

Input = Annotated[float, Field(minimum=INPUT_LOW, maximum=INPUT_HIGH)]
Inputs = Annotated[dict[str, Input], Field(keys=per_session(lambda s: s.variables))]
FormulaText = Annotated[str, Field(min_length=1, max_length=MAX_CHARS)]
# Under the paper's loop a query states the formula the agent believes (required); under "final" it takes none.
StatedFormula = Annotated[str, Field(min_length=1, max_length=MAX_CHARS, description="the formula you believe from the answers so far",
                                     when=lambda c: c.proposals == "every", required=True)]


def _query_description(c: EquationConfig) -> str:
    noise = f", measured with a relative error of about {c.measurement_noise:g}." if c.measurement_noise else "."
    loop = (" State with it the formula you believe from the answers so far: if it is right the session ends, solved, and "
            "the query is not made. A formula that cannot be read is refused and costs nothing."
            if c.proposals == "every" else "")
    return (f"Costs 1 of the budget of {c.budget}: the hidden formula's output at the inputs you choose, one number in "
            f"[{INPUT_LOW:g}, {INPUT_HIGH:g}] for every variable{noise}{loop}")


class EquationToolSession(TableToolSession):
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
    id_prefix = "eq"
    core = core
    config_class = EquationConfig
    opening = "A new hidden formula is ready. Begin."
    status_keys = ("budget_remaining",)
    title = "luca-gym equation discovery"

    @cached_property
    def variables(self) -> list[str]:
        """The instance's variable names, in input order."""
        return names_of(self.instance)

    @property
    def every(self) -> bool:
        """Whether the session runs the paper's loop (a formula stated with every query)."""
        return self.config.proposals == "every"

    def _parse(self, text: str):
        """A stated formula as the core's program; :class:`Refusal` (nothing spent) where it cannot be read."""
        if self.ended:
            raise Refusal(core.ERRORS[1])
        try:
            return parse(text, self.variables)
        except FormulaError as exc:
            raise Refusal(f"{exc}; nothing was spent") from None

    @tool(title="Describe the task", readOnlyHint=True)
    def describe(self):
        """Free: the variables, their range, the budget, the protocol and the grammar of the hidden formula."""
        c = self.config
        noise = {"measurement_noise": c.measurement_noise} if c.measurement_noise else {}
        return {"variables": list(self.variables), "input_range": [INPUT_LOW, INPUT_HIGH], "complexity": c.complexity,
                "n_distractors": c.n_distractors, "budget": c.budget, "proposals": c.proposals,
                "grammar": c.grammar_text, **noise}

    @tool(description=_query_description, title="Measure the output", readOnlyHint=False)
    def query(self, inputs: Inputs, formula: StatedFormula = ""):
        """One unit of the budget: the output at the inputs chosen (with the formula believed, under the paper's loop)."""
        program = self._parse(formula) if self.every else None
        return core.Action.make(core.QUERY, self.config, [inputs[v] for v in self.variables], program)

    @tool(title="Submit the formula (ends the session)", destructiveHint=True)
    def submit_formula(self, formula: FormulaText):
        """Submit the formula as Python-style text over the variables (e.g. 3*mass*velocity**2/radius; + - * /, ** with
        an integer exponent, sin cos exp log sqrt); ends the session with the scores. A formula that cannot be read is
        refused and costs nothing."""
        return core.Action.make(core.SUBMIT, self.config, submission=self._parse(formula))

    @tool(title="End without a formula", destructiveHint=True)
    def end(self):
        """End the session without a formula (success 0)."""
        return core.Action.make(core.END, self.config)

    tools = tool_table(describe, query, submit_formula, end)

    def answer(self, name: str, args: dict) -> dict:
        if name != "query" or bool(self.state.ended):  # a right formula ended the session: the query was not made
            return {}
        return {"inputs": {v: args["inputs"][v] for v in self.variables}, "output": float(self.state.output),
                **({"formula_correct": False} if self.every else {})}

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

    def status(self) -> dict:
        return {"budget_remaining": int(self.state.budget_left)}

    def record_fields(self) -> dict:
        return {"instance_id": self.instance_id, "budget": self.config.budget}

    def key_settings(self) -> dict:
        # The budget is a recorded field of the session (record_fields), not a key setting.
        return {k: v for k, v in self.config.settings().items() if k != "budget"}

    def demo_calls(self) -> list[tuple[str, dict]]:
        """A short legal session that ends: describe, two queries (each with a likely wrong
        formula under the paper's loop), a (likely wrong) formula."""
        guess = {"formula": f"2*{self.variables[0]}"}
        low = {"inputs": {v: INPUT_LOW + 1.0 for v in self.variables}, **(guess if self.every else {})}
        high = {"inputs": {v: INPUT_HIGH - 1.5 for v in self.variables}, **(guess if self.every else {})}
        return [("describe", {}), ("query", low), ("query", high), ("submit_formula", guess)]
