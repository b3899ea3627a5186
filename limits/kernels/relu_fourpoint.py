"""Gaussian expectations of products of relu, step and 1 in three or four variables, without a quadrature across a kink.

For x ~ N(0, S) (r = 3 or 4 distinct variables) and per variable a function g_v(x) = x^p 1{x > 0} (p = 0, 1, 2) or 1:
condition on two *outer* variables (the one with p = 2 among them), E[Π g] = E_outer[g_a g_b E[g_c g_d | x_a, x_b]].
Given the outer pair, the inner variables are Gaussian with means linear in it and a fixed covariance, and their
moments are closed forms (standardised means h, k, correlation ρ, Λ = P(U > 0, V > 0) by Owen's T):

    E[1{U > 0}] = Φ(h),   E[relu U] = σ_u (hΦ(h) + φ(h)),
    E[1{U > 0} 1{V > 0}] = Λ,   E[relu(U) 1{V > 0}] = σ_u (hΛ + E[X; A]),
    E[relu U relu V] = σ_uσ_v (hkΛ + h E[Y; A] + k E[X; A] + E[XY; A])

(truncated bivariate normal moments over A = {X > −h, Y > −k}). The outer integrand is smooth inside each sector
between the zero lines of x_a and x_b, so the polar rule split at those lines (:func:`fourpoint.polar_rule` with more
nodes) converges spectrally — 1e-14 at 32 × 16 nodes per sector — where tensor Gauss–Hermite across the kinks was
off by up to 11 % (tests/kernels/test_relu_fourpoint.py).
"""
from __future__ import annotations

import numpy as np
from scipy.special import ndtr, owens_t

from .polar import polar_rule

RADIAL, ANGULAR = 40, 20          # the outer polar rule per sector: 1e-14 at 32 × 16 on smooth non-polynomial integrands


def _pdf(t):
    return np.exp(-0.5 * t * t) / np.sqrt(2.0 * np.pi)


def orthant(h, k, r):
    """P(X < h, Y < k) for a standard bivariate normal with correlation r, abs(r) < 1, by Owen's T function (its
    arguments at h = 0 or k = 0 as their limits along h = k; scipy's bivariate normal CDF to 2e-16 on a grid with
    zeros, tests/kernels/test_relu_fourpoint.py)."""
    h, k = np.broadcast_arrays(np.asarray(h, dtype=np.float64), np.asarray(k, dtype=np.float64))
    s = np.sqrt(1.0 - r * r)

    def arg(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (y - r * x) / (x * s)
            return np.where(x == 0, np.where(y == 0, (1.0 - r) / s, np.sign(y) * np.inf), out)

    beta = np.where((h * k > 0) | ((h * k == 0) & (h + k >= 0)), 0.0, 0.5)
    return 0.5 * (ndtr(h) + ndtr(k)) - owens_t(h, arg(h, k)) - owens_t(k, arg(k, h)) - beta


def moment1(mu, sd, p):
    """E[U^p 1{U > 0}] (p = 0, 1, 2) or 1 (p = None) for U ~ N(mu, sd²)."""
    if p is None:
        return np.ones_like(mu)
    h = mu / sd
    if p == 2:
        return sd * sd * ((h * h + 1) * ndtr(h) + h * _pdf(h))
    return ndtr(h) if p == 0 else sd * (h * ndtr(h) + _pdf(h))


def moment2(mu, mv, su, sv, r, p, q):
    """E[U^p 1{U > 0} V^q 1{V > 0}] for p, q ∈ {0, 1}, (U, V) with means mu, mv, SDs su, sv, correlation r."""
    h, k = mu / su, mv / sv
    s = np.sqrt(1.0 - r * r)
    lam = orthant(h, k, r)
    if p == 0 and q == 0:
        return lam
    qb, qa = ndtr((k - r * h) / s), ndtr((h - r * k) / s)      # Q((b − r a)/s), Q((a − r b)/s) with a, b = −h, −k
    ex = _pdf(h) * qb + r * _pdf(k) * qa                        # E[X; A]
    ey = _pdf(k) * qa + r * _pdf(h) * qb                        # E[Y; A]
    if q == 0:
        return su * (h * lam + ex)
    if p == 0:
        return sv * (k * lam + ey)
    exy = r * lam - r * h * _pdf(h) * qb - r * k * _pdf(k) * qa + s * np.exp(-0.5 * (h * h - 2 * r * h * k + k * k)
                                                                             / (s * s)) / (2 * np.pi)
    return su * sv * (h * k * lam + h * ey + k * ex + exy)


def _inner(mean, Sc, powers):
    """E[Π_inner g | outer] at the outer nodes: ``mean`` (n_inner, Q), conditional covariance Sc, powers (None = 1)."""
    if len(powers) == 1:
        return moment1(mean[0], np.sqrt(Sc[0, 0]), powers[0])
    p, q = powers
    su, sv = np.sqrt(Sc[0, 0]), np.sqrt(Sc[1, 1])
    if p is None or q is None:
        return moment1(mean[0], su, p) * moment1(mean[1], sv, q)
    r = float(np.clip(Sc[0, 1] / (su * sv), -1.0, 1.0))
    return moment2(mean[0], mean[1], su, sv, r, p, q)


def _conditional(S, outer):
    """(B, Sc, outer nodes, weights) of the inner variables given the ``outer`` pair, or None when Sc is degenerate."""
    inner = [v for v in range(S.shape[0]) if v not in outer]
    Soo, Soi, Sii = S[np.ix_(outer, outer)], S[np.ix_(outer, inner)], S[np.ix_(inner, inner)]
    B = np.linalg.solve(Soo, Soi).T                                     # E[inner | outer] = B outer
    Sc = Sii - B @ Soi
    sc_scale = max(float(np.max(np.diag(Sii))), 1e-300)
    ev = np.linalg.eigvalsh(0.5 * (Sc + Sc.T)) if Sc.shape[0] > 1 else np.diag(Sc)
    if np.min(ev) <= 1e-8 * sc_scale:
        return None
    return (B, Sc) + polar_rule(Soo, RADIAL, ANGULAR)                   # nodes (2, Q): exact across the outer kinks


def expect(S, powers):
    """E[Π_v x_v^{p_v} 1{x_v > 0}] for one list of powers (:func:`expect_many`), or None."""
    out = expect_many(S, [powers])
    return None if out is None else out[0]


def expect_many(S, powers_list):
    """E[Π_v x_v^{p_v} 1{x_v > 0}] (p_v = None: the factor 1) for x ~ N(0, S), S r×r with r = 3 or 4, per list of
    powers (at most one p_v = 2 each); None when an inner conditional covariance is degenerate (callers then keep
    their general rule). Lists with the same outer pair share its conditional and its nodes."""
    r = S.shape[0]
    cache, out = {}, []
    for powers in powers_list:
        order = sorted(range(r), key=lambda v: -1 if powers[v] == 2 else (0 if powers[v] is not None else 1))
        outer = tuple(order[:2])
        inner = [v for v in range(r) if v not in outer]                 # the order of _conditional's rows
        if outer not in cache:
            cache[outer] = _conditional(S, list(outer))
        if cache[outer] is None:
            return None
        B, Sc, x, W = cache[outer]
        g = np.ones(x.shape[1])
        for j, v in enumerate(outer):
            if powers[v] is not None:
                g = g * np.where(x[j] > 0, x[j] ** powers[v], 0.0)
        out.append(float((g * _inner(B @ x, Sc, [powers[v] for v in inner])) @ W))
    return out
