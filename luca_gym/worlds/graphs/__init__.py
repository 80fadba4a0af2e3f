"""The graph discovery worlds of *Auto-Discovery-Bench: Diagnosing Structured
State Tracking in Oracle-Guided Discovery*: :data:`DAG`, directed graph
discovery (molecules; intervening on one re-draws its children's states), and
:data:`RELATIONAL`, undirected relational discovery (houses; attacking one
raises its anger and its allies'). One folder for both: they share the core
(:mod:`~luca_gym.worlds.graphs.core`, ``World.core`` of both: the rules
differ by static settings of the config), the config (on
:class:`luca_gym.config.ConfigBase`), the tool table (on
:class:`~luca_gym.tools.table.TableToolSession`), the Gymnasium envs (the
generic :class:`~luca_gym.envs.core.CoreEnv`), the flat codec, the posterior analyst
(:mod:`~luca_gym.worlds.graphs.analyst`), the baselines, the report and the
process analysis (:mod:`~luca_gym.worlds.graphs.process`).

Versions: 2 (2026-12-05) runs the paper's loop by default (a matrix
proposed every cycle, ``proposals="every"``), counts iterations as the
paper's cycles (one intervention and then the right matrix: 1), and draws
each world's graphs from a stream of its own (``dag`` and ``relational`` of
one seed were the same graph, directed or not); 1 before. The settings
beyond the paper (``observation_noise``, ``n_latent``, ``intervention_cost``)
came within version 2: off, their default, the instances and rules are
version 2's exactly, and a results line written before them reads as off.

Importing this package imports none of its parts.
"""

from luca_gym.protocol import World

_PACKAGE = "luca_gym.worlds.graphs"
_REFERENCE = "Auto-Discovery-Bench: Diagnosing Structured State Tracking in Oracle-Guided Discovery, Table 1"
# The settings beyond the paper, and the value each takes on a line written before it existed (off).
_HARDER_DEFAULTS = (("observation_noise", 0.0), ("n_latent", 0), ("intervention_cost", 0.0))
_HARDER = tuple(name for name, _ in _HARDER_DEFAULTS)

DAG = World(
    name="dag",
    version="2",
    gym_stem="DagDiscovery",
    summary="directed graph discovery: intervene on molecules, watch their children's states change, recover the DAG",
    config=f"{_PACKAGE}.config:DagConfig",
    headline="success",
    tools=f"{_PACKAGE}.tools:DagToolSession",
    env=f"{_PACKAGE}.envs:DagEnv",
    flat_env=f"{_PACKAGE}.envs:DagFlatEnv",
    core=f"{_PACKAGE}.core",
    flat=f"{_PACKAGE}.flat:dag_codec",
    baselines=f"{_PACKAGE}.baselines:BASELINES",
    flat_baselines=f"{_PACKAGE}.baselines:FLAT_BASELINES",
    play=f"{_PACKAGE}.tools:play_dag",
    expected_fields=f"{_PACKAGE}.config:dag_expected_fields",
    report=f"{_PACKAGE}.report:sections",
    process=f"{_PACKAGE}.process:sections",
    audit=f"{_PACKAGE}.audit",
    reference=_REFERENCE,
    session_keys=("n_nodes", "n_states", "edge_density", "redraw_may_repeat", "proposals", *_HARDER, "seed"),
    key_defaults=_HARDER_DEFAULTS,
    required_scores=("success", "iterations", "edge_f1", "shd", "interventions", "wasted"),
)

RELATIONAL = World(
    name="relational",
    version="2",
    gym_stem="RelationalDiscovery",
    summary="undirected relational discovery: attack houses, watch their allies' anger rise, recover the alliances",
    config=f"{_PACKAGE}.config:RelationalConfig",
    headline="success",
    tools=f"{_PACKAGE}.tools:RelationalToolSession",
    env=f"{_PACKAGE}.envs:RelationalEnv",
    flat_env=f"{_PACKAGE}.envs:RelationalFlatEnv",
    core=f"{_PACKAGE}.core",
    flat=f"{_PACKAGE}.flat:relational_codec",
    baselines=f"{_PACKAGE}.baselines:BASELINES",
    flat_baselines=f"{_PACKAGE}.baselines:FLAT_BASELINES",
    play=f"{_PACKAGE}.tools:play_relational",
    expected_fields=f"{_PACKAGE}.config:relational_expected_fields",
    report=f"{_PACKAGE}.report:sections",
    process=f"{_PACKAGE}.process:sections",
    audit=f"{_PACKAGE}.audit",
    reference=_REFERENCE,
    session_keys=("n_houses", "edge_density", "proposals", *_HARDER, "seed"),
    key_defaults=_HARDER_DEFAULTS,
    required_scores=("success", "iterations", "edge_f1", "shd", "interventions", "wasted"),
)

__all__ = ["DAG", "RELATIONAL"]
