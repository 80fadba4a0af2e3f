"""A real open-weights model, replayed: Gemma 3 270M (the base model, Q4_K_M
GGUF) served by llama.cpp's ``llama-server`` on 127.0.0.1 played dag,
equation, luca and biobank sessions through ``luca-gym eval --agents
openai:gemma-3-270m --base-url ... --record-responses``; the cassette
(gzipped) and what the recorded run wrote (scores, calls, tokens: the
``expected.json`` beside it) are in ``tests/data/gemma3-270m/``. Here the
same commands replay it with no server and no key, and every session makes
the same calls, gets the same scores and counts the same tokens, exactly.
How it was recorded: the folder's README and docs/guides/llm-agents.md."""

from __future__ import annotations

import gzip
import json
import pathlib

import pytest

from luca_gym import harness as ev
from luca_gym.cli import main

DATA = pathlib.Path(__file__).parent / "data" / "gemma3-270m"
EXPECTED = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))


def summary(record: dict) -> dict:
    """What a replay must reproduce of a session: its scores, calls, tokens and end."""
    usage = record["usage"]
    return {"world": record["world"], "seed": record["seed"], "scores": record["scores"], "end_reason": record["end_reason"],
            "calls": [[c["call"], c.get("arguments")] for c in record["calls"]],
            "usage": {k: usage[k] for k in ("input_tokens", "output_tokens", "provider_calls", "retries")},
            "model_error": record.get("model_error")}


@pytest.fixture(scope="module")
def cassette(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("gemma") / "cassette.jsonl"
    path.write_bytes(gzip.decompress((DATA / "cassette.jsonl.gz").read_bytes()))
    return path


@pytest.mark.parametrize("world", sorted(EXPECTED["commands"]))
def test_the_recorded_real_model_replays_exactly_with_no_server(world, cassette, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):  # nothing may be reached: point them nowhere
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    args = EXPECTED["commands"][world]
    code = main([*args, "--out", str(tmp_path / "replayed"), "--replay-responses", str(cassette), "--quiet"])
    err = capsys.readouterr().err
    assert "no recorded response" not in err, (
        f"{world}'s prompt, tools or instances changed since the recording (the requests differ): record it again as "
        f"tests/data/gemma3-270m/README.md says, or leave the world's words as they were\n{err}")
    assert code == 0, err
    replayed = [summary(r) for r in ev.load_sessions(str(tmp_path / "replayed"))]
    expected = [s for s in EXPECTED["sessions"] if s["world"] == world]
    assert replayed == expected
    assert sum(s["usage"]["output_tokens"] or 0 for s in replayed) > 0  # a real model's tokens, counted
