"""Deprecated: the harness is :mod:`luca_gym.harness` (kept for one release; see :mod:`luca_gym._deprecated`)."""
from luca_gym._deprecated import alias

alias(__name__)
