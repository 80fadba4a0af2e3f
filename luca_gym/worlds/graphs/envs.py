"""The graph worlds' Gymnasium envs.

* :class:`DagEnv` / :class:`RelationalEnv` (``luca_gym/DagDiscovery-v0``,
  ``luca_gym/RelationalDiscovery-v0``): the whole action, a ``Dict`` of
  ``kind`` (0 intervene, 1 submit, 2 end), ``node`` and ``adjacency``
  (``MultiBinary((N, N))``, read by a submission and, under
  ``proposals="every"``, by an intervention); the observation is the
  public view (``states``, ``evidence``, ``intervened``, ``budget_left``).
* :class:`DagFlatEnv` / :class:`RelationalFlatEnv` (``...Flat-v0``): the
  flat codec (:mod:`~luca_gym.worlds.graphs.flat`) as a Gymnasium env
  (:class:`luca_gym.envs.codec.CodecEnv`), with an action mask.

Both step the core's jitted ``step``; a refused action earns nothing and
changes nothing (``info["error_code"]``, ``info["error"]``).
"""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym.boundary import check_flat_actions
from luca_gym.envs.codec import CodecEnv, instance_seed
from luca_gym.validate import check_render_mode, short_repr
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig


class _GraphEnv(gym.Env):
    """One session of a graph world per episode (see the module). ``reset``
    seeds the draw of instance seeds (from 10,000 up: never an evaluation
    seed); ``options={"instance_seed": k}`` pins instance k. ``info`` carries
    ``instance_seed`` on reset and the scores (``scores``) once the session
    has ended."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    config_class: type = DagConfig

    def __init__(self, render_mode: str | None = None, **settings):
        self.config = c = self.config_class(**settings)
        self.render_mode = check_render_mode(render_mode)
        top = c.n_states - 1 if c.directed else c.budget
        self.observation_space = spaces.Dict({
            "states": spaces.Box(0, top, (c.n,), np.int32),
            "evidence": spaces.Box(-1, 1, (c.n, c.n), np.int8),
            "intervened": spaces.Box(0, c.budget, (c.n,), np.int32),
            "budget_left": spaces.Box(0, c.budget, (), np.int32),
        })
        self.action_space = spaces.Dict({"kind": spaces.Discrete(3), "node": spaces.Discrete(c.n),
                                         "adjacency": spaces.MultiBinary((c.n, c.n))})
        self.state, self.instance_seed = None, None

    def _obs(self) -> dict:
        view = jax.device_get(core.public_view(self.state))
        return {k: np.asarray(view[k], self.observation_space[k].dtype) for k in self.observation_space}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.instance_seed = instance_seed(self.np_random, options)
        self.state = core.reset(core.instance(self.instance_seed, self.config), self.config)
        return self._obs(), {"instance_seed": self.instance_seed}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        kind, node, adjacency = self._checked(action)
        self.state, reward, error = core.step(self.state, kind, node, adjacency, self.config)
        error = int(error)
        ended = bool(self.state.ended)
        info = {"error_code": error, "error": core.ERRORS[error] or None}
        if ended:
            values = jax.device_get(core.scores(self.state, self.config.directed))
            info["scores"] = {k: np.asarray(v).item() for k, v in values.items()}
        return self._obs(), float(reward), ended, False, info

    def _checked(self, action) -> tuple[int, int, np.ndarray]:
        n = self.config.n
        allowed = f"a dict of kind (0..2), node (0..{n - 1}) and adjacency (0/1 of shape ({n}, {n}))"
        if not isinstance(action, dict) or set(action) != {"kind", "node", "adjacency"}:
            raise ValueError(f"action: {short_repr(action)} not allowed; {allowed}")
        kind, node = (check_flat_actions(action[k], size, name=k) for k, size in (("kind", 3), ("node", n)))
        adjacency = np.asarray(action["adjacency"])
        if adjacency.shape != (n, n) or adjacency.dtype.kind not in "biu" or not np.isin(adjacency, (0, 1)).all():
            raise ValueError(f"action: adjacency {short_repr(action['adjacency'])} not allowed; {allowed}")
        return int(kind), int(node), adjacency.astype(bool)

    def render(self):
        if self.render_mode != "ansi" or self.state is None:
            return None
        view = jax.device_get(core.public_view(self.state))
        return (f"{self.config.describe()} instance {self.instance_seed}: states {view['states'].tolist()}, "
                f"budget left {int(view['budget_left'])}")

    def close(self):
        self.state = None


class DagEnv(_GraphEnv):
    """``luca_gym/DagDiscovery-v0`` (keyword settings: :class:`DagConfig`'s fields)."""

    config_class = DagConfig


class RelationalEnv(_GraphEnv):
    """``luca_gym/RelationalDiscovery-v0`` (keyword settings: :class:`RelationalConfig`'s fields)."""

    config_class = RelationalConfig


class DagFlatEnv(CodecEnv):
    """``luca_gym/DagDiscoveryFlat-v0``: the flat codec of ``dag``."""

    world = "dag"


class RelationalFlatEnv(CodecEnv):
    """``luca_gym/RelationalDiscoveryFlat-v0``: the flat codec of ``relational``."""

    world = "relational"
