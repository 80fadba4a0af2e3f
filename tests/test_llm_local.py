"""A model served locally, as a user with a laptop meets it: ``luca-gym eval
--agents openai:MODEL --base-url URL`` against an OpenAI-compatible server on
127.0.0.1 (``chat_server``) that answers as llama.cpp's ``llama-server`` does
when things go wrong, and the command line's request settings.

- A server 500 on a cut-off tool call ("Failed to parse tool call arguments
  as JSON") that outlasts the retries ends that session as the model's
  failure (``end_reason`` ``model_error``, the error kept, scored); the
  sweep records it and goes on. A 503 (the service's outage) is still left
  unrecorded.
- ``--max-turns``, ``--max-tokens``, ``--temperature``, ``--model-seed``,
  ``--tool-choice``, ``--request-timeout``: sent with every call, kept in
  each line (``request``) and in the cassette's key; a bad value is one line
  and exit 2.
- A server that never returns a tool call gets a warning naming the likely
  causes; ``luca-gym check-model`` makes one call and says what came back;
  a wrong port fails in seconds (a TCP check before any request).
- ``finish_reason`` in the transcript; ``show --transcript`` prints
  arguments sent as JSON text as JSON and ends with a newline.
"""

from __future__ import annotations

import json

import pytest
from chat_server import PROXY_VARIABLES, ChatServer, completion, error, tool_message, turn_of

pytest.importorskip("openai", reason='the openai SDK is not installed (pip install "luca-gym[llm]")')

from luca_gym import harness as ev  # noqa: E402
from luca_gym.cli import main  # noqa: E402

MODEL = "local-model"
N = 3  # dag nodes
EMPTY = [[0] * N for _ in range(N)]
SCRIPT = [("intervene", {"molecule": 0, "adjacency": EMPTY}), ("intervene", {"molecule": 1, "adjacency": EMPTY}),
          ("submit_graph", {"adjacency": EMPTY})]
CUT_OFF = "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] unexpected end of input"
MAX_REQUESTS = 60


class LocalServer(ChatServer):
    """Answers :data:`SCRIPT`, turn by turn; ``fail(body, n)`` (``n``: the
    request's number, from 0) may answer an error instead (status, message);
    ``text_only`` answers every turn in text."""

    def __init__(self, fail=None, text_only: bool = False, finish_reason: str | None = None):
        self.fail, self.text_only, self.finish_reason = fail, text_only, finish_reason
        super().__init__()

    def answer(self, path, authorization, body):
        n = len(self.requests) - 1
        if n >= MAX_REQUESTS or path != "/v1/chat/completions":
            return error(400, "the test's server refuses more")
        failure = self.fail(body, n) if self.fail else None
        if failure:
            return error(*failure, kind="server_error")
        turn = turn_of(body)
        if self.text_only or turn >= len(SCRIPT):
            message = {"role": "assistant", "content": "I think the answer is an empty graph."}
        else:
            message = tool_message(turn, None, *SCRIPT[turn])
        answer = completion(n, body.get("model"), message, 100 + turn, 9)
        if self.finish_reason:
            answer["choices"][0]["finish_reason"] = self.finish_reason
        return 200, answer


@pytest.fixture
def served(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    servers = []

    def start(**kwargs) -> LocalServer:
        servers.append(LocalServer(**kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def eval_args(url, out, *more, seeds="0-1") -> list[str]:
    return ["eval", "--world", "dag", "--agents", f"openai:{MODEL}", "--base-url", url, "--set", f"n_nodes={N}",
            "--seeds", seeds, "--backoff", "0", "--retries", "1", "--out", str(out), "--quiet", *more]


def lines_of(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / ev.SESSIONS_FILE).read_text().splitlines()]


# -- a malformed turn is the model's failure --------------------------------------------------------
def test_a_cut_off_tool_call_ends_that_session_as_the_models_failure_and_the_sweep_goes_on(served, tmp_path, capsys):
    # requests 1 and 2: the first session's second turn and its one retry; the server cannot parse what the model generated
    server = served(fail=lambda body, n: (500, CUT_OFF) if n in (1, 2) else None)
    assert main(eval_args(server.url, tmp_path / "run")) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "model errors: 1 session(s)" in err
    first, second = lines_of(tmp_path / "run")
    assert first["end_reason"] == "model_error" and CUT_OFF[:40] in first["model_error"]
    assert "gave up after 2 attempts" in first["model_error"]  # --retries 1: the call was made twice
    assert [f["error"][:60] for f in first["usage"]["failed_calls"]] == [f"openai:{MODEL} at {server.url}: InternalServerError"[:60]] * 2
    assert first["scores"] is not None and first["scores"]["success"] in (0.0, 1.0)  # scored like any ended session
    assert [c["call"] for c in first["calls"]] == ["intervene", "end"]  # its one accepted turn, then the harness's end
    closing = [m for m in first["messages"] if m.get("harness")]
    assert [m["harness"] for m in closing] == ["model_error"]
    assert second["seed"] == 1 and second["end_reason"] != "model_error" and "model_error" not in second


def test_an_outage_past_the_retries_still_leaves_the_session_unrecorded(served, tmp_path, capsys):
    server = served(fail=lambda body, n: (503, "Service Unavailable: loading model"))
    assert main(eval_args(server.url, tmp_path / "run", seeds="0")) == 1
    assert "completed sessions are saved and a rerun resumes" in capsys.readouterr().err
    assert not (tmp_path / "run" / ev.SESSIONS_FILE).exists() or lines_of(tmp_path / "run") == []


def test_a_conversation_past_the_context_is_the_models_failure(served, tmp_path, capsys):
    message = "the request exceeds the available context size, try increasing it"
    server = served(fail=lambda body, n: (400, message) if turn_of(body) == 2 else None)
    assert main(eval_args(server.url, tmp_path / "run", seeds="0")) == 0, capsys.readouterr().err
    (record,) = lines_of(tmp_path / "run")
    if record["end_reason"] == "model_error":  # unless the instance was solved sooner
        assert message in record["model_error"] and len(record["usage"]["failed_calls"]) == 1  # a 400 is not retried


# -- request settings --------------------------------------------------------------------------------
def test_request_settings_are_sent_recorded_and_in_the_cassettes_key(served, tmp_path, capsys):
    server = served(finish_reason="length")
    cassette = tmp_path / "cassette.jsonl"
    settings = ["--max-tokens", "256", "--temperature", "0", "--model-seed", "7", "--tool-choice", "required",
                "--request-timeout", "30", "--max-turns", "2"]
    assert main(eval_args(server.url, tmp_path / "run", *settings, "--record-responses", str(cassette), seeds="0")) == 0, \
        capsys.readouterr().err
    out = capsys.readouterr().out
    assert "request: max_tokens 256, temperature 0.0, seed 7, tool_choice required, timeout 30.0, max_turns 2" in out
    body = server.requests[0]
    assert (body["max_tokens"], body["temperature"], body["seed"], body["tool_choice"]) == (256, 0.0, 7, "required")
    (record,) = lines_of(tmp_path / "run")
    assert record["request"] == {"max_tokens": 256, "temperature": 0.0, "seed": 7, "tool_choice": "required",
                                 "timeout": 30.0, "max_turns": 2}
    turns = [m for m in record["messages"] if m["role"] == "assistant" and not m.get("harness")]
    assert len(turns) == 2 and record["end_reason"] == "turn_limit"  # --max-turns 2
    assert [m["finish_reason"] for m in turns] == ["length", "length"]  # kept in the transcript
    entry = json.loads(cassette.read_text().splitlines()[0])
    assert entry["request"]["max_tokens"] == 256 and "timeout" not in entry["request"]  # a transport setting: not in the key

    # the replay: the same settings reproduce the run; another temperature is another request (exit 2, as the help says)
    asked = len(server.requests)
    assert main(eval_args(server.url, tmp_path / "again", *settings, "--replay-responses", str(cassette), seeds="0")) == 0
    assert len(server.requests) == asked and lines_of(tmp_path / "again")[0]["scores"] == record["scores"]
    capsys.readouterr()
    other = [s if s != "0" else "0.5" for s in settings]
    assert main(eval_args(server.url, tmp_path / "other", *other, "--replay-responses", str(cassette), seeds="0")) == 2
    assert "no recorded response" in capsys.readouterr().err

    # resuming the folder under other settings is refused by file and line
    assert main(eval_args(server.url, tmp_path / "run", "--max-tokens", "64", seeds="0-1")) == 2
    assert "written with request=" in capsys.readouterr().err


@pytest.mark.parametrize("flags, says", [
    (["--max-tokens", "0"], "--max-tokens: 0; allowed an integer >= 1"),
    (["--temperature", "-1"], "--temperature: -1.0; allowed a number >= 0"),
    (["--temperature", "nan"], "--temperature: nan"),
    (["--tool-choice", "a tool"], "--tool-choice: 'a tool'; allowed auto, required, none or a tool's name"),
    (["--request-timeout", "0"], "--request-timeout: 0.0; allowed a number of seconds > 0"),
    (["--max-turns", "0"], "--max-turns: 0; allowed an integer >= 1"),
])
def test_a_bad_request_setting_is_one_line_and_exit_2(flags, says, tmp_path, capsys):
    args = ["eval", "--world", "dag", "--agents", "mock", "--seeds", "0", "--out", str(tmp_path / "r"), "--quiet", *flags]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_request_settings_need_a_model_that_takes_them(tmp_path, capsys):
    base = ["eval", "--world", "dag", "--seeds", "0", "--out", str(tmp_path / "r"), "--quiet"]
    assert main([*base, "--agents", "random", "--temperature", "0"]) == 2
    assert "--temperature: no openai:MODEL, anthropic:MODEL or mock agent" in capsys.readouterr().err
    assert main([*base, "--agents", "anthropic:claude-x", "--model-seed", "1"]) == 2
    assert "--model-seed: 1; anthropic:claude-x takes no sampling seed" in capsys.readouterr().err


# -- no tool calls, and checking an endpoint first ---------------------------------------------------
def test_a_server_that_never_returns_tool_calls_gets_a_warning_that_says_why(served, tmp_path, capsys):
    server = served(text_only=True)
    assert main(eval_args(server.url, tmp_path / "run")) == 0
    err = capsys.readouterr().err
    assert "warning: all 2 model session(s) ended on turn 1 with no tool call" in err
    assert "--jinja" in err and "tool_choice" in err and "luca-gym check-model" in err
    assert {r["end_reason"] for r in lines_of(tmp_path / "run")} == {"no_tool_call"}


def test_check_model_makes_one_call_and_says_what_came_back(served, capsys):
    calling, talking = served(), served(text_only=True)
    assert main(["check-model", "--model", MODEL, "--base-url", calling.url, "--max-tokens", "64"]) == 0
    out = capsys.readouterr().out
    assert "server: answered" in out and "tool call: intervene(" in out and "can run eval" in out
    assert len(calling.requests) == 1 and calling.requests[0]["max_tokens"] == 64
    assert calling.requests[0]["tools"][0]["function"]["name"] == "record_number"
    assert main(["check-model", "--model", MODEL, "--base-url", talking.url]) == 1
    out = capsys.readouterr().out
    assert "tool call: none" in out and "--jinja" in out and "text: 'I think" in out


def test_a_wrong_port_fails_at_once_with_one_line(served, tmp_path, capsys):
    server = served()
    url = server.url
    server.stop()  # nothing listens there now
    assert main(["check-model", "--model", MODEL, "--base-url", url]) == 1
    assert "no server at 127.0.0.1:" in capsys.readouterr().out
    assert main(eval_args(url, tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert "--base-url: no server at 127.0.0.1:" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


# -- the transcript ----------------------------------------------------------------------------------
def test_show_transcript_prints_string_arguments_as_json_and_ends_with_a_newline(served, tmp_path, capsys):
    server = served()
    assert main(eval_args(server.url, tmp_path / "run", seeds="0")) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path / "run"), "--seed", "0", "--agent", f"openai:{MODEL}", "--set", f"n_nodes={N}",
                 "--transcript"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and not out.endswith("\n\n")
    assert '-> intervene({"molecule": 0, "adjacency": [[0, 0, 0], [0, 0, 0], [0, 0, 0]]})' in out  # not a quoted string
    assert "finish_reason tool_calls" in out


def test_transcript_text_of_a_record_without_messages_ends_with_a_newline():
    from luca_gym.results.transcripts import arguments_text, transcript_text

    assert transcript_text({"world": "dag", "agent": "random", "seed": 0, "calls": [{"call": "end"}]}).endswith("end)\n")
    assert arguments_text('{"a": [1, 2]}') == '{"a": [1, 2]}' and arguments_text("{'a': None") == "{'a': None"


def test_a_replay_does_not_wait_out_the_recorded_retries(served, tmp_path, monkeypatch, capsys):
    from luca_gym import harness

    server = served(fail=lambda body, n: (503, "Service Unavailable") if n == 0 else None)  # the first call fails once
    cassette = tmp_path / "cassette.jsonl"
    assert main(eval_args(server.url, tmp_path / "run", "--record-responses", str(cassette), seeds="0")) == 0
    sweep, waits = harness.sweep, []
    monkeypatch.setattr(harness, "sweep", lambda *a, **k: waits.append(k["backoff"]) or sweep(*a, **k))
    replay = eval_args(server.url, tmp_path / "replayed", seeds="0")
    replay[replay.index("--backoff") + 1] = "60"  # a recorded retry would wait 30 s or more
    assert main([*replay, "--replay-responses", str(cassette)]) == 0, capsys.readouterr().err
    assert waits == [0]
    (recorded,), (replayed,) = lines_of(tmp_path / "run"), lines_of(tmp_path / "replayed")
    assert replayed["usage"]["retries"] == recorded["usage"]["retries"] == 1 and replayed["scores"] == recorded["scores"]


def test_a_call_cut_off_mid_json_goes_back_to_the_server_as_a_json_object():
    """llama.cpp parses the arguments of the calls it is sent back: a call the
    token cap cut (kept as it came in the transcript, refused by the session)
    is echoed wrapped in an object, so the next turn is not a 500."""
    from luca_gym.llm.providers import _anthropic_messages, _openai_messages

    cut = '{\n  "molecule": 2,\n  "adjacency": [[0, 1, 0], [0, 1,'
    calls = [{"id": "c0", "name": "intervene", "arguments": cut}, {"id": "c1", "name": "intervene", "arguments": "[1, 2]"},
             {"id": "c2", "name": "intervene", "arguments": {"molecule": 0}}, {"id": "c3", "name": "intervene", "arguments": 42}]
    (message,) = _openai_messages([{"role": "assistant", "content": None, "tool_calls": calls}])
    sent = [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]]
    assert sent == [{"_unparsed": cut}, {"_unparsed": "[1, 2]"}, {"molecule": 0}, {"_unparsed": "42"}]
    _, (anthropic,) = _anthropic_messages([{"role": "assistant", "content": None, "tool_calls": calls}])
    assert [b["input"] for b in anthropic["content"]] == sent
