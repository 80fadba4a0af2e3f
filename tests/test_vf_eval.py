"""``vf-eval`` end to end, as documented: ``vf-eval luca_gym.integrations.verifiers
-a '{"world": "dag", ...}'`` drives a fake OpenAI-compatible chat-completions
server (the stdlib's http.server on 127.0.0.1, an ephemeral port, answering
dag's tools from a fixed script: intervene, then submit_graph) in a
``vf-eval`` subprocess, with verifiers' env server (the default: a spawned
process that reloads the environment by its ``env_id`` and ``env_args``) and
with ``--disable-env-server``. The run exits 0, the server saw the tool calls
answered, and the saved results hold the session's reward and record. Every
run has a timeout, so a worker that cannot reload the environment fails the
test instead of hanging it."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from chat_server import PROXY_VARIABLES, ChatServer, completion, tool_message, turn_of

vf = pytest.importorskip("verifiers", reason='verifiers is not installed (pip install "luca-gym[verifiers]")')
if not hasattr(vf, "MultiTurnEnv"):
    pytest.skip(f"verifiers {getattr(vf, '__version__', '?')} lacks the MultiTurnEnv API the adapter needs (0.2.0)",
                allow_module_level=True)

from verifiers.utils.save_utils import make_serializable  # noqa: E402

from luca_gym.integrations.verifiers import ENV_ID, load_environment  # noqa: E402

MODULE = "luca_gym.integrations.verifiers"
MODEL, KEY_VAR, KEY = "fake-model", "LUCA_GYM_TEST_VF_KEY", "sk-dummy-vf-eval-0123456789"
N = 3  # dag nodes
EMPTY = [[0] * N for _ in range(N)]
SCRIPT = [  # the "model": its text and tool call at each assistant turn; then text only
    ("I intervene on molecule 0 and guess the graph has no edges.", "intervene", {"molecule": 0, "adjacency": EMPTY}),
    ("I submit the empty graph.", "submit_graph", {"adjacency": EMPTY}),
]
DONE = "Done."
MAX_REQUESTS = 20  # beyond this the server refuses, so a runaway loop ends
SOCKET_TIMEOUT_S = 10.0
RUN_TIMEOUT_S = 240  # one vf-eval run (a cold import of verifiers and datasets on a busy machine is slow)
VF_EVAL = Path(sys.executable).with_name("vf-eval")


class ScriptServer(ChatServer):
    """POST /v1/chat/completions answers from :data:`SCRIPT`."""

    def answer(self, path: str, authorization, body: dict) -> tuple[int, dict]:
        n = len(self.requests) - 1
        refusal = self.refused(path, authorization, body, key=KEY, max_requests=MAX_REQUESTS, model=MODEL)
        if refusal:
            return refusal
        turn = turn_of(body)
        message = tool_message(turn, *SCRIPT[turn]) if turn < len(SCRIPT) else {"role": "assistant", "content": DONE}
        return 200, completion(n, MODEL, message, 100, 10)


@pytest.fixture
def server():
    fake = ScriptServer(timeout_s=SOCKET_TIMEOUT_S)
    yield fake
    fake.stop()


def run_vf_eval(server: ScriptServer, out: Path, *more: str) -> subprocess.CompletedProcess:
    """``vf-eval`` on dag (one row, one rollout) against ``server``, saving its
    results under ``out``; killed (a test failure) past :data:`RUN_TIMEOUT_S`."""
    env = {k: v for k, v in os.environ.items()
           if k not in PROXY_VARIABLES}
    env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", KEY_VAR: KEY,
                "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    args = {"world": "dag", "n_nodes": N, "seeds": [0], "max_turns": 5}
    command = [str(VF_EVAL) if VF_EVAL.exists() else "vf-eval", MODULE, "-a", json.dumps(args),
               "--api-base-url", server.url, "--api-key-var", KEY_VAR, "--model", MODEL,
               "--api-client-type", "openai_chat_completions", "--num-examples", "1", "--rollouts-per-example", "1",
               "--max-concurrent", "1", "--max-retries", "0", "--timeout", "120", "--disable-tui",
               "--state-columns", "luca_gym", "--save-results", "--output-dir", str(out), *more]
    # its own session, so a run past the timeout is killed with the env server and workers it spawned
    process = subprocess.Popen(command, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = process.communicate(timeout=30)
        pytest.fail(f"vf-eval ran past {RUN_TIMEOUT_S} s (hung?); its output ends:\n{_tail(stdout)}\n{_tail(stderr)}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _tail(text, n: int = 4000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-n:]


@pytest.mark.slow
@pytest.mark.parametrize("env_server", [True, False], ids=["env-server", "disable-env-server"])
def test_vf_eval_plays_dag_against_an_openai_compatible_server(server, tmp_path, env_server):
    run = run_vf_eval(server, tmp_path, *([] if env_server else ["--disable-env-server"]))
    assert run.returncode == 0, f"vf-eval exited {run.returncode}:\n{_tail(run.stdout)}\n{_tail(run.stderr)}"

    # the server was asked for the scripted turns, offered dag's tools, and shown each call's answer
    assert len(server.requests) == len(SCRIPT), [len(r.get("messages", [])) for r in server.requests]
    offered = {t["function"]["name"] for t in server.requests[0].get("tools", [])}
    assert {"intervene", "submit_graph"} <= offered
    last = server.requests[-1]["messages"]
    calls = [c["function"]["name"] for m in last if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    answers = [json.loads(m["content"]) for m in last if m.get("role") == "tool"]
    assert calls == ["intervene"] and len(answers) == 1 and "error" not in answers[0], answers

    # the saved rollout: the session ended by the submission, its return the reward
    results = list(tmp_path.rglob("results.jsonl"))
    assert len(results) == 1, results
    rows = [json.loads(line) for line in results[0].read_text().splitlines() if line.strip()]
    assert len(rows) == 1
    row = rows[0]
    assert isinstance(row.get("reward"), (int, float)), sorted(row)
    record = row["luca_gym"]  # the session's own record (a state column)
    assert record["return"] == row["reward"] and record["calls"] == len(SCRIPT), record
    assert record["end_reason"] == "end" and not row.get("error"), record  # submit_graph ended the session
    metadata = json.loads((results[0].parent / "metadata.json").read_text())
    assert metadata["env_id"] == MODULE and metadata["env_args"]["world"] == "dag"
    tool_messages = [m for m in row["completion"] if m.get("role") == "tool"]
    assert len(tool_messages) == len(SCRIPT)
    assert "error" not in json.loads(tool_messages[-1]["content"])


@pytest.mark.parametrize("given", [
    {"world": "dag", "n_nodes": N, "num_examples": 2},
    {"world": "dag", "n_nodes": N, "seeds": [5, 3], "max_turns": 7, "sealed": "a vf-eval test secret, 32 chars"},
], ids=["num_examples", "seeds-sealed"])
def test_env_id_and_env_args_rebuild_the_same_environment_as_verifiers_workers_do(given):
    """What an env server's worker does (``vf.load_environment(env_id, **env_args)``,
    its arguments pickled to a spawned process) rebuilds the same rows, and the
    saved env_args (metadata.json) never hold a secret."""
    env = load_environment(**given)
    assert env.env_id == ENV_ID == MODULE
    env_id, env_args = pickle.loads(pickle.dumps((env.env_id, env.env_args)))
    again = vf.load_environment(env_id, **env_args)
    assert (again.env_id, again.turn_limit) == (env.env_id, env.turn_limit)
    assert again.get_eval_dataset().to_list() == env.get_eval_dataset().to_list()
    saved = json.dumps(env.env_args, default=make_serializable)
    assert json.loads(saved)["world"] == "dag"
    if "sealed" in given:
        assert given["sealed"] not in saved and "fingerprint" in saved

