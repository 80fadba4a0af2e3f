"""What names a session in a sweep: :class:`SessionSpec` (the key a results
line is found by), the key and score fields, and :func:`plan`, which checks a
sweep's settings and lists its sessions."""

from __future__ import annotations

import itertools
from dataclasses import MISSING, dataclass, fields

from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.worlds.luca import WORLD as LUCA
from luca_gym.worlds.luca.baselines import BASELINES
from luca_gym.worlds.luca.spec import (
    check_bool,
    check_mode,
    check_n_genes,
    check_seed,
    check_stance,
    check_tier,
    check_vocabulary,
)
from luca_gym.harness.agents import check_agent


# A results line names its world (``world``; a line written before worlds
# existed reads as LUCA's) and its session by the world's key fields
# (:meth:`luca_gym.protocol.World.key_fields`). LUCA's, for the code that
# speaks of LUCA's sessions:
KEY_FIELDS = ("agent", *LUCA.session_keys)
# Key fields added after records were first written: a line without one reads
# as this value (a session of the default condition).
KEY_DEFAULTS = dict(LUCA.key_defaults)
REQUIRED_KEY_FIELDS = tuple(k for k in KEY_FIELDS if k not in KEY_DEFAULTS)
SCORE_FIELDS = ("composite", "prediction", "diagnosis", "rescue")
STRATEGY_FIELDS = ("budget_fraction", "single_gene_fraction", "gene_coverage", "block_fraction", "redundancy", "commit_point")


def record_key(record: dict) -> tuple:
    """The key a results line is found by: its world, then the world's key fields."""
    world = worlds.get(record.get("world", LUCA.name))
    return (world.name, *(record[k] for k in world.key_fields()[1:]))


class ResultsError(ValueError):
    """A results file that cannot be read (names the file, line and problem)."""


@dataclass(frozen=True)
class SessionSpec:
    """One session of a sweep: ``agent`` on instance ``seed`` of ``world``,
    under ``settings`` (the world's other key fields as ``(name, value)``
    pairs, in key order). A setting reads as an attribute (``spec.tier``).
    :func:`luca_spec` builds LUCA's from its settings in their usual order;
    :func:`plan_world` plans any world's."""

    agent: str
    seed: int
    world: str = LUCA.name
    settings: tuple = ()

    def __getattr__(self, name):
        for key, value in object.__getattribute__(self, "settings"):
            if key == name:
                return value
        raise AttributeError(f"SessionSpec of world {object.__getattribute__(self, 'world')!r} has no setting {name!r}")

    def options(self) -> dict:
        """The settings as keyword arguments (as the world's tool session takes them)."""
        return dict(self.settings)

    def key(self) -> tuple:
        """:func:`record_key` of the line this session writes."""
        values = {**self.options(), "agent": self.agent, "seed": self.seed}
        return (self.world, *(values[k] for k in worlds.get(self.world).key_fields()[1:]))


def luca_spec(agent: str, tier: str, mode: str, n_genes: int, seed: int, backwards: bool = False,
              vocabulary: str = "invented", stance: str = "suppress") -> SessionSpec:
    """A LUCA session's spec. ``vocabulary``: gene names, invented or real;
    ``stance``: the prompt's stance on biological knowledge (tool-calling
    agents); both the paper's appendix E.2."""
    settings = (("tier", tier), ("mode", mode), ("n_genes", n_genes), ("backwards", backwards), ("vocabulary", vocabulary),
                ("stance", stance))
    return SessionSpec(agent, seed, LUCA.name, settings)


def plan(agents, tiers, modes, n_genes, seeds, backwards=False, vocabulary="invented", stance="suppress") -> list[SessionSpec]:
    """The sessions of a sweep, validated (ValueError names the bad value and
    what is allowed). ``backwards``, ``vocabulary`` and ``stance`` each take
    one value or a list of them; every combination is planned, e.g.
    ``backwards=[False, True]`` for both arms of the paper's appendix E.1
    ablation, paired by seed (:mod:`luca_gym.ablation`)."""
    unique = lambda xs: list(dict.fromkeys(xs))  # noqa: E731 -- a repeated name runs once
    agents = unique(check_agent(a) for a in agents)
    tiers = unique(check_tier(t) for t in tiers)
    modes = unique(check_mode(m) for m in modes)
    n_genes = unique(check_n_genes(n) for n in n_genes)
    seeds = unique(check_seed(s) for s in seeds)
    backwards = unique(check_bool(b, "backwards") for b in _arms(backwards, "backwards"))
    vocabulary = unique(check_vocabulary(v) for v in _arms(vocabulary, "vocabulary"))
    stance = unique(check_stance(st) for st in _arms(stance, "stance"))
    for v in vocabulary:
        for n in n_genes:
            check_vocabulary(v, n)
    for a in agents:
        # A baseline that cannot play every mode and size says so before anything runs.
        check = getattr(BASELINES.get(a), "check_session", None)
        for m in modes if check else ():
            for n in n_genes:
                check(m, n)
    conditions = [(b, v, st) for b in backwards for v in vocabulary for st in stance]
    return [luca_spec(a, t, m, n, s, *c) for n in n_genes for t in tiers for m in modes for c in conditions for a in agents for s in seeds]


def plan_world(world, agents, seeds, **settings) -> list[SessionSpec]:
    """The sessions of a sweep on any registered world: agents x every
    combination of ``settings`` (each the world's key field, one value or a
    list; a field left out takes its config default) x seeds. Each
    combination is checked by the world's config, each agent against the
    world's baselines and the tool agents (ValueError names what is wrong)."""
    world = worlds.get(world)
    names = [k for k in world.session_keys if k != "seed"]
    unknown = sorted(set(settings) - set(names))
    if unknown:
        raise ValueError(f"settings: {', '.join(unknown)} unknown for world {world.name!r}; allowed {', '.join(names) or 'none'}")
    config = load(world.config)
    defaults = {f.name: f.default for f in fields(config) if f.default is not MISSING}
    grid = []
    for name in names:
        if name in settings:
            grid.append([(name, v) for v in dict.fromkeys(_arms(settings[name], name))])
        elif name in defaults:
            grid.append([(name, defaults[name])])
        else:
            raise ValueError(f"settings: {name} has no default in world {world.name!r}; give it")
    combos = [tuple(c) for c in itertools.product(*grid)]
    config_fields = {f.name for f in fields(config)}
    for combo in combos:
        world.make_config(**{k: v for k, v in combo if k in config_fields})
    agents = list(dict.fromkeys(check_agent(a, world.name) for a in agents))
    seeds = list(dict.fromkeys(check_seed(s) for s in seeds))
    return [SessionSpec(a, s, world.name, combo) for combo in combos for a in agents for s in seeds]


def _arms(value, name: str) -> list:
    """One value, or a list or tuple of them (at least one)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name}: an empty list; give one value or several")
    return values


def expected_fields(spec: SessionSpec) -> dict:
    """What a session of ``spec`` run now records beside its key (LUCA: the
    default budget and call limit; other worlds: nothing)."""
    from luca_gym.worlds.luca.core import make_params

    if spec.world != LUCA.name:
        return {}

    params = make_params(spec.tier, spec.n_genes, spec.mode)
    return {"budget": params.budget, "call_limit": params.max_steps}
