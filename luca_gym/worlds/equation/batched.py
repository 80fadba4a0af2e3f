"""The equation world batched for learners: a finite family of the grammar's
formulas, queried on a fixed grid, in a pure functional env (gymnax style)
that ``jit`` compiles once and ``vmap`` runs over thousands of instances.

The host world (:mod:`~luca_gym.worlds.equation.core`) hides any formula of
its grammar and scores text. Here the hidden formula is one of a **family**
of F formulas fixed per config, and the agent answers with an index:

* **The family** (:func:`family`): the first F distinct formulas that the
  host world's own generator (:func:`~luca_gym.worlds.equation.grammar.generate`,
  with its checks: finite on [1, 5], not constant, depending on exactly the
  relevant inputs) draws from a fixed family key, at the config's complexity,
  variables and distractors. So every candidate is a formula of the
  grammar ``c1*M1*f(M2) +/- c2*M3`` (the formulas the host world draws
  most often enter first), and the family of size F is the start of every
  larger one. Two draws are the same formula when they agree on the check
  points to SIGNIFICANT digits (e.g. ``c1*M1 + c2*M3`` and ``c2*M3 +
  c1*M1``); the family keeps the first. A grammar with fewer than F formulas
  is refused (simple: 36 formulas over one variable, 144 over two, 576 over
  three). The family's keys are no seed's key, so the family is not made of
  the host world's evaluation instances (small grammars share formulas all
  the same). Its values at the query points and the check points are
  tabulated once on the host by the host world's evaluator, in float64, and
  held in float32: an env step is a gather, never an evaluation.
* **An instance** is an index into the family, uniform, a pure function of a
  key (:func:`draw_hidden`); ``reset(PRNGKey(s))`` and the flat codec's
  instance of seed ``s`` are the same.
* **Queries** are the points of a grid of Q points per input (G = Q**m
  points over the m inputs, distractors included; each input's Q points
  are jittered apart so that no two inputs share a value). A query
  answers the formula's value there, times ``1 + noise * z`` with z a
  standard normal (``noise``: a relative measurement error, 0 by default).
* **Proposals**: proposing candidate c is right when c agrees with the hidden
  formula on the N_HELDOUT check points within the host's relative
  tolerance (:func:`~luca_gym.worlds.equation.core.agrees`): right ends the
  episode, reward 1. As in the paper's loop, where each cycle is a query and
  the formula the agent then believes, a wrong proposal takes a cycle: it
  spends one unit of the budget (``proposals="every"``, the default; under
  ``"final"`` any proposal ends the episode). Once the budget is spent, one
  final proposal remains and ends the episode either way. ``query_cost`` is
  taken from the reward for every unit of budget spent, so the return is
  the success less the cost (the success, at the default cost 0).
* **Iterations** (the paper's count): the units of budget spent before the
  proposal that ended the episode, at least 1.

The action is one ``Discrete(G + F)``: actions 0..G-1 query a grid point,
actions G..G+F-1 propose a candidate. The observation (float32,
``budget * (m + 1) + 2``) is the history of queries (each row the point's m
inputs and the value answered, in the order asked; rows not yet asked are
0), then the number of queries made, then the step count (units of budget
spent). The mask allows queries while budget remains and proposals until the
end. An action outside [0, G + F) is refused inside the jit at no cost (error
3), as the graph worlds' flat codec refuses a node out of range; a query with
the budget spent (error 2) or any action after the end (error 1) likewise:
a refused action changes nothing and earns nothing.

Two front ends over the same step:

* gymnax style: :func:`reset` ``(key, params) -> (obs, state)``,
  :func:`step_env` (no autoreset: an ended episode refuses every action) and
  :func:`step` (gymnax's autoreset: an episode that ends is replaced by a
  fresh instance drawn by the key), ``params`` (:class:`EquationParams`: the
  family's tables, noise and cost) apart from the state.
* :class:`EquationBatchedFlat`, the :class:`luca_gym.protocol.FlatCodec` that
  :mod:`luca_gym.functional` (pools, autoreset, ``flat_rollout``) and the PPO
  take; it serves learners only, not host sessions (no ``decode``: a host
  instance is not a family member).

Baselines as policies (:data:`BASELINES`, :func:`play`): ``random`` (random
queries, then a random proposal) and ``eliminate`` (the candidates consistent
with every value observed, read from the observation; a proposal when one
remains or the budget is spent).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.validate import is_integer, short_repr
from luca_gym.worlds.equation import grammar
from luca_gym.worlds.equation.config import FLOOR, INPUT_HIGH, INPUT_LOW, N_HELDOUT, TOLERANCE, EquationConfig
from luca_gym.worlds.equation.core import agrees

FAMILY_SEED = 0x5EED_E9  # the family's key, grid and check points; not a seed of the host world's instances
CHUNK = 256  # draws of the host generator per compiled call while the family is collected
SIGNIFICANT = 9  # digits to which two draws' values on the check points must agree to count as one formula
MAX_FAMILY = 4096
MAX_GRID = 16
MAX_QUERY_POINTS = 4096
MAX_TABLE = 2**24  # F * G: the float32 table of every candidate at every query point (64 MiB)
NOISE_SIGMAS = 4.0  # eliminate keeps a candidate within this many noise deviations of a value
ERRORS = (
    "",
    "the session has ended",
    "the budget is spent: no queries remain; propose a candidate",
    "action out of range",
)


@dataclass(frozen=True)
class BatchedConfig:
    """The static settings of the batched env: every array shape follows from them.

    Attributes:
        complexity, n_variables, n_distractors: the host world's grammar
            settings (:class:`~luca_gym.worlds.equation.config.EquationConfig`,
            which checks them).
        budget: units of budget (queries and wrong proposals), 1..1000 (the paper: 10).
        proposals: "every" (default; the paper's loop): a wrong proposal takes
            a unit of budget and the episode goes on; "final": any proposal
            ends the episode (one submission, as the host world's "final").
        family_size: F, candidates in the family, 2..4096.
        grid: Q, query points per input, 2..16, with Q**m <= 4096 and F * Q**m <= 2**24.

    Checked on construction (ValueError naming the field, the value and what is allowed).
    """

    complexity: str = "simple"
    n_variables: int = 3
    n_distractors: int = 0
    budget: int = 10
    family_size: int = 256
    grid: int = 4
    proposals: str = "every"

    def __post_init__(self):
        host = EquationConfig(self.complexity, self.n_variables, self.n_distractors, self.budget, self.proposals)
        for name in ("n_variables", "n_distractors", "budget"):
            object.__setattr__(self, name, getattr(host, name))
        _check_int(self.family_size, "family_size", 2, MAX_FAMILY)
        _check_int(self.grid, "grid", 2, MAX_GRID)
        object.__setattr__(self, "family_size", int(self.family_size))
        object.__setattr__(self, "grid", int(self.grid))
        if self.num_query_points > MAX_QUERY_POINTS:
            largest = max(q for q in range(1, MAX_GRID + 1) if q**self.n_inputs <= MAX_QUERY_POINTS)
            raise ValueError(f"grid: {self.grid} not allowed with {self.n_inputs} inputs ({self.grid}**{self.n_inputs} "
                             f"query points); at most {MAX_QUERY_POINTS} points: grid 2..{largest}")
        if self.family_size * self.num_query_points > MAX_TABLE:
            raise ValueError(f"family_size: {self.family_size} not allowed with {self.num_query_points} query points; "
                             f"family_size * grid**inputs at most {MAX_TABLE}")

    @property
    def n_inputs(self) -> int:
        """m: the inputs (the formula's variables and the distractors)."""
        return self.n_variables + self.n_distractors

    @property
    def num_query_points(self) -> int:
        """G = grid**m."""
        return self.grid**self.n_inputs

    @property
    def num_actions(self) -> int:
        """K = G + F."""
        return self.num_query_points + self.family_size

    @property
    def observation_size(self) -> int:
        """D = budget * (m + 1) + 2."""
        return self.budget * (self.n_inputs + 1) + 2


def _check_int(value, name: str, low: int, high: int) -> None:
    if not is_integer(value) or not low <= value <= high:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; an integer in {low}..{high}")


def _check_rate(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; a finite number >= 0")
    return float(value)


# -- the family, tabulated once on the host ------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """A config's candidates and their tables (numpy, on the host).

    Attributes:
        structures: the host grammar's :class:`~luca_gym.worlds.equation.grammar.Structure`, F leading.
        grid: float64 (m, Q): each input's query values, ascending.
        values: float64 (F, G): every candidate at every query point (point g's
            input j is ``grid[j, (g // Q**(m-1-j)) % Q]``).
        check_x: float64 (N_HELDOUT, m): the check points. check: float64 (F, N_HELDOUT): the values there.
        draws: the host generator's draws it took to find F distinct formulas.
    """

    structures: grammar.Structure
    grid: np.ndarray
    values: np.ndarray
    check_x: np.ndarray
    check: np.ndarray
    draws: int


def query_grid(m: int, q: int) -> np.ndarray:
    """float64 (m, Q): input j's Q query values, one in each of Q equal slices
    of [1, 5] at a fixed jittered place, so that no two inputs share a value."""
    rng = np.random.default_rng([FAMILY_SEED, m, q])
    return INPUT_LOW + (INPUT_HIGH - INPUT_LOW) * (np.arange(q) + rng.uniform(0.1, 0.9, (m, q))) / q


def query_points(grid: np.ndarray) -> np.ndarray:
    """float64 (G, m): the product of the inputs' query values, point g's digits base Q in input order."""
    m, q = grid.shape
    digits = (np.arange(q**m)[:, None] // q ** np.arange(m - 1, -1, -1)) % q
    return grid[np.arange(m), digits]


@functools.partial(jax.jit, static_argnames=("host",))
def _draws(start, host: EquationConfig):
    """CHUNK formulas of the host generator, from the family keys start..start+CHUNK-1."""
    keys = jax.vmap(jax.random.fold_in, (None, 0))(jax.random.PRNGKey(FAMILY_SEED), start + jnp.arange(CHUNK))
    inst = jax.vmap(grammar.generate, (0, None))(keys, host)
    return inst.structure, inst.program, inst.valid


_evaluate_all = jax.jit(jax.vmap(grammar.evaluate, (0, None)))


def family(config: BatchedConfig) -> Family:
    """The config's family: the first F distinct formulas the host generator
    draws from the family key, in the order drawn (cached by the settings it
    depends on: the grammar's, F and Q). ValueError where the grammar runs
    out (a chunk of draws brings no new formula) first."""
    return _family(config.complexity, config.n_variables, config.n_distractors, config.family_size, config.grid)


@functools.lru_cache(maxsize=16)
@grammar.x64
def _family(complexity: str, n_variables: int, n_distractors: int, f: int, q: int) -> Family:
    host = EquationConfig(complexity, n_variables, n_distractors)
    m = host.n_inputs
    check_x = np.random.default_rng([FAMILY_SEED, m]).uniform(INPUT_LOW, INPUT_HIGH, (N_HELDOUT, m))
    seen: set[bytes] = set()
    kept_structures, kept_programs, kept_check = [], [], []
    draws = 0
    while len(seen) < f:
        structures, programs, valid = jax.device_get(_draws(jnp.int32(draws), host))
        draws += CHUNK
        check = np.asarray(_evaluate_all(programs, check_x))
        before = len(seen)
        for i in np.flatnonzero(valid & np.isfinite(check).all(axis=1)):
            key = " ".join(f"{v:.{SIGNIFICANT - 1}e}" for v in check[i]).encode()  # one formula: the same values
            if key in seen or len(seen) == f:
                continue
            seen.add(key)
            kept_structures.append(jax.tree.map(lambda a: a[i], structures))
            kept_programs.append(jax.tree.map(lambda a: a[i], programs))
            kept_check.append(check[i])
        if len(seen) == before:
            raise ValueError(f"family_size: {f} not allowed for complexity {complexity!r} with {n_variables} "
                             f"variable(s) and {n_distractors} distractor(s): the grammar gave {len(seen)} "
                             f"distinct formulas in {draws} draws; allowed at most {len(seen)}")
    stack = lambda items: jax.tree.map(lambda *a: np.stack(a), *items)  # noqa: E731
    grid = query_grid(m, q)
    values = np.asarray(_evaluate_all(stack(kept_programs), query_points(grid)))
    return Family(structures=stack(kept_structures), grid=grid, values=values, check_x=check_x,
                  check=np.stack(kept_check), draws=draws)


def formula(config: BatchedConfig, index: int) -> str:
    """Candidate ``index`` as the host world's formula text, over inputs named
    x1..xm (what :func:`~luca_gym.worlds.equation.formula.parse` reads)."""
    _check_int(index, "index", 0, config.family_size - 1)
    structure = jax.tree.map(lambda a: a[int(index)], family(config).structures)
    return grammar.render(structure, input_names(config))


def input_names(config: BatchedConfig) -> list[str]:
    """The inputs' names in :func:`formula`: x1..xm."""
    return [f"x{j + 1}" for j in range(config.n_inputs)]


# -- params and state --------------------------------------------------------------------------
@functools.partial(jax.tree_util.register_dataclass, data_fields=["values", "check", "grid", "noise", "query_cost"],
         meta_fields=["config"])
@dataclass(frozen=True)
class EquationParams:
    """The env's parameters (gymnax style): traced arrays beside the static config.

    Attributes:
        values: float32 (F, G): every candidate at every query point.
        check: float32 (F, N_HELDOUT): every candidate at the check points.
        grid: float32 (m, Q): each input's query values.
        noise: float32 (): the relative measurement error (0: exact values).
        query_cost: float32 (): taken from the reward per unit of budget spent.
        config: :class:`BatchedConfig` (static: the shapes).
    """

    values: jax.Array
    check: jax.Array
    grid: jax.Array
    noise: jax.Array
    query_cost: jax.Array
    config: BatchedConfig


def default_params(config: BatchedConfig, noise: float = 0.0, query_cost: float = 0.0) -> EquationParams:
    """The params of ``config`` (its family's tables, built once per config) with ``noise`` and ``query_cost``."""
    fam = family(config)
    return EquationParams(values=jnp.asarray(fam.values, jnp.float32), check=jnp.asarray(fam.check, jnp.float32),
                          grid=jnp.asarray(fam.grid, jnp.float32), noise=jnp.float32(_check_rate(noise, "noise")),
                          query_cost=jnp.float32(_check_rate(query_cost, "query_cost")), config=config)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EquationBatchedState:
    """One episode.

    Attributes:
        hidden: int32 (): the hidden formula's index in the family.
        history: float32 (budget, m + 1): the queries in order, each the point's inputs and the value answered.
        queries: int32 (): queries made (rows of the history filled).
        cycles: int32 (): units of budget spent (queries and wrong proposals): the step count.
        ended: bool (). success: float32 (): 1 once a right proposal ended the episode.
        iterations: int32 (): once ended, the units spent before the ending proposal, at least 1 (0 before).
    """

    hidden: jax.Array
    history: jax.Array
    queries: jax.Array
    cycles: jax.Array
    ended: jax.Array
    success: jax.Array
    iterations: jax.Array


def draw_hidden(key: jax.Array, config: BatchedConfig) -> jax.Array:
    """int32 (): the instance of ``key``, a uniform index into the family."""
    return jax.random.randint(key, (), 0, config.family_size, jnp.int32)


def open_session(hidden: jax.Array, params: EquationParams) -> tuple[jax.Array, EquationBatchedState]:
    """(obs, state) of an episode on family member ``hidden``: nothing asked, the full budget."""
    c = params.config
    state = EquationBatchedState(
        hidden=jnp.asarray(hidden, jnp.int32), history=jnp.zeros((c.budget, c.n_inputs + 1), jnp.float32),
        queries=jnp.int32(0), cycles=jnp.int32(0), ended=jnp.bool_(False), success=jnp.float32(0.0),
        iterations=jnp.int32(0),
    )
    return observation(state), state


def reset(key: jax.Array, params: EquationParams) -> tuple[jax.Array, EquationBatchedState]:
    """(obs float32 (D,), state): an episode on the instance of ``key``. Pure."""
    return open_session(draw_hidden(key, params.config), params)


def observation(state: EquationBatchedState) -> jax.Array:
    """float32 (D,): the history row by row, then the queries made, then the step count."""
    return jnp.concatenate([state.history.reshape(-1), jnp.stack([state.queries, state.cycles]).astype(jnp.float32)])


def action_mask(state: EquationBatchedState, params: EquationParams) -> jax.Array:
    """bool (K,): queries while budget remains, proposals until the end."""
    c = params.config
    open_ = ~state.ended
    can_query = open_ & (state.cycles < c.budget)
    return jnp.concatenate([jnp.broadcast_to(can_query, (c.num_query_points,)), jnp.broadcast_to(open_, (c.family_size,))])


def _digit_powers(config: BatchedConfig) -> np.ndarray:
    """int32 (m,): the place value of each input's digit in a query point's index."""
    return (config.grid ** np.arange(config.n_inputs - 1, -1, -1)).astype(np.int32)


def point_of(q: jax.Array, params: EquationParams) -> jax.Array:
    """float32 (m,): the inputs of query point ``q`` (int32 ())."""
    c = params.config
    digits = (q // _digit_powers(c)) % c.grid
    return params.grid[jnp.arange(c.n_inputs), digits]


def step_env(key: jax.Array, state: EquationBatchedState, action: jax.Array, params: EquationParams):
    """One action, no autoreset: (obs, state, reward float32 (), done bool (), info).

    ``key`` draws the query's measurement noise. ``info``: ``error`` int32
    (0, or the refusal's index in :data:`ERRORS`: the state is then
    unchanged and the reward 0), ``success`` float32, ``iterations`` int32,
    ``mask`` bool (K,) of the new state. Pure: jit and vmap apply; one
    compile serves every instance, noise and cost of a config."""
    c = params.config
    g = c.num_query_points
    action = jnp.asarray(action, jnp.int32)
    inside = (action >= 0) & (action < c.num_actions)
    is_query = action < g
    has_budget = state.cycles < c.budget
    error = jnp.where(state.ended, 1, jnp.where(~inside, 3, jnp.where(is_query & ~has_budget, 2, 0))).astype(jnp.int32)
    ok = error == 0
    queried = ok & is_query
    proposed = ok & ~is_query
    # A query: the hidden formula's value at the point, with its noise.
    q = jnp.clip(action, 0, g - 1)
    value = params.values[state.hidden, q] * (1.0 + params.noise * jax.random.normal(key, (), jnp.float32))
    row = jnp.concatenate([point_of(q, params), value[None]])
    at = jnp.minimum(state.queries, c.budget - 1)
    history = state.history.at[at].set(jnp.where(queried, row, state.history[at]))
    # A proposal: right on the check points ends it solved; wrong takes a cycle, or ends it once the budget is spent.
    candidate = jnp.clip(action - g, 0, c.family_size - 1)
    solved = proposed & agrees(params.check[candidate], params.check[state.hidden])
    goes_on = has_budget & (c.proposals == "every")  # a wrong proposal that takes a cycle and leaves the episode open
    spent = queried | (proposed & ~solved & goes_on)
    ending = solved | (proposed & ~goes_on)
    new = EquationBatchedState(
        hidden=state.hidden, history=history, queries=state.queries + queried.astype(jnp.int32),
        cycles=state.cycles + spent.astype(jnp.int32), ended=state.ended | ending,
        success=jnp.where(solved, jnp.float32(1.0), state.success),
        iterations=jnp.where(ending, jnp.maximum(state.cycles, 1), state.iterations),
    )
    reward = solved.astype(jnp.float32) - params.query_cost * spent.astype(jnp.float32)
    info = {"error": error, "success": new.success, "iterations": new.iterations, "mask": action_mask(new, params)}
    return observation(new), new, reward, new.ended, info


def step(key: jax.Array, state: EquationBatchedState, action: jax.Array, params: EquationParams):
    """:func:`step_env` with gymnax's autoreset: where the episode ends, the
    returned obs and state are a fresh episode's on the instance drawn by
    ``key`` (info's ``success`` and ``iterations`` stay the ended one's,
    ``mask`` is the fresh one's). Pure."""
    key_step, key_reset = jax.random.split(key)
    obs, new, reward, done, info = step_env(key_step, state, action, params)
    obs_reset, fresh = reset(key_reset, params)
    new = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, new)
    info = {**info, "mask": jnp.where(done, action_mask(fresh, params), info["mask"])}
    return jnp.where(done, obs_reset, obs), new, reward, done, info


# -- baselines as policies -----------------------------------------------------------------------
def read_history(obs: jax.Array, params: EquationParams) -> tuple[jax.Array, jax.Array, jax.Array]:
    """What an observation says: (query point index int32 (H,), value float32
    (H,), filled bool (H,)), H = budget; each point read back from its
    inputs (the grid value nearest to each)."""
    c = params.config
    m, h = c.n_inputs, c.budget
    history = obs[: h * (m + 1)].reshape(h, m + 1)
    digits = jnp.argmin(jnp.abs(history[:, :m, None] - params.grid[None]), axis=-1).astype(jnp.int32)  # (H, m)
    return digits @ _digit_powers(c), history[:, m], jnp.arange(h) < obs[h * (m + 1)]


def consistent(obs: jax.Array, params: EquationParams) -> jax.Array:
    """bool (F,): the candidates whose value at every point in the
    observation's history agrees with the value observed there, within the
    host's relative tolerance widened by NOISE_SIGMAS noise deviations."""
    points, observed, filled = read_history(obs, params)
    table = params.values[:, points]  # (F, H)
    allowed = (TOLERANCE + NOISE_SIGMAS * params.noise) * jnp.maximum(jnp.abs(table), FLOOR)
    return jnp.all((jnp.abs(table - observed) <= allowed) | ~filled, axis=1)


def _pick(key, allowed):
    """A uniformly random index where ``allowed`` (bool (n,)) holds (any, where
    none does), from one random integer: the r-th allowed index."""
    count = jnp.cumsum(allowed | ~jnp.any(allowed))
    return jnp.argmax(count > jax.random.randint(key, (), 0, count[-1])).astype(jnp.int32)


def _random_one(params: EquationParams, key, obs, mask):
    g = params.config.num_query_points
    k_query, k_propose = jax.random.split(key)
    can_query = jnp.any(mask[:g])
    return jnp.where(can_query, _pick(k_query, mask[:g]), g + _pick(k_propose, mask[g:]))


def _eliminate_one(params: EquationParams, key, obs, mask):
    g = params.config.num_query_points
    k_query, k_propose = jax.random.split(key)
    alive = consistent(obs, params)
    can_query = jnp.any(mask[:g])
    settle = (jnp.sum(alive) == 1) | ~can_query
    points, _, filled = read_history(obs, params)
    asked = jnp.zeros(g, bool).at[jnp.where(filled, points, g)].set(True, mode="drop")
    fresh = mask[:g] & ~asked
    query = _pick(k_query, jnp.where(jnp.any(fresh), fresh, mask[:g]))
    return jnp.where(settle, g + _pick(k_propose, alive), query)


def _per_env(one, params: EquationParams, key, obs, mask):
    return jax.vmap(one, (None, 0, 0, 0))(params, jax.random.split(key, obs.shape[0]), obs, mask)


def random_policy(params: EquationParams, key, obs, mask):
    """``random``: a random legal query while budget remains, then a random
    proposal. ``(params, key, obs float32 (B, D), mask bool (B, K)) -> int32 (B,)``."""
    return _per_env(_random_one, params, key, obs, mask)


def eliminate_policy(params: EquationParams, key, obs, mask):
    """``eliminate``: the candidates :func:`consistent` with the observation
    (vectorised over the family); a proposal (a random one of them) when
    one remains or no query is left, else a random grid point not yet asked.
    Same signature as :func:`random_policy`."""
    return _per_env(_eliminate_one, params, key, obs, mask)


BASELINES = {"random": random_policy, "eliminate": eliminate_policy}


@functools.partial(jax.jit, static_argnames=("policy", "num_envs"))
def play(policy, params: EquationParams, key: jax.Array, num_envs: int) -> dict:
    """``num_envs`` episodes, each on the instance of its own key and played
    to its end by ``policy`` (``(params, key, obs (B, D), mask (B, K)) ->
    (B,)``), no autoreset: budget + 1 steps (each legal action spends a unit
    of budget or ends the episode). Returns float32 / int32 (B,) arrays:
    ``success``, ``iterations``, ``return``, ``ended``, ``hidden``."""
    k_reset, k_play = jax.random.split(key)
    obs, state = jax.vmap(reset, (0, None))(jax.random.split(k_reset, num_envs), params)
    mask = jax.vmap(action_mask, (0, None))(state, params)

    def body(carry, key):
        obs, state, mask, total = carry
        k_policy, k_step = jax.random.split(key)
        action = policy(params, k_policy, obs, mask)
        obs, state, reward, _, info = jax.vmap(step_env, (0, 0, 0, None))(jax.random.split(k_step, num_envs), state,
                                                                          action, params)
        return (obs, state, info["mask"], total + reward), None

    steps = jax.random.split(k_play, params.config.budget + 1)
    (_, state, _, total), _ = jax.lax.scan(body, (obs, state, mask, jnp.zeros(num_envs, jnp.float32)), steps)
    return {"success": state.success, "iterations": state.iterations, "return": total, "ended": state.ended,
            "hidden": state.hidden}


def summary(result: dict) -> dict:
    """The paper's two numbers of a :func:`play` result: the success rate and
    the mean iterations over successful episodes (inf where none succeeded)."""
    success = np.asarray(result["success"]) > 0
    iterations = np.asarray(result["iterations"])[success]
    return {"success": float(success.mean()), "iterations": float(iterations.mean()) if success.any() else float("inf"),
            "episodes": int(success.size)}


# -- the flat codec (luca_gym.functional, the PPO) ------------------------------------------------
@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class FlatSession:
    """The flat codec's state: an episode and the key its noise is drawn from.

    Attributes: episode: :class:`EquationBatchedState`. key: uint32 (2,), split at every step.
    """

    episode: EquationBatchedState
    key: jax.Array


@functools.lru_cache(maxsize=16)
def _params(config: BatchedConfig, noise: float, query_cost: float) -> EquationParams:
    return default_params(config, noise, query_cost)


@dataclass(frozen=True)
class EquationBatchedFlat:
    """The flat codec (:class:`luca_gym.protocol.FlatCodec`) of the batched
    equation env: K = G + F actions, D = budget * (m + 1) + 2 observations,
    the same step as :func:`step_env`; the instance of seed ``s`` is
    ``reset(PRNGKey(s))``'s. A hashable value (jit's static argument)."""

    config: BatchedConfig
    noise: float = 0.0
    query_cost: float = 0.0
    world = "equation"
    headline = "success"

    def __post_init__(self):
        object.__setattr__(self, "noise", _check_rate(self.noise, "noise"))
        object.__setattr__(self, "query_cost", _check_rate(self.query_cost, "query_cost"))
        _params(self.config, self.noise, self.query_cost)  # the family is built here, on the host, not inside a trace

    @property
    def params(self) -> EquationParams:
        return _params(self.config, self.noise, self.query_cost)

    @property
    def num_actions(self) -> int:
        return self.config.num_actions

    @property
    def observation_size(self) -> int:
        return self.config.observation_size

    def settings(self) -> dict:
        """Keyword settings of :func:`flat_codec` that rebuild this codec."""
        return {**{f.name: getattr(self.config, f.name) for f in fields(self.config)}, "noise": self.noise,
                "query_cost": self.query_cost}

    def describe(self) -> str:
        """The codec's settings in one line (for tables and run folders)."""
        c = self.config
        return (f"equation batched {c.complexity}, {c.n_variables} var + {c.n_distractors} distractors, "
                f"F={c.family_size}, grid {c.grid}, budget {c.budget}, noise {self.noise:g}")

    def instances(self, seeds):
        """{"hidden": int32 (B,), "key": uint32 (B, 2)}: the instances of ``seeds``."""
        keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(np.asarray(seeds, np.int64) % 2**31, jnp.int32))
        hidden = jax.vmap(draw_hidden, (0, None))(keys, self.config)
        return {"hidden": hidden, "key": jax.vmap(jax.random.fold_in, (0, None))(keys, 1)}

    def open(self, instance):
        """(session, observation, mask) of one instance of :meth:`instances`."""
        obs, episode = open_session(instance["hidden"], self.params)
        return FlatSession(episode=episode, key=instance["key"]), obs, action_mask(episode, self.params)

    def renew(self, state: FlatSession, key: jax.Array) -> FlatSession:
        """The session with its noise drawn from ``key`` from here on."""
        return FlatSession(episode=state.episode, key=key)

    def step(self, state: FlatSession, action):
        """(state, vector, mask, reward, terminated, truncated, error): :func:`step_env`."""
        key, k_step = jax.random.split(state.key)
        obs, episode, reward, done, info = step_env(k_step, state.episode, action, self.params)
        return FlatSession(episode=episode, key=key), obs, info["mask"], reward, done, jnp.bool_(False), info["error"]

    def score(self, state: FlatSession):
        """The headline score: success, float32 ()."""
        return state.episode.success

    def scores(self, state: FlatSession) -> dict:
        """success float32 (), iterations int32 ()."""
        return {"success": state.episode.success, "iterations": state.episode.iterations}


def flat_codec(complexity: str = "simple", n_variables: int = 3, n_distractors: int = 0, budget: int = 10,
               family_size: int = 256, grid: int = 4, proposals: str = "every", noise: float = 0.0,
               query_cost: float = 0.0) -> EquationBatchedFlat:
    """``World.flat`` of ``equation``: the codec of these settings (:class:`BatchedConfig`'s fields, noise, cost)."""
    return EquationBatchedFlat(BatchedConfig(complexity, n_variables, n_distractors, budget, family_size, grid, proposals),
                               noise, query_cost)


def _flat_baseline(policy):
    def make(codec: EquationBatchedFlat):
        return lambda _params, key, obs, mask: policy(codec.params, key, obs, mask)

    return make


# ``World.flat_baselines``: each made for one codec, as a functional.flat_rollout policy.
FLAT_BASELINES = {name: _flat_baseline(policy) for name, policy in BASELINES.items()}
