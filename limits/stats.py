"""Statistics for theory-vs-finite comparisons (docs/theory/finite.rst §4): standard errors, z-scores,
log–log rate fits with confidence intervals, and verdicts."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def signed(x, digits: int = 2, minus: str = "-") -> str:
    """``x`` with its sign and ``digits`` decimals — the one formatter of printed exponents, slopes and rates: a
    value that rounds to zero prints as ``+0.00``, never ``-0.00`` (``minus="−"`` for a typographic minus)."""
    text = f"{float(x):+.{digits}f}"
    if np.isfinite(float(x)) and float(text) == 0.0:
        text = f"{0.0:+.{digits}f}"
    return text.replace("-", minus)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x, Σ (u − ū)(v − v₀) / Σ (u − ū)² (u = log x, v = log y;
    the v₀ shift is exact because Σ (u − ū) = 0): exactly 0 when every y is the same number, where a
    generic solver (``np.polyfit``) returns ±1e-16."""
    u, v = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    du = u - u.mean()
    return float(du @ (v - v[0]) / (du @ du))


def mean_se(samples, axis: int = 0, name: str = "samples"):
    """Sample mean and its standard error (ddof = 1) along ``axis``; ``ValueError`` naming ``name``
    for fewer than 2 samples (a standard error from one sample is undefined)."""
    x = np.asarray(samples, dtype=np.float64)
    n = x.shape[axis]
    if n < 2:
        raise ValueError(f"mean_se needs at least 2 samples along the axis ({name}: got {n})")
    return x.mean(axis=axis), x.std(axis=axis, ddof=1) / np.sqrt(n)


def mean_se_or_none(samples, axis: int = 0, name: str = "samples"):
    """Like :func:`mean_se`, but with one sample the standard error is reported as unavailable
    (``None``) instead of NaN; zero samples raise ``ValueError`` naming ``name``."""
    x = np.asarray(samples, dtype=np.float64)
    n = x.shape[axis]
    if n < 1:
        raise ValueError(f"{name}: no samples along axis {axis} (a mean needs at least 1)")
    if n == 1:
        return x.mean(axis=axis), None
    return x.mean(axis=axis), x.std(axis=axis, ddof=1) / np.sqrt(n)


def se_text(se, n: int, unit: str = "init", spec: str = ".2g") -> str:
    """Printable standard error: the number, or ``"n/a (1 init)"`` when it is unavailable."""
    if se is None:
        return f"n/a ({n} {unit}{'' if n == 1 else 's'})"
    if not np.isfinite(se):
        return "overflow"
    return format(float(se), spec)


def zscore(theory, estimate, se, floor: float = 1e-300):
    """(estimate − theory) / se, elementwise."""
    return (np.asarray(estimate) - np.asarray(theory)) / np.maximum(np.asarray(se, dtype=float), floor)


@dataclass(frozen=True)
class RateFit:
    """Fit ``log y = intercept + slope · log x`` (weighted when ``yerr`` is given)."""

    slope: float
    intercept: float
    slope_se: float
    ci_low: float
    ci_high: float
    level: float

    def contains(self, value: float) -> bool:
        return self.ci_low <= value <= self.ci_high

    def predict(self, x):
        return np.exp(self.intercept) * np.asarray(x, dtype=float) ** self.slope

    def __str__(self):
        return (f"{signed(self.slope, 3)} ± {self.slope_se:.3f} ({100 * self.level:.0f}% CI "
                f"[{signed(self.ci_low, 3)}, {signed(self.ci_high, 3)}])")


def loglog_fit(x, y, yerr=None, level: float = 0.95) -> RateFit:
    """Least-squares slope of log y against log x with a t-based confidence interval.

    With ``yerr`` (standard errors of y) the fit is weighted by the delta-method variance of
    log y, ``(yerr / y)²``, and the slope SE combines that with the residual scatter (whichever
    is larger), so a bad model cannot hide behind small error bars.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise ValueError("loglog_fit needs 1-D x and y of equal length >= 3")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("loglog_fit needs positive x and y")
    lx, ly = np.log(x), np.log(y)
    if yerr is None:
        w = np.ones_like(lx)
    else:
        sig = np.asarray(yerr, dtype=float) / y
        sig = np.where(sig > 0, sig, np.min(sig[sig > 0]) if np.any(sig > 0) else 1.0)
        w = 1.0 / sig**2
    A = np.stack([np.ones_like(lx), lx], axis=1)
    Aw = A * np.sqrt(w)[:, None]
    bw = ly * np.sqrt(w)
    coef, *_ = np.linalg.lstsq(Aw, bw, rcond=None)
    resid = bw - Aw @ coef
    dof = x.size - 2
    cov_unit = np.linalg.inv(Aw.T @ Aw)
    scatter = float(resid @ resid) / dof
    scale = max(scatter, 1.0) if yerr is not None else scatter
    slope_se = float(np.sqrt(cov_unit[1, 1] * scale))
    from scipy import stats as _st

    t = _st.t.ppf(0.5 + level / 2, dof)
    return RateFit(float(coef[1]), float(coef[0]), slope_se, float(coef[1] - t * slope_se),
                   float(coef[1] + t * slope_se), level)


def z_verdict(z, z_crit: float = 4.0) -> str:
    """'pass' when every ``|z| ≤ z_crit`` (default 4: few false alarms over many entries)."""
    return "pass" if np.all(np.abs(np.asarray(z)) <= z_crit) else "fail"


def variance_relative_variance(samples, axis: int = 0):
    """Var(s²)/σ⁴ of the sample variance s² of ``S`` iid draws along ``axis``: 2/(S − 1) + γ/S, with γ the
    excess kurtosis estimated from the samples (clipped at 0: a light-tailed sample is not trusted to make the
    standard error more precise than for Gaussian draws). Exact for iid draws of kurtosis γ + 3; γ = 0 is the
    Gaussian (χ²) value. Columns with zero spread get the Gaussian value."""
    x = np.asarray(samples, dtype=np.float64)
    S = x.shape[axis]
    if S < 2:
        raise ValueError(f"variance_relative_variance needs at least 2 samples (got {S})")
    d = x - x.mean(axis=axis, keepdims=True)
    m2 = np.mean(d * d, axis=axis)
    m4 = np.mean(d ** 4, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = np.where(m2 > 0, m4 / np.where(m2 > 0, m2, 1.0) ** 2 - 3.0, 0.0)
    return 2.0 / (S - 1) + np.maximum(gamma, 0.0) / S


def satterthwaite_dof(terms, rel_var, known=0.0):
    """Effective degrees of freedom of a variance estimate v̂ = Σ_k terms_k (+ ``known``, a variance taken as
    exact): ν = 2 (Σ_k v_k + known)² / Σ_k v_k² r_k, with r_k = Var(v̂_k)/v_k² (``rel_var``,
    :func:`variance_relative_variance`) — Welch–Satterthwaite, χ²_ν matched to the first two moments of v̂.
    ``terms``, ``rel_var``: arrays whose first axis is k. ∞ when every term is zero."""
    v = np.asarray(terms, dtype=np.float64)
    r = np.asarray(rel_var, dtype=np.float64)
    num = 2.0 * (np.sum(v, axis=0) + known) ** 2
    den = np.sum(v * v * r, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)


def normal_equivalent(t_stat, dof):
    """The standard-normal deviate with the same two-sided tail probability as a Student-t statistic with
    ``dof`` degrees of freedom: sign(t)·Φ⁻¹(1 − F_ν(abs(t))). abs(result) ≤ abs(t); = t for ν = ∞. Where the
    tail probability underflows (t far in the tail), t itself is returned."""
    from scipy.special import ndtr, ndtri, stdtr

    t = np.asarray(t_stat, dtype=np.float64)
    nu = np.broadcast_to(np.asarray(dof, dtype=np.float64), t.shape)
    finite = np.isfinite(nu)
    sf = np.where(finite, stdtr(np.where(finite, nu, 1.0), -np.abs(t)), ndtr(-np.abs(t)))
    z = np.where(sf > 0, -ndtri(np.where(sf > 0, sf, 0.5)), np.abs(t))
    return np.sign(t) * np.minimum(z, np.abs(t))


def student_quantile(p, dof):
    """Upper-tail quantile t_ν(p), 0 < p < 1 (the normal one for ν = ∞)."""
    from scipy.special import ndtri, stdtrit

    nu = np.asarray(dof, dtype=np.float64)
    finite = np.isfinite(nu)
    return np.where(finite, -stdtrit(np.where(finite, nu, 1.0), p), -ndtri(p))


def control_variate(Y, R):
    """Y − R β̂ with β̂ the least-squares coefficients of the centred Y on the centred regressors R
    (E[R] = 0 exactly, so the mean is unchanged up to O(1/S)); per-init rows."""
    Rc = R - R.mean(axis=0)
    beta, *_ = np.linalg.lstsq(Rc, Y - Y.mean(axis=0), rcond=None)
    return Y - R @ beta
