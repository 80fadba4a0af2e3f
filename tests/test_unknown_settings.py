"""An unknown setting is refused at once, with one line naming it: by every
front end of the command (``eval``, ``train``, ``mcp``: exit code 2, no
traceback, no file made) and by a tool call (an unknown argument field is
named beside a missing one; the call costs nothing and changes nothing)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading

import pytest

from luca_gym import worlds
from luca_gym.cli import main
from luca_gym.protocol import load
from luca_gym.tools.schema import validate

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [
    ["mcp", "--world", "dag", "--set", "bogus=1"],
    ["mcp", "--set", "bogus=1"],
    ["eval", "--world", "dag", "--set", "bogus=1", "--seeds", "0"],
    ["eval", "--set", "bogus=1", "--seeds", "0"],
    ["train", "--world", "dag", "--set", "bogus=1", "--steps", "8"],
    ["train", "--world", "equation", "--set", "bogus=1", "--steps", "8"],
    ["train", "--set", "bogus=1", "--steps", "8"],
])
def test_every_front_end_names_an_unknown_setting_in_one_line(tmp_path, capsys, argv):
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "bogus unknown" in err and "allowed" in err and "Traceback" not in err
    assert not out.exists()


def test_mcp_with_an_unknown_setting_prints_no_traceback_from_the_console_script():
    proc = subprocess.run([sys.executable, "-m", "luca_gym.cli", "mcp", "--world", "dag", "--set", "bogus=1"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=str(ROOT))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "luca-gym mcp: error: settings: bogus unknown for world 'dag'; allowed n_nodes, n_states, edge_density, "
        "redraw_may_repeat, proposals, observation_noise, n_latent, intervention_cost"]


# -- tool calls ---------------------------------------------------------------------------
SCHEMA = {"type": "object", "properties": {"node": {"type": "integer"}, "note": {"type": "string"}},
          "required": ["node"], "additionalProperties": False}


def test_the_validator_names_an_unknown_field_beside_a_missing_one():
    assert validate({"bogus": 1}, SCHEMA) == ("arguments: unknown field 'bogus' and missing required field 'node'; "
                                              "allowed 'node', 'note'")
    assert "unknown fields 'a', 'b'" in validate({"a": 1, "b": 2}, SCHEMA)
    assert validate({}, SCHEMA) == "arguments: missing required field 'node'"  # as before
    assert validate({"node": 1, "bogus": 1}, SCHEMA) == "arguments: unknown field 'bogus'; allowed 'node', 'note'"
    open_schema = {**SCHEMA, "additionalProperties": True}
    assert validate({"bogus": 1}, open_schema) == "arguments: missing required field 'node'"  # extra fields allowed there
    assert validate({"node": 3, "note": "x"}, SCHEMA) is None


@pytest.mark.parametrize("world, tool", [("dag", "intervene"), ("relational", "attack"), ("equation", "query"),
                                         ("tracking", "submit_changes")])
def test_a_tool_call_with_an_unknown_field_names_it_and_costs_nothing(world, tool):
    session = load(worlds.get(world).tools)(0)
    before = session.status()
    turns, transcript = session.turns, len(session.transcript)
    answer = session.call(tool, {"bogus": 1})
    assert "unknown field 'bogus'" in answer["error"] and "missing required field" in answer["error"]
    assert session.status() == before and session.turns == turns and not session.ended
    assert len(session.transcript) == transcript + 1  # logged, as every refused call is


def test_an_unknown_field_over_mcp_is_named():
    """``intervene {"bogus": 1}`` through ``luca-gym mcp`` (JSON-RPC on
    stdio, one request at a time): an ``isError`` result naming the field;
    the budget is unchanged."""
    env = {**os.environ, "LUCA_GYM_CACHE_DIR": "off"}
    server = subprocess.Popen([sys.executable, "-m", "luca_gym.cli", "mcp", "--world", "dag", "--set", "n_nodes=4"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              cwd=str(ROOT), env=env)
    watchdog = threading.Timer(240, server.kill)  # a server that stops answering fails the test, not the run
    watchdog.start()

    def ask(**fields) -> dict | None:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", **fields}) + "\n")
        server.stdin.flush()
        while "id" in fields:
            reply = json.loads(server.stdout.readline())
            if reply.get("id") == fields["id"]:
                return reply["result"]
        return None

    try:
        ask(id=0, method="initialize", params={"protocolVersion": "2025-06-18", "capabilities": {},
                                               "clientInfo": {"name": "test", "version": "0"}})
        ask(method="notifications/initialized")
        first = ask(id=1, method="tools/call", params={"name": "get_observations", "arguments": {}})
        refused = ask(id=2, method="tools/call", params={"name": "intervene", "arguments": {"bogus": 1}})
        last = ask(id=3, method="tools/call", params={"name": "get_observations", "arguments": {}})
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        watchdog.cancel()
    assert refused["isError"] is True
    error = refused["structuredContent"]["error"]
    assert "unknown field 'bogus'" in error and "missing required field 'molecule'" in error
    budget = first["structuredContent"]["budget_remaining"]
    assert refused["structuredContent"]["budget_remaining"] == last["structuredContent"]["budget_remaining"] == budget
