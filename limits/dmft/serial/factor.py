"""Gaussian sources drawn causally: a block lower-triangular factor built one time step at a time.

The DMFT's source fields (u ~ N(0, K̃), r ~ N(0, G̃)) must be drawn at time t when only the rows K(t, s ≤ t) of
their two-time covariance are known (docs/theory/dmft.rst §6, one pass in time). With fixed standard normals ζ,
u(t) = Σ_{s ≤ t} L(t, s) ζ(s), where L is block lower-triangular with L Lᵀ = K:

    L(t, s) L(s, s)ᵀ = K(t, s) − Σ_{s' < s} L(t, s') L(s, s')ᵀ      (s < t; block forward substitution)
    L(t, t) = (K(t, t) − Σ_{s < t} L(t, s) L(t, s)ᵀ)^{1/2}             (the principal root of the Schur complement)

Two-time kernels of training are nearly rank-deficient (at γ0 → 0 every time is the same field: K(t, s) = K₀), so
the diagonal blocks may be singular: the Schur complement's eigenvalues below ``rcond``·λ_max(K(t, t)) (rounding)
are dropped, its root's pseudo-inverse solves the substitution (the minimal-norm solution; K is an exact Gram
matrix of the sampled paths, so K(t, s) lies in the range it needs). What is dropped is reported
(``dropped``: the largest dropped eigenvalue relative to λ_max(K(t, t)), and negative ones: the factor's
consistency diagnostic).
"""
from __future__ import annotations

import numpy as np


def psd_root(S, scale, rcond=1e-10):
    """(S^{1/2}, its pseudo-inverse, largest |dropped eigenvalue|/scale) of a symmetric PSD S."""
    S = 0.5 * (S + S.T)
    lam, V = np.linalg.eigh(S)
    keep = lam > rcond * scale
    drop = lam[~keep]
    worst = float(np.max(np.abs(drop))) / scale if drop.size and scale > 0 else 0.0
    sq = np.sqrt(lam[keep])
    Vk = V[:, keep]
    return (Vk * sq) @ Vk.T, (Vk / sq) @ Vk.T, worst


class CausalFactor:
    """L (n_t·b × n_t·b, block lower-triangular) with L Lᵀ = K, one row block per :meth:`add_row` (module
    docstring)."""

    def __init__(self, n_t, b, rcond=1e-10):
        self.b, self.rcond = b, rcond
        self.L = np.zeros((n_t * b, n_t * b))
        self.pinv = []
        self.dropped = 0.0

    def add_row(self, t, Krow):
        """Row block t from K(t, s ≤ t) (b × (t+1)·b); returns L(t, s ≤ t)."""
        b = self.b
        X = np.zeros((b, t * b))
        L = self.L
        for s in range(t):
            R = Krow[:, s * b:(s + 1) * b] - X[:, :s * b] @ L[s * b:(s + 1) * b, :s * b].T
            X[:, s * b:(s + 1) * b] = R @ self.pinv[s]
        Ktt = Krow[:, t * b:(t + 1) * b]
        scale = max(float(np.max(np.abs(np.diag(Ktt)))), 1e-300)
        root, pinv, worst = psd_root(Ktt - X @ X.T, scale, self.rcond)
        self.dropped = max(self.dropped, worst)
        L[t * b:(t + 1) * b, :t * b] = X
        L[t * b:(t + 1) * b, t * b:(t + 1) * b] = root
        self.pinv.append(pinv)
        return L[t * b:(t + 1) * b, :(t + 1) * b]
