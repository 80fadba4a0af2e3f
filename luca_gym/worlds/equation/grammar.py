"""The grammar as arrays: formulas as fixed-size postfix programs, their JAX
evaluator, the generator of hidden formulas from a key, and the renderer.

A formula is a :class:`Structure` (the grammar's choices, written down in
:mod:`~luca_gym.worlds.equation.config`) and, for evaluation, a
:class:`Program`: postfix nodes, each an opcode, an argument and the indices
of its operands (earlier nodes). Node ``L - 1`` is the value: :data:`NOP`
copies the node before it, so a program is padded at its end. Every
structure of a config has the same layout (:func:`build_program`, length
``9m + 4`` for m inputs: ``c1 * M1 * f(M2) +/- c2 * M3`` with each monomial a
product over all m inputs, the absent ones to the power 0); a submitted
formula is parsed into the same opcodes (:mod:`~luca_gym.worlds.equation.formula`).

Everything numeric runs in float64: the world's functions call these under
``jax.enable_x64`` (:func:`x64`), since success is a relative error of 1e-6
and float32 carries about 6e-8 per operation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.equation.config import (
    CONSTANTS, EXPONENTS, FUNCTIONS, INNER_EXPONENTS, INPUT_HIGH, INPUT_LOW, MAX_INNER, N_HELDOUT, NAMES, EquationConfig,
)

# Opcodes. NOP copies the node before it; POW raises its operand to the integer ``arg``.
NOP, VAR, CONST, ADD, SUB, MUL, DIV, POW, NEG, SIN, COS, EXP, LOG, SQRT = range(14)
FUNCTION_OPS = {"sin": SIN, "cos": COS, "exp": EXP, "log": LOG, "sqrt": SQRT}  # what a submission may call
MAX_POWER = 6  # |integer exponent| a program may hold
# Structure.f: 0 is no function (the identity, x**1), then FUNCTIONS in order.
_F_OPS = np.array([POW] + [FUNCTION_OPS[f] for f in FUNCTIONS], np.int32)
CANDIDATES = 8  # formulas drawn per instance; the first that passes the checks is kept
CHECK_POINTS = 64  # random inputs the checks evaluate on (with the range's two corners)
MIN_SPREAD = 1e-6  # relative range of outputs below which a formula counts as constant
MIN_EFFECT = 1e-9  # relative change that counts as depending on a variable


def x64(function):
    """``function`` run under ``jax.enable_x64`` (the world's numbers are float64)."""

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        with jax.enable_x64(True):
            return function(*args, **kwargs)

    return wrapped


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Program:
    """A formula as L postfix nodes (node L-1 is its value).

    Attributes:
        op: int32 (L,) opcodes. arg: float64 (L,): VAR's input index, CONST's
        value, POW's exponent. left, right: int32 (L,) operand node indices.
    """

    op: jax.Array
    arg: jax.Array
    left: jax.Array
    right: jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Structure:
    """The grammar's choices for ``c1 * M1 * f(M2) + sign * c2 * M3`` over m inputs.

    Attributes:
        c1: int (): 1..9. e1: int (m,): exponents of M1 in {-2..2} (0: absent).
        f: int (): 0 none, then 1 + the index in FUNCTIONS. e2: int (m,): M2's, in {-1, 0, 1}.
        sign: int (): +1 or -1. c2: int (): 1..9, or 0 without the second term. e3: int (m,): M3's.
    """

    c1: jax.Array
    e1: jax.Array
    f: jax.Array
    e2: jax.Array
    sign: jax.Array
    c2: jax.Array
    e3: jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Instance:
    """One hidden formula and what is drawn with it.

    Attributes:
        structure: :class:`Structure` (m inputs). program: :class:`Program` (9m+4 nodes).
        relevant: bool (m,): the inputs that enter the formula.
        names: int (m,): indices into NAMES, the inputs' names.
        heldout_x: float64 (N_HELDOUT, m): the inputs a submission is scored on.
        heldout_y: float64 (N_HELDOUT,): the formula's outputs there.
        valid: bool (): a drawn formula passed the checks (always, in practice).
        key: uint32 (2,): the instance's key, which the measurement noise is
            drawn from (None for an instance made by hand: it takes none).
    """

    structure: Structure
    program: Program
    relevant: jax.Array
    names: jax.Array
    heldout_x: jax.Array
    heldout_y: jax.Array
    valid: jax.Array
    key: jax.Array | None = None


def build_program(s: Structure) -> Program:
    """The postfix program of a structure (a fixed layout: jit and vmap apply)."""
    m = s.e1.shape[-1]
    nodes: list[tuple] = []

    def emit(op, arg=0, left=0, right=0) -> int:
        nodes.append((op, arg, left, right))
        return len(nodes) - 1

    def monomial(exponents, product):
        for j in range(m):
            power = emit(POW, exponents[j], emit(VAR, j))
            product = power if product is None else emit(MUL, 0, product, power)
        return product

    term = monomial(s.e1, emit(CONST, s.c1))
    inner = monomial(s.e2, None)
    f_op = jnp.asarray(_F_OPS)[s.f]
    term = emit(MUL, 0, term, emit(f_op, jnp.where(s.f == 0, 1, 0), inner))
    emit(jnp.where(s.sign > 0, ADD, SUB), 0, term, monomial(s.e3, emit(CONST, s.c2)))
    op, arg, left, right = zip(*nodes)
    return Program(
        op=jnp.stack([jnp.asarray(v, jnp.int32) for v in op]),
        arg=jnp.stack([jnp.asarray(v, jnp.float64) for v in arg]),
        left=jnp.asarray(left, jnp.int32),
        right=jnp.asarray(right, jnp.int32),
    )


def evaluate(program: Program, x):
    """The program's value at each row of ``x``: float (P, m) -> (P,).

    Every opcode is computed and one selected (branchless, so vmap applies);
    a domain error (log of a negative, a division by 0) gives nan or inf."""
    length = program.op.shape[0]
    columns = x.shape[-1]

    def node(values, i):
        a, b = values[program.left[i]], values[program.right[i]]
        p = program.arg[i]
        variable = x[:, jnp.clip(p.astype(jnp.int32), 0, columns - 1)]
        results = jnp.stack([
            values[jnp.maximum(i - 1, 0)], variable, jnp.full_like(a, p), a + b, a - b, a * b, a / b,
            jnp.power(a, p), -a, jnp.sin(a), jnp.cos(a), jnp.exp(a), jnp.log(a), jnp.sqrt(a),
        ])
        return values.at[i].set(results[program.op[i]]), None

    values, _ = jax.lax.scan(node, jnp.zeros((length, x.shape[0]), x.dtype), jnp.arange(length))
    return values[length - 1]


def draws_per_formula(m: int) -> int:
    """Uniform numbers :func:`draw_structure` reads for a formula over m inputs."""
    return 4 * m + 7


def _integer(u, low, high):
    """An integer in [low, high) from a uniform number in [0, 1) (low, high may be traced)."""
    return jnp.minimum(low + jnp.floor(u * (high - low)).astype(jnp.int32), high - 1)


def _pick(u, values):
    return jnp.asarray(values)[_integer(u, 0, len(values))]


def draw_structure(u, config: EquationConfig) -> tuple[Structure, jax.Array]:
    """A formula of the grammar over m inputs from ``draws_per_formula(m)``
    uniform numbers ``u``: the first n inputs of a random order enter it.
    Returns (structure, relevant bool (m,))."""
    n, m = config.n_variables, config.n_inputs
    order, u1, u2, u3 = u[:m], u[m:2 * m], u[2 * m:3 * m], u[3 * m:4 * m]
    u_form, u_inner, u_first, u_c1, u_c2, u_f, u_sign = u[4 * m:4 * m + 7]
    rank = jnp.argsort(jnp.argsort(order))  # a uniformly random rank per input; rank < n enters the formula
    if config.complexity == "simple":
        inner, first, has_f = 0, n, False
    elif config.complexity == "medium":
        # c1*M1*f(M2) (inner > 0) or c1*M1 +/- c2*M3 (inner = 0, both monomials non-empty)
        has_f = (u_form < 0.5) if n >= 2 else True
        inner = jnp.where(has_f, _integer(u_inner, 1, min(MAX_INNER, n) + 1), 0)
        first = jnp.where(has_f, n - inner, _integer(u_first, 1, max(n, 2)))
    else:
        has_f = True
        inner = _integer(u_inner, 1, min(MAX_INNER, n - 1) + 1)
        first = _integer(u_first, 0, n - inner)  # leaves M3 at least one variable
    in_first = (rank >= inner) & (rank < inner + first)
    in_third = (rank >= inner + first) & (rank < n)
    has_third = jnp.any(in_third)
    structure = Structure(
        c1=_pick(u_c1, CONSTANTS),
        e1=jnp.where(in_first, _pick(u1, EXPONENTS), 0),
        f=jnp.where(has_f, _integer(u_f, 1, len(FUNCTIONS) + 1), 0),
        e2=jnp.where(rank < inner, _pick(u2, INNER_EXPONENTS), 0),
        sign=jnp.where(has_third & (u_sign < 0.5), -1, 1),
        c2=jnp.where(has_third, _pick(u_c2, CONSTANTS), 0),
        e3=jnp.where(in_third, _pick(u3, EXPONENTS), 0),
    )
    return structure, rank < n


def _inputs(u):
    """Inputs in the range from uniform numbers in [0, 1) (any shape)."""
    return INPUT_LOW + (INPUT_HIGH - INPUT_LOW) * u


def _passes(program: Program, relevant, u):
    """A drawn formula is kept if it is finite on the range, not constant, and
    depends on exactly the relevant inputs (each changed alone, at the check
    points: the range's two corners and CHECK_POINTS inputs from ``u`` (2, CHECK_POINTS, m))."""
    m = relevant.shape[0]
    corners = jnp.stack([jnp.full((m,), INPUT_LOW), jnp.full((m,), INPUT_HIGH)])
    x = jnp.concatenate([corners, _inputs(u[0])])
    other = jnp.concatenate([corners[::-1], _inputs(u[1])])
    changed = jnp.where(jnp.eye(m, dtype=bool)[:, None, :], other[None], x[None])  # (m, P, m): input j changed
    ys = jax.vmap(evaluate, (None, 0))(program, jnp.concatenate([x[None], changed]))
    y, changed_y = ys[0], ys[1:]
    scale = jnp.max(jnp.abs(y))
    effect = jnp.max(jnp.abs(changed_y - y) / jnp.maximum(jnp.abs(y), scale * 1e-12), axis=1)
    finite = jnp.all(jnp.isfinite(ys))
    spread = (jnp.max(y) - jnp.min(y)) > MIN_SPREAD * scale
    return finite & spread & jnp.all((effect > MIN_EFFECT) == relevant)


def generate(key, config: EquationConfig) -> Instance:
    """The instance of ``key`` (pure: jit and vmap apply; compiled once per
    complexity, n_variables and n_distractors). The first of CANDIDATES drawn
    formulas that passes the checks is kept; ``valid`` says whether one did.
    All its randomness is one draw of uniform numbers from ``key``."""
    return _generate(key, config.complexity, config.n_variables, config.n_distractors)


@functools.partial(jax.jit, static_argnames=("complexity", "n_variables", "n_distractors"))
def _generate(key, complexity: str, n_variables: int, n_distractors: int) -> Instance:
    config = EquationConfig(complexity, n_variables, n_distractors)
    m, per = config.n_inputs, draws_per_formula(config.n_inputs)
    sizes = (len(NAMES), CANDIDATES * per, CANDIDATES * 2 * CHECK_POINTS * m, N_HELDOUT * m)
    u_names, u_draw, u_check, u_heldout = jnp.split(jax.random.uniform(key, (sum(sizes),), jnp.float64),
                                                    np.cumsum(sizes)[:-1].tolist())
    structures, relevant = jax.vmap(draw_structure, (0, None))(u_draw.reshape(CANDIDATES, per), config)
    programs = jax.vmap(build_program)(structures)
    passes = jax.vmap(_passes)(programs, relevant, u_check.reshape(CANDIDATES, 2, CHECK_POINTS, m))
    pick = jnp.argmax(passes)
    structure, program = jax.tree.map(lambda a: a[pick], (structures, programs))
    heldout_x = _inputs(u_heldout.reshape(N_HELDOUT, m))
    return Instance(
        structure=structure, program=program, relevant=relevant[pick], names=jnp.argsort(u_names)[:m].astype(jnp.int32),
        heldout_x=heldout_x, heldout_y=evaluate(program, heldout_x), valid=jnp.any(passes), key=key,
    )


@x64
def instance_of(seed: int, config: EquationConfig) -> Instance:
    """The instance of a (sealed or public) seed, on the host (numpy arrays)."""
    out = jax.device_get(generate(jax.random.PRNGKey(seed), config))
    if not out.valid:
        raise RuntimeError(f"seed {seed}: none of {CANDIDATES} drawn formulas passed the checks; report this seed")
    return out


@x64
def instances_of(seeds, config: EquationConfig) -> Instance:
    """The instances of many seeds at once (B leading), as :func:`instance_of` gives them one by one."""
    keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(np.asarray(seeds, np.int64)))
    return jax.device_get(jax.vmap(generate, (0, None))(keys, config))


@x64
def random_structure(seed: int, config: EquationConfig) -> Structure:
    """A formula drawn from the grammar without the checks (the random baseline's guess)."""
    return jax.device_get(_draw(jax.random.PRNGKey(seed), config.complexity, config.n_variables, config.n_distractors))


@functools.partial(jax.jit, static_argnames=("complexity", "n_variables", "n_distractors"))
def _draw(key, complexity, n_variables, n_distractors):
    config = EquationConfig(complexity, n_variables, n_distractors)
    u = jax.random.uniform(key, (draws_per_formula(config.n_inputs),), jnp.float64)
    return draw_structure(u, config)[0]


def names_of(instance: Instance) -> list[str]:
    """The instance's input names, in input order."""
    return [NAMES[int(i)] for i in np.asarray(instance.names)]


# -- text -------------------------------------------------------------------------------------
def _factors(exponents, names) -> tuple[list[str], list[str]]:
    """A monomial's factors above and below the line, as text."""
    up, down = [], []
    for e, name in zip(np.asarray(exponents).tolist(), names):
        if e:
            (up if e > 0 else down).append(name if abs(e) == 1 else f"{name}**{abs(e)}")
    return up, down


def _term(constant: int, exponents, names, extra: str | None = None) -> str:
    up, down = _factors(exponents, names)
    up = ([str(constant)] if constant != 1 else []) + up + ([extra] if extra else [])
    text = "*".join(up) or "1"
    if down:
        text += "/" + (down[0] if len(down) == 1 else "(" + "*".join(down) + ")")
    return text


def render(structure: Structure, names) -> str:
    """A structure as formula text (what :mod:`~luca_gym.worlds.equation.formula`
    parses), e.g. ``3*mass*velocity**2*exp(time/length) - 2/radius``. Never shown to an agent."""
    f = int(structure.f)
    extra = None
    if f:
        inner = _term(1, structure.e2, names)
        extra = f"{FUNCTIONS[f - 1]}({inner})"
    text = _term(int(structure.c1), structure.e1, names, extra)
    if int(structure.c2):
        text += (" + " if int(structure.sign) > 0 else " - ") + _term(int(structure.c2), structure.e3, names)
    return text
