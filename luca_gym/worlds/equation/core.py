"""The pure core: an instance from its seed, ``reset`` and a jitted ``step``
on a typed :class:`Action`, the scores and what an agent sees. The
session's rules and the scorer live here once; the tool session (a tool
table, :mod:`luca_gym.tools.table`) translates.

Rules: a query costs one unit of the budget and answers the hidden formula's
output (float64) at the agent's inputs, each in [1, 5]; once the budget is
spent only a submission or the end remains. A formula is right when it agrees
with the hidden one on all N_HELDOUT held-out inputs (drawn from the seed,
never shown) within a relative error of TOLERANCE (``|guess - truth| <= 1e-6
* max(|truth|, 1e-12)``, and finite). A submission ends the session with
``success`` 1 if it is right, else 0. Under ``proposals="every"`` (the
paper's loop, the default) a query may carry the agent's current formula,
checked first: right, it ends the session solved and the query is not made;
wrong, the query is made. The reward is ``success``, so the return equals it.

With ``measurement_noise`` sigma above 0 (beyond the paper) a query answers
the output times 1 + sigma z, z a standard normal drawn from the instance's
key and the query's index; a formula is scored as without noise, on the
held-out inputs against the hidden formula itself, so a right formula still
succeeds.

``iterations`` is the paper's count of cycles (Auto-Discovery-Bench counts the
cycles of measurement until the agent's formula is right): the queries made
before the formula that ended the session, at least 1, so one query and then
the right formula is 1 iteration; a session ended without a formula counts its
queries. A refused step returns the state unchanged and reward 0. The step
reads no setting but the state's (the budget and the noise live there) and
the action's (whether a query states a formula is decided as the action is
made, :meth:`Action.make`), so it compiles once per number of inputs,
whatever the complexity, budget, noise or protocol.

A formula arrives as text, read by :mod:`~luca_gym.worlds.equation.formula`
on the host before the core sees it (text that cannot be read is refused
there, at no cost); the core takes the parsed
:class:`~luca_gym.worlds.equation.grammar.Program`. That is why the world
declares no ``World.core`` for the generic env (:mod:`~luca_gym.worlds.equation.envs`
says more).

Evaluation is float64 throughout (:func:`~luca_gym.worlds.equation.grammar.x64`):
the public functions here enter ``jax.enable_x64`` themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.validate import check_seed
from luca_gym.worlds.equation.config import FLOOR, INPUT_HIGH, INPUT_LOW, TOLERANCE, EquationConfig
from luca_gym.worlds.equation.formula import MAX_NODES
from luca_gym.worlds.equation.grammar import NOP, Instance, Program, evaluate, instance_of, x64

QUERY, SUBMIT, END = 0, 1, 2
ERRORS = (
    "",
    "the session has ended",
    "the budget is spent: no queries remain; submit a formula (submit_formula) or end",
    f"inputs: each must be a finite number in [{INPUT_LOW:g}, {INPUT_HIGH:g}]",
)
# The measurement noise's stream of the instance key (the instance drew its uniforms from the key itself).
_NOISE_STREAM = 0x7FFFFFFF
# What a query or an end passes as the submission (a fixed shape: one compiled step).
NO_SUBMISSION = Program(op=np.full(MAX_NODES, NOP, np.int32), arg=np.zeros(MAX_NODES), left=np.zeros(MAX_NODES, np.int32),
                        right=np.zeros(MAX_NODES, np.int32))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Action:
    """One action.

    Attributes:
        kind: int32 (): QUERY, SUBMIT or END.
        inputs: float64 (m,): a query's inputs (read by QUERY only).
        submission: a :class:`~luca_gym.worlds.equation.grammar.Program`
            (MAX_NODES nodes): the formula a SUBMIT states, or a QUERY under
            the paper's loop (:data:`NO_SUBMISSION`: none).
        proposing: bool (): whether ``submission`` is a formula the agent
            states (a SUBMIT's always; a QUERY's under ``proposals="every"``
            where it carries one).
    """

    kind: jax.Array
    inputs: jax.Array
    submission: Program
    proposing: jax.Array

    @classmethod
    def make(cls, kind: int, config: EquationConfig, inputs=None, submission: Program | None = None) -> "Action":
        """An action of ``kind`` under ``config``: ``inputs`` (m numbers) for a
        QUERY; ``submission`` (a parsed formula) for a SUBMIT, or for a QUERY
        under ``config.proposals == "every"`` (None: it states none)."""
        inputs = np.zeros(config.n_inputs) + INPUT_LOW if inputs is None else np.asarray(inputs, np.float64)
        proposing = kind == SUBMIT or (kind == QUERY and config.proposals == "every" and submission is not None)
        return cls(np.int32(kind), inputs, NO_SUBMISSION if submission is None else submission, np.bool_(proposing))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EquationState:
    """A session's state.

    Attributes:
        program: the hidden formula's :class:`~luca_gym.worlds.equation.grammar.Program` (9m+4 nodes).
        heldout_x: float64 (N_HELDOUT, m). heldout_y: float64 (N_HELDOUT,): the scoring inputs and outputs.
        budget_left: int (): queries left. queries: int (): queries made.
        ended: bool (). success: float64 (): 1.0 once a right formula ends the session.
        iterations: int (): once ended, the queries made, at least 1 where a
            formula ended the session (0 before the end).
        noise: float64 (): the measurement noise's relative standard deviation.
        noise_key: uint32 (2,): what it is drawn from (the instance's key, a stream of its own).
        output: float64 (): the answer of the last step, where it made a
            query (0 after a step that made none).
    """

    program: Program
    heldout_x: jax.Array
    heldout_y: jax.Array
    budget_left: jax.Array
    queries: jax.Array
    ended: jax.Array
    success: jax.Array
    iterations: jax.Array
    noise: jax.Array
    noise_key: jax.Array
    output: jax.Array


def instance(seed: int, config: EquationConfig, seal=None) -> Instance:
    """The instance of ``seed`` (sealed: of its sealed seed), a pure function of them and the config."""
    seed = check_seed(seed) if seal is None else seal.organism_seed(seed)
    return instance_of(seed, config)


@x64
def reset(inst: Instance, config: EquationConfig) -> EquationState:
    """The session's opening state for an instance (the full budget, nothing
    queried); float64. An instance made by hand (no key) takes no
    measurement noise (ValueError if the config asks for some)."""
    if inst.key is None and config.measurement_noise:
        raise ValueError("measurement_noise: an instance without its key (made by hand) takes none; use core.instance")
    key = jnp.zeros(2, jnp.uint32) if inst.key is None else jnp.asarray(inst.key, jnp.uint32)
    return EquationState(
        program=jax.tree.map(jnp.asarray, inst.program), heldout_x=jnp.asarray(inst.heldout_x),
        heldout_y=jnp.asarray(inst.heldout_y), budget_left=jnp.int32(config.budget), queries=jnp.int32(0),
        ended=jnp.bool_(False), success=jnp.float64(0.0), iterations=jnp.int32(0),
        noise=jnp.float64(config.measurement_noise), noise_key=jax.random.fold_in(key, _NOISE_STREAM),
        output=jnp.float64(0.0),
    )


def agrees(guess, truth):
    """Whether every guess is finite and within the relative TOLERANCE of the truth."""
    return jnp.all(jnp.isfinite(guess) & (jnp.abs(guess - truth) <= TOLERANCE * jnp.maximum(jnp.abs(truth), FLOOR)))


@jax.jit
def _step(state: EquationState, kind, inputs, submission: Program, proposing):
    """One compiled step per number of inputs: the rules read no setting but the
    state's; ``proposing`` (bool ()) says whether ``submission`` is a formula
    the agent states (a SUBMIT's always; a QUERY's under the paper's loop)."""
    in_range = jnp.all(jnp.isfinite(inputs) & (inputs >= INPUT_LOW) & (inputs <= INPUT_HIGH))
    is_query = kind == QUERY
    error = jnp.where(state.ended, 1, jnp.where(is_query & (state.budget_left <= 0), 2, jnp.where(is_query & ~in_range, 3, 0)))
    ok = error == 0
    proposed = ok & (proposing | (kind == SUBMIT))
    solved = proposed & agrees(evaluate(submission, state.heldout_x), state.heldout_y)
    queried = ok & is_query & ~solved
    ending = ok & (~is_query | solved)
    success = jnp.where(solved, 1.0, 0.0)
    output = evaluate(state.program, jnp.clip(inputs, INPUT_LOW, INPUT_HIGH)[None])[0]
    # The query's noise, from the instance's key and the query's index (times 0 without noise: the exact value).
    z = jax.random.normal(jax.random.fold_in(state.noise_key, state.queries), (), jnp.float64)
    output = jnp.where(queried, output * (1.0 + state.noise * z), 0.0)
    new = replace(
        state, budget_left=state.budget_left - queried.astype(jnp.int32),
        queries=state.queries + queried.astype(jnp.int32),
        ended=state.ended | ending,
        success=jnp.where(ending, success, state.success),
        iterations=jnp.where(ending, jnp.maximum(state.queries, proposed.astype(jnp.int32)), state.iterations),
        output=jnp.where(ok, output, state.output),
    )
    return new, success, error, output


@x64
def step(state: EquationState, action: Action, config: EquationConfig | None = None):
    """One :class:`Action`: (state, reward float64 (), error code int ()).
    A query's answer is the new state's ``output``; a formula that ends the
    session pays its ``success``. A right formula with a query ends the
    session solved and the query is not made (output 0). A refused action
    (error != 0; ERRORS[error] says why) changes nothing. ``config`` is not
    read (the state and the action hold what the rules need)."""
    state, reward, error, _ = _step(state, action.kind, action.inputs, action.submission, action.proposing)
    return state, reward, error


def ended(state: EquationState) -> jax.Array:
    """Whether the session has ended, bool ()."""
    return state.ended


def scores(state: EquationState, config=None) -> dict:
    """The session's scores as JSON-ready Python values: ``success`` (float) and ``iterations`` (int)."""
    return {"success": float(state.success), "iterations": int(state.iterations)}


def public_view(state: EquationState, config: EquationConfig | None = None) -> dict:
    """What an agent sees of the state: ``budget_left`` and ``queries`` (int32
    ()) and the last query's ``output`` (float64 ()); never the formula or the
    held-out inputs."""
    return {"budget_left": state.budget_left, "queries": state.queries, "output": state.output}
