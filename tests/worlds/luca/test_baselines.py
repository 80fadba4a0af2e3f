"""The paper's baselines (SPEC §4) as policies over the public observation.

Every baseline completes clean sessions (no refused call, terminated by
``end``, return == composite) at every tier x mode, scores where the paper
says, and reads no hidden state: a trap makes any attribute read of an
``OrganismArrays`` or ``EnvState`` raise while a policy acts, and organisms
that differ only in hidden labels must draw identical actions. Both checks
are shown to catch a deliberately cheating policy.

One ``LucaEnv`` per (tier, mode, N) per test process; ``core.step`` compiles
once per (N, mode).
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym.worlds.luca import core
from luca_gym import harness as ev
from luca_gym.worlds.luca.baselines import BASELINES, RandomPolicy, make_policy
from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.worlds.luca.session import cached_organism
from luca_gym.worlds.luca.envs.spaces import parse_action, to_numpy_observation
from luca_gym.worlds.luca.types import OrganismArrays
from luca_gym.worlds.luca.evaluation import luca_spec

TIERS = ("easy", "medium", "hard")
MODES = ("healthy", "disease")
AGENTS = tuple(a for a in BASELINES if a != "model-fit")  # model-fit: tests/worlds/luca/test_model_fit.py
FEW_SEEDS = (0, 1, 2)
PAPER_SEEDS = range(20)
HIDDEN_CLASSES = (OrganismArrays, core.EnvState)


@pytest.fixture(scope="module")
def env_for():
    """``env_for(tier, mode, n=20)``: one LucaEnv per setting for this module."""
    envs: dict = {}

    def get(tier: str, mode: str, n: int = 20) -> LucaEnv:
        if (tier, mode, n) not in envs:
            envs[tier, mode, n] = LucaEnv(tier=tier, mode=mode, n_genes=n)
        return envs[tier, mode, n]

    return get


def session(env_for, agent, tier, mode, seed, n=20, policy=None) -> dict:
    spec = luca_spec(agent, tier, mode, n, seed)
    return ev.run_session(policy or make_policy(agent), spec, env_for(tier, mode, n))


def assert_clean(record: dict) -> None:
    """No call refused, closed by ``end`` (terminated, not truncated), and the
    episode return equals the composite score."""
    refused = [(i, c["call"], c["result"]["error"]) for i, c in enumerate(record["calls"]) if "error" in c["result"]]
    assert refused == [], f"{record['agent']} {record['tier']} {record['mode']} seed {record['seed']}: refused calls {refused}"
    assert record["truncated"] is False
    assert record["calls"][-1]["call"] == "end"
    assert [c["call"] for c in record["calls"]].count("end") == 1
    assert record["return"] == pytest.approx(record["scores"]["composite"], abs=1e-5)


# -- complete, clean sessions ---------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("agent", AGENTS)
def test_every_baseline_completes_clean_sessions_n20(env_for, agent, tier, mode):
    for seed in FEW_SEEDS:
        record = session(env_for, agent, tier, mode, seed)
        assert_clean(record)
        assert 0.0 <= record["scores"]["composite"] <= 1.0
        if mode == "disease":
            assert "submit_malfunction_hypothesis" in [c["call"] for c in record["calls"]]
            assert "test_rescue" in [c["call"] for c in record["calls"]]


@pytest.mark.slow
@pytest.mark.xdist_group("n80")  # the N=80 organisms of test_sim and test_world, generated once
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tier", TIERS)
def test_every_baseline_completes_clean_sessions_n80(env_for, tier, mode):
    for agent in AGENTS:
        record = session(env_for, agent, tier, mode, seed=0, n=80)
        assert_clean(record)
        assert record["budget"] == 80 + 11 + 8  # N + signals + 8


def test_baselines_spend_budget_as_described(env_for):
    """random runs no experiment; heuristic BLOCKs every targetable gene once;
    causal-sweep uses its whole budget (healthy: nothing is held back)."""
    for seed in FEW_SEEDS:
        rand = session(env_for, "random", "medium", "healthy", seed)
        heur = session(env_for, "heuristic", "medium", "healthy", seed)
        sweep = session(env_for, "causal-sweep", "medium", "healthy", seed)
        assert rand["scores"]["n_experiments"] == 0
        assert all(c["call"] != "run_experiment" for c in rand["calls"])
        blocked = [c["arguments"]["interventions"] for c in heur["calls"] if c["call"] == "run_experiment"]
        assert all(len(i) == 1 and list(i.values()) == [{"type": "BLOCK"}] for i in blocked)
        assert len({next(iter(i)) for i in blocked}) == len(blocked) == 20
        assert sweep["calls"][-1]["budget_remaining"] == 0
        assert sweep["scores"]["budget_fraction"] == pytest.approx(1.0)


# -- scores against the paper -----------------------------------------------------
@pytest.mark.parametrize("tier", ("easy", "medium"))
def test_causal_sweep_scores_at_least_0_9_healthy(env_for, tier):
    records = [session(env_for, "causal-sweep", tier, "healthy", seed) for seed in PAPER_SEEDS]
    for r in records:
        assert_clean(r)
    mean = np.mean([r["scores"]["composite"] for r in records])
    assert mean >= 0.9, f"causal-sweep {tier} healthy mean composite {mean:.3f} < 0.9"


def test_random_easy_healthy_near_paper(env_for):
    records = [session(env_for, "random", "easy", "healthy", seed) for seed in PAPER_SEEDS]
    for r in records:
        assert_clean(r)
    mean = np.mean([r["scores"]["composite"] for r in records])
    assert abs(mean - 0.667) <= 0.05, f"random easy healthy mean composite {mean:.3f}; paper 0.667"


# -- no hidden state, trap 1: attribute reads raise while a policy acts -----------
class HiddenStateRead(Exception):
    """Raised by the trap when an OrganismArrays / EnvState attribute is read."""


@contextlib.contextmanager
def hidden_state_trap(reads: list):
    """While active, any attribute read of an OrganismArrays or EnvState
    instance is recorded in ``reads`` and raises HiddenStateRead (recorded
    too, so a policy that swallows the exception is still caught)."""

    def trap(self, name):
        reads.append(f"{type(self).__name__}.{name}")
        raise HiddenStateRead(f"policy read hidden state {type(self).__name__}.{name}")

    for cls in HIDDEN_CLASSES:
        assert "__getattribute__" not in cls.__dict__, f"{cls.__name__} already overrides __getattribute__"
        cls.__getattribute__ = trap
    try:
        yield
    finally:
        for cls in HIDDEN_CLASSES:
            del cls.__getattribute__


class Trapped:
    """Wraps a policy so its ``reset`` and ``act`` run inside the trap."""

    def __init__(self, inner, reads: list):
        self.inner, self.reads, self.name = inner, reads, inner.name
        self.acts = 0

    def reset(self, params, seed):
        with hidden_state_trap(self.reads):
            self.inner.reset(params, seed)

    def act(self, obs):
        self.acts += 1
        with hidden_state_trap(self.reads):
            return self.inner.act(obs)


class Cheater(RandomPolicy):
    """A toy cheat: plays like ``random`` but predicts the task answers it
    reads from the session state it was handed."""

    name = "cheater"

    def __init__(self, peek, swallow: bool = False):
        self.peek, self.swallow = peek, swallow

    def act(self, obs):
        if obs["action_mask"][core.SUBMIT_PREDICTION]:
            try:
                truth = np.asarray(self.peek().organism.task_truth)[int(obs["task_index"])]
                return {"kind": core.SUBMIT_PREDICTION, "prediction": truth.astype(np.float32)}
            except HiddenStateRead:
                if not self.swallow:
                    raise
        return super().act(obs)


def test_trap_is_armed_only_inside():
    organism = cached_organism(0, "easy", 20, "healthy", False)
    reads: list = []
    with hidden_state_trap(reads):
        with pytest.raises(HiddenStateRead):
            organism.arrays.task_truth  # noqa: B018
        with pytest.raises(HiddenStateRead):
            object.__new__(core.EnvState).budget_left  # noqa: B018
    assert reads == ["OrganismArrays.task_truth", "EnvState.budget_left"]
    assert organism.arrays.task_truth.shape == (2, 3)  # restored outside


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tier", TIERS)
def test_baselines_read_no_hidden_state(env_for, tier, mode):
    for agent in AGENTS:
        reads: list = []
        policy = Trapped(make_policy(agent), reads)
        record = session(env_for, agent, tier, mode, seed=0, policy=policy)
        assert reads == [], f"{agent} read hidden state: {sorted(set(reads))}"
        assert policy.acts == len(record["calls"]) > 0
        assert_clean(record)
        untrapped = session(env_for, agent, tier, mode, seed=0)
        assert record["calls"] == untrapped["calls"]


def test_trap_catches_a_cheating_policy(env_for):
    env = env_for("easy", "healthy")
    reads: list = []
    with pytest.raises(HiddenStateRead):
        session(env_for, "cheater", "easy", "healthy", 0, policy=Trapped(Cheater(lambda: env.state), reads))
    assert reads == ["EnvState.organism"]

    # A cheat that swallows the exception still leaves its reads on record.
    reads = []
    record = session(env_for, "cheater", "easy", "healthy", 0, policy=Trapped(Cheater(lambda: env.state, swallow=True), reads))
    assert reads == ["EnvState.organism", "EnvState.organism"]
    assert record["calls"][-1]["call"] == "end"

    # Untrapped, the cheat works: it predicts the truth exactly.
    record = session(env_for, "cheater", "easy", "healthy", 0, policy=Cheater(lambda: env.state))
    assert record["scores"]["prediction"] == 1.0


# -- no hidden state, trap 2: hidden labels do not change the actions -----------
def relabelled(arrays: OrganismArrays, disease: bool) -> OrganismArrays:
    """The same organism with every hidden label changed: task answers,
    n_alt, readout mask, modules (and the malfunction's label in disease
    mode; its dynamics stay in gene_lock / signal_persist)."""
    changes = dict(
        task_truth=1.0 - arrays.task_truth,
        n_alt=arrays.n_alt + 5,
        readout_mask=~arrays.readout_mask,
        module=(arrays.module + 1) % (jnp.max(arrays.module) + 1),
    )
    if disease:
        changes["malfunction_target"] = (arrays.malfunction_target + 1) % arrays.n_genes
        changes["malfunction_type"] = jnp.where(arrays.malfunction_type == 1, 2, 1).astype(arrays.malfunction_type.dtype)
    out = dataclasses.replace(arrays, **changes)
    for name in changes:
        assert not np.array_equal(np.asarray(getattr(out, name)), np.asarray(getattr(arrays, name))), name
    return out


def drive(policy, arrays: OrganismArrays, params: core.EnvParams, key, seed: int, holder: dict) -> list:
    """One session through ``core.reset`` / ``core.step``; the action sequence
    in comparable form. ``holder["state"]`` is the live state (for the cheat)."""
    obs, state = core.reset(key, arrays, params)
    holder["state"] = state
    policy.reset(params, seed)
    obs = to_numpy_observation(obs)
    actions = []
    for _ in range(params.max_steps):
        action = policy.act(obs)
        actions.append({k: np.asarray(v).tolist() for k, v in sorted(action.items())})
        obs, state, _, terminated, truncated, info = core.step(state, parse_action(action, params), params)
        holder["state"] = state
        obs = to_numpy_observation(obs)
        assert int(info["error"]) == 0, core.ERROR_MESSAGES[int(info["error"])]
        if bool(terminated) or bool(truncated):
            assert bool(terminated)
            return actions
    raise AssertionError("session did not end")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tier", TIERS)
def test_hidden_labels_do_not_change_actions(env_for, tier, mode):
    params = env_for(tier, mode).params
    seed = 1
    arrays = cached_organism(seed, tier, 20, mode, False).arrays
    other = relabelled(arrays, mode == "disease")
    key = core.noise_key(seed, tier, 20)
    for agent in AGENTS:
        first = drive(make_policy(agent), arrays, params, key, seed, {})
        second = drive(make_policy(agent), other, params, key, seed, {})
        assert len(first) > 2
        assert first == second, f"{agent}: actions depend on hidden labels"


def test_relabelling_catches_a_cheating_policy(env_for):
    params = env_for("easy", "healthy").params
    arrays = cached_organism(1, "easy", 20, "healthy", False).arrays
    key = core.noise_key(1, "easy", 20)
    holder: dict = {}
    cheat = Cheater(lambda: holder["state"])
    first = drive(cheat, arrays, params, key, 1, holder)
    second = drive(cheat, relabelled(arrays, False), params, key, 1, holder)
    assert first != second
