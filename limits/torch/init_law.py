"""The init-law test of :func:`limits.torch.equivalent`: are a tensor's pooled entries v = w/std (over draws and
widths) i.i.d. N(0, 1), the model's law? Three statistics whose null distributions are exact or accurate at
every n ≥ 100 (so a Bonferroni threshold z_crit ≈ 3.5 means what it says):

    mean        z₁ = Σv / √n                                   exactly N(0, 1)
    variance    n·m₂ = Σv² ~ χ²_n,  z₂ = Φ⁻¹(F_{χ²_n}(n·m₂))      exact
    shape       b₂ = m₄ᶜ / (m₂ᶜ)² (sample kurtosis), z₄ its Anscombe–Glynn (1983) normal transform (D'Agostino's
                kurtosis test): accurate from n ≈ 20

Why not z = (m̂₄ − 3)/SÊ with SÊ² = (m̂₈ − m̂₄²)/n (the previous test): v⁴ has skewness ≈ 10, so at n ≈ 500
a sample with a low m̂₄ also has a low m̂₈ — the studentised ratio's lower tail is several times heavier than the
normal's, and a correct module was refused 2 times in 20 at ``max_draws=64``
(``benchmarks/equivalence_init_law.py`` measures both).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

N_SUMS = 5          # n, Σv, Σv², Σv³, Σv⁴


def moment_sums(v) -> np.ndarray:
    """[n, Σv, Σv², Σv³, Σv⁴] of the entries ``v`` (float64): add them up over draws, then :func:`law_z`."""
    v = np.asarray(v, float).ravel()
    v2 = v * v
    return np.array([v.size, v.sum(), v2.sum(), (v2 * v).sum(), (v2 * v2).sum()])


def kurtosis_z(b2, n) -> float:
    """Anscombe–Glynn normal transform of the sample kurtosis ``b2`` of ``n`` normal draws (≈ N(0, 1))."""
    n = float(n)
    mean = 3.0 * (n - 1) / (n + 1)
    var = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) ** 2 * (n + 3) * (n + 5))
    x = (b2 - mean) / math.sqrt(var)
    skew = 6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9)) * math.sqrt(6.0 * (n + 3) * (n + 5) / (n * (n - 2) * (n - 3)))
    A = 6.0 + 8.0 / skew * (2.0 / skew + math.sqrt(1.0 + 4.0 / skew ** 2))
    denom = 1.0 + x * math.sqrt(2.0 / (A - 4.0))
    if denom <= 0:                              # beyond the transform's range: far in the lower tail
        return -math.inf
    t = ((1.0 - 2.0 / A) / denom) ** (1.0 / 3.0)
    return ((1.0 - 2.0 / (9.0 * A)) - t) / math.sqrt(2.0 / (9.0 * A))


def _chi2_z(x, df) -> float:
    """Φ⁻¹ of the χ²_df distribution function at x, accurate in both tails."""
    if x < df:
        return float(stats.norm.ppf(stats.chi2.cdf(x, df))) if stats.chi2.cdf(x, df) > 1e-300 else \
            float(-np.sqrt(-2.0 * stats.chi2.logcdf(x, df)))
    return float(stats.norm.isf(stats.chi2.sf(x, df)))


def law_z(sums) -> tuple:
    """((mean, variance, kurtosis), null SEs, (z₁, z₂, z₄)) of pooled :func:`moment_sums` (module docstring)."""
    n, s1, s2, s3, s4 = (float(x) for x in sums)
    m1, m2, m3, m4 = s1 / n, s2 / n, s3 / n, s4 / n
    c2 = max(m2 - m1 * m1, 1e-300)
    c4 = m4 - 4 * m1 * m3 + 6 * m1 * m1 * m2 - 3 * m1 ** 4
    b2 = c4 / (c2 * c2)
    var_b2 = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) ** 2 * (n + 3) * (n + 5))
    z = (m1 * math.sqrt(n), _chi2_z(n * m2, n), kurtosis_z(b2, n))
    return (m1, m2, b2), (1.0 / math.sqrt(n), math.sqrt(2.0 / n), math.sqrt(var_b2)), z


__all__ = ["moment_sums", "law_z", "kurtosis_z", "N_SUMS"]
