"""Gram matrices of smooth activations by the Mehler (Hermite) expansion, with a certified tail.

For u_α = s_α x, u_β = s_β y, (x, y) standard bivariate normal with correlation ρ_αβ = K_αβ/(s_α s_β):

    E[f(u_α) f(u_β)] = Σ_k c_k(α) c_k(β) ρ_αβ^k,   c_k(α) = E[f(s_α x) He_k(x)] / √k!   (Mehler)

The coefficients are computed once per row α by a trapezoidal rule against the normalised Hermite
functions ψ_k(x) = He_k(x) e^{−x²/4}/√k! (stable three-term recursion), so a P×P Gram costs
O(P·M·n_q) for the coefficients plus O(M·P²) for a Horner sweep — instead of O(P²·n²) for a 2-D
quadrature per entry. Truncation after M terms is bounded per entry by
|ρ|^{M+1} √(T_α T_β), T_α = E[f(u_α)²] − Σ_{k≤M} c_k(α)² (Parseval); entries whose bound exceeds
``tol`` (correlations near ±1, very large variances) are recomputed with the exact 2-D quadrature of
:func:`limits.gaussian.expect2`. The diagonal is the 1-D integral E[f(u_α)²].
An extra primitive for the lead's engine: it is exact to ``tol`` by construction, never silently
truncated.
"""
from __future__ import annotations

import numpy as np

_SQ2PI = np.sqrt(2.0 * np.pi)


def _grid(M, smax):
    """Trapezoid nodes covering the Hermite functions up to degree M and resolving f(s x)."""
    # |ψ_k| ≤ 1.09 for all k (Cramér), so the integrand f·ψ_k·e^{−x²/4} is below 1e-17·max|f| beyond 13
    xmax = 13.0
    h = min(0.05, 0.2 / max(1.0, smax), 1.0 / np.sqrt(M + 1.0))
    n = int(np.ceil(xmax / h))
    x = np.arange(-n, n + 1) * h
    return x, h


def _psi_table(x, M):
    """ψ_k(x) = He_k(x) e^{−x²/4}/√k! for k = 0..M (rows)."""
    T = np.empty((M + 1, x.size))
    T[0] = np.exp(-0.25 * x * x)
    if M >= 1:
        T[1] = x * T[0]
    for k in range(1, M):
        T[k + 1] = (x * T[k] - np.sqrt(k) * T[k - 1]) / np.sqrt(k + 1.0)
    return T


def coefficients(f, s, M=120):
    """(c, second_moment): c (P, M+1) Mehler coefficients of f(s_α ·) and E[f(s_α x)²] (P,)."""
    s = np.asarray(s, dtype=np.float64)
    x, h = _grid(M, float(np.max(s)) if s.size else 1.0)
    w = np.exp(-0.25 * x * x) * (h / _SQ2PI)                 # ψ_k e^{−x²/4} = He_k φ(x)√(2π)/√k!
    F = f(s[:, None] * x[None, :])                           # (P, n_q)
    c = (F * w) @ _psi_table(x, M).T                          # (P, M+1)
    m2 = (F * F) @ (np.exp(-0.5 * x * x) * (h / _SQ2PI))
    return c, m2


def gram_mehler(f, K, M=120, tol=1e-11, exact=None):
    """P×P matrix E_{N(0,K)}[f(u_α) f(u_β)] (see module docstring). ``exact(k11, k12, k22)`` is the
    fallback for entries whose certified truncation bound exceeds ``tol`` (relative to max(1,|E|)).
    Returns (E, n_fallback)."""
    K = np.asarray(K, dtype=np.float64)
    d = np.diag(K).copy()
    s = np.sqrt(np.maximum(d, 0.0))
    c, m2 = coefficients(f, s, M)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = K / np.outer(s, s)
    rho = np.where(np.isfinite(rho), np.clip(rho, -1.0, 1.0), 0.0)
    E = np.outer(c[:, M], c[:, M])
    for k in range(M - 1, -1, -1):
        E *= rho
        E += np.outer(c[:, k], c[:, k])
    tail = np.maximum(m2 - np.sum(c * c, axis=1), 0.0)
    bound = np.abs(rho) ** (M + 1) * np.sqrt(np.outer(tail, tail)) + 1e-15 * np.sqrt(np.outer(m2, m2))
    np.fill_diagonal(E, m2)
    np.fill_diagonal(bound, 0.0)
    bad = bound > tol * np.maximum(1.0, np.abs(E))
    iu = np.triu_indices(K.shape[0], 1)
    sel = bad[iu]
    n_fb = int(np.count_nonzero(sel))
    if n_fb:
        if exact is None:
            raise ValueError("gram_mehler: truncation bound exceeds tol and no exact fallback was given")
        a, b = iu[0][sel], iu[1][sel]
        vals = np.asarray(exact(d[a], K[a, b], d[b]), dtype=np.float64)
        E[a, b] = vals
        E[b, a] = vals
    E = 0.5 * (E + E.T)
    return E, n_fb
