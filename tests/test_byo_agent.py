"""A user's own tool agent: ``luca-gym eval --agents module:attribute``, where the
attribute is a factory called with no arguments that returns an agent of
:mod:`luca_gym.llm.loop`'s interface; a bad spec gets one clear line and
writes nothing."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from luca_gym import harness
from luca_gym.cli import main

AGENT_MODULE = textwrap.dedent('''
    from luca_gym.llm.loop import AgentTurn, ToolCall

    EMPTY = [[0] * 3 for _ in range(3)]

    class Prober:
        """Intervene on molecule 0 once (proposing the empty matrix, as the paper's loop asks), then submit it."""

        def __call__(self, messages, tool_specs):
            n = sum(m["role"] == "tool" for m in messages)
            if n == 0:
                return AgentTurn(content="probing molecule 0",
                                 tool_calls=[ToolCall("intervene", {"molecule": 0, "adjacency": EMPTY}, "c0")])
            return AgentTurn(content="done", tool_calls=[ToolCall("submit_graph", {"adjacency": EMPTY}, f"c{n}")])

    def make_agent():
        return Prober()

    NOT_CALLABLE = 3

    def makes_nothing():
        return None
''')


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    (tmp_path / "byo_agents_for_tests.py").write_text(AGENT_MODULE)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def test_a_users_agent_runs_a_sweep(user_folder, capsys):
    out = str(user_folder / "results")
    assert main(["eval", "--world", "dag", "--agents", "byo_agents_for_tests:make_agent", "--n-nodes", "3", "--n-states", "3",
                 "--seeds", "0-2", "--out", out, "--quiet"]) == 0
    lines = [json.loads(line) for line in open(os.path.join(out, "sessions.jsonl"))]
    assert [r["agent"] for r in lines] == ["byo_agents_for_tests:make_agent"] * 3
    for r in lines:  # one intervention accepted (unless the empty matrix was already right), then the submission
        assert r["calls"][0]["call"] == "intervene" and "error" not in r["calls"][0]["result"]
        assert len(r["calls"]) <= 2 and r["end_reason"] == "end"
    assert harness.is_module_agent("byo_agents_for_tests:make_agent") and not harness.is_module_agent("openai:gpt-4o")
    # its whole transcript, kept in the line, printed in the terminal
    capsys.readouterr()
    assert main(["show", out, "--agent", "byo_agents_for_tests:make_agent", "--seed", "1", "--transcript"]) == 0
    text = capsys.readouterr().out
    assert "[0] system" in text and "probing molecule 0" in text and "-> intervene(" in text and "tool intervene" in text


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_anywhere:make_agent", "module 'no_such_module_anywhere' does not import"),
    ("byo_agents_for_tests:missing", "has no attribute 'missing'"),
    ("byo_agents_for_tests:NOT_CALLABLE", "'NOT_CALLABLE' is not callable"),
    ("byo agents:make", "is not module.path:attribute"),
])
def test_a_bad_spec_gets_one_line_and_writes_nothing(user_folder, capsys, spec, message):
    out = user_folder / "results"
    assert main(["eval", "--world", "dag", "--agents", spec, "--seeds", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_a_factory_that_returns_no_agent_is_refused(user_folder):
    with pytest.raises(ValueError, match="returned NoneType, not an agent"):
        harness.make_runner("byo_agents_for_tests:makes_nothing", world="dag")
