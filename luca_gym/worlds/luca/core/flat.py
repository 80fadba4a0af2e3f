"""The flat encodings for learning agents: one ``Discrete(K)`` action over
single-target choices, a mask over all K derived from the rules, and one
float32 observation vector. Pure JAX, so ``jit`` and ``vmap`` apply.

An agent on the flat space chooses *experiments*; the values it would have to
write (predictions, the network, a diagnosis) come from a named analyst
(:mod:`luca_gym.worlds.luca.analysts`), a pure function of what was measured. The dict
action space stays for agents that write values themselves.

Layout of the K actions for N genes and S signals (E = 3N + S single targets,
gene-major within a code: BLOCK g, then BOOST g, then DAMPEN g, then each
signal)::

    [0, E)               experiment on one target
    E                    reveal the next task
    E + 1                submit the analyst's prediction for the current task
    E + 2                submit the analyst's network (once: a resubmission is masked)
    [E + 3, E + 3 + 2N)  diagnose gene g LOCK_HI (first N) or LOCK_LO (next N)
    [.., + S)            diagnose signal k PERSIST
    D = E + 3 + 2N + S   commit the analyst's diagnosis
    [D + 1, D + 1 + E)   test a rescue on one target
    K - 1                end the session

The mask is computed from the public observation: the core's per-kind mask
(the rules table) on the targets the rules accept. The network is also
masked once submitted, so that no free action
can be repeated for ever (every other free action is bounded by the rules:
two reveals, two predictions, one diagnosis, one end). A session on the flat
space therefore lasts at most budget + 2 x tasks + 3 calls whatever the agent
does, far below ``max_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import analysts
from luca_gym.worlds.luca.core import session
from luca_gym.worlds.luca.core.observation import observe
from luca_gym.worlds.luca.core.types import (
    COMMIT_DIAGNOSIS,
    END,
    ERRORS,
    EXPERIMENT,
    REVEAL_TASK,
    SUBMIT_NETWORK,
    SUBMIT_PREDICTION,
    TEST_RESCUE,
    Action,
    EnvParams,
    EnvState,
)
from luca_gym.worlds.luca.spec import DAMPEN, LOCK_HI, LOCK_LO, N_PHENOTYPES, N_TASKS, NO_MALFUNCTION, PERSIST
from luca_gym.worlds.luca.types import OrganismArrays


@dataclass(frozen=True)
class FlatLayout:
    """Offsets of the flat action space for N genes and S signals."""

    n_genes: int
    n_signals: int

    @property
    def targets(self) -> int:
        """E: single targets (3 codes x N genes + S signals)."""
        return DAMPEN * self.n_genes + self.n_signals

    @property
    def reveal(self) -> int:
        return self.targets

    @property
    def predict(self) -> int:
        return self.targets + 1

    @property
    def network(self) -> int:
        return self.targets + 2

    @property
    def diagnose(self) -> int:
        """First explicit diagnosis (gene 0 LOCK_HI)."""
        return self.targets + 3

    @property
    def analyst_diagnosis(self) -> int:
        return self.diagnose + 2 * self.n_genes + self.n_signals

    @property
    def rescue(self) -> int:
        return self.analyst_diagnosis + 1

    @property
    def end(self) -> int:
        return self.rescue + self.targets

    @property
    def size(self) -> int:
        """K."""
        return self.end + 1

    def names(self, gene_names=None, signal_labels=None) -> list[str]:
        """A readable name for each of the K actions (for logs and plots)."""
        genes = list(gene_names or [f"g{g}" for g in range(self.n_genes)])
        signals = list(signal_labels or [f"s{k}" for k in range(self.n_signals)])
        singles = [f"{code} {g}" for code in ("BLOCK", "BOOST", "DAMPEN") for g in genes] + [f"ACTIVATE {k}" for k in signals]
        return (
            [f"experiment {t}" for t in singles]
            + ["reveal task", "analyst prediction", "analyst network"]
            + [f"diagnose {g} LOCK_HI" for g in genes]
            + [f"diagnose {g} LOCK_LO" for g in genes]
            + [f"diagnose {k} PERSIST" for k in signals]
            + ["analyst diagnosis"]
            + [f"rescue {t}" for t in singles]
            + ["end"]
        )


def layout(params: EnvParams) -> FlatLayout:
    """The flat layout of these settings."""
    return FlatLayout(params.n_genes, params.n_signals)


def _single_target(index, n: int, s: int):
    """Target index in [0, E) -> (gene codes int32 (N,), signal flags bool (S,))."""
    is_gene = index < DAMPEN * n
    gene, code = index % n, index // n + 1
    codes = jnp.where(is_gene & (jnp.arange(n) == gene), code, 0).astype(jnp.int32)
    flags = ~is_gene & (jnp.arange(s) == index - DAMPEN * n)
    return codes, flags


def decode(index: jax.Array, obs: dict, params: EnvParams, analyst: str) -> Action:
    """The core action of flat action ``index`` (int32 ()) given the
    observation the agent acted on (the analyst reads it)."""
    lay, a = layout(params), analysts.get(analyst)
    n, s, e = params.n_genes, params.n_signals, lay.targets
    index = jnp.asarray(index, jnp.int32)
    is_rescue = (index >= lay.rescue) & (index < lay.end)
    target = jnp.where(is_rescue, index - lay.rescue, index)
    codes, flags = _single_target(jnp.clip(target, 0, e - 1), n, s)
    d = index - lay.diagnose
    explicit_target = jnp.where(d < 2 * n, d % n, n + d - 2 * n)
    explicit_type = jnp.where(d < n, LOCK_HI, jnp.where(d < 2 * n, LOCK_LO, PERSIST))
    analyst_target, analyst_type = a.diagnose(obs)
    is_analyst = index == lay.analyst_diagnosis
    kind = jnp.select(
        [(index >= 0) & (index < e), index == lay.reveal, index == lay.predict, index == lay.network,
         (index >= lay.diagnose) & (index <= lay.analyst_diagnosis), is_rescue, index == lay.end],
        [EXPERIMENT, REVEAL_TASK, SUBMIT_PREDICTION, SUBMIT_NETWORK, COMMIT_DIAGNOSIS, TEST_RESCUE, END],
        -1,  # outside [0, K): the core refuses it as an unknown kind
    )
    return Action(
        kind=kind.astype(jnp.int32),
        gene_codes=codes,
        signal_flags=flags,
        prediction=a.predict(obs),
        diagnosis_target=jnp.where(is_analyst, analyst_target, explicit_target).astype(jnp.int32),
        diagnosis_type=jnp.where(is_analyst, analyst_type, jnp.where(d >= 0, explicit_type, NO_MALFUNCTION)).astype(jnp.int32),
        network=a.network(obs),
    )


def kinds(params: EnvParams) -> np.ndarray:
    """int32 (K,): the core action kind of each flat action."""
    lay = layout(params)
    out = np.empty(lay.size, np.int32)
    out[: lay.targets] = EXPERIMENT
    out[[lay.reveal, lay.predict, lay.network]] = REVEAL_TASK, SUBMIT_PREDICTION, SUBMIT_NETWORK
    out[lay.diagnose : lay.rescue] = COMMIT_DIAGNOSIS
    out[lay.rescue : lay.end] = TEST_RESCUE
    out[lay.end] = END
    return out


def mask(obs: dict, params: EnvParams) -> jax.Array:
    """bool (K,): the flat actions the rules accept now, from the public
    observation alone (so any agent can compute it): a kind the core's action
    mask allows (:func:`luca_gym.worlds.luca.core.legal_kinds`, the rules table), on a
    target the rules accept (a targetable gene; any signal), and the network
    not yet submitted. No single-target action can perturb both genes of a
    held-out pair or carry an unknown code, so these are all the conditions;
    ``tests/worlds/luca/test_flat.py`` checks the mask against the core's verdict on
    every one of the K actions."""
    lay = layout(params)
    s = params.n_signals
    targetable = obs["targetable"].astype(bool)
    on_target = jnp.concatenate([jnp.tile(targetable, DAMPEN), jnp.ones(s, bool)])  # (E,)
    target_ok = jnp.concatenate([
        on_target, jnp.ones(3, bool), jnp.tile(targetable, 2), jnp.ones(s + 1, bool), on_target, jnp.ones(1, bool)
    ])
    legal = obs["action_mask"].astype(bool)[kinds(params)] & target_ok
    return legal.at[lay.network].set(legal[lay.network] & ~obs["network_submitted"].astype(bool))


def observation_parts(params: EnvParams) -> tuple[tuple[str, int], ...]:
    """The named parts of :func:`observation_vector`, in order, with their
    lengths: the one list the vector, its size and :func:`token_layout` read."""
    n, s, p, t = params.n_genes, params.n_signals, N_PHENOTYPES, N_TASKS
    return (
        ("budget_left", 1), ("baseline", p), ("aberrant", p), ("targetable", n),
        ("last_phenotypes", p), ("last_in_range", p),
        ("last_restored_fraction", 1), ("last_converged", 1), ("last_refused", 1),
        ("last_error", len(ERRORS)),
        ("singles", n * DAMPEN * p), ("single_mask", n * DAMPEN),
        ("signals", s * p), ("signal_mask", s),
        ("task_genes", 2 * n), ("task_codes", 2 * 2), ("task_targets", layout(params).targets),
        ("task_index", t + 1),
        ("predicted", t),
        ("diagnosis_committed", 1), ("network_submitted", 1), ("ended", 1),
    )


def observation_size(params: EnvParams) -> int:
    """D: the length of :func:`observation_vector`."""
    return sum(size for _, size in observation_parts(params))


def observation_vector(obs: dict, params: EnvParams) -> jax.Array:
    """float32 (D,): the observation flattened and scaled for a network.

    In order: budget left / budget; baseline phenotypes; aberrant; targetable;
    last phenotypes; last in-range flags; last restored fraction, converged,
    and whether the last call was refused; the last refusal code one-hot;
    single results as shifts from the baseline with their mask; signal results
    (shifts) with their mask; the current task's two genes one-hot and its two
    codes (BLOCK, BOOST) one-hot; the same task in the action space's own
    terms: the E single targets, 1 on the two experiments the task combines
    that are not yet measured (so "measure what the task needs" is one weight
    from input to logit away); the task index one-hot (none, 0, 1);
    predicted flags; diagnosis committed, network submitted, ended. Every
    entry lies in [-1, 1].
    """
    f = lambda x: jnp.asarray(x, jnp.float32).reshape(-1)  # noqa: E731
    n = params.n_genes
    base = obs["baseline_phenotypes"]
    singles = jnp.where(obs["single_mask"].astype(bool)[..., None], obs["single_results"] - base, 0.0)
    signals = jnp.where(obs["signal_mask"].astype(bool)[:, None], obs["signal_results"] - base, 0.0)
    has_task = obs["task_index"] >= 0
    task_genes = jax.nn.one_hot(jnp.where(has_task, obs["task_genes"], -1), n)  # (2, N), zeros without a task
    task_codes = jax.nn.one_hot(jnp.where(has_task, obs["task_codes"].astype(jnp.int32) - 1, -1), 2)
    columns = jnp.clip(obs["task_codes"].astype(jnp.int32) - 1, 0, DAMPEN - 1)
    genes = jnp.clip(obs["task_genes"], 0, n - 1)
    unmeasured = has_task & ~obs["single_mask"].astype(bool)[genes, columns]  # (2,)
    needed = jnp.where(unmeasured, columns * n + genes, -1)
    task_targets = jnp.max(jax.nn.one_hot(needed, layout(params).targets), axis=0)
    parts = {
        "budget_left": f(obs["budget_left"] / params.budget),
        "baseline": f(base), "aberrant": f(obs["aberrant"]), "targetable": f(obs["targetable"]),
        "last_phenotypes": f(obs["last_phenotypes"]), "last_in_range": f(obs["last_in_range"]),
        "last_restored_fraction": f(obs["last_restored_fraction"]), "last_converged": f(obs["last_converged"]),
        "last_refused": f(obs["last_error"] != 0),
        "last_error": f(jax.nn.one_hot(obs["last_error"], len(ERRORS))),
        "singles": f(singles), "single_mask": f(obs["single_mask"]),
        "signals": f(signals), "signal_mask": f(obs["signal_mask"]),
        "task_genes": f(task_genes), "task_codes": f(task_codes), "task_targets": f(task_targets),
        "task_index": f(jax.nn.one_hot(obs["task_index"] + 1, N_TASKS + 1)),
        "predicted": f(obs["predicted"]),
        "diagnosis_committed": f(obs["diagnosis_committed"]), "network_submitted": f(obs["network_submitted"]),
        "ended": f(obs["ended"]),
    }
    return jnp.concatenate([parts[name] for name, _ in observation_parts(params)])


def token_layout(params: EnvParams) -> dict:
    """Which slots of :func:`observation_vector` and which of the K flat
    actions belong to each gene and each signal, for a policy that treats
    genes (and signals) as sets of entities (``network="entity"``,
    :mod:`luca_gym.agents.entity_attention`).

    Returns a dict of int32 arrays:

    * ``global_obs`` (G,): the slots of no gene or signal (budget left,
      phenotypes, last call, task codes and index, phase flags); G is the
      same for every N.
    * ``global_actions`` (5,): reveal, analyst prediction, analyst network,
      analyst diagnosis, end.
    * ``groups``: ``(("gene", obs (N, 18), actions (N, 8)), ("signal", obs
      (S, 5), actions (S, 3)))``. Gene g's features: targetable; its single
      results (BLOCK, BOOST, DAMPEN x phenotypes, shifts from the baseline)
      and their mask; whether it is the current task's first / second gene;
      its three experiments the task still needs. Its actions: experiment
      BLOCK / BOOST / DAMPEN, diagnose LOCK_HI / LOCK_LO, rescue BLOCK /
      BOOST / DAMPEN. Signal k's features: its results (shifts) and mask, its
      experiment the task still needs; its actions: activate, diagnose
      PERSIST, rescue.

    Every slot lies in exactly one of global_obs and the groups' obs, every
    flat action in exactly one action table; row i of a group's tables is
    entity i, so permuting genes permutes rows.
    """
    n, s, p = params.n_genes, params.n_signals, N_PHENOTYPES
    starts, at = {}, 0
    for name, size in observation_parts(params):
        starts[name] = at
        at += size
    genes, signals = np.arange(n)[:, None], np.arange(s)[:, None]
    codes, phenotypes = np.arange(DAMPEN), np.arange(p)
    gene_obs = np.concatenate([
        starts["targetable"] + genes,
        starts["singles"] + genes * DAMPEN * p + (codes[:, None] * p + phenotypes).reshape(1, -1),
        starts["single_mask"] + genes * DAMPEN + codes,
        starts["task_genes"] + np.arange(2) * n + genes,
        starts["task_targets"] + codes * n + genes,
    ], axis=1)
    signal_obs = np.concatenate([
        starts["signals"] + signals * p + phenotypes,
        starts["signal_mask"] + signals,
        starts["task_targets"] + DAMPEN * n + signals,
    ], axis=1)
    lay = layout(params)
    gene_actions = np.concatenate([
        codes * n + genes, lay.diagnose + np.arange(2) * n + genes, lay.rescue + codes * n + genes,
    ], axis=1)
    signal_actions = np.concatenate([
        DAMPEN * n + signals, lay.diagnose + 2 * n + signals, lay.rescue + DAMPEN * n + signals,
    ], axis=1)
    taken = np.zeros(at, bool)
    taken[gene_obs.ravel()] = taken[signal_obs.ravel()] = True
    i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    return {
        "global_obs": i32(np.flatnonzero(~taken)),
        "global_actions": i32([lay.reveal, lay.predict, lay.network, lay.analyst_diagnosis, lay.end]),
        "groups": (("gene", i32(gene_obs), i32(gene_actions)), ("signal", i32(signal_obs), i32(signal_actions))),
    }


@partial(jax.jit, static_argnames=("params", "analyst"))
def reset(key: jax.Array, organism: OrganismArrays, params: EnvParams, analyst: str):
    """Open a session. Returns (observation vector float32 (D,), mask bool (K,), state)."""
    obs, state = session.reset(key, organism, params)
    return observation_vector(obs, params), mask(obs, params), state


@partial(jax.jit, static_argnames=("params", "analyst"))
def step(state: EnvState, index: jax.Array, params: EnvParams, analyst: str):
    """Apply flat action ``index``. Returns (observation vector, mask, state,
    reward, terminated, truncated, info) with ``info = {"error": code}``; a
    masked action is refused by the core like any illegal action."""
    action = decode(index, observe(state, params), params, analyst)
    obs, new, reward, terminated, truncated, info = session.step(state, action, params)
    return observation_vector(obs, params), mask(obs, params), new, reward, terminated, truncated, info


def action_to_dict(index: int, obs: dict, params: EnvParams, analyst: str) -> dict:
    """The dict action (numpy) of flat action ``index``, for the dict env."""
    action = decode(jnp.int32(index), obs, params, analyst)
    return {k: np.asarray(v) for k, v in vars(action).items()}
