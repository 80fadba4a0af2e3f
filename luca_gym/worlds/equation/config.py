"""The equation world's settings and the constants of its grammar, written down once.

The grammar (:data:`GRAMMAR`, shown to agents word for word; built by
:mod:`~luca_gym.worlds.equation.grammar`): every formula is an instance of

    c1 * M1 * f(M2)  +/-  c2 * M3

with integer constants ``c1, c2`` in 1..9, ``f`` one of sin, exp, log, sqrt,
``M1, M3`` monomials (products of distinct variables, each to a power in
{-2, -1, 1, 2}; an empty product is 1) and ``M2`` a product of one or two
distinct variables, each to the power -1 or 1. Every variable that enters
the formula appears exactly once; the distractors never appear. The three
complexities keep parts of it (depth: the levels of sums, products,
functions and powers in the formula's tree, a power of -1 or 1 being the
variable itself in a numerator or denominator):

* simple (depth 2): ``c1*M1``;
* medium (depth 3): ``c1*M1 + c2*M3`` or ``c1*M1 - c2*M3`` (M1, M3 not
  empty), or ``c1*M1*f(M2)``, each with probability 1/2 (with one variable,
  always the second);
* complex (depth 4): ``c1*M1*f(M2) + c2*M3`` or ``... - c2*M3`` (M3 not empty).

Inputs are real numbers in [:data:`INPUT_LOW`, :data:`INPUT_HIGH`] = [1, 5]:
every formula of the grammar is finite there (``exp`` of at most 25, ``log``
and ``sqrt`` of positive numbers), and the generator checks it anyway.

Beyond the paper, two settings make the world harder (each off by default,
where the instances and rules are the paper's): ``measurement_noise`` (each
answer multiplied by 1 + sigma z, z standard normal) and ``grammar_shown``
(``"words"``: the agent is told the grammar's shape in prose,
:data:`GRAMMAR_WORDS`, not the templates).
"""

from __future__ import annotations

from dataclasses import dataclass

from luca_gym.config import PROPOSALS, ConfigBase, choice, int_in, number_in, setting

COMPLEXITIES = ("simple", "medium", "complex")
GRAMMARS_SHOWN = ("listed", "words")  # how the agent is told the grammar: the templates (the paper's), or prose
MAX_NOISE = 1.0  # the largest relative standard deviation of a measurement
INPUT_LOW, INPUT_HIGH = 1.0, 5.0  # the range of every input, queried or held out
CONSTANTS = tuple(range(1, 10))  # c1, c2
EXPONENTS = (-2, -1, 1, 2)  # of a variable in M1 or M3
INNER_EXPONENTS = (-1, 1)  # of a variable in M2, the argument of f
FUNCTIONS = ("sin", "exp", "log", "sqrt")  # f
MAX_INNER = 2  # variables in M2
N_HELDOUT = 100  # held-out inputs a submission is scored on
TOLERANCE = 1e-6  # relative error allowed on each held-out input
FLOOR = 1e-12  # |truth| below this counts as this much in the relative error
N_VARIABLES = range(1, 9)
N_DISTRACTORS = range(0, 5)
MAX_BUDGET = 1000
# Generic physical names, drawn per instance (a name says nothing of a variable's role).
NAMES = (
    "mass", "velocity", "pressure", "temperature", "volume", "length", "time", "charge", "density", "frequency",
    "area", "current", "voltage", "resistance", "radius", "height", "viscosity", "wavelength", "distance",
    "concentration",
)

GRAMMAR = f"""\
The hidden formula is built from these parts:
- c1, c2 are integers from 1 to 9;
- f is one of sin, exp, log (natural), sqrt;
- M1 and M3 are products of distinct variables, each raised to a power in {{-2, -1, 1, 2}} (an empty product is 1);
- M2 is a product of one or two distinct variables, each raised to the power -1 or 1;
- every variable that enters the formula appears exactly once; the distractor variables do not appear.
By complexity:
- simple:  c1*M1
- medium:  c1*M1 + c2*M3  or  c1*M1 - c2*M3  (M1, M3 not empty),  or  c1*M1*f(M2)
- complex: c1*M1*f(M2) + c2*M3  or  c1*M1*f(M2) - c2*M3  (M3 not empty)
Inputs are real numbers in [{INPUT_LOW:g}, {INPUT_HIGH:g}]."""

# The same grammar told in prose (grammar_shown="words"): its shape, no template written out.
GRAMMAR_WORDS = f"""\
The hidden formula is a small algebraic expression in the variables. It has one or two terms, added or subtracted. \
Each term is a whole number from 1 to 9 times a product of distinct variables, each raised to a small nonzero whole \
power (at most 2 in size, positive or negative). The first term may also be multiplied by one standard function \
(sine, exponential, natural logarithm or square root) of a single variable, or of a product or ratio of two, each to \
the first power; a term with a function may have no other variable. A variable that enters the formula appears in it exactly once; the distractor variables do not \
appear. The complexity says how much of this a formula uses: a simple one is a single term with no function; a \
medium one is either two terms with no function, each holding at least one variable, or one term with a function; a \
complex one is a term with a function and a second term holding at least one variable.
Inputs are real numbers in [{INPUT_LOW:g}, {INPUT_HIGH:g}]."""


@dataclass(frozen=True)
class EquationConfig(ConfigBase):
    """The settings that, with a seed, name an equation instance.

    Attributes:
        complexity: "simple", "medium" or "complex" (the grammar above).
        n_variables: 1..8 variables enter the formula (complex: 2..8); the paper: 3 or 5.
        n_distractors: 0..4 more variables that do not (the paper: 0 or 2).
        budget: queries allowed, 1..1000 (the paper: 10).
        proposals: "every" (default): the paper's loop. Each cycle is a
            query and the formula the agent then believes: the agent states
            its current formula with every query (what it makes of the
            answers so far) and the session ends, solved, the first time it
            is right, the query then not made; a final ``submit_formula``
            stays possible and ends the session either way. "final": one
            submitted formula, which ends the session (not the paper's
            protocol).
        measurement_noise: the relative standard deviation sigma of a
            measurement, 0 to 1 (default 0: exact answers): each query's answer
            is the formula's value times 1 + sigma z, z a standard normal drawn
            from the instance's key and the query's index (a session's answers
            are a pure function of its seed and queries). The noise is on the
            answers only: a formula is still right when it matches the hidden
            one on the held-out inputs, exactly as without noise. Beyond the
            paper.
        grammar_shown: "listed" (default, the paper's: the grammar's templates,
            :data:`GRAMMAR`, word for word) or "words" (its shape in prose,
            :data:`GRAMMAR_WORDS`, no template written out). Beyond the paper.

    Iterations are the paper's cycles: the queries made before the formula
    that ended the session, at least 1, so one query and then the right
    formula is 1 iteration.

    Checked on construction (ValueError naming the field, the value and what
    is allowed), so a config that exists is a valid one. ``n_variables`` and
    ``n_distractors`` fix the shapes (the inputs a query takes: static); one
    compiled step serves every complexity, budget, protocol, noise and
    grammar shown.
    """

    complexity: str = setting("simple", choice(*COMPLEXITIES))
    n_variables: int = setting(3, int_in(N_VARIABLES.start, N_VARIABLES.stop - 1), static=True)
    n_distractors: int = setting(0, int_in(N_DISTRACTORS.start, N_DISTRACTORS.stop - 1), static=True)
    budget: int = setting(10, int_in(1, MAX_BUDGET))
    proposals: str = setting("every", choice(*PROPOSALS))
    measurement_noise: float = setting(0.0, number_in(0.0, MAX_NOISE))
    grammar_shown: str = setting("listed", choice(*GRAMMARS_SHOWN))

    def __post_init__(self):
        super().__post_init__()
        if self.complexity == "complex" and self.n_variables < 2:
            raise ValueError(f"n_variables: {self.n_variables} not allowed with complexity 'complex'; allowed 2..8 "
                             "(f(M2) and M3 each hold a variable)")

    @property
    def grammar_text(self) -> str:
        """The grammar as the agent is told it: :data:`GRAMMAR` or :data:`GRAMMAR_WORDS`."""
        return GRAMMAR if self.grammar_shown == "listed" else GRAMMAR_WORDS

    @property
    def n_inputs(self) -> int:
        """m: the variables an agent sees (the formula's and the distractors)."""
        return self.n_variables + self.n_distractors


def expected_fields(**settings) -> dict:
    """What a session of these settings records beside its key: its budget
    (a results folder must agree on it)."""
    return {"budget": EquationConfig(**{k: v for k, v in settings.items() if k == "budget"}).budget}
