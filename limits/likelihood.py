"""Type-II maximum likelihood of the NNGP hyper-parameters: output scale s² and observation noise σ².

The prior of the d outputs (independent, sharing the kernel) is f ~ GP(0, s² K), the observations
y = f(X) + ε, ε ~ N(0, σ² I) — scikit-learn's ``ConstantKernel() * K + WhiteKernel()``. With
K = V Λ Vᵀ (one eigendecomposition), q_i = Σ_o (Vᵀ Y)_io² and the noise ratio λ = σ²/s²::

    log p(Y | s², λ) = −(1/2s²) Σ_i q_i/(λ_i + λ) − (d/2) Σ_i log(λ_i + λ) − (dP/2) log s² − (dP/2) log 2π

For fixed λ the maximum over s² is closed-form, ŝ²(λ) = Σ_i q_i/(λ_i + λ) / (dP), and the profile
likelihood::

    ℓ(λ) = −(dP/2) log ŝ²(λ) − (d/2) Σ_i log(λ_i + λ) − (dP/2)(1 + log 2π)

is maximised over log λ (a grid, then the root of dℓ/d log λ between the neighbours of the best grid point;
O(P) per λ). The root of the derivative is well conditioned where the maximum itself is flat (a search on
ℓ's values locates it only to √ε ≈ 1e-8, and the last digits then depend on the rounding of K), so the
joint maximum (ŝ²(λ̂), σ̂² = λ̂ ŝ²(λ̂)) is reproducible to ~1e-13, with no gradient steps over s². Only λ changes the posterior mean K_*X (K + λI)⁻¹ Y; s² scales the
covariance. ``noise_only`` fixes s² (the noise-only fit, :func:`ml_noise`).

Why the scale matters: the NNGP of deep or convolutional networks has a large constant part (a CNN-GP with
global average pooling on the 8×8 digits has every correlation above 0.7), so at s² = 1 the only way the
likelihood can match the targets' variance is a large σ² that over-smooths the posterior mean (the accuracy
table of docs/theory/predict.rst §3). Fitting s² lets σ² measure the noise; when to fix it by hand: §2 there.
"""
from __future__ import annotations

import math

import numpy as np

GRID = 81                       # points of the log-λ grid before the root search
XTOL = 1e-14                    # tolerance of the root of dℓ/d log λ (resp. log σ²)


def spectrum(K, Y):
    """Eigenvalues λ_i ≥ 0 of K and q_i = Σ_o (VᵀY)_io² (the targets' energy per eigen-direction)."""
    lam, V = np.linalg.eigh(0.5 * (K + K.T))
    lam = np.clip(lam, 0.0, None)
    q = np.sum((V.T @ Y) ** 2, axis=1)
    if not np.any(q > 0):
        raise ValueError("noise='auto': the training targets are all zero; the likelihood has no maximum")
    return lam, q


def _terms(lam, q, s2):
    """(Σ_i q_i/(λ_i + s), Σ_i log(λ_i + s)) for each s in ``s2``."""
    den = lam[None, :] + np.asarray(s2, float)[:, None]
    return np.sum(q[None, :] / den, axis=1), np.sum(np.log(den), axis=1)


def _moments(lam, q, s):
    """(Σ q_i/(λ_i+s), Σ q_i/(λ_i+s)², Σ 1/(λ_i+s)) at one s: the pieces of dℓ/ds."""
    den = lam + s
    return float(np.sum(q / den)), float(np.sum(q / den**2)), float(np.sum(1.0 / den))


def _maximise(f, lo, hi, slope):
    """argmax of f(log x) over [lo, hi]: a log grid of :data:`GRID` points, then the root of ``slope``
    (df/d log x, one float per float) between the neighbours of the best grid point, where it changes sign;
    otherwise (the maximum on the edge of the range) the best grid point."""
    from scipy.optimize import brentq

    grid = np.linspace(math.log(lo), math.log(hi), GRID)
    vals = f(grid)
    i = int(np.argmax(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    ga, gb = slope(a), slope(b)
    if not (ga > 0.0 > gb):
        for u, g in ((a, ga), (b, gb)):           # a root exactly on a grid point
            if g == 0.0:
                return float(math.exp(u))
        return float(math.exp(grid[i]))
    return float(math.exp(brentq(slope, a, b, xtol=XTOL, rtol=4 * np.finfo(float).eps, maxiter=200)))


def _range(lam, q, P, d):
    top = max(float(lam[-1]), float(np.sum(q)) / (P * d), 1e-300)
    lo = max(10.0 * P * np.finfo(float).eps * top, 1e-12 * top)
    return lo, top


def ml_noise(K, Y, output_scale=1.0):
    """σ² maximising log p(Y | s², σ²) at the fixed ``output_scale`` s² (the noise-only fit)."""
    lam, q = spectrum(float(output_scale) * K, Y)
    P, d = Y.shape
    lo, top = _range(lam, q, P, d)

    def ell(u):
        a, ld = _terms(lam, q, np.exp(u))
        return -0.5 * a - 0.5 * d * ld

    def slope(u):                 # dℓ/du = s (Σ q/(λ+s)² − d Σ 1/(λ+s)) / 2,  s = e^u
        s = math.exp(u)
        _, a2, r = _moments(lam, q, s)
        return 0.5 * s * (a2 - d * r)

    return _maximise(ell, lo, 10.0 * (float(lam[-1]) + float(np.mean(Y * Y))), slope)


def ml_scale_noise(K, Y):
    """(s², σ²) maximising log p(Y | s², σ²) jointly (module docstring: the profile likelihood in λ)."""
    lam, q = spectrum(K, Y)
    P, d = Y.shape
    lo, top = _range(lam, q, P, d)

    def ell(u):
        a, ld = _terms(lam, q, np.exp(u))
        return -0.5 * d * P * np.log(a / (d * P)) - 0.5 * d * ld

    def slope(u):                 # dℓ/du = s (dP/2 · Σq/(λ+s)² / Σq/(λ+s) − d/2 · Σ 1/(λ+s)),  s = e^u
        s = math.exp(u)
        a, a2, r = _moments(lam, q, s)
        return 0.5 * d * s * (P * a2 / a - r)

    ratio = _maximise(ell, lo, 1e4 * top, slope)
    a, _ = _terms(lam, q, [ratio])
    s2 = float(a[0]) / (d * P)
    return s2, ratio * s2
