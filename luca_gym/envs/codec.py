"""``CodecEnv``: any world's flat codec (:class:`luca_gym.protocol.FlatCodec`)
as a single Gymnasium env: a ``Discrete(K)`` action, a float32 ``(D,)``
observation and an action mask (``action_masks()``, sb3-contrib's convention,
and ``info["action_mask"]``). One instance per episode: ``reset(seed=...)``
seeds the draw of instance seeds (from
:data:`luca_gym.functional.TRAINING_SEED_START` up, so never an evaluation
seed), ``options={"instance_seed": k}`` pins instance k. A world names a
subclass (``World.flat_env``) that says which world it is; a subclass may
build its codec itself (``codec=``: settings the world's codec factory does
not take) and open its instances its own way (:meth:`CodecEnv.open_session`:
LUCA opens organisms through its memo, sealed where asked).

An action that is not an integer in [0, K) raises ValueError and changes
nothing; a masked action reaches the world's core, which refuses it at no
cost (``info["error_code"]``). The codec's jitted step serves every instance
of its settings.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym import worlds
from luca_gym.boundary import check_flat_actions
from luca_gym.functional import TRAINING_SEED_START
from luca_gym.validate import DRAWN_SEED_LIMIT, check_keys, check_render_mode, check_seed


def instance_seed(np_random, options) -> int:
    """The instance an env's ``reset`` opens: ``options={"instance_seed": k}``
    pins k; else one drawn by the env's ``np_random`` from
    :data:`~luca_gym.functional.TRAINING_SEED_START` up (never an evaluation
    seed). Any other option is refused by name."""
    options = dict(options or {})
    check_keys(options, "options", ("instance_seed",))
    if "instance_seed" in options:
        return check_seed(options["instance_seed"], "instance_seed")
    return int(np_random.integers(TRAINING_SEED_START, DRAWN_SEED_LIMIT))


@partial(jax.jit, static_argnames=("codec",))
def _open(instances, codec):
    return codec.open(jax.tree_util.tree_map(lambda x: x[0], instances))


@partial(jax.jit, static_argnames=("codec",))
def _step(state, action, codec):
    return codec.step(state, action)


class CodecEnv(gym.Env):
    """One session of a world's flat codec per episode.

    Args:
        render_mode: None or "ansi" (one line: the instance, the calls, the
            score so far), or another of the class's ``metadata["render_modes"]``.
        codec: the flat codec, built by a subclass (then no ``settings``).
        settings: the codec's settings (the world's config fields).

    ``info`` carries ``instance_seed`` and ``action_mask`` on reset,
    ``action_mask``, ``error_code`` on every step and the codec's scores
    (``scores``, where it has a ``scores`` method, else the headline) once the
    session has ended.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    world = ""  # a subclass names its world

    def __init__(self, render_mode: str | None = None, *, codec=None, **settings):
        self.codec = worlds.get(self.world).make_flat(**settings) if codec is None else codec
        self.render_mode = check_render_mode(render_mode, tuple(self.metadata["render_modes"]))
        self.action_space = spaces.Discrete(self.codec.num_actions)
        low, high = getattr(self.codec, "observation_bounds", (-np.inf, np.inf))
        self.observation_space = spaces.Box(low, high, (self.codec.observation_size,), np.float32)
        self.state = self._mask = None
        self.instance_seed, self.calls, self.total = None, 0, 0.0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.state, vector, mask, opened = self.open_session(options)
        vector, self._mask = jax.device_get((vector, mask))
        self.calls, self.total = 0, 0.0
        return np.array(vector, np.float32), {**opened, "action_mask": np.array(self._mask, bool)}

    def open_session(self, options):
        """The session a ``reset`` opens: (codec state, vector, mask, what
        ``info`` says of the instance). Here instance :func:`instance_seed`
        of the codec's ``instances``."""
        self.instance_seed = instance_seed(self.np_random, options)
        state, vector, mask = _open(self.codec.instances([self.instance_seed]), self.codec)
        return state, vector, mask, {"instance_seed": self.instance_seed}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        index = check_flat_actions(action, self.codec.num_actions)
        self.state, vector, mask, reward, terminated, truncated, error = _step(self.state, np.int32(index), self.codec)
        vector, self._mask, reward, terminated, truncated, error = jax.device_get(
            (vector, mask, reward, terminated, truncated, error))
        self.calls += int(error) == 0
        self.total += float(reward)
        info = {"error_code": int(error), "action_mask": np.array(self._mask, bool)}
        if terminated or truncated:
            info["scores"] = self.scores()
        return np.array(vector, np.float32), float(reward), bool(terminated), bool(truncated), info

    def scores(self) -> dict:
        """The session's scores as Python numbers."""
        if hasattr(self.codec, "scores"):
            values = jax.device_get(self.codec.scores(self.state))
        else:
            values = {self.codec.headline: jax.device_get(self.codec.score(self.state))}
        return {k: np.asarray(v).item() for k, v in values.items()}

    def action_masks(self) -> np.ndarray:
        """bool (K,): the actions the rules accept now."""
        if self._mask is None:
            raise RuntimeError("action_masks() called before reset()")
        return np.array(self._mask, bool)

    def render(self):
        if self.render_mode != "ansi" or self.state is None:
            return None
        score = float(jax.device_get(self.codec.score(self.state)))
        return f"{self.codec.describe()} instance {self.instance_seed}: {self.calls} calls, {self.codec.headline} {score:g}"

    def close(self):
        self.state = self._mask = None
