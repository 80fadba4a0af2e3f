"""The PPO data-parallel over devices: the same run on 1 device and split
over D devices (``PPOConfig.devices``: one mesh axis over the envs), side
by side in one process, as env steps per second after the first update
(compile and warm-up excluded) and their ratio.

    .venv/bin/python benchmarks/ppo_sharded.py [--devices 4] [--network recurrent] [--envs 512] [--steps 32]
        [--updates 8] [--repeats 2]

Without accelerators the D devices are forced host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=D``, set here and the
script run again when JAX sees fewer): they share the machine's cores, so
the ratio measures what splitting costs or gains on this CPU, not what D
real devices give. The run is recurrent PPO on the raw dag (10, 5) with
commit actions (the setting of docs/guides/training.md, "A learner that
keeps the history"); the 1-device and D-device runs alternate ``--repeats``
times and the best of each is kept.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--network", default="recurrent", choices=("recurrent", "mlp"))
    parser.add_argument("--envs", type=int, default=512)
    parser.add_argument("--steps", type=int, default=32, help="steps per env per update")
    parser.add_argument("--updates", type=int, default=8, help="updates timed per run (after a first, untimed one)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    flag = f"--xla_force_host_platform_device_count={args.devices}"
    if flag not in os.environ.get("XLA_FLAGS", ""):  # before JAX starts: run again with the host devices forced
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
        os.execv(sys.executable, [sys.executable, *sys.argv])

    import jax

    from luca_gym.agents import ppo

    raw = {"observation": "raw", "raw_actions": "commit", "n_nodes": 10, "n_states": 5}
    print("# PPO over devices")
    print(f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"jax {jax.__version__} ({jax.default_backend()}, {jax.local_device_count()} local devices)")
    print(f"{args.network} PPO on dag (10, 5) raw, commit actions: {args.envs} envs x {args.steps} steps an update, "
          f"{args.updates} updates timed after the first; best of {args.repeats}\n")
    best = {}
    for _ in range(args.repeats):
        for devices in (1, args.devices):
            config = ppo.PPOConfig("dag", raw, network=args.network, num_envs=args.envs, num_steps=args.steps,
                                   minibatches=4, steps=args.envs * args.steps * (args.updates + 1), devices=devices)
            summary = ppo.train(config)
            best[devices] = max(best.get(devices, 0.0), summary["steps_per_s"])
    print("| devices | env steps/s |")
    print("|---|---|")
    for devices, rate in best.items():
        print(f"| {devices} | {rate:,.0f} |")
    print(f"\n{args.devices} devices / 1 device: {best[args.devices] / best[1]:.2f}x")


if __name__ == "__main__":
    main()
