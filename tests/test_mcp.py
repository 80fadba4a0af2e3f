"""``luca-gym mcp``: the MCP server, started as a subprocess and driven over
stdio by the official SDK's own client (``mcp.ClientSession``), and with raw
lines on its stdin (malformed messages); the call limit in-process through the
SDK's in-memory client. No network. Every wait is bounded: a hung server fails
its test instead of hanging the run.

Two server starts in all (each compiles JAX): one per module fixture."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import anyio
import jsonschema
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from luca_gym import cli
from luca_gym import harness as ev
from luca_gym.results.report import write_report
from luca_gym.worlds.luca.spec import MALFUNCTION_TYPES
from luca_gym.mcp import server as mcp_server
from luca_gym.worlds.luca.tools import ANNOTATIONS, TOOL_NAMES, ToolSession
from luca_gym.worlds.luca.results_schema import output_schema

ROOT = pathlib.Path(__file__).resolve().parents[1]
SERVER_ARGS = ["-m", "luca_gym.cli", "mcp", "--seed", "0", "--tier", "easy", "--mode", "disease"]
ENV = {"JAX_PLATFORMS": "cpu", **{k: os.environ[k] for k in ("JAX_COMPILATION_CACHE_DIR", "PATH") if k in os.environ}}
EXPERIMENT = {"interventions": {"G001": {"type": "BLOCK"}}}


def _text(result) -> dict:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


def _check_result(result, schema: dict) -> dict:
    """A tool result as a client without structured support reads it, after
    checking it equals the structured content and that conforms to ``schema``."""
    data = _text(result)
    assert result.structured_content == data
    jsonschema.Draft202012Validator(schema).validate(result.structured_content)
    return data


async def _drive(errlog, out) -> dict:
    params = StdioServerParameters(
        command=sys.executable, args=[*SERVER_ARGS, "--out", str(out)], env=ENV, cwd=str(ROOT)
    )
    got: dict = {}
    with anyio.fail_after(240):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            got["init"] = await client.initialize()
            got["tools"] = (await client.list_tools()).tools
            got["experiment"] = await client.call_tool("run_experiment", EXPERIMENT)
            got["unknown_gene"] = await client.call_tool("run_experiment", {"interventions": {"G999": {"type": "BLOCK"}}})
            got["unknown_tool"] = await client.call_tool("run_experiments", {})
            got["wrong_phase"] = await client.call_tool("test_rescue", EXPERIMENT)
            got["bad_value"] = await client.call_tool("submit_prediction", {"predictions": {"x": 2}})
            got["info"] = await client.call_tool("get_organism_info", {})
            got["info_no_args"] = await client.call_tool("get_organism_info")
            got["task"] = await client.call_tool("get_next_prediction_task", {})
            got["hypothesis"] = await client.call_tool("submit_hypothesis", {"text": "G001 raises the first phenotype"})
            got["end"] = await client.call_tool("end", {})
            got["after_end"] = await client.call_tool("run_experiment", EXPERIMENT)
    return got


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("mcp-out")


def _run_logged(tmp_path_factory, name: str, drive, *args) -> dict:
    """Run ``drive(*args with the server's stderr log)``; on failure print the log's tail."""
    log = tmp_path_factory.mktemp(name) / "server-stderr.txt"
    with open(log, "w", encoding="utf-8") as errlog:
        try:
            got = anyio.run(drive, *(errlog if a is _ERRLOG else a for a in args))
        except BaseException:
            errlog.flush()
            print(log.read_text(encoding="utf-8")[-4000:], file=sys.stderr)
            raise
    got["stderr"] = log.read_text(encoding="utf-8")
    return got


_ERRLOG = object()  # where _run_logged puts the log file among a driver's arguments


@pytest.fixture(scope="module")
def served(tmp_path_factory, out_dir):
    return _run_logged(tmp_path_factory, "mcp", _drive, _ERRLOG, out_dir)


@pytest.fixture(scope="module")
def local():
    """The same session in this process, to compare against."""
    return ToolSession(seed=0, tier="easy", mode="disease")


@pytest.fixture(scope="module")
def schemas(served):
    return {t.name: t.output_schema for t in served["tools"]}


def test_initialize_sends_the_rules_and_lists_the_nine_tools(served, local):
    assert served["init"].server_info.name == "luca-gym"
    assert served["init"].capabilities.tools is not None
    assert served["init"].instructions == local.system_prompt()
    assert str(local.call_limit) in served["init"].instructions
    tools = served["tools"]
    assert [t.name for t in tools] == list(TOOL_NAMES)
    expected = {t["name"]: t for t in local.tools_mcp()}
    for t in tools:
        assert t.input_schema == expected[t.name]["inputSchema"], t.name
        assert t.description == expected[t.name]["description"]
        dumped = t.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert dumped["inputSchema"] == expected[t.name]["inputSchema"]
        assert dumped["outputSchema"] == output_schema(local, t.name)
        jsonschema.Draft202012Validator.check_schema(t.output_schema)


def test_every_tool_has_annotations_and_they_reach_the_client(served):
    assert set(ANNOTATIONS) == set(TOOL_NAMES)
    for t in served["tools"]:
        dumped = t.model_dump(by_alias=True, exclude_none=True, mode="json")["annotations"]
        assert dumped == {**ANNOTATIONS[t.name], "openWorldHint": False}, t.name
        assert dumped["title"]
    by_name = {t.name: t.annotations for t in served["tools"]}
    assert by_name["get_organism_info"].read_only_hint is True
    # The one-way calls are flagged for clients that ask before them; a measurement only adds.
    assert by_name["submit_malfunction_hypothesis"].destructive_hint is True
    assert by_name["end"].destructive_hint is True
    assert by_name["run_experiment"].destructive_hint is False and by_name["run_experiment"].idempotent_hint is False
    # A reveal moves the session on: not read-only.
    assert by_name["get_next_prediction_task"].read_only_hint is False


def test_an_experiment_over_mcp_returns_the_local_result(served, local, schemas):
    result = served["experiment"]
    assert result.is_error is False
    data = _check_result(result, schemas["run_experiment"])
    assert list(data["phenotypes"]) == list(local.meta.phenotype_names)
    assert data["budget_remaining"] == 30
    assert data["status"] in ("converged", "max_steps_reached") and isinstance(data["steps"], int)
    same = local.call("run_experiment", EXPERIMENT)
    assert data == same  # the server is the same session, bit for bit


@pytest.mark.parametrize(
    "call,tool,words",
    [
        ("unknown_gene", "run_experiment", ["G999", "unknown field"]),
        ("unknown_tool", None, ["unknown tool", "run_experiment"]),
        ("wrong_phase", "test_rescue", ["test_rescue", "diagnosis"]),
        ("bad_value", "submit_prediction", ["arguments.predictions", "missing required field"]),
    ],
)
def test_malformed_calls_over_mcp_are_errors_and_free(served, schemas, call, tool, words):
    result = served[call]
    assert result.is_error is True
    data = _text(result)
    assert result.structured_content == data
    if tool is not None:  # even an error conforms to its tool's output schema
        _check_result(result, schemas[tool])
    assert set(data) == {"error", "budget_remaining"}
    for word in words:
        assert word in data["error"], (word, data["error"])
    assert data["budget_remaining"] == 30


def test_a_free_call_over_mcp(served, schemas):
    for call in ("info", "info_no_args"):
        result = served[call]
        assert result.is_error is False
        info = _check_result(result, schemas["get_organism_info"])
        assert info["organism_id"] == "org_00000000"
        assert info["budget_remaining"] == 30 and info["budget_total"] == 31
        assert info["aberrant_phenotypes"] and set(info["aberrant_phenotypes"]) <= set(info["observable_phenotypes"])
    task = _check_result(served["task"], schemas["get_next_prediction_task"])
    assert len(task["interventions"]) == 2
    assert _check_result(served["hypothesis"], schemas["submit_hypothesis"]) == {"stored": True, "budget_remaining": 30}


def test_end_over_mcp_reveals_named_rounded_scores(served, schemas, local):
    result = served["end"]
    assert result.is_error is False
    data = _check_result(result, schemas["end"])
    assert data["ended"] is True and data["end_reason"] == "end" and data["budget_remaining"] == 30
    scores = data["scores"]
    assert scores["n_experiments"] == 1 and 0.0 <= scores["composite"] <= 1.0
    # Names, not indices; 4 decimals, no float32 noise.
    assert scores["malfunction_type"] in MALFUNCTION_TYPES[1:]
    assert isinstance(scores["malfunction_target"], str)
    assert scores["malfunction_target"] in local.meta.gene_names + local.meta.signal_labels
    figures = [v for v in scores.values() if isinstance(v, float)] + scores["task_scores"]
    assert figures and all(round(v, 4) == v for v in figures)
    after = served["after_end"]
    assert after.is_error is True
    assert "ended" in _check_result(after, schemas["run_experiment"])["error"]


def test_the_ended_session_is_recorded_for_report(served, out_dir):
    records = ev.load_sessions(str(out_dir))
    assert len(records) == 1
    record = records[0]
    assert record["agent"] == "mcp-client" and record["end_reason"] == "end"
    assert (record["seed"], record["tier"], record["mode"]) == (0, "easy", "disease")
    assert record["hypotheses"] == ["G001 raises the first phenotype"]
    replay = ToolSession(seed=0, tier="easy", mode="disease")
    for call in record["calls"]:  # the same calls, the same scores
        replay.call(call["call"], call["arguments"])
    assert replay.ended and record["scores"] == json.loads(json.dumps(replay.scores))
    assert record["scores"]["malfunction_type"] in range(len(MALFUNCTION_TYPES))  # the harness keeps raw codes
    assert [c["call"] for c in record["calls"]][-1] == "end"  # recorded as it ended: the refused call after is not
    assert f"recorded in {out_dir / ev.SESSIONS_FILE}" in served["stderr"]
    assert "# LUCA results" in write_report(str(out_dir))


# -- raw lines: every malformed message is answered ---------------------------------------
def _msg(**fields) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


PING = {"method": "ping"}
LONG = "x" * (mcp_server.MAX_MESSAGE_BYTES + 1000)
# (case, line, the replies expected: (id, error code, or None for a result)); ids are unique.
RAW_CASES = [
    ("not_json", b"this is not json", [(None, -32700)]),
    ("truncated_json", b'{"jsonrpc":"2.0","id":5,"method":"ping"', [(None, -32700)]),
    ("lone_surrogate", b'{"jsonrpc":"2.0","id":30,"method":"ping","params":{"x":"\\ud800"}}', [(30, -32700)]),
    ("invalid_utf8", b'{"jsonrpc":"2.0","id":31,"method":"ping","params":{"x":"\xff\xfe"}}', [(31, None)]),
    ("a_number", b"42", [(None, -32600)]),
    ("a_string", b'"hello"', [(None, -32600)]),
    ("null", b"null", [(None, -32600)]),
    ("no_jsonrpc", b'{"id":7,"method":"ping"}', [(7, -32600)]),
    ("wrong_version", b'{"jsonrpc":"1.0","id":8,"method":"ping"}', [(8, -32600)]),
    ("method_not_a_string", _msg(id=9, method=5), [(9, -32600)]),
    ("empty_object", b"{}", [(None, -32600)]),
    ("unknown_method", _msg(id=10, method="foo/bar"), [(10, -32601)]),
    ("call_without_params", _msg(id=11, method="tools/call"), [(11, -32602)]),
    ("params_an_array", _msg(id=12, method="tools/call", params=[1, 2]), [(12, -32602)]),
    ("call_without_name", _msg(id=13, method="tools/call", params={}), [(13, -32602)]),
    ("name_not_a_string", _msg(id=14, method="tools/call", params={"name": 5}), [(14, -32602)]),
    ("arguments_an_array", _msg(id=15, method="tools/call", params={"name": "end", "arguments": [1]}), [(15, -32602)]),
    ("arguments_a_string", _msg(id=16, method="tools/call", params={"name": "end", "arguments": "{}"}), [(16, -32602)]),
    ("batch", b"[" + _msg(id=18, **PING) + b"," + _msg(id=19, **PING) + b"," + _msg(method="notifications/x") + b"]",
     [(18, -32600), (19, -32600)]),
    ("empty_batch", b"[]", [(None, -32600)]),
    ("id_a_fraction", _msg(id=1.5, **PING), [(None, -32600)]),
    ("id_null", _msg(id=None, **PING), [(None, -32600)]),
    ("id_an_object", _msg(id={"a": 1}, **PING), [(None, -32600)]),
    ("id_a_bool", _msg(id=True, **PING), [(None, -32600)]),
    ("id_a_string", _msg(id="abc", **PING), [("abc", None)]),
    ("id_a_big_integer", _msg(id=2**100, **PING), [(2**100, None)]),
    ("too_long", _msg(id=20, method="tools/call", params={"name": "submit_hypothesis", "arguments": {"text": LONG}}),
     [(20, -32600)]),
    ("too_long_id_last", json.dumps({"params": {"text": LONG}, "method": "ping", "jsonrpc": "2.0", "id": 21}).encode(),
     [(None, -32600)]),
    ("long_within_the_limit",
     _msg(id=22, method="tools/call", params={"name": "submit_hypothesis", "arguments": {"text": "x" * 500_000}}),
     [(22, None)]),
    ("unknown_notification", _msg(method="notifications/foo"), []),
    ("notification_params_an_array", _msg(method="notifications/cancelled", params=[1]), []),
    ("response_to_no_request", _msg(id=99, result={}), []),
    ("blank_line", b"", []),
]


class _Raw:
    def __init__(self, process):
        self.process = process
        self.out = BufferedByteReceiveStream(process.stdout)
        self.pending: list[dict] = []

    async def send(self, line: bytes) -> None:
        await self.process.stdin.send(line + b"\n")

    async def receive(self) -> dict:
        return json.loads(await self.out.receive_until(b"\n", 1 << 26))

    async def exchange(self, line: bytes, sync_id: str, expected: list) -> list[dict]:
        """Send ``line`` then a ping; the messages that arrive until the ping's
        reply and the ``expected`` ids (null ones counted) have all arrived."""
        await self.send(line)
        await self.send(_msg(id=sync_id, **PING))
        want = [rid for rid, _ in expected] + [sync_id]
        got = []
        while want:
            message = await self.receive()
            if message.get("id") in want:
                want.remove(message["id"])
            if message.get("id") != sync_id:
                got.append(message)
        return got


async def _drive_raw(out, errlog) -> dict:
    got: dict = {}
    with anyio.fail_after(300):
        process = await anyio.open_process(
            [sys.executable, *SERVER_ARGS, "--out", str(out)], cwd=str(ROOT), env=ENV, stderr=errlog
        )
        async with process:
            raw = _Raw(process)
            await raw.send(_msg(id=0, method="initialize", params={
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}))
            got["init"] = await raw.receive()
            await raw.send(_msg(method="notifications/initialized"))
            for case, line, expected in RAW_CASES:
                got[case] = await raw.exchange(line, f"sync-{case}", expected)
            got["experiment"] = await raw.exchange(
                _msg(id=40, method="tools/call", params={"name": "run_experiment", "arguments": EXPERIMENT}), "sync-last",
                [(40, None)])
            await process.stdin.aclose()  # the client goes: the server ends and records the session
            got["returncode"] = await process.wait()
    return got


@pytest.fixture(scope="module")
def raw_served(tmp_path_factory):
    out = tmp_path_factory.mktemp("mcp-raw-out")
    return _run_logged(tmp_path_factory, "mcp-raw", _drive_raw, out, _ERRLOG), out


def test_raw_initialize_carries_the_instructions(raw_served, local):
    got, _ = raw_served
    assert got["init"]["id"] == 0 and got["init"]["result"]["instructions"] == local.system_prompt()


@pytest.mark.parametrize("case,line,expected", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_every_malformed_message_with_an_id_is_answered(raw_served, case, line, expected):
    got, _ = raw_served
    replies = got[case]
    assert sorted(((m.get("id"), m["error"]["code"] if "error" in m else None) for m in replies), key=repr) == sorted(
        expected, key=repr), replies
    for m in replies:
        assert m["jsonrpc"] == "2.0" and ("result" in m) != ("error" in m)
        if "error" in m:
            assert isinstance(m["error"]["message"], str) and m["error"]["message"]


def test_the_server_survives_the_malformed_lines_and_records_on_disconnect(raw_served):
    got, out = raw_served
    (reply,) = got["experiment"]
    assert reply["id"] == 40 and reply["result"]["isError"] is False
    assert reply["result"]["structuredContent"]["budget_remaining"] == 30
    assert got["returncode"] == 0
    (record,) = ev.load_sessions(str(out))
    assert record["end_reason"] == "disconnected" and record["scores"]["n_experiments"] == 1
    assert [c["call"] for c in record["calls"]][-2:] == ["run_experiment", "end"]
    assert "(disconnected) recorded in" in got["stderr"]


# -- in-process: pure parts, the call limit, the recorder -----------------------------
@pytest.mark.parametrize(
    "line,expected",
    [
        ('{"jsonrpc":"2.0","id":1,"method":"ping"}', None),
        ('{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        ('{"jsonrpc":"2.0","id":1,"result":{}}', None),
        ("   ", []),
        ("{", [(None, -32700)]),
        ('{"jsonrpc":"2.0","id":1,"method":"ping"} trailing', [(None, -32700)]),
        ('[{"jsonrpc":"2.0","method":"n"}]', [(None, -32600)]),
        ('{"jsonrpc":"2.0","id":2,"method":"ping","params":"x"}', [(2, -32602)]),
        ('{"jsonrpc":"2.0","method":"x","params":"x"}', []),
        ('{"jsonrpc":"2.0","id":3}', [(None, -32600)]),
        ('{"jsonrpc":"2.0","id":1.5,"result":{}}', [(None, -32600)]),
        ('{"method":"notifications/initialized"}', [(None, -32600)]),
        ("[" * 100_000 + "]" * 100_000, [(None, -32700)]),
    ],
)
def test_malformed_replies(line, expected):
    replies = mcp_server.malformed_replies(line)
    if expected is None:
        assert replies is None
    else:
        assert [(r["id"], r["error"]["code"]) for r in replies] == expected


@pytest.mark.parametrize(
    "prefix,found",
    [
        ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"text": "xx', 7),
        ('{"id":"a b","params":{"x', "a b"),
        ('{"method":"x","params":{"id":5,"text":"xx', None),  # a nested id is not the message's
        ('{"jsonrpc":"2.0","id":12', None),  # the prefix may cut the id short
        ('{"id":true,"method":"x",', None),
        ("[1, 2", None),
    ],
)
def test_leading_id(prefix, found):
    assert mcp_server.leading_id(prefix) == found


def test_the_call_limit_ends_and_records_the_session_in_process(tmp_path):
    from mcp import Client

    session = ToolSession(seed=1, tier="easy", mode="healthy")
    recorder = mcp_server.SessionRecorder(session, str(tmp_path), agent="mcp:test")
    recorder.check()
    server = mcp_server.build_server(session, on_call=recorder)
    schema = output_schema(session, "submit_network")

    async def drive():
        with anyio.fail_after(240):
            async with Client(server, mode="legacy") as client:
                assert client.instructions == session.system_prompt()
                results = [await client.call_tool("submit_network", {"edges": []}) for _ in range(session.call_limit)]
                results.append(await client.call_tool("submit_network", {"edges": []}))
                return results

    results = anyio.run(drive)
    *accepted, last, refused = results
    for result in results:
        _check_result(result, schema)
    assert all(not r.is_error and "ended" not in r.structured_content for r in accepted)
    assert last.structured_content["ended"] is True and last.structured_content["end_reason"] == "call_limit"
    assert last.structured_content["scores"]["malfunction_target"] is None
    assert last.structured_content["scores"]["malfunction_type"] == "NONE"
    assert refused.is_error is True
    (record,) = ev.load_sessions(str(tmp_path))
    assert record["agent"] == "mcp:test" and record["end_reason"] == "call_limit" and record["truncated"] is True
    assert record["scores"] == json.loads(json.dumps(session.scores))
    # Once there, the same session is refused before a second one is served.
    with pytest.raises(ev.ResultsError, match="already recorded"):
        mcp_server.SessionRecorder(ToolSession(seed=1, tier="easy", mode="healthy"), str(tmp_path), agent="mcp:test").check()


def test_an_untouched_session_is_not_recorded_on_disconnect(tmp_path):
    session = ToolSession(seed=2, tier="easy", mode="disease")
    mcp_server.SessionRecorder(session, str(tmp_path)).disconnected()
    assert not session.ended and not (tmp_path / ev.SESSIONS_FILE).exists()


def test_mcp_arguments(tmp_path, capsys):
    args = cli.build_parser().parse_args(["mcp", "--out", str(tmp_path), "--agent", "claude"])
    assert (args.out, args.agent) == (str(tmp_path), "claude")
    assert cli.build_parser().parse_args(["mcp"]).out is None
    assert cli.main(["mcp", "--agent", " "]) == cli.EXIT_USAGE
    assert "agent" in capsys.readouterr().err
