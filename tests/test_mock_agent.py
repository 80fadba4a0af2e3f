"""``--agents mock``: a scripted model behind the same provider path as a
real one (the OpenAI agent, its request and its answer, a
:class:`~luca_gym.llm.mock.MockClient` in place of the network),
with no key. Every registered world (tiny settings) plays it to an end, its
turns carrying token counts and no text; recorded, it replays the same with
no client at all; on the command line it records, replays, writes report.html
and shows transcripts offline. And the ``module:attribute`` agents: listed in
``--agents`` help, and given ``--base-url`` (never silently dropped)."""

from __future__ import annotations

import json
import sys

import pytest

from luca_gym import harness as ev
from luca_gym import worlds
from luca_gym.results import process
from luca_gym.cli import main
from luca_gym.llm.loop import run_agent
from luca_gym.llm.mock import example_arguments, mock_strategy
from luca_gym.llm.providers import make_agent
from luca_gym.llm.recording import Cassette
from luca_gym.results.transcripts import comparable

TINY = {  # the smallest settings of each built-in world (a world added later plays at its defaults)
    "luca": {"tier": "easy", "mode": "healthy", "n_genes": 20},
    "dag": {"n_nodes": 3},
    "relational": {"n_houses": 3},
    "equation": {"n_variables": 2, "n_distractors": 0},
    "tracking": {"length": 4, "n_nodes": 3},
    "biobank": {"profile": "tiny"},
}


@pytest.mark.parametrize("world", worlds.names())
def test_the_mock_model_plays_every_world_to_an_end_and_replays_it(world, tmp_path):
    from luca_gym.harness.runner import open_tool_session

    if worlds.get(world).tools is None:
        pytest.skip(f"{world} has no tool session")
    (spec,) = ev.plan_world(world, ["mock"], [0], **TINY.get(world, {}))
    path = tmp_path / "cassette.jsonl"
    recorder = Cassette(path, "record")
    session = open_tool_session(spec)
    recorded = run_agent(make_agent("mock", cassette=recorder, request={"max_tokens": 32}), session, backoff=0)
    recorder.close()
    assert session.ended and recorded["end_reason"] != "turn_limit" and recorded["scores"] is not None
    turns = [m for m in recorded["messages"] if m["role"] == "assistant" and not m.get("harness")]
    assert turns and all(m["content"] is None and m["tool_calls"] for m in turns)  # tool calls only, no words
    assert all(m["usage"]["input_tokens"] > 0 and m["usage"]["output_tokens"] > 0 for m in turns)
    assert all(m["finish_reason"] == "tool_calls" for m in turns)
    assert recorded["usage"]["provider_calls"] == len(turns) + (recorded["end_reason"] == "no_tool_call")
    assert any("error" not in (c.get("result") or {}) for c in recorded["calls"])  # the session accepted its calls
    record = {"world": world, "agent": "mock", "seed": 0, **recorded}
    assert process.with_transcripts([record]) == [record]  # the report finds a model's session in it
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == recorded["usage"]["provider_calls"] and all(e["request"]["max_tokens"] == 32 for e in lines)

    replayed = run_agent(make_agent("mock", cassette=Cassette(path, "replay"), request={"max_tokens": 32}),
                         open_tool_session(spec), backoff=0)
    assert comparable(replayed) == comparable(recorded)


def test_example_arguments_fill_a_schema():
    schema = {"type": "object", "required": ["n", "m", "rows", "kind"], "properties": {
        "n": {"type": "integer", "minimum": 2}, "m": {"type": "number"}, "optional": {"type": "string"},
        "rows": {"type": "array", "minItems": 2, "items": {"type": "array", "minItems": 1, "items": {"enum": [0, 1]}}},
        "kind": {"type": ["string", "null"]}}}
    assert example_arguments(schema) == {"n": 2, "m": 0.0, "rows": [[0], [0]], "kind": "1"}


def test_the_mock_strategy_ends_once_every_tool_was_called():
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
             for n in ("end", "submit", "look")]
    messages, order = [], []
    while (calls := mock_strategy(messages, tools)) is not None:
        order += [name for name, _ in calls]
        messages.append({"role": "assistant", "tool_calls": [{"id": str(len(order)), "function": {"name": calls[0][0]}}]})
    assert order == ["look", "submit", "end"]


def test_eval_agents_mock_records_replays_reports_and_shows_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cassette = tmp_path / "mock.jsonl"
    base = ["eval", "--world", "dag", "--agents", "mock", "--set", "n_nodes=3", "--seeds", "0-1", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "run"), "--record-responses", str(cassette)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "usage: 2 tool-calling session(s)" in out and "input and" in out
    assert main([*base, "--out", str(tmp_path / "replayed"), "--replay-responses", str(cassette)]) == 0
    read = lambda name: [comparable(json.loads(line)) for line in (tmp_path / name / ev.SESSIONS_FILE).read_text().splitlines()]  # noqa: E731
    assert read("replayed") == read("run")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Tokens per round" in html and "mock" in html
    capsys.readouterr()
    assert main(["show", str(tmp_path / "run"), "--seed", "1", "--agent", "mock", "--set", "n_nodes=3", "--transcript"]) == 0
    assert "-> submit_graph(" in capsys.readouterr().out


def test_agents_help_lists_mock_and_the_module_form(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "mock (a scripted model" in text and "module:attribute (your agent factory" in text


def test_base_url_reaches_a_module_agent_or_is_refused(tmp_path, monkeypatch, capsys):
    module = tmp_path / "my_local_agents.py"
    module.write_text(
        "from luca_gym.llm.providers import make_agent\n"
        "SEEN = []\n"
        "def with_url(base_url=None):\n"
        "    SEEN.append(base_url)\n"
        "    return make_agent('mock')\n"
        "def without_url():\n"
        "    return make_agent('mock')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["eval", "--world", "dag", "--set", "n_nodes=3", "--seeds", "0", "--quiet", "--base-url", "http://127.0.0.1:9/v1"]
    assert main([*base, "--agents", "my_local_agents:without_url", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "its factory takes no base_url argument" in err and len(err.strip().splitlines()) == 1
    assert main([*base, "--agents", "my_local_agents:with_url", "--out", str(tmp_path / "b")]) == 0, capsys.readouterr().err
    assert sys.modules["my_local_agents"].SEEN == ["http://127.0.0.1:9/v1"]
