"""The flat encodings (``luca_gym.worlds.luca.core.flat``): the K actions decode to the core
actions they name, the mask agrees with the core's verdict on every one of
them, the observation vector is bounded, sessions are bounded, and
potential-based shaping at a discount below 1 sums to zero."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym.worlds.luca import analysts, core, generator as world
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, N_TASKS, PERSIST

N = 20
SETTINGS = (("easy", "healthy"), ("hard", "disease"))


@functools.lru_cache(maxsize=None)
def organism(seed, tier, mode):
    return world.make_organism(seed, tier, N, mode)


@functools.lru_cache(maxsize=None)
def oracle(params, analyst):
    """The core's verdict on each of the K decoded actions (the rules table)."""

    def verdicts(state):
        obs = core.observe(state, params)
        return jax.vmap(lambda k: core.refusal(state, flat.decode(k, obs, params, analyst), params))(
            jnp.arange(flat.layout(params).size)
        )

    return jax.jit(verdicts)


def test_layout_names_every_action_once():
    params = core.make_params("medium", N, "disease")
    lay = flat.layout(params)
    s = params.n_signals
    assert lay.size == 2 * (3 * N + s) + 3 + 2 * N + s + 1 + 1
    names = lay.names()
    assert len(names) == lay.size == len(set(names))
    assert names[lay.reveal] == "reveal task" and names[lay.end] == "end"
    kinds = flat.kinds(params)
    assert kinds.shape == (lay.size,) and set(kinds.tolist()) == set(range(core.N_KINDS))


def test_decode_names_the_core_action():
    tier, mode = "hard", "disease"
    params = core.make_params(tier, N, mode)
    obs, _ = core.reset(core.noise_key(0, tier, N), organism(0, tier, mode).arrays, params)
    lay = flat.layout(params)
    s = params.n_signals
    cases = {
        5: (core.EXPERIMENT, {5: BLOCK}, None),
        N + 7: (core.EXPERIMENT, {7: BOOST}, None),
        2 * N + 1: (core.EXPERIMENT, {1: DAMPEN}, None),
        3 * N + s - 1: (core.EXPERIMENT, {}, s - 1),
        lay.rescue + N + 2: (core.TEST_RESCUE, {2: BOOST}, None),
        lay.rescue + 3 * N: (core.TEST_RESCUE, {}, 0),
    }
    for index, (kind, genes, signal) in cases.items():
        a = flat.decode(jnp.int32(index), obs, params, "logit-additive")
        assert int(a.kind) == kind
        expected = np.zeros(N, np.int32)
        for g, c in genes.items():
            expected[g] = c
        assert np.array_equal(np.asarray(a.gene_codes), expected)
        flags = np.zeros(s, bool)
        if signal is not None:
            flags[signal] = True
        assert np.array_equal(np.asarray(a.signal_flags), flags)
    for offset, (target, type_) in {0: (0, LOCK_HI), 3: (3, LOCK_HI), N + 3: (3, LOCK_LO), 2 * N + 1: (N + 1, PERSIST)}.items():
        a = flat.decode(jnp.int32(lay.diagnose + offset), obs, params, "logit-additive")
        assert (int(a.kind), int(a.diagnosis_target), int(a.diagnosis_type)) == (core.COMMIT_DIAGNOSIS, target, type_)
    a = flat.decode(jnp.int32(lay.analyst_diagnosis), obs, params, "logit-additive")
    assert (int(a.diagnosis_target), int(a.diagnosis_type)) == tuple(int(x) for x in analysts.lock_signature_diagnosis(obs))
    for index in (-1, lay.size, 10**6):
        assert int(flat.decode(jnp.int32(index), obs, params, "constant").kind) == -1


@pytest.mark.parametrize("tier,mode", SETTINGS)
@pytest.mark.parametrize("analyst", sorted(analysts.ANALYSTS))
def test_mask_is_the_cores_verdict_on_every_flat_action(tier, mode, analyst):
    """Along random masked sessions, an action is in the mask exactly when the
    core accepts it (the network once); a masked-in action is never refused,
    sessions stay within budget + 2T + 3 calls, the vector stays in [-1, 1]
    and the undiscounted return is the composite."""
    params = core.make_params(tier, N, mode)
    lay = flat.layout(params)
    judge = oracle(params, analyst)
    bound = params.budget + 2 * N_TASKS + 3
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        vector, legal, state = flat.reset(core.noise_key(seed, tier, N), organism(seed, tier, mode).arrays, params, analyst)
        total, calls = 0.0, 0
        while True:
            verdict = np.asarray(judge(state)) == 0
            verdict[lay.network] &= not bool(state.network_submitted)
            assert np.array_equal(np.asarray(legal), verdict), np.flatnonzero(np.asarray(legal) != verdict)
            assert vector.shape == (flat.observation_size(params),) and vector.dtype == jnp.float32
            assert float(jnp.min(vector)) >= -1.0 and float(jnp.max(vector)) <= 1.0
            index = rng.choice(np.flatnonzero(np.asarray(legal)))
            vector, legal, state, reward, terminated, truncated, info = flat.step(state, jnp.int32(index), params, analyst)
            assert int(info["error"]) == 0
            total += float(reward)
            calls += 1
            if bool(terminated) or bool(truncated):
                break
        assert calls <= bound and not bool(truncated)
        composite = float(core.session_scores(state, params, network=False)["composite"])
        assert total == pytest.approx(composite, abs=1e-5)


def test_a_masked_action_is_refused_free():
    params = core.make_params("hard", N, "disease")
    o = organism(1, "hard", "disease")
    _, legal, state = flat.reset(core.noise_key(1, "hard", N), o.arrays, params, "logit-additive")
    masked = np.flatnonzero(~np.asarray(legal))
    latent = int(np.flatnonzero(np.asarray(o.arrays.latent_mask))[0])
    assert latent in masked  # BLOCK on a latent gene
    for index in masked[:5]:
        _, _, new, reward, *_, info = flat.step(state, jnp.int32(index), params, "logit-additive")
        assert int(info["error"]) != 0 and float(reward) == 0.0
        assert int(new.budget_left) == int(state.budget_left)


def test_shaping_at_a_discount_below_one_sums_to_zero_discounted():
    """gamma * Phi(s') - Phi(s) with Phi = 0 at the close: the discounted sum
    of the shaping terms is -Phi(s0) = 0, whatever the actions."""
    gamma = 0.9
    plain = core.make_params("medium", N, "healthy")
    shaped = core.make_params("medium", N, "healthy", dense_shaping=True, shaping_scale=0.5, shaping_gamma=gamma)
    o = organism(2, "medium", "healthy")
    key = core.noise_key(2, "medium", N)
    _, legal, a = flat.reset(key, o.arrays, plain, "constant")
    _, _, b = flat.reset(key, o.arrays, shaped, "constant")
    rng = np.random.default_rng(3)
    discounted, t, paid = 0.0, 0, []
    for _ in range(200):
        index = jnp.int32(rng.choice(np.flatnonzero(np.asarray(legal))))
        _, legal, a, r_plain, done, _, _ = flat.step(a, index, plain, "constant")
        _, _, b, r_shaped, *_ = flat.step(b, index, shaped, "constant")
        paid.append(float(r_shaped) - float(r_plain))
        discounted += gamma**t * paid[-1]
        t += 1
        if bool(done):
            break
    assert bool(done) and any(abs(x) > 1e-3 for x in paid)
    assert discounted == pytest.approx(0.0, abs=1e-5)
    with pytest.raises(ValueError, match="shaping_gamma"):
        core.make_params("medium", N, "healthy", shaping_gamma=0.0)
