"""Golden values: organisms and baseline sessions pinned bit for bit.

Recorded before the "rules once, one boundary" redesign, which had to leave
them unchanged; re-recorded for the Fidelity calibration, which changed the
organisms (tier weights and states, home phenotypes, task floors and focus,
malfunction severity, n_alt tolerance) and the baselines (the paper's
causal-sweep and heuristic; the earlier causal-sweep is ``task-directed``). A change to the world or the scorer that moves
one of these must be deliberate: update the values in the same commit and say
why in its message.
"""

from __future__ import annotations

import pytest

from luca_gym import harness as ev
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.evaluation import luca_spec
from conftest import make

FINGERPRINTS = {
    "0/easy/20/healthy/0": "e19a5e94473af5ceb061ca66e389bc5840215aec6821921c9f865135015b045b",
    "7/easy/20/healthy/1": "cd94910a455ce4d64531b166b0eb0336d985d6b1843449b18bd3f9839cee61f3",
    "0/easy/20/disease/0": "933870ab47deef60b3b34a0234a064a5e7877a902c2a0077332838a3cf016f5c",
    "7/easy/20/disease/1": "921790f26b1e578fe77e5902fbcbf9bdd39422f6cc70ca67f469016d000fb005",
    "0/medium/20/healthy/0": "54babc44863d3d9e1ef8ddc4b06ffda0a737625078db3837a2e224508440b189",
    "7/medium/20/healthy/1": "9cdda86d61a33211fbec4aaf90cffecaf39f6373005731522da168a54682fc92",
    "0/medium/20/disease/0": "a1ebec43bc63711e6bf94074c451f885f2e7d2346373f8dd07f52ce80b6ddc55",
    "7/medium/20/disease/1": "ba2a56352b1229a91ea42383242b7f6d55e37fca931ad531459072acb71f4923",
    "0/hard/20/healthy/0": "1a86f6ac5a581672fdf8ce22b54d912534f9ac8d0bb1637fd5e6d13c0a1344cb",
    "7/hard/20/healthy/1": "2d8b8b3f86dbb5de374e2331216ede02494b9647a4ea8ae2fec9c77ad50a13c1",
    "0/hard/20/disease/0": "dcf431d3ee508e63a80111ecb5ccff3e393b117c04017804f51eae8527dff7db",
    "7/hard/20/disease/1": "4f2e42165a1777c212c571ecca3242f408ebe2e17bf37630e49485baaeee1cc3",
    "3/hard/40/disease/0": "6d5a493471a82cfa7436bdbcf0532a17317f783c2ea3464eef02149210bd9fa9",
}
# agent/tier/mode/seed -> (composite, network F1, return), N=20.
SESSIONS = {
    "causal-sweep/easy/disease/0": (0.6666666865348816, 0.9387754797935486, 0.666666716337204),
    "causal-sweep/easy/disease/1": (0.6666666865348816, 0.936170220375061, 0.666666716337204),
    "causal-sweep/easy/healthy/0": (1.0, 0.9411764740943909, 1.0),
    "causal-sweep/easy/healthy/1": (1.0, 0.936170220375061, 1.0),
    "causal-sweep/hard/disease/0": (0.6666666865348816, 0.9538460969924927, 0.666666716337204),
    "causal-sweep/hard/disease/1": (0.6666666865348816, 0.8333333134651184, 0.666666716337204),
    "causal-sweep/hard/healthy/0": (1.0, 0.9705882668495178, 1.0),
    "causal-sweep/hard/healthy/1": (1.0, 0.9200000166893005, 1.0),
    "causal-sweep/medium/disease/0": (0.6666666865348816, 0.8679245114326477, 0.666666716337204),
    "causal-sweep/medium/disease/1": (0.5555555820465088, 0.8936169743537903, 0.5555555820465088),
    "causal-sweep/medium/healthy/0": (1.0, 0.9333333373069763, 1.0),
    "causal-sweep/medium/healthy/1": (1.0, 0.8727272748947144, 1.0),
    "heuristic/easy/disease/0": (0.222222238779068, 0.8936170339584351, 0.222222238779068),
    "heuristic/easy/disease/1": (0.2777777910232544, 0.888888955116272, 0.2777778059244156),
    "heuristic/easy/healthy/0": (0.6666666865348816, 0.9200000166893005, 0.6666666865348816),
    "heuristic/easy/healthy/1": (0.8333333730697632, 0.9130434989929199, 0.8333333432674408),
    "heuristic/hard/disease/0": (0.7777778506278992, 0.9000000357627869, 0.7777778059244156),
    "heuristic/hard/disease/1": (0.5555555820465088, 0.75, 0.5555555820465088),
    "heuristic/hard/healthy/0": (0.3333333432674408, 0.8474575877189636, 0.3333333432674408),
    "heuristic/hard/healthy/1": (1.0, 0.7727272510528564, 1.0),
    "heuristic/medium/disease/0": (0.222222238779068, 0.8461538553237915, 0.222222238779068),
    "heuristic/medium/disease/1": (0.222222238779068, 0.888888955116272, 0.222222238779068),
    "heuristic/medium/healthy/0": (0.6666666865348816, 0.9152542352676392, 0.6666666865348816),
    "heuristic/medium/healthy/1": (0.8333333730697632, 0.8679245114326477, 0.8333333432674408),
    "random/easy/disease/0": (0.111111119389534, 0.0, 0.111111119389534),
    "random/easy/disease/1": (0.1666666716337204, 0.0, 0.166666679084301),
    "random/easy/healthy/0": (0.6666666865348816, 0.0, 0.6666666865348816),
    "random/easy/healthy/1": (0.6666666865348816, 0.0, 0.6666666865348816),
    "random/hard/disease/0": (0.2777777910232544, 0.0, 0.2777777910232544),
    "random/hard/disease/1": (0.111111119389534, 0.0, 0.111111119389534),
    "random/hard/healthy/0": (0.3333333432674408, 0.0, 0.3333333432674408),
    "random/hard/healthy/1": (0.3333333432674408, 0.0, 0.3333333432674408),
    "random/medium/disease/0": (0.0, 0.0, 0.0),
    "random/medium/disease/1": (0.222222238779068, 0.0, 0.222222238779068),
    "random/medium/healthy/0": (0.6666666865348816, 0.0, 0.6666666865348816),
    "random/medium/healthy/1": (0.6666666865348816, 0.0, 0.6666666865348816),
    "task-directed/easy/disease/0": (1.0, 0.9333333373069763, 1.0000000596046448),
    "task-directed/easy/disease/1": (0.6666666865348816, 0.936170220375061, 0.666666716337204),
    "task-directed/easy/healthy/0": (1.0, 0.9583333134651184, 1.0),
    "task-directed/easy/healthy/1": (1.0, 0.9583333134651184, 1.0),
    "task-directed/hard/disease/0": (0.9444445371627808, 0.9523809552192688, 0.9444444924592972),
    "task-directed/hard/disease/1": (1.0, 0.9142857193946838, 1.0000000596046448),
    "task-directed/hard/healthy/0": (1.0, 0.9705882668495178, 1.0),
    "task-directed/hard/healthy/1": (1.0, 0.9387754797935486, 1.0),
    "task-directed/medium/disease/0": (0.6666666865348816, 0.8163265585899353, 0.666666716337204),
    "task-directed/medium/disease/1": (1.0, 0.9599999785423279, 1.0000000596046448),
    "task-directed/medium/healthy/0": (1.0, 0.9000000953674316, 1.0),
    "task-directed/medium/healthy/1": (1.0, 0.9230769276618958, 1.0),
}


def test_importing_the_package_asks_xla_for_portable_cpu_math():
    """The golden organisms hold on AVX2 and AVX-512 CPUs alike only with XLA's
    platform-dependent math off (its exp and tanh differ in the last bits):
    importing luca_gym turns it off, and says so where it comes too late."""
    import os
    import subprocess
    import sys

    from luca_gym.compile_cache import PORTABLE_MATH_FLAG

    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    run = lambda code: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)  # noqa: E731
    assert run("import os, luca_gym; print(os.environ['XLA_FLAGS'])").stdout.split() == [PORTABLE_MATH_FLAG]
    late = run("import jax; jax.numpy.zeros(1).block_until_ready(); import luca_gym")
    assert "portable CPU math is not on" in late.stderr and late.returncode == 0


@pytest.mark.parametrize("key", sorted(FINGERPRINTS))
def test_organisms_are_bitwise_the_golden_ones(key):
    seed, tier, n, mode, backwards = key.split("/")
    organism = make(int(seed), tier, int(n), mode, bool(int(backwards)))
    assert organism.fingerprint() == FINGERPRINTS[key]


@pytest.mark.parametrize("key", sorted(SESSIONS))
def test_baseline_sessions_score_exactly_the_golden_values(key):
    agent, tier, mode, seed = key.split("/")
    record = ev.run_session(make_policy(agent), luca_spec(agent, tier, mode, 20, int(seed)))
    scores = record["scores"]
    assert (scores["composite"], scores["network_f1"], record["return"]) == SESSIONS[key]
