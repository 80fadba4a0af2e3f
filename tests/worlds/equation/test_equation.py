"""The equation world: the API test, the grammar and its generator, the
parser of hostile formula text, the scorer, the paper's loop (a formula
stated with every query, the default) and its iterations, the baselines and
the report with its floors."""

from __future__ import annotations

import json
import math
import re

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luca_gym import worlds
from luca_gym.llm.loop import run_agent
from luca_gym.worlds.equation import baselines, core, grammar
from luca_gym.worlds.equation.config import INPUT_HIGH, INPUT_LOW, N_HELDOUT, EquationConfig
from luca_gym.worlds.equation.formula import MAX_CHARS, MAX_NODES, FormulaError, parse
from luca_gym.worlds.equation.tools import EquationToolSession

WORLD = "luca_gym.worlds.equation:WORLD"
VARIABLES = ["mass", "velocity", "time"]
SETTINGS = [("simple", 3, 0), ("medium", 3, 2), ("complex", 5, 2)]
# Derandomized: the same examples every run (a property test here never flakes).
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)


@pytest.fixture(scope="module")
def world():
    return worlds.get(WORLD)


@pytest.fixture(scope="module")
def evaluate():
    """The world's evaluator, jitted once, in float64: (program, x (P, m)) -> (P,) numpy."""
    jitted = jax.jit(grammar.evaluate)
    return grammar.x64(lambda program, x: np.asarray(jitted(program, np.asarray(x, np.float64))))


def session(seed=0, **settings_):
    return EquationToolSession(seed, **{"complexity": "simple", "n_variables": 3, "n_distractors": 0, **settings_})


# -- the world as every world: check_world runs in tests/test_api.py ---------------------------------

def test_the_world_declares_its_keys_scores_and_baselines(world):
    assert world.name == "equation" and world.headline == "success"
    assert world.session_keys == ("complexity", "n_variables", "n_distractors", "proposals", "measurement_noise",
                                  "grammar_shown", "seed")
    # version 1's lines: one submission; lines from before the settings beyond the paper: no noise, the grammar listed
    assert world.version == "2" and dict(world.key_defaults) == {"proposals": "final", "measurement_noise": 0.0,
                                                                 "grammar_shown": "listed"}
    assert set(world.baseline_policies()) == {"random", "systematic", "noisy-fit"}
    assert "luca_gym/EquationDiscoveryTools-v0" in world.gym_ids()


@pytest.mark.parametrize("field, value, match", [
    ("complexity", "hard", "complexity: 'hard' not allowed; one of 'simple', 'medium', 'complex'"),
    ("n_variables", 0, r"n_variables: 0 not allowed; an integer in 1\.\.8"),
    ("n_variables", 3.0, "n_variables: 3.0 not allowed"),
    ("n_distractors", 5, r"n_distractors: 5 not allowed; an integer in 0\.\.4"),
    ("budget", 0, "budget: 0 not allowed"),
    ("budget", True, "budget: True not allowed"),
    ("proposals", "each", "proposals: 'each' not allowed; one of 'every', 'final'"),
])
def test_the_config_names_a_bad_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        EquationConfig(**{field: value})


def test_a_complex_formula_needs_two_variables():
    with pytest.raises(ValueError, match="n_variables: 1 not allowed with complexity 'complex'"):
        EquationConfig("complex", 1)
    EquationConfig("medium", 1)


# -- the generator ----------------------------------------------------------------------------
@pytest.mark.parametrize("complexity, n, d", SETTINGS + [("medium", 1, 1), ("complex", 2, 4)])
def test_generated_formulas_are_finite_and_depend_on_exactly_the_formula_variables(complexity, n, d, evaluate):
    config = EquationConfig(complexity, n, d)
    rng = np.random.default_rng(0)
    for seed in range(6):
        inst = core.instance(seed, config)
        relevant = np.asarray(inst.relevant)
        assert relevant.sum() == n and len(set(grammar.names_of(inst))) == n + d
        x = rng.uniform(INPUT_LOW, INPUT_HIGH, (200, n + d))
        x[:2] = [[INPUT_LOW] * (n + d), [INPUT_HIGH] * (n + d)]
        y = evaluate(inst.program, x)
        assert np.isfinite(y).all() and np.ptp(y) > 1e-6 * np.abs(y).max()
        for j in range(n + d):
            moved = x.copy()
            moved[:, j] = rng.uniform(INPUT_LOW, INPUT_HIGH, len(x))
            changed = np.abs(evaluate(inst.program, moved) - y) > 1e-12 * np.abs(y)
            assert changed.any() == relevant[j], (seed, j, grammar.render(inst.structure, grammar.names_of(inst)))
        # the rendered text is the formula, and it uses exactly the formula's variables
        text = grammar.render(inst.structure, grammar.names_of(inst))
        assert np.allclose(evaluate(parse(text, grammar.names_of(inst)), x), y, rtol=1e-12, atol=0)
        used = set(re.findall(r"[a-z_]+", text)) - set(grammar.FUNCTION_OPS)
        assert used == {v for v, r in zip(grammar.names_of(inst), relevant) if r}
        np.testing.assert_allclose(inst.heldout_y, evaluate(inst.program, inst.heldout_x), rtol=1e-12)
        assert inst.heldout_x.shape == (N_HELDOUT, n + d)


def test_each_complexity_keeps_its_part_of_the_grammar():
    for complexity in ("simple", "medium", "complex"):
        config = EquationConfig(complexity, 3, 2)
        forms = set()
        for seed in range(30):
            s = core.instance(seed, config).structure
            has_f, has_sum = int(s.f) > 0, int(s.c2) > 0
            used = [np.asarray(e) != 0 for e in (s.e1, s.e2, s.e3)]
            assert (sum(u.astype(int) for u in used) <= 1).all()  # each variable appears once
            assert np.abs(np.asarray(s.e2)).sum() <= 2 and set(np.asarray(s.e2).tolist()) <= {-1, 0, 1}
            forms.add((has_f, has_sum))
        assert forms == {"simple": {(False, False)}, "medium": {(True, False), (False, True)}, "complex": {(True, True)}}[complexity]


def test_an_instance_is_a_pure_function_of_seed_and_config():
    config = EquationConfig("complex", 3, 2)
    a, b = core.instance(7, config), core.instance(7, config)
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    batch = grammar.instances_of([5, 7, 2**62 + 1], config)
    for i, seed in enumerate([5, 7, 2**62 + 1]):
        one = core.instance(seed, config)
        assert all(np.array_equal(x[i], y) for x, y in zip(jax.tree.leaves(batch), jax.tree.leaves(one)))
    other = core.instance(8, config)
    assert not np.array_equal(a.heldout_y, other.heldout_y)


def test_the_distractors_hide_among_the_names_and_positions():
    """Neither a position nor a name tells a distractor: each position and many
    names are a formula variable in some instance and a distractor in another."""
    config = EquationConfig("simple", 3, 2)
    instances = [core.instance(seed, config) for seed in range(40)]
    relevant = np.array([np.asarray(i.relevant) for i in instances])
    assert relevant.any(axis=0).all() and (~relevant).any(axis=0).all()
    roles = {}
    for inst in instances:
        for name, r in zip(grammar.names_of(inst), np.asarray(inst.relevant)):
            roles.setdefault(name, set()).add(bool(r))
    assert sum(len(r) == 2 for r in roles.values()) >= 5


# -- the parser ------------------------------------------------------------------------------
HOSTILE = [
    ("mass.__class__", "attribute access"),
    ("mass.__class__.__mro__", "attribute access"),
    ("__import__('os').system('ls')", "attribute access"),
    ("__import__('os')", "'__import__' is not an allowed function"),
    ("import os", "not a single Python expression"),
    ("lambda: mass", "lambda not allowed"),
    ("(lambda: 1)()", "lambda not allowed"),
    ("[m for m in (1, 2)]", "comprehension not allowed"),
    ("sum(m for m in (1, 2))", "'sum' is not an allowed function"),
    ("eval('1')", "'eval' is not an allowed function"),
    ("open('/etc/passwd')", "'open' is not an allowed function"),
    ("np.sin(mass)", "attribute access"),
    ("mass**10**10", "exponent must be an integer"),
    ("mass**100", "exponent must be an integer"),
    ("mass**velocity", "exponent must be an integer"),
    ("mass**0.5", "exponent must be an integer"),
    ("-" * 100 + "mass", "nested more than 64 levels"),
    ("sin(" * 70 + "mass" + ")" * 70, "nested more than 64 levels"),
    ("(" * 300 + "mass" + ")" * 300, "not a single Python expression"),
    ("mass" * 600, f"at most {MAX_CHARS}"),
    ("mass[0]", "indexing"),
    ("mass if velocity else time", "if/else"),
    ("mass < velocity", "comparison"),
    ("(mass := 1)", "assignment"),
    ("f'{mass}'", "f-string"),
    ("'mass'", "constant 'mass' not allowed"),
    ("True", "constant True not allowed"),
    ("1e400", "finite number"),
    ("1e7 * mass", "at most 1e+06"),
    ("mass // 2", "operator '//' (FloorDiv) not allowed"),
    ("~mass", "operator '~' (Invert) not allowed"),
    ("mass; velocity", "not a single Python expression"),
    ("sin(mass, velocity)", "exactly one argument"),
    ("sin(x=mass)", "exactly one argument"),
    ("sin", "'sin' is a function"),
    ("energy * mass", "unknown name 'energy'; allowed variables mass, velocity, time"),
    ("ｍass", "printable ASCII"),
    ("mass\x00", "printable ASCII"),
    ("", "empty"),
]


@pytest.mark.parametrize("text, match", HOSTILE)
def test_a_hostile_formula_is_refused_with_a_clear_message(text, match):
    with pytest.raises(FormulaError, match=re.escape(match)):
        parse(text, VARIABLES)


@pytest.mark.parametrize("value", [3, None, b"mass", ["mass"], {"formula": "mass"}, 1.5])
def test_a_formula_that_is_not_text_is_refused(value):
    with pytest.raises(FormulaError, match="formula: expected text"):
        parse(value, VARIABLES)


def test_ten_megabytes_of_formula_are_refused_at_once():
    with pytest.raises(FormulaError, match=f"10000000 characters; at most {MAX_CHARS}"):
        parse("m" * 10_000_000, VARIABLES)
    s = session()
    before = s.status()
    answer = s.call("submit_formula", {"formula": "mass*" * 2_000_000 + "mass"})
    assert "error" in answer and "at most" in answer["error"] and s.status() == before and not s.ended


def test_too_many_operations_are_refused():
    with pytest.raises(FormulaError, match=f"at most {MAX_NODES}"):
        parse("+".join(["(mass*velocity)"] * 60), VARIABLES)
    parse("+".join(["mass"] * 64), VARIABLES)  # a long flat sum is fine


_WRAPPERS = st.sampled_from(["{h}", "mass + {h}", "sin({h})", "({h})*2", "exp(mass/({h}))", "-{h}", "{h}**2", "velocity/({h}) - time"])


@PROPERTY
@given(_WRAPPERS, st.sampled_from([h for h, _ in HOSTILE if h and len(h) < 500]))
def test_a_hostile_part_anywhere_in_a_formula_is_refused(wrapper, hostile):
    try:
        parse(wrapper.format(h=hostile), VARIABLES)
    except FormulaError as exc:
        assert str(exc).startswith("formula: ")
    else:  # only a wrapper that makes the part harmless (none of ours) could get here
        pytest.fail(f"{wrapper.format(h=hostile)!r} was accepted")


@PROPERTY
@given(st.text(max_size=300) | st.text(alphabet="masvelocitytime()+-*/.,0123456789e_ [],'\"", max_size=120))
def test_any_text_parses_or_is_refused_cleanly(text):
    try:
        program = parse(text, VARIABLES)
    except FormulaError as exc:
        assert str(exc).startswith("formula: ")
    else:
        assert program.op.shape == (MAX_NODES,) and (program.left <= np.arange(MAX_NODES)).all()


def _formulas():
    """(text, numpy function of the columns) pairs from the whitelist."""
    leaves = st.one_of(
        st.sampled_from([(v, (lambda j: lambda x: x[:, j])(j)) for j, v in enumerate(VARIABLES)]),
        st.integers(1, 9).map(lambda c: (str(c), lambda x, c=c: np.full(len(x), float(c)))),
        st.sampled_from([("0.5", lambda x: np.full(len(x), 0.5)), ("2.25", lambda x: np.full(len(x), 2.25))]),
    )

    def extend(inner):
        binary = st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(
            lambda t: (f"({t[0][0]}) {t[1]} ({t[2][0]})",
                       {"+": lambda a, b: lambda x: a(x) + b(x), "-": lambda a, b: lambda x: a(x) - b(x),
                        "*": lambda a, b: lambda x: a(x) * b(x), "/": lambda a, b: lambda x: a(x) / b(x)}[t[1]](t[0][1], t[2][1])))
        unary = st.tuples(st.sampled_from(["sin", "cos", "exp", "log", "sqrt", "-"]), inner).map(
            lambda t: (f"{t[0]}({t[1][0]})", (lambda f, a: lambda x: f(a(x)))(
                {"sin": np.sin, "cos": np.cos, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "-": np.negative}[t[0]], t[1][1])))
        power = st.tuples(inner, st.integers(-3, 3)).map(
            lambda t: (f"({t[0][0]})**{t[1]}", (lambda a, p: lambda x: a(x) ** float(p))(t[0][1], t[1])))
        return binary | unary | power

    return st.recursive(leaves, extend, max_leaves=8)


@PROPERTY
@given(formula=_formulas())
def test_a_known_good_formula_evaluates_as_numpy_does(formula, evaluate):
    text, expected = formula
    x = np.random.default_rng(1).uniform(INPUT_LOW, INPUT_HIGH, (5, len(VARIABLES)))
    with np.errstate(all="ignore"):
        want = expected(x)
    got = evaluate(parse(text, VARIABLES), x)
    both = np.isfinite(want) & (np.abs(want) < 1e200)
    assert (np.isfinite(got) == np.isfinite(want))[np.abs(want) < 1e200].all(), text
    np.testing.assert_allclose(got[both], want[both], rtol=1e-9, atol=1e-12, err_msg=text)


@PROPERTY
@given(st.sampled_from([h for h, _ in HOSTILE]), st.integers(0, 3))
def test_a_refused_submission_costs_nothing_and_changes_nothing(text, queries):
    s = session(3)
    for _ in range(queries):
        assert "output" in s.call("query", {"inputs": {v: 2.0 for v in s.variables}, "formula": "1"})
    before, calls = s.status(), len(s.transcript)
    answer = s.call("submit_formula", {"formula": text})
    assert "error" in answer and s.status() == before and not s.ended and s.scores is None
    assert len(s.transcript) == calls + 1 and s.total_reward == 0.0


# -- the scorer ------------------------------------------------------------------------------
def _truth(s: EquationToolSession) -> str:
    inst = core.instance(s.seed, s.config, s.seal)
    return grammar.render(inst.structure, s.variables)


@pytest.mark.parametrize("complexity, n, d", SETTINGS)
def test_the_true_formula_succeeds_and_a_constant_factor_fails(complexity, n, d):
    for seed in range(3):
        truth = _truth(session(seed, complexity=complexity, n_variables=n, n_distractors=d))
        scores = {}
        for name, text in [("truth", truth), ("double", f"2*({truth})"), ("shifted", f"({truth}) + 1"),
                           ("nearly", f"({truth})*1.0000001"), ("off", f"({truth})*1.00001")]:
            s = session(seed, complexity=complexity, n_variables=n, n_distractors=d)
            assert "output" in s.call("query", {"inputs": {v: 2.5 for v in s.variables}, "formula": "1"})
            answer = s.call("submit_formula", {"formula": text})
            assert answer["ended"] and s.total_reward == answer["scores"]["success"]
            scores[name] = answer["scores"]
        assert scores["truth"] == {"success": 1.0, "iterations": 1}  # one query, then the right formula
        assert scores["double"]["success"] == scores["shifted"]["success"] == scores["off"]["success"] == 0.0
        assert scores["nearly"]["success"] == 1.0  # within the relative 1e-6


def test_success_is_invariant_to_algebraically_equal_rewrites():
    s = session(4, complexity="complex", n_variables=3, n_distractors=2)
    truth = _truth(s)
    a, b = s.variables[:2]
    rewrites = [f"({truth})*({a} + {b})/({a} + {b})", f"{a}*(({truth})/{a})", f"({truth})*{a}/{a} + {b} - {b}",
                f"({truth})*(sin({a})**2 + cos({a})**2)", f"exp(log({a}))*({truth})/{a}"]
    for text in rewrites:
        t = session(4, complexity="complex", n_variables=3, n_distractors=2)
        assert t.call("submit_formula", {"formula": text})["scores"]["success"] == 1.0, text


def test_a_times_b_plus_c_equals_a_times_b_plus_a_times_c(evaluate):
    """The scorer on a hand-made truth: a*(b+c) and its expansion agree, a near miss does not."""
    config = EquationConfig("simple", 3, 0)
    inst = core.instance(0, config)
    truth = parse("mass*(velocity + time)", VARIABLES)
    hand = grammar.Instance(structure=inst.structure, program=truth, relevant=inst.relevant, names=inst.names,
                            heldout_x=inst.heldout_x, heldout_y=evaluate(truth, inst.heldout_x), valid=inst.valid)
    for text, success in [("mass*velocity + mass*time", 1.0), ("time*mass + velocity*mass", 1.0),
                          ("(mass**2*velocity + mass**2*time)/mass", 1.0), ("mass*velocity + time", 0.0),
                          ("mass*velocity + mass*time + 1e-3", 0.0)]:
        state = core.reset(hand, config)
        state, reward, error = core.step(state, core.Action.make(core.SUBMIT, config, submission=parse(text, VARIABLES)), config)
        assert int(error) == 0 and float(reward) == float(state.success) == success, text


def test_a_formula_with_nan_or_inf_on_the_held_out_inputs_fails():
    s = session(1)
    truth = _truth(s)
    assert s.call("submit_formula", {"formula": f"({truth}) + log({s.variables[0]} - 3)"})["scores"]["success"] == 0.0
    v = s.variables[0]
    assert session(1).call("submit_formula", {"formula": f"({truth}) + 1/({v} - {v})"})["scores"]["success"] == 0.0


# -- the tools -------------------------------------------------------------------------------
def test_queries_spend_the_budget_and_then_only_a_submission_remains():
    s = session(2, budget=3, proposals="final")
    point = {v: 2.0 for v in s.variables}
    outputs = [s.call("query", {"inputs": point}) for _ in range(3)]
    assert [o["budget_remaining"] for o in outputs] == [2, 1, 0] and len({o["output"] for o in outputs}) == 1
    refused = s.call("query", {"inputs": point})
    assert "budget is spent" in refused["error"] and refused["budget_remaining"] == 0
    answer = s.call("submit_formula", {"formula": _truth(s)})
    assert answer["scores"] == {"success": 1.0, "iterations": 3}  # the cycles: three queries, the last one's formula
    for name, args in [("query", {"inputs": point}), ("submit_formula", {"formula": "mass"}), ("end", {})]:
        assert "has ended" in s.call(name, args)["error"]
    assert s.total_reward == 1.0


def test_one_query_then_the_right_formula_is_one_iteration():
    """The paper's loop (the default): a formula stated with every query, the
    session ended the first time it is right; iterations are the queries
    before it, at least 1, as the paper counts cycles."""
    s = session(7, complexity="medium", n_distractors=1)
    truth, point = _truth(s), {v: 2.0 for v in s.variables}
    answer = s.call("query", {"inputs": point, "formula": "1"})
    assert answer["formula_correct"] is False and "output" in answer and answer["budget_remaining"] == 9
    answer = s.call("query", {"inputs": point, "formula": truth})
    assert answer["ended"] and answer["scores"] == {"success": 1.0, "iterations": 1} and s.total_reward == 1.0
    assert answer["budget_remaining"] == 9 and int(s.state.queries) == 1  # the right formula's query was not made
    assert set(answer) == {"ended", "end_reason", "scores", "budget_remaining"}  # no output of a query not made
    s = session(7, complexity="medium", n_distractors=1)
    assert s.call("query", {"inputs": point, "formula": truth})["scores"] == {"success": 1.0, "iterations": 1}
    s = session(7, complexity="medium", n_distractors=1)
    refused = s.call("query", {"inputs": point, "formula": "__import__('os')"})
    assert "nothing was spent" in refused["error"] and refused["budget_remaining"] == 10
    for _ in range(2):
        s.call("query", {"inputs": point, "formula": "1"})
    assert s.call("end", {})["scores"] == {"success": 0.0, "iterations": 2}
    final = session(7, complexity="medium", n_distractors=1, proposals="final")
    assert "unknown field 'formula'" in final.call("query", {"inputs": point, "formula": truth})["error"]
    final.call("query", {"inputs": point})
    assert final.call("submit_formula", {"formula": truth})["scores"] == {"success": 1.0, "iterations": 1}


def test_the_tool_session_is_a_tool_table_over_the_core():
    """No rule in the session: refusals, rewards and the ending are the generic table's; the
    query's inputs are an object named by the instance's variables (per session)."""
    assert {"dispatch", "error", "record", "_step"}.isdisjoint(vars(EquationToolSession))
    for seed in (0, 1):
        s = session(seed, n_distractors=2)
        inputs = s.tool_specs()[1]["input_schema"]["properties"]["inputs"]
        assert list(inputs["properties"]) == inputs["required"] == s.variables and inputs["additionalProperties"] is False
    config = EquationConfig()
    state = core.reset(core.instance(0, config), config)
    state, reward, error = core.step(state, core.Action.make(core.QUERY, config, [2.0, 3.0, 4.0]), config)
    assert int(error) == 0 and float(reward) == 0.0 and float(state.output) != 0.0 and not bool(core.ended(state))
    state, reward, error = core.step(state, core.Action.make(core.END, config), config)
    assert core.scores(state) == {"success": 0.0, "iterations": 1} and bool(core.ended(state))
    assert float(state.output) == 0.0 and set(core.public_view(state, config)) == {"budget_left", "queries", "output"}


def test_the_step_compiles_once_whatever_the_protocol():
    from luca_gym.testing import count_traces

    for proposals in ("every", "final"):  # warm both: the step's argument for the protocol is traced, not static
        s = session(1, proposals=proposals)
        s.call("query", {"inputs": {v: 2.0 for v in s.variables}, **({"formula": "1"} if proposals == "every" else {})})
    with count_traces() as traced:
        for proposals in ("every", "final"):
            s = session(2, proposals=proposals)
            s.call("query", {"inputs": {v: 3.0 for v in s.variables}, **({"formula": "1"} if proposals == "every" else {})})
            s.call("submit_formula", {"formula": _truth(s)})
    assert not [name for name in traced if "step" in name]


@pytest.mark.parametrize("change, match", [
    (lambda p, v: p.pop(v[0]), "missing required field"),
    (lambda p, v: p.update(energy=2.0), "unknown field 'energy'"),
    (lambda p, v: p.update({v[0]: 5.5}), f"above the maximum {INPUT_HIGH:g}"),
    (lambda p, v: p.update({v[0]: 0.0}), f"below the minimum {INPUT_LOW:g}"),
    (lambda p, v: p.update({v[0]: math.nan}), "NaN and Infinity are not allowed"),
    (lambda p, v: p.update({v[0]: math.inf}), "NaN and Infinity are not allowed"),
    (lambda p, v: p.update({v[0]: "2"}), "expected number"),
])
def test_a_bad_query_is_refused_and_costs_nothing(change, match):
    s = session(5, n_distractors=2)
    point = {v: 2.0 for v in s.variables}
    change(point, s.variables)
    answer = s.call("query", {"inputs": point, "formula": "1"})
    assert match in answer["error"] and answer["budget_remaining"] == 10 and int(s.state.queries) == 0


def test_the_core_refuses_inputs_out_of_range_itself():
    config = EquationConfig()
    state = core.reset(core.instance(0, config), config)
    for bad in ([0.5, 2, 2], [2, 2, np.nan], [2, 2, 6]):
        new, reward, error = core.step(state, core.Action.make(core.QUERY, config, np.array(bad, float)), config)
        assert core.ERRORS[int(error)].startswith("inputs:") and int(new.budget_left) == 10 and float(new.output) == 0.0
        jax.tree.map(np.testing.assert_array_equal, new, state)  # a refusal changes nothing


def test_nothing_an_agent_sees_reveals_the_formula_or_the_distractors():
    s = session(6, complexity="complex", n_variables=3, n_distractors=2)
    truth = _truth(s)
    relevant = [v for v, r in zip(s.variables, np.asarray(core.instance(6, s.config).relevant)) if r]
    s.call("describe", {})
    s.call("query", {"inputs": {v: 3.0 for v in s.variables}, "formula": "1"})
    s.call("submit_formula", {"formula": "mass + (("})
    s.call("end", {})
    seen = json.dumps([s.system_prompt(), s.tool_specs(), s.record(), s.record_fields()])
    assert truth not in seen and "relevant" not in seen and set(relevant) < set(s.variables)
    assert "heldout" not in seen and "program" not in seen
    assert all(set(c["result"]) <= {"variables", "input_range", "complexity", "n_distractors", "budget", "proposals",
                                     "grammar", "inputs", "output", "formula_correct", "error", "ended", "end_reason",
                                     "scores", "budget_remaining"}
               for c in s.transcript)


def test_a_sealed_instance_is_another_formula():
    plain, sealed = session(0), session(0, sealed="a secret of at least sixteen characters")
    assert sealed.instance_id != plain.instance_id and plain.instance_id == "eq_00000000"
    assert _truth(sealed) != _truth(plain)


# -- the baselines ---------------------------------------------------------------------------
@pytest.mark.parametrize("proposals", ["every", "final"])
def test_the_systematic_baseline_solves_every_instance_in_one_query(proposals):
    """Measured on seeds 0-19 at every complexity, with (3, 0) and (5, 2): success 1.0 in 1 iteration (one query,
    then the formula) under the paper's loop."""
    for complexity, n, d in [("simple", 3, 0), ("medium", 3, 2), ("complex", 5, 2)]:
        for seed in range(4):
            s = session(seed, complexity=complexity, n_variables=n, n_distractors=d, proposals=proposals)
            run_agent(baselines.Systematic(), s, retries=0)
            assert s.scores == {"success": 1.0, "iterations": 1}, (complexity, seed)
            queries = [c for c in s.transcript if c["call"] == "query"]
            assert all(("formula" in c["arguments"]) == (proposals == "every") for c in queries)


def test_the_systematic_search_lists_every_formula_that_fits_one_measurement():
    """At a round input many formulas coincide: all are listed, and a second query tells them apart."""
    x = np.array([2.0, 3.0, 1.5])
    found = baselines.search("simple", 2, x, 12.0)
    texts = {grammar.render(found.structure(k), VARIABLES) for k in range(len(found))}
    assert {"2*mass*velocity", "6*velocity/time", "4*mass*time", "9*mass/time"} <= texts
    assert np.allclose(found.values(x[None])[0], 12.0)
    second = np.array([1.7, 2.9, 4.1])
    left = baselines.consistent(found, np.stack([x, second]), np.array([12.0, 2 * 1.7 * 2.9]))
    assert [grammar.render(left.structure(k), VARIABLES) for k in range(len(left))] == ["2*mass*velocity"]


def test_the_random_baseline_rarely_succeeds():
    """Measured on seeds 0-19 at every complexity, (3, 0) and (5, 2): success 0.0."""
    for seed in range(4):
        s = session(seed, complexity="medium", n_variables=3, n_distractors=0)
        run_agent(baselines.RandomBaseline(), s, retries=0)
        assert s.ended and s.scores["success"] == 0.0 and 1 <= s.scores["iterations"] == int(s.state.queries) <= 10
        assert all("formula" in c["arguments"] for c in s.transcript if c["call"] == "query")  # a guess every cycle


def test_a_baseline_runs_through_the_harness(world):
    from luca_gym.harness.runner import run_tool_session
    from luca_gym.protocol import SessionSpec

    spec = SessionSpec("systematic", 3, "equation", (("complexity", "medium"), ("n_variables", 3), ("n_distractors", 2)))
    record = run_tool_session(world.baseline_policies()["systematic"](), spec, retries=0)
    assert record["scores"] == {"success": 1.0, "iterations": 1} and record["world"] == "equation"


def test_the_report_averages_iterations_over_successful_sessions_only():
    from luca_gym.worlds.equation.report import table

    key = {"complexity": "simple", "n_variables": 3, "n_distractors": 0}
    records = [{"agent": "a", **key, "scores": {"success": s, "iterations": i}} for s, i in [(1.0, 2), (0.0, 11), (1.0, 4)]]
    records.append({"agent": "b", **key, "scores": {"success": 0.0, "iterations": 5}})
    text = table(records)
    assert "| a | simple | 3 | 0 | 3 | 67% | 3.00 | 5.67 |" in text and "| b | simple | 3 | 0 | 1 | 0% | ∞ | 5.00 |" in text


def test_the_report_names_the_protocol_and_computes_the_floors(tmp_path):
    """Both protocols swept: a table each, named; the computed random floor is
    the random agent's own numbers; the paper's figure stands only beside the
    paper's loop."""
    from luca_gym.cli import main

    out = tmp_path / "equation"
    assert main(["eval", "--world", "equation", "--complexity", "simple", "--n-variables", "3", "--proposals", "every,final",
                 "--agents", "systematic,random", "--seeds", "0-5", "--out", str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert {r["proposals"] for r in lines} == {"every", "final"} and {r["world_version"] for r in lines} == {"2"}
    assert main(["report", str(out)]) == 0
    every, final = (out / "report.md").read_text().split("### Table 1 (protocol: proposals=final")
    assert "### Table 1 (protocol: proposals=every, the paper's loop" in every and "not the paper's protocol" in final
    assert "| *paper's best (Grok-4, range over the 3 complexities)* | simple | 3 | 0 | - | 100% | 1.00-1.30 | - |" in every
    assert "paper's best" not in final
    for table in (every, final):
        rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in table.splitlines() if line.startswith("| ")}
        assert rows["| *floor: random (computed)*"] == rows["| random"]
        assert rows["| systematic"][4:6] == ["100%", "1.00"]
        assert rows["| *floor: commonest formula at once*"][4:] == ["0%", "∞", "1.00 |"]


def test_the_commonest_formula_floor_never_counts_an_instance_s_own_formula():
    from luca_gym.worlds.equation.report import floor_scores

    config = EquationConfig("simple", 1, 0)  # few formulas (36): some seeds share one
    fixed = floor_scores(config, range(20))["fixed"]
    structures = [grammar.render(core.instance(seed, config).structure, ["x"]) for seed in range(20)]
    shared = np.array([structures.count(text) > 1 for text in structures])
    assert shared.any() and not fixed["success"][~shared].any()
    assert floor_scores(config, [3])["fixed"]["success"].tolist() == [0.0]
    # A formula three seeds share is the others' commonest for each of them, and wrong for the fourth seed.
    assert floor_scores(config, [3, 3, 3, 5])["fixed"]["success"].tolist() == [1.0, 1.0, 1.0, 0.0]


def test_the_gymnasium_env_is_the_tool_session_in_dict_actions():
    """``luca_gym/EquationDiscovery-v0``: a query's output is the session's;
    a hostile formula is refused for free; the true formula ends it solved."""
    import gymnasium as gym

    env = gym.make("luca_gym/EquationDiscovery-v0", complexity="medium")
    obs, info = env.reset(options={"instance_seed": 5})
    session = EquationToolSession(5, complexity="medium")
    assert info["variables"] == list(session.variables)
    point = np.array([1.5, 2.0, 3.5])
    obs, reward, ended, _, info = env.step({"kind": 0, "inputs": point, "formula": ""})
    assert "formula" in info["error"] and obs["queries"] == 0 and not ended  # the paper's loop: a query states a formula
    obs, reward, ended, _, info = env.step({"kind": 0, "inputs": point, "formula": "1"})
    expected = session.call("query", {"inputs": dict(zip(session.variables, map(float, point))), "formula": "1"})["output"]
    assert obs["outputs"][0] == expected and obs["queries"] == 1 and obs["budget_left"] == 9 and not ended
    obs, reward, ended, _, info = env.step({"kind": 1, "inputs": point, "formula": "().__class__"})
    assert "not allowed" in info["error"] and reward == 0.0 and not ended and obs["budget_left"] == 9
    obs, reward, ended, _, info = env.step({"kind": 0, "inputs": point, "formula": _truth(session)})
    assert ended and reward == 1.0 and info["scores"] == {"success": 1.0, "iterations": 1} and obs["queries"] == 1


@pytest.mark.parametrize("kind, inputs, match", [
    (2.7, [2.0] * 3, r"kind: 2\.7 not allowed; an integer in 0\.\.2"),  # int() would make it "end"
    (True, [2.0] * 3, r"kind: True not allowed"),  # int() would make it "submit"
    (3, [2.0] * 3, r"kind: 3 not allowed"),
    (-1, [2.0] * 3, r"kind: -1 not allowed"),
    ("0", [2.0] * 3, r"kind: '0' not allowed"),
    (None, [2.0] * 3, r"kind: None not allowed"),
    (0, ["a", "b", "c"], r"action: inputs .* not allowed"),
    (0, {"mass": 1}, r"action: inputs .* not allowed"),
])
def test_the_gymnasium_env_refuses_an_illegal_action_and_changes_nothing(kind, inputs, match):
    from luca_gym.worlds.equation.envs import EquationEnv

    env = EquationEnv()
    obs, _ = env.reset(options={"instance_seed": 2})
    with pytest.raises(ValueError, match=match):
        env.step({"kind": kind, "inputs": inputs, "formula": "1"})
    assert not env.session.ended and env.session.transcript == [] and int(env.session.state.budget_left) == 10


# -- the session picture -----------------------------------------------------------------------
def test_a_session_is_read_back_from_its_messages_and_drawn_from_what_the_agent_saw(tmp_path):
    from luca_gym.llm.loop import AgentTurn, ToolCall
    from luca_gym.worlds.equation.report import figure_sessions, session_of

    s = session(1, complexity="medium", n_variables=3, n_distractors=1)
    # A refused query and a refused formula first: neither is read back as a query or a submission.
    hostile = [ToolCall("query", {"inputs": {v: 99.0 for v in s.variables}}, "bad_0"),
               ToolCall("submit_formula", {"formula": "__import__('os')"}, "bad_1")]
    random = baselines.RandomBaseline()

    def agent(messages, tools):
        return AgentTurn(tool_calls=[hostile.pop(0)]) if hostile else random(messages, tools)

    record = run_agent(agent, s, retries=0)
    assert sum("error" in json.loads(m["content"]) for m in record["messages"] if m["role"] == "tool") == 2
    seen = session_of(record["messages"])
    assert seen["variables"] == list(s.variables) and seen["scores"] == s.scores
    assert len(seen["queries"]) == s.scores["iterations"] == int(s.state.queries)
    submitted = [c["arguments"]["formula"] for m in record["messages"] if m["role"] == "assistant"
                 for c in m.get("tool_calls") or () if c["name"] == "submit_formula"]
    assert seen["formula"] == submitted[-1]
    for inputs, output in seen["queries"]:
        assert set(inputs) == set(s.variables) and all(INPUT_LOW <= x <= INPUT_HIGH for x in inputs.values())
        assert math.isfinite(output)
    figure_sessions({"random": seen}, str(tmp_path / "eq.png"), title="seed 1")
    png = (tmp_path / "eq.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(png) < 150_000
