"""Transcripts beyond the harness's loop, in the one format of a results
line's ``messages`` (built by :mod:`luca_gym.llm.loop`'s helpers): every
world's text env (``env.unwrapped.transcript``, and ``info["transcript"]``
at the step that ends the session) and ``luca-gym play``'s shell
(``PlayShell.messages``). Only what the agent was shown and what it sent."""

from __future__ import annotations

import io
import json

import gymnasium as gym
import pytest

from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.llm.loop import ScriptedAgent, run_agent
from luca_gym.results.transcripts import transcript_text

ENV_IDS = {"dag": "luca_gym/DagDiscoveryTools-v0", "equation": "luca_gym/EquationDiscoveryTools-v0",
           "tracking": "luca_gym/StateTrackingTools-v0"}
SEED = 3


def action(name, arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def play_env(world: str, actions: list[str]):
    env = gym.make(ENV_IDS[world])
    obs, _ = env.reset(options={"instance_seed": SEED})
    infos = []
    for text in actions:
        obs, _, terminated, truncated, info = env.step(text)
        infos.append(info)
        if terminated or truncated:
            break
    return env, obs, infos


@pytest.mark.parametrize("world", sorted(ENV_IDS))
def test_the_text_envs_transcript_is_the_harness_format_and_the_same_session(world):
    session = load(worlds.get(world).tools)(SEED)
    calls = session.demo_calls()
    # what a text agent sends: a line that is not a call and a refused call first, then the demo
    actions = ["I think I will look around first.", action("no_such_tool", {}), *(action(n, a) for n, a in calls)]
    env, obs, infos = play_env(world, actions)
    transcript = env.unwrapped.transcript
    assert infos[-1]["transcript"] == transcript and all("transcript" not in i for i in infos[:-1])
    assert transcript[:2] == [{"role": "system", "content": session.system_prompt()},
                              {"role": "user", "content": session.opening}]
    # the text that is not a call: the action verbatim, no tool call, the refusal as a user message
    said, refusal = transcript[2:4]
    assert said == {"role": "assistant", "content": actions[0], "tool_calls": []}
    assert refusal["role"] == "user" and "error" in json.loads(refusal["content"])
    steps = transcript[4:]
    assert len(steps) == 2 * (len(infos) - 1)
    record = env.unwrapped.session.record()
    assert len(record["calls"]) == len(infos) - 1  # the text that is not a call is no call
    for i, (call, result, text, info, logged) in enumerate(zip(steps[::2], steps[1::2], actions[1:], infos[1:], record["calls"])):
        assert call["role"] == "assistant" and call["content"] == text  # verbatim
        [entry] = call["tool_calls"]
        assert (entry["name"], entry["arguments"]) == (json.loads(text)["name"], json.loads(text)["arguments"])
        assert result["role"] == "tool" and result["tool_call_id"] == entry["id"] and result["name"] == entry["name"]
        assert json.loads(result["content"]) == info["result"] == logged["result"]
        assert result["is_error"] == ("error" in info["result"])
    assert steps[1]["is_error"] is True  # the unknown tool
    # the same calls through the harness's loop: the same opening and the same results
    harness = run_agent(ScriptedAgent([("no_such_tool", {}), *calls]), load(worlds.get(world).tools)(SEED))
    assert harness["messages"][:2] == transcript[:2]
    assert [json.loads(m["content"]) for m in harness["messages"] if m["role"] == "tool"] == \
        [json.loads(m["content"]) for m in steps if m["role"] == "tool"]
    # shown only: every message the env wrote is in the observation the agent read
    for m in transcript:
        if m["role"] != "assistant":
            assert m["content"] in obs
    text = transcript_text({"world": world, "agent": "text-env", "seed": SEED, "messages": transcript})
    assert f"-> {calls[-1][0]}(" in text and "(error)" in text


def test_the_transcript_is_a_copy_reset_starts_a_new_one_and_odd_actions_are_kept_bounded():
    env = gym.make(ENV_IDS["dag"])
    assert env.unwrapped.transcript == []
    env.reset(options={"instance_seed": SEED})
    env.step(action("get_observations", {}))
    env.unwrapped.transcript.append({"role": "user", "content": "tampered"})
    env.unwrapped.transcript[2]["content"] = "tampered"
    assert len(env.unwrapped.transcript) == 4 and env.unwrapped.transcript[2]["content"] != "tampered"
    env.step(12345)  # not text: quoted as the observation quotes it
    env.step("x" * 200_000)  # longer than the action space: cut as the observation cuts it
    said = [m for m in env.unwrapped.transcript if m["role"] == "assistant"]
    assert said[1]["content"] == json.dumps("12345") and said[2]["content"].endswith("...<truncated>")
    assert len(said[2]["content"]) < 5000
    json.dumps(env.unwrapped.transcript)  # JSON-ready, as a results line
    env.reset(options={"instance_seed": SEED + 1})
    assert [m["role"] for m in env.unwrapped.transcript] == ["system", "user"]


def test_lucas_text_env_gives_the_transcript_at_the_step_its_call_limit_ends_the_session():
    env = gym.make("luca_gym/LucaTools-v0", tier="easy", mode="disease", max_steps=3)
    env.reset(options={"organism_seed": 0})
    gene = env.unwrapped.session.targetable_genes[0]
    for _ in range(10):
        _, _, terminated, truncated, info = env.step(action("run_experiment", {"interventions": {gene: {"type": "BLOCK"}}}))
        if terminated or truncated:
            break
    assert truncated and info["result"]["ended"]
    transcript = info["transcript"]
    assert transcript == env.unwrapped.transcript and [m["role"] for m in transcript] == ["system", "user"] + ["assistant", "tool"] * 3
    assert json.loads(transcript[-1]["content"]) == info["result"]


# -- play ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def luca_env():
    from luca_gym.worlds.luca.tools import ToolSession

    return ToolSession(0, tier="easy", mode="disease", n_genes=20).env


def play(luca_env, lines, json_output=False):
    from luca_gym.worlds.luca.play import PlayShell
    from luca_gym.worlds.luca.tools import ToolSession

    session = ToolSession(0, tier="easy", mode="disease", n_genes=20, env=luca_env)
    stdout = io.StringIO()
    shell = PlayShell(session, stdin=io.StringIO("".join(f"{line}\n" for line in lines)), stdout=stdout,
                      json_output=json_output)
    assert shell.run() == 0
    return shell, session, stdout.getvalue()


def test_plays_transcript_holds_each_typed_line_and_what_answered_it(luca_env):
    lines = ["help", "info", "bogus G001", "", "experiment G002=BLOCK", "predict 0.5 0.5", "predict 0.5 0.5 0.5", "task",
             "end", "experiment G003=BLOCK"]
    shell, session, out = play(luca_env, lines)
    messages = shell.messages
    assert messages[0] == {"role": "user", "content": "\n".join(out.splitlines()[:2])}  # the banner as shown
    assert messages[0]["content"].startswith("LUCA easy disease: organism org_00000000")
    said = [m for m in messages if m["role"] == "assistant"]
    # every typed line but the empty one and the one after the end (never read), verbatim
    assert [m["content"] for m in said] == [line for line in lines[:-1] if line]
    made = [m for m in said if m["tool_calls"]]
    assert [m["tool_calls"][0]["name"] for m in made] == [c["call"] for c in session.transcript]
    tools = [m for m in messages if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tools] == [c["result"] for c in session.transcript]
    assert [m["is_error"] for m in tools] == ["error" in c["result"] for c in session.transcript]
    assert any(m["is_error"] for m in tools)  # the prediction before a task: refused by the session
    assert [m["tool_calls"][0]["arguments"] for m in made][1] == {"interventions": {"G002": {"type": "BLOCK"}}}
    # the lines that made no call: their reply as printed
    replies = [messages[i + 1]["content"] for i, m in enumerate(messages) if m["role"] == "assistant" and not m["tool_calls"]]
    assert replies[0] == shell.overview() and replies[1].startswith("error: unknown call 'bogus'")
    assert replies[2].startswith("error: predict: give 3 numbers") and all(r in out for r in replies)
    # one tool message answers each call, by its id
    for call, result in zip(made, tools):
        assert result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert len({m["tool_call_id"] for m in tools}) == len(tools)
    json.dumps(messages)
    assert "-> end({})" in transcript_text({"world": "luca", "agent": "human", "seed": 0, "messages": messages})


def test_plays_json_output_transcript_has_no_banner_and_keeps_the_replies_as_printed(luca_env):
    shell, session, out = play(luca_env, ["info", "nope", "quit"], json_output=True)
    roles = [m["role"] for m in shell.messages]
    assert roles == ["assistant", "tool", "assistant", "user"]  # quit is not in it
    assert json.loads(shell.messages[1]["content"]) == session.transcript[0]["result"]
    assert shell.messages[3]["content"] == out.splitlines()[1] and "budget_remaining" in shell.messages[3]["content"]


def test_play_out_records_the_shells_transcript(tmp_path, capsys):
    import sys

    from luca_gym import harness as ev
    from luca_gym.cli import build_parser
    from luca_gym.worlds.luca.cli import cmd_play

    args = build_parser().parse_args(["play", "--tier", "easy", "--json", "--out", str(tmp_path)])
    stdout, stderr = io.StringIO(), io.StringIO()
    saved, sys.stderr = sys.stderr, stderr
    try:
        assert cmd_play(args, stdin=io.StringIO("info\nnope\nexperiment G001=BLOCK\nend\n"), stdout=stdout) == 0
    finally:
        sys.stderr = saved
    (record,) = ev.load_sessions(str(tmp_path))
    messages = record["messages"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["info", "nope", "experiment G001=BLOCK", "end"]
    tools = [m for m in messages if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tools] == [c["result"] for c in record["calls"]]
    assert main_show(record) and "-> run_experiment(" in transcript_text(record)


def main_show(record) -> bool:
    """The recorded transcript reads back as the harness's do."""
    return transcript_text(record).startswith(f"luca · {record['agent']} · seed 0")
