"""Four-point functions of one neuron's Gaussian field at two depths, and the self-interaction tensor of a neuron
whose identity persists through skip connections (docs/theory/finite_width.rst §2): shared by the fully connected
ResNets of :mod:`limits.kernels.finite_width` and the residual sections of compositions
(:mod:`limits.kernels.finite_width_residual`)."""
from __future__ import annotations

import numpy as np

from .fourpoint import cov_phiphi, expect4_many, gaussian_rule, is_relu

JOINT_MAX = 4        # joint tensor rule (fourpoint.rule) up to this many Gaussian variables
JOINT_ORDER = {1: 128, 2: 128, 3: 48, 4: 24}


def joint_nodes(act, Kx, Ky, Kxy, same):
    """Nodes of the joint Gaussian of (x, y) (one block when ``same``): x (P, Q), y (P, Q), weights (Q,);
    None when the joint dimension exceeds ``JOINT_MAX`` (callers then use per-quadruple rules). relu and
    linear in at most two dimensions: the exact polar rule (:func:`fourpoint.polar_rule`); relu in three or four
    (a tensor rule would cross its kinks) also None: the per-quadruple rules integrate it
    exactly (:mod:`limits.kernels.relu_fourpoint`)."""
    P = Kx.shape[0]
    Kj = Kx if same else np.block([[Kx, Kxy], [Kxy.T, Ky]])
    n = Kj.shape[0]
    if n > JOINT_MAX or (n > 2 and is_relu(act)):
        return None
    pts, W = gaussian_rule(act, Kj, JOINT_ORDER[n])
    return (pts, pts, W) if same else (pts[:P], pts[P:], W)


def phiphi_cov(act, Kx, Ky, Kxy, pairs, same):
    """Cov(φφ_p(x), φφ_q(y)) over pairs p, q (m×m) for one neuron's jointly Gaussian x, y (blocks Kx, Ky, Kxy;
    ``same``: y is x): one joint rule up to 4 variables, else per quadruple (:func:`fourpoint.cov_phiphi`)."""
    nodes = joint_nodes(act, Kx, Ky, Kxy, same)
    if nodes is not None:
        fx, fy, W = act.phi(nodes[0]), act.phi(nodes[1]), nodes[2]
        pa, pb = np.array(pairs).T
        return connected_rows(fx[pa] * fx[pb], fy[pa] * fy[pb], W)
    return cov_phiphi(act, four_block(Kx, Ky, Kxy, pairs, pairs)).reshape(len(pairs), len(pairs))


def connected_rows(Fx, Gy, W):
    """Connected moments E[F G] − E[F] E[G] for rows of node values Fx (a, Q), Gy (b, Q)."""
    return (Fx * W) @ Gy.T - np.outer(Fx @ W, Gy @ W)


def four_block(Kx, Ky, Kxy, pairs_x, pairs_y):
    """Batch of 4×4 covariances of (x_a, x_b, y_c, y_d) for every (pair_x, pair_y)."""
    px = np.asarray(pairs_x)
    py = np.asarray(pairs_y)
    ix = np.repeat(px, len(py), axis=0)
    iy = np.tile(py, (len(px), 1))
    S = np.empty((ix.shape[0], 4, 4))
    for u in range(2):
        for v in range(2):
            S[:, u, v] = Kx[ix[:, u], ix[:, v]]
            S[:, 2 + u, 2 + v] = Ky[iy[:, u], iy[:, v]]
            S[:, u, 2 + v] = S[:, 2 + v, u] = Kxy[ix[:, u], iy[:, v]]
    return S


def _xy_moments(act, Kx, Ky, Kxy, xs, ys, specs):
    """Per spec (kinds, connected): the matrix over x-pairs ``xs`` (rows) and y-pairs ``ys`` (columns) of
    E[k₀(x_a) k₁(x_b) k₂(y_c) k₃(y_d)] (minus E[k₀k₁] E[k₂k₃] when ``connected``); k ∈ {"f": φ, "g": φ', "u": x φ'(x),
    "1"}. One joint rule when (x, y) has at most 4 variables, else :func:`fourpoint.expect4_many` per quadruple, all
    specs on the same nodes."""
    fn = {"f": act.phi, "g": act.dphi, "u": act.phi if is_relu(act) else (lambda t: t * act.dphi(t)),
          "1": np.ones_like}                                   # relu: x·step(x) = relu(x) exactly
    xs, ys = np.asarray(xs), np.asarray(ys)
    nodes = joint_nodes(act, Kx, Ky, Kxy, False)
    if nodes is not None:
        x, y, W = nodes
        out = []
        for kinds, connected in specs:
            f = [fn[k] for k in kinds]
            Fx = f[0](x[xs[:, 0]]) * f[1](x[xs[:, 1]])
            Gy = f[2](y[ys[:, 0]]) * f[3](y[ys[:, 1]])
            out.append(connected_rows(Fx, Gy, W) if connected else (Fx * W) @ Gy.T)
        return out
    S4 = four_block(Kx, Ky, Kxy, [tuple(p) for p in xs], [tuple(p) for p in ys])
    lists, where = [], []
    for kinds, connected in specs:
        f = [fn[k] for k in kinds]
        where.append(len(lists))
        lists.append(f)
        if connected:
            lists += [f[:2] + [fn["1"]] * 2, [fn["1"]] * 2 + f[2:]]
    E = expect4_many(act, lists, S4).reshape(len(lists), len(xs), len(ys))
    return [E[k] - np.outer(E[k + 1][:, 0], E[k + 2][0]) if conn else E[k] for k, (_, conn) in zip(where, specs)]


def self_tensor(act, Kx, Ky, Kxy, pairs):
    """R[p, q, r] = ∂/∂(Kx)_q Cov(φφ_p(x), φφ_r(y)) with the y block and Cov(x, y) fixed. By Price for
    q = p = (a, b), a ≠ b: Cov(φ'_aφ'_b, φφ_r). For a variance q = (a, a) by Stein's identity in its scaling
    form (x_a → λx_a moves Kx_aa by 2, Kx_ab and Cov(x_a, y) by 1; only φ and φ' appear, so relu's δ = φ''
    is never evaluated): with Y = φφ_r(y),

        ∂_aa Cov(φ_aφ_b, Y) = (Cov(x_aφ'_aφ_b, Y) − Kx_ab Cov(φ'_aφ'_b, Y) − Σ_c Cov(x_a, y_c) E[φ'_aφ_b ∂_{y_c} Y]) / (2 Kx_aa)

    (b = a: φ(x_a)² in place of φ_aφ_b, no Kx_ab term)."""
    m = len(pairs)
    pos = {tuple(p): i for i, p in enumerate(pairs)}
    pr = np.asarray(pairs)
    R = np.zeros((m, m, m))
    cy, dy = pr[:, 0], pr[:, 1]
    off = [(i, a, b) for i, (a, b) in enumerate(pairs) if a != b]
    diag = [(i, a) for i, (a, b) in enumerate(pairs) if a == b]
    if off:
        xs = np.array([(a, b) for _, a, b in off])
        # ∂ w.r.t. Kx_aa (x-pair (a, b)) and Kx_bb (the same moments with a and b's roles swapped)
        gg, *mo = _xy_moments(act, Kx, Ky, Kxy, xs, pr, [("ggff", True), ("ufff", True), ("gfgf", False),
                                                         ("gffg", False), ("fuff", True), ("fggf", False),
                                                         ("fgfg", False)])
        for sw in (False, True):
            lin, e1, e2 = mo[3:] if sw else mo[:3]
            for t, (i, a, b) in enumerate(off):
                v = b if sw else a
                cross = Kxy[v, cy] * e1[t] + Kxy[v, dy] * e2[t]
                R[i, pos[(v, v)], :] += (lin[t] - Kx[a, b] * gg[t] - cross) / (2 * Kx[v, v])
        for t, (i, a, b) in enumerate(off):
            R[i, i, :] += gg[t]
    if diag:
        xs = np.array([(a, a) for _, a in diag])
        lin, e1, e2 = _xy_moments(act, Kx, Ky, Kxy, xs, pr, [("ufff", True), ("gfgf", False), ("gffg", False)])
        for t, (i, a) in enumerate(diag):
            cross = Kxy[a, cy] * e1[t] + Kxy[a, dy] * e2[t]
            R[i, i, :] += 2 * (lin[t] - cross) / (2 * Kx[a, a])
    return R
