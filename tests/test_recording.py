"""Recording a model's responses and replaying the run offline
(:mod:`luca_gym.llm.recording`, ``luca-gym eval --record-responses /
--replay-responses``): the same calls, scores, token usage and transcript,
no network and no key; a request the cassette does not hold stops the run
naming its turn; no key is ever written."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest

from luca_gym import harness as ev
from luca_gym.cli import main
from luca_gym.llm.loop import ProviderError, run_agent
from luca_gym.llm.mock import MockClient, RateLimitError
from luca_gym.llm.providers import AnthropicAgent, OpenAIChatAgent, make_agent
from luca_gym.llm.recording import Cassette, CassetteMiss, canonical_request, request_key
from luca_gym.results.transcripts import comparable  # what a replay may change: its timings and the line's digest
from luca_gym.worlds.luca.tools import ToolSession

SEEDS = [0, 1]
FAULTY = {"fail_rate": 0.2, "malformed_rate": 0.1}  # failed and malformed calls are recorded and replayed too


def lines_of(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / ev.SESSIONS_FILE).read_text().splitlines()]


def cassette_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def no_sdk_client(monkeypatch):
    """Any attempt to make a provider's real client (and so reach a network) fails the test."""
    def refuse(self):
        raise AssertionError("a replay made a provider client")
    monkeypatch.setattr(OpenAIChatAgent, "_sdk_client", refuse)


def specs_for(seeds) -> list:
    return ev.plan_world("luca", ["openai:mock"], list(seeds), tier=["easy"], mode=["healthy"], n_genes=[20])


# -- the key -----------------------------------------------------------------------------
def test_a_request_key_is_the_hash_of_its_canonical_json():
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}], "temperature": 0}
    key = request_key(canonical_request("chat.completions", base))
    assert key == request_key(canonical_request("chat.completions", dict(reversed(list(base.items())))))
    assert len(key) == 64 and int(key, 16) >= 0
    # The transport is not part of a request: headers (which may carry keys) and timeouts are neither kept nor hashed.
    transport = {"timeout": 5, "extra_headers": {"Authorization": "Bearer sk-secret-123456"}, "extra_query": {"a": 1}}
    request = canonical_request("chat.completions", {**base, **transport})
    assert request_key(request) == key and "sk-secret" not in json.dumps(request)
    for change in ({"model": "n"}, {"temperature": 1}, {"tools": []}, {"messages": [{"role": "user", "content": "ho"}]}):
        assert request_key(canonical_request("chat.completions", {**base, **change})) != key, change
    assert request_key(canonical_request("messages", base)) != key  # the endpoint (the provider) is part of it
    with pytest.raises(ValueError, match="request parameter 'temperature': object is not JSON"):
        canonical_request("chat.completions", {**base, "temperature": object()})
    with pytest.raises(ValueError, match="endpoint: 'completions'; allowed chat.completions, messages"):
        canonical_request("completions", base)


# -- a sweep recorded, then replayed offline ---------------------------------------------
def test_a_recorded_sweep_replays_offline_with_the_same_calls_scores_usage_and_transcript(tmp_path, no_sdk_client):
    path = tmp_path / "responses.jsonl"
    record, seeds = Cassette(path, "record"), itertools.count()
    clients = []

    def recording(name):
        clients.append(MockClient(seed=next(seeds), **FAULTY))
        return OpenAIChatAgent(name.partition(":")[2], client=clients[-1], cassette=record)

    ev.sweep(specs_for(SEEDS), str(tmp_path / "recorded"), policy_factory=recording, backoff=0)
    record.close()
    recorded = lines_of(tmp_path / "recorded")
    calls = sum(len(c.requests) for c in clients)
    assert len(cassette_lines(path)) == calls == sum(r["usage"]["provider_calls"] for r in recorded)
    assert any(r["usage"]["failed_calls"] for r in recorded), "the faults to replay"

    replay = Cassette(path, "replay")
    assert len(replay) == calls
    ev.sweep(specs_for(SEEDS), str(tmp_path / "replayed"), policy_factory=lambda name: make_agent(name, cassette=replay),
             backoff=0)
    replayed = lines_of(tmp_path / "replayed")
    assert len(replay) == 0, "every recorded call was asked for again"
    assert [comparable(r) for r in replayed] == [comparable(r) for r in recorded]
    for before, after in zip(recorded, replayed):  # spelled out: what the brief promises
        assert after["calls"] == before["calls"] and after["scores"] == before["scores"] and after["usage"] == before["usage"]


def test_a_request_not_in_the_cassette_stops_the_replay_naming_its_turn(tmp_path, no_sdk_client):
    path = tmp_path / "responses.jsonl"
    record = Cassette(path, "record")
    run_agent(OpenAIChatAgent("mock", client=MockClient(), cassette=record), ToolSession(0, tier="easy"), backoff=0)
    record.close()
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) > 4

    # another instance: its first request already differs
    with pytest.raises(CassetteMiss, match=r"no recorded response for the chat.completions request of model 'mock' at turn 0 "):
        run_agent(OpenAIChatAgent("mock", cassette=Cassette(path, "replay")), ToolSession(1, tier="easy"), backoff=0)
    # another model parameter
    with pytest.raises(CassetteMiss, match="at turn 0 "):
        run_agent(OpenAIChatAgent("mock", cassette=Cassette(path, "replay"), temperature=0.5), ToolSession(0, tier="easy"),
                  backoff=0)
    # a cassette that stops early: the run stops at the first turn it lacks, not retried, nothing sent anywhere
    path.write_text("".join(lines[:3]))
    with pytest.raises(CassetteMiss, match="at turn 3 ") as caught:
        run_agent(OpenAIChatAgent("mock", cassette=Cassette(path, "replay")), ToolSession(0, tier="easy"), backoff=0)
    assert isinstance(caught.value, ProviderError) and not caught.value.retryable
    # a request asked for more often than it was recorded
    replay = Cassette(path, "replay")
    run_agent(OpenAIChatAgent("mock", cassette=replay), ToolSession(0, tier="easy"), max_turns=1, backoff=0)
    with pytest.raises(CassetteMiss, match="at turn 0 .*recorded 1 time"):
        run_agent(OpenAIChatAgent("mock", cassette=replay), ToolSession(0, tier="easy"), max_turns=1, backoff=0)


def _ends_at_once(messages, tools):
    """A "model" that ends the session at its first turn."""
    return [("end", {})] if not any(m.get("role") == "tool" for m in messages) else None


class FailsAfter:
    """``inner``'s first ``n`` calls, then a rate limit on every call."""

    def __init__(self, inner, n: int):
        self.inner, self.n, self.calls = inner, n, 0
        self.chat = type("Chat", (), {"completions": type("Completions", (), {"create": self.create})()})()

    def create(self, **request):
        self.calls += 1
        if self.calls > self.n:
            raise RateLimitError("mock provider: RateLimitError (status 429)")
        return self.inner.chat.completions.create(**request)


def test_sessions_that_open_alike_replay_each_its_own(tmp_path):
    """Two sessions whose first requests are the same but whose answers
    differ (instances that look alike to the model) each follow their own
    recorded calls; a session that gave up and ran again replays as the rerun
    (the one a results file holds), not as the failed attempt recorded first."""
    path = tmp_path / "responses.jsonl"
    record = Cassette(path, "record")
    first = run_agent(OpenAIChatAgent("mock", client=MockClient(_ends_at_once), cassette=record), ToolSession(0, tier="easy"),
                      backoff=0)
    second = run_agent(OpenAIChatAgent("mock", client=MockClient(), cassette=record), ToolSession(0, tier="easy"), backoff=0)
    record.close()
    assert len(first["calls"]) == 1 < len(second["calls"])
    replay = Cassette(path, "replay")
    for recorded in (first, second):
        replayed = run_agent(OpenAIChatAgent("mock", cassette=replay), ToolSession(0, tier="easy"), backoff=0)
        assert comparable(replayed) == comparable(recorded)

    path = tmp_path / "rerun.jsonl"
    record = Cassette(path, "record")
    with pytest.raises(ProviderError, match="gave up after 2 attempts"):
        run_agent(OpenAIChatAgent("mock", client=FailsAfter(MockClient(), 3), cassette=record), ToolSession(0, tier="easy"),
                  retries=1, backoff=0)
    rerun = run_agent(OpenAIChatAgent("mock", client=MockClient(), cassette=record), ToolSession(0, tier="easy"), backoff=0)
    record.close()
    entries = cassette_lines(path)
    assert [e["key"] for e in entries[:3]] == [e["key"] for e in entries[5:8]] and len({e["session"] for e in entries}) == 2
    replayed = run_agent(OpenAIChatAgent("mock", cassette=Cassette(path, "replay")), ToolSession(0, tier="easy"), backoff=0)
    assert comparable(replayed) == comparable(rerun) and replayed["usage"]["failed_calls"] == []


def test_the_cassette_keeps_no_key_and_drops_a_line_cut_off(tmp_path):
    key = "sk-proj-THISISTHEKEY0123456789"

    class KeyInMessage(RateLimitError):  # as an API's 401 quotes (part of) the key it was sent
        def __str__(self):
            return f"Incorrect API key provided: {key}; another sk-ant-api03-abcdefghijkl"

    client = MockClient(fail_rate=1.0, error=KeyInMessage)
    client.api_key = key
    path = tmp_path / "responses.jsonl"
    record = Cassette(path, "record")
    with pytest.raises(ProviderError, match="KeyInMessage.*gave up after 2 attempts"):
        run_agent(OpenAIChatAgent("mock", client=client, cassette=record), ToolSession(0, tier="easy"), retries=1, backoff=0)
    record.close()
    text = path.read_text()
    assert key not in text and "THISISTHEKEY" not in text and "abcdefghijkl" not in text
    entries = cassette_lines(path)
    assert [e["error"]["type"] for e in entries] == ["KeyInMessage"] * 2 and entries[0]["error"]["status_code"] == 429
    # replayed, the error is classed as the original was (retryable by its status) and retried the same
    with pytest.raises(ProviderError, match="KeyInMessage.*gave up after 2 attempts"):
        run_agent(OpenAIChatAgent("mock", cassette=Cassette(path, "replay")), ToolSession(0, tier="easy"), retries=1,
                  backoff=0)
    # a crash mid-line leaves a cut-off last line: replay ignores it and recording appends after the whole lines
    path.write_text(text + text.splitlines()[0][:40])
    assert len(Cassette(path, "replay")) == 2
    record = Cassette(path, "record")
    record.append(canonical_request("messages", {"model": "m"}), response={"content": []})
    record.close()
    assert len(cassette_lines(path)) == 3
    path.write_text("not json\n" + text)
    with pytest.raises(ValueError, match=r"responses.jsonl:1: not JSON"):
        Cassette(path, "replay")
    with pytest.raises(ValueError, match="mode: 'play'; allowed record, replay"):
        Cassette(path, "play")


def test_a_call_without_an_id_gets_one_that_replays_the_same(tmp_path):
    """A server that gives no tool-call id (some local ones) gets ids from the
    call's turn and place, so a replay's requests (which echo them) match."""
    def no_ids(client):
        create = client.chat.completions.create

        def answer(**request):
            response = create(**request)
            for call in response.choices[0].message.tool_calls or []:
                call.id = None
            return response
        client.chat.completions.create = answer
        return client

    path = tmp_path / "responses.jsonl"
    record = Cassette(path, "record")
    recorded = run_agent(OpenAIChatAgent("mock", client=no_ids(MockClient()), cassette=record), ToolSession(0, tier="easy"),
                         backoff=0)
    record.close()
    ids = [c["id"] for m in recorded["messages"] for c in m.get("tool_calls") or [] if m.get("harness") is None]
    assert ids[:2] == ["call_t0_0", "call_t1_0"] and len(set(ids)) == len(ids)
    replayed = run_agent(OpenAIChatAgent("mock", cassette=Cassette(path, "replay")), ToolSession(0, tier="easy"), backoff=0)
    assert comparable(replayed) == comparable(recorded)


class AnthropicShaped:
    """A fake messages API (``client.messages.create``): get_organism_info, then end, in Anthropic's blocks."""

    def __init__(self):
        self.messages = SimpleNamespace(create=self.create)

    def create(self, *, model, system, messages, tools, max_tokens):
        turn = sum(m["role"] == "assistant" for m in messages)
        name = ("get_organism_info", "end")[min(turn, 1)]
        blocks = [SimpleNamespace(type="text", text=f"turn {turn}"),
                  SimpleNamespace(type="tool_use", id=f"toolu_{turn}", name=name, input={})]
        return SimpleNamespace(content=blocks, usage=SimpleNamespace(input_tokens=50 + turn, output_tokens=5))


def test_an_anthropic_agent_records_and_replays_too(tmp_path, monkeypatch):
    def refuse(self):
        raise AssertionError("a replay made a provider client")
    monkeypatch.setattr(AnthropicAgent, "_sdk_client", refuse)
    path = tmp_path / "responses.jsonl"
    record = Cassette(path, "record")
    recorded = run_agent(AnthropicAgent("claude-mock", client=AnthropicShaped(), cassette=record), ToolSession(0, tier="easy"),
                         backoff=0)
    record.close()
    assert [e["request"]["endpoint"] for e in cassette_lines(path)] == ["messages", "messages"]
    assert cassette_lines(path)[0]["request"]["system"] and cassette_lines(path)[0]["request"]["max_tokens"] == 4096
    replayed = run_agent(make_agent("anthropic:claude-mock", cassette=Cassette(path, "replay")), ToolSession(0, tier="easy"),
                         backoff=0)
    assert comparable(replayed) == comparable(recorded) and recorded["usage"]["input_tokens"] == 101


# -- the command line --------------------------------------------------------------------
EVAL = ["eval", "--world", "luca", "--agents", "openai:mock", "--tiers", "easy", "--modes", "healthy", "--backoff", "0",
        "--quiet"]


def test_luca_gym_eval_records_and_replays_a_run_without_a_key_or_network(tmp_path, monkeypatch, capsys):
    path = tmp_path / "responses.jsonl"
    seeds = itertools.count()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-0123456789abcdef")
    monkeypatch.setattr(OpenAIChatAgent, "_sdk_client", lambda self: MockClient(seed=next(seeds), **FAULTY))
    assert main([*EVAL, "--seeds", "0-1", "--record-responses", str(path), "--out", str(tmp_path / "a")]) == 0
    assert "sk-dummy" not in path.read_text()

    def refuse(self):
        raise AssertionError("a replay made a provider client")
    monkeypatch.setattr(OpenAIChatAgent, "_sdk_client", refuse)
    monkeypatch.delenv("OPENAI_API_KEY")
    assert main([*EVAL, "--seeds", "0-1", "--replay-responses", str(path), "--out", str(tmp_path / "b")]) == 0
    recorded, replayed = lines_of(tmp_path / "a"), lines_of(tmp_path / "b")
    assert len(recorded) == 2 and [comparable(r) for r in replayed] == [comparable(r) for r in recorded]
    capsys.readouterr()

    # a seed the recording did not play: stopped at its first turn, named, exit 2 (a usage error, as the help says); nothing recorded
    assert main([*EVAL, "--seeds", "2", "--replay-responses", str(path), "--out", str(tmp_path / "c")]) == 2
    error = capsys.readouterr().err
    assert "no recorded response for the chat.completions request of model 'mock' at turn 0" in error
    assert not (tmp_path / "c" / ev.SESSIONS_FILE).exists() or not lines_of(tmp_path / "c")
    # no cassette, no model agent, both flags
    assert main([*EVAL, "--replay-responses", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "d")]) == 2
    assert "--replay-responses: cassette" in capsys.readouterr().err and not (tmp_path / "d").exists()
    assert main(["eval", "--world", "luca", "--agents", "random", "--seeds", "0", "--record-responses", str(path),
                 "--out", str(tmp_path / "e")]) == 2
    assert "--record-responses: no openai:MODEL, anthropic:MODEL or mock agent" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*EVAL, "--record-responses", str(path), "--replay-responses", str(path)])
    assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
