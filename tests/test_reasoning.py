"""A reasoning model's thinking in the transcript: the providers' adapters
read it where each provider puts it (OpenAI-compatible servers:
``reasoning_content`` as vLLM and DeepSeek return it, or ``reasoning`` as
OpenRouter does; Anthropic: ``thinking`` blocks) into the assistant
message's ``reasoning``; it is never sent back, and a reasoning field in an
odd shape is left out without failing the turn. Offline: hand-built
responses, and an OpenAI-compatible server over real HTTP through the
``openai`` SDK (recorded and replayed with a cassette)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from chat_server import PROXY_VARIABLES, ChatServer, completion, tool_message, turn_of

from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.llm.loop import run_agent
from luca_gym.llm.providers import AnthropicAgent, OpenAIChatAgent
from luca_gym.results.transcripts import transcript_text

N = 3  # dag nodes
EMPTY = [[0] * N for _ in range(N)]
SCRIPT = [("intervene", {"molecule": 0, "adjacency": EMPTY}), ("submit_graph", {"adjacency": EMPTY})]


def dag_session(seed: int = 0):
    return load(worlds.get("dag").tools)(seed, n_nodes=N)


def thought(turn: int) -> str:
    return f"Turn {turn}: the graph may be empty; I test molecule {turn} first."


# -- OpenAI-compatible, hand-built responses -----------------------------------------------------
class OpenAIShapedClient:
    """``chat.completions.create`` answering :data:`SCRIPT` turn by turn,
    each message carrying ``reasoning(turn)`` under ``field`` (when not None)."""

    def __init__(self, field: str | None, reasoning=thought):
        self.field, self.reasoning, self.requests = field, reasoning, []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):
        self.requests.append(request)
        turn = sum(m["role"] == "assistant" for m in request["messages"])
        message = {"role": "assistant", "content": None, "tool_calls": []}
        if turn < len(SCRIPT):
            name, arguments = SCRIPT[turn]
            message["tool_calls"] = [{"id": f"c{turn}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(arguments)}}]
        if self.field is not None:
            message[self.field] = self.reasoning(turn)
        return {"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_an_openai_compatible_servers_reasoning_is_the_assistant_messages_reasoning(field):
    client = OpenAIShapedClient(field)
    record = run_agent(OpenAIChatAgent("reasoner", client=client), dag_session(), backoff=0)
    said = [m for m in record["messages"] if m["role"] == "assistant"]
    assert said and [m["reasoning"] for m in said] == [thought(t) for t in range(len(said))]
    # never sent back: the requests carry the text and tool calls only (DeepSeek refuses reasoning_content)
    for request in client.requests:
        for m in request["messages"]:
            assert not {"reasoning", "reasoning_content"} & set(m)
    assert f"reasoning: {thought(0)}" in transcript_text({**record, "world": "dag", "agent": "x", "seed": 0})


def test_reasoning_content_is_preferred_and_a_message_without_reasoning_has_no_field():
    both = OpenAIShapedClient("reasoning_content")
    agent = OpenAIChatAgent("reasoner", client=both)
    original = both.create

    def with_both(**request):
        answer = original(**request)
        answer["choices"][0]["message"]["reasoning"] = "the other field"
        return answer

    both.chat.completions.create = with_both
    said = [m for m in run_agent(agent, dag_session(), backoff=0)["messages"] if m["role"] == "assistant"]
    assert said[0]["reasoning"] == thought(0)
    plain = run_agent(OpenAIChatAgent("plain", client=OpenAIShapedClient(None)), dag_session(), backoff=0)
    assert not any("reasoning" in m for m in plain["messages"])


@pytest.mark.parametrize("odd", [None, "", "   ", 7, ["a", "b"], {"text": "x"}])
def test_reasoning_in_an_odd_shape_is_left_out_and_the_turn_still_counts(odd):
    record = run_agent(OpenAIChatAgent("odd", client=OpenAIShapedClient("reasoning", lambda turn: odd)), dag_session(),
                       backoff=0)
    assert record["usage"]["failed_calls"] == [] and record["end_reason"] == "end"
    assert not any("reasoning" in m for m in record["messages"])


# -- Anthropic, hand-built responses -------------------------------------------------------------
class AnthropicShapedClient:
    """``messages.create`` answering :data:`SCRIPT` with SDK-shaped objects:
    thinking blocks (two, and a redacted one), text, then the tool_use."""

    def __init__(self):
        self.requests = []
        self.messages = SimpleNamespace(create=self.create)

    def create(self, **request):
        self.requests.append(request)
        turn = sum(m["role"] == "assistant" for m in request["messages"])
        blocks = [SimpleNamespace(type="thinking", thinking=thought(turn), signature="sig-opaque"),
                  SimpleNamespace(type="redacted_thinking", data="encrypted-blob"),
                  SimpleNamespace(type="thinking", thinking="And a second thought.", signature="sig2"),
                  SimpleNamespace(type="text", text=f"Step {turn}.")]
        if turn < len(SCRIPT):
            name, arguments = SCRIPT[turn]
            blocks.append(SimpleNamespace(type="tool_use", id=f"toolu_{turn}", name=name, input=arguments))
        return SimpleNamespace(content=blocks, usage=SimpleNamespace(input_tokens=20, output_tokens=9))


def test_anthropic_thinking_blocks_are_the_assistant_messages_reasoning():
    client = AnthropicShapedClient()
    record = run_agent(AnthropicAgent("claude-test", client=client), dag_session(), backoff=0)
    said = [m for m in record["messages"] if m["role"] == "assistant"]
    assert said and [m["reasoning"] for m in said] == [f"{thought(t)}\n\nAnd a second thought." for t in range(len(said))]
    assert [m["content"] for m in said] == [f"Step {t}." for t in range(len(said))]
    text = json.dumps(record["messages"])
    assert "encrypted-blob" not in text and "sig-opaque" not in text  # only the thinking's text is kept
    assert record["usage"]["input_tokens"] == 20 * len(said)


def test_anthropic_thinking_without_text_is_no_reasoning():
    client = AnthropicShapedClient()
    original = client.create

    def empty_thoughts(**request):
        response = original(**request)
        response.content = [b for b in response.content if b.type != "thinking"] + [
            SimpleNamespace(type="thinking", thinking=""), {"type": "thinking", "thinking": None}]
        return response

    client.messages.create = empty_thoughts
    record = run_agent(AnthropicAgent("claude-test", client=client), dag_session(), backoff=0)
    assert record["end_reason"] == "end" and not any("reasoning" in m for m in record["messages"])


# -- over HTTP through the openai SDK, recorded and replayed ------------------------------------------
class ReasoningServer(ChatServer):
    """A chat-completions server on 127.0.0.1 answering :data:`SCRIPT` with
    ``reasoning_content`` on each message, as vLLM and DeepSeek do."""

    def answer(self, path: str, authorization, body: dict) -> tuple[int, dict]:
        turn = turn_of(body)
        message = {"role": "assistant", "content": "Done.", "reasoning_content": thought(turn)}
        if turn < len(SCRIPT):
            message = tool_message(turn, "Done.", *SCRIPT[turn], reasoning_content=thought(turn))
        return 200, {**completion(turn, "m", message, 3, 2), "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def test_reasoning_content_over_http_through_the_openai_sdk_and_a_replayed_cassette(monkeypatch, tmp_path):
    pytest.importorskip("openai", reason='the openai SDK is not installed (pip install "luca-gym[llm]")')
    from luca_gym.llm.recording import Cassette

    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-reasoning")
    server = ReasoningServer()
    try:
        path = tmp_path / "responses.jsonl"
        agent = OpenAIChatAgent("m", base_url=server.url, cassette=Cassette(path, "record"))
        record = run_agent(agent, dag_session(), backoff=0)
    finally:
        server.stop()
    said = [m for m in record["messages"] if m["role"] == "assistant"]
    assert said and [m["reasoning"] for m in said] == [thought(t) for t in range(len(said))]
    assert all("reasoning_content" not in m for body in server.requests for m in body["messages"])
    replayed = run_agent(OpenAIChatAgent("m", base_url=server.url, cassette=Cassette(path, "replay")), dag_session(),
                         backoff=0)
    assert [m.get("reasoning") for m in replayed["messages"]] == [m.get("reasoning") for m in record["messages"]]
