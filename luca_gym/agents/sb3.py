"""Maskable PPO (sb3-contrib) on the flat action space of any world with a
flat codec: train on :class:`~luca_gym.envs.sb3_vec.FlatSB3VecEnv`, save, and
load back as a :class:`~luca_gym.agents.FlatPolicy` that runs through the
evaluation harness like any baseline (choosing its most likely legal action by
default, as SB3's ``evaluate_policy`` does).

The policy is :class:`LinearPathPolicy`: SB3's ``MlpPolicy`` plus a linear map
from the observation straight to the logits, trained with the JAX PPO's
settings (:data:`PPO_SETTINGS`: gamma 1 above all). SB3's defaults (gamma
0.99) and ``MlpPolicy`` learn to repeat one experiment.

A run directory holds ``model.zip`` (the SB3 model), ``config.json`` (the
world and the codec settings it was trained on, read back by
:func:`load_policy`), and ``learning_curve.csv`` and ``learning_curve.png``
in the JAX PPO's format (:mod:`luca_gym.agents.ppo`: one row per update,
the same columns). Training instances are a pool of seeds
``min_instance_seed`` and up (10 000 by default), apart from the evaluation
seeds 0-19.

Torch runs on one thread while this module trains or chooses
(:func:`one_torch_thread`): the networks are small, and on a machine of few
cores torch's threads make them many times slower.

Needs the ``rl`` extra (``pip install 'luca-gym[rl]'``).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import time
from typing import Callable

import numpy as np

try:
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.torch_layers import MlpExtractor
except ImportError as error:
    raise ImportError("luca_gym.agents.sb3 needs sb3-contrib: pip install 'luca-gym[rl]'") from error

from luca_gym import functional, worlds
from luca_gym.agents.base import FlatPolicy
from luca_gym.agents.ppo import CURVE_CSV, CURVE_PNG, curve_fields, plot_curve, top_level_settings
from luca_gym.envs.sb3_vec import TRAINING_SEED_LOW, FlatSB3VecEnv
from luca_gym.functional import DEFAULT_POOL_SIZE
from luca_gym.protocol import LEGACY_WORLD
from luca_gym.validate import check_bool, check_positive_int, check_seed, short_repr

MODEL_FILE, CONFIG_FILE = "model.zip", "config.json"
# PPO settings for sessions of at most budget + 7 calls whose reward comes at
# the predictions and the close, after the JAX PPO's (luca_gym.agents.ppo,
# whose runs found them): gamma = 1, since sessions are bounded and the return
# is the composite itself (with 0.99, every setting tried here on easy healthy
# settled on "reveal, predict at once", the random baseline's 0.633: measuring
# first delays the reward), and the actor's linear path (LinearPathPolicy).
# With SB3's MlpPolicy, learning rate 3e-4, entropy 0.02, 64 envs on fresh organisms,
# the most likely action repeated one experiment: 0.633 on held-out seeds
# after 400k steps (sampled 0.73). Easy healthy N=20, 256 envs, held-out seeds
# 0-19, most likely action, after 400k steps: 0.675 with the linear path,
# learning rate 1e-3, entropy 0.01 and batches of 2,048; 0.775 with batches of
# 512 (4x the Adam steps per sample); 0.883 with learning rate 2e-3 and
# entropy 0.005, and after 800k 0.983 (training seed 0) and 0.975 (seed 1),
# about 0.997 training composite from 650k steps on.
# 256 envs x 64 steps per update (16,384 steps, 32 minibatches of 512): a
# rollout step costs one torch forward and one JAX step whatever the batch.
PPO_SETTINGS = {
    "n_steps": 64,
    "batch_size": 512,
    "n_epochs": 4,
    "learning_rate": 2e-3,
    "gamma": 1.0,
    "gae_lambda": 0.95,
    "ent_coef": 0.005,
}
DEFAULT_NUM_ENVS = 256


class LinearPathExtractor(MlpExtractor):
    """SB3's ``MlpExtractor`` whose policy latent is the MLP's output
    followed by the features themselves, so that the action head (one linear
    layer over the latent) is the MLP's logits plus a linear map from the
    observation straight to the logits. In LUCA's flat vector an entry marks
    each single experiment the current task still needs; a linear path lets
    the logit of an experiment read its own mark (the JAX PPO's
    :func:`~luca_gym.agents.ppo.init_network`: 0.77 after 3M steps without
    it, 0.96 at 1.5M with it). The value latent is the MLP's alone.

    ``latent_dim_pi`` = last policy layer + ``feature_dim``."""

    def __init__(self, feature_dim: int, **kwargs):
        super().__init__(feature_dim, **kwargs)
        self.latent_dim_pi += feature_dim

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        """The actor's latent: the MLP's output with the observation itself beside it (the linear path)."""
        return torch.cat([self.policy_net(features), features], dim=-1)


class LinearPathPolicy(MaskableActorCriticPolicy):
    """``MaskablePPO``'s ``MlpPolicy`` (tanh 64x64 actor and critic by
    default) with :class:`LinearPathExtractor`: logits = head(MLP(obs)) +
    W obs. SB3's orthogonal init gives the whole head gain 0.01, so the
    linear path starts near zero. Use it as any policy class:
    ``MaskablePPO(LinearPathPolicy, env, **PPO_SETTINGS)``."""

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = LinearPathExtractor(self.features_dim, net_arch=self.net_arch,
                                                 activation_fn=self.activation_fn, device=self.device)


@contextlib.contextmanager
def one_torch_thread():
    """Run torch on one thread inside, then restore the setting. The networks
    are small, and on a machine of few cores torch's parallel regions wait for
    a core on every call while JAX steps the sessions or other processes run:
    on a busy 2-core machine, ``torch.exp`` of 100 floats took 3.6 ms on 2
    threads and 1 us on one, and MaskablePPO on 64 LucaSB3VecEnv sessions ran
    250-740 steps/s on torch's default 2 threads against 3,300-7,900 on one."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def plan(steps: int, num_envs: int, pool_size: int | None = DEFAULT_POOL_SIZE) -> str:
    """One line saying what :func:`train_maskable_ppo` runs for ``steps`` on
    ``num_envs`` envs: whole rollouts of ``n_steps`` x ``num_envs`` steps (so
    ``steps`` rounded up), at a constant learning rate (``steps`` sets the
    run's length only), on a pool of ``pool_size`` instances (None: a fresh
    one per episode). Raises ValueError naming a bad argument."""
    steps, num_envs = check_positive_int(steps, "steps"), check_positive_int(num_envs, "num_envs")
    pool = "a fresh instance per episode" if pool_size is None else (
        f"a pool of {check_positive_int(pool_size, 'pool_size'):,} training instances")
    rollout = PPO_SETTINGS["n_steps"] * num_envs
    updates = -(-steps // rollout)
    rounded = "" if updates * rollout == steps else f" ({steps:,} rounded up to whole rollouts)"
    return (f"{updates * rollout:,} env steps = {updates} updates x {num_envs} envs x {PPO_SETTINGS['n_steps']} steps{rounded}; "
            f"learning rate {PPO_SETTINGS['learning_rate']:g}, constant (the step count sets the run's length only); {pool}")


class _Curve(BaseCallback):
    """The learning curve in the JAX PPO's columns (:func:`~luca_gym.agents.ppo.curve_fields`),
    one row per update (a rollout, then SB3's epochs on it): the episodes that
    ended in the rollout (count, mean return, mean headline score from
    ``info["score"]``, mean length) and the losses SB3 logged training on it
    (``train/policy_gradient_loss``, ``train/value_loss``, minus
    ``train/entropy_loss``, ``train/approx_kl``). A row is complete once SB3
    has trained on its rollout: at the next rollout's start, or at the end;
    then ``emit(row)`` is called."""

    def __init__(self, started: float, headline: str, emit: Callable[[dict], None]):
        super().__init__()
        self.started, self.headline, self.emit = started, headline, emit
        self.updates, self.pending = 0, None
        self.ended: list[tuple[float, float, int]] = []  # (return, score, length) of the episodes that ended

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.ended.append((info["episode"]["r"], info.get("score", float("nan")), info["episode"]["l"]))
        return True

    def _on_rollout_end(self) -> None:
        ended = np.array(self.ended, float).reshape(-1, 3)
        means = ended.mean(axis=0) if len(ended) else np.full(3, np.nan)
        self.pending = {"env_steps": self.num_timesteps, "episodes": len(ended), "mean_return": float(means[0]),
                        "mean_score": float(means[1]), f"mean_{self.headline}": float(means[1]), "mean_length": float(means[2])}
        self.ended = []

    def _complete(self) -> None:
        if self.pending is None:
            return
        logged = self.model.logger.name_to_value
        self.updates += 1
        row = {"update": self.updates, **self.pending, "wall_s": round(time.perf_counter() - self.started, 3),
               "policy_loss": logged.get("train/policy_gradient_loss", float("nan")),
               "value_loss": logged.get("train/value_loss", float("nan")),
               "entropy": -logged.get("train/entropy_loss", float("nan")), "approx_kl": logged.get("train/approx_kl", float("nan"))}
        self.pending = None
        self.emit(row)

    def _on_rollout_start(self) -> None:
        self._complete()

    def _on_training_end(self) -> None:
        self._complete()


def train_maskable_ppo(
    *keys,
    steps: int = 800_000,
    num_envs: int = DEFAULT_NUM_ENVS,
    out: str = "runs/maskable-ppo",
    seed: int = 0,
    min_instance_seed: int | None = None,
    world,
    min_organism_seed: int | None = None,
    pool_size: int | None = DEFAULT_POOL_SIZE,
    progress: Callable[[dict], None] | None = None,
    **settings,
) -> dict:
    """Train ``MaskablePPO(LinearPathPolicy)`` with :data:`PPO_SETTINGS` (torch on
    one thread, on the CPU) for ``steps`` environment steps (whole rollouts,
    so rounded up: :func:`plan`) on ``num_envs`` sessions of
    :class:`~luca_gym.envs.sb3_vec.FlatSB3VecEnv` at once, over ``world``'s
    flat codec for ``settings`` (e.g. LUCA's ``tier="easy", mode="healthy",
    n_genes=20, budget=None, analyst="logit-additive"``; positional values are
    the world's session keys in order, LUCA's tier, mode, n_genes), on
    instances drawn from seeds ``min_instance_seed`` and up (10 000 by
    default; ``min_organism_seed`` is its older name): each episode on one of
    the ``pool_size`` instances from there (1024 by default, built once at the
    start; the JAX PPO's pool), or on a fresh one (``pool_size=None``, many
    times slower where building an instance costs more than its episode, as
    LUCA's organisms do); write ``out``/model.zip,
    config.json, learning_curve.csv (growing one row per update, so an
    interrupted run keeps its curve) and learning_curve.png (``out`` is
    created first; existing files are replaced).

    ``progress`` is called after every update with its curve row plus
    ``updates`` (the total), as :func:`luca_gym.agents.ppo.train` calls it.
    Returns {"algo", "out", "steps" (environment steps taken), "updates",
    "wall_s" (all of it), "setup_s" (until the first update was done: the
    compiles), "steps_per_s" (after the first update; None with one update),
    "episodes", "mean_return" (last 100 episodes), "final_score" (the last
    update's mean headline score)}. Raises ValueError naming a bad argument.
    """
    started = time.perf_counter()
    spec = worlds.get(world)
    if len(keys) > len(spec.session_keys):
        raise ValueError(f"settings: {len(keys)} positional values; world {spec.name!r} takes at most "
                         f"{len(spec.session_keys)} ({', '.join(spec.session_keys)}), pass the rest by name")
    for name, value in zip(spec.session_keys, keys):
        if name in settings:
            raise ValueError(f"{name}: given twice (positionally and by name)")
        settings[name] = value
    if min_organism_seed is not None:
        if min_instance_seed is not None:
            raise ValueError("min_organism_seed: the older name of min_instance_seed; give one of them")
        min_instance_seed = min_organism_seed
    min_instance_seed = TRAINING_SEED_LOW if min_instance_seed is None else min_instance_seed
    steps = check_positive_int(steps, "steps")
    seed = check_seed(seed)
    if not isinstance(out, (str, os.PathLike)):
        raise ValueError(f"out: {short_repr(out)} not allowed; a directory path")
    codec = functional.make_env(world=spec, **settings)
    env = FlatSB3VecEnv(codec, num_envs, min_instance_seed=min_instance_seed, seed=seed, pool_size=pool_size)
    os.makedirs(out, exist_ok=True)  # before training: an unwritable out fails at once
    hyper = dict(PPO_SETTINGS, batch_size=min(PPO_SETTINGS["batch_size"], PPO_SETTINGS["n_steps"] * env.num_envs))
    model = MaskablePPO(LinearPathPolicy, env, seed=seed, device="cpu", verbose=0, **hyper)
    # The run folder's learning_curve.csv is the record; SB3's default logger
    # would also make an empty SB3-<date> folder in the system's temp folder.
    model.set_logger(Logger(None, []))
    updates = -(-steps // (PPO_SETTINGS["n_steps"] * env.num_envs))
    rows: list[dict] = []
    with open(os.path.join(out, CURVE_CSV), "w", newline="", encoding="utf-8") as curve_file:
        writer = csv.DictWriter(curve_file, curve_fields(codec.headline), extrasaction="ignore")
        writer.writeheader()

        def emit(row: dict) -> None:
            rows.append(row)
            writer.writerow(row)
            curve_file.flush()
            if progress:
                progress({**row, "updates": updates})

        with one_torch_thread():
            model.learn(total_timesteps=steps, callback=_Curve(started, codec.headline, emit))
    wall = time.perf_counter() - started
    model.save(os.path.join(out, MODEL_FILE))
    config = {
        "algorithm": "MaskablePPO",
        "world": spec.name,
        "settings": codec.settings(),
        "steps": int(model.num_timesteps),
        "num_envs": env.num_envs,
        "seed": seed,
        "min_instance_seed": env.min_instance_seed,
        "pool_size": env.pool_size,
        "policy": "LinearPathPolicy",
        "ppo": hyper,
    }
    with open(os.path.join(out, CONFIG_FILE), "w") as f:
        json.dump(config, f, indent=2)
    plot_curve(rows, os.path.join(out, CURVE_PNG), title=f"MaskablePPO {spec.name} {codec.describe()}",
               ylabel=f"mean {codec.headline} of the sessions ended")
    returns = [e["r"] for e in model.ep_info_buffer]
    first = rows[0]
    later = model.num_timesteps - first["env_steps"]
    return {
        "algo": "maskable-ppo",
        "out": str(out),
        "steps": int(model.num_timesteps),
        "updates": len(rows),
        "wall_s": round(wall, 3),
        "setup_s": first["wall_s"],
        "steps_per_s": round(later / (wall - first["wall_s"]), 1) if later else None,
        "episodes": sum(r["episodes"] for r in rows),
        "mean_return": float(np.mean(returns)) if returns else float("nan"),
        "final_score": rows[-1]["mean_score"],
    }


def _codec_of(config: dict):
    """The flat codec a run was trained on: its world and settings. A run
    written before runs kept their codec's settings apart (LUCA's, the world
    then unnamed or "luca") has them at its top level
    (:func:`luca_gym.agents.ppo.top_level_settings`)."""
    if "settings" in config:
        return functional.make_env(world=config["world"], **config["settings"])
    world = worlds.get(config.get("world", LEGACY_WORLD))
    return functional.make_env(world=world, **top_level_settings(world, config))


def load_policy(path: str, deterministic: bool = True) -> FlatPolicy:
    """A trained run as a harness policy. ``path`` is the run directory or its
    ``model.zip`` (with ``config.json`` beside it). ``choose`` is the model's
    masked prediction on the flat vector: its most likely legal action
    (``deterministic``), or one drawn from its masked distribution with the
    harness's per-session RNG (so a session replays exactly). The codec is
    the one the model was trained with (LUCA's: its analyst writes the values). The policy's name is
    ``sb3:<path>`` (the harness's agent name). Raises ValueError naming the
    path for a missing, unreadable or mismatched run."""
    deterministic = check_bool(deterministic, "deterministic")
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path: {short_repr(path)} not allowed; a run directory or its {MODEL_FILE}")
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    model_path, config_path = os.path.join(folder, MODEL_FILE), os.path.join(folder, CONFIG_FILE)
    for file in (model_path, config_path):
        if not os.path.isfile(file):
            raise ValueError(f"path: {str(path)!r} has no {os.path.basename(file)}; expected a run directory of train_maskable_ppo")
    try:
        with open(config_path) as f:
            config = json.load(f)
        codec = _codec_of(config)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"path: {config_path!r} is not a run's config ({type(error).__name__}: {error})") from None
    try:
        model = MaskablePPO.load(model_path, device="cpu")
    except Exception as error:  # a damaged zip fails in zipfile, pickle or torch: one message for all
        raise ValueError(f"path: {model_path!r} is not a readable MaskablePPO model ({type(error).__name__}: {error})") from None
    size = model.observation_space.shape

    def choose(vector: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        if vector.shape != size:
            raise ValueError(
                f"observation: size {vector.shape[0]} does not match the model at {str(path)!r} (size {size[0]}, "
                f"trained on {codec.describe()}); evaluate it on that size, or retrain if the flat encoding changed"
            )
        # A copy: torch refuses to wrap the read-only arrays that jax.device_get returns.
        mask = np.array(mask, bool)
        with one_torch_thread(), torch.no_grad():
            if deterministic:
                return int(model.predict(vector, deterministic=True, action_masks=mask)[0])
            observation, _ = model.policy.obs_to_tensor(vector)
            probs = model.policy.get_distribution(observation, action_masks=mask).distribution.probs[0].numpy()
        probs = probs.astype(np.float64)  # rng.choice wants the sum within float64 rounding of 1
        return int(rng.choice(probs.size, p=probs / probs.sum()))

    return FlatPolicy(f"sb3:{path}", choose, codec)
