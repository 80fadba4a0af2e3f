"""PPO written the purejaxrl way against gymnax 1.0's ``Environment``
interface, run on our worlds through :mod:`luca_gym.integrations.gymnax`.

Everything below the ``make`` call is what a gymnax user already has: an
actor-critic in plain JAX, a masked categorical (our worlds refuse actions,
so the legal ones come from ``info["action_mask"]``), GAE that bootstraps a
truncated episode from ``info["final_observation"]`` and only a terminated
one with zero, the clipped objective, optax's Adam. Hyperparameters are
those of :class:`luca_gym.agents.ppo.PPOConfig` (1024 envs x 32 steps, lr
1e-3 annealed, gamma 1, entropy 0.01, a linear path from the observation to
the logits).

Training instances: the default params' pool, seeds 10000-11023. Evaluation:
held-out seeds (default 0-199, never trained on), each played exactly once
by the greedy policy (vmap over per-instance params); the mean headline score
(LUCA's composite, dag's success) is printed with the command that ran.

    .venv/bin/python benchmarks/gymnax_ppo.py                                   # LUCA easy healthy N=20, 5M steps
    .venv/bin/python benchmarks/gymnax_ppo.py --world dag --steps 1000000      # dag, a few updates
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from luca_gym.integrations import gymnax

MASKED = -1e9


# -- the network: a tanh MLP actor (plus a linear path) and critic ------------------
def init_network(key, obs_size, num_actions, hidden=(64, 64)):
    def mlp(key, out, head_gain):
        sizes, gains = (obs_size, *hidden, out), [np.sqrt(2.0)] * len(hidden) + [head_gain]
        keys = jax.random.split(key, len(gains))
        return [{"w": jax.nn.initializers.orthogonal(g)(k, (a, b)), "b": jnp.zeros(b)}
                for k, a, b, g in zip(keys, sizes[:-1], sizes[1:], gains)]

    ka, kc = jax.random.split(key)
    return {"actor": mlp(ka, num_actions, 0.01), "linear": jnp.zeros((obs_size, num_actions)), "critic": mlp(kc, 1, 1.0)}


def forward(layers, x):
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def actor_critic(net, obs, mask):
    logits = forward(net["actor"], obs) + obs @ net["linear"]
    return jnp.where(mask, logits, MASKED), forward(net["critic"], obs)[..., 0]


# -- purejaxrl's make_train, over the gymnax interface ------------------------------
def make_train(config, env, env_params):
    num_updates = config["TOTAL_TIMESTEPS"] // (config["NUM_ENVS"] * config["NUM_STEPS"])
    minibatch = config["NUM_ENVS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]

    def schedule(count):
        frac = 1.0 - (count // (config["NUM_MINIBATCHES"] * config["UPDATE_EPOCHS"])) / num_updates
        return config["LR"] * frac

    tx = optax.chain(optax.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                     optax.adam(schedule if config["ANNEAL_LR"] else config["LR"], eps=1e-5))
    step_envs = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def init(rng):
        rng, k_net, k_reset = jax.random.split(rng, 3)
        net = init_network(k_net, env.observation_space(env_params).shape[0], env.action_space(env_params).n)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, config["NUM_ENVS"]), env_params)
        mask = jax.vmap(env.action_mask, in_axes=(0, None))(env_state, env_params)
        return (net, tx.init(net), env_state, obs, mask, rng)

    def update(runner, _):
        def env_step(runner, _):
            net, opt_state, env_state, obs, mask, rng = runner
            rng, k_act, k_step = jax.random.split(rng, 3)
            logits, value = actor_critic(net, obs, mask)
            action = jax.random.categorical(k_act, logits)
            log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
            obs_n, env_state, reward, terminated, truncated, info = step_envs(
                jax.random.split(k_step, config["NUM_ENVS"]), env_state, action, env_params)
            done = terminated | truncated
            # gymnax 1.0: bootstrap from the pre-reset observation; only termination has no continuation.
            _, final_value = actor_critic(net, info["final_observation"], info["action_mask"])
            transition = {"obs": obs, "mask": mask, "action": action, "log_prob": log_prob, "value": value,
                          "reward": reward, "done": done, "terminated": terminated, "final_value": final_value,
                          "score": info["score"]}
            return (net, opt_state, env_state, obs_n, info["action_mask"], rng), transition

        runner, traj = jax.lax.scan(env_step, runner, None, config["NUM_STEPS"])
        net, opt_state, env_state, obs, mask, rng = runner
        _, last_value = actor_critic(net, obs, mask)

        def gae(carry, t):
            advantage, next_value = carry
            bootstrap = jnp.where(t["done"], t["final_value"] * (1.0 - t["terminated"].astype(jnp.float32)), next_value)
            delta = t["reward"] + config["GAMMA"] * bootstrap - t["value"]
            advantage = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1.0 - t["done"].astype(jnp.float32)) * advantage
            return (advantage, t["value"]), advantage

        _, advantages = jax.lax.scan(gae, (jnp.zeros_like(last_value), last_value), traj, reverse=True)
        targets = advantages + traj["value"]

        def loss_fn(net, batch):
            logits, value = actor_critic(net, batch["obs"], batch["mask"])
            log_probs = jax.nn.log_softmax(logits)
            log_prob = jnp.take_along_axis(log_probs, batch["action"][:, None], -1)[:, 0]
            v_clipped = batch["value"] + jnp.clip(value - batch["value"], -config["CLIP_EPS"], config["CLIP_EPS"])
            v_loss = 0.5 * jnp.maximum((value - batch["target"]) ** 2, (v_clipped - batch["target"]) ** 2).mean()
            adv = (batch["adv"] - batch["adv"].mean()) / (batch["adv"].std() + 1e-8)
            ratio = jnp.exp(log_prob - batch["log_prob"])
            pi_loss = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - config["CLIP_EPS"], 1 + config["CLIP_EPS"]) * adv).mean()
            entropy = -jnp.sum(jnp.where(batch["mask"], jnp.exp(log_probs) * log_probs, 0.0), -1).mean()
            return pi_loss + config["VF_COEF"] * v_loss - config["ENT_COEF"] * entropy, (pi_loss, v_loss, entropy)

        def epoch(carry, _):
            net, opt_state, rng = carry
            rng, k = jax.random.split(rng)
            flat = {"obs": traj["obs"], "mask": traj["mask"], "action": traj["action"], "log_prob": traj["log_prob"],
                    "value": traj["value"], "target": targets, "adv": advantages}
            flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), flat)
            perm = jax.random.permutation(k, minibatch * config["NUM_MINIBATCHES"])
            batches = jax.tree_util.tree_map(lambda x: x[perm].reshape((config["NUM_MINIBATCHES"], minibatch) + x.shape[1:]), flat)

            def minibatch_step(carry, batch):
                net, opt_state = carry
                (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(net, batch)
                updates, opt_state = tx.update(grads, opt_state, net)
                return (optax.apply_updates(net, updates), opt_state), (loss, *aux)

            (net, opt_state), losses = jax.lax.scan(minibatch_step, (net, opt_state), batches)
            return (net, opt_state, rng), losses

        (net, opt_state, rng), losses = jax.lax.scan(epoch, (net, opt_state, rng), None, config["UPDATE_EPOCHS"])
        ended = traj["done"].sum()
        metrics = {"loss": losses[0].mean(), "episodes": ended,
                   "mean_score": jnp.where(traj["done"], traj["score"], 0.0).sum() / jnp.maximum(ended, 1)}
        return (net, opt_state, env_state, obs, mask, rng), metrics

    return init, update, num_updates


# -- evaluation: each held-out seed once, greedy ----------------------------------
def evaluate(env, net, seeds, max_steps=512):
    params = env.per_instance_params(seeds)
    keys = jax.random.split(jax.random.key(0), len(seeds))
    step_envs = jax.vmap(env.step, in_axes=(0, 0, 0, 0))

    @jax.jit
    def run(net, params):
        obs, state = jax.vmap(env.reset, in_axes=(0, 0))(keys, params)
        mask = jax.vmap(env.action_mask, in_axes=(0, 0))(state, params)

        def body(carry, _):
            obs, state, mask, finished, score = carry
            action = jnp.argmax(actor_critic(net, obs, mask)[0], -1)
            obs, state, _, terminated, truncated, info = step_envs(keys, state, action, params)
            first = (terminated | truncated) & ~finished
            return (obs, state, info["action_mask"], finished | first, jnp.where(first, info["score"], score)), None

        init = (obs, state, mask, jnp.zeros(len(seeds), bool), jnp.zeros(len(seeds)))
        (_, _, _, finished, score), _ = jax.lax.scan(body, init, None, max_steps)
        return finished, score

    finished, score = jax.device_get(run(net, params))
    return float(score[finished].mean()) if finished.any() else float("nan"), int(finished.sum())


def parse_seeds(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", default="luca")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a world setting, e.g. --set tier=easy --set n_genes=20 (ints parsed)")
    parser.add_argument("--steps", type=int, default=5_000_000)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--eval-seeds", default="0-199", help="held-out seeds LO-HI (default 0-199)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-cap", type=float, default=900.0, help="stop training after this many seconds")
    args = parser.parse_args(argv)
    settings = {}
    for item in args.set:
        name, _, value = item.partition("=")
        settings[name] = int(value) if value.lstrip("-").isdigit() else value

    config = {"LR": 1e-3, "NUM_ENVS": args.num_envs, "NUM_STEPS": 32, "TOTAL_TIMESTEPS": args.steps, "UPDATE_EPOCHS": 4,
              "NUM_MINIBATCHES": 8, "GAMMA": 1.0, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
              "MAX_GRAD_NORM": 0.5, "ANNEAL_LR": True}

    env, env_params = gymnax.make(args.world, **settings)  # the only line that is not gymnax's own
    init, update, num_updates = make_train(config, env, env_params)
    runner = jax.jit(init)(jax.random.key(args.seed))
    compile_start = time.time()
    update = jax.jit(update).lower(runner, None).compile()
    compile_s = time.time() - compile_start
    print(f"{env.name}: obs {env.observation_space(env_params).shape}, {env.num_actions} actions; training seeds "
          f"{int(env_params.pool.seeds.min())}-{int(env_params.pool.seeds.max())}; {num_updates} updates of "
          f"{config['NUM_ENVS'] * config['NUM_STEPS']} steps (compiled in {compile_s:.0f} s)", flush=True)
    start, done_updates = time.time(), 0
    for i in range(num_updates):
        runner, metrics = update(runner, None)
        done_updates = i + 1
        if i % 10 == 0 or i == num_updates - 1:
            m = jax.device_get(metrics)
            steps = done_updates * config["NUM_ENVS"] * config["NUM_STEPS"]
            print(f"update {done_updates:4d}  steps {steps:>9,}  {time.time() - start:6.0f} s  training score "
                  f"{m['mean_score']:.3f} ({int(m['episodes'])} episodes)  loss {m['loss']:.4f}", flush=True)
        if time.time() - start > args.time_cap:
            print(f"time cap {args.time_cap:.0f} s reached after {done_updates} updates", flush=True)
            break
    train_s = time.time() - start
    steps = done_updates * config["NUM_ENVS"] * config["NUM_STEPS"]
    seeds = parse_seeds(args.eval_seeds)
    score, finished = evaluate(env, runner[0], seeds)
    print(f"\ncommand: .venv/bin/python benchmarks/gymnax_ppo.py {shlex.join(argv if argv is not None else sys.argv[1:])}")
    print(f"world {env.name}; trained {steps:,} env steps in {train_s:.0f} s ({steps / train_s:,.0f} steps/s); "
          f"training seeds {int(env_params.pool.seeds.min())}-{int(env_params.pool.seeds.max())}")
    print(f"held-out seeds {seeds[0]}-{seeds[-1]} ({finished}/{len(seeds)} episodes ended), greedy: mean "
          f"{env.codec.headline} {score:.3f}")
    return score


if __name__ == "__main__":
    main()
