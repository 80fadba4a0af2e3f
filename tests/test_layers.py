"""The layers and the registry: import-linter's contracts hold, and break when
a generic module imports a world (or a world imports what stands above it);
the registry registers worlds and their Gymnasium ids; each thing has one
import path (the old module paths and names are gone)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import luca_gym
from luca_gym import worlds
from luca_gym.protocol import World

ROOT = Path(__file__).resolve().parents[1]


def lint(root: Path) -> subprocess.CompletedProcess:
    """lint-imports over the package at ``root`` (its own pyproject.toml)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_layer_contracts_hold():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture
def tree_copy(tmp_path):
    """A copy of the package and its pyproject.toml, to break on purpose."""
    shutil.copytree(ROOT / "luca_gym", tmp_path / "luca_gym", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize("module, line, contract", [
    ("seal.py", "from luca_gym.worlds.luca import spec", "Generic modules name no world"),
    ("protocol.py", "import luca_gym.worlds.luca.core.session", "Generic modules name no world"),
    ("worlds/luca/sim.py", "from luca_gym.harness import runner", "A world knows nothing above it"),
    ("tools/session.py", "from luca_gym.worlds.luca import tools", "Generic modules name no world"),
    ("harness/sweep.py", "from luca_gym.worlds.luca import diffsim", "Generic modules name no world"),  # a new weld
    ("worlds/luca/tools.py", "from luca_gym.mcp import server", "A world knows nothing above it"),
    ("worlds/tracking/core.py", "from luca_gym.results import report", "A world knows nothing above it"),
    ("llm/loop.py", "from luca_gym.envs.tools import ToolsEnv", "not through a Gymnasium env"),
    ("results/summaries.py", "from luca_gym.worlds.biobank import audit", "Generic modules name no world"),
    ("worlds/graphs/core.py", "from luca_gym.worlds.luca import spec", "Worlds do not import each other"),
    ("worlds/luca/cli.py", "from luca_gym.cli.eval import ablation_arms", "A world knows nothing above it"),
    ("cli/common.py", "from luca_gym.harness import ResultsWarning", "What every command line shares imports nothing"),
])
def test_a_forbidden_import_breaks_its_contract(tree_copy, module, line, contract):
    path = tree_copy / "luca_gym" / module
    path.write_text(path.read_text() + f"\n{line}\n")
    result = lint(tree_copy)
    assert result.returncode != 0
    broken = [row for row in result.stdout.splitlines() if "BROKEN" in row]
    assert broken, result.stdout
    assert contract in " ".join(result.stdout.split("Broken contracts")[1].split()), result.stdout  # names wrap


def test_every_world_folder_is_under_every_contract():
    """A new world folder cannot escape the contracts: each lists every package under luca_gym/worlds/."""
    import tomllib

    folders = {f"luca_gym.worlds.{p.name}" for p in (ROOT / "luca_gym" / "worlds").iterdir() if (p / "__init__.py").exists()}
    contracts = {c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
    assert set(contracts["generic-names-no-world"]["forbidden_modules"]) == folders
    assert set(contracts["world-knows-nothing-above"]["source_modules"]) == folders
    assert set(contracts["worlds-independent"]["modules"]) == folders
    assert set(worlds.BUILTIN.values()) <= {f"{f}:{a}" for f in folders for a in ("WORLD", "DAG", "RELATIONAL")}


def test_every_generic_module_is_under_the_contracts():
    """No module outside the worlds escapes the layers: each lies in a module or
    package that the generic contract lists (the root package's re-exports aside)."""
    import tomllib

    contracts = {c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
    listed = set(contracts["generic-names-no-world"]["source_modules"])
    package = ROOT / "luca_gym"
    left_out = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) < 2 or parts[1] == "worlds":
            continue  # the root package (its re-exports are the contracts' one ignored import) and the worlds
        if not any(".".join(parts[:k]) in listed for k in range(2, len(parts) + 1)):
            left_out.append(".".join(parts))
    assert left_out == [], f"modules under no contract: {left_out}"


def test_the_registry_holds_luca_and_its_gym_ids():
    assert "luca" in worlds.names()
    world = worlds.get("luca")
    assert world.name == "luca" and world.gym_stem == "Luca"
    assert set(world.gym_ids()) == {"luca_gym/Luca-v0", "luca_gym/LucaFlat-v0", "luca_gym/LucaTools-v0"}
    for env_id in world.gym_ids():
        assert env_id in gym.registry
    assert gym.registry["luca_gym/Luca-v0"].vector_entry_point == world.vector_env
    config = world.make_config(tier="easy", n_genes=12)
    assert (config.tier, config.mode, config.n_genes, config.backwards) == ("easy", "healthy", 12, False)
    assert "causal-sweep" in world.baseline_policies()
    assert worlds.get("luca_gym.worlds.luca:WORLD") is world


@pytest.mark.parametrize("bad, match", [
    ("nope", "world: 'nope' unknown; allowed .*luca"),
    (3, "world: 3 is not a world name"),
    ("luca_gym.nothing_here:WORLD", "could not be loaded"),
    ("luca_gym.worlds.luca.config:LucaConfig", "is a type, not a luca_gym.protocol.World"),
])
def test_a_bad_world_is_refused_by_name(bad, match):
    with pytest.raises(ValueError, match=match):
        worlds.get(bad)


def test_a_bad_config_names_the_field():
    with pytest.raises(ValueError, match="tier: 'impossible' unknown"):
        worlds.get("luca").make_config(tier="impossible")
    with pytest.raises(ValueError, match="vocabulary: 'real' has 50 real gene names"):
        worlds.get("luca").make_config(n_genes=80, vocabulary="real")


def test_registering_a_world_registers_its_gym_ids():
    toy = World(name="layers_toy", version="1", gym_stem="LayersToy", summary="a registry test",
                config="luca_gym.worlds.luca.config:LucaConfig", env="luca_gym.worlds.luca.envs.env:LucaEnv",
                tools_env="luca_gym.worlds.luca.envs.tools:LucaToolsEnv")
    luca_gym.register_world(toy)
    assert "layers_toy" in worlds.names() and worlds.get("layers_toy") is toy
    assert "luca_gym/LayersToy-v0" in gym.registry and "luca_gym/LayersToyTools-v0" in gym.registry
    assert "luca_gym/LayersToyFlat-v0" not in gym.registry  # no flat codec, no flat id
    luca_gym.register_world(toy)  # the same world again: nothing changes
    other = World(name="layers_toy", version="2", gym_stem="LayersToy", summary="another",
                  config=toy.config, env=toy.env)
    with pytest.raises(ValueError, match="a world named 'layers_toy' is registered already"):
        luca_gym.register_world(other)
    with pytest.raises(TypeError, match="expected a luca_gym.protocol.World"):
        luca_gym.register_world("layers_toy")


@pytest.mark.parametrize("field, value, match", [
    ("name", "Bad Name", "World.name"),
    ("gym_stem", "lower", "World.gym_stem"),
    ("env", "not an entry point", "World.env"),
    ("version", "", "World.version"),
])
def test_a_malformed_world_is_refused(field, value, match):
    fields = dict(name="ok", version="1", gym_stem="Ok", summary="", config="a.b:C", env="a.b:D")
    fields[field] = value
    with pytest.raises(ValueError, match=match):
        World(**fields)


OLD_PATHS = ["spec", "types", "world", "world.tiers", "world.generator", "sim", "diffsim", "scoring", "analysts",
             "fidelity", "vocabulary", "core", "core.session", "core.flat", "baselines", "baselines.batched", "calls",
             "wrappers", "wrappers.llm", "wrappers.mcp_server", "wrappers.mock_provider", "wrappers.schema",
             "wrappers.results_schema", "eval", "envs.luca_env", "envs.vector", "envs.flat", "envs.sb3", "envs.spaces",
             "ablation", "play", "_deprecated",
             # the rooms: results, language-model front ends, MCP and the sandbox each in a package of their own
             "report", "report_html", "figures", "summaries", "paired", "process", "audit", "transcripts",
             "tools.loop", "tools.providers", "tools.mock_provider", "tools.recording", "tools.mcp_server",
             "tools.sandbox", "tools.sandbox_seccomp",
             # the command line: one module a command in the package luca_gym.cli, what they share in luca_gym.cli.common
             "cli_common"]


def test_old_module_paths_are_gone():
    """One import path for each thing: the moved modules live only in their new homes."""
    code = f"""
import importlib
import luca_gym
for old in {OLD_PATHS!r}:
    try:
        importlib.import_module("luca_gym." + old)
    except ModuleNotFoundError:
        continue
    raise SystemExit("luca_gym." + old + " still imports")
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr[-2000:]


@pytest.mark.parametrize("module, name", [
    ("luca_gym.envs", "LucaEnv"), ("luca_gym.envs", "LucaToolsEnv"), ("luca_gym.envs.tools", "LucaToolsEnv"),
    ("luca_gym.functional", "rollout"), ("luca_gym.harness", "luca_spec"), ("luca_gym.harness", "KEY_FIELDS"),
    ("luca_gym.harness.spec", "luca_spec"), ("luca_gym.harness.tables", "composite_table"),
    ("luca_gym.results.report", "figure_composite"), ("luca_gym.cli", "cmd_play"),
    ("luca_gym.cli", "cmd_eval"), ("luca_gym.cli", "parse_seeds"), ("luca_gym.cli", "TrainProgress"),
    ("luca_gym.cli", "_train_by_cloning"), ("luca_gym.cli", "_warm_start"),
])
def test_moved_names_live_only_in_their_new_homes(module, name):
    import importlib

    assert not hasattr(importlib.import_module(module), name)


def test_the_package_imports_no_deprecated_path():
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning); import luca_gym, luca_gym.envs, "
            "luca_gym.harness, luca_gym.cli, luca_gym.results.report, luca_gym.worlds.luca.play, luca_gym.worlds.luca.ablation, luca_gym.llm.loop, "
            "luca_gym.llm.providers, luca_gym.mcp.server, luca_gym.llm.mock, luca_gym.worlds.luca.tools, "
            "luca_gym.agents.ppo, luca_gym.worlds.luca.baselines.batched")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_list_of_welds_only_shrinks(tree_copy):
    """A weld removed from the code must leave the contract's list too (an
    unmatched ignored import is an error), so the list never hides a weld."""
    path = tree_copy / "luca_gym" / "__init__.py"
    line = "from luca_gym.worlds.luca.types import Organism, OrganismArrays, OrganismMeta, SteadyState\n"
    text = path.read_text()
    assert line in text
    path.write_text(text.replace(line, ""))
    result = lint(tree_copy)
    assert result.returncode != 0
    assert "No matches for ignored import luca_gym -> luca_gym.worlds.luca.types" in " ".join(result.stdout.split())


def test_luca_config_reaches_the_functions_in_either_order():
    from luca_gym.worlds.luca import core, generator
    from luca_gym.worlds.luca.config import LucaConfig

    config = LucaConfig("easy", "disease", 20)
    assert config.params(budget=9) == core.make_params("easy", 20, "disease", budget=9)
    assert config.organism(3).fingerprint() == generator.make_organism(3, "easy", 20, "disease").fingerprint()
    session = config.session(max_steps=5)
    session.open(3)
    assert (session.tier, session.mode, session.n_genes, session.params.max_steps) == ("easy", "disease", 20, 5)


def test_luca_gym_worlds_lists_the_registry(capsys):
    from luca_gym import cli

    assert cli.main(["worlds"]) == 0
    out = capsys.readouterr().out
    assert "luca (version 1): gene-regulatory organisms" in out  # (other tests may have registered more worlds)
    assert "luca_gym/Luca-v0, luca_gym/LucaFlat-v0, luca_gym/LucaTools-v0" in out and "headline score: composite" in out
    assert "  flat baselines (teachers of train --algo bc): causal-sweep-flat\n" in out
