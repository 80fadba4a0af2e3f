"""Evaluation at scale: concurrent sweeps, provider retries, token accounting,
malformed provider answers, interruption and resume.

Everything runs against :class:`luca_gym.llm.mock.MockClient`,
an OpenAI-compatible fake: no network, backoff 0."""

from __future__ import annotations

import gc
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from conftest import signal_after_lines
from luca_gym import harness as ev
from luca_gym.cli import main
from luca_gym.llm import loop
from luca_gym.llm import providers
from luca_gym.results.transcripts import comparable
from luca_gym.llm.providers import AnthropicAgent, OpenAIChatAgent
from luca_gym.llm.loop import ProviderError, run_agent
from luca_gym.worlds.luca.tools import ToolSession
from luca_gym.llm.mock import MALFORMED, AuthenticationError, MockClient, RateLimitError
from luca_gym.worlds.luca.evaluation import luca_spec

TIER, MODE, N = "easy", "healthy", 20
PRICE = (2.5, 10.0)
FAULTY = {"fail_rate": 0.10, "malformed_rate": 0.05}
# What the session answers a malformed tool call of the mock (MALFORMED[:4]).
REFUSALS = ("arguments: expected a JSON object", "arguments: not valid JSON", "unknown tool: the name must be a string")


class MockFactory:
    """A policy factory: one MockClient per session, seeded in the order the
    sweep asks for them; ``agents`` gives some agents options of their own."""

    def __init__(self, agents: dict | None = None, **options):
        self.agents, self.options = agents or {}, options
        self.seeds = itertools.count()
        self.clients: list[tuple[str, MockClient]] = []

    def __call__(self, name: str):
        if not name.startswith("openai:"):
            return ev.make_runner(name, world="luca")
        client = MockClient(seed=next(self.seeds), **self.agents.get(name, self.options))
        self.clients.append((name, client))
        return OpenAIChatAgent(name.partition(":")[2], client=client)


def specs_for(seeds, agents=("openai:mock",)) -> list:
    return ev.plan_world("luca", list(agents), list(seeds), tier=[TIER], mode=[MODE], n_genes=[N])


def lines_of(folder) -> list[dict]:
    """Every line of the folder's sessions file, each a whole JSON object ending in a newline."""
    data = (folder / ev.SESSIONS_FILE).read_bytes()
    assert data == b"" or data.endswith(b"\n"), "a half-written last line"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def refused(call: dict) -> bool:
    """Whether the session refused this logged call as malformed."""
    return any(str(call["result"].get("error", "")).startswith(text) for text in REFUSALS)


def key_of(record) -> tuple:
    return ev.record_key(record)


def by_key(records) -> dict:
    return {key_of(r): r for r in records}


# -- 200 sessions, concurrently, against a provider that fails and misbehaves ---------
@pytest.fixture(scope="module")
def faulty_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("faulty")
    factory = MockFactory(**FAULTY)
    started = time.perf_counter()
    ev.sweep(specs_for(range(200)), str(out), policy_factory=factory, concurrency=16, backoff=0, price=PRICE)
    return SimpleNamespace(out=out, records=lines_of(out), clients=[c for _, c in factory.clients],
                           wall_s=time.perf_counter() - started)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The same mock without faults, over 20 seeds (and a baseline beside it),
    one session at a time and 8 at once."""
    specs = specs_for(range(20), agents=("random", "openai:mock"))
    runs = {}
    for k in (1, 8):
        out = tmp_path_factory.mktemp(f"clean{k}")
        ev.sweep(specs, str(out), policy_factory=MockFactory(), concurrency=k, backoff=0, price=PRICE)
        runs[k] = lines_of(out)
    return runs


def test_200_concurrent_sessions_none_lost_none_doubled(faulty_sweep):
    records = faulty_sweep.records
    keys = [key_of(r) for r in records]
    assert len(records) == 200 and len(set(keys)) == 200
    assert set(keys) == {ev.session_key(s) for s in specs_for(range(200))}
    assert len(faulty_sweep.clients) == 200  # each session ran once: one client each
    loaded = ev.read_results(str(faulty_sweep.out))
    assert len(loaded.records) == 200 and loaded.duplicates == []  # every digest intact
    for r in records:
        assert r["end_reason"] == "end" and r["calls"][-1]["call"] == "end" and r["scores"] is not None


def test_the_records_say_which_calls_failed(faulty_sweep):
    records, clients = faulty_sweep.records, faulty_sweep.clients
    usages = [r["usage"] for r in records]
    calls = sum(u["provider_calls"] for u in usages)
    failed = [f for u in usages for f in u["failed_calls"]]
    assert calls == sum(len(c.requests) for c in clients)
    rate_limited = [f for f in failed if "RateLimitError" in f["error"]]
    unreadable = [f for f in failed if "malformed response" in f["error"]]
    assert len(rate_limited) + len(unreadable) == len(failed)
    assert len(rate_limited) == sum(c.outcomes.count("failed") for c in clients)
    assert 0.07 < len(rate_limited) / calls < 0.13  # the mock fails 10% of calls
    assert len(unreadable) == sum(c.outcomes.count(k) for c in clients for k in MALFORMED[4:])
    assert {f["error"].split("malformed response: ")[1] for f in unreadable} == {
        "no choices", "message.tool_calls is a str, not a list", "message.content is a float, not text"}
    assert 0 < sum(bool(u["failed_calls"]) for u in usages) < 200
    for r in records:
        u = r["usage"]
        assert u["retries"] == len(u["failed_calls"])  # every failure was retried, none gave up
        assert u["provider_calls"] - len(u["failed_calls"]) == len(r["calls"])  # the mock makes one call a turn
        for f in u["failed_calls"]:
            assert set(f) == {"turn", "attempt", "error"} and 0 <= f["attempt"] <= 5
        assert r["cost_usd"] == pytest.approx((u["input_tokens"] * PRICE[0] + u["output_tokens"] * PRICE[1]) / 1e6, abs=1e-6)
    # Malformed tool calls reach the session, which refuses them: the agent's errors, in the call log.
    refusals = [c for r in records for c in r["calls"] if refused(c)]
    assert len(refusals) == sum(c.outcomes.count(k) for c in clients for k in MALFORMED[:4]) > 0
    assert {c["call"] for c in refusals} > {"<NoneType>"}


def test_faults_change_no_accepted_call_and_no_score(faulty_sweep, clean):
    """A failed provider call is retried with the session unchanged and a
    malformed call is refused changing nothing: each session scores as it
    does against the same mock without faults."""
    faulty, fault_free = by_key(faulty_sweep.records), by_key(clean[8])
    compared = 0
    for key, r in fault_free.items():
        if r["agent"] == "openai:mock":
            accepted = [c for c in faulty[key]["calls"] if not refused(c)]
            assert [(c["call"], c["arguments"], c["result"]) for c in accepted] == [
                (c["call"], c["arguments"], c["result"]) for c in r["calls"]]
            assert faulty[key]["scores"] == r["scores"]
            compared += 1
    assert compared == 20


def test_concurrency_1_and_k_give_the_same_records(clean):
    one, many = by_key(clean[1]), by_key(clean[8])
    assert set(one) == set(many) and len(one) == 40
    assert {r["agent"] for r in clean[8][:20]} == {"random"}  # baselines run first, one at a time
    for key in one:  # wall time, digest and each turn's latency aside
        assert comparable(one[key]) == comparable(many[key]), key
    assert [key_of(r) for r in clean[1]] == [ev.session_key(s) for s in specs_for(range(20), agents=("random", "openai:mock"))]
    mock = [r for r in clean[1] if r["agent"] == "openai:mock"]
    assert all(r["usage"]["failed_calls"] == [] and r["usage"]["retries"] == 0 for r in mock)
    assert all("usage" not in r for r in clean[1] if r["agent"] == "random")


def test_at_most_k_sessions_wait_on_the_provider_at_once(tmp_path):
    """Sessions overlap while they wait on a provider that takes its time,
    never more than K of them."""
    lock, waiting, most = threading.Lock(), [0], [0]

    def slow(agent):
        def turn(messages, tools):
            with lock:
                waiting[0] += 1
                most[0] = max(most[0], waiting[0])
            try:
                time.sleep(0.02)
                return agent(messages, tools)
            finally:
                with lock:
                    waiting[0] -= 1
        return turn

    factory = MockFactory()
    ev.sweep(specs_for(range(24)), str(tmp_path), policy_factory=lambda name: slow(factory(name)), concurrency=6, backoff=0)
    assert len(lines_of(tmp_path)) == 24
    assert 1 < most[0] <= 6


# -- usage and cost ---------------------------------------------------------------------
def test_usage_and_cost_add_up():
    client = MockClient(fail_rate=0.2, malformed_rate=0.2, seed=7)
    spec = luca_spec("openai:mock", TIER, MODE, N, 3)
    record = ev.run_tool_session(OpenAIChatAgent("mock", client=client), spec, retries=10, backoff=0, price=PRICE)
    u = record["usage"]
    answered = [usage for usage in client.reported if usage is not None]  # a malformed answer's tokens count too
    assert u["provider_calls"] == len(client.requests) == len(client.outcomes)
    assert u["input_tokens"] == sum(p for p, _ in answered) and u["output_tokens"] == sum(c for _, c in answered)
    unusable = [i for i, o in enumerate(client.outcomes) if o == "failed" or o in MALFORMED[4:]]
    assert len(u["failed_calls"]) == len(unusable) == u["retries"] > 0
    assert record["price_usd_per_mtok"] == list(PRICE)
    assert record["cost_usd"] == round((u["input_tokens"] * 2.5 + u["output_tokens"] * 10) / 1e6, 6) > 0
    assert ev.session_cost(u, None) is None
    assert ev.session_cost({"input_tokens": 1_000_000, "output_tokens": 500_000}, (2.5, 10)) == 7.5
    # A turn's attempts count from 0 and each turn's failures come before its answer.
    turns = {}
    for f in u["failed_calls"]:
        turns.setdefault(f["turn"], []).append(f["attempt"])
    assert all(attempts == list(range(len(attempts))) for attempts in turns.values())


def test_anthropic_usage_is_read():
    response = SimpleNamespace(
        content=[SimpleNamespace(type="text", text="ok"), SimpleNamespace(type="tool_use", id="t1", name="end", input={})],
        usage=SimpleNamespace(input_tokens=120, output_tokens=7),
    )
    client = SimpleNamespace(messages=SimpleNamespace(create=lambda **kw: response))
    record = run_agent(AnthropicAgent("m", client=client), ToolSession(0, tier=TIER), backoff=0)
    assert record["usage"] == {"input_tokens": 120, "output_tokens": 7, "provider_calls": 1, "retries": 0, "failed_calls": []}


@pytest.mark.parametrize("price", [(1,), (1, 2, 3), (-1, 2), (1, float("nan")), ("1", 2), 5])
def test_a_bad_price_is_refused(price):
    with pytest.raises(ValueError, match="price:"):
        ev.check_price(price)


# -- retries --------------------------------------------------------------------------
def test_retries_back_off_exponentially_with_jitter():
    waits = []
    client = MockClient(fail_rate=1.0, seed=0)
    session = ToolSession(0, tier=TIER)
    with pytest.raises(ProviderError, match=r"RateLimitError.*\(gave up after 5 attempts\)") as info:
        run_agent(OpenAIChatAgent("mock", client=client), session, retries=4, backoff=1.0, sleep=waits.append)
    assert info.value.retryable and isinstance(info.value.cause, RateLimitError)
    assert len(client.requests) == 5 and len(waits) == 4
    for attempt, wait in enumerate(waits):
        assert 0.5 * 2**attempt <= wait < 2**attempt
    assert session.transcript == [] and not session.ended  # a failed call changes nothing
    assert loop.backoff_delay(30, 1.0) <= loop.MAX_BACKOFF_S


def test_a_retry_sends_the_same_messages():
    client = MockClient(fail_rate=0.5, seed=3)
    run_agent(OpenAIChatAgent("mock", client=client), ToolSession(0, tier=TIER), backoff=0, retries=20)
    for i, outcome in enumerate(client.outcomes[:-1]):
        if outcome == "failed":
            assert client.requests[i + 1]["messages"] == client.requests[i]["messages"]
    assert "failed" in client.outcomes


def test_a_non_retryable_error_is_not_retried():
    client = MockClient(fail_rate=1.0, error=AuthenticationError)
    session = ToolSession(0, tier=TIER)
    with pytest.raises(ProviderError, match="AuthenticationError") as info:
        run_agent(OpenAIChatAgent("mock", client=client), session, backoff=0)
    assert not info.value.retryable and len(client.requests) == 1
    assert session.transcript == [] and not session.ended


class APITimeoutError(Exception):
    pass


APITimeoutError.__module__ = "openai"


class BadRequestError(Exception):
    status_code = 400


class Overloaded(Exception):
    def __init__(self):
        super().__init__("overloaded")
        self.response = SimpleNamespace(status_code=529)


@pytest.mark.parametrize(("exc", "retryable"), [
    (RateLimitError("slow down"), True),
    (AuthenticationError("bad key"), False),
    (BadRequestError("bad request"), False),
    (Overloaded(), True),
    (APITimeoutError("timed out"), True),
    (ConnectionRefusedError("refused"), True),
])
def test_provider_errors_say_whether_to_retry(exc, retryable):
    with pytest.raises(ProviderError) as info:
        with providers.provider_errors("openai:m"):
            raise exc
    assert info.value.retryable is retryable and info.value.cause is exc
    assert str(info.value).startswith(f"openai:m: {type(exc).__name__}: ")


@pytest.mark.parametrize(("retries", "backoff"), [(-1, 0), (1.5, 0), (True, 0), (1, -0.1), (1, float("inf")), (1, "1")])
def test_bad_retry_settings_are_refused(retries, backoff):
    with pytest.raises(ValueError, match="retries:|backoff:"):
        run_agent(loop.ScriptedAgent([]), ToolSession(0, tier=TIER), retries=retries, backoff=backoff)


# -- sessions that cannot finish ---------------------------------------------------------
def test_a_session_that_gives_up_is_not_recorded_and_a_rerun_runs_it(tmp_path):
    specs = specs_for(range(4), agents=("openai:good", "openai:flaky"))
    failing = MockFactory({"openai:flaky": {"fail_rate": 1.0}})
    with pytest.raises(ProviderError, match=r"4 session\(s\) not recorded.*RateLimitError") as info:
        ev.sweep(specs, str(tmp_path), policy_factory=failing, concurrency=8, retries=2, backoff=0)
    assert info.value.retryable and "not started" not in str(info.value)
    assert {r["agent"] for r in lines_of(tmp_path)} == {"openai:good"} and len(lines_of(tmp_path)) == 4
    assert all(len(c.requests) == 3 for name, c in failing.clients if name == "openai:flaky")  # 1 + 2 retries each
    ev.sweep(specs, str(tmp_path), policy_factory=MockFactory(), concurrency=8, backoff=0)
    records = lines_of(tmp_path)
    assert len(records) == len({key_of(r) for r in records}) == 8


def test_k_sessions_giving_up_in_a_row_stop_the_sweep(tmp_path):
    factory = MockFactory(fail_rate=1.0)
    with pytest.raises(ProviderError, match=r"the sweep stopped after 2 in a row gave up, \d+ not started"):
        ev.sweep(specs_for(range(12)), str(tmp_path), policy_factory=factory, concurrency=2, retries=1, backoff=0)
    started = [c for _, c in factory.clients if c.requests]
    assert 2 <= len(started) <= 3 < 12 and lines_of(tmp_path) == []


def test_a_non_retryable_error_stops_the_sweep_after_the_sessions_in_flight(tmp_path):
    specs = specs_for(range(6), agents=("openai:good", "openai:denied"))
    factory = MockFactory({"openai:denied": {"fail_rate": 1.0, "error": AuthenticationError}})
    with pytest.raises(ProviderError, match="AuthenticationError") as info:
        ev.sweep(specs, str(tmp_path), policy_factory=factory, concurrency=4, backoff=0)
    assert not info.value.retryable
    assert {key_of(r) for r in lines_of(tmp_path)} == {ev.session_key(s) for s in specs if s.agent == "openai:good"}
    denied = [c for name, c in factory.clients if name == "openai:denied"]
    assert sum(bool(c.requests) for c in denied) < 6 and all(len(c.requests) <= 1 for c in denied)


def test_at_concurrency_1_a_failing_session_stops_the_sweep_as_before(tmp_path):
    specs = specs_for(range(3), agents=("openai:good", "openai:flaky"))
    factory = MockFactory({"openai:flaky": {"fail_rate": 1.0}})
    with pytest.raises(ProviderError, match=r"\(gave up after 2 attempts\)"):
        ev.sweep(specs, str(tmp_path), policy_factory=factory, retries=1, backoff=0)
    assert [r["seed"] for r in lines_of(tmp_path)] == [0, 1, 2]
    assert [len(c.requests) for name, c in factory.clients if name == "openai:flaky"] == [2]  # nothing ran after it


# -- interruption ----------------------------------------------------------------------------
def test_an_interrupted_concurrent_sweep_resumes_with_every_session_once(tmp_path):
    specs = specs_for(range(60))

    def interrupt(done, total, spec):
        if done >= 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ev.sweep(specs, str(tmp_path), policy_factory=MockFactory(**FAULTY), progress=interrupt, concurrency=8, backoff=0)
    # The interrupted event loop's task keeps the KeyboardInterrupt until it is
    # collected, and its finalizer then logs it. Collect it here: run later, inside
    # another test's compile() (griffe parsing modules in test_docs), that finalizer
    # broke CPython's AST builder ("AST constructor recursion depth mismatch").
    gc.collect()
    before = (tmp_path / ev.SESSIONS_FILE).read_bytes()
    first = lines_of(tmp_path)
    assert 20 <= len(first) < 60 and len({key_of(r) for r in first}) == len(first)
    ev.sweep(specs, str(tmp_path), policy_factory=MockFactory(**FAULTY), concurrency=8, backoff=0)
    assert (tmp_path / ev.SESSIONS_FILE).read_bytes().startswith(before)  # nothing written before is touched
    records = lines_of(tmp_path)
    assert len(records) == 60 and {key_of(r) for r in records} == {ev.session_key(s) for s in specs}


SWEEP_SCRIPT = """
import itertools, signal, sys
# A child inherits an ignored SIGINT from a parent that ignores it (a test
# worker may), and Python then installs no KeyboardInterrupt handler: restore it.
signal.signal(signal.SIGINT, signal.default_int_handler)
from luca_gym import harness as ev
from luca_gym.llm.providers import OpenAIChatAgent
from luca_gym.llm.mock import MockClient
from luca_gym.worlds.luca.evaluation import luca_spec

seeds = itertools.count()
factory = lambda name: OpenAIChatAgent("mock", client=MockClient(seed=next(seeds), latency=0.1, fail_rate=0.1))
try:
    ev.sweep(ev.plan_world("luca", ["openai:mock"], range(80), tier=["easy"], mode=["healthy"], n_genes=[20]), sys.argv[1], policy_factory=factory,
             concurrency=8, backoff=0)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


def test_ctrl_c_stops_a_concurrent_sweep_at_once_and_a_rerun_completes_it(tmp_path):
    """SIGINT while 8 sessions wait on a slow provider: the process exits
    without waiting for them, every line on file is whole, and a rerun runs
    exactly the sessions left."""
    out = tmp_path / "results"
    path = out / ev.SESSIONS_FILE
    proc = subprocess.Popen([sys.executable, "-c", SWEEP_SCRIPT, str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        signal_after_lines(proc, path, 8, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and stdout.strip() == "interrupted", (stdout, stderr[-2000:])
    first = lines_of(out)
    assert 8 <= len(first) < 80 and len({key_of(r) for r in first}) == len(first)
    specs = specs_for(range(80))
    ev.sweep(specs, str(out), policy_factory=MockFactory(), concurrency=16, backoff=0)
    records = lines_of(out)
    assert len(records) == 80 and {key_of(r) for r in records} == {ev.session_key(s) for s in specs}


# -- provider answers in the wrong shape ---------------------------------------------------
class OneAnswer:
    """A client that answers ``response`` first, then a well-formed ``end``."""

    def __init__(self, response):
        self.responses = [response, openai_response([{"id": "c_end", "function": {"name": "end", "arguments": "{}"}}])]
        self.requests = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):
        self.requests.append(request)
        return self.responses.pop(0)


def openai_response(tool_calls, content=None, **extra):
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    return {"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}, **extra}


@pytest.mark.parametrize(("function", "error"), [
    ({"name": "get_organism_info", "arguments": [1, 2]}, "arguments: expected a JSON object or a dict, got list"),
    ({"name": "get_organism_info", "arguments": "[1, 2]"}, "arguments: expected a JSON object, got list"),
    ({"name": "run_experiment", "arguments": 7}, "arguments: expected a JSON object or a dict, got int"),
    ({"name": "run_experiment", "arguments": "{'G001': 1"}, "arguments: not valid JSON"),
    ({"arguments": "{}"}, "unknown tool: the name must be a string, got NoneType"),
    ({"name": ["end"], "arguments": "{}"}, "unknown tool: the name must be a string, got list"),
    (None, "unknown tool: the name must be a string, got NoneType"),
])
def test_a_malformed_tool_call_is_the_agents_error_in_the_call_log(function, error):
    client = OneAnswer(openai_response([{"id": "c1", "type": "function", "function": function}]))
    session = ToolSession(0, tier=TIER)
    record = run_agent(OpenAIChatAgent("m", client=client), session, backoff=0)
    first = record["calls"][0]
    assert first["result"]["error"].startswith(error) and first["result"]["budget_remaining"] == 31
    assert [c["call"] for c in record["calls"]][1:] == ["end"] and record["end_reason"] == "end"
    assert record["usage"]["failed_calls"] == [] and record["usage"]["input_tokens"] == 20
    echoed = client.requests[1]["messages"][2]["tool_calls"][0]["function"]  # what goes back to the provider
    assert isinstance(echoed["name"], str) and isinstance(echoed["arguments"], str)
    json.dumps(client.requests[1]["messages"], allow_nan=False)


@pytest.mark.parametrize(("response", "what"), [
    ({"usage": {"prompt_tokens": 10, "completion_tokens": 2}}, "no choices"),
    ({"choices": []}, "choices is a list, not a non-empty list"),
    ({"choices": "oops"}, "choices is a str, not a non-empty list"),
    ({"choices": [{}]}, "choices[0] has no message"),
    (openai_response("get_organism_info"), "message.tool_calls is a str, not a list"),
    (openai_response({"name": "end"}), "message.tool_calls is a dict, not a list"),
    (openai_response(None, content=12), "message.content is a int, not text"),
    (openai_response(None, content={"text": "hi"}), "message.content is a dict, not text"),
    ("not a response", "no choices"),
    (None, "no choices"),
])
def test_an_unreadable_answer_is_a_failed_call_retried(response, what):
    client = OneAnswer(response)
    session = ToolSession(0, tier=TIER)
    record = run_agent(OpenAIChatAgent("m", client=client), session, backoff=0)
    assert record["usage"]["failed_calls"] == [{"turn": 0, "attempt": 0, "error": f"openai:m: malformed response: {what}"}]
    assert record["usage"]["retries"] == 1 and record["usage"]["provider_calls"] == 2
    assert [c["call"] for c in record["calls"]] == ["end"]  # the unreadable answer reached no session
    assert client.requests[0]["messages"] == client.requests[1]["messages"]
    reported = isinstance(response, dict) and "usage" in response
    assert record["usage"]["input_tokens"] == (20 if reported else 10)  # a malformed answer's tokens count


def test_text_parts_are_read_as_text():
    parts = [{"type": "text", "text": "thinking "}, {"type": "text", "text": "aloud"}]
    client = OneAnswer(openai_response([{"id": "c1", "function": {"name": "get_organism_info", "arguments": "{}"}}], content=parts))
    record = run_agent(OpenAIChatAgent("m", client=client), ToolSession(0, tier=TIER), backoff=0)
    assert record["messages"][2]["content"] == "thinking aloud" and record["usage"]["failed_calls"] == []


@pytest.mark.parametrize(("content", "failed"), [
    ([{"type": "tool_use", "id": "t1", "name": "get_organism_info", "input": [1]}], None),
    ([{"type": "tool_use", "id": "t1", "input": {}}], None),
    ([{"type": "tool_use", "name": "get_organism_info", "input": "[]"}], None),
    ([{"type": "text", "text": 5}], "a text block's text is a int, not text"),
    ("oops", "content is a str, not a list of blocks"),
    (None, "content is missing, not a list of blocks"),
])
def test_anthropic_answers_in_the_wrong_shape(content, failed):
    answers = [{"content": content}, {"content": [{"type": "tool_use", "id": "t9", "name": "end", "input": {}}]}]
    requests = []
    client = SimpleNamespace(messages=SimpleNamespace(create=lambda **kw: requests.append(kw) or answers.pop(0)))
    record = run_agent(AnthropicAgent("m", client=client), ToolSession(0, tier=TIER), backoff=0)
    assert record["calls"][-1]["call"] == "end" and record["end_reason"] == "end"
    if failed:
        assert [f["error"] for f in record["usage"]["failed_calls"]] == [f"anthropic:m: malformed response: {failed}"]
    else:
        assert record["usage"]["failed_calls"] == [] and "error" in record["calls"][0]["result"]
        echoed = requests[1]["messages"][1]["content"]
        assert all(isinstance(b["input"], dict) for b in echoed if b["type"] == "tool_use")


# -- the command line ------------------------------------------------------------------------
def test_eval_runs_concurrently_from_the_command_line(monkeypatch, tmp_path, capsys):
    factory = MockFactory(**FAULTY)
    monkeypatch.setattr(ev, "make_runner", lambda name, base_url=None, world="luca": factory(name))
    argv = ["eval", "--agents", "openai:mock", "--tiers", TIER, "--modes", MODE, "--seeds", "0-11", "--out", str(tmp_path),
            "--quiet", "--concurrency", "4", "--retries", "8", "--backoff", "0", "--price", "2.5,10"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    records = lines_of(tmp_path)
    assert len(records) == 12 and all(r["cost_usd"] is not None for r in records)
    total = sum(r["cost_usd"] for r in records)
    usage_line = next(line for line in out.splitlines() if line.startswith("usage:"))
    assert "12 tool-calling session(s)" in usage_line and f"cost ${total:.4f}" in usage_line
    assert f"{sum(r['usage']['provider_calls'] for r in records)} provider calls" in usage_line


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--concurrency", "0", "--concurrency: 0; allowed an integer >= 1"),
    ("--retries", "-1", "--retries: -1; allowed an integer >= 0"),
    ("--backoff", "-2", "--backoff: -2.0; allowed a number of seconds >= 0"),
    ("--price", "2.5", "--price: '2.5'; allowed IN,OUT"),
    ("--price", "a,b", "--price: 'a,b'; allowed IN,OUT"),
])
def test_bad_eval_flags_are_one_line(tmp_path, capsys, flag, value, message):
    out = tmp_path / "out"
    argv = ["eval", "--agents", "random", "--tiers", TIER, "--seeds", "0", "--out", str(out), "--quiet", "--sealed", flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()  # refused before anything is written, a drawn secret included
