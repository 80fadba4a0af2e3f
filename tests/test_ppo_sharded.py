"""The PPO and the batched rollouts data-parallel over devices
(``PPOConfig.devices``, ``flat_rollout(devices=...)``,
:func:`luca_gym.functional.env_sharding`): on the CPU with 4 forced host
devices, a rollout split over 4 devices is the one-device rollout exactly,
and the same training run on 1 and on 4 devices gives the same first
updates' losses (within 1e-4 relative: XLA reduces the split batch in
another order) and held-out scores within one standard error of their
difference. Two processes joined by ``jax.distributed.initialize`` (2
forced devices each, one mesh over all 4) train as one device does: what a
cluster user runs, on one machine.

The forced devices must be set before JAX starts, so the runs go in a
fresh Python process (``XLA_FLAGS=--xla_force_host_platform_device_count=4``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # two fresh processes' compiles of two networks on 1 and 4 devices

SCRIPT = r"""
import json, sys
from luca_gym import functional as F  # first: luca_gym sets XLA's portable CPU math before JAX starts
from luca_gym.agents import ppo
import jax
import numpy as np

assert jax.local_device_count() == 4, jax.devices()
raw = {"observation": "raw", "raw_actions": "commit", "n_nodes": 4, "n_states": 3}
network, steps = sys.argv[1], int(sys.argv[2])
env = ppo.PPOConfig("dag", raw).make_env()
pool = F.make_pool(env, F.training_seeds(64))
rollouts = [F.flat_rollout(F.masked_random, None, jax.random.PRNGKey(5), env, pool, 16, 24, trajectories=True,
                           devices=devices)["trajectory"] for devices in (None, 4)]
out = {"rollout_same": all(np.array_equal(rollouts[0][k], rollouts[1][k]) for k in rollouts[0]),
       "rollout_split": len(rollouts[1]["action"].sharding.device_set)}
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
    assert runs["rollout_same"] and runs["rollout_split"] == 4
    one, four = runs["1"], runs["4"]
    np.testing.assert_allclose(four["losses"], one["losses"], rtol=1e-4, atol=1e-6)
    if network == "recurrent":
        assert one["score"] > 0.2  # trained: the comparison below is not of two zeros
        assert abs(one["score"] - four["score"]) <= np.hypot(one["se"], four["se"]), runs


HOSTS = r"""
import sys
from luca_gym.agents import ppo  # first: luca_gym sets XLA's portable CPU math before JAX starts
import jax

port, process, processes, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if processes > 1:
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=processes, process_id=process)
raw = {"observation": "raw", "raw_actions": "commit", "n_nodes": 4, "n_states": 3}
config = ppo.PPOConfig("dag", raw, network="recurrent", steps=64 * 16 * 3, num_envs=64, num_steps=16, minibatches=4,
                       pool_size=64, memory_width=32, devices=jax.device_count())
rows = []
ppo.train(config, out=out if jax.process_index() == 0 else None, progress=rows.append)
print(jax.device_count(), [[r[k] for k in ("policy_loss", "value_loss", "entropy")] for r in rows])
"""


def test_two_processes_over_one_mesh_train_as_one_device(tmp_path):
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    hosts = [subprocess.Popen([sys.executable, "-c", HOSTS, port, str(i), "2", str(tmp_path / "hosts")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [host.communicate(timeout=1800) for host in hosts]
    assert all(host.returncode == 0 for host in hosts), [err[-2000:] for _, err in outputs]
    alone = subprocess.run([sys.executable, "-c", HOSTS, port, "0", "1", str(tmp_path / "alone")], env={**env, "XLA_FLAGS": ""},
                           capture_output=True, text=True, timeout=1800)
    assert alone.returncode == 0, alone.stderr[-2000:]
    one = json.loads(alone.stdout.strip().splitlines()[-1].split(" ", 1)[1])
    for out, _ in outputs:
        devices, losses = out.strip().splitlines()[-1].split(" ", 1)
        assert devices == "4"
        np.testing.assert_allclose(json.loads(losses), one, rtol=1e-4, atol=1e-6)
    from luca_gym.agents import ppo  # process 0 wrote the run folder: the weights of the run on one device, nearly

    (_, hosts_net), (_, alone_net) = ppo.load_network(str(tmp_path / "hosts")), ppo.load_network(str(tmp_path / "alone"))
    for a, b in zip(jax.tree_util.tree_leaves(hosts_net), jax.tree_util.tree_leaves(alone_net)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
