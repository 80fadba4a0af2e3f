"""Golden values: organisms and baseline sessions pinned bit for bit.

Recorded from the code before the "rules once, one boundary" redesign, which
had to leave them unchanged. A change to the world or the scorer that moves
one of these must be deliberate: update the values in the same commit and say
why in its message.
"""

from __future__ import annotations

import pytest

from luca_gym import eval as ev
from luca_gym.baselines import make_policy
from conftest import make

FINGERPRINTS = {
    "0/easy/20/healthy/0": "438cb85c7b52027ecf1a805fca40262ada7317216fbcb188c3f599983c6021a9",
    "7/easy/20/healthy/1": "b60f13e0d3f36ac7ad008f059925fe751d6b67bce75969d0752109cf3e597529",
    "0/easy/20/disease/0": "9e16fbf0b5db596f4646859d1bbd1fc76aa18a38797233ddcdb3bff4f9830c80",
    "7/easy/20/disease/1": "52ab94a5525b873a9ee90db36f7a7ea58c0fecd7042c85a8d27b655b18bd8082",
    "0/medium/20/healthy/0": "b535dfd92ddb33f8dfa95b8a8ba3234e3864eccea55c52f9919a79c4b79fb361",
    "7/medium/20/healthy/1": "d77c08bdce6b92e6a7939d658ac521331f079a0a6591ea3e5c530f10d79d0d78",
    "0/medium/20/disease/0": "2f55d2d02cfe40f5c559efe329e84d4dad81de4b7c93a1f115844f952b1e54c7",
    "7/medium/20/disease/1": "069c5044a7807ecadd5b8e9be5faf20e549f80c0a7fd0ef2c2abb0416834f91b",
    "0/hard/20/healthy/0": "920732106b81b0aa8bfa6a10f881ae9a4d67e92ae99939728a70963362dc1df5",
    "7/hard/20/healthy/1": "91c47953248b28531ca16acdb8c00c067f5b2ec856c203da1c86a9940fc40b22",
    "0/hard/20/disease/0": "83c09054d369be1df57f78ae4a4fb0b4deb34f701d05ed5fe564325cf7bf5c25",
    "7/hard/20/disease/1": "b0ac2936a73d8b7dd344f201ce76ba00313a2763e851e0121c4e03304b8896cb",
    "3/hard/40/disease/0": "83749121b383c980bc3b28c302e109b720b460a69f8aab95d36a54f6b4f0a642",
}
# agent/tier/mode/seed -> (composite, network F1, return), N=20.
SESSIONS = {
    "causal-sweep/easy/disease/0": (0.6666666865348816, 0.949999988079071, 0.666666716337204),
    "causal-sweep/easy/disease/1": (0.6666666865348816, 0.9795917868614197, 0.666666716337204),
    "causal-sweep/easy/healthy/0": (1.0, 0.9795917868614197, 1.0),
    "causal-sweep/easy/healthy/1": (1.0, 0.9803921580314636, 1.0),
    "causal-sweep/hard/disease/0": (0.5555555820465088, 0.8307693004608154, 0.5555555894970894),
    "causal-sweep/hard/disease/1": (0.9444445371627808, 0.800000011920929, 0.9444444924592972),
    "causal-sweep/hard/healthy/0": (0.8333333730697632, 0.8955223560333252, 0.8333333432674408),
    "causal-sweep/hard/healthy/1": (0.8333333730697632, 0.9066666960716248, 0.8333333432674408),
    "causal-sweep/medium/disease/0": (0.6666666865348816, 0.8799999952316284, 0.666666716337204),
    "causal-sweep/medium/disease/1": (1.0, 0.9473684430122375, 1.0000000596046448),
    "causal-sweep/medium/healthy/0": (1.0, 0.9473684430122375, 1.0),
    "causal-sweep/medium/healthy/1": (1.0, 0.9354838728904724, 1.0),
    "heuristic/easy/disease/0": (0.5555555820465088, 0.949999988079071, 0.5555555820465088),
    "heuristic/easy/disease/1": (0.5, 0.9387754797935486, 0.5000000223517418),
    "heuristic/easy/healthy/0": (0.6666666865348816, 0.936170220375061, 0.6666666865348816),
    "heuristic/easy/healthy/1": (0.5, 0.9599999785423279, 0.5000000149011612),
    "heuristic/hard/disease/0": (0.5, 0.6923076510429382, 0.5000000223517418),
    "heuristic/hard/disease/1": (0.6111111640930176, 0.8333333730697632, 0.6111111491918564),
    "heuristic/hard/healthy/0": (0.3333333432674408, 0.8474575877189636, 0.3333333432674408),
    "heuristic/hard/healthy/1": (0.5, 0.9090908765792847, 0.5000000149011612),
    "heuristic/medium/disease/0": (0.5555555820465088, 0.8333333730697632, 0.5555555820465088),
    "heuristic/medium/disease/1": (0.5555555820465088, 0.8163265585899353, 0.5555555894970894),
    "heuristic/medium/healthy/0": (0.8333333730697632, 0.9090908765792847, 0.8333333432674408),
    "heuristic/medium/healthy/1": (0.6666666865348816, 0.9836065173149109, 0.6666666716337204),
    "random/easy/disease/0": (0.111111119389534, 0.0, 0.111111119389534),
    "random/easy/disease/1": (0.055555559694767, 0.0, 0.055555559694767),
    "random/easy/healthy/0": (0.6666666865348816, 0.0, 0.6666666865348816),
    "random/easy/healthy/1": (0.5, 0.0, 0.5000000149011612),
    "random/hard/disease/0": (0.3333333432674408, 0.0, 0.3333333507180214),
    "random/hard/disease/1": (0.055555559694767, 0.0, 0.055555559694767),
    "random/hard/healthy/0": (0.5, 0.0, 0.5000000149011612),
    "random/hard/healthy/1": (0.3333333432674408, 0.0, 0.3333333432674408),
    "random/medium/disease/0": (0.111111119389534, 0.0, 0.111111119389534),
    "random/medium/disease/1": (0.1666666716337204, 0.0, 0.166666679084301),
    "random/medium/healthy/0": (0.6666666865348816, 0.0, 0.6666666865348816),
    "random/medium/healthy/1": (0.3333333432674408, 0.0, 0.3333333432674408),
}


@pytest.mark.parametrize("key", sorted(FINGERPRINTS))
def test_organisms_are_bitwise_the_golden_ones(key):
    seed, tier, n, mode, backwards = key.split("/")
    organism = make(int(seed), tier, int(n), mode, bool(int(backwards)))
    assert organism.fingerprint() == FINGERPRINTS[key]


@pytest.mark.parametrize("key", sorted(SESSIONS))
def test_baseline_sessions_score_exactly_the_golden_values(key):
    agent, tier, mode, seed = key.split("/")
    record = ev.run_session(make_policy(agent), ev.SessionSpec(agent, tier, mode, 20, int(seed)))
    scores = record["scores"]
    assert (scores["composite"], scores["network_f1"], record["return"]) == SESSIONS[key]
