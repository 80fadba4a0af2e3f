"""The entity network (:mod:`luca_gym.agents.entity_attention`) on LUCA, the
world whose token layout has two groups of entities (genes and signals), and
the layout it reads (:func:`luca_gym.worlds.luca.core.flat.token_layout`):
every observation slot and every flat action belongs to exactly one token,
and permuting genes in the observation permutes exactly the genes' slots;
the network is permutation-equivariant; one set of weights acts at N=20, 40
and 80; PPO trains it, and its checkpoint loads back and plays a session of
another size, where an MLP's refuses clearly. Then on the graph worlds,
whose layout has one group (nodes): node tokens equivariant, greedy
sessions played to their end, another n refused (a node's features grow
with n).

One tiny PPO run (8 envs x 8 steps, a network of width 8) serves the module.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym import functional as F
from luca_gym.agents import FlatPolicy, entity_attention, ppo
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.evaluation import play_policy
from luca_gym.worlds.luca.spec import DAMPEN, N_PHENOTYPES

# One worker runs the module: its module fixtures (sessions, a trained run) are built once, not once per worker.
pytestmark = pytest.mark.xdist_group("entity_attention")

TINY = dict(world="luca", tier="easy", n_genes=20, mode="healthy", network="entity", steps=64, num_envs=8, num_steps=8, epochs=1,
            minibatches=2, pool_size=8, token_width=8, attention_layers=1, attention_heads=2, seed=1)


def _layout(n_genes, mode="disease"):
    return flat.token_layout(core.make_params("medium", n_genes, mode))


@pytest.mark.parametrize("n_genes, mode", [(20, "healthy"), (40, "disease")])
def test_every_slot_and_every_action_belongs_to_one_token(n_genes, mode):
    params = core.make_params("medium", n_genes, mode)
    spec, lay = flat.token_layout(params), flat.layout(params)
    (gene, gene_obs, gene_actions), (signal, signal_obs, signal_actions) = spec["groups"]
    assert (gene, signal) == ("gene", "signal")
    n, s = params.n_genes, params.n_signals
    assert gene_obs.shape == (n, 1 + DAMPEN * N_PHENOTYPES + DAMPEN + 2 + DAMPEN) and gene_actions.shape == (n, 8)
    assert signal_obs.shape == (s, N_PHENOTYPES + 2) and signal_actions.shape == (s, 3)
    slots = np.concatenate([spec["global_obs"], gene_obs.ravel(), signal_obs.ravel()])
    np.testing.assert_array_equal(np.sort(slots), np.arange(flat.observation_size(params)))
    actions = np.concatenate([spec["global_actions"], gene_actions.ravel(), signal_actions.ravel()])
    np.testing.assert_array_equal(np.sort(actions), np.arange(lay.size))
    names = np.array(lay.names())
    assert names[spec["global_actions"]].tolist() == ["reveal task", "analyst prediction", "analyst network",
                                                      "analyst diagnosis", "end"]
    for g in (0, n - 1):
        codes = [f"{c} g{g}" for c in ("BLOCK", "BOOST", "DAMPEN")]
        assert names[gene_actions[g]].tolist() == ([f"experiment {c}" for c in codes] + [f"diagnose g{g} LOCK_HI",
                                                   f"diagnose g{g} LOCK_LO"] + [f"rescue {c}" for c in codes])
    for k in (0, s - 1):
        assert names[signal_actions[k]].tolist() == [f"experiment ACTIVATE s{k}", f"diagnose s{k} PERSIST",
                                                     f"rescue ACTIVATE s{k}"]
    assert spec["global_obs"].size == _layout(20)["global_obs"].size  # the global token's width is the same at every N
    assert entity_attention.TokenLayout.of(F.make_env("medium", n_genes, mode, world="luca")).observation_size == flat.observation_size(params)


def _random_observation(params, rng):
    """An observation dict of a session of ``params`` with every per-gene and
    per-signal field random, and a task revealed on two of the genes."""
    n, s = params.n_genes, params.n_signals
    organism = world.make_organism(0, "easy", n, params.mode).arrays
    obs, _ = core.reset(core.noise_key(0, "easy", n), organism, params)
    obs = {k: np.asarray(v) for k, v in obs.items()}
    obs.update(
        targetable=rng.random(n) < 0.7,
        single_results=rng.random((n, DAMPEN, N_PHENOTYPES)).astype(np.float32),
        single_mask=rng.random((n, DAMPEN)) < 0.5,
        signal_results=rng.random((s, N_PHENOTYPES)).astype(np.float32),
        signal_mask=rng.random(s) < 0.5,
        task_index=np.int32(0),
        task_genes=rng.choice(n, 2, replace=False).astype(np.int32),
        task_codes=np.array([1, 2], np.int8),
        budget_left=np.int32(params.budget - 3),
        last_phenotypes=rng.random(N_PHENOTYPES).astype(np.float32),
    )
    obs["single_mask"][obs["task_genes"], [0, 1]] = False  # the task still needs both of its experiments
    return obs


def _permuted(obs, genes, signals):
    """``obs`` with its genes and signals permuted: gene genes[i] is now gene i (signals alike)."""
    moved = dict(obs)
    for name in ("targetable", "single_results", "single_mask"):
        moved[name] = obs[name][genes]
    moved["signal_results"], moved["signal_mask"] = obs["signal_results"][signals], obs["signal_mask"][signals]
    moved["task_genes"] = np.argsort(genes)[obs["task_genes"]].astype(np.int32)
    return moved


def test_permuting_genes_in_the_observation_permutes_their_slots():
    params = core.make_params("easy", 20, "disease")
    spec, rng = flat.token_layout(params), np.random.default_rng(0)
    (_, gene_obs, _), (_, signal_obs, _) = spec["groups"]
    vector = jax.jit(flat.observation_vector, static_argnames="params")
    for _ in range(3):
        obs = _random_observation(params, rng)
        genes, signals = rng.permutation(params.n_genes), rng.permutation(params.n_signals)
        moved = _permuted(obs, genes, signals)
        before, after = np.asarray(vector(obs, params=params)), np.asarray(vector(moved, params=params))
        want = before.copy()
        want[gene_obs] = before[gene_obs[genes]]
        want[signal_obs] = before[signal_obs[signals]]
        np.testing.assert_array_equal(after, want)
        assert np.unique(before[gene_obs], axis=0).shape[0] > params.n_genes // 2  # the genes' rows differ


def test_the_rescue_features_go_to_their_own_tokens_and_the_units_left_to_the_global_one():
    params = core.make_params("easy", 20, "disease", budget=12)
    codec = F.make_env("easy", 20, "disease", world="luca", budget=12, rescue_features=True)
    tokens, rng = codec.token_layout(), np.random.default_rng(2)
    (_, gene_obs, _), (_, signal_obs, _) = tokens["groups"]
    plain = flat.token_layout(params)
    assert gene_obs.shape == (20, plain["groups"][0][1].shape[1] + 6) and signal_obs.shape[1] == plain["groups"][1][1].shape[1] + 2
    slots = np.concatenate([tokens["global_obs"], gene_obs.ravel(), signal_obs.ravel()])
    np.testing.assert_array_equal(np.sort(slots), np.arange(codec.observation_size))
    for _ in range(2):
        obs = _random_observation(params, rng)
        genes, signals = rng.permutation(params.n_genes), rng.permutation(params.n_signals)
        moved = _permuted(obs, genes, signals)
        before, after = np.asarray(codec.encode(obs)[0]), np.asarray(codec.encode(moved)[0])
        want = before.copy()
        want[gene_obs], want[signal_obs] = before[gene_obs[genes]], before[signal_obs[signals]]
        np.testing.assert_array_equal(after, want)  # each gene's rescue features moved with it
        assert before[gene_obs[:, -6:]].any()  # ... and some are not zero
        units = before[tokens["global_obs"][-5:]]  # the budget units left, one-hot: 9 of 12 here
        np.testing.assert_array_equal(units, np.eye(5)[4])
    obs["budget_left"] = np.int32(1)
    np.testing.assert_array_equal(np.asarray(codec.encode(obs)[0])[tokens["global_obs"][-5:]], np.eye(5)[1])


@pytest.fixture(scope="module")
def layouts():
    return {n: entity_attention.TokenLayout.of(F.make_env("medium", n, "healthy", world="luca")) for n in (20, 40, 80)}


@pytest.fixture(scope="module")
def network(layouts):
    """An entity network at N=20 with every weight random (no zero paths)."""
    net = entity_attention.init(jax.random.PRNGKey(0), layouts[20], width=16, layers=2, heads=4)
    leaves, treedef = jax.tree_util.tree_flatten(net)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    return jax.tree_util.tree_unflatten(treedef, [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


def test_permuting_genes_permutes_the_logits(network, layouts):
    lay, rng = layouts[20], np.random.default_rng(1)
    (_, gene_obs, gene_actions), (_, signal_obs, signal_actions) = lay.groups
    obs = rng.uniform(-1, 1, (4, lay.observation_size)).astype(np.float32)
    genes, signals = rng.permutation(gene_obs.shape[0]), rng.permutation(signal_obs.shape[0])
    moved = obs.copy()
    moved[:, gene_obs] = obs[:, gene_obs[genes]]
    moved[:, signal_obs] = obs[:, signal_obs[signals]]
    call = jax.jit(lambda net, x: net(x))
    (logits, value), (moved_logits, moved_value) = call(network, obs), call(network, moved)
    logits, moved_logits = np.asarray(logits), np.asarray(moved_logits)
    np.testing.assert_allclose(moved_logits[:, gene_actions], logits[:, gene_actions[genes]], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(moved_logits[:, signal_actions], logits[:, signal_actions[signals]], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(moved_logits[:, lay.global_actions], logits[:, lay.global_actions], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(moved_value), np.asarray(value), rtol=1e-4, atol=1e-5)
    assert np.ptp(logits[:, gene_actions[:, 0]], axis=1).min() > 1e-3  # the genes' logits differ: not trivially equal


def test_the_same_weights_act_at_every_size(network, layouts):
    rng = np.random.default_rng(2)
    leaves = jax.tree_util.tree_leaves(network)
    for n in (40, 80):
        lay = layouts[n]
        bound = entity_attention.rebind(network, lay)
        assert all(a is b for a, b in zip(jax.tree_util.tree_leaves(bound), leaves)) and len(leaves) == len(
            jax.tree_util.tree_leaves(bound))
        obs = jnp.asarray(rng.uniform(-1, 1, (3, 5, lay.observation_size)), jnp.float32)
        mask = jnp.asarray(rng.random((3, 5, lay.num_actions)) < 0.3)
        greedy = jax.jit(jax.vmap(lambda net, o, m: ppo.greedy_policy(net, None, o, m), in_axes=(None, 0, 0)))
        actions = np.asarray(greedy(bound, obs, mask))
        assert actions.shape == (3, 5) and np.take_along_axis(np.asarray(mask), actions[..., None], -1).all()
        logits, value = jax.jit(lambda net, o: net(o))(bound, obs)
        assert logits.shape == (3, 5, lay.num_actions) and value.shape == (3, 5) and bool(jnp.isfinite(logits).all())
    other = entity_attention.TokenLayout(np.arange(3), np.arange(2), (("gene", np.arange(3, 7).reshape(2, 2), np.arange(2, 6).reshape(2, 2)),))
    with pytest.raises(ValueError, match="signature"):
        entity_attention.rebind(network, other)


def test_any_world_with_a_token_layout_gets_the_network_the_graph_worlds_nodes():
    """One group of entities (the nodes: each reads its row of the evidence
    matrix and its interventions, and scores intervening on it) and a global
    token (the budget left; the submission): permuting node tokens permutes
    the node actions' logits, and the network plays greedy sessions to their
    end. A node's features are a row of the n x n matrix, so the weights of
    n_nodes 4 do not fit n_nodes 7: refused, naming both signatures."""
    small, large = F.make_env(world="dag", n_nodes=4, n_states=3), F.make_env(world="dag", n_nodes=7, n_states=3)
    lay = entity_attention.TokenLayout.of(small)
    assert lay.sizes() == {"node": 4} and entity_attention.TokenLayout.of(F.make_env(world="relational", n_houses=5)).sizes() == {"node": 5}
    net = entity_attention.init(jax.random.PRNGKey(3), lay, width=8, layers=1, heads=2)
    leaves, treedef = jax.tree_util.tree_flatten(net)
    keys = jax.random.split(jax.random.PRNGKey(4), len(leaves))
    net = jax.tree_util.tree_unflatten(treedef, [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])
    rng = np.random.default_rng(5)
    (_, node_obs, node_actions), = lay.groups
    obs = rng.uniform(-1, 1, (3, lay.observation_size)).astype(np.float32)
    order = np.array([2, 0, 3, 1])
    moved = obs.copy()
    moved[:, node_obs] = obs[:, node_obs[order]]
    call = jax.jit(lambda net, x: net(x))
    (logits, value), (moved_logits, moved_value) = call(net, jnp.asarray(obs)), call(net, jnp.asarray(moved))
    logits, moved_logits = np.asarray(logits), np.asarray(moved_logits)
    np.testing.assert_allclose(moved_logits[:, node_actions], logits[:, node_actions[order]], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(moved_logits[:, lay.global_actions], logits[:, lay.global_actions], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(moved_value), np.asarray(value), rtol=1e-4, atol=1e-5)
    assert np.ptp(logits[:, node_actions[:, 0]], axis=1).min() > 1e-3  # the nodes' logits differ: not trivially equal
    played = jax.device_get(ppo.play_greedy(net, small, small.instances([0, 1, 2]), small.max_calls))
    assert played["ended"].all() and ((0 <= played["score"]) & (played["score"] <= 1)).all()
    with pytest.raises(ValueError, match=r"signature \(1, 1, \(\('node', 8, 1\),\)\).*network's \(1, 1, \(\('node', 5, 1\),\)\)"):
        ppo.bind(net, large)


def test_a_bad_layout_is_refused():
    with pytest.raises(ValueError, match="each slot"):
        entity_attention.TokenLayout(np.array([0, 0]), np.arange(2), ())
    with pytest.raises(ValueError, match="each flat action"):
        entity_attention.TokenLayout(np.arange(2), np.array([0, 2]), ())
    with pytest.raises(ValueError, match="token_layout"):
        entity_attention.TokenLayout.of(object())


def test_the_config_checks_the_network():
    with pytest.raises(ValueError, match="network: 'cnn' not allowed; one of 'mlp', 'entity', 'recurrent'"):
        ppo.PPOConfig("luca", network="cnn")
    with pytest.raises(ValueError, match="attention_heads: 3 does not divide token_width 32"):
        ppo.PPOConfig("luca", network="entity", attention_heads=3)
    with pytest.raises(ValueError, match="token_width"):
        ppo.PPOConfig("luca", network="entity", token_width=0)
    with pytest.raises(ValueError, match="observation='raw' has no token layout; use network='mlp'"):
        ppo.PPOConfig(world="dag", settings={"observation": "raw"}, network="entity")
    assert ppo.PPOConfig(world="dag", network="entity").network == "entity"  # the evidence codec has one
    config = ppo.PPOConfig(**TINY)
    assert ppo.PPOConfig.from_json(config.to_json()) == config and config.network == "entity"
    assert ppo.PPOConfig("luca").network == "mlp"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder of one tiny PPO update with the entity network (N=20)."""
    out = tmp_path_factory.mktemp("entity") / "run"
    summary = ppo.train(ppo.PPOConfig(**TINY), str(out))
    return out, summary


def test_ppo_trains_the_entity_network(run):
    _, summary = run
    assert isinstance(summary["network"], entity_attention.EntityAttentionNetwork) and summary["env_steps"] == 64
    fresh = ppo.make_network(jax.random.PRNGKey(TINY["seed"]), ppo.PPOConfig(**TINY), ppo.PPOConfig(**TINY).make_env())
    changed = [not np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(summary["network"]),
                                                        jax.tree_util.tree_leaves(fresh))]
    assert any(changed) and all(np.isfinite(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(summary["network"]))


def test_the_checkpoint_round_trips_and_plays_another_size(run, tmp_path):
    out, summary = run
    config, network = ppo.load_network(str(out))
    assert config == ppo.PPOConfig(**TINY) and isinstance(network, entity_attention.EntityAttentionNetwork)
    for a, b in zip(jax.tree_util.tree_leaves(network), jax.tree_util.tree_leaves(summary["network"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    policy = ppo.load(str(out))
    assert isinstance(policy, FlatPolicy)
    record = play_policy(policy, 0, tier="easy", mode="healthy", n_genes=40)  # trained at N=20
    assert 0 <= record["scores"]["composite"] <= 1 and not record["truncated"]
    assert policy.session_network.layout.sizes()["gene"] == 40


def test_an_mlp_checkpoint_refuses_another_size(tmp_path):
    config = ppo.PPOConfig(**{**TINY, "network": "mlp"})
    env = config.make_env()
    ppo.save(str(tmp_path), config, ppo.make_network(jax.random.PRNGKey(0), config, env))
    policy = ppo.load(str(tmp_path))
    with pytest.raises(ValueError, match="an MLP acts at one size only: train with network='entity'"):
        policy.reset(core.make_params("easy", 40, "healthy"), 0)
    policy.reset(core.make_params("easy", 20, "healthy"), 0)  # its own size plays
