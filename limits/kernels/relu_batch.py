"""relu / step moments in three or four Gaussian variables for a batch of covariances at once: the conditional rule of
:mod:`limits.kernels.relu_fourpoint` vectorised over covariances (docs/theory/finite_width.rst §9, "Cost").

``expect_batch(S, powers_list)`` returns E[Π_v x_v^{p_v} 1{x_v > 0}] (p_v = None: the factor 1) for x ~ N(0, S_b), every
b and every list of powers, exactly as :func:`limits.kernels.relu_lowrank.expect_many` does one covariance at a time:

* well-conditioned covariances of full rank (λ_min > BAND·λ_max) whose inner conditional covariance is not degenerate
  take the same rule — condition on the outer pair, the same polar nodes per sector (the five arcs between the zero
  lines of the outer variables, an empty arc weighted 0), the same closed-form inner moments — as arrays over
  covariances (results equal to rounding, tests/kernels/test_relu_batch.py);
* the others (singular, nearly singular, degenerate conditionals) go one by one to
  :func:`limits.kernels.relu_lowrank.expect_many` (rank rules and the band interpolation).

Identical covariances (byte for byte) are integrated once: a patch operator repeats the same 4×4 block wherever its
inputs repeat (background pixels, padding)."""
from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from . import relu_fourpoint as rf
from .polar import leggauss

CHUNK_NODES = 2_000_000          # covariances × nodes per vectorised step (memory: ~40 arrays of this size)


def unique_rows(S):
    """(U, inv): the distinct covariances of the batch S (B, r, r), byte for byte, and S = U[inv]."""
    flat = np.ascontiguousarray(S.reshape(S.shape[0], -1))
    if flat.shape[0] < 2:
        return S, np.arange(S.shape[0])
    U, first, inv = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    return S[first], np.ravel(inv)


def expect_batch(S, powers_list):
    """(K, B) array: per list of powers (at most one p_v = 2 each) and covariance S[b] (r = 3 or 4 variables)."""
    from .relu_lowrank import BAND, RANK_TOL, expect_many

    S = np.asarray(S, dtype=np.float64)
    U, inv = unique_rows(S)
    out = np.empty((len(powers_list), U.shape[0]))
    lam = np.linalg.eigvalsh(0.5 * (U + U.transpose(0, 2, 1)))[:, ::-1]
    top = np.maximum(lam[:, 0], 0.0)
    full = (top > 0) & np.all(lam > RANK_TOL * top[:, None], axis=1) & (lam[:, -1] > BAND * lam[:, 0])
    ok = np.zeros(U.shape[0], dtype=bool)
    idx = np.nonzero(full)[0]
    if idx.size:
        vals, good = _conditional_batch(U[idx], powers_list)
        out[:, idx[good]] = vals[:, good]
        ok[idx[good]] = True
    for b in np.nonzero(~ok)[0]:
        out[:, b] = expect_many(U[b], powers_list)
    return out[:, inv]


def _outer_pairs(r, powers_list):
    """Per list: its outer pair (the variable with p = 2 first, then the others with a factor), as in
    :func:`limits.kernels.relu_fourpoint.expect_many`."""
    outs = []
    for powers in powers_list:
        order = sorted(range(r), key=lambda v: -1 if powers[v] == 2 else (0 if powers[v] is not None else 1))
        outs.append(tuple(order[:2]))
    return outs


def _conditional_batch(S, powers_list):
    """(values (K, B), good (B,)): the conditional rule on every covariance; ``good`` False where an inner conditional
    covariance is degenerate (those values are garbage; the caller takes the one-by-one route)."""
    B, r = S.shape[0], S.shape[1]
    outs = _outer_pairs(r, powers_list)
    vals = np.zeros((len(powers_list), B))
    good = np.ones(B, dtype=bool)
    Q = 5 * rf.ANGULAR * rf.RADIAL
    step = max(1, CHUNK_NODES // Q)
    for outer in dict.fromkeys(outs):
        ks = [k for k, o in enumerate(outs) if o == outer]
        inner = [v for v in range(r) if v not in outer]
        for s0 in range(0, B, step):
            sl = slice(s0, s0 + step)
            cond = _conditional(S[sl], list(outer), inner)
            good[sl] &= cond[0]
            cache: dict = {}
            for k in ks:
                vals[k, sl] = _integrate(cond, outer, inner, powers_list[k], cache)
    return vals, good


def _conditional(S, outer, inner):
    """(ok, Bm, Sc, x, W) for a batch: E[inner | outer] = Bm outer, conditional covariance Sc, the outer pair's polar
    nodes x (b, 2, Q) and weights W (b, Q) (:func:`_polar_batch`); ok False where Sc is degenerate."""
    Soo = S[:, outer][:, :, outer]
    Soi = S[:, outer][:, :, inner]
    Sii = S[:, inner][:, :, inner]
    Bm = np.linalg.solve(Soo, Soi).transpose(0, 2, 1)
    Sc = Sii - Bm @ Soi
    scale = np.maximum(np.max(np.diagonal(Sii, axis1=1, axis2=2), axis=1), 1e-300)
    ev = (np.linalg.eigvalsh(0.5 * (Sc + Sc.transpose(0, 2, 1))) if Sc.shape[1] > 1
          else np.diagonal(Sc, axis1=1, axis2=2))
    ok = np.min(ev, axis=1) > 1e-8 * scale
    x, W = _polar_batch(Soo, rf.RADIAL, rf.ANGULAR)
    return ok, Bm, Sc, x, W


def _polar_batch(S2, radial, angular):
    """:func:`limits.kernels.polar.polar_rule` for a batch of full-rank 2×2 covariances: five arcs between the sorted
    zero lines (an arc of width ≤ 1e-15 weighted 0, as the one-by-one rule drops it)."""
    lam, V = np.linalg.eigh(0.5 * (S2 + S2.transpose(0, 2, 1)))
    A = V * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]
    x, w = leggauss(radial)
    rho = (x + 1.0) * 6.0
    wr = w * 6.0 * rho * np.exp(-0.5 * rho * rho)
    cuts = np.arctan2(-A[:, :, 0], A[:, :, 1]) % np.pi                      # (b, 2)
    edges = np.sort(np.concatenate([np.zeros((len(S2), 1)), cuts, cuts + np.pi,
                                    np.full((len(S2), 1), 2 * np.pi)], axis=1), axis=1)
    lo, hi = edges[:, :-1], edges[:, 1:]                                     # (b, 5)
    width = np.where(hi - lo > 1e-15, hi - lo, 0.0)
    xa, wa = leggauss(angular)
    th = lo[:, :, None] + (xa + 1) * (hi - lo)[:, :, None] / 2               # (b, 5, n_ang)
    wt = (wa * width[:, :, None] / 2).reshape(len(S2), -1) / (2 * np.pi)
    th = th.reshape(len(S2), -1)
    e = np.stack([np.cos(th), np.sin(th)], axis=1)                           # (b, 2, n_angles)
    pts = (A @ e)[:, :, :, None] * rho                                       # (b, 2, n_angles, n_radial)
    return pts.reshape(len(S2), 2, -1), (wt[:, :, None] * wr).reshape(len(S2), -1)


def _integrate(cond, outer, inner, powers, cache):
    """Σ_nodes W · Π_outer g · E[Π_inner g | outer] per covariance of the batch (``cache``: the inner pair's
    bivariate pieces, shared by the lists with this outer pair)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):     # degenerate rows (not ok) are discarded
        return _integrate_rows(cond, outer, inner, powers, cache)


def _integrate_rows(cond, outer, inner, powers, cache):
    ok, Bm, Sc, x, W = cond
    g = np.ones(x.shape[::2])
    for j, v in enumerate(outer):
        if powers[v] is not None:
            g = g * np.where(x[:, j] > 0, x[:, j] ** powers[v], 0.0)
    if "mean" not in cache:
        cache["mean"] = Bm @ x                                              # (b, n_inner, Q)
        cache["sd"] = np.sqrt(np.clip(np.diagonal(Sc, axis1=1, axis2=2), 0.0, None))[:, :, None]
    mean, sd = cache["mean"], cache["sd"]
    ip = [powers[v] for v in inner]
    if len(ip) == 1:
        h = rf.moment1(mean[:, 0], sd[:, 0], ip[0])
    elif ip[0] is None or ip[1] is None:
        h = rf.moment1(mean[:, 0], sd[:, 0], ip[0]) * rf.moment1(mean[:, 1], sd[:, 1], ip[1])
    else:
        if "pair" not in cache:
            r = np.clip(Sc[:, 0, 1] / (sd[:, 0, 0] * sd[:, 1, 0]), -1.0, 1.0)[:, None]
            cache["pair"] = _pair_pieces(mean[:, 0], mean[:, 1], sd[:, 0], sd[:, 1], np.where(ok[:, None], r, 0.0))
        h = _moment2(cache["pair"], ip[0], ip[1])
    return np.einsum("bq,bq->b", g * h, W)


def _pair_pieces(mu, mv, su, sv, r):
    """The pieces of :func:`limits.kernels.relu_fourpoint.moment2` that do not depend on the powers (the orthant
    probability Λ and the truncated first moments), in the same expressions."""
    h, k = mu / su, mv / sv
    s = np.sqrt(1.0 - r * r)
    lam = rf.orthant(h, k, r)
    qb, qa = ndtr((k - r * h) / s), ndtr((h - r * k) / s)
    ph, pk = _pdf(h), _pdf(k)
    ex = ph * qb + r * pk * qa
    ey = pk * qa + r * ph * qb
    return dict(h=h, k=k, s=s, r=r, lam=lam, qa=qa, qb=qb, ph=ph, pk=pk, ex=ex, ey=ey, su=su, sv=sv)


def _pdf(t):
    return np.exp(-0.5 * t * t) / np.sqrt(2.0 * np.pi)


def _moment2(c, p, q):
    """:func:`limits.kernels.relu_fourpoint.moment2` from :func:`_pair_pieces`."""
    h, k, lam, r, s = c["h"], c["k"], c["lam"], c["r"], c["s"]
    if p == 0 and q == 0:
        return lam
    if q == 0:
        return c["su"] * (h * lam + c["ex"])
    if p == 0:
        return c["sv"] * (k * lam + c["ey"])
    if "exy" not in c:
        c["exy"] = (r * lam - r * h * c["ph"] * c["qb"] - r * k * c["pk"] * c["qa"]
                    + s * np.exp(-0.5 * (h * h - 2 * r * h * k + k * k) / (s * s)) / (2 * np.pi))
    return c["su"] * c["sv"] * (h * k * lam + h * c["ey"] + k * c["ex"] + c["exy"])
