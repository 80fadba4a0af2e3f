"""The paper's ablations (appendix E): real gene names and the prompt's stance
as session options, and the paired statistics and tables of
:mod:`luca_gym.worlds.luca.ablation` (checked on known cases and on hand-made records),
then a small sweep of both arms through ``luca-gym eval`` and ``report``.

Real sessions run at N=20 on the easy and medium tiers only.
"""

from __future__ import annotations

import itertools
import json

import jax
import numpy as np
import pytest
from scipy import stats

from luca_gym.worlds.luca import ablation
from luca_gym.worlds.luca import spec, generator as world
from luca_gym import harness as ev
from luca_gym.worlds.luca.baselines import PAPER_BASELINES, make_policy
from luca_gym.cli import build_parser, main
from luca_gym.cli.common import UsageError
from luca_gym.worlds.luca.cli import conditions
from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.worlds.luca.session import render_text
from luca_gym.worlds.luca.envs.tools import LucaToolsEnv
from luca_gym.worlds.luca.vocabulary import REAL_GENE_NAMES, REAL_GENE_TIERS
from luca_gym.worlds.luca import tools as luca_tools
from luca_gym.worlds.luca.tools import ToolSession
from luca_gym.worlds.luca.evaluation import luca_spec

from conftest import make


# -- real gene names: a relabelling of the same organism ---------------------------
def test_the_real_pool_is_the_papers_fifty_in_three_tiers():
    assert len(REAL_GENE_NAMES) == len(set(REAL_GENE_NAMES)) == spec.N_REAL_GENE_NAMES == 50
    assert list(REAL_GENE_TIERS) == ["well-known", "mid", "obscure"]
    assert {"TP53", "BRCA1"} <= set(REAL_GENE_TIERS["well-known"])
    assert all(name.isalnum() and name.isupper() for name in REAL_GENE_NAMES)  # plain symbols, safe in any schema


@pytest.mark.parametrize("tier, n, shares", [("medium", 20, (7, 7, 6)), ("hard", 30, (10, 10, 10))])
def test_real_names_relabel_the_same_organism(tier, n, shares):
    invented = make(0, tier, n)
    real = world.make_organism(0, tier, n, vocabulary="real")
    # The same arrays, bit for bit; only the gene names (and the vocabulary) differ.
    for a, b in zip(jax.tree_util.tree_leaves(invented.arrays), jax.tree_util.tree_leaves(real.arrays)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    m, r = invented.meta, real.meta
    assert (m.vocabulary, r.vocabulary) == ("invented", "real")
    assert (m.module_names, m.signal_labels, m.phenotype_names) == (r.module_names, r.signal_labels, r.phenotype_names)
    assert len(set(r.gene_names)) == n and set(r.gene_names) <= set(REAL_GENE_NAMES)
    assert tuple(len(set(r.gene_names) & set(names)) for names in REAL_GENE_TIERS.values()) == shares
    assert invented.fingerprint() != real.fingerprint()
    # A pure function of the seed: drawn again alike, another seed draws others.
    assert world.make_organism(0, tier, n, vocabulary="real").meta == r
    assert world.make_organism(1, tier, n, vocabulary="real").meta.gene_names != r.gene_names


def test_the_invented_fingerprint_and_meta_are_unchanged():
    """The default vocabulary leaves the fingerprint as it was before the
    field existed (the golden tests pin the values themselves)."""
    import dataclasses
    import hashlib

    organism = make(3, "easy")
    h = hashlib.sha256()
    for field in dataclasses.fields(organism.arrays):
        a = np.asarray(getattr(organism.arrays, field.name))
        h.update(field.name.encode())
        h.update(str(a.dtype).encode())
        h.update(repr(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    m = organism.meta
    h.update(repr((m.seed, m.tier, m.n_genes, m.mode, m.backwards, m.gene_names, m.module_names, m.signal_labels,
                   m.signal_modes, m.phenotype_names)).encode())
    assert organism.fingerprint() == h.hexdigest()
    assert m.gene_names[:2] == ("G001", "G002")


def test_forward_and_backwards_share_their_real_labels():
    forward = world.make_organism(2, "medium", vocabulary="real")
    backward = world.make_organism(2, "medium", backwards=True, vocabulary="real")
    assert forward.meta.gene_names == backward.meta.gene_names
    assert not np.array_equal(np.asarray(forward.arrays.weights), np.asarray(backward.arrays.weights))


@pytest.mark.parametrize(
    "build",
    [
        lambda: world.make_organism(0, "medium", 51, vocabulary="real"),
        lambda: LucaEnv(n_genes=80, vocabulary="real"),
        lambda: ToolSession(0, n_genes=60, vocabulary="real"),
        lambda: ev.plan_world("luca", ["random"], [0], tier=["medium"], mode=["healthy"], n_genes=[20, 60], vocabulary=["invented", "real"]),
    ],
)
def test_more_genes_than_real_names_is_refused_by_name(build):
    with pytest.raises(ValueError, match=r"vocabulary: 'real' has 50 real gene names, too few for n_genes=(51|80|60)"):
        build()


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: LucaEnv(vocabulary="Real"), ["vocabulary", "'Real'", "invented, real"]),
        (lambda: ToolSession(0, tier="easy", stance="allow"), ["stance", "'allow'", "suppress, permit"]),
        (lambda: ev.plan_world("luca", ["random"], [0], tier=["easy"], mode=["healthy"], n_genes=[20], stance=[]), ["stance", "empty"]),
        (lambda: luca_tools.system_prompt(False, vocabulary=None), ["vocabulary", "None"]),
    ],
)
def test_bad_vocabulary_or_stance_names_the_value_and_what_is_allowed(build, words):
    with pytest.raises(ValueError) as err:
        build()
    assert all(w in str(err.value) for w in words), str(err.value)


def test_a_tool_session_speaks_real_names_and_measures_the_same():
    """Every layer reads the names from the meta: the organism info, the
    schemas, the call parser, the env's text. An experiment named in either
    vocabulary measures the same phenotypes (same organism, same noise)."""
    invented, real = ToolSession(4, tier="medium"), ToolSession(4, tier="medium", vocabulary="real")
    assert real.call("get_organism_info")["gene_names"] == list(real.targetable_genes)
    assert set(real.targetable_genes) <= set(REAL_GENE_NAMES)
    as_real = dict(zip(invented.meta.gene_names, real.meta.gene_names))
    pairs = [(invented.targetable_genes[0], "BLOCK"), (invented.targetable_genes[3], "BOOST")]
    for gene, kind in pairs:
        a = invented.call("run_experiment", {"interventions": {gene: {"type": kind}}})
        b = real.call("run_experiment", {"interventions": {as_real[gene]: {"type": kind}}})
        assert "error" not in a and a == b
    refused = real.call("run_experiment", {"interventions": {invented.targetable_genes[0]: {"type": "BLOCK"}}})
    assert "error" in refused  # G001.. is not a gene of the real-named organism
    assert f"BLOCK  {as_real[invented.targetable_genes[0]]}:" in render_text(real.env.state, real.env.params, real.env.organism)
    assert real.call("end")["scores"]["composite"] == invented.call("end")["scores"]["composite"]


# -- the four prompts --------------------------------------------------------------
def test_the_four_prompts_differ_only_in_the_vocabulary_paragraph_and_tell_the_truth():
    prompts = {(v, s): luca_tools.system_prompt(False, 100, vocabulary=v, stance=s) for v in spec.VOCABULARIES for s in spec.STANCES}
    assert len(set(prompts.values())) == 4
    assert prompts["invented", "suppress"] == luca_tools.system_prompt(False, 100)  # the default is the paper's prompt
    rest = {p.replace(luca_tools.VOCABULARY_PARAGRAPHS[k], "") for k, p in prompts.items()}
    assert len(rest) == 1  # everything else is the same text
    for (v, s), p in prompts.items():
        says_invented = "every gene name (G001, G002, ...), signal label and phenotype name in this organism is invented" in p
        assert says_invented == (v == "invented")
        assert ("symbols of real human genes" in p) == (v == "real")
        assert ("You may draw on biological knowledge where relevant" in p) == (s == "permit")
        assert ("will not help and may mislead" in p) == (s == "suppress")
    # Every front end states the session's prompt.
    session = ToolSession(0, tier="easy", vocabulary="real", stance="permit")
    assert session.system_prompt() == luca_tools.system_prompt(False, session.call_limit, vocabulary="real", stance="permit")
    env = LucaToolsEnv(tier="easy", vocabulary="real", stance="permit")
    obs, _ = env.reset(options={"organism_seed": 0})
    assert obs.startswith("[system]\n" + session.system_prompt())


# -- sessions, plans and records -----------------------------------------------------
def test_baselines_score_the_same_under_every_vocabulary_and_stance():
    """Baselines never read names or prompts: every condition of the 2 x 2
    plays the same calls (by gene index) to the same scores."""
    for agent in PAPER_BASELINES:
        runs = {}
        for v, s in itertools.product(spec.VOCABULARIES, spec.STANCES):
            record = ev.run_session(make_policy(agent), luca_spec(agent, "medium", "healthy", 20, 1, False, v, s))
            assert (record["vocabulary"], record["stance"]) == (v, s)
            runs[v, s] = record
        base = runs["invented", "suppress"]
        names = dict(zip(world.make_organism(1, "medium", vocabulary="real").meta.gene_names, make(1, "medium").meta.gene_names))
        for record in runs.values():
            assert record["scores"] == base["scores"] and record["return"] == base["return"]
            text = json.dumps(record["calls"])
            for real, invented in names.items():
                text = text.replace(f'"{real}"', f'"{invented}"')
            assert json.loads(text) == base["calls"]


def test_plan_crosses_the_arms_and_keys_them_apart():
    specs = ev.plan_world("luca", ["random"], [0, 1], tier=["easy"], mode=["healthy"], n_genes=[20], backwards=[False, True], vocabulary="real", stance=["suppress", "permit"])
    assert len(specs) == len({ev.session_key(s) for s in specs}) == 2 * 2 * 2
    assert {(s.backwards, s.vocabulary, s.stance) for s in specs} == {
        (b, "real", st) for b in (False, True) for st in ("suppress", "permit")}
    assert ev.plan_world("luca", ["random"], [0], tier=["easy"], mode=["healthy"], n_genes=[20]) == [luca_spec("random", "easy", "healthy", 20, 0)]


def test_cli_conditions_from_flags_and_ablations():
    """LUCA's flags give the conditions; the generic --ablation plans both arms
    of the world's contrasts and refuses one the user fixed."""
    from luca_gym import worlds
    from luca_gym.cli.eval import ablation_arms
    from luca_gym.protocol import load

    world = worlds.get("luca")

    def parse(*argv):
        args = build_parser().parse_args(["eval", *argv])
        return ablation_arms(args, world, load(world.cli), conditions(args))

    assert parse() == {"backwards": False, "vocabulary": "invented", "stance": "suppress"}
    assert parse("--ablation", "vocabulary,stance", "--backwards") == {
        "backwards": True, "vocabulary": ["invented", "real"], "stance": ["suppress", "permit"]}
    assert parse("--ablation", "backwards", "--vocabulary", "real") == {
        "backwards": [False, True], "vocabulary": "real", "stance": "suppress"}
    with pytest.raises(UsageError, match="ablation: backwards runs both arms; drop --backwards"):
        parse("--ablation", "backwards", "--backwards")
    with pytest.raises(UsageError, match="ablation: 'names' unknown for world 'luca'; allowed backwards, vocabulary, stance"):
        parse("--ablation", "names")
    with pytest.raises(UsageError, match=r"ablation: stance runs both arms; drop --set stance=\.\.\."):
        parse("--ablation", "stance", "--set", "stance=permit")


def test_records_written_before_the_fields_read_as_invented_and_suppress(tmp_path):
    """An old line (no vocabulary, no stance, its digest over what it had)
    reads as the default condition: its key, the resume and the config check."""
    record = ev.run_session(make_policy("random"), luca_spec("random", "easy", "healthy", 20, 0))
    old = {k: v for k, v in record.items() if k not in ("vocabulary", "stance")}
    with open(tmp_path / ev.SESSIONS_FILE, "w", encoding="utf-8") as f:
        ev.append_record(f, old)
    read = ev.read_results(str(tmp_path))
    assert (read.records[0]["vocabulary"], read.records[0]["stance"]) == ("invented", "suppress")
    assert list(read.keys()) == [ev.session_key(luca_spec("random", "easy", "healthy", 20, 0))]
    # A sweep of both stances runs only the new arm; the old line counts as done.
    made = []
    specs = ev.plan_world("luca", ["random"], [0], tier=["easy"], mode=["healthy"], n_genes=[20], stance=["suppress", "permit"])
    ev.sweep(specs, str(tmp_path), policy_factory=lambda a: made.append(a) or make_policy(a))
    records = ev.read_results(str(tmp_path)).records
    assert made == ["random"] and [r["stance"] for r in records] == ["suppress", "permit"]
    assert records[0]["scores"] == records[1]["scores"]


# -- statistics on known cases --------------------------------------------------------
def exact_signed_rank_p(d) -> float:
    """Two-sided exact p by enumerating every sign pattern (no zeros, no ties)."""
    ranks = stats.rankdata(np.abs(d))
    observed = ranks[np.asarray(d) > 0].sum()
    totals = np.array([sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product([0, 1], repeat=len(d))])
    return min(1.0, 2 * min(np.mean(totals <= observed), np.mean(totals >= observed)))


def test_wilcoxon_p_on_known_cases():
    assert ablation.wilcoxon_p([0.1] * 5) == pytest.approx(2 / 2**5)  # a constant shift: every sign the same
    assert ablation.wilcoxon_p([-0.2] * 8) == pytest.approx(2 / 2**8)
    assert ablation.wilcoxon_p([0.0] * 20) is None and ablation.wilcoxon_p([]) is None
    d = [0.31, -0.05, 0.12, 0.44, -0.27, 0.08, 0.19, -0.02, 0.36]
    assert ablation.wilcoxon_p(d) == pytest.approx(exact_signed_rank_p(d))
    # Zero differences are dropped (the Wilcoxon method): as if they were not there.
    assert ablation.wilcoxon_p(d + [0.0, 0.0]) == pytest.approx(exact_signed_rank_p(d))
    rng = np.random.default_rng(7)
    big = rng.normal(0.05, 0.1, 40)
    assert ablation.wilcoxon_p(big) == pytest.approx(stats.wilcoxon(big).pvalue)


def test_bootstrap_ci_on_known_cases():
    assert ablation.bootstrap_ci([0.25] * 20) == (0.25, 0.25)  # a constant shift has no spread
    assert ablation.bootstrap_ci([0.0] * 20) == (0.0, 0.0)
    rng = np.random.default_rng(3)
    d = rng.normal(0.1, 0.2, 20)
    lo, hi = ablation.bootstrap_ci(d)
    assert lo < d.mean() < hi
    assert ablation.bootstrap_ci(d) == (lo, hi)  # seeded: the same records, the same interval
    assert ablation.bootstrap_ci(d, seed=1) != (lo, hi)
    # The percentile interval of a mean is close to the normal one at this n.
    half = 1.96 * d.std() / np.sqrt(d.size)
    assert hi - lo == pytest.approx(2 * half, rel=0.2)
    with pytest.raises(ValueError, match="empty"):
        ablation.bootstrap_ci([])
    assert ablation.format_p(None) == "n/a" and ablation.format_p(0.5) == "0.50" and ablation.format_p(0.017) == "0.017"


# -- pairing and tables on hand-made records --------------------------------------------
def rec(agent, seed, composite, tier="medium", **condition) -> dict:
    return {"agent": agent, "tier": tier, "mode": "healthy", "n_genes": 20, "seed": seed,
            "scores": {"composite": composite}, **condition}


def backwards_records():
    rng = np.random.default_rng(0)
    out = []
    for agent, shift in (("heuristic", 0.02), ("openai:m", 0.10)):
        forward = np.round(rng.uniform(0.4, 0.9, 20), 3)
        backward = np.round(forward - shift - rng.normal(0, 0.05, 20), 3)
        out += [rec(agent, s, float(forward[s])) for s in range(20)]  # an old record: no condition fields
        out += [rec(agent, s, float(backward[s]), backwards=True) for s in range(20) if (agent, s) != ("openai:m", 7)]
    return out


def test_pairs_by_seed_intersection_with_the_papers_delta():
    records = backwards_records()
    rows = {p.agent: p for p in ablation.paired(records, "backwards")}
    assert set(rows) == {"heuristic", "openai:m"}
    model = rows["openai:m"]
    assert model.n == 19 and 7 not in model.seeds  # seed 7 has no backward session
    f = np.array([r["scores"]["composite"] for r in records if r["agent"] == "openai:m" and not r.get("backwards") and r["seed"] != 7])
    b = np.array([r["scores"]["composite"] for r in records if r["agent"] == "openai:m" and r.get("backwards")])
    assert model.delta == pytest.approx((f - b).mean())  # forward - backward
    assert model.arms[False] == pytest.approx((f.mean(), f.std())) and model.arms[True] == pytest.approx((b.mean(), b.std()))
    assert model.p == pytest.approx(stats.wilcoxon(f - b).pvalue)
    assert model.ci[0] < model.delta < model.ci[1]
    assert ablation.paired(records, "vocabulary") == []  # only one arm of it


def test_table_13_format_and_heuristic_adjusted_delta():
    records = backwards_records()
    table = ablation.backwards_table(records)
    lines = table.splitlines()
    assert lines[0].startswith("**medium healthy, N=20, invented, suppress**")
    assert lines[2] == "| Model | n | Forward | Backward | Δ | 95% CI | p | Δ - Δheur |"
    rows = {p.agent: p for p in ablation.paired(records, "backwards")}
    heur, model = rows["heuristic"], rows["openai:m"]
    assert lines[4].startswith(f"| heuristic | 20 | {heur.arms[False][0]:.3f} ± {heur.arms[False][1]:.3f} |")
    assert lines[4].endswith("| — |")
    assert lines[5] == (f"| openai:m | 19 | {model.arms[False][0]:.3f} ± {model.arms[False][1]:.3f} | "
                        f"{model.arms[True][0]:.3f} ± {model.arms[True][1]:.3f} | {model.delta:+.3f} | "
                        f"[{model.ci[0]:+.3f}, {model.ci[1]:+.3f}] | {ablation.format_p(model.p)} | "
                        f"{model.delta - heur.delta:+.3f} |")


def test_table_14_and_the_eight_contrasts():
    records = []
    for tier, agent in itertools.product(("medium", "hard"), ("heuristic", "anthropic:m")):
        for seed in range(6):
            for v, st in ablation.CELLS_2X2:
                bonus = 0.1 * (v == "real") * (agent != "heuristic")
                records.append(rec(agent, seed, 0.5 + 0.01 * seed + bonus, tier, vocabulary=v, stance=st))
    table = ablation.vocabulary_stance_table(records)
    assert "| Tier | Model | inv / sup | real / sup | inv / per | real / per | n |" in table
    assert "| medium, N=20 | heuristic | 0.525 ± 0.017 | 0.525 ± 0.017 | 0.525 ± 0.017 | 0.525 ± 0.017 | 6 |" in table
    assert "| hard, N=20 | anthropic:m | 0.525 ± 0.017 | 0.625 ± 0.017 | 0.525 ± 0.017 | 0.625 ± 0.017 | 6 |" in table
    rows = ablation.paired(records, "vocabulary") + ablation.paired(records, "stance")
    assert len(rows) == 2 * 2 * 4  # per tier and model: vocabulary at sup and per, stance at inv and real
    for p in rows:
        shifted = p.contrast == "vocabulary" and p.agent != "heuristic"
        assert p.delta == pytest.approx(0.1 if shifted else 0.0)  # real - invented; permit - suppress
        assert (p.p is None) == (not shifted)
        if shifted:
            assert p.p == pytest.approx(2 / 2**6) and p.ci == pytest.approx((0.1, 0.1))
    contrasts = ablation.contrast_table(records)
    assert "| medium, N=20 | anthropic:m | real - invented | forward, suppress | 6 | +0.100 | [+0.100, +0.100] | 0.031 |" in contrasts
    assert "| hard, N=20 | heuristic | permit - suppress | forward, real | 6 | +0.000 | [+0.000, +0.000] | n/a |" in contrasts
    section = ablation.section(records)
    assert section.startswith("## Ablations (paper appendix E)") and "Table 14" in section and "Table 13" not in section
    assert ablation.section([r for r in records if (r["vocabulary"], r["stance"]) == ("invented", "suppress")]) == ""


def test_main_records_keep_the_default_arm():
    records = backwards_records()
    main_, note = ablation.main_records(records)
    assert all(not r.get("backwards") for r in main_) and len(main_) == 40
    assert "only the 40 sessions of the default condition" in note and "the other 39 are ablation arms" in note
    assert ablation.main_records(main_) == (main_, None)


# -- end to end: eval --ablation, then report ------------------------------------------
def test_eval_ablation_and_report(tmp_path, capsys):
    out = str(tmp_path / "abl")
    common = ["eval", "--agents", "heuristic,random", "--tiers", "easy", "--modes", "healthy", "--seeds", "0-2", "--out", out, "--quiet"]
    assert main([*common, "--ablation", "backwards"]) == 0
    printed = capsys.readouterr().out
    assert "## Ablations (paper appendix E)" in printed and "| Model | n | Forward | Backward |" in printed
    assert main([*common, "--ablation", "vocabulary,stance"]) == 0
    records = ev.read_results(out).records
    assert len(records) == 2 * 3 * (2 + 3)  # the forward/invented/suppress arm is shared, run once
    assert main(["report", out]) == 0
    text = open(f"{out}/report.md", encoding="utf-8").read()
    assert "## Ablations (paper appendix E)" in text and "Table 13" in text and "Table 14" in text
    assert "Note: the main tables show only the 6 sessions of the default condition" in text
    # Baselines read neither names nor prompts: every vocabulary and stance contrast is exactly null.
    for p in ablation.paired(records, "vocabulary") + ablation.paired(records, "stance"):
        assert p.delta == 0.0 and p.p is None and p.n == 3
    assert len(ablation.paired(records, "backwards")) == 2
    names = set(world.make_organism(0, "easy", vocabulary="real").meta.gene_names)
    real_calls = [r for r in records if r["vocabulary"] == "real" and r["agent"] == "heuristic" and r["seed"] == 0][0]["calls"]
    assert any(set(c["arguments"].get("interventions", {})) & names for c in real_calls)  # logged by real name
