"""The statistics behind the structured tools, on released data only
(:class:`~.release.Release`), in float64 numpy, batched over proteins:

* :func:`column_ols`: for each column k, the coefficient of x_k in
  y_k ~ 1 + x_k (+ covariates), on the rows where both are present;
* :func:`instruments`: each protein's cis instrument, the variant in its cis
  window most strongly associated with it (the lead cis-pQTL), with the
  first-stage effect and F statistic;
* :func:`cis_mr`: Wald ratios (the variant's effect on the phenotype over its
  effect on the protein; first-order standard error);
* :func:`conditional`: at a locus, two-stage least squares of the phenotype
  on the locus's cis proteins jointly, the locus's variants as instruments
  (which proteins the locus's genetic effect runs through);
* :func:`bh`: Benjamini-Hochberg q-values; p-values are two-sided normal;
* :func:`cox`: a Cox proportional-hazards fit (Newton-Raphson on the
  partial likelihood, Breslow ties), behind the survival tool;
* :func:`paired_change`: the change of a measure between baseline and the
  follow-up visit, optionally against an exposure.
"""

from __future__ import annotations

import math

import numpy as np

from luca_gym.worlds.biobank.release import WINDOW_KB, Release

CHUNK = 512  # columns per batch of column_ols (memory: rows x CHUNK float64)


def normal_p(z) -> np.ndarray:
    """Two-sided normal p-values of z (NaN stays NaN)."""
    z = np.abs(np.asarray(z, np.float64))
    return np.array([math.erfc(v / math.sqrt(2.0)) if np.isfinite(v) else np.nan for v in z.ravel()]).reshape(z.shape)


def bh(p) -> np.ndarray:
    """Benjamini-Hochberg q-values of p-values (NaN: not tested, left NaN)."""
    p = np.asarray(p, np.float64)
    q = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    if not len(tested):
        return q
    order = tested[np.argsort(p[tested], kind="stable")]
    ranked = p[order] * len(tested) / np.arange(1, len(tested) + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return q


def column_ols(y, x, z=None):
    """For each column k: the coefficient of x[:, k] in y[:, k] ~ 1 + x[:, k]
    + z, on the rows where y[:, k] and x[:, k] are finite.

    Args: y float (n,) or (n, K); x float (n, K); z float (n, c) or None (complete).
    Returns (beta, se, n) each (K,): NaN where a column has too few rows or no spread.
    """
    y = np.asarray(y, np.float64)
    x = np.asarray(x, np.float64)
    if y.ndim == 1:
        y = y[:, None]
    z = np.zeros((len(x), 0)) if z is None else np.asarray(z, np.float64)
    out = [_ols_chunk(y if y.shape[1] == 1 else y[:, s], x[:, s], z) for s in _chunks(x.shape[1])]
    return tuple(np.concatenate(parts) for parts in zip(*out)) if out else (np.zeros(0),) * 3


def _chunks(k: int):
    return [slice(i, min(i + CHUNK, k)) for i in range(0, k, CHUNK)]


def _ols_chunk(y, x, z):
    w = (np.isfinite(y) & np.isfinite(x)).astype(np.float64)
    y0, x0 = np.where(w > 0, y, 0.0), np.where(w > 0, x, 0.0)
    k, c = x.shape[1], z.shape[1]
    d = 2 + c
    # The Gram matrix of [1, x_k, z] on each column's rows, and its right-hand side.
    g = np.zeros((k, d, d))
    g[:, 0, 0] = w.sum(0)
    g[:, 0, 1] = g[:, 1, 0] = (w * x0).sum(0)
    g[:, 1, 1] = (w * x0 * x0).sum(0)
    if c:
        g[:, 0, 2:] = g[:, 2:, 0] = w.T @ z
        g[:, 1, 2:] = g[:, 2:, 1] = (w * x0).T @ z
        g[:, 2:, 2:] = np.einsum("nk,nc,nd->kcd", w, z, z, optimize=True)
    b = np.zeros((k, d))
    wy = w * y0
    b[:, 0], b[:, 1] = wy.sum(0), (wy * x0).sum(0)
    if c:
        b[:, 2:] = wy.T @ z
    n = g[:, 0, 0]
    spread = g[:, 1, 1] - g[:, 0, 1] ** 2 / np.maximum(n, 1)
    ok = (n > d + 1) & (spread > 1e-9 * np.maximum(n, 1))
    inverse = np.linalg.pinv(np.where(ok[:, None, None], g, np.eye(d)))
    coef = np.einsum("kij,kj->ki", inverse, b)
    rss = (wy * y0).sum(0) - np.einsum("ki,ki->k", coef, b)
    sigma2 = np.maximum(rss, 0.0) / np.maximum(n - d, 1)
    se = np.sqrt(sigma2 * inverse[:, 1, 1])
    return np.where(ok, coef[:, 1], np.nan), np.where(ok, se, np.nan), n.astype(np.int64)


def cis_windows(release: Release) -> list[np.ndarray]:
    """For each protein, the indices of the variants in its cis window (same
    chromosome, within WINDOW_KB of its gene's start)."""
    if "windows" not in release._cache:
        a, v = release.tables["protein_annotation"], release.tables["variants"]
        chromosome, position = np.asarray(v["chromosome"]), np.asarray(v["position"])
        release._cache["windows"] = [
            np.flatnonzero((chromosome == c) & (np.abs(position - t) <= WINDOW_KB * 1000))
            for c, t in zip(np.asarray(a["chromosome"]), np.asarray(a["tss_position"]))]
    return release._cache["windows"]


def instruments(release: Release) -> dict:
    """Each protein's lead cis variant (cached on the release): ``variant``
    int (P,) (-1 where its window is empty), ``beta``, ``se`` (the protein, in
    its NPX units, per effect allele), ``f`` (the first-stage F, t^2) and ``n``."""
    if "instruments" not in release._cache:
        windows = cis_windows(release)
        pairs_p = np.concatenate([np.full(len(w), i) for i, w in enumerate(windows)]).astype(np.int64)
        pairs_v = np.concatenate(windows).astype(np.int64)
        proteins, genotypes = release.matrix("proteins"), release.genotypes()
        beta, se, n = np.empty(len(pairs_p)), np.empty(len(pairs_p)), np.empty(len(pairs_p), np.int64)
        for s in _chunks(len(pairs_p)):
            beta[s], se[s], n[s] = column_ols(proteins[:, pairs_p[s]], genotypes[:, pairs_v[s]].astype(np.float64))
        t2 = np.where(np.isfinite(beta), (beta / se) ** 2, -1.0)
        p = len(windows)
        lead = np.full(p, -1)
        best = np.full(p, -np.inf)
        for j in range(len(pairs_p)):  # the largest t^2 per protein, first in position order on ties
            if t2[j] > best[pairs_p[j]]:
                best[pairs_p[j]], lead[pairs_p[j]] = t2[j], j
        found = lead >= 0
        pick = np.where(found, lead, 0)
        release._cache["instruments"] = {
            "variant": np.where(found, pairs_v[pick], -1), "beta": np.where(found, beta[pick], np.nan),
            "se": np.where(found, se[pick], np.nan), "f": np.where(found, t2[pick], np.nan), "n": np.where(found, n[pick], 0)}
    return release._cache["instruments"]


def association_scan(release: Release, y, adjust: bool):
    """Each protein's association with phenotype y (float (N,), NaN missing):
    (beta per NPX unit, se, n, p, q)."""
    beta, se, n = column_ols(y, release.matrix("proteins"), release.covariates() if adjust else None)
    p = normal_p(beta / se)
    return beta, se, n, p, bh(p)


def cis_mr(release: Release, y, proteins, adjust: bool) -> dict:
    """Wald ratios of phenotype y on the proteins at indices ``proteins`` (int (k,))
    with their lead cis instruments: arrays (k,) ``variant``, ``f``,
    ``beta_exposure``, ``beta_outcome`` (and SEs), ``ratio``, ``se``, ``p``, ``q``
    (BH over the k), ``n_outcome``."""
    inst = instruments(release)
    variant = inst["variant"][proteins]
    has = variant >= 0
    g = release.genotypes()[:, np.where(has, variant, 0)].astype(np.float64)
    g[:, ~has] = np.nan
    beta_y, se_y, n_y = column_ols(y, g, release.covariates() if adjust else None)
    beta_x, se_x = inst["beta"][proteins], inst["se"][proteins]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = beta_y / beta_x
        se = se_y / np.abs(beta_x)
    p = normal_p(ratio / se)
    return {"variant": variant, "f": inst["f"][proteins], "beta_exposure": beta_x, "se_exposure": se_x, "beta_outcome": beta_y,
            "se_outcome": se_y, "ratio": ratio, "se": se, "p": p, "q": bh(p), "n_outcome": n_y}


def locus(release: Release, variant: int) -> tuple[np.ndarray, np.ndarray]:
    """(variant indices, protein indices) of the locus around ``variant``:
    the variants within WINDOW_KB of it on its chromosome, and the proteins
    whose cis window holds it."""
    v = release.tables["variants"]
    chromosome, position = np.asarray(v["chromosome"]), np.asarray(v["position"])
    near = np.flatnonzero((chromosome == chromosome[variant]) & (np.abs(position - position[variant]) <= WINDOW_KB * 1000))
    cis = np.array([i for i, w in enumerate(cis_windows(release)) if variant in w], np.int64)
    return near, cis


def conditional(release: Release, y, variant: int, proteins, adjust: bool) -> dict:
    """Two-stage least squares at the locus of ``variant``: the phenotype y on
    the proteins at indices ``proteins`` jointly, the locus's polymorphic
    variants as instruments, on the participants with y and every one of the
    proteins. Returns ``variants`` (the instruments), ``n``, and per protein
    (arrays (k,)): ``beta``, ``se``, ``p`` (joint), ``first_stage_f`` (the
    instruments' partial F for that protein). ValueError when there are fewer
    instruments than proteins or too few participants."""
    near, _ = locus(release, variant)
    genotypes = release.genotypes()[:, near].astype(np.float64)
    x = release.matrix("proteins")[:, proteins]
    rows = np.isfinite(y) & np.isfinite(x).all(1)
    g = genotypes[rows]
    polymorphic = g.std(0) > 0
    g, instruments_used = g[:, polymorphic], near[polymorphic]
    k = len(proteins)
    if g.shape[1] < k:
        raise ValueError(f"the locus has {g.shape[1]} polymorphic variants for {k} proteins; at most {g.shape[1]} proteins")
    covariates = np.c_[np.ones(rows.sum()), release.covariates()[rows] if adjust else np.zeros((rows.sum(), 0))]
    n = int(rows.sum())
    if n < covariates.shape[1] + g.shape[1] + k + 10:
        raise ValueError(f"{n} participants have the phenotype and every protein; too few for the analysis")
    x, yy = x[rows], y[rows]
    first = np.c_[g, covariates]
    coef, *_ = np.linalg.lstsq(first, x, rcond=None)
    fitted = first @ coef
    # partial F of the instruments for each protein: against the covariates alone
    reduced, *_ = np.linalg.lstsq(covariates, x, rcond=None)
    rss_full = ((x - fitted) ** 2).sum(0)
    rss_reduced = ((x - covariates @ reduced) ** 2).sum(0)
    df = n - first.shape[1]
    f = ((rss_reduced - rss_full) / g.shape[1]) / (rss_full / df)
    second = np.c_[fitted, covariates]
    beta, *_ = np.linalg.lstsq(second, yy, rcond=None)
    residual = yy - np.c_[x, covariates] @ beta
    sigma2 = residual @ residual / (n - second.shape[1])
    cov = sigma2 * np.linalg.pinv(second.T @ second)
    se = np.sqrt(np.diag(cov)[:k])
    return {"variants": instruments_used, "n": n, "beta": beta[:k], "se": se, "p": normal_p(beta[:k] / se), "first_stage_f": f}


def correlation(a, b) -> tuple[float | None, int]:
    """(Pearson r, n) over the rows where both are finite; r None for fewer than 3 rows or no spread."""
    rows = np.isfinite(a) & np.isfinite(b)
    n = int(rows.sum())
    if n < 3 or a[rows].std() == 0 or b[rows].std() == 0:
        return None, n
    return float(np.corrcoef(a[rows], b[rows])[0, 1]), n


QC_FIELDS = ("connectivity", "site_shift", "bimodality", "r_age", "r_sex", "r_bmi", "r_exercise", "imaged_shift")


def protein_qc(release: Release) -> dict:
    """Each protein's quality-control profile (cached on the release), arrays (P,):

    * ``connectivity``: the mean |r| with every other protein;
    * ``site_shift``, ``shift_site``: the largest difference of a site's mean
      from the others' (in SDs of the protein) and that site (1-4);
    * ``bimodality``: Sarle's bimodality coefficient (skewness^2 + 1) /
      kurtosis (0.555 for a uniform distribution, 1/3 for a normal one;
      higher: two modes);
    * ``r_age``, ``r_sex``, ``r_bmi``, ``r_exercise``: Pearson r with the covariates;
    * ``imaged_shift``: the imaged participants' mean minus the others' (SDs).

    Missing values are left out of each statistic (the mean, for connectivity)."""
    if "qc" not in release._cache:
        x = release.matrix("proteins")
        present = np.isfinite(x)
        mean = np.nanmean(x, 0)
        sd = np.nanstd(x, 0)
        z = np.where(present, (x - mean) / np.where(sd > 0, sd, 1.0), 0.0)
        n = present.sum(0)
        corr = (z.T.astype(np.float32) @ z.astype(np.float32)) / np.maximum(n, 1)[:, None]
        np.fill_diagonal(corr, np.nan)
        site = np.asarray(release.tables["participants"]["site"])
        shifts = np.stack([(z * (site == s)[:, None]).sum(0) / np.maximum((present & (site == s)[:, None]).sum(0), 1)
                           - (z * (site != s)[:, None]).sum(0) / np.maximum((present & (site != s)[:, None]).sum(0), 1)
                           for s in (1, 2, 3, 4)])
        largest = np.abs(shifts).argmax(0)
        skew = (z**3).sum(0) / np.maximum(n, 1)
        kurtosis = (z**4).sum(0) / np.maximum(n, 1)
        imaged = np.zeros(len(x), bool)
        imaged[release.rows["imaging"]] = True
        covariates = {"r_age": release.numeric("participants", "age_years"), "r_sex": release.numeric("participants", "sex"),
                      "r_bmi": release.numeric("participants", "bmi_kg_m2"),
                      "r_exercise": release.numeric("participants", "exercise_hours_per_week")}
        out = {"connectivity": np.nanmean(np.abs(corr), 1).astype(np.float64),
               "site_shift": shifts[largest, np.arange(x.shape[1])], "shift_site": largest + 1,
               "bimodality": (skew**2 + 1) / np.where(kurtosis > 0, kurtosis, np.nan)}
        for name, c in covariates.items():
            out[name] = np.array([np.nan if r is None else r for r in (correlation(x[:, j], c)[0] for j in range(x.shape[1]))])
        out["imaged_shift"] = (z * imaged[:, None]).sum(0) / np.maximum((present & imaged[:, None]).sum(0), 1) - (
            z * ~imaged[:, None]).sum(0) / np.maximum((present & ~imaged[:, None]).sum(0), 1)
        release._cache["qc"] = out
    return release._cache["qc"]


def cox(time, event, x, max_iter: int = 50) -> dict:
    """A Cox proportional-hazards fit of ``time`` float (n,) and ``event``
    bool (n,) on covariates ``x`` float (n, k) (complete rows; no intercept):
    Newton-Raphson on the partial likelihood with Breslow's ties and step
    halving. Returns ``beta`` and ``se`` (k,), ``loglik``, ``iterations`` and
    ``converged``. ValueError for no events or a singular information matrix."""
    time, event, x = np.asarray(time, np.float64), np.asarray(event, bool), np.asarray(x, np.float64)
    if not event.any():
        raise ValueError("no events")
    order = np.argsort(-time, kind="stable")  # latest first: a risk set is a prefix
    t, d, x = time[order], event[order], x[order]
    last = np.searchsorted(-t, -t, side="right") - 1  # ties: the risk set holds every time >= t
    xd = x[d]

    def parts(beta):
        eta = x @ beta
        w = np.exp(eta - eta.max())
        s0 = np.cumsum(w)[last][d]
        s1 = np.cumsum(w[:, None] * x, 0)[last][d]
        s2 = np.cumsum(w[:, None, None] * x[:, :, None] * x[:, None, :], 0)[last][d]
        loglik = float((eta[d] - eta.max() - np.log(s0)).sum())
        mean = s1 / s0[:, None]
        grad = (xd - mean).sum(0)
        info = (s2 / s0[:, None, None] - mean[:, :, None] * mean[:, None, :]).sum(0)
        return loglik, grad, info

    beta = np.zeros(x.shape[1])
    loglik, grad, info = parts(beta)
    converged = False
    for iteration in range(1, max_iter + 1):
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError:
            raise ValueError("the information matrix is singular (an exposure or covariate without spread among "
                             "the events)") from None
        for _ in range(30):  # halve the step until the likelihood does not fall
            new = parts(beta + step)
            if new[0] >= loglik - 1e-10:
                break
            step = step / 2
        beta = beta + step
        loglik, grad, info = new
        if np.abs(step).max() < 1e-9:
            converged = True
            break
    cov = np.linalg.pinv(info)
    return {"beta": beta, "se": np.sqrt(np.maximum(np.diag(cov), 0.0)), "loglik": loglik, "iterations": iteration,
            "converged": converged}


def paired_change(baseline, visit, years, exposure=None, z=None) -> dict:
    """The change of a measure from baseline (float (n,)) to the follow-up
    visit (float (n,), ``years`` after), on the rows where both are finite:
    ``n``, ``baseline_mean``, ``visit_mean``, ``change_mean``, ``change_sd``,
    ``change_se``, ``per_year`` (mean change over years) and ``p`` (paired,
    normal); with ``exposure`` float (n,) (rows where it is finite too): the
    annual change regressed on the standardised exposure, the baseline value
    and ``z`` (covariates, complete, or None): ``exposure_beta`` (change per
    year per SD of the exposure), ``exposure_se``, ``exposure_p``,
    ``exposure_n``."""
    baseline, visit, years = (np.asarray(a, np.float64) for a in (baseline, visit, years))
    rows = np.isfinite(baseline) & np.isfinite(visit) & np.isfinite(years)
    n = int(rows.sum())
    if n < 3:
        raise ValueError(f"{n} participants have the measure at both visits; at least 3 needed")
    change = visit[rows] - baseline[rows]
    sd = float(change.std(ddof=1))
    se = sd / math.sqrt(n)
    out = {"n": n, "baseline_mean": float(baseline[rows].mean()), "visit_mean": float(visit[rows].mean()),
           "change_mean": float(change.mean()), "change_sd": sd, "change_se": se,
           "per_year": float((change / years[rows]).mean()),
           "p": float(normal_p(change.mean() / se)[()]) if se > 0 else float("nan")}
    if exposure is not None:
        exposure = np.asarray(exposure, np.float64)
        rows = rows & np.isfinite(exposure)
        m = int(rows.sum())
        covariates = np.zeros((len(rows), 0)) if z is None else np.asarray(z, np.float64)
        if m < covariates.shape[1] + 6:
            raise ValueError(f"{m} participants have the measure at both visits and the exposure; too few")
        e = exposure[rows]
        if not e.std() > 0:
            raise ValueError("the exposure does not vary among the participants with both visits")
        design = np.c_[np.ones(m), (e - e.mean()) / e.std(), baseline[rows], covariates[rows]]
        y = (visit[rows] - baseline[rows]) / years[rows]
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        residual = y - design @ coef
        sigma2 = residual @ residual / max(m - design.shape[1], 1)
        beta_se = math.sqrt(sigma2 * np.linalg.pinv(design.T @ design)[1, 1])
        out.update(exposure_beta=float(coef[1]), exposure_se=beta_se,
                   exposure_p=float(normal_p(coef[1] / beta_se)[()]) if beta_se > 0 else float("nan"), exposure_n=m)
    return out
