"""Old module paths kept for one release: LUCA moved into
:mod:`luca_gym.worlds.luca` ("Many worlds, one library").

``luca_gym.sim``, ``luca_gym.world``, ``luca_gym.core`` and the rest are now
*the same module objects* as their new homes (so a monkeypatch or an
``isinstance`` through either name sees one thing), registered under the old
name with a :class:`DeprecationWarning` on first import. A package's
submodules are registered under the old names too, so
``import luca_gym.world.tiers`` never loads a second copy.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings

# old module name -> new module name; a package brings its submodules along.
MOVED = {
    "luca_gym.spec": "luca_gym.worlds.luca.spec",
    "luca_gym.types": "luca_gym.worlds.luca.types",
    "luca_gym.world": "luca_gym.worlds.luca.generator",
    "luca_gym.sim": "luca_gym.worlds.luca.sim",
    "luca_gym.diffsim": "luca_gym.worlds.luca.diffsim",
    "luca_gym.scoring": "luca_gym.worlds.luca.scoring",
    "luca_gym.analysts": "luca_gym.worlds.luca.analysts",
    "luca_gym.fidelity": "luca_gym.worlds.luca.fidelity",
    "luca_gym.vocabulary": "luca_gym.worlds.luca.vocabulary",
    "luca_gym.core": "luca_gym.worlds.luca.core",
    "luca_gym.baselines": "luca_gym.worlds.luca.baselines",
    "luca_gym.calls": "luca_gym.worlds.luca.calls",
    "luca_gym.eval": "luca_gym.harness",
    "luca_gym.wrappers.mcp_server": "luca_gym.tools.mcp_server",
    "luca_gym.wrappers.mock_provider": "luca_gym.tools.mock_provider",
    "luca_gym.wrappers.schema": "luca_gym.tools.schema",
    "luca_gym.wrappers.results_schema": "luca_gym.worlds.luca.results_schema",
    "luca_gym.envs.luca_env": "luca_gym.worlds.luca.envs.env",
    "luca_gym.envs.vector": "luca_gym.worlds.luca.envs.vector",
    "luca_gym.envs.flat": "luca_gym.worlds.luca.envs.flat",
    "luca_gym.envs.sb3": "luca_gym.worlds.luca.envs.sb3",
    "luca_gym.envs.spaces": "luca_gym.worlds.luca.envs.spaces",
    "luca_gym.ablation": "luca_gym.worlds.luca.ablation",
    "luca_gym.play": "luca_gym.worlds.luca.play",
}
# Names that moved into a world out of a module that stayed (its module is
# generic now): module -> {name: new home}.
_EVALUATION = ("KEY_FIELDS", "KEY_DEFAULTS", "REQUIRED_KEY_FIELDS", "SCORE_FIELDS", "STRATEGY_FIELDS", "luca_spec")
_TABLES = ("PAPER_COMPOSITE", "PAPER_SCALING", "summary", "composite_table", "disease_table", "strategy_table", "scaling_table")
_ENVS = {"LucaEnv": "env", "LucaVectorEnv": "vector", "LucaFlatEnv": "flat", "LucaToolsEnv": "tools", "LucaSB3VecEnv": "sb3"}
MOVED_NAMES = {
    "luca_gym.envs": {name: f"luca_gym.worlds.luca.envs.{module}:{name}" for name, module in _ENVS.items()},
    "luca_gym.envs.tools": {"LucaToolsEnv": "luca_gym.worlds.luca.envs.tools:LucaToolsEnv"},
    "luca_gym.harness": {**{n: f"luca_gym.worlds.luca.evaluation:{n}" for n in _EVALUATION},
                         **{n: f"luca_gym.worlds.luca.tables:{n}" for n in _TABLES}},
    "luca_gym.harness.spec": {n: f"luca_gym.worlds.luca.evaluation:{n}" for n in _EVALUATION},
    "luca_gym.harness.tables": {n: f"luca_gym.worlds.luca.tables:{n}" for n in _TABLES},
    "luca_gym.report": {**{n: f"luca_gym.worlds.luca.viewer:{n}"
                           for n in ("describe_session", "draw_network", "draw_session", "session_file_name")},
                        **{n: f"luca_gym.worlds.luca.report:{n}"
                           for n in ("figure_composite", "figure_disease", "figure_scaling", "PAPER_STRATEGY", "PAPER_N")}},
    "luca_gym.cli": {n: f"luca_gym.worlds.luca.cli:{n}"
                     for n in ("cmd_play", "cmd_info", "cmd_fidelity", "conditions", "describe", "open_session",
                               "TIER_CHOICES", "MODE_CHOICES", "ABLATIONS")},
    "luca_gym.functional": {n: f"luca_gym.worlds.luca.functional:{n}"
                            for n in ("organism_batch", "rollout", "rollout_scores", "fresh_rollout")},
}
# A submodule that changed its name on the way (new -> old).
RENAMED = {"luca_gym.worlds.luca.generator.organisms": "luca_gym.world.generator"}


def alias(old: str) -> None:
    """Make module ``old`` (a key of :data:`MOVED`) its new module, warning once."""
    new = MOVED[old]
    warnings.warn(f"{old} is deprecated and will be removed in the next release; import {new}",
                  DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        sub = importlib.import_module(f"{new}.{info.name}")
        old_sub = RENAMED.get(sub.__name__, f"{old}.{info.name}")
        sys.modules[old_sub] = sub
        if not hasattr(module, old_sub.rpartition(".")[2]):  # so `import old.sub as x` finds it
            setattr(module, old_sub.rpartition(".")[2], sub)


def moved_name(module: str, name: str):
    """``module.name`` where ``name`` moved into a world (:data:`MOVED_NAMES`):
    its new home, with a :class:`DeprecationWarning`; AttributeError otherwise
    (a module's ``__getattr__`` calls this)."""
    target = MOVED_NAMES.get(module, {}).get(name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new_module = target.partition(":")[0]
    warnings.warn(f"{module}.{name} is deprecated and will be removed in the next release; import it from {new_module}",
                  DeprecationWarning, stacklevel=3)
    value = importlib.import_module(new_module)
    return getattr(value, name)
