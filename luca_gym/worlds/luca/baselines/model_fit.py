"""``model-fit``: a scientist that fits the sigmoid network to its own
measurements (see :class:`ModelFitPolicy`): it chooses each experiment by the
information it is expected to give about the held-out tasks, fitting
ensembles of candidate networks with :mod:`~luca_gym.worlds.luca.baselines.fitting`
(the pure-JAX fitting core, apart from the agent that uses it).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.baselines.fitting import (FitConfig, LOCAL_CODES, ensemble_weights, fit, init_theta, local_fit,
                                                     local_init, local_interventions, local_outcomes, local_task, pad_data,
                                                     predict_batch)
from luca_gym.worlds.luca.baselines.policies import network_from_singles
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, N_PHENOTYPES, N_TASKS, PERSIST

# -- the agent -------------------------------------------------------------------

HEALTHY_LOW, HEALTHY_HIGH = 0.35, 0.65
# Up to this many genes model-fit fits dense candidate networks (every mode);
# above it, the local family (healthy sessions only).
DENSE_MAX = 40
FAMILIES = ("auto", "dense", "local")


@dataclass(frozen=True)
class AgentConfig:
    """The agent's plan. fit / refit: the first fit and the warm refits after
    each chosen experiment. hypothesis_members: candidates per malfunction
    hypothesis in disease mode. task2_reserve: experiments kept for the
    second task; rescue_reserve: rescue tests kept in disease mode.
    baseline_weight: weight of the (noise-free) diseased baseline in the fit.

    family: "dense" (candidate networks over all N genes), "local" (per
    prediction task, a network of its two genes and ``mediators`` unnamed
    nodes; healthy sessions only) or "auto" (dense up to ``dense_max`` genes,
    local above). local_fit / local_refit: the local family's first fit and
    warm refits; local_share: the fraction of the budget each task may use
    (at least its six singles); local_rounds: refits per task, each followed
    by an equal share of that task's experiments."""

    fit: FitConfig = FitConfig(members=12, steps=250)
    refit: FitConfig = FitConfig(members=12, steps=80)
    hypothesis_fit: FitConfig = FitConfig(members=4, steps=200)
    finalists: int = 5
    discriminate: int = 2
    finalist_fit: FitConfig = FitConfig(members=12, steps=300)
    task2_reserve: int = 6
    rescue_reserve: int = 2
    baseline_weight: float = 4.0
    seed: int = 0
    family: str = "auto"
    dense_max: int = DENSE_MAX
    mediators: int = 2
    local_fit: FitConfig = FitConfig(members=8, steps=300)
    local_refit: FitConfig = FitConfig(members=8, steps=100)
    local_share: float = 0.25
    local_rounds: int = 12

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family: {self.family!r} not allowed; expected one of {', '.join(FAMILIES)}")
        for name in ("mediators", "dense_max"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name}: {getattr(self, name)!r} not allowed; expected an integer >= 0")
        if not isinstance(self.local_rounds, int) or self.local_rounds < 1:
            raise ValueError(f"local_rounds: {self.local_rounds!r} not allowed; expected an integer >= 1")
        if not 0.0 < self.local_share <= 0.5:
            raise ValueError(f"local_share: {self.local_share!r} not allowed; expected a fraction in (0, 0.5]")

    def uses_local(self, n_genes: int) -> bool:
        """Whether sessions of ``n_genes`` genes use the local family."""
        return self.family == "local" or (self.family == "auto" and n_genes > self.dense_max)


def check_session(mode: str, n_genes: int, config: AgentConfig | None = None) -> None:
    """ValueError unless model-fit (with ``config``) can play ``mode`` at ``n_genes``."""
    config = config or AgentConfig()
    if mode == "disease" and config.uses_local(n_genes):
        raise ValueError(
            f"model-fit: disease sessions need the dense candidate family, which it uses up to N={config.dense_max} "
            f"(got N={n_genes}); above that it plays healthy sessions only (its local family models prediction tasks)"
        )


def _weights(fit_terms) -> np.ndarray:
    """:func:`ensemble_weights` on the host (float64)."""
    keep = np.asarray(ensemble_weights(np.asarray(fit_terms, np.float32))) > 0
    return keep / max(keep.sum(), 1)


def _ensemble_mean(fit_terms, preds) -> np.ndarray:
    """The prediction: the members' (K, P) phenotypes weighted by
    :func:`_weights`, clipped into [0, 1]."""
    return np.clip(_weights(fit_terms) @ np.asarray(preds), 0.0, 1.0)


def information_gain(outcomes: np.ndarray, target: np.ndarray, w: np.ndarray, noise: float) -> np.ndarray:
    """Expected reduction of the ensemble's variance of ``target`` (K, T) from
    measuring each candidate (C, K, P), in the linear-Gaussian approximation
    (an ensemble Kalman update): tr(C_ty (C_yy + noise^2 I)^-1 C_yt)."""
    w = w / w.sum()
    y = outcomes - np.einsum("k,ckp->cp", w, outcomes)[:, None]
    t = target - w @ target
    c_yy = np.einsum("k,ckp,ckq->cpq", w, y, y) + noise**2 * np.eye(y.shape[-1])
    c_yt = np.einsum("k,ckp,kt->cpt", w, y, t)
    return np.einsum("cpt,cpt->c", c_yt, np.linalg.solve(c_yy, c_yt))


class ModelFitPolicy:
    """``model-fit``: fits the sigmoid network family to its own measurements
    and reasons with the fitted ensemble. It sees what every agent sees (the
    observation and the public settings), no organism arrays.

    Healthy mode: reveals the first task; measures its two singles and a
    BLOCK sweep; fits an ensemble of candidate networks; then, until the
    second task's reserve, runs the experiment (from the unmeasured singles,
    signals, repeats of the task's singles and pairs of a task gene with
    another gene) whose outcome the ensemble expects to tell most about the
    task's phenotypes (:func:`information_gain`), refitting after each; it
    predicts the task with the ensemble's mean; the same for the second task
    with the rest of the budget.

    Disease mode: measures the signals, the first task's singles and the
    BLOCK and BOOST sweeps (keeping the rescue and second-task reserve);
    fits every malfunction hypothesis (gene x LOCK_HI / LOCK_LO, signal x
    PERSIST; the healthy state of each candidate reads 0.5 and its lock must
    reproduce the diseased baseline and every measurement) and commits the
    hypothesis that fits best; predicts with that hypothesis's candidates;
    tests as rescues the single interventions the fitted model expects to
    bring most aberrant phenotypes back into range, best first, while the
    budget lasts.
    """

    name = "model-fit"
    check_session = staticmethod(check_session)

    def __init__(self, config: AgentConfig | None = None):
        self.config = config or AgentConfig()

    def reset(self, params: core.EnvParams, seed: int) -> None:
        """Start a session of these settings (refused by ``check_session`` where the family cannot play it)."""
        check_session(params.mode, params.n_genes, self.config)
        self.params = params
        self.local = self.config.uses_local(params.n_genes)
        self.key = jax.random.PRNGKey(self.config.seed * 1_000_003 + int(seed))
        self.codes, self.flags, self.y, self.weight = [], [], [], []
        self.pending = None
        self.refused = []
        self.thetas = self.fit_terms = None
        self.lock = self.persist = None
        self.diagnosis = None
        self.trace = []  # (event, details) for the notebook and the tests
        self._script = self._session()
        self._started = False

    # -- plumbing -------------------------------------------------------------
    def act(self, obs: dict) -> dict:
        """The next action of the fitting script, after recording what ``obs`` measured."""
        self.act_pending(obs)
        if not self._started:
            self._started = True
            return next(self._script)
        return self._script.send(obs)

    def act_pending(self, obs) -> None:
        """Record the outcome of the experiment just run (once)."""
        if self.pending is not None:
            kind, codes, flags = self.pending
            self.pending = None
            if int(obs["last_error"]) == 0 and kind == core.EXPERIMENT:
                self._add(codes, flags, np.asarray(obs["last_phenotypes"], np.float32), 1.0)

    def _add(self, codes, flags, y, weight):
        self.codes.append(np.asarray(codes, np.int8))
        self.flags.append(np.asarray(flags, bool))
        self.y.append(np.asarray(y, np.float32))
        self.weight.append(float(weight))

    def _experiment(self, codes, flags, kind=core.EXPERIMENT) -> dict:
        self.pending = (kind, codes, flags)
        return {"kind": kind, "gene_codes": np.asarray(codes, np.int64), "signal_flags": np.asarray(flags, np.int8)}

    def _single(self, gene=None, code=0, signal=None):
        p = self.params
        codes = np.zeros(p.n_genes, np.int8)
        flags = np.zeros(p.n_signals, bool)
        if gene is not None:
            codes[gene] = code
        if signal is not None:
            flags[signal] = True
        return codes, flags

    def _singles(self, obs, codes) -> list:
        """Each code of ``codes`` on each targetable gene, then each signal alone."""
        targetable = np.flatnonzero(np.asarray(obs["targetable"], bool))
        pool = [self._single(int(g), c) for g in targetable for c in codes]
        return pool + [self._single(signal=k) for k in range(self.params.n_signals)]

    def _measured(self, codes, flags) -> bool:
        return any(np.array_equal(c, codes) and np.array_equal(f, flags) for c, f in zip(self.codes, self.flags))

    def _data(self):
        size = self.params.budget + 2
        return pad_data(np.array(self.codes), np.array(self.flags), np.array(self.y), np.array(self.weight), size)

    # -- fitting --------------------------------------------------------------
    def _fresh(self, count, cfg):
        self.key, sub = jax.random.split(self.key)
        p = self.params
        return jax.vmap(lambda k: init_theta(k, p.n_genes, p.n_signals, N_PHENOTYPES, cfg))(jax.random.split(sub, count))

    def _fit(self, cfg, warm: bool):
        k = cfg.members if not warm else jax.tree_util.tree_leaves(self.thetas)[0].shape[0]
        thetas = self.thetas if warm else self._fresh(k, cfg)
        locks, persists = self._hypothesis_arrays(k)
        self.thetas, fit_terms, _ = fit(thetas, locks, persists, self._data(), cfg)
        self.fit_terms = np.asarray(fit_terms)

    def _hypothesis_arrays(self, k: int):
        """The current hypothesis (no malfunction until a diagnosis) as lock
        (k, N) and persist (k, S) arrays for ``k`` candidates."""
        p = self.params
        lock = self.lock if self.lock is not None else np.zeros(p.n_genes, np.int8)
        persist = self.persist if self.persist is not None else np.zeros(p.n_signals, bool)
        return jnp.broadcast_to(jnp.asarray(lock), (k, p.n_genes)), jnp.broadcast_to(jnp.asarray(persist), (k, p.n_signals))

    def _ensemble_predict(self, codes, flags) -> np.ndarray:
        """(K, C, P) predictions of the current ensemble for C interventions."""
        k = jax.tree_util.tree_leaves(self.thetas)[0].shape[0]
        locks, persists = self._hypothesis_arrays(k)
        return self._predict_with(self.thetas, locks, persists, list(zip(codes, flags)))

    def _predict_with(self, thetas, locks, persists, pool) -> np.ndarray:
        """(F, C, P) predictions of candidates ``thetas`` for the (codes, flags) of ``pool``."""
        p = self.params
        codes, flags = [c for c, _ in pool], [f for _, f in pool]
        # Padded to one size per organism size, so nothing recompiles as the pool changes.
        size = 6 * p.n_genes + p.n_signals + 4
        c = len(codes)
        if c > size:
            raise ValueError(f"candidates: {c}, more than {size}")
        padded_codes = np.zeros((size, p.n_genes), np.int8)
        padded_flags = np.zeros((size, p.n_signals), bool)
        padded_codes[:c], padded_flags[:c] = np.array(codes), np.array(flags)
        out = predict_batch(thetas, locks, persists, jnp.asarray(padded_codes), jnp.asarray(padded_flags), self.config.refit)
        return np.asarray(out)[:, :c]

    def _task_intervention(self, obs):
        codes = np.zeros(self.params.n_genes, np.int8)
        for g, c in zip(obs["task_genes"], obs["task_codes"]):
            codes[int(g)] = int(c)
        return codes, np.zeros(self.params.n_signals, bool)

    def _pool(self, obs):
        """Candidate experiments: unmeasured singles (BLOCK, BOOST), unmeasured
        signals, a repeat of each task single, and each task single paired
        with a BLOCK or BOOST of another targetable gene."""
        targetable = np.flatnonzero(np.asarray(obs["targetable"], bool))
        pool = [x for x in self._singles(obs, (BLOCK, BOOST)) if not self._measured(*x)]
        if int(obs["task_index"]) >= 0:
            genes = [int(g) for g in obs["task_genes"]]
            for g, c in zip(genes, obs["task_codes"]):
                pool.append(self._single(g, int(c)))
                for other in targetable:
                    if int(other) in genes:
                        continue
                    for c2 in (BLOCK, BOOST):
                        codes, flags = self._single(g, int(c))
                        codes[int(other)] = c2
                        pool.append((codes, flags))
        return pool

    def _choose(self, obs):
        pool = [x for x in self._pool(obs) if not any(np.array_equal(x[0], r[0]) and np.array_equal(x[1], r[1]) for r in self.refused)]
        if not pool:
            return None
        target_codes, target_flags = self._task_intervention(obs)
        preds = self._ensemble_predict([c for c, _ in pool] + [target_codes], [f for _, f in pool] + [target_flags])
        return pool[self._most_informative(preds, self.fit_terms, self.config.fit.noise)]

    def _most_informative(self, preds, fit_terms, noise: float) -> int:
        """The index of the candidate experiment (``preds`` (K, C + 1, P):
        each member's outcomes of C candidates, then of the task) whose
        outcome tells most about the task (:func:`information_gain`),
        traced with the ensemble's disagreement on the task."""
        w = _weights(fit_terms)
        gain = information_gain(np.transpose(preds[:, :-1], (1, 0, 2)), preds[:, -1], w, noise)
        best = int(np.argmax(gain))
        self.trace.append(("choose", {"gain": float(gain[best]), "disagreement": float(np.sqrt(np.sum(w[:, None] * (preds[:, -1] - w @ preds[:, -1]) ** 2)))}))
        return best

    def _predict_task(self, obs) -> np.ndarray:
        codes, flags = self._task_intervention(obs)
        return _ensemble_mean(self.fit_terms, self._ensemble_predict([codes], [flags])[:, 0])

    # -- the session ----------------------------------------------------------
    def _session(self):
        p = self.params
        obs = yield {"kind": core.REVEAL_TASK}
        if p.disease:
            obs = yield from self._disease(obs)
        elif self.local:
            obs = yield from self._healthy_local(obs)
        else:
            obs = yield from self._healthy(obs)
        yield {"kind": core.SUBMIT_NETWORK, "network": network_from_singles(obs)}
        while True:
            yield {"kind": core.END}

    def _run(self, obs, plan, stop_at: int):
        """Run each unmeasured experiment of ``plan`` while more than
        ``stop_at`` units are left; returns the last observation."""
        for codes, flags in plan:
            if int(obs["budget_left"]) <= stop_at:
                break
            if self._measured(codes, flags):
                continue
            obs = yield self._experiment(codes, flags)
        return obs

    def _adaptive(self, obs, stop_at: int):
        while int(obs["budget_left"]) > stop_at:
            choice = self._choose(obs)
            if choice is None:
                break
            obs = yield self._experiment(*choice)
            if int(obs["last_error"]) != 0:
                # Refused (it perturbs both genes of a task): never again.
                self.refused.append(choice)
                continue
            self._fit(self.config.refit, warm=True)
        return obs

    def _task_singles(self, obs):
        return [self._single(int(g), int(c)) for g, c in zip(obs["task_genes"], obs["task_codes"])]

    def _sweep(self, obs, codes=(BLOCK,)):
        targetable = np.flatnonzero(np.asarray(obs["targetable"], bool))
        return [self._single(int(g), c) for c in codes for g in targetable]

    def _healthy(self, obs):
        cfg = self.config
        obs = yield from self._run(obs, self._task_singles(obs) + self._sweep(obs), cfg.task2_reserve)
        self._fit(cfg.fit, warm=False)
        obs = yield from self._adaptive(obs, cfg.task2_reserve)
        obs = yield {"kind": core.SUBMIT_PREDICTION, "prediction": self._predict_task(obs).astype(np.float32)}
        obs = yield {"kind": core.REVEAL_TASK}
        obs = yield from self._run(obs, self._task_singles(obs), 0)
        self._fit(cfg.refit, warm=True)
        obs = yield from self._adaptive(obs, 0)
        obs = yield {"kind": core.SUBMIT_PREDICTION, "prediction": self._predict_task(obs).astype(np.float32)}
        return obs

    def _healthy_local(self, obs):
        """Healthy mode with the local family: per task, the singles of its
        two genes under every code; then, ``local_rounds`` times, the local
        single the ensemble expects to tell most about the task is repeated
        (an equal part of the task's share of the budget) and the ensemble
        refitted; then the ensemble mean. The first task keeps the second's
        share of the budget."""
        cfg = self.config
        share = max(6, int(cfg.local_share * self.params.budget))
        chunk = max(1, -(-(share - 6) // cfg.local_rounds))
        for task in range(N_TASKS):
            if task:
                obs = yield {"kind": core.REVEAL_TASK}
            reserve = share if task == 0 else 0
            genes = [int(g) for g in obs["task_genes"]]
            start = int(obs["budget_left"])
            plan = self._task_singles(obs) + [self._single(g, c) for g in genes for c in LOCAL_CODES]
            obs = yield from self._run(obs, plan, reserve)
            self.key, sub = jax.random.split(self.key)
            thetas, fit_terms = local_fit(local_init(sub, cfg.mediators, cfg.local_fit), self._local_data(genes),
                                          cfg.mediators, cfg.local_fit)
            while start - int(obs["budget_left"]) < share and int(obs["budget_left"]) > reserve:
                j, c = self._local_choice(obs, thetas, fit_terms)
                for _ in range(min(chunk, share - (start - int(obs["budget_left"])), int(obs["budget_left"]) - reserve)):
                    obs = yield self._experiment(*self._single(genes[j], c))
                thetas, fit_terms = local_fit(thetas, self._local_data(genes), cfg.mediators, cfg.local_refit)
            preds = local_outcomes(thetas, local_task(obs["task_codes"], cfg.mediators), cfg.mediators, cfg.local_fit)
            prediction = _ensemble_mean(fit_terms, np.asarray(preds)[:, 0])
            obs = yield {"kind": core.SUBMIT_PREDICTION, "prediction": prediction.astype(np.float32)}
        return obs

    def _local_data(self, genes):
        """The local family's data for task ``genes``: each of the six singles
        as the mean of its measurements, weighted by their number (the same
        Gaussian likelihood as one row per measurement)."""
        total = np.zeros((6, N_PHENOTYPES), np.float64)
        count = np.zeros(6, np.float64)
        for codes, flags, y, weight in zip(self.codes, self.flags, self.y, self.weight):
            hit = np.flatnonzero(codes)
            if flags.any() or hit.size != 1 or int(hit[0]) not in genes:
                continue
            row = 3 * genes.index(int(hit[0])) + LOCAL_CODES.index(int(codes[hit[0]]))
            total[row] += weight * y
            count[row] += weight
        mean = np.where(count[:, None] > 0, total / np.maximum(count, 1e-12)[:, None], 0.5)
        return {"codes": local_interventions(self.config.mediators), "flags": jnp.zeros((6, 1), bool),
                "y": jnp.asarray(mean, jnp.float32), "weight": jnp.asarray(count, jnp.float32)}

    def _local_choice(self, obs, thetas, fit_terms):
        """(task gene index, code): the local single whose outcome the
        ensemble expects to tell most about the task's phenotypes."""
        cfg = self.config
        pool = jnp.concatenate([local_interventions(cfg.mediators), local_task(obs["task_codes"], cfg.mediators)])
        preds = np.asarray(local_outcomes(thetas, pool, cfg.mediators, cfg.local_fit), np.float64)
        best = self._most_informative(preds, fit_terms, cfg.local_fit.noise)
        return best // 3, LOCAL_CODES[best % 3]

    def _disease(self, obs):
        p, cfg = self.params, self.config
        self._add(np.zeros(p.n_genes, np.int8), np.zeros(p.n_signals, bool), np.asarray(obs["baseline_phenotypes"]), cfg.baseline_weight)
        reserve = cfg.rescue_reserve + 2
        signals = [self._single(signal=s) for s in range(p.n_signals)]
        plan = signals + self._task_singles(obs) + self._sweep(obs, (BLOCK, BOOST))
        obs = yield from self._run(obs, plan, reserve + cfg.discriminate)
        obs = yield from self._diagnose(obs)
        target, type_ = self.diagnosis
        obs = yield {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": int(target), "diagnosis_type": int(type_)}
        obs = yield {"kind": core.SUBMIT_PREDICTION, "prediction": self._predict_task(obs).astype(np.float32)}
        obs = yield {"kind": core.REVEAL_TASK}
        obs = yield from self._run(obs, self._task_singles(obs), cfg.rescue_reserve)
        self._fit(cfg.refit, warm=True)
        obs = yield {"kind": core.SUBMIT_PREDICTION, "prediction": self._predict_task(obs).astype(np.float32)}
        obs = yield from self._rescue(obs)
        return obs

    def hypotheses(self, obs):
        """Every malfunction the rules allow: (target, type, lock (N,), persist (S,))."""
        p = self.params
        out = []
        for g in np.flatnonzero(np.asarray(obs["targetable"], bool)):
            for type_ in (LOCK_HI, LOCK_LO):
                lock = np.zeros(p.n_genes, np.int8)
                lock[g] = type_
                out.append((int(g), type_, lock, np.zeros(p.n_signals, bool)))
        for s in range(p.n_signals):
            persist = np.zeros(p.n_signals, bool)
            persist[s] = True
            out.append((p.n_genes + s, PERSIST, np.zeros(p.n_genes, np.int8), persist))
        return out

    def _fit_hypotheses(self, hyps, cfg):
        """Fit ``cfg.members`` fresh candidates under each hypothesis; returns
        (thetas, fit terms, best total per hypothesis)."""
        m = cfg.members
        locks, persists = _repeated(hyps, m)
        # Common starting points: every hypothesis starts from the same m
        # candidates, so fits differ by the hypothesis, not by the luck of
        # the draw.
        start = jax.tree_util.tree_map(lambda x: jnp.tile(x, (len(hyps),) + (1,) * (x.ndim - 1)), self._fresh(m, cfg))
        thetas, fit_terms, totals = fit(start, locks, persists, self._data(), cfg)
        totals = np.asarray(totals).reshape(len(hyps), m)
        return thetas, np.asarray(fit_terms), np.nanmin(np.where(np.isfinite(totals), totals, np.inf), axis=1)

    def _diagnose(self, obs):
        """Every hypothesis fitted briefly; the ``finalists`` best refitted
        with more candidates and steps; then, while the discrimination budget
        lasts, the experiment on which the finalists' fitted models disagree
        most is run and the finalists refitted. Returns the last observation;
        the best-fitting hypothesis is left in ``self.diagnosis``."""
        cfg = self.config
        hyps = self.hypotheses(obs)
        _, _, first = self._fit_hypotheses(hyps, cfg.hypothesis_fit)
        order = np.argsort(first)[: cfg.finalists]
        finalists = [hyps[i] for i in order]
        thetas, fit_terms, best = self._fit_hypotheses(finalists, cfg.finalist_fit)
        m = cfg.finalist_fit.members
        locks, persists = _repeated(finalists, m)
        for _ in range(cfg.discriminate):
            if int(obs["budget_left"]) <= cfg.rescue_reserve + 2:
                break
            codes, flags = self._discriminating(obs, thetas, locks, persists, fit_terms, best, len(finalists))
            obs = yield self._experiment(codes, flags)
            self.act_pending(obs)
            thetas, fit_terms, totals = fit(thetas, locks, persists, self._data(), cfg.refit)
            totals = np.asarray(totals).reshape(len(finalists), m)
            best = np.nanmin(np.where(np.isfinite(totals), totals, np.inf), axis=1)
            fit_terms = np.asarray(fit_terms)
        ranked = np.argsort(best)
        self.posterior = [(finalists[i][0], finalists[i][1], float(best[i])) for i in ranked]
        self.posterior += [(hyps[i][0], hyps[i][1], float(first[i])) for i in np.argsort(first)[cfg.finalists:]]
        self.trace.append(("diagnose", {"best": self.posterior[:5]}))
        h = int(ranked[0])
        self.diagnosis = (finalists[h][0], finalists[h][1])
        self.lock, self.persist = finalists[h][2], finalists[h][3]
        keep = slice(h * m, (h + 1) * m)
        self.thetas = jax.tree_util.tree_map(lambda x: x[keep], thetas)
        self.fit_terms = np.asarray(fit_terms)[keep]
        return obs

    def _discriminating(self, obs, thetas, locks, persists, fit_terms, best, count):
        """The candidate experiment whose predicted outcome differs most
        between the finalist hypotheses (each weighted by its fit), in units
        of noise plus within-hypothesis spread."""
        pool = self._singles(obs, (BLOCK, BOOST, DAMPEN))
        pool = [x for x in pool if not self._measured(*x)]
        preds = self._predict_with(thetas, locks, persists, pool)  # (H*m, C, P)
        m = preds.shape[0] // count
        preds = preds.reshape(count, m, *preds.shape[1:])
        w = np.stack([_weights(fit_terms[i * m:(i + 1) * m]) for i in range(count)])  # (H, m)
        mean = np.einsum("hm,hmcp->hcp", w, preds)
        spread = np.einsum("hm,hmcp->hcp", w, (preds - mean[:, None]) ** 2)
        prior = np.exp(-(best - best.min()))
        prior = prior / prior.sum()
        centre = np.einsum("h,hcp->cp", prior, mean)
        noise = self.config.fit.noise
        score = np.einsum("h,hcp->c", prior, (mean - centre) ** 2 / (noise**2 + spread))
        choice = pool[int(np.argmax(score))]
        self.trace.append(("discriminate", {"score": float(score.max())}))
        return choice

    def _rescue(self, obs):
        p = self.params
        aberrant = np.asarray(obs["aberrant"], bool)
        pool = self._singles(obs, (BLOCK, BOOST, DAMPEN))
        preds = self._ensemble_predict([c for c, _ in pool], [f for _, f in pool])  # K, C, P
        w = _weights(self.fit_terms)
        inside = (preds >= HEALTHY_LOW) & (preds <= HEALTHY_HIGH)
        expected = np.einsum("k,kcp->c", w, (inside & aberrant).astype(float)) / max(aberrant.sum(), 1)
        distance = np.einsum("k,kcp->c", w, np.abs(preds - 0.5) * aberrant)
        order = np.lexsort((distance, -expected))
        tested = 0
        for i in order:
            if int(obs["budget_left"]) < p.rescue_cost or not bool(obs["action_mask"][core.TEST_RESCUE]):
                break
            codes, flags = pool[int(i)]
            obs = yield self._experiment(codes, flags, kind=core.TEST_RESCUE)
            tested += 1
            if float(obs["last_restored_fraction"]) >= 1.0:
                break
        return obs


def _repeated(hypotheses, members: int):
    """Lock (H * members, N) and persist (H * members, S) arrays: each
    hypothesis's, once per candidate."""
    locks = np.repeat(np.array([h[2] for h in hypotheses]), members, axis=0)
    persists = np.repeat(np.array([h[3] for h in hypotheses]), members, axis=0)
    return jnp.asarray(locks), jnp.asarray(persists)
