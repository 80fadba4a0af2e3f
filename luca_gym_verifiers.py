"""luca-gym's worlds under the name verifiers 0.4 resolves a taskset by (a
top-level module): ``vf-eval luca_gym_verifiers --env.taskset.world dag ...``.
Everything here is :mod:`luca_gym.integrations.verifiers_v1`'s (verifiers 0.4
only; with 0.2 use :mod:`luca_gym.integrations.verifiers`)."""

from luca_gym.integrations.verifiers_v1 import *  # noqa: F401,F403
from luca_gym.integrations.verifiers_v1 import __all__  # noqa: F401
