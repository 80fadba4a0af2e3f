"""The world API test (luca_gym.testing.check_world) on a toy world that
lives outside the package (every built-in world: tests/test_api.py), and proof that it fails when a world
breaks a rule: a refusal that costs, a return that is not the headline score,
a retrace per instance, results the text env cannot reproduce."""

from __future__ import annotations

from functools import partial

import json

import gymnasium as gym
import jax
import numpy as np
import pytest

import toy_flat
import toy_world
from luca_gym import worlds
from luca_gym.protocol import World
from luca_gym.testing import check_world, count_traces

pytestmark = pytest.mark.usefixtures("no_cache_writes")


ALL_CHECKS = ["registry", "return-equals-headline", "refusals", "schemas", "replay", "sealed", "no-retrace", "text-env",
              "mcp", "flat", "flat-no-retrace", "check_env"]


# A world with flat baselines (World.flat_baselines: the teachers of `train --algo bc`) is checked for them too.
WITH_FLAT_BASELINES = [*ALL_CHECKS[:ALL_CHECKS.index("flat") + 1], "flat-baselines", *ALL_CHECKS[ALL_CHECKS.index("flat") + 1:]]


def test_the_toy_world_registers_itself_and_passes():
    assert "toy" in worlds.names() and worlds.get("toy") is toy_world.WORLD
    assert "luca_gym/ToyTools-v0" in gym.registry and "luca_gym/Toy-v0" not in gym.registry  # tools only
    assert check_world("toy") == WITH_FLAT_BASELINES
    env = gym.make("luca_gym/ToyTools-v0", n_bits=6)
    text, info = env.reset(options={"seed": 4})
    assert info["instance_id"] == "toy_00000004" and "[system]\nFind 6 hidden switches" in text


def test_the_functional_env_and_ppo_run_a_world_they_do_not_name(tmp_path):
    from luca_gym import functional as F
    from luca_gym.agents import ppo

    codec = F.make_env(world="toy", n_bits=6)
    assert (codec.num_actions, codec.observation_size, codec.headline) == (7, 12, "accuracy")
    pool = F.make_pool(codec, F.training_seeds(16))
    out = jax.device_get(F.flat_rollout(F.masked_random, None, jax.random.PRNGKey(0), codec, pool, 8, 32, trajectories=True))
    t, done = out["trajectory"], out["trajectory"]["done"]
    assert done.sum() > 8 and (t["error"] == 0).all()
    # The return of an ended session is its accuracy, and the accuracy is that of the guess against the true bits.
    assert (t["return"][done] == t["accuracy"][done]).all() and out["mean_accuracy"] == out["mean_score"]
    k, b = map(int, next(zip(*done.nonzero())))
    truth = toy_world.instance(int(t["seed"][k, b]), toy_world.ToyConfig(6))
    known, seen = t["obs"][k, b, 6:] > 0, t["obs"][k, b, :6] > 0
    assert t["action"][k, b] == 6  # a session ends only by submitting
    assert t["accuracy"][k, b] == pytest.approx(float(((seen | ~known) == truth).mean()))
    config = ppo.PPOConfig(world="toy", n_bits=6, steps=512, num_envs=16, num_steps=16, minibatches=2, pool_size=16)
    summary = ppo.train(config, str(tmp_path / "run"))
    assert summary["env_steps"] == 512 and 0 <= summary["final_accuracy"] <= 1
    loaded, network = ppo.load_network(str(tmp_path / "run"))
    assert loaded == config and loaded.n_bits == 6 and network["actor_linear"]["w"].shape == (12, 7)
    with pytest.raises(ValueError, match="n_bits"):
        ppo.PPOConfig(world="toy", n_bits=0)
    with pytest.raises(ValueError, match="no flat codec"):
        F.make_env(world=World(name="noflat", version="1", gym_stem="NoFlat", summary="", config="toy_world:ToyConfig"))


def test_train_clones_a_flat_baseline_and_fine_tunes_it_on_a_world_it_does_not_name(tmp_path, capsys):
    """``luca-gym train --world toy --algo bc``: the toy's flat baseline
    (World.flat_baselines) cloned into a PPO run folder whose greedy network
    plays as the teacher does; ``--algo ppo --init`` starts from its weights
    and keeps its network; a codec of another layout is refused, naming the
    settings the run was trained with."""
    from luca_gym import cli
    from luca_gym import functional as F
    from luca_gym.agents import ppo

    clone, tuned = tmp_path / "clone", tmp_path / "tuned"
    common = ["--world", "toy", "--set", "n_bits=6", "--num-envs", "16", "--pool-size", "16", "--quiet"]
    assert cli.main(["train", "--algo", "bc", *common, "--steps", "1024", "--epochs", "60", "--out", str(clone)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("training bc: first-legal's sessions on N=6, 16 envs x 64 steps") and "ppo:" in printed
    summary = json.loads((clone / "summary.json").read_text())
    assert (summary["algo"], summary["teacher"], summary["epochs"]) == ("bc", "first-legal", 60)
    assert 512 <= summary["samples"] <= 1024 and summary["accuracy"] > 0.95
    curve = (clone / "cloning_curve.csv").read_text().splitlines()
    assert curve[0] == "epoch,cross_entropy,accuracy,wall_s" and len(curve) == 61
    assert float(curve[-1].split(",")[1]) < float(curve[1].split(",")[1])
    config, network = ppo.load_network(str(clone))
    codec = F.make_env(world="toy", n_bits=6)
    pool = F.make_pool(codec, range(20))  # the evaluation seeds: the clone was fitted on 10000-10015
    key = jax.random.PRNGKey(3)
    teacher = F.flat_rollout(toy_flat.first_legal(codec), None, key, codec, pool, 20, 24, trajectories=True)
    student = F.flat_rollout(ppo.greedy_policy, network, key, codec, pool, 20, 24, trajectories=True)
    agree = np.asarray(teacher["trajectory"]["action"]) == np.asarray(student["trajectory"]["action"])
    assert agree.mean() > 0.95 and abs(float(student["mean_score"]) - float(teacher["mean_score"])) < 0.05

    assert cli.main(["train", "--algo", "ppo", "--init", str(clone), *common, "--steps", "512", "--out", str(tuned)]) == 0
    assert f"starting from {clone}'s weights" in capsys.readouterr().out
    assert json.loads((tuned / "summary.json").read_text())["started_from"] == str(clone)
    assert ppo.load_network(str(tuned))[0].hidden == config.hidden

    other = tmp_path / "other"
    assert cli.main(["train", "--algo", "ppo", "--init", str(clone), *common, "--set", "n_bits=8", "--out", str(other)]) == 2
    err = capsys.readouterr().err
    assert "--init:" in err and "does not fit N=8" in err and "n_bits=6" in err and not other.exists()


def test_train_bc_refuses_a_world_without_flat_baselines_and_a_rollout_too_short(tmp_path, capsys, monkeypatch):
    import dataclasses

    from luca_gym import cli
    from luca_gym import worlds as registry

    out = tmp_path / "run"
    short = ["train", "--world", "toy", "--algo", "bc", "--set", "n_bits=6", "--num-envs", "16", "--steps", "64",
             "--pool-size", "16", "--out", str(out), "--quiet"]
    assert cli.main(short) == 2  # 4 steps per env: no session of the teacher ends, nothing to fit
    err = capsys.readouterr().err
    assert "--steps: the teacher's 16 envs x 4 steps kept 0 steps of ended sessions, fewer than one minibatch" in err
    monkeypatch.setitem(registry._WORLDS, "toy", dataclasses.replace(toy_world.WORLD, flat_baselines=None))
    other = tmp_path / "other"
    assert cli.main(["train", "--world", "toy", "--algo", "bc", "--out", str(other), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bc needs a teacher, and world 'toy' ships no flat baseline (World.flat_baselines)" in err and not other.exists()


def test_maskable_ppo_trains_on_a_world_it_does_not_name(tmp_path):
    """The SB3 VecEnv and MaskablePPO over the toy's flat codec: an ended
    session's info carries its score (the return), a masked action is refused
    at no cost, and the run folder names the world and loads back."""
    from luca_gym import functional as F
    from luca_gym.agents.sb3 import load_policy, train_maskable_ppo
    from luca_gym.envs.sb3_vec import FlatSB3VecEnv

    env = FlatSB3VecEnv(F.make_env(world="toy", n_bits=6), 3, seed=0)
    env.reset()
    first = env.instance_seeds.copy()
    assert (first >= 10_000).all() and env.reset_infos[0] == {"instance_seed": int(first[0])}
    _, rewards, dones, infos = env.step(np.zeros(3, np.int64))  # probe switch 0
    assert not dones.any() and (rewards == 0).all() and all(i == {"error_code": 0} for i in infos)
    _, rewards, dones, infos = env.step(np.full(3, 6))  # submit: switch 0 as probed, 1 for the rest
    assert dones.all()
    for i, info in enumerate(infos):
        truth = np.asarray(toy_world.instance(int(first[i]), toy_world.ToyConfig(6)))
        guess = np.where(np.arange(6) == 0, truth, True)
        assert info["score"] == info["accuracy"] == pytest.approx(float((guess == truth).mean()))
        assert info["episode"] == {"r": pytest.approx(info["score"]), "l": 2, "t": info["episode"]["t"]}
        assert info["instance_seed"] == first[i] and info["TimeLimit.truncated"] is False
    assert not set(env.instance_seeds) & set(first)

    summary = train_maskable_ppo(world="toy", n_bits=6, steps=128, num_envs=4, out=str(tmp_path), seed=0)
    assert summary["steps"] >= 128 and summary["episodes"] > 0 and 0 <= summary["mean_return"] <= 1
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["world"], config["settings"]) == ("toy", {"n_bits": 6})
    policy = load_policy(str(tmp_path))
    assert policy.codec == F.make_env(world="toy", n_bits=6) and policy.name == f"sb3:{tmp_path}"
    with pytest.raises(ValueError, match="n_bits"):
        train_maskable_ppo(world="toy", n_bits=0, steps=8, num_envs=2, out=str(tmp_path / "bad"))


def test_ablations_are_a_worlds_contrasts():
    """The generic ablation: a toy with a contrast over n_bits plans both arms
    from --ablation, pairs sessions by seed and reports Δ with its interval;
    the main tables keep the default arm. No generic file names the toy."""
    import dataclasses

    from luca_gym.results import paired
    from luca_gym.cli import build_parser
    from luca_gym.cli.common import UsageError
    from luca_gym.cli.eval import ablation_arms
    from luca_gym.protocol import Contrast

    size = Contrast("size", "n_bits", (6, 8), ("six", "eight"), minuend=8, title="Switch count")
    world = dataclasses.replace(toy_world.WORLD, contrasts=(size,))
    args = build_parser().parse_args(["eval", "--world", "toy", "--ablation", "size"])
    assert ablation_arms(args, world, None, {}) == {"n_bits": [6, 8]}
    fixed = build_parser().parse_args(["eval", "--world", "toy", "--ablation", "size", "--set", "n_bits=6"])
    with pytest.raises(UsageError, match=r"drop --set n_bits=\.\.\."):
        ablation_arms(fixed, world, None, {})
    with pytest.raises(UsageError, match="'size' unknown for world 'toy'; allowed none"):
        ablation_arms(args, toy_world.WORLD, None, {})

    rng = np.random.default_rng(0)
    six, eight = rng.uniform(0.5, 1, 10), rng.uniform(0.5, 1, 10)
    records = [{"world": "toy", "agent": "probe-then-guess", "n_bits": n, "seed": s, "scores": {"accuracy": float(v[s])}}
               for n, v in ((6, six), (8, eight)) for s in range(10) if (n, s) != (8, 3)]
    (row,) = paired.paired(records, world, "size")
    keep = np.arange(10) != 3
    assert row.n == 9 and row.setting == () and row.delta == pytest.approx((eight - six)[keep].mean())
    assert row.ci[0] <= row.delta <= row.ci[1] and row.p == pytest.approx(__import__("scipy").stats.wilcoxon((eight - six)[keep]).pvalue)
    text = paired.section(records, world)
    assert "#### Switch count" in text and f"| probe-then-guess | 9 | {six[keep].mean():.3f} ± {six[keep].std():.3f} |" in text
    main, note = paired.main_records(records, world)
    assert [r["n_bits"] for r in main] == [6] * 10 and "9 are ablation arms" in note


def test_count_traces_sees_a_new_shape():
    f = jax.jit(lambda x: x * 2)
    f(jax.numpy.ones(3))
    x, y = jax.numpy.ones(3), jax.numpy.ones(4)
    with count_traces() as traced:
        f(x)
    assert traced == []
    with count_traces() as traced:
        f(y)
    assert traced == ["<lambda>"]


class CostlyRefusals(toy_world.ToyToolSession):
    def error(self, message):
        self.state = self.state.__class__(self.state.bits, self.state.budget_left - 1, self.state.ended, self.state.score)
        return super().error(message)


class DoubledReturn(toy_world.ToyToolSession):
    def dispatch(self, name, args):
        before = self.total_reward
        result = super().dispatch(name, args)
        self.total_reward += self.total_reward - before
        return result


@partial(jax.jit, static_argnames=("salt",))
def _per_instance(x, salt):
    return x + salt


class RetracePerInstance(toy_world.ToyToolSession):
    def dispatch(self, name, args):
        _per_instance(1.0, salt=int(self.state.bits.sum()) + 100 * len(self.transcript) + hash(self.instance_id) % 997)
        return super().dispatch(name, args)


class IncompleteRecord(toy_world.ToyToolSession):
    """Its record drops the last call, so a replay cannot reproduce the session."""

    def record(self):
        record = super().record()
        return {**record, "calls": record["calls"][:-1]}


@pytest.mark.parametrize("cls, check", [
    ("CostlyRefusals", "refusals"),
    ("DoubledReturn", "return-equals-headline"),
    ("RetracePerInstance", "no-retrace"),
    ("IncompleteRecord", "replay"),
])
def test_check_world_fails_when_a_rule_breaks(cls, check):
    broken = World(name=f"broken_{cls.lower()}", version="1", gym_stem=f"Broken{cls}", summary="a broken toy",
                   config="toy_world:ToyConfig", headline="accuracy", tools=f"test_worlds:{cls}")
    with pytest.raises(AssertionError, match=rf"check_world \[{check}\]"):
        check_world(broken, gym_ids=False, mcp=False)


def test_check_world_fails_on_a_flat_baseline_the_codec_refuses():
    """A flat baseline (a teacher of ``train --algo bc``) that chooses an index outside [0, K) fails ``flat-baselines``."""
    broken = World(name="broken_teacher", version="1", gym_stem="BrokenTeacher", summary="a toy with a broken teacher",
                   config="toy_world:ToyConfig", headline="accuracy", tools="toy_world:ToyToolSession",
                   flat="toy_flat:ToyFlat", flat_baselines="toy_flat:BROKEN_FLAT_BASELINES")
    with pytest.raises(AssertionError, match=r"check_world \[flat-baselines\]: flat baseline 'out-of-range' chose an action"):
        check_world(broken, gym_ids=False, mcp=False)
    with pytest.raises(ValueError, match="World.flat_baselines"):
        World(name="x", version="1", gym_stem="X", summary="", config="toy_world:ToyConfig", flat_baselines="not an entry point")


def test_a_host_side_tool_session_is_exempt_from_the_jit_checks_only():
    """A world that marks its tools host-side (World.host_side: a data set, a sandbox) may trace per
    instance; every other check still holds it, and an unknown part is refused."""
    host = World(name="host_toy", version="1", gym_stem="HostToy", summary="a host-side toy", config="toy_world:ToyConfig",
                 headline="accuracy", tools="test_worlds:RetracePerInstance", host_side=("tools",))
    ran = check_world(host, gym_ids=False, mcp=False)
    assert "no-retrace" not in ran and {"return-equals-headline", "refusals", "replay", "sealed"} <= set(ran)
    costly = World(name="host_costly", version="1", gym_stem="HostCostly", summary="", config="toy_world:ToyConfig",
                   headline="accuracy", tools="test_worlds:CostlyRefusals", host_side=("tools",))
    with pytest.raises(AssertionError, match=r"check_world \[refusals\]"):
        check_world(costly, gym_ids=False, mcp=False)
    with pytest.raises(ValueError, match="World.host_side"):
        World(name="x", version="1", gym_stem="X", summary="", config="toy_world:ToyConfig", host_side=("database",))


def test_the_toy_world_runs_through_eval_and_report(tmp_path, capsys):
    """luca-gym eval --world toy and luca-gym report, with no generic file naming the toy."""
    from luca_gym import cli
    from luca_gym import harness as ev

    out = str(tmp_path)
    argv = ["eval", "--world", "toy", "--seeds", "0-2", "--set", "n_bits=6,8", "--out", out, "--quiet"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "toy: accuracy (3 seeds" in printed and "| probe-then-guess | 6 |" in printed and "| probe-then-guess | 8 |" in printed
    records = ev.load_sessions(out)
    assert len(records) == 6
    for r in records:
        assert (r["world"], r["world_version"], r["agent"]) == ("toy", "1", "probe-then-guess")
        assert r["return"] == r["scores"]["accuracy"] and r["instance_id"] == f"toy_{r['seed']:08d}"
        assert r["calls"][-1]["call"] == "submit" and r["end_reason"] == "end"
        # probes reveal n_bits - 2 switches, the guess of 1 for the two others is right when they are 1
        assert r["scores"]["accuracy"] >= (r["n_bits"] - 2) / r["n_bits"]
    assert sorted(ev.record_key(r) for r in records) == sorted(
        ("toy", "probe-then-guess", n, s) for n in (6, 8) for s in range(3))
    assert cli.main(argv) == 0 and len(ev.load_sessions(out)) == 6  # resumed: nothing ran twice
    capsys.readouterr()
    assert cli.main(["report", out]) == 0
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# Results") and "## toy" in report and "| agent | n_bits | accuracy |" in report


@pytest.mark.parametrize("argv, message", [
    (["--world", "nowhere"], "world: 'nowhere' unknown"),
    (["--world", "toy", "--set", "n_bits=0"], "n_bits: 0 not allowed"),
    (["--world", "toy", "--set", "colour=red"], "settings: colour unknown for world 'toy'; allowed n_bits"),
    (["--world", "toy", "--agents", "random"], "agent: 'random' unknown for world 'toy'; allowed probe-then-guess"),
    (["--world", "toy", "--set", "n_bits"], "set: 'n_bits'; write KEY=VALUE"),
    (["--set", "n_bits=6"], "settings: n_bits unknown for world 'luca'; allowed tier, mode, n_genes"),
    (["--world", "toy", "--tiers", "easy"], "tiers: an option of world 'luca', not of 'toy'"),
])
def test_eval_refuses_a_bad_world_setting_by_name(tmp_path, capsys, argv, message):
    from luca_gym import cli

    assert cli.main(["eval", *argv, "--seeds", "0", "--out", str(tmp_path), "--quiet"]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "sessions.jsonl").exists() or not (tmp_path / "sessions.jsonl").read_text()


def test_the_toy_world_is_served_over_mcp_by_the_command(tmp_path):
    """luca-gym mcp --world package.module:WORLD serves a world the package never names, and records the
    session in the harness's format (--out) when it ends."""
    import json
    import os
    import sys
    from pathlib import Path

    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    tests = Path(__file__).resolve().parent
    env = {**{k: os.environ[k] for k in ("PATH", "JAX_COMPILATION_CACHE_DIR") if k in os.environ},
           "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join([str(tests), *filter(None, [os.environ.get("PYTHONPATH")])])}
    params = StdioServerParameters(command=sys.executable, env=env, cwd=str(tmp_path),
                                   args=["-m", "luca_gym.cli", "mcp", "--world", "toy_world:WORLD", "--seed", "3", "--set", "n_bits=6",
                                         "--out", str(tmp_path / "rec")])
    local = toy_world.ToyToolSession(3, n_bits=6)
    script = local.demo_calls()
    expected = [local.call(name, arguments) for name, arguments in script]

    async def drive():
        with anyio.fail_after(120), open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                init = await client.initialize()
                tools = (await client.list_tools()).tools
                results = [(await client.call_tool(name, arguments)).structured_content for name, arguments in script]
                refused = await client.call_tool("probe", {"index": 99})
                return init, tools, results, refused

    init, tools, results, refused = anyio.run(drive)
    assert init.server_info.title == "Toy switches" and init.instructions == local.system_prompt()
    assert [t.name for t in tools] == ["probe", "submit", "end"]
    assert results == json.loads(json.dumps(expected)) and results[-1]["scores"]["accuracy"] == local.scores["accuracy"]
    assert refused.is_error
    from luca_gym import harness as ev

    (line,) = ev.load_sessions(str(tmp_path / "rec"))
    assert (line["world"], line["agent"], line["n_bits"], line["seed"]) == ("toy", "mcp-client", 6, 3)
    assert line["scores"] == local.scores and line["return"] == local.total_reward
