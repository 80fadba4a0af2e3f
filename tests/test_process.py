"""The process analyses (:mod:`luca_gym.results.process`): reasoning-keyword rates,
tokens per round and the graph worlds' proposal accuracy by cycle, each
checked number by number on hand-built records; the report's sections only
where sessions keep a transcript; the evidence audit's section appended; and, through
the mock provider on dag (3 nodes: an empty matrix, then the true one), the
cycle table of real records."""

from __future__ import annotations


import pytest

from luca_gym import harness as ev
from luca_gym.results import process, report
from luca_gym.worlds.graphs import process as graph_process

E = [[0, 0, 0], [0, 0, 0], [0, 0, 0]]
T = [[0, 1, 0], [0, 0, 1], [0, 0, 0]]  # the truth of the hand-built dag sessions
P2 = [[0, 1, 0], [0, 0, 0], [1, 0, 0]]


def assistant(content=None, reasoning=None, usage=None, **more) -> dict:
    m = {"role": "assistant", "content": content, "tool_calls": [], **more}
    if reasoning is not None:
        m["reasoning"] = reasoning
    if usage is not None:
        m["usage"] = usage
    return m


def talk_record(agent="a", world="dag") -> dict:
    """Words: 8 + 6 + 1 = 15; relationship 3 (edge, causes, parent), uncertainty 2
    (maybe, perhaps), evidence 3 (data, observe, result); rounds 2 (the harness's not one)."""
    return {"world": world, "agent": agent, "seed": 0, "calls": [], "messages": [
        {"role": "system", "content": "the edge causes data maybe"},  # not the agent's words
        {"role": "user", "content": "perhaps observe"},
        assistant("The edge from 0 causes changes; maybe data.", "I observe the result. Perhaps parent.",
                  {"input_tokens": 100, "output_tokens": 10}),
        {"role": "tool", "tool_call_id": "c0", "name": "intervene", "content": "{\"result\": \"data data\"}"},
        assistant("Submitting.", usage={"input_tokens": 200, "output_tokens": 30}),
        assistant(None, harness="no_tool_call"),
    ]}


def intervene(adjacency, correct=None, error=None) -> dict:
    result = {"error": error} if error else {"adjacency_correct": correct, "budget_remaining": 3}
    return {"call": "intervene", "arguments": {"molecule": 0, "adjacency": adjacency}, "result": result, "budget_remaining": 3}


def graph_record(agent, calls, seed=0, world="dag") -> dict:
    return {"world": world, "agent": agent, "seed": seed, "calls": calls,
            "messages": [{"role": "system", "content": "rules"}, assistant("ok")]}


def cycle_records() -> list:
    solved = graph_record("a", [intervene(E, False), intervene(P2, False), intervene(T, error="refused"), intervene(T, True)])
    unsolved = graph_record("a", [intervene(E, False), {"call": "submit_graph", "arguments": {"adjacency": E},
                                                        "result": {"ended": True, "scores": {"success": 0.0}}}], seed=1)
    scripted = {**graph_record("a", [intervene(T, True)], seed=2), "messages": None}  # no transcript: left out
    other_world = graph_record("a", [intervene(T, True)], seed=3, world="luca")  # not a graph world: left out
    return [solved, unsolved, scripted, other_world]


# -- reasoning keywords ---------------------------------------------------------------------------
def test_keyword_counts_count_words_beginning_with_a_term():
    counts = process.keyword_counts("Causes, caused; the CAUSAL edges depended on an unlikely observation of data-sets.")
    assert counts == {"words": 13, "relationship": 5, "uncertainty": 0, "evidence": 2}  # causes caused causal edges depended; observation data


def test_keyword_rates_are_per_thousand_words_of_the_agents_text_and_reasoning():
    (row,) = process.keyword_rates([talk_record()])
    assert (row["world"], row["agent"], row["sessions"], row["words"]) == ("dag", "a", 1, 15)
    assert (row["relationship_count"], row["uncertainty_count"], row["evidence_count"]) == (3, 2, 3)
    assert row["relationship"] == pytest.approx(1000 * 3 / 15) == pytest.approx(200.0)
    assert row["uncertainty"] == pytest.approx(1000 * 2 / 15)
    assert row["evidence"] == pytest.approx(200.0)
    table = process.keyword_table([talk_record()])
    assert "| dag | a | 1 | 15 | 200.0 (3) | 133.3 (2) | 200.0 (3) |" in table


def test_two_sessions_pool_their_words():
    quiet = talk_record()
    quiet["messages"] = [assistant("nothing here at all")]  # 4 words, no term
    (row,) = process.keyword_rates([talk_record(), quiet])
    assert (row["sessions"], row["words"], row["relationship_count"]) == (2, 19, 3)
    assert row["relationship"] == pytest.approx(1000 * 3 / 19)


# -- tokens per round ---------------------------------------------------------------------------------
def test_tokens_per_round_average_the_rounds_that_reported_them():
    no_usage = talk_record()
    no_usage["messages"] = [assistant("a turn whose provider said no tokens")]
    (row,) = process.token_rounds([talk_record(), no_usage])
    assert (row["sessions"], row["rounds"], row["rounds_per_session"]) == (2, 3, 1.5)
    assert (row["input_tokens"], row["output_tokens"], row["input_tokens_rounds"]) == (150.0, 20.0, 2)
    assert "| dag | a | 2 | 3 | 1.50 | 150.0 | 20.0 |" in process.token_table([talk_record(), no_usage])


def test_agents_and_worlds_are_kept_apart():
    rows = process.token_rounds([talk_record("a"), talk_record("b"), talk_record("a", "relational")])
    assert [(r["world"], r["agent"], r["sessions"]) for r in rows] == [("dag", "a", 1), ("dag", "b", 1), ("relational", "a", 1)]


# -- proposal accuracy by cycle ---------------------------------------------------------------------
def test_edge_accuracy_is_the_share_of_off_diagonal_entries_right():
    assert graph_process.edge_accuracy(T, T) == 1.0
    assert graph_process.edge_accuracy(E, T) == pytest.approx(4 / 6)
    assert graph_process.edge_accuracy(P2, T) == pytest.approx(4 / 6)
    assert graph_process.edge_accuracy([[0, 1]], T) is None and graph_process.edge_accuracy(T, None) is None


def test_proposals_are_the_accepted_ones_in_order_with_the_submission():
    solved, unsolved, *_ = cycle_records()
    assert [(p["cycle"], p["correct"]) for p in graph_process.proposals(solved)] == [(1, False), (2, False), (3, True)]
    assert [(p["cycle"], p["call"], p["correct"]) for p in graph_process.proposals(unsolved)] == [
        (1, "intervene", False), (2, "submit_graph", False)]
    as_text = graph_record("a", [{**intervene(T, True), "arguments": '{"molecule": 0, "adjacency": [[0, 1, 0], [0, 0, 1], [0, 0, 0]]}'}])
    assert graph_process.proposals(as_text)[0]["adjacency"] == T


def test_proposal_cycles_aggregate_each_cycle_over_the_sessions():
    rows = graph_process.proposal_cycles(cycle_records())
    got = [(r["cycle"], r["proposals"], r["correct"], r["known"]) for r in rows]
    assert got == [(1, 2, 0, 1), (2, 2, 0, 1), (3, 1, 1, 1)]  # the unsolved session's truth is unknown
    assert [r["share_correct"] for r in rows] == [0.0, 0.0, 1.0]
    assert [r["edge_accuracy"] for r in rows] == pytest.approx([4 / 6, 4 / 6, 1.0])
    # E was right at [2, 0] and P2 is not there: one entry lost at cycle 2; T loses none of P2's
    assert [r["entries_lost"] for r in rows] == [None, 1.0, 0.0]
    table = graph_process.cycle_table(cycle_records())
    assert "| dag | a | 2 | 2 | 0 (0%) | 1 | 0.667 | 1.00 |" in table
    assert "| dag | a | 3 | 1 | 1 (100%) | 1 | 1.000 | 0.00 |" in table
    short = graph_process.cycle_table(cycle_records(), max_cycles=2)
    assert "| dag | a | 3 |" not in short and short.endswith("1 row of cycles beyond 2 left out.")


def test_no_graph_proposal_no_cycle_table():
    assert graph_process.cycle_table([talk_record(world="luca")]) is None
    assert graph_process.proposal_cycles([]) == []


# -- the report's sections ----------------------------------------------------------------------------
def test_sections_only_for_sessions_with_a_transcript():
    assert process.sections([{**talk_record(), "messages": None}]) == []
    text = "\n\n".join(process.sections([talk_record(world="luca")]))
    assert "## Process (language-model sessions)" in text and "### Tokens per round" in text
    assert "Proposal accuracy by cycle" not in text
    assert "### Proposal accuracy by cycle (graph worlds)" in "\n\n".join(process.sections(cycle_records()))


def test_a_transcript_of_bare_tool_calls_is_no_models_session():
    """A scripted agent driven through the tool loop (the biobank's) keeps calls without words or tokens."""
    bare = {"world": "biobank", "agent": "cis-mr", "seed": 0, "messages": [
        {"role": "system", "content": "You are..."}, {"role": "user", "content": "Begin."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "name": "submit", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{}"}]}
    assert process.with_transcripts([bare]) == [] and process.sections([bare]) == []
    spoken = {**bare, "messages": [*bare["messages"][:2], {**bare["messages"][2], "usage": {"input_tokens": 50, "output_tokens": 3}},
                                   bare["messages"][3]]}
    assert process.with_transcripts([spoken]) == [spoken]
    misplaced = {**bare, "messages": [*bare["messages"][:2], {**bare["messages"][2], "output_tokens": 3}, bare["messages"][3]]}
    assert process.with_transcripts([misplaced]) == []  # tokens count where the harness keeps them, under usage


def test_a_model_that_only_calls_tools_gets_the_process_sections(tmp_path):
    """The mock provider's turns carry tool calls and token usage, no text: the
    report still finds a model's sessions (their tokens per round) in them."""
    from luca_gym.llm.mock import MockClient, scripted_strategy
    from luca_gym.llm.providers import OpenAIChatAgent

    specs = ev.plan_world("luca", ["openai:tool-only"], [0], tier="easy", mode="healthy", n_genes=20)
    ev.sweep(specs, str(tmp_path), lambda name: OpenAIChatAgent("tool-only", client=MockClient(scripted_strategy)))
    (record,) = ev.load_sessions(str(tmp_path))
    turns = [m for m in record["messages"] if m["role"] == "assistant"]
    assert turns and all(m["content"] is None and m["tool_calls"] for m in turns)  # no words at all
    assert process.with_transcripts([record]) == [record]
    (row,) = process.token_rounds([record])
    assert row["rounds"] == len(turns) and row["input_tokens"] > 0 and row["output_tokens"] > 0
    text = "\n\n".join(process.sections([record]))
    assert "### Tokens per round" in text and "| openai:tool-only | 1 |" in text


def test_a_scripted_run_reports_as_before(tmp_path):
    ev.sweep(ev.plan_world("dag", ["random"], [0], n_nodes=3), str(tmp_path), lambda name: ev.make_runner(name, world="dag"))
    text = report.write_report(str(tmp_path))
    assert "Process" not in text.replace("## Process (protocol", "") and "Reasoning keywords" not in text


@pytest.fixture
def dag_results(tmp_path):
    from test_report_html import AGENT, DAG_SEEDS, dag_strategy, sweep_mock, truth

    for seed in DAG_SEEDS:
        sweep_mock(tmp_path, "dag", [seed], dag_strategy(seed), n_nodes=3)
    return tmp_path, AGENT, [truth(s) for s in DAG_SEEDS]


def test_the_mock_providers_dag_sessions_give_the_cycle_table(dag_results):
    folder, agent, truths = dag_results
    records = ev.load_sessions(str(folder))
    rows = graph_process.proposal_cycles(records)
    empty_right = sum(t == E for t in truths)  # an instance without edges is solved at cycle 1
    first = rows[0]
    assert (first["agent"], first["cycle"], first["proposals"], first["correct"]) == (agent, 1, 2, empty_right)
    assert first["known"] == 2  # both sessions solved: their truth is in the record
    assert first["edge_accuracy"] == pytest.approx(sum(graph_process.edge_accuracy(E, t) for t in truths) / 2)
    if empty_right < 2:
        second = rows[1]
        assert (second["cycle"], second["proposals"], second["correct"], second["edge_accuracy"]) == (2, 2 - empty_right, 2 - empty_right, 1.0)
    (words,) = process.keyword_rates(records)
    assert words["words"] > 0 and words["relationship_count"] > 0
    text = report.write_report(str(folder))
    assert "### Proposal accuracy by cycle (graph worlds)" in text and "### Reasoning keywords" in text


# -- the evidence audit's section ---------------------------------------------------------------------
def test_the_audit_section_is_the_audits(monkeypatch):
    monkeypatch.setattr(report.audit, "section", lambda records: f"## Evidence audit\n\n{len(records)} records")
    assert report._audit_section([1, 2]) == "## Evidence audit\n\n2 records"
