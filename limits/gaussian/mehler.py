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

Unrelated triples (every variance different) use :func:`series_generic`: a_k(s) is a smooth function
of s, so it is interpolated by a Chebyshev polynomial in s over the batch's range (degree chosen so the
error measured at check points, ×10, is below the target) and evaluated for a whole chunk by one
matrix product; the interpolation error enters the per-triple certificate.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

_SQ2PI = np.sqrt(2.0 * np.pi)
XMAX = 13.0          # |ψ_k e^{−x²/4}| < 1e-17 beyond


S_MAX = 200.0        # above this standard deviation the coefficient grid (h = 0.2/s) gets too large: the
                     # series declines (ok = False) and the caller's natural-variable quadrature takes over
FLOOR = 1e-3         # certificates: bound ≤ tol · max(|value|, floor · √(E f² E g²)) (see series)


def _allowed(tol, value, cs_scale, floor=FLOOR):
    """Certificate threshold: ``tol`` relative to max(|value|, floor·√(E f² E g²)) — √(E f² E g²) is the
    Cauchy–Schwarz bound of |E[fg]|, the scale of f and g themselves (the old threshold tol·max(1, |value|)
    let functions of small scale, e.g. φ' at large variance, through with a large *relative* error)."""
    return tol * np.maximum(np.abs(value), floor * cs_scale)


def _grid(M: int, smax: float):
    h = min(0.05, 0.2 / max(1.0, smax), 1.0 / np.sqrt(M + 1.0))
    n = int(np.ceil(XMAX / h))
    return np.arange(-n, n + 1) * h, h, n


def psi_table(x, M: int) -> np.ndarray:
    """ψ_k(x) = He_k(x) e^{−x²/4}/√k! for k = 0..M (rows), by the stable recursion."""
    x = np.asarray(x, dtype=np.float64)
    T = np.empty((M + 1, x.size))
    T[0] = np.exp(-0.25 * x * x)
    if M >= 1:
        T[1] = x * T[0]
    for k in range(1, M):
        T[k + 1] = (x * T[k] - np.sqrt(k) * T[k - 1]) / np.sqrt(k + 1.0)
    return T


@lru_cache(maxsize=16)
def _psi_on_grid(n: int, h: float, M: int) -> np.ndarray:
    """psi_table on the grid ``np.arange(-n, n + 1) * h`` of :func:`_grid` (cached, read-only)."""
    T = psi_table(np.arange(-n, n + 1) * h, M)
    T.flags.writeable = False
    return T


def coefficients(f, s, M: int = 120):
    """``(a, m2)``: Mehler coefficients a (len(s), M+1) of f(s·) and second moments E[f(s x)²]."""
    s = np.asarray(s, dtype=np.float64)
    x, h, n = _grid(M, float(np.max(s)) if s.size else 1.0)
    w = np.exp(-0.25 * x * x) * (h / _SQ2PI)
    F = f(s[:, None] * x[None, :])
    a = (F * w) @ _psi_on_grid(n, h, M).T
    m2 = (F * F) @ (np.exp(-0.5 * x * x) * (h / _SQ2PI))
    return a, m2


def series(f, g, k11, k12, k22, M: int = 120, tol: float = 1e-11, chunk: int = 65536):
    """E[f(u)g(v)] on flat arrays by the Mehler series. Returns ``(values, ok)`` where ``ok`` is
    False for triples whose certified truncation bound exceeds ``tol · max(|value|, 1e-3 √(E f² E g²))``
    (relative to the value; the floor, at the Cauchy–Schwarz scale, only matters for values that nearly
    vanish — :func:`series_generic` uses floor 1, its interpolation error being ~0.1 tol √(E f² E g²)),
    and for every triple when a standard deviation exceeds ``S_MAX``."""
    s1 = np.sqrt(np.maximum(k11, 0.0))
    s2 = np.sqrt(np.maximum(k22, 0.0))
    if k11.size and max(float(s1.max()), float(s2.max())) > S_MAX:
        return np.zeros(k11.shape), np.zeros(k11.shape, dtype=bool)
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
    ok = bound <= _allowed(tol, out, np.sqrt(ma[i1] * mb[i2]))
    return out, ok


def gram_series(f, g, K, M: int = 120, tol: float = 1e-11, upper: bool = False, block: int = 16384):
    """P×P matrix E_{N(0,K)}[f(u_α) g(u_β)] by a Horner sweep on whole matrices (no gathers).
    Returns ``(E, ok)``; ``ok[α, β]`` False where the certified bound exceeds ``tol`` relative to
    |E| (floor: see :func:`series`) or a standard deviation exceeds ``S_MAX`` (the diagonal,
    |c| = 1, is always flagged so the caller computes it by 1-D quadrature).

    The sweep runs over row blocks of about ``block`` entries so that the M+1 Horner steps stay in
    cache; with ``upper=True`` only the upper triangle (β ≥ α) is computed — the lower triangle of
    ``E`` is then left at zero and ``ok`` False there. Each entry sees exactly the same floating-point
    operations as the unblocked sweep."""
    K = np.asarray(K, dtype=np.float64)
    P = K.shape[0]
    s = np.sqrt(np.maximum(np.diag(K), 0.0))
    if P and float(s.max()) > S_MAX:
        return np.zeros((P, P)), np.zeros((P, P), dtype=bool)
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
    ok = bound <= _allowed(tol, E, np.sqrt(np.outer(ma, mb)))
    np.fill_diagonal(ok, False)
    if upper:
        ok[np.tril_indices(P, -1)] = False
    return E, ok


# ------------------------------------------------------------------ generic (unshared) variances
_M_LADDER = (16, 24, 32, 48, 64, 96, 128, 160, 200, 256, 320, 400)
_D_LADDER = (8, 16, 24, 32, 48, 64, 96, 128)


def _cheb_T(t, D: int) -> np.ndarray:
    """Chebyshev polynomials T_0..T_D at t ∈ [−1, 1] as a (D+1, len(t)) array."""
    T = np.empty((D + 1, t.size))
    T[0] = 1.0
    if D >= 1:
        T[1] = t
    for j in range(2, D + 1):
        np.multiply(2.0 * t, T[j - 1], out=T[j])
        T[j] -= T[j - 2]
    return T


def coefficient_interpolant(f, lo: float, hi: float, M: int, tol: float):
    """Chebyshev interpolant in s ∈ [lo, hi] of the Mehler coefficients a_k(s), k ≤ M, and of
    m2(s) = E[f(s x)²] (last column). Returns ``(C, D, err_a, err_m)`` with C of shape (D+1, M+2),
    or None when no degree up to 128 reaches ``tol``. The interpolation error is measured a
    posteriori against directly computed coefficients at D+2 check points (including both ends):
    err_a = max ‖Δa‖₂, err_m = max |Δm2|, each multiplied by a safety factor 10."""
    if hi > S_MAX:
        return None
    for D in ((0,) if hi <= lo else _D_LADDER):
        th = np.pi * (2.0 * np.arange(D + 1) + 1.0) / (2.0 * (D + 1))
        tn = np.cos(th)
        tc = np.cos(np.pi * np.arange(D + 2) / (D + 1))
        sn = lo + (hi - lo) * 0.5 * (tn + 1.0)
        sc = lo + (hi - lo) * 0.5 * (tc + 1.0)
        a, m2 = coefficients(f, np.concatenate([sn, sc]), M)
        vals = np.concatenate([a, m2[:, None]], axis=1)
        Tn = _cheb_T(tn, D)                                    # (D+1, D+1): T_j at node i = Tn[j, i]
        C = np.linalg.solve(Tn.T, vals[: D + 1])               # (D+1, M+2)
        if D == 0:
            return C, 0, 0.0, 0.0
        R = _cheb_T(tc, D).T @ C - vals[D + 1:]
        err_a = 10.0 * float(np.sqrt(np.max(np.sum(R[:, :-1] ** 2, axis=1))))
        err_m = 10.0 * float(np.max(np.abs(R[:, -1])))
        scale = np.sqrt(max(float(np.max(vals[:, -1])), 1e-300))
        if err_a * scale <= tol and err_m <= tol:
            return C, D, err_a, err_m
    return None


def series_generic(f, g, k11, k12, k22, tol: float = 1e-11, chunk: int = 4096):
    """E[f(u)g(v)] on flat arrays of *unrelated* triples by the Mehler series, with the coefficients
    a_k(s₁), b_k(s₂) evaluated from Chebyshev interpolants in s over the batch's range (one small
    matrix product per chunk instead of a quadrature per triple). The number of terms M is chosen per
    triple from |c| and the tail energies; returns ``(values, ok)`` like :func:`series`, where the
    certified bound now also includes the measured interpolation error:

        |c|^{M+1} √(T_f T_g) + ε_a √m_g + ε_b √m_f + ε_a ε_b + 1e-15 √(m_f m_g),
        T_f = m_f − Σ_{k≤M} a_k² + 2 ε_a √m_f + ε_m   (tail energy, inflated by the interpolation error)."""
    k11, k12, k22 = (np.asarray(x, dtype=np.float64) for x in (k11, k12, k22))
    n = k11.size
    out = np.zeros(n)
    ok = np.zeros(n, dtype=bool)
    if n == 0:
        return out, ok
    Mmax = _M_LADDER[-1]
    s1 = np.sqrt(np.maximum(k11, 0.0))
    s2 = np.sqrt(np.maximum(k22, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = k12 / (s1 * s2)
    c = np.where(np.isfinite(c), np.clip(c, -1.0, 1.0), 0.0)
    r1 = (float(s1.min()), float(s1.max()))
    r2 = (float(s2.min()), float(s2.max()))
    if g is f:                                    # one interpolant on the union of both ranges
        r1 = r2 = (min(r1[0], r2[0]), max(r1[1], r2[1]))
    itf = coefficient_interpolant(f, r1[0], r1[1], Mmax, 0.1 * tol)
    if itf is None:
        return out, ok
    itg = itf if g is f else coefficient_interpolant(g, r2[0], r2[1], Mmax, 0.1 * tol)
    if itg is None:
        return out, ok
    (Ca, Da, ea, ema), (Cb, Db, eb, emb) = itf, itg

    def tvar(s, lo, hi):
        return np.zeros_like(s) if hi <= lo else np.clip((s - lo) / (hi - lo) * 2.0 - 1.0, -1.0, 1.0)

    t1 = tvar(s1, *r1)
    t2 = tvar(s2, *r2)
    # per-triple number of terms: tails at the Chebyshev nodes bound the tails on the range (choice only;
    # the certificate below is computed per triple)
    ladder = np.asarray(_M_LADDER)
    nodes_a = _cheb_T(np.cos(np.linspace(0, np.pi, 33)), Da).T @ Ca
    nodes_b = _cheb_T(np.cos(np.linspace(0, np.pi, 33)), Db).T @ Cb
    ta_max = np.max(nodes_a[:, -1:] - np.cumsum(nodes_a[:, :-1] ** 2, axis=1), axis=0)[ladder]
    tb_max = np.max(nodes_b[:, -1:] - np.cumsum(nodes_b[:, :-1] ** 2, axis=1), axis=0)[ladder]
    tail = np.sqrt(np.maximum(ta_max, 1e-32) * np.maximum(tb_max, 1e-32))
    ac = np.abs(c)
    with np.errstate(divide="ignore"):
        la = np.log(np.maximum(ac, 1e-300))
    need = la[:, None] * (ladder[None, :] + 1.0) + np.log(tail)[None, :] <= np.log(1e-2 * tol)
    mi = np.where(need.any(axis=1), np.argmax(need, axis=1), len(ladder) - 1)
    order = np.argsort(mi.astype(np.int8), kind="stable")      # radix sort
    counts = np.bincount(mi, minlength=len(ladder))
    starts = np.concatenate([[0], np.cumsum(counts)])
    for j in np.nonzero(counts)[0]:
        M = int(ladder[j])
        idx_all = order[starts[j]:starts[j + 1]]
        for lo in range(0, idx_all.size, chunk):
            idx = idx_all[lo:lo + chunk]
            T1 = _cheb_T(t1[idx], Da)
            T2 = _cheb_T(t2[idx], Db)
            AT = Ca[:, : M + 1].T @ T1                              # (M+1, m)
            BT = Cb[:, : M + 1].T @ T2
            ma = Ca[:, -1] @ T1
            mb = Cb[:, -1] @ T2
            sa = np.einsum("km,km->m", AT, AT)
            sb = np.einsum("km,km->m", BT, BT)
            np.multiply(AT, BT, out=AT)
            cc = c[idx]
            acc = AT[M].copy()
            for k in range(M - 1, -1, -1):
                acc *= cc
                acc += AT[k]
            out[idx] = acc
            rma, rmb = np.sqrt(np.maximum(ma, 0.0)), np.sqrt(np.maximum(mb, 0.0))
            ta = np.maximum(ma - sa, 0.0) + 2.0 * ea * rma + ema
            tb = np.maximum(mb - sb, 0.0) + 2.0 * eb * rmb + emb
            bound = (ac[idx] ** (M + 1) * np.sqrt(ta * tb) + ea * rmb + eb * rma + ea * eb
                     + 1e-15 * rma * rmb)
            ok[idx] = bound <= _allowed(tol, acc, rma * rmb, floor=1.0)   # interpolation error ~0.1 tol
    return out, ok
