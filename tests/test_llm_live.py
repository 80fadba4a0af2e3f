"""Opt-in: a real model behind a real OpenAI-compatible server, end to end.
Skipped unless ``LUCA_GYM_LIVE_MODEL_URL`` names the server (a loopback
address, e.g. ``http://127.0.0.1:8080/v1``); ``LUCA_GYM_LIVE_MODEL`` names
the model (default: the first the server lists at ``/models``). See
docs/guides/llm-agents.md, "A model on your own machine", for a server to
start::

    LUCA_GYM_LIVE_MODEL_URL=http://127.0.0.1:8080/v1 pytest tests/test_llm_live.py

``check-model`` gets a tool call; then one dag session (3 nodes) is run
and recorded, and its replay with no network reproduces the scores, the
calls and the tokens exactly, whatever the model did (a small model may
well end on a malformed turn: that is recorded too)."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request

import pytest

URL = os.environ.get("LUCA_GYM_LIVE_MODEL_URL")
pytestmark = pytest.mark.skipif(not URL, reason="no live model: set LUCA_GYM_LIVE_MODEL_URL (e.g. http://127.0.0.1:8080/v1)")
pytest.importorskip("openai", reason='the openai SDK is not installed (pip install "luca-gym[llm]")')

from luca_gym import harness as ev  # noqa: E402
from luca_gym.cli import main  # noqa: E402
from luca_gym.results.transcripts import comparable  # noqa: E402

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def live_model() -> str:
    host = urllib.parse.urlsplit(URL).hostname
    assert host in LOOPBACK, f"LUCA_GYM_LIVE_MODEL_URL: {URL!r}; the live test calls loopback servers only"
    if os.environ.get("LUCA_GYM_LIVE_MODEL"):
        return os.environ["LUCA_GYM_LIVE_MODEL"]
    with urllib.request.urlopen(URL.rstrip("/") + "/models", timeout=10) as answer:  # noqa: S310 -- a loopback URL, checked above
        return json.load(answer)["data"][0]["id"]


@pytest.fixture
def no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost,::1")


def test_a_live_model_calls_a_tool_and_its_recorded_session_replays_exactly(no_proxy, tmp_path, capsys):
    model = live_model()
    assert main(["check-model", "--model", model, "--base-url", URL, "--max-tokens", "256", "--temperature", "0"]) == 0, \
        capsys.readouterr().out
    cassette = tmp_path / "live.jsonl"
    args = ["eval", "--world", "dag", "--agents", f"openai:{model}", "--base-url", URL, "--set", "n_nodes=3", "--seeds", "0",
            "--max-tokens", "256", "--temperature", "0", "--model-seed", "0", "--max-turns", "8", "--retries", "1",
            "--request-timeout", "300", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "live"), "--record-responses", str(cassette)]) == 0, capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "replayed"), "--replay-responses", str(cassette)]) == 0, capsys.readouterr().err
    live, replayed = (ev.load_sessions(str(tmp_path / name)) for name in ("live", "replayed"))
    assert [comparable(r) for r in replayed] == [comparable(r) for r in live]
    (record,) = live
    assert record["usage"]["provider_calls"] >= 1 and record["usage"]["input_tokens"] > 0
    assert any(m.get("finish_reason") for m in record["messages"] if m["role"] == "assistant")
