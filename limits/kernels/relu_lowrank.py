"""relu / step moments in up to four Gaussian variables of any rank: exact for singular covariances, continuous
through nearly singular ones (docs/theory/finite_width.rst §9).

A singular Gaussian is a lower-dimensional one: with S = V Λ Vᵀ (eigenvalues in decreasing order) and
A = V_m Λ_m^{1/2} over the m eigenvalues above ``RANK_TOL``·λ_max, x = A z with z ~ N(0, I_m) — dropping an
eigenvalue λ changes the moments by O(√(λ/λ_max)) (a step's kink smoothed at scale √λ), 3e-8 at the
threshold — the same as the rounding of the covariance itself (eigenvalues ±1e-16 λ_max) costs. Then, for products of x_v^{p_v} 1{x_v > 0}
(p = 0, 1, 2, or the factor 1), every factor is a power of a linear form a_vᵀz on one side of a hyperplane
through the origin:

* m = 1: a half-line each way, Σ_± Π_v [±a_v > 0] |a_v|^{p_v} · E[|z|^Σp; z > 0] (closed form);
* m = 2: polar coordinates; the integrand is ρ^Σp times a trigonometric polynomial on every arc between the
  lines a_vᵀz = 0 — Gauss–Legendre per arc is exact;
* m = 3: condition on (z₁, z₂) (the two largest directions): given them, each factor is (c_v + d_v t)^{p_v} on a
  half-line of t = z₃ ~ N(0, 1), so the inner expectation is a polynomial against the normal density on an
  interval — E[tᵏ; l < t < u] in closed form. As a function of (z₁, z₂) it is smooth between the lines where an
  interval end changes (c_v d_w = c_w d_v) or a factor's interval end crosses zero (c_v = 0), which are cut into
  the polar rule's arcs; where d_v is small against the other components (a nearly singular S) the inner moment
  has a boundary layer of angular width ≈ |d_v|/|(a_v1, a_v2)| along c_v = 0, and the arcs are refined
  geometrically towards those cuts down to a tenth of it — so there is no accuracy cliff as λ₃ → 0.

Four variables of full rank take the conditional rule of :mod:`limits.kernels.relu_fourpoint`, whose inner pair
is a bivariate closed form; below :data:`BAND` (λ₄/λ_max) its conditional covariance is too close to singular for
that rule, and the moments are interpolated in σ = √λ₄ between the exact rank-3 value and that rule at
σ² = t, 4t, 9t, t = BAND·λ_max (:func:`_band`) — continuous at the band's edge.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from .polar import leggauss

RANK_TOL = 1e-15
BAND = 1e-6
RADIAL, ANGULAR = ("panels", 16), 24
_SQ2PI = math.sqrt(2.0 * math.pi)


def factor(S):
    """(A, λ) with S ≈ A Aᵀ: A = V_m Λ_m^{1/2} (r × m), columns in decreasing order of λ, m = the number of
    eigenvalues above RANK_TOL·λ_max; λ all r eigenvalues (decreasing)."""
    S = np.asarray(S, dtype=np.float64)
    lam, V = np.linalg.eigh(0.5 * (S + S.T))
    lam, V = lam[::-1], V[:, ::-1]
    top = max(float(lam[0]), 0.0) if lam.size else 0.0
    m = int(np.sum(lam > RANK_TOL * top)) if top > 0 else 0
    return V[:, :m] * np.sqrt(lam[:m]), lam


def _half_moment(k):
    """E[z^k; z > 0] for z ~ N(0, 1)."""
    return 2.0 ** (k / 2.0 - 1.0) * math.gamma((k + 1) / 2.0) / math.sqrt(math.pi)


def _rank0(powers):
    return 1.0 if all(p is None for p in powers) else 0.0


def _rank1(a, powers):
    total = 0.0
    for s in (1.0, -1.0):
        coef, deg = 1.0, 0
        for av, p in zip(a, powers):
            if p is None:
                continue
            if s * av <= 0:
                coef = 0.0
                break
            coef *= abs(av) ** p
            deg += p
        if coef:
            total += coef * _half_moment(deg)
    return total


# ------------------------------------------------------------------ polar nodes with cuts
def _line_angle(alpha, beta):
    """Angle in [0, π) of the line {α z₁ + β z₂ = 0}, or None when (α, β) = 0."""
    if alpha == 0.0 and beta == 0.0:
        return None
    return math.atan2(-alpha, beta) % math.pi


def polar_nodes(cuts, layers=None, radial=None, angular=None):
    """Nodes (2, Q) and weights (Q,) for z ~ N(0, I₂) in polar coordinates, Gauss–Legendre in the radius
    (against ρe^{−ρ²/2} on [0, 12]) and per arc between the cut angles (each cut a line: ϑ and ϑ + π).
    ``layers``: {cut angle: angular width} — arcs are refined geometrically towards that cut down to half the
    width (a boundary layer of the integrand along it)."""
    cuts = sorted({round(c % math.pi, 15) for c in cuts})
    layers = layers or {}
    radial = RADIAL if radial is None else radial
    angular = ANGULAR if angular is None else angular
    ends = sorted(set([0.0, 2 * math.pi] + cuts + [c + math.pi for c in cuts]))
    width = {}
    for c, w in layers.items():
        for e in (c % math.pi, c % math.pi + math.pi):
            key = min(ends, key=lambda x: abs(x - e))
            width[key] = min(width.get(key, math.inf), w)
    if 0.0 in width or 2 * math.pi in width:
        w = min(width.get(0.0, math.inf), width.get(2 * math.pi, math.inf))
        width[0.0] = width[2 * math.pi] = w
    xa, wa = leggauss(angular)
    th, wt = [], []
    for lo, hi in zip(ends[:-1], ends[1:]):
        if hi - lo <= 1e-15:
            continue
        for a, b in _graded(lo, hi, width.get(lo, math.inf), width.get(hi, math.inf)):
            th.append(a + (xa + 1) * (b - a) / 2)
            wt.append(wa * (b - a) / 2)
    th, wt = np.concatenate(th), np.concatenate(wt) / (2 * math.pi)
    rho, wr = _radial(radial, min(layers.values()) if layers else None)
    e = np.stack([np.cos(th), np.sin(th)])
    pts = e[:, :, None] * rho[None, None, :]
    return pts.reshape(2, -1), (wt[:, None] * wr[None, :]).ravel()


RADIAL_PANELS = (0.0, 0.25, 0.75, 1.5, 2.5, 4.0, 6.0, 8.5, 12.0)


def _radial(n, layer=None):
    """Radial nodes and weights against ρe^{−ρ²/2} on [0, 12]: one Gauss–Legendre rule of ``n`` nodes when n is
    an int (exact for ρ^p, the rank-2 rule); ``n = ("panels", k)``: k nodes on each of :data:`RADIAL_PANELS`
    (the rank-3 inner moments vary on the scale of |d_v|/|(a_v1, a_v2)| near the origin), and — ``layer``, the
    thinnest boundary layer, when below 0.05 — geometric panels (ratio 2) from 0.25 down to it."""
    if isinstance(n, tuple):
        k = n[1]
        x, w = leggauss(k)
        edges = list(RADIAL_PANELS)
        if layer is not None and layer < 0.05:
            lev = int(min(60, math.ceil(math.log2(0.25 / max(layer, 1e-300)))))
            edges = [0.0] + [0.25 * 2.0 ** (-j) for j in range(lev, 0, -1)] + edges[1:]
        rho, wr = [], []
        for a, b in zip(edges[:-1], edges[1:]):
            rho.append(a + (x + 1) * (b - a) / 2)
            wr.append(w * (b - a) / 2)
        rho, wr = np.concatenate(rho), np.concatenate(wr)
    else:
        x, w = leggauss(n)
        rho, wr = (x + 1.0) * 6.0, w * 6.0
    return rho, wr * rho * np.exp(-0.5 * rho * rho)


def _graded(lo, hi, wlo, whi):
    """Panels of [lo, hi]: halves graded geometrically (ratio 2) towards an end with a boundary layer of width w,
    the smallest panel ≈ w/2 (the integrand is analytic across the layer: Gauss–Legendre resolves it on panels of
    its width)."""
    mid = 0.5 * (lo + hi)
    half = mid - lo
    out = []
    for end, w, sign in ((lo, wlo, 1.0), (hi, whi, -1.0)):
        levels = 0 if not math.isfinite(w) or w <= 0 else int(min(60, max(0, math.ceil(math.log2(2 * half / w)))))
        pts = [end + sign * half * 2.0 ** (-k) for k in range(levels, -1, -1)]
        pts = [end] + pts
        segs = [(min(a, b), max(a, b)) for a, b in zip(pts[:-1], pts[1:]) if a != b]
        out.extend(segs)
    return out


# ------------------------------------------------------------------ exact inner moment in one variable
def _interval_moments(l, u, K):
    """M_k = E[tᵏ; l < t < u] for t ~ N(0, 1), k = 0..K (l, u arrays, ±inf allowed; 0 where l ≥ u)."""
    l = np.asarray(l, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    empty = l >= u
    l = np.where(empty, 0.0, l)
    u = np.where(empty, 0.0, u)
    pos = l > 0
    M0 = np.where(pos, ndtr(-l) - ndtr(-u), ndtr(u) - ndtr(l))
    with np.errstate(over="ignore", invalid="ignore"):
        fl = np.where(np.isfinite(l), np.exp(-0.5 * l * l) / _SQ2PI, 0.0)
        fu = np.where(np.isfinite(u), np.exp(-0.5 * u * u) / _SQ2PI, 0.0)
        lf = np.where(np.isfinite(l), l, 0.0)
        uf = np.where(np.isfinite(u), u, 0.0)
    M = [M0, fl - fu]
    for k in range(2, K + 1):
        M.append((k - 1) * M[k - 2] + lf ** (k - 1) * fl - uf ** (k - 1) * fu)
    return [np.where(empty, 0.0, Mk) for Mk in M[:K + 1]]


def inner(c, d, powers):
    """E_t[Π_v (c_v + d_v t)^{p_v} 1{c_v + d_v t > 0}] for t ~ N(0, 1): c (r, N) per node, d (r,) scalars;
    p_v None drops the factor. Closed form: the interval where every factor is positive, the polynomial's
    coefficients, and :func:`_interval_moments`."""
    N = c.shape[1]
    lo = np.full(N, -np.inf)
    hi = np.full(N, np.inf)
    const = np.ones(N)
    coef = [np.ones(N)]                                  # coefficients of the polynomial in t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for v, p in enumerate(powers):
            if p is None:
                continue
            dv = float(d[v])
            if dv == 0.0:
                const = const * np.where(c[v] > 0, c[v] ** p, 0.0)
                continue
            b = -c[v] / dv
            if dv > 0:
                lo = np.maximum(lo, b)
            else:
                hi = np.minimum(hi, b)
            for _ in range(p):                           # multiply by (c_v + d_v t)
                new = [c[v] * coef[0]]
                for k in range(1, len(coef)):
                    new.append(c[v] * coef[k] + dv * coef[k - 1])
                new.append(dv * coef[-1])
                coef = new
    M = _interval_moments(lo, hi, len(coef) - 1)
    total = np.zeros(N)
    for k, ck in enumerate(coef):
        total += ck * M[k]
    return const * total


# ------------------------------------------------------------------ the rank-2 and rank-3 rules
def _rank2(A, powers_list):
    cuts = [c for c in (_line_angle(A[v, 0], A[v, 1]) for v in range(A.shape[0])) if c is not None]
    z, W = polar_nodes(cuts, radial=32, angular=20)
    x = A @ z
    out = []
    for powers in powers_list:
        g = np.ones(z.shape[1])
        for v, p in enumerate(powers):
            if p is not None:
                g = g * np.where(x[v] > 0, x[v] ** p, 0.0)
        out.append(float(g @ W))
    return out


FLAT = 1e-10       # |d_v| below this fraction of |(a_v1, a_v2)|: the factor is taken as independent of t (its kink
                   # smoothed at that scale moves a moment by O(1e-10) relative — no boundary layer to resolve)


def _flatten(A):
    """A with d_v = A[v, 2] set to 0 where |d_v| < FLAT·|(a_v1, a_v2)|."""
    A = A.copy()
    nrm = np.hypot(A[:, 0], A[:, 1])
    A[np.abs(A[:, 2]) < FLAT * nrm, 2] = 0.0
    return A


def _rank3_nodes(A):
    """Outer nodes and weights for the rank-3 rule: cuts where a factor's interval end crosses zero (c_v = 0) or
    two ends meet (c_v d_w = c_w d_v), boundary layers along c_v = 0 of width |d_v|/|(a_v1, a_v2)|."""
    r = A.shape[0]
    cuts, layers = [], {}
    for v in range(r):
        c = _line_angle(A[v, 0], A[v, 1])
        if c is None:
            continue
        cuts.append(c)
        nrm = math.hypot(A[v, 0], A[v, 1])
        w = abs(A[v, 2]) / nrm
        if 0.0 < w < 0.1:
            layers[c] = min(layers.get(c, math.inf), w)
    for v in range(r):
        for w_ in range(v + 1, r):
            c = _line_angle(A[v, 0] * A[w_, 2] - A[w_, 0] * A[v, 2], A[v, 1] * A[w_, 2] - A[w_, 1] * A[v, 2])
            if c is not None:
                cuts.append(c)
    return polar_nodes(cuts, layers)


def _rank3(A, powers_list):
    A = _flatten(A)
    z, W = _rank3_nodes(A)
    c = A[:, :2] @ z
    d = A[:, 2]
    return [float(inner(c, d, powers) @ W) for powers in powers_list]


def expect_many(S, powers_list):
    """E[Π_v x_v^{p_v} 1{x_v > 0}] (p_v = None: the factor 1) for x ~ N(0, S), S r×r PSD with r ≤ 4, per list
    of powers (module docstring). Full-rank covariances above :data:`BAND` (λ_min/λ_max): the conditional rule
    :func:`limits.kernels.relu_fourpoint.expect_many` (cheaper; the rank rules cost ~0.2 CPU-s per covariance); full-rank
    four-variable ones below it :func:`_band`."""
    S = np.asarray(S, dtype=np.float64)
    A, lam = factor(S)
    m = A.shape[1]
    if m == 0:
        return [_rank0(p) for p in powers_list]
    if m == 1:
        return [_rank1(A[:, 0], p) for p in powers_list]
    if m == 2:
        return _rank2(A, powers_list)
    if m == 3 and (S.shape[0] == 4 or lam[2] <= BAND * lam[0]):
        return _rank3(A, powers_list)
    if lam[m - 1] > BAND * lam[0]:
        from .relu_fourpoint import expect_many as conditional

        out = conditional(S, powers_list)
        if out is not None:
            return out
    return _band(S, lam, powers_list)


def _band(S, lam, powers_list):
    """Four variables with λ₄ ≤ BAND·λ_max (a nearly singular covariance, where the conditional rule's inner
    covariance is nearly singular too). F(σ) = E under S₃ + σ² v₄v₄ᵀ (S₃ the rank-3 part, v₄ the last
    eigenvector) is a smooth function of σ = √λ₄ with odd powers of σ (a step's kink smoothed at scale σ moves
    the moment by O(σ)): the cubic in σ through the exact rank-3 value F(0) (:func:`_rank3`) and the conditional
    rule at σ² = t, 4t, 9t (t = BAND·λ_max, where that rule is accurate) — equal to the conditional rule at the
    band's edge, so the moments are continuous across it; the neglected quartic term is O((σ/√λ_max)·BAND^{3/2})."""
    from .relu_fourpoint import expect_many as conditional

    S = np.asarray(S, dtype=np.float64)
    lam_, V = np.linalg.eigh(0.5 * (S + S.T))
    lam_, V = lam_[::-1], V[:, ::-1]
    A3 = V[:, :3] * np.sqrt(np.maximum(lam_[:3], 0.0))
    F0 = np.array(_rank3(A3, powers_list))
    l4 = max(float(lam_[3]), 0.0)
    if l4 <= RANK_TOL * lam_[0]:
        return [float(v) for v in F0]
    t = BAND * float(lam_[0])
    v4 = V[:, 3]
    S3 = A3 @ A3.T
    nodes = np.array([0.0, 1.0, 2.0, 3.0])                  # σ/√t
    vals = [F0]
    for k in nodes[1:]:
        out = conditional(S3 + k * k * t * np.outer(v4, v4), powers_list)
        if out is None:
            raise RuntimeError("relu_lowrank: the conditional rule failed above the nearly singular band")
        vals.append(np.array(out))
    x = np.sqrt(l4 / t)
    weights = []                                            # Lagrange basis at x
    for i, xi in enumerate(nodes):
        w = 1.0
        for j, xj in enumerate(nodes):
            if j != i:
                w *= (x - xj) / (xi - xj)
        weights.append(w)
    return [float(v) for v in sum(w * v for w, v in zip(weights, vals))]
