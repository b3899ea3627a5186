"""Connected four-point functions of φ (or the identity) under a multivariate Gaussian.

``cov4(kinds, Sigma4)`` computes, for a batch of 4×4 covariances of (x₁, x₂, y₁, y₂),
``E[f(x₁)f(x₂)g(y₁)g(y₂)] − E[f(x₁)f(x₂)] E[g(y₁)g(y₂)]`` where f, g ∈ {φ, id}. Coincident
variables (identical rows of the covariance, e.g. x₁ = x₂ on a diagonal entry, or x = y in the same
layer) are merged first, so the tensor Gauss–Hermite rule runs in r ≤ 4 dimensions
(orders 96, 64, 24, 14 for r = 1..4), on a symmetric eigen-square-root (PSD-safe).
Used by :mod:`limits.kernels.fluctuations` (seed 004 App. C: the C̃–C̃ block of the Hessian).
"""
from __future__ import annotations

import itertools

import numpy as np

ORDERS = {1: 96, 2: 64, 3: 24, 4: 14}
_RULES: dict = {}


def rule(r: int, n: int | None = None):
    """Tensor Gauss–Hermite nodes (Q, r) and weights (Q,) for the standard normal in r dimensions."""
    n = ORDERS[r] if n is None else n
    key = (r, n)
    if key not in _RULES:
        z, w = np.polynomial.hermite_e.hermegauss(n)
        w = w / w.sum()
        Z = np.array(list(itertools.product(z, repeat=r)))
        W = np.prod(np.array(list(itertools.product(w, repeat=r))), axis=1)
        _RULES[key] = (Z, W)
    return _RULES[key]


def _merge_pattern(S, tol=1e-13):
    """Map the 4 slots onto distinct variables: slots i, j coincide when Var(x_i − x_j) ≈ 0."""
    idx = [0] * 4
    reps: list[int] = []
    scale = max(1.0, float(np.max(np.abs(S))))
    for i in range(4):
        for k, j in enumerate(reps):
            if abs(S[i, i] + S[j, j] - 2 * S[i, j]) <= tol * scale:
                idx[i] = k
                break
        else:
            idx[i] = len(reps)
            reps.append(i)
    return tuple(idx), tuple(reps)


def cov4(phi, kinds, Sigma4, max_nodes_batch=4_000_000):
    """Connected 4-point functions for a batch of covariances ``Sigma4`` (B, 4, 4).

    ``kinds`` (B, 2) booleans: True → slot pair uses φ, False → identity, for the (x₁,x₂) pair and the
    (y₁,y₂) pair. Returns (cov, mean_x, mean_y), each (B,)."""
    Sigma4 = np.asarray(Sigma4, dtype=np.float64)
    kinds = np.asarray(kinds, dtype=bool)
    B = Sigma4.shape[0]
    out = np.empty(B)
    mx = np.empty(B)
    my = np.empty(B)
    groups: dict = {}
    for b in range(B):
        pat, reps = _merge_pattern(Sigma4[b])
        groups.setdefault((pat, reps, bool(kinds[b, 0]), bool(kinds[b, 1])), []).append(b)
    for (pat, reps, kx, ky), members in groups.items():
        r = len(reps)
        Z, W = rule(r)
        mem = np.asarray(members)
        S = Sigma4[np.ix_(mem, reps, reps)]
        lam, V = np.linalg.eigh(0.5 * (S + S.transpose(0, 2, 1)))
        R = V * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]        # S = R Rᵀ
        step = max(1, max_nodes_batch // (Z.shape[0] * r))
        for s0 in range(0, len(mem), step):
            sl = slice(s0, s0 + step)
            pts = np.einsum("qr,bkr->bqk", Z, R[sl])                   # (b, Q, r)
            fx = phi(pts) if (kx or ky) else None
            vals = []
            for slot in range(4):
                use_phi = kx if slot < 2 else ky
                v = pts[..., pat[slot]]
                vals.append(fx[..., pat[slot]] if use_phi else v)
            ex = vals[0] * vals[1]
            ey = vals[2] * vals[3]
            e4 = (ex * ey) @ W
            e2x = ex @ W
            e2y = ey @ W
            out[mem[sl]] = e4 - e2x * e2y
            mx[mem[sl]] = e2x
            my[mem[sl]] = e2y
    return out, mx, my
