"""Deprecated: moved to :mod:`luca_gym.worlds.luca.ablation` (kept for one release; see :mod:`luca_gym._deprecated`)."""
from luca_gym._deprecated import alias

alias(__name__)
