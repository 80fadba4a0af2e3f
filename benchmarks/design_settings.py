"""Design settings for the graph worlds: where, with the same analyst, the
choice of experiments matters.

    .venv/bin/python benchmarks/design_settings.py [--seeds 50000-50499] [--only NAME,...] [--runs NAME=PPO_RUN,...]
        [--clones NAME=BC_RUN,...]

Every agent here names only experiments (a node, or stop); the posterior
analyst (``analyst="posterior"`` of the flat codec,
:mod:`luca_gym.worlds.graphs.analyst`: the edge posterior ``bayes-edges``
keeps, the most probable unrefuted matrix stated with each intervention
under the paper's loop and submitted at the end) reads the evidence for
all of them. The designers:

* floor: stop at once (the analyst states its prior's matrix);
* random: a uniformly random node until the budget is spent;
* round-robin: the node of fewest interventions, then the lowest index,
  until the budget is spent (a sweep that adapts to nothing);
* information-gain: the designer of ``bayes-edges``
  (:func:`~luca_gym.worlds.graphs.baselines.information_design`): the node
  whose trial most reduces the expected entropy of the edges it tests, a
  stop where interventions cost and no further ones are worth their price;
* ppo / bc: a trained run folder (``--runs`` / ``--clones``), its most
  likely action.

Each cell is the mean success (± one standard error), and where
interventions cost, the mean return (success less the cost of the
interventions made). The **value of design** of a designer is its score
less random's, both read by the same analyst (the columns ``vs random``);
``IG - RR`` is the information-gain designer's lead over round-robin, the
room a learner has above the sweep. Every session is played batched on
the core through the codec (:func:`luca_gym.worlds.graphs.flat.play_batch`),
each taking the calls the harness's session of that seed takes.

Seeds: the settings were chosen on 7501-7700 and 40000-40299 (calibration);
the published table is on 50000-50499 (500 seeds used for no choice, and
disjoint from the training pool 10000-11023).
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp
import numpy as np

from luca_gym.agents import ppo
from luca_gym.worlds.graphs.baselines import POLICIES
from luca_gym.worlds.graphs.flat import dag_codec, play_batch, relational_codec, session_keys

PAPER = dict(n_nodes=10, n_states=5)
# name -> the codec (every one read by the posterior analyst)
SETTINGS = {
    "dag-noise05": lambda: dag_codec(analyst="posterior", **PAPER, observation_noise=0.05),
    "dag-noise05-dense": lambda: dag_codec(analyst="posterior", **PAPER, observation_noise=0.05, edge_density=0.5),
    "dag-noise10": lambda: dag_codec(analyst="posterior", **PAPER, observation_noise=0.1),
    "dag-noise05-latent3": lambda: dag_codec(analyst="posterior", **PAPER, observation_noise=0.05, n_latent=3),
    "dag-repeats": lambda: dag_codec(analyst="posterior", **PAPER, redraw_may_repeat=True),
    "dag-noise02-cost02": lambda: dag_codec(analyst="posterior", **PAPER, observation_noise=0.02,
                                            intervention_cost=0.02),
    "dag-noise05-cost02": lambda: dag_codec(analyst="posterior", **PAPER, observation_noise=0.05,
                                            intervention_cost=0.02),
    "dag12-noise05": lambda: dag_codec(analyst="posterior", n_nodes=12, n_states=5, observation_noise=0.05),
    "dag-s3-noise05": lambda: dag_codec(analyst="posterior", n_nodes=10, n_states=3, observation_noise=0.05),
    "relational-noise10": lambda: relational_codec(analyst="posterior", n_houses=10, observation_noise=0.1),
    "relational-noise20": lambda: relational_codec(analyst="posterior", n_houses=10, observation_noise=0.2),
}
DESIGNERS = ("random", "round-robin", "information-gain")


def stop_policy(codec):
    """The floor: stop at once."""
    n = codec.config.n

    def policy(params, key, obs, mask):
        return jnp.full((obs.shape[0],), n, jnp.int32)

    return policy


def play(codec, policy, params, seeds) -> np.ndarray:
    """The headline per seed: success, or the return where interventions cost."""
    out = play_batch(policy, params, session_keys(seeds), codec, codec.instances(seeds), codec.max_calls)
    return np.asarray(out["return"] if codec.config.intervention_cost else out["success"], float)


def cell(x: np.ndarray) -> str:
    return f"{x.mean():.3f} ± {x.std(ddof=1) / np.sqrt(len(x)):.3f}"


def run_folder_policy(path: str, codec):
    config, network = ppo.load_network(path)
    trained = config.make_env()
    if trained.settings() != codec.settings():
        raise SystemExit(f"runs: {path} was trained on {trained.describe()}, not {codec.describe()}")
    return ppo.greedy_policy, network


def parse_pairs(text: str | None) -> dict:
    return dict(item.split("=", 1) for item in text.split(",")) if text else {}


def parse_seeds(text: str) -> np.ndarray:
    lo, hi = (int(x) for x in text.split("-"))
    return np.arange(lo, hi + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="50000-50499")
    parser.add_argument("--only", default=None, help="comma list of setting names")
    parser.add_argument("--runs", default=None, help="NAME=PPO_RUN,...: a PPO run folder per setting")
    parser.add_argument("--clones", default=None, help="NAME=BC_RUN,...: a BC run folder per setting")
    parser.add_argument("--columns", default="floor,random,round-robin,information-gain",
                        help="the designers to play (comma list; 'none': only --runs and --clones)")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    names = args.only.split(",") if args.only else list(SETTINGS)
    runs, clones = parse_pairs(args.runs), parse_pairs(args.clones)
    print(f"seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}); every designer read by the posterior analyst\n")
    print("| setting | measure | floor | random | round-robin | information-gain | ppo | bc | IG - RR | "
          "value of design (RR / IG / PPO / BC vs random) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        codec = SETTINGS[name]()
        start = time.perf_counter()
        columns = args.columns.split(",")
        scores = {"floor": play(codec, stop_policy(codec), None, seeds)} if "floor" in columns else {}
        for designer in DESIGNERS:
            if designer in columns:
                scores[designer] = play(codec, POLICIES[designer](codec), None, seeds)
        for column, folders in (("ppo", runs), ("bc", clones)):
            if name in folders:
                scores[column] = play(codec, *run_folder_policy(folders[name], codec), seeds)
        measure = "return" if codec.config.intervention_cost else "success"
        learned = [scores[c].mean() - scores["random"].mean() if c in scores and "random" in scores else None
                   for c in ("round-robin", "information-gain", "ppo", "bc")]
        value = " / ".join("-" if v is None else f"{v:+.3f}" for v in learned)
        row = [name + f" ({codec.describe()})", measure] + [cell(scores[c]) if c in scores else "-" for c in
                                                            ("floor", "random", "round-robin", "information-gain",
                                                             "ppo", "bc")]
        if "information-gain" in scores and "round-robin" in scores:
            lead = scores["information-gain"] - scores["round-robin"]
            row += [f"{lead.mean():+.3f} ± {lead.std(ddof=1) / np.sqrt(len(lead)):.3f}", value]
        else:
            row += ["-", value]
        print("| " + " | ".join(row) + " |", flush=True)
        print(f"<!-- {name}: {time.perf_counter() - start:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
