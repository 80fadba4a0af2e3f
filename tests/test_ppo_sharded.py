"""The PPO data-parallel over devices (``PPOConfig.devices``,
:func:`luca_gym.agents.ppo.env_sharding`): on the CPU with 4 forced host
devices, the same run on 1 and on 4 devices gives the same first updates'
losses (within 1e-4 relative: XLA reduces the split batch in another order)
and held-out scores within one standard error of their difference.

The forced devices must be set before JAX starts, so the runs go in a
fresh Python process (``XLA_FLAGS=--xla_force_host_platform_device_count=4``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # two fresh processes' compiles of two networks on 1 and 4 devices

SCRIPT = r"""
import json, sys
import jax
import numpy as np
from luca_gym.agents import ppo

assert jax.local_device_count() == 4, jax.devices()
raw = {"observation": "raw", "raw_actions": "commit", "n_nodes": 4, "n_states": 3}
network, steps = sys.argv[1], int(sys.argv[2])
out = {}
for devices in (1, 4):
    config = ppo.PPOConfig("dag", raw, network=network, steps=steps, num_envs=64, num_steps=16, minibatches=4,
                           pool_size=256, memory_width=32, devices=devices)
    rows = []
    summary = ppo.train(config, progress=rows.append)
    env = config.make_env()
    seeds = list(range(5000, 5500))  # held out: never in the pool (10000 up)
    score = np.asarray(ppo.play_greedy(summary["network"], env, env.instances(seeds), env.max_calls)["score"])
    out[devices] = {"losses": [[r[k] for k in ("policy_loss", "value_loss", "entropy", "approx_kl")] for r in rows[:3]],
                    "score": float(score.mean()), "se": float(score.std(ddof=1) / np.sqrt(score.size))}
print(json.dumps(out))
"""


def _runs(network: str, steps: int) -> dict:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, network, str(steps)], env=env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("network, steps", [("recurrent", 64 * 16 * 60), ("mlp", 64 * 16 * 3)])
def test_four_devices_train_as_one(network, steps):
    runs = _runs(network, steps)
    one, four = runs["1"], runs["4"]
    np.testing.assert_allclose(four["losses"], one["losses"], rtol=1e-4, atol=1e-6)
    if network == "recurrent":
        assert one["score"] > 0.2  # trained: the comparison below is not of two zeros
        assert abs(one["score"] - four["score"]) <= np.hypot(one["se"], four["se"]), runs
