"""The graph discovery worlds (``dag``, ``relational``): the world API check,
the rules against a numpy reading of the hidden graph, the worlds' own
instance streams, the scores, the baselines held equal between the harness
and the batched form, the paper's loop (a proposal every cycle, the default)
and its iterations, hostile tool input, the command line and the report with
its floors."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luca_gym import harness as ev
from luca_gym.testing import check_world
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.baselines import random_policy, systematic_policy
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig
from luca_gym.worlds.graphs.flat import GraphFlat, play_batch, session_keys
from luca_gym.worlds.graphs.tools import DagToolSession, RelationalToolSession

ALL_CHECKS = ["registry", "return-equals-headline", "refusals", "schemas", "replay", "sealed", "no-retrace", "text-env",
              "mcp", "core", "flat", "flat-baselines", "flat-no-retrace", "check_env"]  # flat-baselines: systematic's flat form
DAG = DagConfig(n_nodes=6, n_states=3)
REL = RelationalConfig(n_houses=6)


def test_check_world_passes_with_one_final_matrix_and_repeats():
    assert check_world("dag", settings={"n_nodes": 3, "n_states": 3, "proposals": "final", "redraw_may_repeat": True},
                       gym_ids=False, mcp=False)[:8] == ALL_CHECKS[:8]


def _acyclic(adjacency: np.ndarray) -> bool:
    remaining = adjacency.copy()
    alive = np.ones(len(adjacency), bool)
    while alive.any():
        sources = alive & ~remaining[alive].any(axis=0)
        if not sources.any():
            return False
        alive &= ~sources
        remaining[sources] = False
    return True


def test_instances_are_pure_functions_of_seed_and_config():
    batch = core.instances(range(40), DagConfig(n_nodes=10))
    adjacency = np.asarray(batch.adjacency)
    assert all(_acyclic(a) for a in adjacency) and not adjacency[:, range(10), range(10)].any()
    assert 0.2 < adjacency.sum() / (40 * 45) < 0.4  # about edge_density over the 45 pairs an order allows
    assert len({a.tobytes() for a in adjacency}) == 40
    again = core.instance(7, DagConfig(n_nodes=10))
    assert np.array_equal(again.adjacency, adjacency[7]) and np.array_equal(again.states, batch.states[7])
    high = core.instances([5, 5 + 2**32], DagConfig(n_nodes=10))  # both halves of a 64-bit seed count
    assert not np.array_equal(high.adjacency[0], high.adjacency[1])
    rel = np.asarray(core.instances(range(20), REL).adjacency)
    assert (rel == rel.transpose(0, 2, 1)).all() and not rel[:, range(6), range(6)].any()


def test_dag_and_relational_of_one_seed_are_unrelated_graphs():
    """Each world draws from a stream of its own: the same seed's DAG, taken
    undirected, and alliances differ in degree sequence on nearly every seed
    (they were equal on 30 of 30 when the two shared a stream)."""
    dag = np.asarray(core.instances(range(30), DagConfig(n_nodes=10)).adjacency)
    rel = np.asarray(core.instances(range(30), RelationalConfig(n_houses=10)).adjacency)
    degrees = lambda a: np.sort((a | a.transpose(0, 2, 1)).sum(axis=2), axis=1)  # noqa: E731
    assert (degrees(dag) != degrees(rel)).any(axis=1).sum() >= 25


@pytest.mark.parametrize("config", [DAG, DagConfig(n_nodes=6, n_states=3, redraw_may_repeat=True), REL])
def test_an_intervention_changes_its_children_only(config):
    kept = 0
    for seed in range(6):
        state = core.reset(core.instance(seed, config), config)
        adjacency = np.asarray(state.adjacency)
        for node in range(config.n):
            before = np.asarray(state.states)
            state, reward, error = core.step(state, core.Action(core.INTERVENE, node, np.zeros((config.n,) * 2, bool)), config)
            after = np.asarray(state.states)
            assert int(error) == 0 and float(reward) == 0.0
            children = adjacency[node]
            if config.directed:
                assert (after[~children] == before[~children]).all()  # the intervened molecule keeps its state too
                if config.always_changes:
                    assert (after[children] != before[children]).all()
                kept += int((after[children] == before[children]).sum())
            else:
                hit = children | (np.arange(config.n) == node)
                assert (after == before + hit).all()
        # with changes certain, one pass shows the whole graph
        if config.always_changes:
            assert (np.asarray(state.evidence == core.EDGE) == adjacency).all()
    if config.directed and not config.always_changes:
        assert kept > 0  # a child keeps its state now and then


def test_knowledge_adds_acyclicity_and_nothing_else():
    config = DagConfig(n_nodes=8, n_states=3, redraw_may_repeat=True, edge_density=0.4)
    rng = np.random.default_rng(1)
    for seed in range(4):
        state = core.reset(core.instance(seed, config), config)
        for node in rng.integers(0, 8, 12):
            state, _, _ = core.step(state, core.Action(core.INTERVENE, int(node), np.zeros((8, 8), bool)), config)
            seen = np.asarray(state.evidence) == core.EDGE
            closure = seen.copy()
            for k in range(8):  # Warshall
                closure |= closure[:, [k]] & closure[[k], :]
            assert np.array_equal(np.asarray(state.reach), closure)  # kept incrementally, step by step
            known = np.asarray(core.knowledge(state.evidence, state.reach))
            assert np.array_equal(known == core.EDGE, seen)
            assert np.array_equal(known == core.NO_EDGE, closure.T | np.eye(8, dtype=bool))  # nothing but acyclicity
    rel = core.reset(core.instance(0, REL), REL)
    rel, _, _ = core.step(rel, core.Action(core.INTERVENE, 0, np.zeros((6, 6), bool)), REL)
    known = np.asarray(core.knowledge(rel.evidence, rel.reach))
    assert (known[0] != core.UNKNOWN).all() and (known[1:, 1:][~np.eye(5, dtype=bool)] == core.UNKNOWN).all()


def test_edge_f1_and_shd_match_a_numpy_count():
    rng = np.random.default_rng(0)
    for _ in range(30):
        truth = np.triu(rng.random((6, 6)) < 0.3, 1)
        guess = rng.random((6, 6)) < 0.3
        np.fill_diagonal(guess, False)
        tp, fp, fn = (truth & guess).sum(), (~truth & guess).sum(), (truth & ~guess).sum()
        f1 = 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)
        assert float(core.edge_f1(guess, truth, True)) == pytest.approx(f1)
        pairs = sum((truth[i, j], truth[j, i]) != (guess[i, j], guess[j, i]) for i in range(6) for j in range(i + 1, 6))
        assert int(core.shd(guess, truth)) == pairs
    reversed_edge = np.zeros((3, 3), bool)
    reversed_edge[1, 0] = True
    assert int(core.shd(reversed_edge, reversed_edge.T)) == 1  # a reversal is one error, not two


@pytest.fixture(scope="module")
def dag10_harness():
    """The harness's sessions of both baselines on dag (10, 5), seeds 0-11, under the default protocol."""
    specs = ev.plan_world("dag", ["systematic", "random"], range(12), n_nodes=[10], n_states=[5])
    records = [ev.run_session(ev.make_runner(s.agent, world="dag"), s) for s in specs]
    return {agent: [r for r in records if r["agent"] == agent] for agent in ("systematic", "random")}


def test_systematic_solves_every_instance_within_the_budget(dag10_harness):
    for record in dag10_harness["systematic"]:
        assert record["proposals"] == "every"  # the paper's loop is the default
        assert record["scores"]["success"] == 1.0 and record["return"] == 1.0
        assert 1 <= record["scores"]["iterations"] <= 10 and record["scores"]["wasted"] == 0
        assert record["scores"]["edge_f1"] == 1.0 and record["scores"]["shd"] == 0


@pytest.mark.parametrize("agent, policy", [("systematic", systematic_policy), ("random", random_policy)])
def test_the_batched_baselines_take_the_harness_sessions_calls(dag10_harness, agent, policy):
    """Each batched session draws from its seed's key as the harness's does: the
    same calls, ``random``'s draws included, so the report's computed floor is the agent's run."""
    codec = GraphFlat(DagConfig(n_nodes=10, n_states=5))
    out = jax.device_get(play_batch(policy(codec), None, session_keys(range(12)), codec, codec.instances(range(12)),
                                    2 * 10 + 1))
    for i, record in enumerate(dag10_harness[agent]):
        for key in ("success", "iterations", "interventions", "wasted", "edge_f1", "shd"):
            assert float(out[key][i]) == record["scores"][key], (i, key)
        assert float(out["return"][i]) == record["return"]


def _truth_and_wrong(session):
    truth = np.asarray(session.state.adjacency).astype(int).tolist()
    n = len(truth)
    wrong = np.zeros((n, n), int).tolist() if any(map(any, truth)) else [[0, 1] + [0] * (n - 2)] + [[0] * n] * (n - 1)
    return truth, wrong


def test_the_papers_loop_ends_on_the_first_right_matrix_and_counts_cycles():
    """The default protocol: one intervention and then the right matrix is 1
    iteration (the paper's count), whether the matrix comes with the next
    intervention or as the final submission; the right matrix before any
    intervention is 1 too."""
    session = DagToolSession(3, n_nodes=4, n_states=3)
    assert session.config.proposals == "every"
    truth, wrong = _truth_and_wrong(session)
    answer = session.call("intervene", {"molecule": 0, "adjacency": wrong})
    assert answer["adjacency_correct"] is False and "states" in answer and not session.ended
    answer = session.call("intervene", {"molecule": 1, "adjacency": truth})
    assert answer["ended"] and answer["end_reason"] == "end" and answer["scores"]["success"] == 1.0
    assert answer["scores"]["iterations"] == 1
    assert session.total_reward == 1.0 and int(session.state.interventions) == 1  # the right matrix ran no intervention
    session = DagToolSession(3, n_nodes=4, n_states=3)
    session.call("intervene", {"molecule": 0, "adjacency": wrong})
    assert session.call("submit_graph", {"adjacency": truth})["scores"]["iterations"] == 1
    session = DagToolSession(3, n_nodes=4, n_states=3)
    assert session.call("intervene", {"molecule": 0, "adjacency": truth})["scores"] == {
        "edge_f1": 1.0, "interventions": 0, "iterations": 1, "shd": 0, "success": 1.0, "wasted": 0}
    session = DagToolSession(3, n_nodes=4, n_states=3, proposals="final")  # one matrix: N interventions, then it
    for node in range(4):
        session.call("intervene", {"molecule": node})
    assert session.call("submit_graph", {"adjacency": truth})["scores"]["iterations"] == 4


def test_the_budget_ends_interventions_not_the_submission():
    session = RelationalToolSession(0, n_houses=3, proposals="final")
    for i in range(6):
        assert "error" not in session.call("attack", {"house": i % 3})
    refused = session.call("attack", {"house": 0})
    assert refused == {"error": core.ERRORS[1], "budget_remaining": 0}
    answer = session.call("submit_graph", {"adjacency": np.asarray(session.state.evidence == 1).astype(int).tolist()})
    assert answer["scores"]["success"] == 1.0 and answer["scores"]["wasted"] == 4  # after houses 0 and 1, every pair is known


@pytest.mark.parametrize("name, arguments, fragment", [
    ("submit_graph", {"adjacency": [[1, 0, 0], [0, 0, 0], [0, 0, 0]]}, "diagonal"),
    ("submit_graph", {"adjacency": [[0, 1, 0], [0, 0, 0], [0, 0, 0]]}, "symmetric"),
    ("submit_graph", {"adjacency": [[0, 1], [1, 0]]}, "fewer than 3 items"),
    ("submit_graph", {"adjacency": [[0, 2, 0], [2, 0, 0], [0, 0, 0]]}, "not allowed"),
    ("submit_graph", {"adjacency": [[False, True, False]] * 3}, "expected integer, got bool"),  # the enum's type
    ("attack", {"house": -1}, "below the minimum"),
    ("attack", {"house": "1"}, "expected integer"),
    ("attack", {"house": 1, "extra": 1}, "unknown field"),
    ("submit_graph", "x" * 10_000_000, "characters"),
])
def test_malformed_calls_are_refused_for_free(name, arguments, fragment):
    session = RelationalToolSession(2, n_houses=3, proposals="final")
    before = jax.device_get(session.state)
    answer = session.call(name, arguments)
    assert fragment in answer["error"] and set(answer) == {"error", "budget_remaining"}
    after = jax.device_get(session.state)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(after)))



def test_an_intervention_takes_a_matrix_exactly_where_the_papers_loop_asks_for_one():
    every, final = DagToolSession(0, n_nodes=3), DagToolSession(0, n_nodes=3, proposals="final")
    assert every.tool_specs()[0]["input_schema"]["required"] == ["molecule", "adjacency"]
    assert final.tool_specs()[0]["input_schema"]["required"] == ["molecule"]
    assert "required" in every.call("intervene", {"molecule": 1})["error"] and int(every.state.interventions) == 0
    assert "unknown field" in final.call("intervene", {"molecule": 1, "adjacency": [[0] * 3] * 3})["error"]
    assert final.call("intervene", {"molecule": 1})["interventions"] == [1] and int(final.state.interventions) == 1

JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 70) | st.floats(allow_nan=True) | st.text(max_size=8),
                       lambda children: st.lists(children, max_size=7) | st.dictionaries(st.text(max_size=10), children, max_size=3),
                       max_leaves=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["intervene", "submit_graph", "get_observations", "end", "attack", "__class__", ""]),
       arguments=st.dictionaries(st.sampled_from(["molecule", "adjacency", "house", "x"]), JSONISH, max_size=3) | JSONISH)
def test_hostile_calls_cost_nothing_and_reveal_nothing(name, arguments):
    # Two instances whose hidden graphs differ answer a refusal alike: it tells nothing of the graph.
    answers = []
    for seed in (0, 1):
        session = DagToolSession(seed, n_nodes=5, n_states=3)
        budget = int(session.state.budget_left)
        answer = session.call(name, arguments)
        if "error" in answer:
            assert int(session.state.budget_left) == budget and not session.ended and session.total_reward == 0.0
            answers.append(answer)
    if len(answers) == 2:
        assert answers[0] == answers[1]


def test_the_command_line_runs_the_papers_loop_and_the_report_shows_the_floors(tmp_path):
    """``luca-gym eval --world dag --agents systematic --n-nodes 10 --n-states
    5 --seeds 0-49`` and nothing else runs the paper's loop; the report names
    the protocol, puts the floors (computed, no agent run) and the paper's
    best model beside it."""
    from luca_gym.cli import main

    out = tmp_path / "dag"
    assert main(["eval", "--world", "dag", "--agents", "systematic", "--n-nodes", "10", "--n-states", "5",
                 "--seeds", "0-49", "--out", str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert len(lines) == 50 and {(r["proposals"], r["world_version"]) for r in lines} == {("every", "2")}
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "## Table 1: success rate and iterations (protocol: proposals=every, the paper's loop" in report
    mean = np.mean([r["scores"]["iterations"] for r in lines])
    assert f"| systematic | 100% / {mean:.2f} (50) |" in report
    empty = np.mean([not np.asarray(a).any() for a in core.instances(range(50), DagConfig(n_nodes=10)).adjacency])
    assert f"| *floor: empty matrix at once* | *{100 * empty:.0f}% / " in report
    assert "| *floor: random (computed)* | *" in report and "| *paper's best* | *100% / 11.00 (Grok-4)* |" in report


def test_the_report_puts_the_floors_beside_every_setting_and_the_paper_beside_its_own_protocol(tmp_path, capsys):
    """A sweep of both protocols: each table names its protocol, the floors are
    the agents' own numbers where they were run (``random``) and the share of
    empty graphs, and the paper's figures stand only beside the paper's loop."""
    from luca_gym.cli import main
    from luca_gym.worlds.graphs.report import floor_scores

    out = tmp_path / "dag"
    assert main(["eval", "--world", "dag", "--n-nodes", "3,4", "--n-states", "3", "--proposals", "every,final",
                 "--agents", "systematic,random", "--seeds", "0-5", "--out", str(out), "--quiet"]) == 0
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    every, final = report.split("(protocol: proposals=final")[0], report.split("(protocol: proposals=final")[1]
    assert "proposals=every, the paper's loop" in every and "not the paper's protocol" in final
    assert "| *paper's best* | *100% / 4.15 (GPT-4o)* | - |" in every and "paper's best" not in final
    for table in (every, final):
        random_row = next(line for line in table.splitlines() if line.startswith("| random |"))
        floor_row = next(line for line in table.splitlines() if line.startswith("| *floor: random (computed)* |"))
        assert floor_row.replace("*", "").split("|")[2:] == random_row.split("|")[2:]
    empty = floor_scores(DagConfig(n_nodes=3, n_states=3), range(6))["empty"]
    truth = core.instances(range(6), DagConfig(n_nodes=3, n_states=3)).adjacency
    assert list(empty["success"]) == [float(not np.asarray(a).any()) for a in truth]
    assert set(empty["iterations"]) == {1}
    capsys.readouterr()
    assert main(["eval", "--world", "dag", "--n-nodes", "999", "--seeds", "0", "--out", str(tmp_path / "bad")]) == 2
    assert "--n-nodes: 999 not allowed; an integer in 2..256" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--n-nodes", "5", "--seeds", "0", "--out", str(tmp_path / "luca")])  # not an option of LUCA's


def test_the_floors_compile_once_per_setting():
    from luca_gym.testing import count_traces
    from luca_gym.worlds.graphs.report import floor_scores

    config = RelationalConfig(n_houses=4)
    floor_scores(config, range(5))
    with count_traces() as traced:
        floor_scores(config, range(100, 105))
    assert not traced


def _sweeping_model(messages, tools):
    """A mock model's strategy: attack each house in turn, stating with each
    attack the alliances it has seen (the paper's loop), then submit them
    (read from the tool results in the OpenAI-format messages alone)."""
    results = []
    for m in messages:
        if m.get("role") == "tool":
            try:
                results.append(json.loads(m["content"]))
            except ValueError:
                continue
    accepted = [r for r in results if isinstance(r, dict) and "error" not in r]
    if any(r.get("ended") for r in accepted):
        return None
    attack = next(t for t in tools if t["function"]["name"] == "attack")["function"]["parameters"]["properties"]
    n = attack["house"]["maximum"] + 1
    attacks = [r for r in accepted if "house" in r]
    adjacency = np.zeros((n, n), int)
    matrix = attacks[-1]["observation_matrix"] if attacks else [[0] * n]
    for i, (before, after) in enumerate(zip(matrix, matrix[1:])):
        for j in range(n):
            if j != i and after[j] > before[j]:
                adjacency[i, j] = adjacency[j, i] = 1
    if len(attacks) < n - 1:
        return [("attack", {"house": len(attacks), **({"adjacency": adjacency.tolist()} if "adjacency" in attack else {})})]
    return [("submit_graph", {"adjacency": adjacency.tolist()})]


def test_a_language_model_plays_through_the_openai_adapter_with_failures():
    """The provider path a real model takes (OpenAIChatAgent, retries of
    rate limits and malformed answers) on the relational world: solved, with
    the observation matrix as the only memory it reads."""
    from luca_gym.llm.loop import run_agent
    from luca_gym.llm.mock import MockClient
    from luca_gym.llm.providers import OpenAIChatAgent

    client = MockClient(_sweeping_model, fail_rate=0.2, malformed_rate=0.1, seed=3)
    session = RelationalToolSession(4, n_houses=5)
    record = run_agent(OpenAIChatAgent("mock", client=client), session, backoff=0)
    assert session.ended and session.scores["success"] == 1.0 and record["return"] == 1.0 and "failed" in client.outcomes
    # it attacks and states as systematic does (houses in order, what it saw), so it stops where systematic stops
    (spec,) = ev.plan_world("relational", ["systematic"], [4], n_houses=[5])
    assert session.scores == ev.run_session(ev.make_runner("systematic", world="relational"), spec)["scores"]


# -- the flat codec refuses what lies outside its K actions -------------------------------
FLAT_CODECS = [GraphFlat(DagConfig(n_nodes=4, n_states=3)), GraphFlat(DagConfig(n_nodes=4, n_states=3, proposals="final")),
               GraphFlat(RelationalConfig(n_houses=4))]


@pytest.fixture(scope="module")
def flat_steps():
    """Per codec: the session after one intervention on node 0, and a jitted
    step of that session vmapped over actions."""
    out = []
    for codec in FLAT_CODECS:
        state, *_ = codec.step(codec.open(jax.tree_util.tree_map(lambda x: x[0], codec.instances([3])))[0], 0)
        out.append((codec, state, jax.jit(jax.vmap(codec.step, in_axes=(None, 0)))))
    return out


def _same_tree(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


@pytest.mark.parametrize("which", range(len(FLAT_CODECS)))
def test_a_flat_action_outside_the_codec_is_refused_inside_the_jit(flat_steps, which):
    codec, state, steps = flat_steps[which]
    n = codec.config.n
    vector, mask = jax.device_get(codec.encode(core.public_view(state)))
    outside = np.array([n + 1, n + 2, 2**31 - 1, -1, -n, -(2**31)], np.int32)
    new, vectors, masks, reward, terminated, truncated, error = jax.device_get(steps(state, outside))
    assert (error == 3).all() and (reward == 0).all() and not terminated.any() and not truncated.any()
    for i in range(len(outside)):
        assert _same_tree(jax.tree_util.tree_map(lambda x: x[i], new), state), outside[i]
        assert np.array_equal(vectors[i], vector) and np.array_equal(masks[i], mask)
    # The K actions themselves still do what they say: N submits, i < N intervenes (under the paper's loop
    # stating what the evidence implies, which ends the session instead where it is right).
    new, _, _, _, terminated, _, error = jax.device_get(steps(state, np.array([n, 1], np.int32)))
    right = np.array_equal(np.asarray(core.implied_hypothesis(state.evidence)), np.asarray(state.adjacency))
    solved = right and codec.config.proposals == "every"
    assert (error == 0).all() and terminated[0] and bool(new.proposed[0])
    assert int(new.interventions[1]) == (1 if solved else 2) and bool(new.ended[1]) == solved
    # An ended session refuses every action as ended, inside K or not.
    ended = jax.tree_util.tree_map(lambda x: x[0], new)
    *_, error = jax.device_get(steps(ended, np.array([0, n, n + 1, -1], np.int32)))
    assert (error == 2).all()


def test_the_functional_env_reports_an_outside_action_as_a_free_refusal():
    from luca_gym import functional as F

    codec = FLAT_CODECS[0]
    pool = F.make_pool(codec, seeds=[10_000, 10_001])
    step = jax.jit(F.step, static_argnames=("env",))
    state, vector, mask = F.reset(jax.random.PRNGKey(0), codec, pool)
    new, vector_n, mask_n, reward, done, info = jax.device_get(
        step(jax.random.PRNGKey(1), state, np.int32(codec.num_actions), codec, pool))
    assert int(info["error"]) == 3 and float(reward) == 0.0 and not done
    assert _same_tree(new.session, state.session) and int(new.length) == 1  # the refused call counted as a step only
    assert np.array_equal(vector_n, vector) and np.array_equal(mask_n, mask)


def test_the_flat_gymnasium_env_and_decode_raise_on_an_outside_action():
    from luca_gym.worlds.graphs.envs import DagFlatEnv

    env = DagFlatEnv(n_nodes=4, n_states=3)
    obs, _ = env.reset(seed=0)
    before = jax.device_get(env.state)
    for action in (5, -1, 2**40, 1.0, True, "0", [0]):
        with pytest.raises(ValueError, match=r"action: .* not allowed; an integer in 0\.\.4"):
            env.step(action)
    assert _same_tree(jax.device_get(env.state), before)
    assert env.step(4)[2]  # the submission, the codec's last action, still ends the session
    codec = env.codec
    view = jax.device_get(core.public_view(before))
    for index in (5, -1):
        with pytest.raises(ValueError, match=r"index: .* not allowed; an integer in 0\.\.4"):
            codec.decode(index, view)
    assert codec.decode(4, view)["tool"] == "submit_graph"


def test_the_session_figure_draws_what_the_agent_saw_and_never_the_hidden_graph(flat_steps, tmp_path):
    # Two sessions alike in all the agent saw and proposed, on different hidden graphs, draw the same picture.
    from luca_gym.worlds.graphs.report import figure_session

    codec, state, _ = flat_steps[0]
    n = codec.config.n
    other = core.GraphState(**{**vars(state), "adjacency": ~state.adjacency & ~np.eye(n, dtype=bool),
                               "key": state.key + np.uint32(1)})
    assert not bool(state.ended)  # an open session: not even the scores of its proposal may show
    figure_session(state, codec.config, str(tmp_path / "a.png"), agent="systematic")
    figure_session(other, codec.config, str(tmp_path / "b.png"), agent="systematic")
    a, b = (tmp_path / "a.png").read_bytes(), (tmp_path / "b.png").read_bytes()
    assert a[:8] == b"\x89PNG\r\n\x1a\n" and a == b
