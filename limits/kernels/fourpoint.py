"""Connected four-point functions of φ (or the identity) under a multivariate Gaussian.

``cov4(kinds, Sigma4)`` computes, for a batch of 4×4 covariances of (x₁, x₂, y₁, y₂),
``E[f(x₁)f(x₂)g(y₁)g(y₂)] − E[f(x₁)f(x₂)] E[g(y₁)g(y₂)]`` where f, g ∈ {φ, id}. Coincident
variables (identical rows of the covariance, e.g. x₁ = x₂ on a diagonal entry, or x = y in the same
layer) are merged first, so the tensor Gauss–Hermite rule runs in r ≤ 4 dimensions
(orders 128, 128, 36, 20 for r = 1..4), on a symmetric eigen-square-root (PSD-safe).
Used by :mod:`limits.kernels.fluctuations` (seed 004 App. C: the C̃–C̃ block of the Hessian).

Accuracy: for erf use :func:`cov4_erf` (inner pair exact, ~1e-9). The generic tensor rule converges
slowly for saturating φ at large variance when four distinct variables are involved (tanh, order 20
vs 32: relative change 2e-5 at variances ≈ 0.7, 6e-4 at ≈ 1.3, 7e-3 at ≈ 2.7, 3e-2 at ≈ 5.3);
1–2 distinct variables (e.g. P = 1, diagonal entries) use orders 128 and are accurate to ~1e-10. relu never goes
through the tensor rule across its kinks: the exact polar rule in ≤ 2 variables, :mod:`limits.kernels.relu_lowrank`
in 3 or 4 (:func:`expect4`, :func:`cov_pairs`) — the conditional rule of :mod:`limits.kernels.relu_fourpoint` for
well-conditioned covariances, the covariance's rank for singular and nearly singular ones — 1e-14 where the 20⁴
tensor rule was off by up to 11 % (and, on singular covariances, by up to 26 %).
"""
from __future__ import annotations

import numpy as np

from .polar import polar_rule

ORDERS = {1: 128, 2: 128, 3: 36, 4: 20}
_RULES: dict = {}


def rule(r: int, n: int | None = None):
    """Tensor Gauss–Hermite nodes (Q, r) and weights (Q,) for the standard normal in r dimensions."""
    n = ORDERS[r] if n is None else n
    key = (r, n)
    if key not in _RULES:
        z, w = np.polynomial.hermite_e.hermegauss(n)
        w = w / w.sum()
        Z = np.stack([g.ravel() for g in np.meshgrid(*([z] * r), indexing="ij")], axis=1)
        W = np.ones(1)
        for _ in range(r):
            W = np.multiply.outer(W, w).ravel()
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


merge_pattern = _merge_pattern          # public within the package


def merge_groups(S4, tol=1e-13):
    """{(pattern, reps): members} of :func:`_merge_pattern` over a batch (B, 4, 4), the same comparisons as arrays."""
    S4 = np.asarray(S4, dtype=np.float64)
    B = S4.shape[0]
    scale = np.maximum(1.0, np.max(np.abs(S4.reshape(B, -1)), axis=1)) if B else np.ones(0)
    d = np.diagonal(S4, axis1=1, axis2=2)
    same = np.abs(d[:, :, None] + d[:, None, :] - 2 * S4) <= tol * scale[:, None, None]
    idx = np.zeros((B, 4), dtype=np.int64)
    reps = np.full((B, 4), -1, dtype=np.int64)
    nrep = np.zeros(B, dtype=np.int64)
    rows = np.arange(B)
    for i in range(4):
        found = np.zeros(B, dtype=bool)
        for k in range(i):
            hit = ~found & (k < nrep) & same[rows, i, np.maximum(reps[:, k], 0)]
            idx[hit, i] = k
            found |= hit
        new = ~found
        idx[new, i] = nrep[new]
        reps[new, nrep[new]] = i
        nrep[new] += 1
    codes, inv = np.unique(np.concatenate([idx, reps], axis=1), axis=0, return_inverse=True)
    inv = np.ravel(inv)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(codes) + 1))
    return {(tuple(int(v) for v in c[:4]), tuple(int(v) for v in c[4:] if v >= 0)): order[bounds[g]:bounds[g + 1]]
            for g, c in enumerate(codes)}


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
            pts = np.matmul(R[sl], Z.T)                                  # (b, r, Q)
            fx = phi(pts) if (kx or ky) else None
            vals = []
            for slot in range(4):
                use_phi = kx if slot < 2 else ky
                vals.append((fx if use_phi else pts)[:, pat[slot], :])
            ex = vals[0] * vals[1]
            ey = vals[2] * vals[3]
            e4 = (ex * ey) @ W
            e2x = ex @ W
            e2y = ey @ W
            out[mem[sl]] = e4 - e2x * e2y
            mx[mem[sl]] = e2x
            my[mem[sl]] = e2y
    return out, mx, my


# ---------------------------------------------------------------------------------------------
# erf: inner pair in closed form (bivariate normal CDF via Owen's T), outer pair by 2-D quadrature
# ---------------------------------------------------------------------------------------------
_SQRT2 = np.sqrt(2.0)


def _phi2(h, k, r):
    """Bivariate standard normal CDF Φ₂(h, k; r) for |r| < 1 via Owen's T (vectorised)."""
    from scipy.special import ndtr, owens_t

    h = np.where(np.abs(h) < 1e-12, np.copysign(1e-12, h + 0.0), h)
    k = np.where(np.abs(k) < 1e-12, np.copysign(1e-12, k + 0.0), k)
    sq = np.sqrt(1.0 - r * r)
    a_h = (k - r * h) / (h * sq)
    a_k = (h - r * k) / (k * sq)
    beta = np.where(h * k > 0, 0.0, 0.5)
    return 0.5 * (ndtr(h) + ndtr(k)) - owens_t(h, a_h) - owens_t(k, a_k) - beta


def erf_pair_mean(m1, m2, c11, c12, c22):
    """E[erf(m₁+w₁) erf(m₂+w₂)], w ~ N(0, [[c11, c12], [c12, c22]]), exactly:
    erf(t) = E_ζ sign(√2 t − ζ) turns it into E[sign(a₁+U₁) sign(a₂+U₂)] with U ~ N(0, 2C + I),
    = 4Φ₂(h₁, h₂; r) − 2Φ(h₁) − 2Φ(h₂) + 1."""
    from scipy.special import ndtr

    s1 = np.sqrt(2.0 * c11 + 1.0)
    s2 = np.sqrt(2.0 * c22 + 1.0)
    r = np.clip(2.0 * c12 / (s1 * s2), -1 + 1e-15, 1 - 1e-15)
    h1 = _SQRT2 * m1 / s1
    h2 = _SQRT2 * m2 / s2
    return 4.0 * _phi2(h1, h2, r) - 2.0 * ndtr(h1) - 2.0 * ndtr(h2) + 1.0


def _outer_order(s, rank):
    if rank == 1:
        return int(np.clip(64 * max(1.0, s), 64, 160)) // 2 * 2
    return int(np.clip(28 * max(1.0, s), 28, 128)) // 2 * 2


def cov4_erf(kinds, Sigma4, max_nodes_batch=3_000_000):
    """Same contract as :func:`cov4` for φ = erf, accurate to ~1e-9: the (y₁, y₂) pair is integrated in
    closed form given (x₁, x₂) (conditional Gaussian, :func:`erf_pair_mean`); the (x₁, x₂) pair by a
    2-D Gauss–Hermite rule on an eigen-square-root, order adapted to the largest standard deviation."""
    from scipy.special import erf

    S4 = np.array(Sigma4, dtype=np.float64)
    kinds = np.array(kinds, dtype=bool)
    B = S4.shape[0]
    # put a φ pair in the inner (closed-form) position
    swap = (~kinds[:, 1]) & kinds[:, 0]
    perm = np.array([2, 3, 0, 1])
    S4[swap] = S4[swap][:, perm][:, :, perm]
    kinds[swap] = kinds[swap][:, ::-1]
    out = np.empty(B)
    mx = np.empty(B)
    my = np.empty(B)
    both_id = ~kinds[:, 0] & ~kinds[:, 1]
    if np.any(both_id):  # Isserlis
        S = S4[both_id]
        out[both_id] = S[:, 0, 2] * S[:, 1, 3] + S[:, 0, 3] * S[:, 1, 2]
        mx[both_id] = S[:, 0, 1]
        my[both_id] = S[:, 2, 3]
    todo = np.nonzero(~both_id)[0]
    if todo.size:
        Sxx = S4[todo][:, :2, :2]
        Sxy = S4[todo][:, :2, 2:]
        Syy = S4[todo][:, 2:, 2:]
        lam, V = np.linalg.eigh(0.5 * (Sxx + Sxx.transpose(0, 2, 1)))
        lam = np.clip(lam, 0.0, None)
        R = V * np.sqrt(lam)[:, None, :]                                   # Sxx = R Rᵀ
        tol = 1e-13 * np.maximum(lam[:, -1:], 1e-300)
        inv = np.where(lam > tol, 1.0 / np.where(lam > tol, lam, 1.0), 0.0)
        Sxx_pinv = (V * inv[:, None, :]) @ V.transpose(0, 2, 1)
        Bm = Sxy.transpose(0, 2, 1) @ Sxx_pinv                              # E[y|x] = B x
        Sc = Syy - Bm @ Sxy
        Sc = 0.5 * (Sc + Sc.transpose(0, 2, 1))
        Sc[:, 0, 0] = np.maximum(Sc[:, 0, 0], 0.0)
        Sc[:, 1, 1] = np.maximum(Sc[:, 1, 1], 0.0)
        BR = Bm @ R                                                          # m = B R z
        smax = np.sqrt(lam[:, -1])
        rank = np.where(lam[:, 0] > tol[:, 0], 2, 1)
        orders = np.array([_outer_order(s_, r_) for s_, r_ in zip(smax, rank)])
        for n, rk in sorted(set(zip(orders.tolist(), rank.tolist()))):
            Z, W = rule(rk, int(n))
            if rk == 1:                       # x₁, x₂ collinear: integrate along the top eigenvector
                Z = np.concatenate([np.zeros_like(Z), Z], axis=1)
            sel = np.nonzero((orders == n) & (rank == rk))[0]
            step = max(1, max_nodes_batch // Z.shape[0])
            for s0 in range(0, sel.size, step):
                g = sel[s0:s0 + step]
                x = np.matmul(R[g], Z.T)                                     # (b, 2, Q)
                m = np.matmul(BR[g], Z.T)
                fx = np.where(kinds[todo[g], 0][:, None, None], erf(x), x)
                ex = fx[:, 0] * fx[:, 1]
                ey = erf_pair_mean(m[:, 0], m[:, 1], Sc[g, 0, 0][:, None], Sc[g, 0, 1][:, None],
                                   Sc[g, 1, 1][:, None])
                e4 = (ex * ey) @ W
                e2x = ex @ W
                e2y = erf_pair_mean(0.0, 0.0, Syy[g, 0, 0], Syy[g, 0, 1], Syy[g, 1, 1])
                idx = todo[g]
                out[idx] = e4 - e2x * e2y
                mx[idx] = e2x
                my[idx] = e2y
    # undo the swap for the returned means
    mx_, my_ = mx.copy(), my.copy()
    mx_[swap], my_[swap] = my[swap], mx[swap]
    return out, mx_, my_


# ---------------------------------------------------------------------------------------------
# positively homogeneous activations (relu, linear): an exact rule in one or two dimensions
# ---------------------------------------------------------------------------------------------
def homogeneous(act) -> bool:
    """Whether ``act`` is a built-in activation whose pieces are homogeneous polynomials with kinks only
    at 0 (relu, linear): then products of φ, φ' integrate exactly by :func:`polar_rule`."""
    from .expectations import activation_name, is_builtin_activation

    return is_builtin_activation(act) and activation_name(act) in ("relu", "linear")


def gaussian_rule(act, S, order=None):
    """Nodes (r, Q) and weights of a rule for N(0, S): :func:`polar_rule` for relu/linear in at most two
    dimensions, else tensor Gauss–Hermite on an eigen-square-root (``order`` per dimension)."""
    S = np.atleast_2d(np.asarray(S, dtype=np.float64))
    r = S.shape[0]
    if r <= 2 and homogeneous(act):
        return polar_rule(S)
    Z, W = rule(r, order)
    lam, V = np.linalg.eigh(0.5 * (S + S.T))
    return (V * np.sqrt(np.clip(lam, 0.0, None))) @ Z.T, W


def expect4(act, fns, S4):
    """E[f₁(x₁) f₂(x₂) f₃(x₃) f₄(x₄)] for a batch of 4×4 covariances (coincident variables merged first;
    the exact polar rule for relu/linear in ≤ 2 distinct variables, relu's closed-form conditional rule in 3 or 4
    (:mod:`limits.kernels.relu_fourpoint`), tensor Gauss–Hermite otherwise)."""
    return expect4_many(act, [fns], S4)[0]


def expect4_many(act, fns_list, S4):
    """:func:`expect4` for several function lists at once (K, B): each covariance's nodes are built once and each
    distinct (function, variable) evaluated once across the lists."""
    S4 = np.asarray(S4, dtype=np.float64)
    out = np.empty((len(fns_list), S4.shape[0]))
    relu = _relu_powers(act, fns_list)
    for (pat, reps), members in merge_groups(S4).items():
        mem = np.asarray(members)
        S = S4[np.ix_(mem, reps, reps)]
        if len(reps) <= 2 and homogeneous(act):
            for t, n in enumerate(mem):
                x, W = gaussian_rule(act, S[t])
                cache: dict = {}
                for k, fns in enumerate(fns_list):
                    out[k, n] = _slot_product(fns, pat, lambda v: x[v], cache) @ W
            continue
        if relu is not None and _relu_exact(relu, pat, len(reps), S, mem, out):
            continue
        Z, W = rule(len(reps), ORDERS[len(reps)])
        lam, V = np.linalg.eigh(0.5 * (S + S.transpose(0, 2, 1)))
        step = max(1, 4_000_000 // Z.shape[0])
        for s0 in range(0, len(mem), step):
            sl = slice(s0, s0 + step)
            x = np.matmul(V[sl] * np.sqrt(np.clip(lam[sl], 0.0, None))[:, None, :], Z.T)     # (b, r, Q)
            cache = {}
            for k, fns in enumerate(fns_list):
                out[k, mem[sl]] = _slot_product(fns, pat, lambda v: x[:, v, :], cache) @ W
    return out


def is_relu(act) -> bool:
    """Whether ``act`` is the built-in relu (whose 3- and 4-variable moments :mod:`limits.kernels.relu_fourpoint`
    integrates without crossing a kink)."""
    from .expectations import activation_name, is_builtin_activation

    return is_builtin_activation(act) and activation_name(act) == "relu"


def _relu_powers(act, fns_list):
    """Per function list, per slot: 1 (relu), 0 (step) or None (the constant 1) when ``act`` is the built-in relu and
    every function is φ, φ' or ``numpy.ones_like``; else None (:mod:`limits.kernels.relu_fourpoint` applies)."""
    if not is_relu(act):
        return None
    code = {id(act.phi): 1, id(act.dphi): 0, id(np.ones_like): None}
    if any(id(f) not in code for fns in fns_list for f in fns):
        return None
    return [[code[id(f)] for f in fns] for fns in fns_list]


def _relu_exact(powers_list, pat, r, S, mem, out):
    """Fill ``out[:, mem]`` for 3 or 4 distinct variables by :func:`limits.kernels.relu_lowrank.expect_many` (no
    quadrature across relu's kinks; singular and nearly singular covariances by their rank — a singular Gaussian is a
    lower-dimensional one), all covariances at once (:func:`limits.kernels.relu_batch.expect_batch`); False (nothing
    written) only for other dimensions."""
    from .relu_batch import expect_batch

    if r not in (3, 4):
        return False
    per_var = []
    for slots in powers_list:
        pw = [None] * r
        for slot, p in enumerate(slots):
            if p is not None:
                v = pat[slot]
                pw[v] = (pw[v] or 0) + p
        per_var.append(pw)
    out[:, mem] = expect_batch(S, per_var)
    return True


def _slot_product(fns, pat, var, cache=None):
    """Π_k fns[k](variable pat[k]), each distinct (function, variable) evaluated once (``cache``: shared across
    calls on the same nodes)."""
    cache = {} if cache is None else cache
    prod = None
    for k in range(4):
        key = (id(fns[k]), pat[k])
        if key not in cache:
            cache[key] = fns[k](var(pat[k]))
        prod = cache[key] if prod is None else prod * cache[key]
    return prod


def cov_phiphi(act, S4):
    """Cov(φ(x₁)φ(x₂), φ(y₁)φ(y₂)) for a batch of 4×4 covariances: erf with its inner pair in closed form
    (:func:`cov4_erf`), relu/linear by :func:`expect4` (exact polar rule in ≤ 2 variables), else :func:`cov4`."""
    S4 = np.asarray(S4, dtype=np.float64)
    from .expectations import activation_name, is_builtin_activation

    if is_builtin_activation(act) and activation_name(act) == "erf":
        return cov4_erf(np.ones((S4.shape[0], 2), bool), S4)[0]
    if homogeneous(act):
        one = np.ones_like
        f = act.phi
        e4, ex, ey = expect4_many(act, [[f] * 4, [f, f, one, one], [one, one, f, f]], S4)
        return e4 - ex * ey
    return cov4(act.phi, np.ones((S4.shape[0], 2), bool), S4)[0]


def cov_pairs(kinds, S4):
    """Cov(a(x₁)a(x₂), b(x₃)b(x₄)) for a batch of 4×4 covariances, a, b = relu (``kinds`` True) or the identity
    (False), without a quadrature across a kink: two identities by Isserlis; relu with an identity pair through
    x = relu(x) − relu(−x) (the negated variables' covariance flipped), each term by :func:`expect4`
    (:mod:`limits.kernels.relu_fourpoint`)."""
    from ..activations import BUILTIN

    relu = BUILTIN["relu"]
    S4 = np.asarray(S4, dtype=np.float64)
    kinds = np.asarray(kinds, dtype=bool)
    out = np.empty(S4.shape[0])
    f, one = relu.phi, np.ones_like
    for n in range(S4.shape[0]):
        S = S4[n]
        ka, kb = kinds[n]
        if not ka and not kb:
            out[n] = S[0, 2] * S[1, 3] + S[0, 3] * S[1, 2]
            continue
        ident = [0, 1] if not ka else ([2, 3] if not kb else [])
        total = 0.0
        for signs in ([(1, 1)] if not ident else [(1, 1), (1, -1), (-1, 1), (-1, -1)]):
            d = np.ones(4)
            for slot, sg in zip(ident, signs):
                d[slot] = sg
            total += np.prod(signs) * expect4(relu, [f] * 4, (d[:, None] * S * d[None, :])[None])[0]
        pair = lambda i, j: S[i, j] if (i in ident) else expect4(relu, [f, f, one, one], S[np.ix_(   # noqa: E731
            [i, j, i, j], [i, j, i, j])][None])[0]
        out[n] = total - pair(0, 1) * pair(2, 3)
    return out
