"""Gaussian expectations the kernel recursions need, on whole P×P Gram matrices.

Thin layer over :mod:`limits.gaussian` (which owns closed forms and Gauss–Hermite quadrature).
The two Price-theorem derivatives the response functions need are added here, with closed forms
for linear / relu / erf and quadrature (``limits.gaussian.expect`` / ``expect2``) otherwise:

* ``diag_price(act, q) = E[φ'(u)² + φ(u)φ''(u)] = ∂_q E[φ(u)²]``,  u ~ N(0, q)   (seed 004 Eq. 38, 45)
* ``cross_price(act, K)[α, β] = ½ E[φ''(u_α) φ(u_β)] = ∂E[φ(u_α)φ(u_β)]/∂K_αα``  (Price, App. D)
"""
from __future__ import annotations

import numpy as np

_TWO_OVER_PI = 2.0 / np.pi


def _name(act) -> str:
    return str(getattr(act, "name", "")).lower()


def gram(act, K):
    """P×P matrix E_{N(0,K)}[φ(u_α) φ(u_β)]."""
    from .. import gaussian

    E = np.asarray(gaussian.gram(act, K), dtype=np.float64)
    return 0.5 * (E + E.T)


def dgram(act, K):
    """P×P matrix E_{N(0,K)}[φ'(u_α) φ'(u_β)]."""
    from .. import gaussian

    G = np.asarray(gaussian.dgram(act, K), dtype=np.float64)
    return 0.5 * (G + G.T)


def diag_price(act, q):
    """E[φ'(u)² + φ(u)φ''(u)] for u ~ N(0, q), vectorised over ``q`` (= ∂_q E[φ(u)²])."""
    q = np.asarray(q, dtype=np.float64)
    name = _name(act)
    if name == "linear":
        return np.ones_like(q)
    if name == "relu":
        return np.full_like(q, 0.5)
    if name == "erf":
        return (4.0 / np.pi) / ((1.0 + 2.0 * q) * np.sqrt(1.0 + 4.0 * q))
    from .. import gaussian

    phi, dphi, d2phi = act.phi, act.dphi, act.d2phi
    return np.asarray(gaussian.expect(lambda x: dphi(x) ** 2 + phi(x) * d2phi(x), q), dtype=np.float64)


def cross_price(act, K):
    """A[α, β] = ½ E[φ''(u_α) φ(u_β)] = ∂ E[φ(u_α)φ(u_β)] / ∂K_αα (other entries of K fixed)."""
    K = np.asarray(K, dtype=np.float64)
    d = np.diag(K)
    name = _name(act)
    if name == "linear":
        return np.zeros_like(K)
    if name == "erf":
        a = 1.0 + 2.0 * d
        s = 2.0 * K / np.sqrt(np.outer(a, a))
        s = np.clip(s, -1.0, 1.0)
        root = np.sqrt(np.maximum(1.0 - s * s, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            A = -_TWO_OVER_PI * s / (a[:, None] * root)
        # |s| = 1 only when both variances are infinite-like; on the diagonal s < 1 always.
        return A
    if name == "relu":
        # ∂/∂k11 of √(k11k22)/(2π)(sinθ + (π−θ)cosθ) = √(k11 k22 − k12²) / (4π k11)
        det = np.maximum(np.outer(d, d) - K * K, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            A = np.where(d[:, None] > 0, np.sqrt(det) / (4.0 * np.pi * d[:, None]), 0.0)
        return A
    from .. import gaussian

    k11 = np.broadcast_to(d[:, None], K.shape)
    k22 = np.broadcast_to(d[None, :], K.shape)
    return 0.5 * np.asarray(gaussian.expect2(act.d2phi, act.phi, k11, K, k22), dtype=np.float64)


def dgram_price(act, K):
    """Response matrix of seed 004 Eq. C15: E[φ'_α φ'_β] off the diagonal, E[φ'² + φφ''] on it."""
    G = dgram(act, K)
    np.fill_diagonal(G, diag_price(act, np.diag(K)))
    return G
