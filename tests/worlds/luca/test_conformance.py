"""One table of malformed and illegal actions, run against ``LucaEnv``,
``LucaVectorEnv`` and ``core.step`` alike: the three must reach the same
verdict (the same ValueError, or the same refusal code), spend no budget and
change nothing (a refusal moves only the call counter and the error code).

Every case is a dict action for one session. The vector env receives it
stacked for two sub-envs on the same organism; ``core.step`` receives
``core.make_action(params, **fields)``. Cases about the dict itself (not a
dict, unknown or mixed-type keys) have no ``core.make_action`` form and run
against the two envs only.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.envs import LucaEnv, LucaVectorEnv
from luca_gym.worlds.luca.spec import BLOCK, BOOST, LOCK_HI, PERSIST

N = 20
SEED = 1
SETTINGS = (("hard", "disease"), ("medium", "healthy"))


@functools.lru_cache(maxsize=None)
def envs(tier: str, mode: str):
    return LucaEnv(tier=tier, mode=mode, n_genes=N), LucaVectorEnv(2, tier=tier, mode=mode, n_genes=N, pool_size=16)


def codes_on(genes, code=BLOCK, dtype=np.int64):
    codes = np.zeros(N, dtype)
    codes[list(genes)] = code
    return codes


# Each case: (id, settings it runs in, setup actions (valid, applied first),
# action builder (organism arrays, S) -> dict, expected verdict: an error name
# of core.ERRORS or "ValueError:<text the message contains>").
def _free_gene(a):
    return int(np.flatnonzero(~np.asarray(a.latent_mask))[0])


CASES = [
    ("float kind", "both", [], lambda a, s: {"kind": 0.9}, "ValueError:dtype float64"),
    ("bool kind", "both", [], lambda a, s: {"kind": True}, "ValueError:dtype bool"),
    ("kind out of range", "both", [], lambda a, s: {"kind": 7}, "unknown_kind"),
    ("negative kind", "both", [], lambda a, s: {"kind": -1}, "unknown_kind"),
    ("kind beyond int32", "both", [], lambda a, s: {"kind": 2**32}, "ValueError:int32"),
    ("gene code beyond int32", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([_free_gene(a)], 2**32 + 1)}, "ValueError:int32"),
    ("float gene code 1.7", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([_free_gene(a)], 1.7, np.float64)}, "ValueError:dtype float64"),
    ("float gene code 1.9", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([_free_gene(a)], 1.9, np.float32)}, "ValueError:dtype float32"),
    ("unknown gene code", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([_free_gene(a)], 5)}, "unknown_code"),
    ("negative gene code", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([_free_gene(a)], -1)}, "unknown_code"),
    ("gene codes of the wrong shape", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": np.zeros(N + 1, np.int64)}, "ValueError:shape"),
    ("signal flag 7", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "signal_flags": np.full(s, 7)}, "ValueError:0 or 1"),
    ("float signal flags", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "signal_flags": np.ones(s, np.float64)}, "ValueError:dtype float64"),
    ("empty experiment", "both", [], lambda a, s: {"kind": core.EXPERIMENT}, "empty_intervention"),
    ("latent target", "hard", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([int(np.flatnonzero(np.asarray(a.latent_mask))[0])])},
     "latent_target"),
    ("held-out pair", "both", [],
     lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on(np.asarray(a.task_genes)[1], BOOST)}, "held_out_pair"),
    ("prediction before a task", "both", [], lambda a, s: {"kind": core.SUBMIT_PREDICTION}, "no_current_task"),
    ("NaN prediction", "both", [{"kind": core.REVEAL_TASK}],
     lambda a, s: {"kind": core.SUBMIT_PREDICTION, "prediction": np.array([0.5, np.nan, 0.5])}, "bad_prediction"),
    ("prediction above 1", "both", [{"kind": core.REVEAL_TASK}],
     lambda a, s: {"kind": core.SUBMIT_PREDICTION, "prediction": np.array([0.5, 1.5, 0.5])}, "bad_prediction"),
    ("second reveal while pending", "both", [{"kind": core.REVEAL_TASK}], lambda a, s: {"kind": core.REVEAL_TASK},
     "prediction_pending"),
    ("network entry 2", "both", [],
     lambda a, s: {"kind": core.SUBMIT_NETWORK, "network": np.full((N, 3), 2)}, "bad_network"),
    ("float network", "both", [],
     lambda a, s: {"kind": core.SUBMIT_NETWORK, "network": np.zeros((N, 3), np.float32)}, "ValueError:dtype float32"),
    ("diagnosis in healthy mode", "healthy", [],
     lambda a, s: {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": 0, "diagnosis_type": LOCK_HI}, "healthy_mode"),
    ("diagnosis target out of range", "disease", [],
     lambda a, s: {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": N + s, "diagnosis_type": PERSIST}, "bad_diagnosis"),
    ("gene diagnosed as PERSIST", "disease", [],
     lambda a, s: {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": _free_gene(a), "diagnosis_type": PERSIST},
     "bad_diagnosis"),
    ("rescue before a diagnosis", "disease", [],
     lambda a, s: {"kind": core.TEST_RESCUE, "gene_codes": codes_on([_free_gene(a)])}, "not_committed"),
    ("second diagnosis", "disease",
     [{"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": N, "diagnosis_type": PERSIST}],
     lambda a, s: {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": N, "diagnosis_type": PERSIST}, "already_committed"),
    ("empty rescue", "disease",
     [{"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": N, "diagnosis_type": PERSIST}],
     lambda a, s: {"kind": core.TEST_RESCUE}, "empty_intervention"),
    ("call after the end", "both", [{"kind": core.END}], lambda a, s: {"kind": core.EXPERIMENT, "gene_codes": codes_on([_free_gene(a)])},
     "session_ended"),
]
# After END the vector env starts a new episode on the next step (Gymnasium's
# next-step autoreset), so "after the end" cannot be asked of it.
AUTORESET_CASES = {"call after the end"}
# Cases about the dict itself: no core.make_action form.
STRUCTURE_CASES = [
    ("not a dict", lambda a, s: [0, 1], "ValueError:expected a dict"),
    ("unknown field", lambda a, s: {"kind": 0, "genes": 1}, "ValueError:unknown key 'genes'"),
    ("mixed-type keys", lambda a, s: {1: 0, "x": 0, "kind": 0}, "ValueError:unknown key"),
    ("missing kind", lambda a, s: {"gene_codes": np.zeros(N, np.int64)}, "ValueError:'kind' is required"),
]


def _runs_in(where: str, tier: str, mode: str) -> bool:
    return where == "both" or where in (tier, mode)


def _leaves(state):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]


def _same_but_counters(before, after) -> bool:
    """States equal in every leaf except step_count and last_error."""
    b = {k: v for k, v in vars(before).items() if k not in ("step_count", "last_error")}
    a = {k: v for k, v in vars(after).items() if k not in ("step_count", "last_error")}
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(_leaves(b), _leaves(a)))


def _stack(action: dict) -> dict:
    return {k: np.stack([np.asarray(v)] * 2) for k, v in action.items()}


def _verdict(run):
    """Run a call: ("ValueError", message) or ("refused", code)."""
    try:
        return ("refused", run())
    except ValueError as exc:
        return ("ValueError", str(exc))


def _check(verdict, expected: str):
    if expected.startswith("ValueError:"):
        assert verdict[0] == "ValueError", verdict
        assert expected.split(":", 1)[1] in verdict[1], verdict
    else:
        assert verdict == ("refused", core.ERROR_CODES[expected]), (verdict, expected)


def _open(tier, mode, setup):
    env, vec = envs(tier, mode)
    env.reset(options={"organism_seed": SEED})
    vec.reset(options={"organism_seeds": [SEED, SEED]})
    params = env.params
    state = env.state
    for action in setup:
        _, _, _, _, info = env.step(action)
        assert info["error_code"] == 0, (action, info["error"])
        _, _, _, _, vinfo = vec.step(_stack(action))
        assert list(vinfo["error_code"]) == [0, 0]
        _, state, *_ = core.step(state, core.make_action(params, **action), params)
    return env, vec, state


@pytest.mark.parametrize("tier,mode", SETTINGS)
def test_one_table_one_verdict_in_every_adapter(tier, mode):
    ran = 0
    for name, where, setup, build, expected in CASES:
        if not _runs_in(where, tier, mode):
            continue
        ran += 1
        env, vec, core_state = _open(tier, mode, setup)
        action = build(env.organism.arrays, env.params.n_signals)
        budget = int(env.state.budget_left)

        env_before, vec_before = env.state, vec.state
        env_verdict = _verdict(lambda: env.step(action)[4]["error_code"])
        vec_verdict = _verdict(lambda: tuple(int(c) for c in vec.step(_stack(action))[4]["error_code"]))
        if name in AUTORESET_CASES:
            vec_verdict = ("refused", (env_verdict[1],) * 2) if env_verdict[0] == "refused" else env_verdict

        def core_call():
            _, new, _, _, _, info = core.step(core_state, core.make_action(env.params, **action), env.params)
            assert _same_but_counters(core_state, new), name
            assert int(new.budget_left) == budget
            return int(info["error"])

        core_verdict = _verdict(core_call)
        _check(env_verdict, expected)
        _check(core_verdict, expected)
        if vec_verdict[0] == "refused":
            assert vec_verdict[1] == (env_verdict[1],) * 2, name
        else:
            assert vec_verdict[0] == "ValueError" and expected.split(":", 1)[1] in vec_verdict[1], (name, vec_verdict)
        assert int(env.state.budget_left) == budget, name
        if name not in AUTORESET_CASES:
            assert int(np.asarray(vec.state.budget_left)[0]) == budget, name
        if env_verdict[0] == "ValueError":
            # A malformed action never reaches the core: not even a call is counted.
            assert all(np.array_equal(x, y) for x, y in zip(_leaves(env_before), _leaves(env.state))), name
            assert all(np.array_equal(x, y) for x, y in zip(_leaves(vec_before), _leaves(vec.state))), name
        else:
            assert _same_but_counters(env_before, env.state), name
            assert int(env.state.step_count) == int(env_before.step_count)  # a refusal is not counted
    assert ran >= 20


@pytest.mark.parametrize("name,build,expected", STRUCTURE_CASES, ids=[c[0] for c in STRUCTURE_CASES])
def test_malformed_dicts_get_the_same_error_from_both_envs(name, build, expected):
    env, vec, _ = _open("medium", "healthy", [])
    action = build(env.organism.arrays, env.params.n_signals)
    batched = action if not isinstance(action, dict) else {k: (np.stack([np.asarray(v)] * 2)) for k, v in action.items()}
    env_before, vec_before = _leaves(env.state), _leaves(vec.state)
    with pytest.raises(ValueError) as single:
        env.step(action)
    with pytest.raises(ValueError) as batch:
        vec.step(batched)
    assert expected.split(":", 1)[1] in str(single.value)
    assert expected.split(":", 1)[1] in str(batch.value)
    assert all(np.array_equal(x, y) for x, y in zip(env_before, _leaves(env.state)))
    assert all(np.array_equal(x, y) for x, y in zip(vec_before, _leaves(vec.state)))


# -- the bugs a review found -------------------------------------------------------


@pytest.mark.parametrize(
    "field,value",
    [("gene_codes", 2**32 + 1), ("gene_codes", 1.7), ("gene_codes", 1.9), ("kind", 0.9), ("signal_flags", 7)],
)
def test_vector_env_refuses_what_the_single_env_refuses_and_charges_nothing(field, value):
    """Before the shared boundary, the vector env re-parsed these with
    ``jnp.asarray(..., int32/bool)`` and ran them as BLOCK / experiment / on."""
    env, vec, _ = _open("medium", "healthy", [])
    gene = _free_gene(env.organism.arrays)
    action = {"kind": np.array([core.EXPERIMENT] * 2), "gene_codes": np.stack([codes_on([gene])] * 2)}
    if field == "gene_codes":
        action["gene_codes"] = np.stack([codes_on([gene], value, np.asarray(value).dtype)] * 2)
    elif field == "kind":
        action["kind"] = np.array([value, value])
    else:
        action["signal_flags"] = np.full((2, env.params.n_signals), value)
    budget = np.asarray(vec.state.budget_left).copy()
    with pytest.raises(ValueError, match=field):
        vec.step(action)
    with pytest.raises(ValueError, match=field):
        env.step({k: v[0] for k, v in action.items()})
    assert np.array_equal(np.asarray(vec.state.budget_left), budget)


def test_reset_options_with_mixed_type_keys_raise_value_error():
    env, vec = envs("medium", "healthy")
    with pytest.raises(ValueError, match="options"):
        env.reset(options={1: 2, "a": 3})
    with pytest.raises(ValueError, match="options"):
        vec.reset(options={1: 2, "a": 3})
    with pytest.raises(ValueError, match="options"):
        env.reset(options=[("organism_seed", 3)])


@pytest.mark.parametrize("seed", [np.array(3), 3.0, True, -1, 2**63, "3"])
def test_organism_seed_is_checked_before_any_cache(seed):
    """``organism_seed=3.0`` was refused on a cold cache and accepted once
    organism 3 was cached; ``np.array(3)`` raised TypeError (unhashable)."""
    env, vec = envs("medium", "healthy")
    env.reset(options={"organism_seed": 3})  # warm the cache for organism 3
    with pytest.raises(ValueError, match="organism_seed"):
        env.reset(options={"organism_seed": seed})
    with pytest.raises(ValueError, match="organism_seeds"):
        vec.reset(options={"organism_seeds": [seed, 3]})
    with pytest.raises(ValueError, match="organism_seeds"):
        vec.reset(options={"organism_seeds": [3]})


def test_numpy_integer_seeds_name_the_same_organism():
    env, _ = envs("medium", "healthy")
    _, info = env.reset(options={"organism_seed": np.int64(3)})
    fingerprint = env.organism.fingerprint()
    _, info2 = env.reset(options={"organism_seed": 3})
    assert env.organism.fingerprint() == fingerprint and info["organism_seed"] == info2["organism_seed"] == 3
    assert type(info["organism_seed"]) is int


@pytest.mark.parametrize("tier,mode", SETTINGS)
def test_the_mask_and_the_refusals_come_from_one_table(tier, mode):
    """A kind is in the action mask exactly when some well-formed action of
    that kind is accepted: the mask is never looser or stricter than the
    refusals (checked on a fixed sequence of session phases)."""
    env, _, state = _open(tier, mode, [])
    params = env.params
    a = env.organism.arrays
    gene = _free_gene(a)
    good = {
        core.EXPERIMENT: {"kind": core.EXPERIMENT, "gene_codes": codes_on([gene])},
        core.REVEAL_TASK: {"kind": core.REVEAL_TASK},
        core.SUBMIT_PREDICTION: {"kind": core.SUBMIT_PREDICTION},
        core.SUBMIT_NETWORK: {"kind": core.SUBMIT_NETWORK},
        core.COMMIT_DIAGNOSIS: {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": N, "diagnosis_type": PERSIST},
        core.TEST_RESCUE: {"kind": core.TEST_RESCUE, "gene_codes": codes_on([gene])},
        core.END: {"kind": core.END},
    }
    phases = [core.EXPERIMENT, core.REVEAL_TASK, core.SUBMIT_PREDICTION, core.COMMIT_DIAGNOSIS, core.TEST_RESCUE,
              core.REVEAL_TASK, core.SUBMIT_PREDICTION, core.SUBMIT_NETWORK, core.END]
    for phase in phases:
        mask = np.asarray(core.legal_kinds(state, params))
        for kind, action in good.items():
            _, _, _, _, _, info = core.step(state, core.make_action(params, **action), params)
            assert bool(mask[kind]) == (int(info["error"]) == 0), (phase, kind, int(info["error"]))
        _, state, *_ = core.step(state, core.make_action(params, **good[phase]), params)
