"""An OpenAI-compatible server over real HTTP: ``luca-gym eval --agents
openai:MODEL --base-url URL`` drives a fake chat-completions server (the
stdlib's http.server on 127.0.0.1, an ephemeral port, answering tool calls
from a fixed script) through the ``openai`` SDK, end to end: the records'
transcripts hold the server's text and tool messages that match the recorded
calls one for one. The same run, recorded with ``--record-responses``, then
replays with the server untouched and no key."""

from __future__ import annotations

import json

import pytest
from chat_server import PROXY_VARIABLES, ChatServer, completion, error, tool_message, turn_of

pytest.importorskip("openai", reason='the openai SDK is not installed (pip install "luca-gym[llm]")')

from luca_gym import harness as ev  # noqa: E402
from luca_gym.cli import main  # noqa: E402

MODEL, KEY = "fake-model", "sk-dummy-fake-server-0123456789"
MAX_REQUESTS = 40  # beyond this the server refuses (400: not retried), so a runaway loop ends
SOCKET_TIMEOUT_S = 10.0  # a client that stops mid-request is dropped
N = 3  # dag nodes
EMPTY = [[0] * N for _ in range(N)]
# The "model": what it says and the call it makes at each assistant turn of a conversation; then text only.
SCRIPT = [
    ("I intervene on molecule 0 and guess the graph has no edges.", "intervene", {"molecule": 0, "adjacency": EMPTY}),
    ("Molecule 1 next.", "intervene", {"molecule": 1, "adjacency": EMPTY}),
    ("I submit the empty graph.", "submit_graph", {"adjacency": EMPTY}),
]
DONE = "Done."
RATE_LIMITED = 1  # the first request is answered 429 (retried and replayed)


class FakeServer(ChatServer):
    """POST /v1/chat/completions answers from :data:`SCRIPT` (the first
    request 429, retried); ``tokens`` the usage it reported."""

    def __init__(self):
        self.tokens = {"input_tokens": 0, "output_tokens": 0}
        super().__init__(timeout_s=SOCKET_TIMEOUT_S)

    def answer(self, path: str, authorization, body: dict) -> tuple[int, dict]:
        n = len(self.requests) - 1
        refusal = self.refused(path, authorization, body, key=KEY, max_requests=MAX_REQUESTS, model=MODEL)
        if refusal:
            return refusal
        if n < RATE_LIMITED:
            return error(429, "Rate limit reached for requests", "rate_limit")
        turn = turn_of(body)
        prompt, completion_tokens = 100 + 10 * turn, 7 + turn
        with self.lock:
            self.tokens["input_tokens"] += prompt
            self.tokens["output_tokens"] += completion_tokens
        message = {"role": "assistant", "content": DONE}
        if turn < len(SCRIPT):
            message = tool_message(turn, *SCRIPT[turn])
        return 200, completion(n, MODEL, message, prompt, completion_tokens)


@pytest.fixture
def server(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)  # straight to 127.0.0.1
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake = FakeServer()
    yield fake
    fake.stop()


def eval_args(server, out, *more) -> list[str]:
    return ["eval", "--world", "dag", "--agents", f"openai:{MODEL}", "--base-url", server.url, "--set", f"n_nodes={N}",
            "--seeds", "0-1", "--backoff", "0", "--out", str(out), "--quiet", *more]


def lines_of(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / ev.SESSIONS_FILE).read_text().splitlines()]


def test_luca_gym_eval_plays_a_sweep_over_http_against_an_openai_compatible_server(server, tmp_path, monkeypatch, capsys):
    cassette = tmp_path / "responses.jsonl"
    assert main(eval_args(server, tmp_path / "run", "--record-responses", str(cassette))) == 0, capsys.readouterr().err
    records = lines_of(tmp_path / "run")
    assert len(records) == 2 and {r["seed"] for r in records} == {0, 1}
    assert sum(r["usage"]["provider_calls"] for r in records) == len(server.requests) <= MAX_REQUESTS
    assert sum(len(r["usage"]["failed_calls"]) for r in records) == RATE_LIMITED  # the 429, retried
    assert "RateLimitError" in records[0]["usage"]["failed_calls"][0]["error"]
    for key in ("input_tokens", "output_tokens"):
        assert sum(r["usage"][key] for r in records) == server.tokens[key]
    for record in records:
        assert record["base_url"] == server.url and record["end_reason"] == "end"
        said = [m for m in record["messages"] if m["role"] == "assistant" and "harness" not in m]
        turns = len(said)
        assert 1 <= turns <= len(SCRIPT)  # the session ends at the submission, or sooner on a right guess
        assert [m["content"] for m in said] == [text for text, _, _ in SCRIPT[:turns]]
        assert [[(c["id"], c["name"], json.loads(c["arguments"])) for c in m["tool_calls"]] for m in said] == \
            [[(f"call_{t}", name, arguments)] for t, (_, name, arguments) in enumerate(SCRIPT[:turns])]
        tools = [m for m in record["messages"] if m["role"] == "tool"]
        assert len(tools) == len(record["calls"]) == turns
        for message, call, (_, name, arguments) in zip(tools, record["calls"], SCRIPT):
            assert message["name"] == call["call"] == name and call["arguments"] == arguments
            assert json.loads(message["content"]) == call["result"]
        assert record["calls"][-1]["result"].get("ended") is True
        # the server was sent each answer but the last (the session ended with it) under its call's id
        sent = {(m["tool_call_id"], m["content"]) for body in server.requests for m in body["messages"] if m["role"] == "tool"}
        assert all((m["tool_call_id"], m["content"]) in sent for m in tools[:-1])

    # the cassette: one line a call (the 429 too), no key; replayed with no key and the server untouched
    text = cassette.read_text()
    assert len(text.splitlines()) == len(server.requests) and KEY not in text and "fake-server-0123" not in text
    asked = len(server.requests)
    monkeypatch.delenv("OPENAI_API_KEY")
    assert main(eval_args(server, tmp_path / "replayed", "--replay-responses", str(cassette))) == 0, capsys.readouterr().err
    assert len(server.requests) == asked
    strip = lambda r: {**{k: v for k, v in r.items() if k not in ("wall_s", "digest", "messages")},  # noqa: E731
                       "messages": [{k: v for k, v in m.items() if k != "latency_s"} for m in r["messages"]]}
    assert [strip(r) for r in lines_of(tmp_path / "replayed")] == [strip(r) for r in records]
