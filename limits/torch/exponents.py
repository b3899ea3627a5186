"""The exponent test of :func:`limits.torch.coord_check`: is a width series m_N (means over seeds) consistent with
a predicted leading exponent p once its leading finite-width correction is allowed for?

A coordinate-check quantity at width N is a sum of a coherent Θ(N^p) part and width-N sums of uncorrelated terms
(central-limit fluctuations), which enter at relative order N^{-1/2}; e.g. the read-out's first-step change
ΔW_out·h + W_out·Δh under μP: the second term's uncorrelated part is N^{-1/2} of the first. So the null model is

    m_N = a N^p + b N^{p−½}   (+ c N^{lo} + d N^{lo−½} for a predicted crossover range [lo, p], terms not
                                 already present; at most k − 1 terms for k widths)

fitted by weighted least squares, and the prediction is *consistent* when

1. the model fits: χ² = Σ_N (m_N − fit_N)² / s_N² against (k − n_par)·F(k − n_par, ν), with s_N² the SE² of the
   mean plus (m_N/N)² (unmodelled O(1/N) corrections). The seed variance is pooled over the k widths by the
   power law log(var_N/m_N²) = α + γ log N (seed fluctuations of a width-N quantity vary as a power of N), so
   ν = k(S − 1) − 2 degrees of freedom instead of S − 1 per width (a width whose own seeds vary more keeps its
   own variance: the pooled fit never makes a width look more precise than its seeds say);
2. the leading term is there (point predictions): a > 0, and either it dominates at the largest width
   (|b| N_max^{−½} ≤ a) or it is significantly positive (a > 2 SE) — otherwise the data are N^{p−½}, not N^p;
   for a range, neither end is significantly negative (2 SE): the upper end's coefficient a, and the lower
   end's part c N^{lo} + d N^{lo−½} at every width — a crossover adds the two.

A check runs m such tests; each is done at α/m (Bonferroni), so a correct module fails with probability ≤ α
when the null model holds. The false-alarm rate and the power on injected bugs are measured in
``benchmarks/coordcheck_calibration.py``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special, stats


def _pooled(xs, samples):
    """(mean, SE, dof) per width of ``samples`` (k widths, S seeds): the relative seed variance pooled over
    widths by log(var/m²) = α + γ log N (fitted on the sample log-variances, their χ²_{S−1} bias removed), never
    below a width's own sample variance."""
    y = np.asarray(samples, float)
    k, S = y.shape
    m = y.mean(axis=1)
    var = y.var(axis=1, ddof=1)
    ok = (m > 0) & (var > 0)
    nu = S - 1
    if ok.sum() < 3:                                    # too few usable widths: per-width SEs
        return m, np.sqrt(var / S), nu
    bias = special.digamma(nu / 2) - math.log(nu / 2)           # E log(χ²_ν/ν)
    lx = np.log(xs[ok])
    coef = np.polyfit(lx, np.log(var[ok] / m[ok] ** 2) - bias, 1)
    rel = np.exp(np.polyval(coef, np.log(xs)))
    return m, np.sqrt(np.maximum(rel * m ** 2, var) / S), int(ok.sum()) * nu - 2


def exponent_test(widths, samples, predicted, predicted_low=None):
    """p-value of the fit test and the regime verdict (module docstring) of ``samples`` (k widths, S seeds)
    against a predicted exponent (or range [predicted_low, predicted]); (nan, False) when not testable."""
    xs = np.asarray(widths, float)
    y = np.asarray(samples, float)
    if not np.all(np.isfinite(y)):
        return 0.0, False
    m, se, nu = _pooled(xs, y)
    if np.any(m <= 0):
        return math.nan, False
    hi = float(predicted)
    lo = hi if predicted_low is None or not np.isfinite(predicted_low) else float(predicted_low)
    exps = [hi, hi - 0.5]
    if lo < hi:                            # a crossover: the lower end and its own correction
        exps += [e for e in (lo, lo - 0.5) if not any(math.isclose(e, f) for f in exps)]
    k = len(xs)
    exps = exps[:max(2, k - 1)]
    s = np.sqrt(se ** 2 + (m / xs) ** 2)
    A = xs[:, None] ** np.asarray(exps)[None, :]
    Aw = A / s[:, None]
    coef, *_ = np.linalg.lstsq(Aw, m / s, rcond=None)
    chi2 = float(np.sum((m / s - Aw @ coef) ** 2))
    dof = k - len(exps)
    p = 1.0 if dof <= 0 else float(stats.f.sf(chi2 / dof, dof, max(nu, 1)))
    cov = np.linalg.pinv(Aw.T @ Aw) * max(1.0, chi2 / dof if dof > 0 else 1.0)
    csd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    if lo == hi:
        nmax = xs.max()
        dominates = abs(coef[1]) * nmax ** (hi - 0.5) <= coef[0] * nmax ** hi
        regime = coef[0] > 0 and (dominates or coef[0] > 2 * csd[0])
    else:                                  # the two ends of a crossover add up; corrections have either sign
        lower = [i for i, e in enumerate(exps) if i >= 2 or math.isclose(e, lo)]
        AL = A[:, lower]
        part = AL @ coef[lower]                          # the lower end with its correction, at every width
        part_sd = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", AL, cov[np.ix_(lower, lower)], AL), 0.0))
        regime = bool(coef[0] >= -2 * csd[0] and np.all(part >= -2 * part_sd))
    return p, bool(regime)


def bound_test(widths, samples, upper):
    """p-value of "the exponent is at most ``upper``" (an upper bound: a read-out initialised below the table's
    scale, a bias below its module's): the weighted log-log slope of the means (SEs as in :func:`exponent_test`,
    scaled by the fit's χ²/dof when above 1) against ``upper``, one-sided t with the pooled dof; (nan, False) when
    not testable, (p, True) otherwise."""
    xs = np.asarray(widths, float)
    y = np.asarray(samples, float)
    if not np.all(np.isfinite(y)):
        return 0.0, False
    m, se, nu = _pooled(xs, y)
    if np.any(m <= 0):
        return math.nan, False
    s = np.sqrt(se ** 2 + (m / xs) ** 2) / m                     # SE of log m
    X = np.vstack([np.log(xs), np.ones_like(xs)]).T
    W = X / s[:, None]
    coef, *_ = np.linalg.lstsq(W, np.log(m) / s, rcond=None)
    dof = len(xs) - 2
    chi2 = float(np.sum((np.log(m) / s - W @ coef) ** 2))
    cov = np.linalg.pinv(W.T @ W) * max(1.0, chi2 / dof if dof > 0 else 1.0)
    z = (coef[0] - float(upper)) / math.sqrt(max(cov[0, 0], 1e-300))
    return float(stats.t.sf(z, max(nu, 1))), True


__all__ = ["exponent_test", "bound_test"]
