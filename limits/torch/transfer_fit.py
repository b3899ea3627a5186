"""The statistics of a μTransfer study (numpy only; no torch): optimal learning rate per size, its drift with
size, a verdict, and the verdict's calibration.

Data: the loss ``y[k, m, s]`` after training at size ``n_k`` (width or depth), learning rate ``2^{x_m}`` and seed
``s`` (the same seeds at every size and rate: common random numbers). A diverged run (non-finite, or loss above
the size's threshold ``cap_k``) enters as ``cap_k`` — recorded, never dropped; a failed run (an exception) is
missing.

    curve_k(x_m)   = mean_s y[k, m, s]                                   (± SE over seeds)
    x*_k           = vertex of the least-squares parabola through log curve_k at the grid minimum and the two
                     rates on each side (``half_window``; kept within one grid step of the minimum; a minimum on
                     the first or last rate is *at the edge*: x*_k is then only a bound)
    x*_k           = a + b · log2 n_k                                     (least squares; b = drift per doubling)
    x*(n_target)   = a + b · log2 n_target

Intervals: percentile intervals of the Bayesian bootstrap over seeds (B draws of Dirichlet(1, …, 1) weights on the
S seeds, the same weights at every size, from a ``numpy.random.Generator``; unlike resampling seed indices, which
gives only C(2S−1, S) distinct curves — 10 with 3 seeds — it varies smoothly), level ``level``, each stretched
about its estimate by :func:`small_sample_factor` (with few seeds the bootstrap spread underestimates the
sampling spread: by √((S−1)/(S+1)) for a mean, and the spread itself is estimated — Student's t, not z).

Verdict with the practical-equivalence margin δ (log2 units per doubling; default ¼: the optimum moves by less
than 2× over four doublings):

    transfers     the drift's CI lies inside [−δ, δ]
    drifts        the CI excludes 0 and |b| > δ
    inconclusive  otherwise (the CI is too wide for either), or an optimum at the edge of the rate grid

:func:`calibrate` measures how often this verdict is wrong for the study's own design and noise: it shifts the
measured mean curves along the rate axis so that their optima drift by a chosen amount (0: the null μP predicts),
adds seed residuals resampled from the study (inflated by √(S/(S−1))), and reruns the whole analysis; the
rates of each verdict come with binomial standard errors.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import numpy as np

VERDICTS = ("transfers", "drifts", "inconclusive")


# ---------------------------------------------------------------------- optimum of a loss curve
def parabola_vertex(x, y, half_window=1):
    """Vertex of the least-squares parabola through the points within ``half_window`` grid steps of the finite
    minimum i of every row of ``y`` (..., M) (1: the exact parabola through i and its two neighbours), kept
    within [x_{i−1}, x_{i+1}]. Returns ``(vertex, at_edge)``; rows without a finite value give NaN; where fewer
    than three points are finite or the parabola opens downwards, the grid minimum itself."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    z = np.where(np.isfinite(y), y, np.inf)
    i = np.argmin(z, axis=-1)
    M = x.size
    none = ~np.isfinite(np.take_along_axis(z, i[..., None], -1)[..., 0])
    edge = ((i == 0) | (i == M - 1)) & ~none
    j = np.arange(M)
    w = (np.abs(j - i[..., None]) <= half_window) & np.isfinite(y)          # (..., M) window mask
    u = x - x[i][..., None]                                                  # centred at the grid minimum
    yy = np.where(w, y, 0.0)
    S = [np.sum(w * u ** k, -1) for k in range(5)]
    T = [np.sum(w * u ** k * yy, -1) for k in range(3)]
    A = np.stack([np.stack([S[4], S[3], S[2]], -1), np.stack([S[3], S[2], S[1]], -1),
                  np.stack([S[2], S[1], S[0]], -1)], -2)
    rhs = np.stack([T[2], T[1], T[0]], -1)
    det = np.linalg.det(A)
    good = (w.sum(-1) >= 3) & (np.abs(det) > 1e-12) & ~edge & ~none
    coef = np.zeros(rhs.shape)
    if np.any(good):
        coef[good] = np.linalg.solve(A[good], rhs[good][..., None])[..., 0]
    a, b = coef[..., 0], coef[..., 1]
    good &= a > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        off = np.where(good, -b / (2 * np.where(good, a, 1.0)), 0.0)
    lo = x[np.clip(i - 1, 0, M - 1)] - x[i]
    hi = x[np.clip(i + 1, 0, M - 1)] - x[i]
    v = x[i] + np.clip(off, lo, hi)
    return np.where(none, np.nan, v), edge


def _positive(c) -> bool:
    fin = c[np.isfinite(c)]
    return bool(fin.size) and bool(np.all(fin > 0))


def _log_curve(c):
    """log of the mean curves when every finite value is positive (losses span decades), else the curves."""
    return np.log(c) if _positive(c) else c


def optima(curves, log2_lrs, half_window=2):
    """Optimal log2 learning rate of each mean curve (..., M) and whether it sits on the grid's edge."""
    return parabola_vertex(log2_lrs, _log_curve(np.asarray(curves, float)), half_window)


def capped(loss, diverged, cap):
    """Loss with diverged runs entered at their size's threshold ``cap`` (K,) — recorded, not dropped."""
    loss = np.asarray(loss, float)
    c = np.broadcast_to(np.asarray(cap, float).reshape((-1,) + (1,) * (loss.ndim - 1)), loss.shape)
    return np.where(np.asarray(diverged, bool), c, loss)


def _slope(u, o):
    """Least-squares slope and intercept of o (..., K) on u (K,) (rows with a NaN give NaN)."""
    uc = u - u.mean()
    b = (o * uc).sum(-1) / (uc ** 2).sum()
    a = o.mean(-1) - b * u.mean()
    return b, a


@dataclass(frozen=True)
class DriftFit:
    """Optimum per size with bootstrap CI, drift per doubling with CI, prediction at ``target``."""

    optimum: np.ndarray          # (K,)
    optimum_ci: np.ndarray       # (K, 2)
    at_edge: np.ndarray          # (K,) bool
    drift: float
    drift_ci: np.ndarray         # (2,)
    intercept: float
    target: float
    target_optimum: float
    target_ci: np.ndarray        # (2,)
    curve_mean: np.ndarray       # (K, M)
    curve_se: np.ndarray         # (K, M)
    boot_drift: np.ndarray       # (B,)


def _weighted_means(y, w):
    """Σ_s w_bs y_kms / Σ_s w_bs over the finite runs: (B, K, M) for weights ``w`` (B, S)."""
    ok = np.isfinite(y)
    num = np.einsum("kms,bs->bkm", np.where(ok, y, 0.0), w)
    den = np.einsum("kms,bs->bkm", ok.astype(float), w)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


@contextlib.contextmanager
def quiet():
    """No RuntimeWarnings from nan-reductions over sizes/rates where every run failed (they give NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def fit_drift(y, sizes, log2_lrs, rng, n_boot=1000, level=0.95, target=None, half_window=2) -> DriftFit:
    """Optimum per size and drift per doubling (module docstring) from capped losses ``y`` (K, M, S)."""
    y = np.asarray(y, float)
    K, M, S = y.shape
    u = np.log2(np.asarray(sizes, float))
    with quiet():
        mean = np.nanmean(y, axis=-1)
        n = np.isfinite(y).sum(-1)
        se = np.nanstd(y, axis=-1, ddof=1) / np.sqrt(np.maximum(n, 1))
    opt, edge = optima(mean, log2_lrs, half_window)
    b, a = _slope(u, opt)
    tgt = float(2 ** u.max() * 4) if target is None else float(target)
    w = rng.dirichlet(np.ones(S), size=int(n_boot))                  # Bayesian bootstrap over seeds
    bo, _ = optima(_weighted_means(y, w), log2_lrs, half_window)    # (B, K)
    bb, ba = _slope(u, bo)
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    c = small_sample_factor(S, level)
    with quiet():
        oci = _widen(opt, np.nanpercentile(bo, q, axis=0).T, c)
        dci = _widen(b, np.nanpercentile(bb, q), c)
        t_opt = a + b * np.log2(tgt)
        tci = _widen(t_opt, np.nanpercentile(ba + bb * np.log2(tgt), q), c)
    return DriftFit(opt, oci, edge, float(b), np.asarray(dci, float), float(a), tgt, float(t_opt),
                    np.asarray(tci, float), mean, se, bb)


def small_sample_factor(S, level=0.95) -> float:
    """Widening of the bootstrap interval for S seeds: t_{S−1}/z (an estimated spread) × √((S+1)/(S−1)) (the
    Bayesian bootstrap's variance of a mean is Σ(x−x̄)²/(S(S+1)), the unbiased one Σ(x−x̄)²/(S(S−1))); → 1 as
    S → ∞. S = 3: 3.1, 4: 2.1, 5: 1.7, 8: 1.4."""
    from scipy.stats import norm, t

    p = (1 + level) / 2
    return float(t.ppf(p, S - 1) / norm.ppf(p) * np.sqrt((S + 1) / (S - 1)))


def _widen(est, ci, c):
    """The interval ``ci`` (lo, hi along the last axis) stretched about ``est`` by ``c``."""
    est = np.asarray(est, float)
    lo, hi = ci[..., 0], ci[..., 1]
    return np.stack([est - c * np.maximum(est - lo, 0), est + c * np.maximum(hi - est, 0)], axis=-1)


def verdict(drift, ci, margin, at_edge=()) -> tuple:
    """(verdict, reason) — module docstring."""
    lo, hi = float(ci[0]), float(ci[1])
    if np.any(at_edge):
        return "inconclusive", "an optimum lies on the edge of the learning-rate grid (extend the rates)"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "inconclusive", "no interval (too few finite optima)"
    if -margin <= lo and hi <= margin:
        return "transfers", f"the drift's CI lies inside ±{margin:g} log2 per doubling"
    if (lo > 0 or hi < 0) and abs(drift) > margin:
        return "drifts", f"the drift's CI excludes 0 and |drift| > {margin:g}"
    return "inconclusive", f"the CI [{lo:+.2f}, {hi:+.2f}] is too wide to decide at margin ±{margin:g}"


# ---------------------------------------------------------------------- calibration
def _shift_curves(mean_log, log2_lrs, shifts):
    """Each row of ``mean_log`` (K, M) moved along the rate axis by ``shifts`` (K,) (linear interpolation,
    constant beyond the grid)."""
    out = np.empty_like(mean_log)
    for k in range(mean_log.shape[0]):
        row = mean_log[k]
        ok = np.isfinite(row)
        out[k] = np.interp(log2_lrs - shifts[k], log2_lrs[ok], row[ok])
    return out


@dataclass(frozen=True)
class Calibration:
    """Rates of each verdict over ``n_sim`` simulated studies per true drift (``rates[i, v]`` for drift
    ``drifts[i]`` and verdict ``VERDICTS[v]``, binomial ``se``)."""

    drifts: np.ndarray
    rates: np.ndarray
    se: np.ndarray
    n_sim: int

    def rate(self, drift, verdict_name) -> tuple:
        i = int(np.argmin(np.abs(self.drifts - drift)))
        v = VERDICTS.index(verdict_name)
        return float(self.rates[i, v]), float(self.se[i, v])


def calibrate(y, sizes, log2_lrs, margin, rng, drifts=(0.0, -1.0), n_sim=200, n_boot=300, level=0.95,
              half_window=2, n_seeds=None) -> Calibration:
    """Verdict rates of this design (sizes, rates, seeds) at its own noise, for each true drift (module
    docstring): ``rates[i]`` at drift ``drifts[i]`` — at 0 the false-verdict rates of a flat optimum, elsewhere
    the power to see the drift. ``n_seeds``: simulate studies with this many seeds instead (residuals resampled
    from the study's own): the design a larger study would have."""
    y = np.asarray(y, float)
    K, M, S = y.shape
    if S < 2:
        raise ValueError("calibrate: needs at least 2 seeds (the noise is read from the spread over seeds)")
    lx = np.asarray(log2_lrs, float)
    logged = _positive(y)
    ly = np.log(y) if logged else y
    with quiet():
        mean = np.nanmean(ly, axis=-1)
    resid = (ly - mean[..., None]) * np.sqrt(S / (S - 1))
    opt, _ = parabola_vertex(lx, mean, half_window)
    u = np.log2(np.asarray(sizes, float))
    base = _shift_curves(mean, lx, np.nanmean(opt) - opt)           # every optimum moved to the mean optimum
    drifts = np.asarray(drifts, float)
    counts = np.zeros((drifts.size, len(VERDICTS)))
    S_sim = S if n_seeds is None else int(n_seeds)
    for i, d in enumerate(drifts):
        curves = _shift_curves(base, lx, d * (u - u.mean()))
        for _ in range(int(n_sim)):
            pick = rng.integers(0, S, size=S_sim)
            sim = curves[..., None] + resid[:, :, pick]
            sim = np.exp(sim) if logged else sim
            f = fit_drift(sim, sizes, lx, rng, n_boot=n_boot, level=level, half_window=half_window)
            v, _ = verdict(f.drift, f.drift_ci, margin, f.at_edge)
            counts[i, VERDICTS.index(v)] += 1
    rates = counts / n_sim
    return Calibration(drifts, rates, np.sqrt(rates * (1 - rates) / n_sim), int(n_sim))


def within_power(v, why, cal, margin, alpha, resolve=None) -> tuple:
    """(verdict, reason, resolving seeds): a "drifts" the design's own calibration gives for a flat optimum more
    often than ``alpha``, or a "transfers" it gives for a real drift of −2·margin more often than ``alpha``, is
    "inconclusive" — with the smallest number of seeds at which simulated studies of this design would keep that
    error within ``alpha`` (``resolve(n_seeds, drift, verdict) -> rate``, tried at 2×, 4×, 8× the seeds), or
    None when even that does not."""
    if v not in ("transfers", "drifts"):
        return v, why, None
    drift = 0.0 if v == "drifts" else -2.0 * float(margin)
    rate, se = cal.rate(drift, v)
    if rate <= alpha:
        return v, why, None
    what = ("calls a flat optimum 'drifts'" if v == "drifts" else
            f"calls a true drift of {drift:+.2f} per doubling 'transfers'")
    need = resolve() if resolve is not None else None
    more = (f"; simulated with {need[0]} seeds it would {_pct_text(need[1])}" if need and need[0]
            else "; more seeds alone do not bring it within α in simulation: add steps or rates near the optimum")
    return "inconclusive", (f"add seeds/steps/rates — the {v!r} it reads is beyond this design's power: it {what} in "
                            f"{100 * rate:.0f} % (± {100 * se:.0f} %) of simulated studies, more than α = "
                            f"{100 * alpha:.0f} %{more}"), (need[0] if need else None)


def _pct_text(r):
    return f"in {100 * r:.0f} %"


def resolving_seeds(y, sizes, log2_lrs, margin, rng, drift, verdict_name, alpha, S, n_sim=100, n_boot=200,
                    level=0.95, half_window=2, max_seeds=64):
    """(seeds, rate): the smallest of 2S, 4S, 8S (≤ ``max_seeds``) at which simulated studies of this design
    give ``verdict_name`` at ``drift`` in at most ``alpha`` of cases, and that rate; (None, rate at the largest
    tried) when none does."""
    rate = 1.0
    for k in (2, 4, 8):
        n = k * int(S)
        if n > max_seeds:
            break
        c = calibrate(y, sizes, log2_lrs, margin, rng, drifts=(drift,), n_sim=n_sim, n_boot=n_boot, level=level,
                      half_window=half_window, n_seeds=n)
        rate = c.rate(drift, verdict_name)[0]
        if rate <= alpha:
            return n, rate
    return None, rate


__all__ = ["parabola_vertex", "optima", "capped", "fit_drift", "verdict", "calibrate", "DriftFit", "Calibration",
           "VERDICTS", "within_power", "resolving_seeds"]
