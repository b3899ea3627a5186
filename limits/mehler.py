"""Gaussian expectations by the Mehler (Hermite) expansion, with a certified truncation bound.

For u = s₁x, v = s₂y with (x, y) standard bivariate normal of correlation c = k12/(s₁s₂):

    E[f(u) g(v)] = Σ_{k≥0} a_k b_k c^k,   a_k = E[f(s₁x) He_k(x)]/√k!,  b_k = E[g(s₂x) He_k(x)]/√k!

(Mehler's formula). Coefficients are computed once per distinct standard deviation by a
trapezoidal rule against the normalised Hermite functions ψ_k(x) = He_k(x) e^{−x²/4}/√k!
(stable three-term recursion, |ψ_k| ≤ 1.09), so a batch whose triples share few variances — a
P×P Gram matrix has P — costs O(#variances · M · n_q) + O(#triples · M) instead of
O(#triples · n²) for tensor quadrature. Truncation after M terms is bounded per triple by
|c|^{M+1} √(T_f T_g), T_f = E[f(u)²] − Σ_{k≤M} a_k² (Parseval/Cauchy–Schwarz); triples whose
bound exceeds ``tol`` (|c| near 1, very large variances) are returned in a mask so the caller
can fall back to exact 2-D quadrature. Nothing is silently truncated.
"""
from __future__ import annotations

import numpy as np

_SQ2PI = np.sqrt(2.0 * np.pi)
XMAX = 13.0          # |ψ_k e^{−x²/4}| < 1e-17 beyond


def _grid(M: int, smax: float):
    h = min(0.05, 0.2 / max(1.0, smax), 1.0 / np.sqrt(M + 1.0))
    n = int(np.ceil(XMAX / h))
    return np.arange(-n, n + 1) * h, h


def psi_table(x, M: int) -> np.ndarray:
    """ψ_k(x) = He_k(x) e^{−x²/4}/√k! for k = 0..M (rows), by the stable recursion."""
    T = np.empty((M + 1, x.size))
    T[0] = np.exp(-0.25 * x * x)
    if M >= 1:
        T[1] = x * T[0]
    for k in range(1, M):
        T[k + 1] = (x * T[k] - np.sqrt(k) * T[k - 1]) / np.sqrt(k + 1.0)
    return T


def coefficients(f, s, M: int = 120):
    """``(a, m2)``: Mehler coefficients a (len(s), M+1) of f(s·) and second moments E[f(s x)²]."""
    s = np.asarray(s, dtype=np.float64)
    x, h = _grid(M, float(np.max(s)) if s.size else 1.0)
    w = np.exp(-0.25 * x * x) * (h / _SQ2PI)
    F = f(s[:, None] * x[None, :])
    a = (F * w) @ psi_table(x, M).T
    m2 = (F * F) @ (np.exp(-0.5 * x * x) * (h / _SQ2PI))
    return a, m2


def series(f, g, k11, k12, k22, M: int = 120, tol: float = 1e-11, chunk: int = 65536):
    """E[f(u)g(v)] on flat arrays by the Mehler series. Returns ``(values, ok)`` where ``ok`` is
    False for triples whose certified truncation bound exceeds ``tol · max(1, |value|)``."""
    s1 = np.sqrt(np.maximum(k11, 0.0))
    s2 = np.sqrt(np.maximum(k22, 0.0))
    u1, i1 = np.unique(s1, return_inverse=True)
    u2, i2 = np.unique(s2, return_inverse=True)
    a, ma = coefficients(f, u1, M)
    b, mb = coefficients(g, u2, M)
    ta = np.maximum(ma - np.einsum("ik,ik->i", a, a), 0.0)
    tb = np.maximum(mb - np.einsum("ik,ik->i", b, b), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = k12 / (s1 * s2)
    c = np.where(np.isfinite(c), np.clip(c, -1.0, 1.0), 0.0)
    out = np.empty(k11.shape)
    aT, bT = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    for lo in range(0, k11.size, chunk):
        sl = slice(lo, lo + chunk)
        j1, j2, cc = i1[sl], i2[sl], c[sl]
        acc = aT[M][j1] * bT[M][j2]
        for k in range(M - 1, -1, -1):
            acc *= cc
            acc += aT[k][j1] * bT[k][j2]
        out[sl] = acc
    bound = np.abs(c) ** (M + 1) * np.sqrt(ta[i1] * tb[i2]) + 1e-15 * np.sqrt(ma[i1] * mb[i2])
    ok = bound <= tol * np.maximum(1.0, np.abs(out))
    return out, ok


def gram_series(f, g, K, M: int = 120, tol: float = 1e-11, upper: bool = False, block: int = 16384):
    """P×P matrix E_{N(0,K)}[f(u_α) g(u_β)] by a Horner sweep on whole matrices (no gathers).
    Returns ``(E, ok)``; ``ok[α, β]`` False where the certified bound exceeds ``tol`` (the diagonal,
    |c| = 1, is always flagged so the caller computes it by 1-D quadrature).

    The sweep runs over row blocks of about ``block`` entries so that the M+1 Horner steps stay in
    cache; with ``upper=True`` only the upper triangle (β ≥ α) is computed — the lower triangle of
    ``E`` is then left at zero and ``ok`` False there. Each entry sees exactly the same floating-point
    operations as the unblocked sweep."""
    K = np.asarray(K, dtype=np.float64)
    P = K.shape[0]
    s = np.sqrt(np.maximum(np.diag(K), 0.0))
    a, ma = coefficients(f, s, M)
    b, mb = (a, ma) if g is f else coefficients(g, s, M)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = K / np.outer(s, s)
    rho = np.where(np.isfinite(rho), np.clip(rho, -1.0, 1.0), 0.0)
    aT, bT = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    E = np.zeros((P, P))
    r0 = 0
    while r0 < P:
        c0 = r0 if upper else 0
        r1 = min(P, r0 + max(1, block // max(1, P - c0)))
        R = rho[r0:r1, c0:]
        Eb = np.multiply.outer(aT[M, r0:r1], bT[M, c0:])
        T = np.empty_like(Eb)
        for k in range(M - 1, -1, -1):
            Eb *= R
            np.multiply.outer(aT[k, r0:r1], bT[k, c0:], out=T)
            Eb += T
        E[r0:r1, c0:] = Eb
        r0 = r1
    ta = np.maximum(ma - np.einsum("ik,ik->i", a, a), 0.0)
    tb = np.maximum(mb - np.einsum("ik,ik->i", b, b), 0.0)
    bound = np.abs(rho) ** (M + 1) * np.sqrt(np.outer(ta, tb)) + 1e-15 * np.sqrt(np.outer(ma, mb))
    ok = bound <= tol * np.maximum(1.0, np.abs(E))
    np.fill_diagonal(ok, False)
    if upper:
        ok[np.tril_indices(P, -1)] = False
    return E, ok
