"""LUCA's baselines through the one policy loop (``World.play``: each core
action played as the tool call it is, through the tool session's JSON
Schema check, dispatcher and transcript) against the host-session loop it
replaced (the action stepped on the host ``Session``, the call described for
the log), side by side in one run.

    .venv/bin/python benchmarks/policy_loop.py [--seeds 4] [--n-genes 20]

Each (agent, mode, seed) session is played by both loops, alternately first,
after one warm-up session each (the compiles); both must end with the same
scores and return. Prints a markdown table: median milliseconds per session
and per call of each loop, and their ratio (tool session / host loop).
"""

from __future__ import annotations

import argparse
import statistics
import time

from luca_gym import seal as seal_mod
from luca_gym.worlds.luca import calls
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.evaluation import play_policy

AGENTS = ("random", "heuristic", "causal-sweep", "task-directed", "causal-sweep-flat")
MODES = ("healthy", "disease")


def host_loop(policy, seed: int, *, tier: str, mode: str, n_genes: int) -> dict:
    """The loop LUCA's baselines played before (``evaluation.play_policy`` up to
    the one policy loop): the action stepped on the host session, the call log
    written beside it. The reference here, nothing else uses it."""
    seal = seal_mod.make_seal(None)
    env, obs = calls.open_session(seed=seed, tier=tier, mode=mode, n_genes=n_genes, sealed=seal)
    meta = env.organism.meta
    policy.reset(env.params, seed)
    log, total = [], 0.0
    for _ in range(env.params.max_steps):
        action = policy.act(obs)
        record = calls.describe_action(meta, action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        record["result"] = calls.describe_result(meta, int(action["kind"]), obs, info)
        record["budget_remaining"] = int(obs["budget_left"])
        log.append(record)
        if terminated or truncated:
            break
    return {"calls": log, "scores": info["scores"], "return": total}


def timed(fn, agent: str, seed: int, **settings) -> tuple[float, dict]:
    start = time.perf_counter()
    out = fn(make_policy(agent), seed, **settings)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--n-genes", type=int, default=20)
    parser.add_argument("--tier", default="medium")
    args = parser.parse_args()
    loops = {"host": host_loop, "tool": play_policy}
    print(f"LUCA {args.tier}, N={args.n_genes}, seeds 0-{args.seeds - 1}, modes {', '.join(MODES)}")
    print("| agent | sessions | calls / session | host loop, ms / session | tool session, ms / session "
          "| host, ms / call | tool, ms / call | tool / host |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    all_ratios = []
    for agent in AGENTS:
        times = {"host": [], "tool": []}
        n_calls = []
        for mode in MODES:
            settings = {"tier": args.tier, "mode": mode, "n_genes": args.n_genes}
            for name, loop in loops.items():  # warm-up: the compiles and the organism memo
                timed(loop, agent, 0, **settings)
            for seed in range(args.seeds):
                order = ("host", "tool") if seed % 2 == 0 else ("tool", "host")
                outs = {}
                for name in order:
                    seconds, outs[name] = timed(loops[name], agent, seed, **settings)
                    times[name].append(seconds)
                host, tool = outs["host"], outs["tool"]
                assert (host["scores"], host["return"], len(host["calls"])) == (tool["scores"], tool["return"], len(tool["calls"])), \
                    (agent, mode, seed)
                n_calls.append(len(tool["calls"]))
        host_ms, tool_ms = (1000 * statistics.median(times[k]) for k in ("host", "tool"))
        per_call = statistics.median(n_calls)
        ratios = [t / h for t, h in zip(times["tool"], times["host"])]
        all_ratios += ratios
        print(f"| {agent} | {len(n_calls)} | {per_call:.0f} | {host_ms:.0f} | {tool_ms:.0f} | {host_ms / per_call:.2f} "
              f"| {tool_ms / per_call:.2f} | {statistics.median(ratios):.2f}x |")
    print(f"\nmedian ratio over every session (tool session / host loop): {statistics.median(all_ratios):.2f}x")


if __name__ == "__main__":
    main()
