"""The one Gymnasium boundary, shared by :class:`~luca_gym.worlds.luca.envs.LucaEnv` and
:class:`~luca_gym.worlds.luca.envs.LucaVectorEnv`: spaces, action parsing, observation
conversion and reset options.

An action crosses the boundary in two checks. Here, its *structure*: a dict
whose keys are known field names, with ``kind`` present. In
:func:`luca_gym.worlds.luca.core.make_action`, each field's shape, dtype and range (with an
optional batch shape) and the defaults of the fields left out. Both raise
``ValueError`` naming the field; nothing is spent. Every representable value
then goes to the core, which refuses an illegal one at no cost and reports it
in ``info["error_code"]``. The single env and the vector env reach the same
verdict on the same action, because they run the same code.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from luca_gym.boundary import to_numpy_observation  # noqa: F401  (the env boundary's conversion, re-exported)
from luca_gym.boundary import reset_options  # noqa: F401  (re-exported: the envs' reset options)
from luca_gym.worlds.luca.core import parse_action  # noqa: F401  (re-exported: the envs' action check)
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.spec import DAMPEN, MALFUNCTION_TYPES, N_PHENOTYPES


def _box(shape, dtype, low, high) -> spaces.Box:
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape, np.int8)
    return spaces.Box(low, high, shape, dtype)


def observation_space(params: core.EnvParams) -> spaces.Dict:
    """The observation as a Dict of Boxes (bools as int8 0/1)."""
    return spaces.Dict({k: _box(*v) for k, v in core.observation_shapes(params).items()})


def action_space(params: core.EnvParams) -> spaces.Dict:
    """The dict action: every field of :class:`luca_gym.worlds.luca.core.Action`."""
    n, s = params.n_genes, params.n_signals
    return spaces.Dict(
        {
            "kind": spaces.Discrete(core.N_KINDS),
            "gene_codes": spaces.MultiDiscrete(np.full(n, DAMPEN + 1)),
            "signal_flags": spaces.MultiBinary(s),
            "prediction": spaces.Box(0.0, 1.0, (N_PHENOTYPES,), np.float32),
            "diagnosis_target": spaces.Discrete(n + s),
            "diagnosis_type": spaces.Discrete(len(MALFUNCTION_TYPES)),
            "network": spaces.Box(-1, 1, (n, N_PHENOTYPES), np.int8),
        }
    )
