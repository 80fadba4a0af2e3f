"""The discovery worlds' settings beyond the paper: observation noise, latent
nodes, graphs up to 256 nodes and a cost per intervention (``dag``,
``relational``), measurement noise and the grammar in words (``equation``),
and the ``bayes-edges`` baseline. Each setting is checked on construction,
off by default with the paper's instances and rules exactly, and does what
its docstring says."""

from __future__ import annotations

import hashlib
import json

import jax
import numpy as np
import pytest

from luca_gym import harness as ev
from luca_gym.testing import count_traces
from luca_gym.worlds.equation import core as equation_core
from luca_gym.worlds.equation.config import GRAMMAR, GRAMMAR_WORDS, TOLERANCE, EquationConfig
from luca_gym.worlds.equation.grammar import evaluate, render
from luca_gym.worlds.equation.tools import EquationToolSession
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.analyst import bayes_memory, edge_posterior
from luca_gym.worlds.graphs.baselines import BASELINES, bayes_choice, play_bayes_batch, systematic_policy
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig
from luca_gym.worlds.graphs.flat import GraphFlat, play_batch, session_keys
from luca_gym.worlds.graphs.tools import DagToolSession


# -- every new field is checked -------------------------------------------------------------
@pytest.mark.parametrize("config_class", [DagConfig, RelationalConfig])
@pytest.mark.parametrize("field, value, allowed", [
    ("observation_noise", -0.1, "a number in [0, 0.5]"),
    ("observation_noise", 0.6, "a number in [0, 0.5]"),
    ("observation_noise", True, "a number in [0, 0.5]"),
    ("observation_noise", "0.1", "a number in [0, 0.5]"),
    ("n_latent", -1, "an integer in 0..256"),
    ("n_latent", 257, "an integer in 0..256"),
    ("n_latent", 1.0, "an integer in 0..256"),
    ("intervention_cost", -0.5, "a number in [0, inf]"),
    ("intervention_cost", float("nan"), "a number in [0, inf]"),
    ("intervention_cost", float("inf"), "a number in [0, inf]"),
    ("intervention_cost", False, "a number in [0, inf]"),
])
def test_a_bad_graph_setting_is_refused_naming_field_value_and_range(config_class, field, value, allowed):
    with pytest.raises(ValueError) as raised:
        config_class(**{field: value})
    assert str(raised.value) == f"{field}: {value!r} not allowed; {allowed}"


@pytest.mark.parametrize("config_class, field", [(DagConfig, "n_nodes"), (RelationalConfig, "n_houses")])
def test_graphs_go_up_to_256_nodes(config_class, field):
    assert config_class(**{field: 256}).n == 256
    with pytest.raises(ValueError, match=f"{field}: 257 not allowed; an integer in 2..256"):
        config_class(**{field: 257})


@pytest.mark.parametrize("field, value, message", [
    ("measurement_noise", -0.01, "measurement_noise: -0.01 not allowed; a number in [0, 1]"),
    ("measurement_noise", 1.5, "measurement_noise: 1.5 not allowed; a number in [0, 1]"),
    ("measurement_noise", True, "measurement_noise: True not allowed; a number in [0, 1]"),
    ("grammar_shown", "prose", "grammar_shown: 'prose' not allowed; one of 'listed', 'words'"),
    ("grammar_shown", None, "grammar_shown: None not allowed; one of 'listed', 'words'"),
])
def test_a_bad_equation_setting_is_refused_naming_field_value_and_range(field, value, message):
    with pytest.raises(ValueError) as raised:
        EquationConfig(**{field: value})
    assert str(raised.value) == message


# -- off by default: the paper's instances and rules exactly --------------------------------
def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()[:16]


# sha256 of (adjacency, states, key) of seeds 0-19, computed before these settings existed.
BEFORE = [
    (DagConfig(), "0145ad62c6acfbf0"),
    (DagConfig(n_nodes=3, n_states=3), "4b4d62244fb6a362"),
    (DagConfig(n_nodes=64, n_states=7, redraw_may_repeat=True), "369a703fa9208b65"),
    (RelationalConfig(), "ac809bc0a7177d68"),
    (RelationalConfig(n_houses=3), "55d50cf7f4023597"),
]


@pytest.mark.parametrize("config, before", BEFORE)
def test_the_defaults_reproduce_the_instances_of_before(config, before):
    batch = core.instances(range(20), config)
    assert _digest(batch.adjacency, batch.states, batch.key) == before
    # the settings named at their defaults are the same config, and the graph has no latent node
    explicit = type(config)(**{**config.settings(), "observation_noise": 0, "n_latent": 0, "intervention_cost": 0})
    assert explicit == config and hash(explicit) == hash(config)
    assert np.array_equal(batch.graph, batch.adjacency)


def test_without_noise_the_states_shown_are_the_states():
    config = DagConfig(n_nodes=6, n_states=3, redraw_may_repeat=True)
    state = core.reset(core.instance(4, config), config)
    for node in range(6):
        state, _, _ = core.step(state, core.Action(core.INTERVENE, node, np.zeros((6, 6), bool)), config)
        assert np.array_equal(state.shown, state.states) and np.array_equal(core.public_view(state)["states"], state.states)


def test_the_equation_defaults_are_the_paper_s():
    config = EquationConfig()
    assert (config.measurement_noise, config.grammar_shown, config.grammar_text) == (0.0, "listed", GRAMMAR)
    session = EquationToolSession(2, complexity="medium")
    assert GRAMMAR in session.system_prompt() and "exact output" in session.system_prompt()
    x = {v: 2.5 for v in session.variables}
    with jax.enable_x64(True):
        program = jax.tree.map(jax.numpy.asarray, session.state.program)
        exact = float(evaluate(program, jax.numpy.full((1, len(session.variables)), 2.5))[0])
    assert session.call("query", {"inputs": x, "formula": "1"})["output"] == exact


# -- observation noise -------------------------------------------------------------------------
NOISY = DagConfig(n_nodes=8, n_states=4, observation_noise=0.2)


def _play(config, seed, nodes):
    state = core.reset(core.instance(seed, config), config)
    shown, true = [np.asarray(state.shown)], [np.asarray(state.states[:config.n])]
    for node in nodes:
        state, _, error = core.step(state, core.Action(core.INTERVENE, int(node), np.zeros((config.n, config.n), bool)), config)
        assert int(error) == 0
        shown.append(np.asarray(state.shown))
        true.append(np.asarray(state.states[:config.n]))
    return state, np.array(shown), np.array(true)


def test_the_misreadings_are_a_pure_function_of_the_instance_and_the_reading():
    nodes = [0, 3, 3, 5, 1, 7]
    _, first, _ = _play(NOISY, 11, nodes)
    _, again, _ = _play(NOISY, 11, nodes)
    assert np.array_equal(first, again)
    _, other, _ = _play(NOISY, 12, nodes)
    assert not np.array_equal(first, other)
    # the true states evolve exactly as without noise: the noise is on the readings alone
    _, _, true = _play(NOISY, 11, nodes)
    _, clean, _ = _play(DagConfig(n_nodes=8, n_states=4), 11, nodes)
    assert np.array_equal(true, clean)


@pytest.mark.parametrize("config", [NOISY, RelationalConfig(n_houses=8, observation_noise=0.2)])
def test_a_misreading_is_another_value_with_the_stated_probability(config):
    wrong, total = 0, 0
    top = config.n_readings - 1
    rng = np.random.default_rng(0)
    for seed in range(40):
        _, shown, true = _play(config, seed, rng.integers(0, config.n, 8))
        assert shown.min() >= 0 and shown.max() <= top
        wrong += int((shown != true).sum())
        total += shown.size
    # 40 x 9 x 8 = 2,880 readings: the share misread is 0.2 within four standard deviations
    assert abs(wrong / total - 0.2) < 4 * np.sqrt(0.2 * 0.8 / total)


def test_the_evidence_is_what_the_readings_showed():
    config = DagConfig(n_nodes=8, n_states=4, observation_noise=0.3)
    state, shown, _ = _play(config, 3, [2])
    changed = (shown[1] != shown[0]) & (np.arange(8) != 2)
    assert np.array_equal(np.asarray(state.evidence[2]) == core.EDGE, changed)
    assert np.array_equal(np.asarray(state.changes[2]), changed.astype(int))


def test_the_tool_session_shows_the_readings_and_tells_the_rule():
    session = DagToolSession(5, n_nodes=6, n_states=3, observation_noise=0.25)
    assert "misread with probability 0.25" in session.system_prompt()
    zeros = np.zeros((6, 6), int).tolist()
    answer = session.call("intervene", {"molecule": 1, "adjacency": zeros})
    assert answer["states"] == np.asarray(session.state.shown).tolist() == answer["observation_matrix"][-1]


# -- latent nodes ------------------------------------------------------------------------------
def _projection(graph: np.ndarray, n: int) -> np.ndarray:
    """The shown nodes' i -> j: a path from i to j whose inner nodes are all latent (a numpy reading)."""
    m = len(graph)
    out = graph[:n, :n].copy()
    for i in range(n):
        frontier, seen = [k for k in range(n, m) if graph[i, k]], set()
        while frontier:
            k = frontier.pop()
            if k in seen:
                continue
            seen.add(k)
            out[i, :n] |= graph[k, :n]
            frontier += [l for l in range(n, m) if graph[k, l]]
    np.fill_diagonal(out, False)
    return out


@pytest.mark.parametrize("config", [DagConfig(n_nodes=6, n_states=3, n_latent=4, edge_density=0.4),
                                    RelationalConfig(n_houses=6, n_latent=4, edge_density=0.3)])
def test_the_truth_is_the_projection_and_an_intervention_shows_it(config):
    through = 0
    for seed in range(12):
        inst = core.instance(seed, config)
        graph, truth = np.asarray(inst.graph), np.asarray(inst.adjacency)
        assert graph.shape == (10, 10) and truth.shape == (6, 6)
        assert np.array_equal(truth, _projection(graph, 6))
        through += int((truth & ~graph[:6, :6]).sum())
        state = core.reset(inst, config)
        for node in range(6):
            before = np.asarray(state.shown)
            state, _, _ = core.step(state, core.Action(core.INTERVENE, node, np.zeros((6, 6), bool)), config)
            after = np.asarray(state.shown)
            others = np.arange(6) != node
            # changes certain: the shown nodes that change are exactly the truth's row, effects through latent ones included
            assert np.array_equal((after != before) & others, truth[node] & others)
    assert through > 0  # some edges to recover run through a latent node


def test_latent_nodes_appear_in_no_observation_and_no_answer():
    config = dict(n_nodes=5, n_states=3, n_latent=3, redraw_may_repeat=True)
    session = DagToolSession(1, **config)
    n = 5
    assert "3 hidden molecules" in session.system_prompt()
    for key, value in session.observation().items():
        assert all(size == n for size in np.shape(value)), key
    refused = session.call("intervene", {"molecule": 5, "adjacency": np.zeros((n, n), int).tolist()})
    assert "error" in refused and session.tool_specs()[0]["input_schema"]["properties"]["molecule"]["maximum"] == n - 1
    assert int(core.step(session.state, core.Action(core.INTERVENE, 6, np.zeros((n, n), bool)), session.config)[2]) == 3
    for node in range(4):
        answer = session.call("intervene", {"molecule": node, "adjacency": np.zeros((n, n), int).tolist()})
        assert len(answer["states"]) == n and all(len(row) == n for row in answer["observation_matrix"])
    record = session.call("submit_graph", {"adjacency": np.zeros((n, n), int).tolist()})
    assert set(record["scores"]) == {"success", "iterations", "edge_f1", "shd", "interventions", "wasted"}
    assert all(len(row) == n for row in session.call("get_observations", {}).get("observation_matrix", [[0] * n]))


# -- a cost per intervention -------------------------------------------------------------------
def test_the_cost_takes_cost_times_interventions_from_the_return():
    config = dict(n_nodes=4, n_states=3, intervention_cost=0.05)
    session = DagToolSession(3, **config)
    truth = np.asarray(session.state.adjacency).astype(int).tolist()
    zeros = np.zeros((4, 4), int).tolist()
    wrong = zeros if any(map(any, truth)) else [[0, 1, 0, 0]] + [[0] * 4] * 3
    assert "costs 0.05" in session.system_prompt()
    for node in range(3):
        session.call("intervene", {"molecule": node, "adjacency": wrong})
    answer = session.call("intervene", {"molecule": 3, "adjacency": truth})  # right: ends, that intervention not made
    scores = answer["scores"]
    assert scores["success"] == 1.0 and scores["interventions"] == 3 and scores["iterations"] == 3
    assert scores["cost"] == pytest.approx(0.15) and scores["return"] == pytest.approx(0.85)
    assert session.total_reward == pytest.approx(1.0 - 0.05 * 3)
    # an unsolved session: minus the cost of what it did
    session = DagToolSession(3, **config)
    session.call("intervene", {"molecule": 0, "adjacency": wrong})
    scores = session.call("submit_graph", {"adjacency": wrong})["scores"]
    assert scores["return"] == pytest.approx(-0.05) and session.total_reward == pytest.approx(-0.05)
    # no cost: the scores as before, the return the success
    free = DagToolSession(3, n_nodes=4, n_states=3)
    assert set(free.call("submit_graph", {"adjacency": truth})["scores"]) == {
        "success", "iterations", "edge_f1", "shd", "interventions", "wasted"}


def test_the_batched_return_takes_the_cost_too():
    config = RelationalConfig(n_houses=5, intervention_cost=0.1)
    codec = GraphFlat(config)
    out = jax.device_get(play_batch(systematic_policy(codec), None, session_keys(range(6)), codec, codec.instances(range(6)),
                                    config.max_calls))
    assert np.allclose(out["return"], out["success"] - 0.1 * out["interventions"], atol=1e-6)


# -- 256 nodes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [DagConfig(n_nodes=256, redraw_may_repeat=True, observation_noise=0.05),
                                    RelationalConfig(n_houses=256, n_latent=8)])
def test_256_nodes_compile_once_and_step(config):
    zeros = np.zeros((256, 256), bool)
    state = core.reset(core.instance(0, config), config)
    state, _, error = core.step(state, core.Action(core.INTERVENE, 255, zeros), config)
    assert int(error) == 0 and int(state.interventions) == 1 and state.evidence.shape == (256, 256)
    with count_traces() as traced:
        other = core.reset(core.instance(1, config), config)
        for node in (0, 17, 255):
            other, _, error = core.step(other, core.Action(core.INTERVENE, node, zeros), config)
    assert not traced and int(other.interventions) == 3


@pytest.mark.parametrize("config_class, size", [(DagConfig, "n_nodes"), (RelationalConfig, "n_houses")])
def test_one_compiled_step_serves_every_density_noise_and_cost(config_class, size):
    # The probabilities and the price are traced settings: a shape's instances and step compile once for all of
    # them (when the whole config was static, these four configs traced _generate_batch and step four times each).
    def play(config, seed):
        state = core.reset(core.instance(seed, config), config)
        return core.step(state, core.Action.make(core.INTERVENE, config, 1), config)

    play(config_class(**{size: 4}), 0)
    play(config_class(**{size: 4}, observation_noise=0.01), 0)  # the eager misreading at reset, once
    values = ((0.2, 0.0, 0.0), (0.3, 0.1, 0.0), (0.5, 0.2, 0.5), (0.9, 0.5, 1.25))
    with count_traces() as traced:
        for seed, (density, noise, cost) in enumerate(values):
            state, reward, error = play(config_class(**{size: 4}, edge_density=density, observation_noise=noise,
                                                     intervention_cost=cost), seed)
            assert int(error) == 0 and float(reward) == pytest.approx(-cost)  # the traced price is paid
    assert not traced
    with count_traces() as traced:  # a static setting (a graph's size no other test uses) compiles anew
        play(config_class(**{size: 13}), 0)
    assert {"_generate_batch", "step_pure"} <= set(traced)


def test_a_tool_session_says_how_large_a_matrix_a_call_can_carry():
    with pytest.raises(ValueError, match=r"n_nodes: 256 too large for a tool session; at most 147 \(a call stating"):
        DagToolSession(0, n_nodes=256)
    assert DagToolSession(0, n_nodes=147).config.n == 147


# -- bayes-edges -------------------------------------------------------------------------------
def _systematic(config, seeds):
    codec = GraphFlat(config)
    return jax.device_get(play_batch(systematic_policy(codec), None, session_keys(seeds), codec, codec.instances(seeds),
                                     config.max_calls))


def test_bayes_edges_is_a_baseline_of_both_worlds():
    import luca_gym.worlds as worlds

    for name in ("dag", "relational"):
        assert "bayes-edges" in worlds.get(name).baseline_policies()
    assert "bayes-edges" in BASELINES


def test_bayes_edges_matches_systematic_under_the_paper_s_settings():
    seeds = list(range(7401, 7431))
    for config in (DagConfig(), RelationalConfig()):
        bayes = jax.device_get(play_bayes_batch(core.instances(seeds, config), config))
        systematic = _systematic(config, seeds)
        assert bayes["success"].mean() == systematic["success"].mean() == 1.0
        assert bayes["iterations"].mean() <= systematic["iterations"].mean()


def test_bayes_edges_beats_systematic_where_a_child_may_keep_its_state():
    """Seeds 7201-7400 (200, a few seconds batched). bayes-edges now states the
    most probable matrix not yet refuted (calibrated on 7001-7050: 70%
    against systematic's 64%); here 70% against 60.5%, +9.5 points, so the
    bound is +5 (the target of +20 is not reached: with a redraw that may
    repeat, even knowing the hidden order the best split of the 2N
    interventions sees every edge with a chance of about 70%, against about
    58% for systematic's two each; see BENCHMARKS.md, "Settings with
    headroom"). Before systematic's revisit order was fixed the bound was +15."""
    config = DagConfig(n_nodes=10, n_states=5, redraw_may_repeat=True)
    seeds = list(range(7201, 7401))
    bayes = jax.device_get(play_bayes_batch(core.instances(seeds, config), config))
    systematic = _systematic(config, seeds)
    assert bayes["success"].mean() >= systematic["success"].mean() + 0.05


def test_bayes_edges_never_states_a_matrix_twice_under_the_paper_s_loop():
    """A stated matrix that did not end the session is wrong: bayes-edges
    remembers it (its memory, carried from call to call) and states the most
    probable matrix not yet refuted, the MAP of its edge posteriors first."""
    config = DagConfig(n_nodes=10, n_states=5, redraw_may_repeat=True)
    choose = bayes_choice(config)
    for seed in (7001, 7002, 7003):
        state, memory, stated = core.reset(core.instance(seed, config), config), bayes_memory(config), []
        while not bool(state.ended):
            view = core.public_view(state)
            node, adjacency, memory = choose(view, memory)
            if not stated:  # nothing refuted yet: the MAP
                assert np.array_equal(adjacency, np.asarray(edge_posterior(view, config)) > 0.5)
            stated.append(np.asarray(adjacency).tobytes())
            kind = core.SUBMIT if int(node) == config.n else core.INTERVENE
            state, _, error = core.step(state, core.Action(kind, node, adjacency), config)
            assert int(error) == 0
        assert len(set(stated)) == len(stated) and int(memory["count"]) == len(stated)


@pytest.mark.parametrize("world, settings_, config", [
    ("dag", dict(n_nodes=[6], n_states=[3], redraw_may_repeat=[True], observation_noise=[0.05], n_latent=[2],
                 intervention_cost=[0.001]),
     DagConfig(n_nodes=6, n_states=3, redraw_may_repeat=True, observation_noise=0.05, n_latent=2, intervention_cost=0.001)),
    ("relational", dict(n_houses=[5], observation_noise=[0.1], proposals=["final"]),
     RelationalConfig(n_houses=5, observation_noise=0.1, proposals="final")),
])
def test_bayes_edges_takes_the_same_calls_in_the_harness_and_batched(world, settings_, config):
    seeds = list(range(6))
    specs = ev.plan_world(world, ["bayes-edges"], seeds, **settings_)
    records = [ev.run_session(ev.make_runner(s.agent, world=world), s) for s in specs]
    batched = jax.device_get(play_bayes_batch(core.instances(seeds, config), config))
    for i, record in enumerate(records):
        for key, value in record["scores"].items():
            assert float(batched[key][i]) == pytest.approx(value, abs=1e-6), (i, key)
        assert float(batched["total"][i]) == pytest.approx(record["return"], abs=1e-6)


def test_bayes_edges_stops_where_interventions_cost_more_than_they_can_bring():
    """At the paper's settings every row it reads is certain, so a small cost
    changes nothing; a cost above what a whole session can win stops it at
    once (return 0, not less)."""
    seeds = list(range(7431, 7441))
    cheap = DagConfig(intervention_cost=0.01)
    out = jax.device_get(play_bayes_batch(core.instances(seeds, cheap), cheap))
    free = jax.device_get(play_bayes_batch(core.instances(seeds, DagConfig()), DagConfig()))
    assert np.array_equal(out["iterations"], free["iterations"]) and out["success"].mean() == 1.0
    assert np.allclose(out["total"], 1.0 - 0.01 * out["interventions"], atol=1e-5)
    dear = DagConfig(intervention_cost=0.5)
    out = jax.device_get(play_bayes_batch(core.instances(seeds, dear), dear))
    assert (out["interventions"] == 0).all() and (out["total"] == 0).all()


# -- results lines: the new keys ---------------------------------------------------------------
def test_the_settings_are_session_keys_and_an_older_line_reads_as_off(tmp_path):
    from luca_gym import worlds
    from luca_gym.harness.results import read_results

    for name in ("dag", "relational"):
        world = worlds.get(name)
        assert {"observation_noise", "n_latent", "intervention_cost"} <= set(world.session_keys)
        assert dict(world.key_defaults) == {"observation_noise": 0.0, "n_latent": 0, "intervention_cost": 0.0}
    old = {"world": "relational", "world_version": "2", "agent": "systematic", "n_houses": 3, "edge_density": 0.3,
           "proposals": "every", "seed": 0, "scores": {"success": 1.0, "iterations": 1, "edge_f1": 1.0, "shd": 0,
                                                       "interventions": 1, "wasted": 0}}
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (line,) = read_results(str(path)).records
    assert (line["observation_noise"], line["n_latent"], line["intervention_cost"]) == (0.0, 0, 0.0)


def test_the_report_names_a_setting_beyond_the_paper_and_the_return(tmp_path):
    from luca_gym.cli import main

    out = tmp_path / "dag"
    assert main(["eval", "--world", "dag", "--n-nodes", "4", "--n-states", "3", "--observation-noise", "0,0.1",
                 "--intervention-cost", "0.05", "--agents", "systematic,bayes-edges", "--seeds", "0-1", "--out", str(out),
                 "--quiet"]) == 0
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "redraw_may_repeat=False, observation_noise=0.1, intervention_cost=0.05)" in report
    assert "redraw_may_repeat=False, intervention_cost=0.05)" in report and "n_latent=" not in report
    assert "| agent | setting | edge F1 | SHD | interventions | wasted | return | sessions |" in report


# -- equation: measurement noise and the grammar in words --------------------------------------
def test_measurement_noise_is_relative_deterministic_and_scores_the_formula_exactly():
    plain = EquationToolSession(6, complexity="medium", n_variables=3)
    truth = render(equation_core.instance(6, plain.config).structure, plain.variables)
    x = {v: 1.5 + i for i, v in enumerate(plain.variables)}
    exact = plain.call("query", {"inputs": x, "formula": "1"})["output"]
    outputs = []
    for _ in range(2):
        noisy = EquationToolSession(6, complexity="medium", n_variables=3, measurement_noise=0.05)
        outputs.append([noisy.call("query", {"inputs": x, "formula": "1"})["output"] for _ in range(3)])
    assert outputs[0] == outputs[1]  # the instance's key and the query's index, nothing else
    errors = np.asarray(outputs[0]) / exact - 1
    assert len(set(outputs[0])) == 3 and (np.abs(errors) > 0).all() and (np.abs(errors) < 0.05 * 5).all()
    assert "measured with noise" in noisy.system_prompt() and noisy.describe()["measurement_noise"] == 0.05
    # the right formula still ends the session solved: the noise is on the answers only
    answer = noisy.call("query", {"inputs": x, "formula": truth})
    assert answer["ended"] and answer["scores"] == {"success": 1.0, "iterations": 3}
    assert TOLERANCE == 1e-6


def test_measurement_noise_is_noise_over_many_queries():
    config = EquationConfig("simple", 2, 0, budget=400, measurement_noise=0.1)
    state = equation_core.reset(equation_core.instance(1, config), config)
    x = np.array([2.0, 3.0])
    with jax.enable_x64(True):
        truth = float(evaluate(jax.tree.map(jax.numpy.asarray, state.program), jax.numpy.asarray(x[None]))[0])
    ratios = []
    for _ in range(400):
        state, _, _ = equation_core.step(state, equation_core.Action.make(equation_core.QUERY, config, x), config)
        ratios.append(float(state.output) / truth - 1)
    assert abs(np.mean(ratios)) < 0.03 and abs(np.std(ratios) - 0.1) < 0.02


def test_a_hand_made_instance_takes_no_noise():
    from luca_gym.worlds.equation import grammar

    config = EquationConfig("simple", 3, 0)
    inst = equation_core.instance(0, config)
    hand = grammar.Instance(structure=inst.structure, program=inst.program, relevant=inst.relevant, names=inst.names,
                            heldout_x=inst.heldout_x, heldout_y=inst.heldout_y, valid=inst.valid)
    equation_core.reset(hand, config)
    with pytest.raises(ValueError, match="measurement_noise: an instance without its key"):
        equation_core.reset(hand, EquationConfig("simple", 3, 0, measurement_noise=0.1))


def test_the_grammar_in_words_lists_no_template():
    words = EquationToolSession(0, complexity="complex", n_variables=3, grammar_shown="words")
    prompt = words.system_prompt()
    assert GRAMMAR_WORDS in prompt and GRAMMAR not in prompt and words.describe()["grammar"] == GRAMMAR_WORDS
    for template in ("c1", "M1", "M2", "M3", "f(", "*"):
        assert template not in GRAMMAR_WORDS, template
    assert "sine" in GRAMMAR_WORDS and "1 to 9" in GRAMMAR_WORDS
    listed = EquationToolSession(0, complexity="complex", n_variables=3)
    assert GRAMMAR in listed.system_prompt() and listed.variables == words.variables  # the same instance
    keys = words.key_settings()
    assert (keys["grammar_shown"], keys["measurement_noise"]) == ("words", 0.0)


def test_the_equation_settings_are_session_keys_and_an_older_line_reads_as_off(tmp_path):
    from luca_gym import worlds
    from luca_gym.harness.results import read_results

    world = worlds.get("equation")
    assert {"measurement_noise", "grammar_shown"} <= set(world.session_keys)
    assert dict(world.key_defaults) == {"proposals": "final", "measurement_noise": 0.0, "grammar_shown": "listed"}
    old = {"world": "equation", "world_version": "2", "agent": "random", "complexity": "simple", "n_variables": 3,
           "n_distractors": 0, "proposals": "every", "seed": 0, "budget": 10, "scores": {"success": 0.0, "iterations": 5}}
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (line,) = read_results(str(path)).records
    assert (line["measurement_noise"], line["grammar_shown"]) == (0.0, "listed")


# -- the generic API check under the new settings ----------------------------------------------
@pytest.mark.parametrize("world, settings_", [
    ("dag", {"n_nodes": 4, "n_states": 3, "observation_noise": 0.1, "n_latent": 2, "redraw_may_repeat": True}),
    ("relational", {"n_houses": 4, "observation_noise": 0.1, "n_latent": 2}),
    ("equation", {"complexity": "complex", "n_variables": 3, "n_distractors": 2, "measurement_noise": 0.05,
                  "grammar_shown": "words"}),
])
def test_check_world_passes_under_the_new_settings(world, settings_):
    """Replay included: a session's misreadings and measurement noise are a
    pure function of its seed and calls. (The return equals the headline
    here: a cost is the one setting that parts them.)"""
    from luca_gym.testing import check_world

    ran = check_world(world, settings=settings_, gym_ids=False, mcp=False)
    assert {"return-equals-headline", "refusals", "schemas", "replay", "sealed", "no-retrace"} <= set(ran)
