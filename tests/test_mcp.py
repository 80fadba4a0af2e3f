"""``luca-gym mcp``: the MCP server, started as a subprocess and driven over
stdio by the official SDK's own client (``mcp.ClientSession``). No network."""

from __future__ import annotations

import json
import pathlib
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from luca_gym.wrappers.llm import TOOL_NAMES, ToolSession

ROOT = pathlib.Path(__file__).resolve().parents[1]
SERVER_ARGS = ["-m", "luca_gym.cli", "mcp", "--seed", "0", "--tier", "easy", "--mode", "disease"]


def _text(result) -> dict:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


async def _drive(errlog) -> dict:
    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGS, env={"JAX_PLATFORMS": "cpu"}, cwd=str(ROOT))
    out: dict = {}
    with anyio.fail_after(240):  # a hung server fails the test instead of hanging the run
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as client:
                out["init"] = await client.initialize()
                out["tools"] = (await client.list_tools()).tools
                out["experiment"] = await client.call_tool("run_experiment", {"interventions": {"G001": {"type": "BLOCK"}}})
                out["unknown_gene"] = await client.call_tool("run_experiment", {"interventions": {"G999": {"type": "BLOCK"}}})
                out["unknown_tool"] = await client.call_tool("run_experiments", {})
                out["wrong_phase"] = await client.call_tool("test_rescue", {"interventions": {"G001": {"type": "BLOCK"}}})
                out["bad_value"] = await client.call_tool("submit_prediction", {"predictions": {"x": 2}})
                out["info"] = await client.call_tool("get_organism_info", {})
                out["info_no_args"] = await client.call_tool("get_organism_info")
                out["end"] = await client.call_tool("end", {})
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    log = tmp_path_factory.mktemp("mcp") / "server-stderr.txt"
    with open(log, "w", encoding="utf-8") as errlog:
        try:
            return anyio.run(_drive, errlog)
        except BaseException:
            errlog.flush()
            print(log.read_text(encoding="utf-8")[-4000:], file=sys.stderr)
            raise


@pytest.fixture(scope="module")
def local():
    """The same session in this process, to compare against."""
    return ToolSession(seed=0, tier="easy", mode="disease")


def test_initialize_and_list_the_nine_tools(served, local):
    assert served["init"].server_info.name == "luca-gym"
    assert served["init"].capabilities.tools is not None
    tools = served["tools"]
    assert [t.name for t in tools] == list(TOOL_NAMES)
    expected = {t["name"]: t for t in local.tools_mcp()}
    for t in tools:
        assert t.input_schema == expected[t.name]["inputSchema"], t.name
        assert t.description == expected[t.name]["description"]
        dumped = t.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert dumped["inputSchema"] == expected[t.name]["inputSchema"]


def test_an_experiment_over_mcp_returns_the_local_result(served, local):
    result = served["experiment"]
    assert result.is_error is False
    data = _text(result)
    assert list(data["phenotypes"]) == list(local.meta.phenotype_names)
    assert data["budget_remaining"] == 30
    assert data["status"] in ("converged", "max_steps_reached") and isinstance(data["steps"], int)
    same = local.call("run_experiment", {"interventions": {"G001": {"type": "BLOCK"}}})
    assert data == same  # the server is the same session, bit for bit


@pytest.mark.parametrize(
    "call,words",
    [
        ("unknown_gene", ["G999", "unknown field"]),
        ("unknown_tool", ["unknown tool", "run_experiment"]),
        ("wrong_phase", ["test_rescue", "diagnosis"]),
        ("bad_value", ["arguments.predictions", "missing required field"]),
    ],
)
def test_malformed_calls_over_mcp_are_errors_and_free(served, call, words):
    result = served[call]
    assert result.is_error is True
    data = _text(result)
    for word in words:
        assert word in data["error"], (word, data["error"])
    assert data["budget_remaining"] == 30


def test_a_free_call_over_mcp(served):
    for call in ("info", "info_no_args"):
        result = served[call]
        assert result.is_error is False
        info = _text(result)
        assert info["organism_id"] == "org_00000000"
        assert info["budget_remaining"] == 30 and info["budget_total"] == 31
        assert info["aberrant_phenotypes"] and set(info["aberrant_phenotypes"]) <= set(info["observable_phenotypes"])


def test_end_over_mcp_reveals_the_scores(served):
    result = served["end"]
    assert result.is_error is False
    data = _text(result)
    assert data["ended"] is True and data["budget_remaining"] == 30
    assert data["scores"]["n_experiments"] == 1 and 0.0 <= data["scores"]["composite"] <= 1.0
