"""What names a session in a sweep: :class:`SessionSpec` (the key a results
line is found by), the key and score fields, and :func:`plan`, which checks a
sweep's settings and lists its sessions."""

from __future__ import annotations

from dataclasses import dataclass

from luca_gym import worlds
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
    agent: str
    tier: str
    mode: str
    n_genes: int
    seed: int
    backwards: bool = False
    vocabulary: str = "invented"  # gene names, invented or real (appendix E.2)
    stance: str = "suppress"  # the prompt's stance on biological knowledge (tool-calling agents; appendix E.2)
    world: str = LUCA.name

    def key(self) -> tuple:
        """:func:`record_key` of the line this session writes."""
        return (self.world, *(getattr(self, k) for k in KEY_FIELDS))

    def settings(self) -> dict:
        """The organism's settings, as :func:`luca_gym.worlds.luca.calls.open_session` and
        :class:`~luca_gym.worlds.luca.tools.ToolSession` take them (the stance is
        the prompt's, not the organism's: ToolSession takes it apart)."""
        return {"seed": self.seed, "tier": self.tier, "mode": self.mode, "n_genes": self.n_genes, "backwards": self.backwards,
                "vocabulary": self.vocabulary}


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
    return [SessionSpec(a, t, m, n, s, *c) for n in n_genes for t in tiers for m in modes for c in conditions for a in agents for s in seeds]


def _arms(value, name: str) -> list:
    """One value, or a list or tuple of them (at least one)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name}: an empty list; give one value or several")
    return values


def expected_fields(spec: SessionSpec) -> dict:
    """What a session of ``spec`` run now records beside its key (the default budget and call limit)."""
    from luca_gym.worlds.luca.core import make_params

    params = make_params(spec.tier, spec.n_genes, spec.mode)
    return {"budget": params.budget, "call_limit": params.max_steps}
