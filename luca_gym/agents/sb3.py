"""Maskable PPO (sb3-contrib) on the flat action space of any world with a
flat codec: train on :class:`~luca_gym.envs.sb3_vec.FlatSB3VecEnv`, save, and
load back as a :class:`~luca_gym.agents.FlatPolicy` that runs through the
evaluation harness like any baseline.

A run directory holds ``model.zip`` (the SB3 model), ``config.json`` (the
world and the codec settings it was trained on, read back by
:func:`load_policy`) and ``learning_curve.csv`` (one row per rollout:
environment steps, wall seconds, mean return of the last 100 episodes).
Training instances are drawn from seeds ``min_instance_seed`` and up (10 000
by default), apart from the evaluation seeds 0-19.

Needs the ``rl`` extra (``pip install 'luca-gym[rl]'``).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import time

import numpy as np

try:
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
except ImportError as error:
    raise ImportError("luca_gym.agents.sb3 needs sb3-contrib: pip install 'luca-gym[rl]'") from error

from luca_gym import functional, worlds
from luca_gym.agents.base import FlatPolicy
from luca_gym.envs.sb3_vec import TRAINING_SEED_LOW, FlatSB3VecEnv
from luca_gym.validate import check_bool, check_positive_int, check_seed, short_repr

MODEL_FILE, CONFIG_FILE, CURVE_FILE = "model.zip", "config.json", "learning_curve.csv"
CURVE_FIELDS = ("steps", "wall_s", "mean_return")
# PPO settings for sessions of at most budget + 7 calls whose reward comes at
# the predictions and the close. Rollouts of 64 calls per env span whole
# sessions. gamma = 1: sessions are bounded and the return is the composite
# itself. With gamma = 0.99, every setting tried on easy healthy (entropy
# 0.01-0.1, 256-unit layers, dense shaping; 300k steps) settled on "reveal,
# predict at once", the random baseline's 0.633; with gamma = 1 the policy
# spends its budget on experiments first and its return keeps rising (0.72
# after 200k steps, 0.74 after 400k). Entropy 0.02 keeps the experiments varied.
PPO_SETTINGS = {
    "n_steps": 64,
    "batch_size": 512,
    "n_epochs": 4,
    "learning_rate": 3e-4,
    "gamma": 1.0,
    "gae_lambda": 0.95,
    "ent_coef": 0.02,
}


@contextlib.contextmanager
def _one_torch_thread():
    """Run torch on one thread, then restore the setting. The networks are
    small, and torch's worker threads, spinning between calls, starve JAX's
    thread pool that steps the sessions in between: on 2 cores, training with
    torch's default 2 threads ran 20x slower (benchmarks/sb3.py)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class _Curve(BaseCallback):
    """Appends (steps, wall seconds, mean return of the last 100 episodes) to
    ``rows`` after every rollout, and counts finished episodes."""

    def __init__(self, rows: list):
        super().__init__()
        self.rows, self.episodes = rows, 0

    def _on_training_start(self) -> None:
        self.started = time.perf_counter()

    def _on_step(self) -> bool:
        self.episodes += int(np.sum(self.locals["dones"]))
        return True

    def _on_rollout_end(self) -> None:
        returns = [e["r"] for e in self.model.ep_info_buffer]
        mean = float(np.mean(returns)) if returns else float("nan")
        self.rows.append((self.num_timesteps, round(time.perf_counter() - self.started, 3), mean))


def train_maskable_ppo(
    *keys,
    steps: int = 200_000,
    num_envs: int = 64,
    out: str = "runs/maskable-ppo",
    seed: int = 0,
    min_instance_seed: int | None = None,
    world="luca",
    min_organism_seed: int | None = None,
    **settings,
) -> dict:
    """Train ``MaskablePPO("MlpPolicy")`` with :data:`PPO_SETTINGS` (torch on
    one thread, on the CPU) for ``steps`` environment steps on ``num_envs``
    sessions of :class:`~luca_gym.envs.sb3_vec.FlatSB3VecEnv` at once, over
    ``world``'s flat codec for ``settings`` (e.g. LUCA's ``tier="easy",
    mode="healthy", n_genes=20, budget=None, analyst="logit-additive"``;
    positional values are the world's session keys in order, LUCA's tier,
    mode, n_genes), on instances drawn from seeds ``min_instance_seed`` and up
    (10 000 by default; ``min_organism_seed`` is its older name); write
    ``out``/model.zip, config.json and learning_curve.csv (``out`` is created
    first; existing files are replaced).

    Returns {"out", "steps" (environment steps taken: whole rollouts, so at
    least ``steps``), "wall_s", "steps_per_s", "episodes", "mean_return" (last
    100 episodes)}. Raises ValueError naming a bad argument.
    """
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
    env = FlatSB3VecEnv(codec, num_envs, min_instance_seed=min_instance_seed, seed=seed)
    os.makedirs(out, exist_ok=True)  # before training: an unwritable out fails at once
    hyper = dict(PPO_SETTINGS, batch_size=min(PPO_SETTINGS["batch_size"], PPO_SETTINGS["n_steps"] * env.num_envs))
    model = MaskablePPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hyper)
    rows: list = []
    curve = _Curve(rows)
    started = time.perf_counter()
    with _one_torch_thread():
        model.learn(total_timesteps=steps, callback=curve)
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
        "ppo": hyper,
    }
    with open(os.path.join(out, CONFIG_FILE), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, CURVE_FILE), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CURVE_FIELDS)
        writer.writerows(rows)
    returns = [e["r"] for e in model.ep_info_buffer]
    return {
        "out": str(out),
        "steps": int(model.num_timesteps),
        "wall_s": round(wall, 3),
        "steps_per_s": round(model.num_timesteps / wall, 1),
        "episodes": curve.episodes,
        "mean_return": float(np.mean(returns)) if returns else float("nan"),
    }


def _codec_of(config: dict):
    """The flat codec a run was trained on: its world and settings; a LUCA run
    written before runs named their world keeps its settings at the top level."""
    if "settings" in config:
        return functional.make_env(world=config["world"], **config["settings"])
    legacy = {k: config[k] for k in ("tier", "mode", "budget") if k in config}
    return functional.make_env(world=config.get("world", "luca"), n_genes=config["n_genes"], analyst=config["analyst"], **legacy)


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
        with _one_torch_thread(), torch.no_grad():
            if deterministic:
                return int(model.predict(vector, deterministic=True, action_masks=mask)[0])
            observation, _ = model.policy.obs_to_tensor(vector)
            probs = model.policy.get_distribution(observation, action_masks=mask).distribution.probs[0].numpy()
        probs = probs.astype(np.float64)  # rng.choice wants the sum within float64 rounding of 1
        return int(rng.choice(probs.size, p=probs / probs.sum()))

    return FlatPolicy(f"sb3:{path}", choose, codec)
