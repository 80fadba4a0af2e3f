"""``luca-gym train``: a learned agent on a world's flat action space, into a
run folder: the JAX PPO (``--algo ppo``, from scratch or from a run's
weights with ``--init``: :mod:`luca_gym.agents.warm_start`), MaskablePPO
(``--algo maskable-ppo``, the rl extra: :mod:`luca_gym.agents.sb3`) or
behaviour cloning of one of the world's flat baselines (``--algo bc``:
:mod:`luca_gym.agents.bc`). This module parses and checks the options and
calls the learners; a run stopped before its first update leaves no run
folder it created."""

from __future__ import annotations

import os

from luca_gym.cli.common import UsageError, writable_dir
from luca_gym.cli.progress import TrainProgress
from luca_gym.cli.world_options import (
    BUDGET_HELP,
    DEFAULT_WORLD,
    WORLD_HELP,
    add_world_arguments,
    config_flags,
    described,
    with_budget,
    world_of,
    world_settings,
)

TRAIN_ALGOS = ("ppo", "maskable-ppo", "bc")
# Defaults per algorithm: the JAX PPO steps thousands of envs in one program;
# MaskablePPO steps a vector env from Python and learns from far fewer steps;
# behaviour cloning fits a network to a scripted teacher's steps (512 envs x 128 steps: two N=20 sessions each).
TRAIN_DEFAULTS = {"ppo": {"steps": 5_000_000, "num_envs": 1024}, "maskable-ppo": {"steps": 800_000, "num_envs": 256},
                  "bc": {"steps": 65_536, "num_envs": 512}}
BC_EPOCHS = 15


def add_parser(sub, world, flag_world) -> None:
    """``train``'s parser, its options ``world``'s (a world without a CLI hook, ``flag_world``: its
    settings as options, one value each)."""
    text = "train a learned agent on a world's flat action space"
    p = sub.add_parser("train", help=text, description=described("train", text, world))
    p.add_argument("--world", default=DEFAULT_WORLD, help=WORLD_HELP + " (one with a flat codec)")
    p.add_argument("--algo", default="ppo", metavar="{" + ",".join(TRAIN_ALGOS) + "}",
                   help="ppo (pure JAX, this package) or maskable-ppo (sb3-contrib, the rl extra), either on any world "
                        "with a flat codec, or bc (behaviour cloning of one of the world's flat baselines into a JAX "
                        "network: a PPO run folder, to evaluate as ppo:OUT or fine-tune with --algo ppo --init OUT)")
    p.add_argument("--teacher", default=None, metavar="NAME",
                   help="--algo bc: the flat baseline to clone (default: the world's first; LUCA: causal-sweep-flat)")
    p.add_argument("--epochs", type=int, default=None,
                   help=f"--algo bc: passes over the teacher's steps (default {BC_EPOCHS})")
    p.add_argument("--learning-rate", type=float, default=None, metavar="LR",
                   help="--algo ppo: Adam's learning rate, annealed linearly to 0 over the run (default 0.001; lower "
                        "for a fine-tune from --init)")
    p.add_argument("--ent-coef", type=float, default=None, metavar="C",
                   help="--algo ppo: the entropy bonus (default 0.01)")
    p.add_argument("--init", default=None, metavar="RUN",
                   help="--algo ppo: start from this run folder's weights (e.g. a bc run's) and keep its network; the "
                        "codec settings must give the same observation and action layout (an entity network: any number of "
                        "entities, e.g. LUCA's n_genes)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the world's flat codec (repeatable)")
    p.add_argument("--budget", default=None, metavar="VALUE", help=BUDGET_HELP + "; saved in the run folder's config.json")
    p.add_argument("--network", default=None, metavar="{mlp,entity,recurrent}",
                   help="--algo ppo or bc: the policy network, mlp (default: one instance size only) or entity "
                        "(attention over the world's entities, LUCA's genes and signals or a graph's nodes, equinox: "
                        "one set of weights plays every size whose entities have the same features, LUCA's every N; a world whose "
                        "flat codec has a token layout); --algo ppo: "
                        "recurrent (a GRU memory through each session, for an observation that leaves the history to the "
                        "learner: the graph worlds' --set observation=raw, best with --set raw_actions=commit)")
    p.add_argument("--devices", type=int, default=None, metavar="N",
                   help="--algo ppo: split the envs over N local devices, data-parallel (jax.sharding, one mesh axis "
                        "over the envs; N divides --num-envs; default 1)")
    add_world_arguments(p, "add_train_arguments", shown=world.name)
    if flag_world is not None:
        config_flags(p, flag_world, many=False)
    p.add_argument("--steps", type=int, default=None,
                   help=f"env steps (default: ppo {TRAIN_DEFAULTS['ppo']['steps']}, maskable-ppo "
                        f"{TRAIN_DEFAULTS['maskable-ppo']['steps']}; bc: the teacher's, {TRAIN_DEFAULTS['bc']['steps']})")
    p.add_argument("--num-envs", type=int, default=None,
                   help=f"envs side by side (default: ppo {TRAIN_DEFAULTS['ppo']['num_envs']}, "
                        f"maskable-ppo {TRAIN_DEFAULTS['maskable-ppo']['num_envs']}, bc {TRAIN_DEFAULTS['bc']['num_envs']})")
    p.add_argument("--pool-size", type=int, default=None,
                   help="training instances, seeds 10000 .. 10000+SIZE-1 (default 1024; never the evaluation seeds 0-19)")
    p.add_argument("--out", required=True, help="run folder (checkpoint, config, learning curve CSV and PNG)")
    p.add_argument("--seed", type=int, default=0, help="the run's random seed")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_train)


def cmd_train(args) -> int:
    """Train (:func:`_train`); a run stopped before its first update (Ctrl-C,
    an error) leaves no run folder it created."""
    created = not os.path.exists(args.out)
    try:
        return _train(args)
    except BaseException:
        if created and os.path.isdir(args.out):  # made by the run: JAX and the trainer are imported already
            from luca_gym.agents.ppo import remove_unfinished_run

            remove_unfinished_run(args.out)
        raise


def _train(args) -> int:
    if args.algo not in TRAIN_ALGOS:
        raise UsageError(f"algo: {args.algo!r} unknown; allowed {', '.join(TRAIN_ALGOS)}")
    world, hook = world_of(args)
    settings = with_budget(args, world, world_settings(args, world, hook, "train_settings", one=True))
    _check_codec_settings(world, settings)
    if "budget" in settings:  # the world's config checks it (and the settings beside it) before anything runs
        fields = world.config_fields()
        world.make_config(**{k: v for k, v in settings.items() if k in fields})
    defaults = TRAIN_DEFAULTS[args.algo]
    steps = defaults["steps"] if args.steps is None else args.steps
    num_envs = defaults["num_envs"] if args.num_envs is None else args.num_envs
    if args.network is not None and args.algo == "maskable-ppo":
        raise UsageError("network: applies to --algo ppo and bc (the JAX networks), not maskable-ppo")
    for option, algos in (("teacher", ("bc",)), ("epochs", ("bc",)), ("init", ("ppo",)), ("learning_rate", ("ppo",)),
                          ("ent_coef", ("ppo",)), ("devices", ("ppo",))):
        if getattr(args, option) is not None and args.algo not in algos:
            raise UsageError(f"{option}: applies to --algo {' and '.join(algos)} only, not {args.algo}")
    if args.algo == "bc" and args.network == "recurrent":
        raise UsageError("network: recurrent trains with --algo ppo only (behaviour cloning fits single steps, "
                         "without the memory a session builds)")
    if args.algo == "bc":
        return _train_by_cloning(args, world, settings, steps, num_envs)
    if args.algo == "maskable-ppo":
        try:
            from luca_gym.agents.sb3 import plan as sb3_plan, train_maskable_ppo
        except ImportError:
            raise UsageError('algo: maskable-ppo needs the rl extra (sb3-contrib); pip install -e ".[rl]"') from None
        pool = {"pool_size": args.pool_size} if args.pool_size is not None else {}
        plan = sb3_plan(steps, num_envs, **pool)
        writable_dir(args.out)
        train = lambda progress: train_maskable_ppo(  # noqa: E731
            steps=steps, num_envs=num_envs, out=args.out, seed=args.seed, world=world.name, progress=progress, **pool,
            **settings)
        agent = f"sb3:{os.path.join(args.out, 'model.zip')}"
    else:
        from luca_gym.agents import ppo
        from luca_gym.agents.warm_start import ARCHITECTURE, check_warm_start, load_warm_start
        from luca_gym.functional import env_sharding

        hyper = _jax_hyper(args, ("pool_size", "network", "learning_rate", "ent_coef", "devices"))
        start = trained = None
        if args.init is not None:
            start, trained = load_warm_start(args.init, world.name)
            if args.network is not None and ppo.FORMER_NETWORK_NAMES.get(args.network, args.network) != trained.network:
                raise UsageError(f"network: {args.network} differs from --init's network ({trained.network}); "
                                 "leave --network out (a warm start keeps its run's network)")
            hyper |= {name: getattr(trained, name) for name in ARCHITECTURE}
        config = ppo.PPOConfig(world.name, settings, steps=steps, num_envs=num_envs, seed=args.seed, **hyper)
        env_sharding(config.devices)  # more devices than this process sees: refused before anything runs
        if start is not None:
            check_warm_start(args.init, start, trained, config)
        plan = ppo.plan(config) + (f"; starting from {args.init}'s weights" if start is not None else "")
        writable_dir(args.out)
        warm = {} if start is None else {"network": start, "started_from": args.init}
        train = lambda progress: ppo.train(config, args.out, progress=progress, **warm)  # noqa: E731
        agent = f"ppo:{args.out}"
    print(f"training {args.algo}: {plan}", flush=True)
    progress = TrainProgress(args.quiet, args.algo)
    try:
        summary = train(progress)
    finally:
        progress.close()
    steps_run = summary["env_steps"] if args.algo == "ppo" else summary["steps"]
    rate = f"{summary['steps_per_s']:.0f} steps/s after the first update" if summary["steps_per_s"] else "one update"
    print(f"trained {args.algo}: {steps_run} steps in {summary['wall_s']:.1f} s ({rate}), "
          f"last update's mean score {summary['final_score']:.3f}")
    where = "" if world.name == DEFAULT_WORLD else f" --world {world.name}"
    print(f"run folder: {args.out}  (evaluate: luca-gym eval{where} --agents {agent})")
    return 0


def _check_codec_settings(world, settings: dict) -> None:
    """UsageError naming each of ``settings`` that the world's flat codec
    (what ``train`` learns on) does not take, with those it takes; nothing
    is built (its values are the codec's to check)."""
    import inspect

    from luca_gym.protocol import load

    if world.flat is None:
        return
    parameters = inspect.signature(load(world.flat)).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return  # a codec that does not list its settings checks them itself
    taken = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(settings) - set(taken))
    if unknown:
        raise UsageError(f"settings: {', '.join(unknown)} unknown to the flat codec of world {world.name!r}; allowed "
                         f"{', '.join(taken) or 'none'}")


def _jax_hyper(args, names) -> dict:
    """The PPOConfig fields among ``names`` given as options (the rest keep their defaults)."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _train_by_cloning(args, world, settings: dict, steps: int, num_envs: int) -> int:
    """``--algo bc``: clone one of the world's flat baselines into a PPO run
    folder (:func:`luca_gym.agents.bc.plan_cloning`, :func:`~luca_gym.agents.bc.train_by_cloning`)."""
    from luca_gym.agents import bc

    plan = bc.plan_cloning(world, settings, steps=steps, num_envs=num_envs, teacher=args.teacher,
                           epochs=BC_EPOCHS if args.epochs is None else args.epochs, seed=args.seed,
                           **_jax_hyper(args, ("pool_size", "network")))
    writable_dir(args.out)
    print(f"training bc: {plan.describe()}", flush=True)
    progress = TrainProgress(args.quiet, "bc")
    try:
        cloned = bc.train_by_cloning(plan, args.out, progress=progress)
    except bc.TooFewSamples as exc:
        raise UsageError(f"steps: the teacher's {plan.envs} envs x {plan.length} steps kept {exc.samples} steps of ended "
                         f"sessions, fewer than one minibatch of {plan.minibatch}; allowed more --steps (or fewer "
                         "--num-envs, for longer rollouts)") from None
    finally:
        progress.close()
    print(f"trained bc: {cloned['samples']:,} of the teacher's steps in {cloned['wall_s']:.1f} s; the network takes the "
          f"teacher's action on {cloned['accuracy']:.3f} of them (last epoch); the teacher's mean {plan.env.headline} on "
          f"the training pool {cloned['teacher_score']:.3f}")
    where = "" if world.name == DEFAULT_WORLD else f" --world {world.name}"
    print(f"run folder: {args.out}  (evaluate: luca-gym eval{where} --agents ppo:{args.out}; "
          f"fine-tune: luca-gym train{where} --algo ppo --init {args.out} ...)")
    return 0
