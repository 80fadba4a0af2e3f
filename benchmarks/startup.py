"""Start-up times a new user waits for, in fresh processes, with the
persistent compilation cache (luca_gym.compile_cache) cold and then warm.

    .venv/bin/python benchmarks/startup.py [--repeats 3]

Measures, side by side: ``luca-gym info --seed 0 --tier easy`` (whole
process) and the MCP server's reply to ``initialize`` (from process start to
the reply line on stdout). The cold run uses an empty cache folder; the warm
runs reuse it. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}


def _env(cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(LUCA_GYM_CACHE_DIR=cache, JAX_PLATFORMS="cpu")
    return env


def info_seconds(cache: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "luca_gym.cli", "info", "--seed", "0", "--tier", "easy"], env=_env(cache),
                   check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def mcp_initialize_seconds(cache: str) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "luca_gym.cli", "mcp", "--seed", "0", "--tier", "easy"], env=_env(cache),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        proc.stdin.write(json.dumps(INIT) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        elapsed = time.perf_counter() - start
        assert reply.get("id") == 1 and "result" in reply, reply
        return elapsed
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for name, measure in (("luca-gym info --seed 0 --tier easy", info_seconds), ("MCP initialize reply", mcp_initialize_seconds)):
        with tempfile.TemporaryDirectory() as cache:
            cold = measure(cache)
            warm = [measure(cache) for _ in range(args.repeats)]
        rows.append((name, cold, statistics.median(warm), min(warm)))
    print("| what | cold cache (s) | warm cache, median (s) | warm, best (s) | cold / warm |")
    print("| --- | --- | --- | --- | --- |")
    for name, cold, warm, best in rows:
        print(f"| {name} | {cold:.1f} | {warm:.1f} | {best:.1f} | {cold / warm:.1f}x |")


if __name__ == "__main__":
    main()
