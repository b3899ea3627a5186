"""K1 of a two-hidden-layer composition from the four-point functions it needs only (docs/theory/finite_width.rst §8,
"Cost"): ``[Dense/Conv, Activation φ₁, Dense/Conv, Activation φ₂, pooling/Flatten…, Dense]`` on fixed inputs.

There the first Gaussian stage is exact (K1¹ = 0, V¹ = 0), so the read-out correction is (module
:mod:`limits.kernels.finite_width_serial`, same notation)::

    K1_out = L_out(G1²),   G1²_ab = ½ Σ_{e,f ∈ {aa, ab, bb}} ∂²F₂,ab/∂K_e∂K_f V²_ef,   V² = L₂ Σ¹ L₂ᵀ,

Σ¹_gh = Cov(φ₁φ₁_g, φ₁φ₁_h) under N(0, K¹) over pairs g, h of first-layer indices. The general route builds all of Σ¹
(m² four-point functions, m = pairs of (input, position) indices) and the dense pair operators; here only the six
entries of V² per second-layer pair that the Hessian contraction reads are formed, each through the ≤ k² first-layer
pairs the patch operator L₂ couples (k the filter size: locality), and every Σ¹ entry is integrated once however
many V² entries share it (overlapping patches). Σ¹_gh is exactly 0 — and skipped — when the two pairs' variables are
uncorrelated (a zero block of K¹) or one of them is identically 0 with φ(0) = 0 (a background patch without bias).
The remaining four-point functions are one batched call of :func:`limits.kernels.fourpoint.cov_phiphi` — the general
route's own formula, so both agree to rounding (relu by :mod:`limits.kernels.relu_batch`, identical covariances
integrated once). N·Var of the read-out is not formed here
(it needs all of Σ¹)."""
from __future__ import annotations

import numpy as np

from ..progress import progress
from .layer_operators import position_operator

CHUNK = 200_000          # V² entries per step of the index enumeration
SIGMA_CHUNK = 20_000     # four-point functions per batched call (a progress step)
LOCAL_ABOVE = 20_000     # finite_width(var="auto"): this route when the general one needs more four-point functions


def plan(serial):
    """(conv1, act1, conv2, act2, tail) when ``serial`` has the form of the module docstring, else None."""
    from ..layers import Activation, AvgPool, Dense, Flatten, GlobalAvgPool

    ls = list(serial.layers)
    par = lambda x: type(x).__name__ in ("Dense", "Conv") or isinstance(x, Dense)      # noqa: E731
    if len(ls) < 5 or not (par(ls[0]) and isinstance(ls[1], Activation) and par(ls[2])
                           and isinstance(ls[3], Activation) and isinstance(ls[-1], Dense)):
        return None
    if not all(isinstance(x, (AvgPool, GlobalAvgPool, Flatten)) for x in ls[4:-1]):
        return None
    return ls[0], ls[1].act, ls[2], ls[3].act, ls[4:]


def apply_positions(Lpos, M, P, S, Sp):
    """out[(p,i'),(q,j')] = Σ_{i,j} Lpos[(i',j'),(i,j)] M[(p,i),(q,j)] on a (P·S)² matrix (the pair operator of
    :func:`limits.kernels.layer_operators.pair_operator` without forming it)."""
    M4 = M.reshape(P, S, P, S).transpose(0, 2, 1, 3).reshape(P, P, S * S)
    out = (M4 @ Lpos.T).reshape(P, P, Sp, Sp).transpose(0, 2, 1, 3)
    return out.reshape(P * Sp, P * Sp)


def pair_pos(a, b, n):
    """Index of the pair (min, max) of (a, b) in :func:`limits.kernels.fluctuations.pair_index` (n) order."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo * n - lo * (lo - 1) // 2 + (hi - lo)


def sparse_rows(Lpos, P, S, Sp):
    """The pair operator's rows as padded arrays (cols, vals) (m' × R, column −1 = none): row t = (a2, b2) of the
    second layer's pairs, columns the first layer's pairs (coefficients of one pair summed, as ``pair_operator``)."""
    n, n2 = P * S, P * Sp
    L4 = Lpos.reshape(Sp, Sp, S, S)
    a2, b2 = np.triu_indices(n2)
    p, i2 = np.divmod(a2, Sp)
    q, j2 = np.divmod(b2, Sp)
    blk = i2 * Sp + j2
    order = np.argsort(blk, kind="stable")
    starts = np.searchsorted(blk[order], np.arange(Sp * Sp + 1))
    L4f = L4.reshape(Sp * Sp, S, S)
    nzs = [np.nonzero(L4f[t]) for t in range(Sp * Sp)]
    R = max(1, max(len(z[0]) for z in nzs))
    cols = np.full((a2.size, R), -1, dtype=np.int64)
    vals = np.zeros((a2.size, R))
    for t, (ii, jj) in enumerate(nzs):                       # one block of positions (i2, j2) at a time
        sel = order[starts[t]:starts[t + 1]]
        if sel.size == 0 or ii.size == 0:
            continue
        cols[sel, :ii.size] = pair_pos(p[sel, None] * S + ii, q[sel, None] * S + jj, n)
        vals[sel, :ii.size] = L4f[t][ii, jj]
    return _merge_columns(cols, vals)


def _merge_columns(cols, vals):
    """Sum the coefficients of a repeated column within a row (rows sorted by column, −1 last)."""
    key = np.where(cols < 0, np.iinfo(np.int64).max, cols)
    o = np.argsort(key, axis=1, kind="stable")
    c = np.take_along_axis(cols, o, 1)
    v = np.take_along_axis(vals, o, 1)
    for r in range(c.shape[1] - 1, 0, -1):
        same = (c[:, r] == c[:, r - 1]) & (c[:, r] >= 0)
        v[same, r - 1] += v[same, r]
        v[same, r] = 0.0
        c[same, r] = -1
    return c, v


def needed_entries(n2):
    """(t, e, f, coefficient key) of the V² entries the Hessian contraction reads, per second-layer pair t = (a, b):
    key 0..5 = (aa,aa), (ab,ab), (bb,bb), (aa,ab), (aa,bb), (ab,bb) (a = b: only (aa,aa))."""
    a, b = np.triu_indices(n2)
    t = np.arange(a.size)
    aa, bb = pair_pos(a, a, n2), pair_pos(b, b, n2)
    off = a != b
    parts = [(t, aa, aa, 0), (t[off], t[off], t[off], 1), (t[off], bb[off], bb[off], 2), (t[off], aa[off], t[off], 3),
             (t[off], aa[off], bb[off], 4), (t[off], t[off], bb[off], 5)]
    T = np.concatenate([x[0] for x in parts])
    E = np.concatenate([x[1] for x in parts])
    F = np.concatenate([x[2] for x in parts])
    k = np.concatenate([np.full(x[0].size, x[3]) for x in parts])
    return T, E, F, k


def _terms(cols, vals, E, F, m1):
    """Σ¹ keys (lo·m1 + hi over first-layer pairs) and weights of the V² entries (E, F): (c, R²) arrays, key −1 none."""
    g, h = cols[E][:, :, None], cols[F][:, None, :]
    w = vals[E][:, :, None] * vals[F][:, None, :]
    key = np.where((g >= 0) & (h >= 0), np.minimum(g, h) * m1 + np.maximum(g, h), -1)
    return key.reshape(len(E), -1), w.reshape(len(E), -1)


def _sigma(act, K, keys, m1):
    """Σ¹ at the sorted unique ``keys`` (module docstring): skipped zeros, one batched four-point call for the rest."""
    from .fourpoint import cov_phiphi

    n1 = K.shape[0]
    pu, pv = np.triu_indices(n1)
    g, h = np.divmod(keys, m1)
    q = np.stack([pu[g], pv[g], pu[h], pv[h]], axis=1)                     # (k, 4) first-layer indices
    out = np.zeros(keys.size)
    cross = K[q[:, :2, None], q[:, None, 2:]].reshape(-1, 4)
    live = np.any(cross != 0, axis=1)
    if float(np.asarray(act.phi(np.zeros(1)))[0]) == 0.0:
        live &= np.all(np.diagonal(K)[q] > 0, axis=1)
    idx = np.nonzero(live)[0]
    S4 = K[q[idx][:, :, None], q[idx][:, None, :]]
    out[idx] = cov_phiphi(act, S4)
    return out, int(idx.size)


def _layers(serial, X, where):
    """The first two layers' limits and the enumeration of the V² entries: a dict of the pieces."""
    from .expectations import gram

    conv1, act1, conv2, act2, tail = plan(serial)
    X = np.asarray(X, dtype=np.float64)
    P, sp0 = X.shape[0], tuple(X.shape[1:-1])
    Z = X.reshape(P, -1, X.shape[-1])
    S0 = Z.shape[1]
    G0 = np.einsum("pic,qjc->piqj", Z, Z).reshape(P * S0, -1) / X.shape[-1]
    L1, sp1, b1 = position_operator(conv1, sp0, where)
    S1 = int(np.prod(sp1)) if sp1 else 1
    K1m = apply_positions(L1, G0, P, S0, S1) + b1
    F1 = gram(act1, K1m)
    L2, sp2, b2 = position_operator(conv2, sp1, where)
    S2 = int(np.prod(sp2)) if sp2 else 1
    K2 = apply_positions(L2, F1, P, S1, S2) + b2
    n1, n2 = P * S1, P * S2
    m1 = n1 * (n1 + 1) // 2
    cols, vals = sparse_rows(L2, P, S1, S2)
    T, E, Fe, kind = needed_entries(n2)
    chunks = [slice(s0, s0 + CHUNK) for s0 in range(0, T.size, CHUNK)]
    keys = np.unique(np.concatenate([np.unique(_terms(cols, vals, E[c], Fe[c], m1)[0]) for c in chunks]))
    return dict(P=P, act1=act1, act2=act2, tail=tail, K1m=K1m, K2=K2, sp2=sp2, n2=n2, m1=m1, cols=cols, vals=vals,
                T=T, E=E, Fe=Fe, kind=kind, chunks=chunks, keys=keys[keys >= 0])


def four_point_count(serial, X, where="limits.kernels.finite_width"):
    """(distinct Σ¹ entries the local route integrates, V² entries): the cost without the integration."""
    d = _layers(serial, X, where)
    return int(d["keys"].size), int(d["T"].size)


def correction(serial, X, where="limits.kernels.finite_width"):
    """(K, K1, info) of the read-out on inputs X (P, *spatial, C) for a composition of :func:`plan`'s form."""
    from .expectations import gram
    from .price import pair_derivatives

    d = _layers(serial, X, where)
    keys, m1, T = d["keys"], d["m1"], d["T"]
    sig, live = np.zeros(keys.size), 0
    with progress(total=keys.size, desc=f"{where}: four-point functions (two-layer local route)") as bar:
        for s0 in range(0, keys.size, SIGMA_CHUNK):
            sl = slice(s0, s0 + SIGMA_CHUNK)
            sig[sl], n_live = _sigma(d["act1"], d["K1m"], keys[sl], m1)
            live += n_live
            bar.update(keys[sl].size)
    V = np.empty(T.size)
    for c in d["chunks"]:
        key, w = _terms(d["cols"], d["vals"], d["E"][c], d["Fe"][c], m1)
        pos = np.clip(np.searchsorted(keys, key), 0, max(keys.size - 1, 0))
        V[c] = np.sum(np.where(key >= 0, w * sig[pos], 0.0), axis=1) if keys.size else 0.0
    P, K2 = d["P"], d["K2"]
    G1 = _contract(pair_derivatives(d["act2"], K2, 0), T, d["kind"], V, d["n2"])
    Kout, K1out, spt = gram(d["act2"], K2), G1, d["sp2"]
    for layer in d["tail"]:
        Lt, sp3, bt = position_operator(layer, spt, where)
        St, S3 = (int(np.prod(spt)) if spt else 1), (int(np.prod(sp3)) if sp3 else 1)
        Kout = apply_positions(Lt, Kout, P, St, S3) + bt
        K1out = apply_positions(Lt, K1out, P, St, S3)
        spt = sp3
    return Kout, K1out, {"four_point": int(keys.size), "integrated": live, "v_entries": int(T.size)}


def _contract(pd, T, kind, V, n):
    """G1 = ½ ∂²F : V² on the n×n matrix, from the V² entries (T, kind) (:func:`needed_entries`)."""
    a, b = np.triu_indices(n)
    at, bt = a[T], b[T]
    H = pd.h
    diag = at == bt
    coef = np.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4, kind == 5],
                     [np.where(diag, pd.d2[at], H["11_11"][at, bt]), H["12_12"][at, bt], H["22_22"][at, bt],
                      2 * H["11_12"][at, bt], 2 * H["11_22"][at, bt], 2 * H["12_22"][at, bt]])
    g = 0.5 * np.bincount(T, weights=coef * V, minlength=a.size)
    out = np.zeros((n, n))
    out[a, b] = g
    out[b, a] = g
    return out


def finite_width_local(serial, X1, X2=None):
    """(K, K1) of the read-out on X1 (× X2) by :func:`correction` (inputs stacked, the cross block cut)."""
    Z = X1 if X2 is None else np.concatenate([X1, X2])
    K, K1, _ = correction(serial, Z)
    if X2 is None:
        return K, K1
    P1 = X1.shape[0]
    return K[:P1, P1:], K1[:P1, P1:]
