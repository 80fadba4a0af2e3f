"""Deprecated: the tool layer moved to :mod:`luca_gym.tools` and LUCA's tools
to :mod:`luca_gym.worlds.luca.tools`; these module names stay importable for
one release."""
