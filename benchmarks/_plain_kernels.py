"""Baseline for the kernel benchmarks: the NNGP/NTK recursion written the obvious way in plain
vectorised numpy — full P×P matrices, one closed-form expression per activation, fresh temporaries
(what a careful user writes in an afternoon; not a per-entry loop).

Same network and conventions as ``limits.kernels.nngp`` (seed 004 Eq. 29–30, NTK parameterisation):
C = ρ²(σ_w² E[φφ] + σ_b²), K' = [K] + C, Θ' = [Θ] + C + ρ²σ_w² E[φ'φ'] ∘ Θ; read-out
K_out = σ²_w,out E[φφ] + σ²_b,out, Θ_out = K_out + σ²_w,out E[φ'φ'] ∘ Θ^L.
"""
from __future__ import annotations

import numpy as np


def erf_moments(K):
    a = 1.0 + 2.0 * np.diag(K)
    aa = np.outer(a, a)
    E = 2.0 / np.pi * np.arcsin(np.clip(2.0 * K / np.sqrt(aa), -1.0, 1.0))
    G = 4.0 / np.pi / np.sqrt(aa - 4.0 * K * K)
    return E, G


def relu_from(K, g):
    """ReLU's (E[φφ], E[φ'φ']) from the covariance K and g = √(q_u q_v) (any broadcastable shapes)."""
    c = np.clip(K / g, -1.0, 1.0)
    th = np.arccos(c)
    return g / (2.0 * np.pi) * (np.sqrt(1.0 - c * c) + (np.pi - th) * c), (np.pi - th) / (2.0 * np.pi)


def relu_moments(K):
    q = np.diag(K)
    return relu_from(K, np.sqrt(np.outer(q, q)))


def gelu_moments(K):
    """gelu(x) = xΦ(x): Gaussian integration by parts gives closed forms in det(I + K) (the block formula
    of :func:`_cross_moments` with both variance vectors the diagonal)."""
    q = np.diag(K)
    return _cross_moments("gelu", K, q, q)


MOMENTS = {"erf": erf_moments, "relu": relu_moments, "gelu": gelu_moments}


def plain_nngp(K0, depth, act, sigma_w2, sigma_b2, residual=False, rho=1.0, sigma_w2_out=None,
               sigma_b2_out=None):
    """(K^L, Θ^L, K_out, Θ_out) by the textbook recursion on full matrices."""
    mom = MOMENTS[act]
    sw2_out = sigma_w2 if sigma_w2_out is None else sigma_w2_out
    sb2_out = sigma_b2 if sigma_b2_out is None else sigma_b2_out
    K, T = K0, K0
    r2 = rho * rho
    for _ in range(depth):
        E, G = mom(K)
        C = r2 * (sigma_w2 * E + sigma_b2)
        branch = C + r2 * sigma_w2 * G * T
        K, T = (K + C, T + branch) if residual else (C, branch)
    E, G = mom(K)
    K_out = sw2_out * E + sb2_out
    return K, T, K_out, K_out + sw2_out * G * T


def _cross_moments(act, K, a, b):
    """(E[φφ], E[φ'φ']) for the covariances [[a_α, K_αβ], [K_αβ, b_β]] (a, b the variance vectors), the
    closed forms of :func:`erf_moments` … written for a P1×P2 block: the row and column factors are outer
    products of vectors (no P1×P2 square roots of products)."""
    if act == "erf":
        ia, ib = 1.0 / np.sqrt(1.0 + 2.0 * a), 1.0 / np.sqrt(1.0 + 2.0 * b)
        W = np.outer(ia, ib)
        s = np.clip(2.0 * K * W, -1.0, 1.0)
        return 2.0 / np.pi * np.arcsin(s), 4.0 / np.pi * W / np.sqrt(1.0 - s * s)
    if act == "relu":
        return relu_from(K, np.outer(np.sqrt(a), np.sqrt(b)))
    if act == "gelu":
        k11, k22 = a[:, None], b[None, :]
        det = np.maximum(k11 * k22 - K * K, 0.0)
        D = 1.0 + k11 + k22 + det
        B4 = 1.0 / (2.0 * np.pi * np.sqrt(D))
        B1 = 0.25 + np.arctan2(K, np.sqrt(D)) / (2.0 * np.pi)
        E = k11 * B4 * (k22 + det) / (1.0 + k11) + K * B1 + K * K * B4 / (1.0 + k22)
        return E, B1 + K * B4 * (1.0 / (1.0 + k11) + 1.0 / (1.0 + k22) + 1.0 / D)
    raise ValueError(act)


def _diag_moments(act, q):
    """(E[φ(u)²], E[φ'(u)²]), u ~ N(0, q): the same closed forms at correlation one, on the vector."""
    E, G = _cross_moments(act, q[:, None], q, q)
    return np.diag(E).copy(), np.diag(G).copy()


def plain_cross(X1, X2, depth, act, sigma_w2, sigma_b2, residual=False, rho=1.0):
    """(K_out, Θ_out) between X1 (P1×d) and X2 (P2×d) by the textbook recursion on the P1×P2 block plus the
    two variance vectors (seed 004 Eq. 29–30; read-in/read-out variances = hidden ones, as
    :func:`plain_nngp`): C = ρ²(σ_w² E[φφ] + σ_b²) from (q1_α, K_αβ, q2_β), q' = [q] + ρ²(σ_w² E[φ²] + σ_b²)."""
    d = X1.shape[1]
    r2 = rho * rho
    q1 = sigma_w2 * np.einsum("ij,ij->i", X1, X1) / d + sigma_b2
    q2 = sigma_w2 * np.einsum("ij,ij->i", X2, X2) / d + sigma_b2
    K = sigma_w2 * (X1 @ X2.T) / d + sigma_b2
    T = K
    for _ in range(depth):
        E, G = _cross_moments(act, K, q1, q2)
        C = r2 * (sigma_w2 * E + sigma_b2)
        branch = C + r2 * sigma_w2 * G * T
        c1 = r2 * (sigma_w2 * _diag_moments(act, q1)[0] + sigma_b2)
        c2 = r2 * (sigma_w2 * _diag_moments(act, q2)[0] + sigma_b2)
        if residual:
            K, T, q1, q2 = K + C, T + branch, q1 + c1, q2 + c2
        else:
            K, T, q1, q2 = C, branch, c1, c2
    E, G = _cross_moments(act, K, q1, q2)
    K_out = sigma_w2 * E + sigma_b2
    return K_out, K_out + sigma_w2 * G * T


def plain_nngp_layers(K0, depth, act, sigma_w2, sigma_b2, residual=False, rho=1.0):
    """:func:`plain_nngp` keeping every layer: lists K[l], C[l], Θ[l] (l = 0..L; the fresh arrays each layer
    creates anyway, no copies) and (K_out, Θ_out)."""
    mom = MOMENTS[act]
    K, T = K0, K0
    Ks, Cs, Ts = [K0], [K0], [K0]
    r2 = rho * rho
    for _ in range(depth):
        E, G = mom(K)
        C = r2 * (sigma_w2 * E + sigma_b2)
        branch = C + r2 * sigma_w2 * G * T
        K, T = (K + C, T + branch) if residual else (C, branch)
        Ks.append(K)
        Cs.append(C)
        Ts.append(T)
    E, G = mom(K)
    K_out = sigma_w2 * E + sigma_b2
    return Ks, Cs, Ts, K_out, K_out + sigma_w2 * G * T


_SMOOTH = {"tanh": (np.tanh, lambda x: 1.0 / np.cosh(x) ** 2),
           "sigmoid": (lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)), lambda x: 0.25 / np.cosh(0.5 * x) ** 2)}


def gh_moments(K, act, n=64, chunk=2048):
    """(E[φφ], E[φ'φ']) of a smooth activation with no closed form, the obvious way: for every entry of the
    upper triangle an n×n tensor Gauss–Hermite rule in the Cholesky variables u = s₁x, v = s₂(c x + √(1−c²) y)."""
    phi, dphi = _SMOOTH[act]
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / np.sqrt(2.0 * np.pi)
    W = np.outer(w, w)
    P = K.shape[0]
    s = np.sqrt(np.diag(K))
    iu = np.triu_indices(P)
    c = np.clip(K[iu] / (s[iu[0]] * s[iu[1]]), -1.0, 1.0)
    e = np.empty(c.size)
    g = np.empty(c.size)
    for lo in range(0, c.size, chunk):
        sl = slice(lo, lo + chunk)
        s1, s2, cc = s[iu[0][sl], None, None], s[iu[1][sl], None, None], c[sl, None, None]
        u = s1 * x[None, :, None]
        v = s2 * (cc * x[None, :, None] + np.sqrt(1.0 - cc * cc) * x[None, None, :])
        e[sl] = np.einsum("mab,ab->m", phi(u) * phi(v), W)
        g[sl] = np.einsum("mab,ab->m", dphi(u) * dphi(v), W)
    E = np.empty((P, P))
    G = np.empty((P, P))
    E[iu], G[iu] = e, g
    E[(iu[1], iu[0])], G[(iu[1], iu[0])] = e, g
    return E, G


def plain_gh_nngp(K0, depth, act, sigma_w2, sigma_b2, n=64):
    """(K^L, Θ^L, K_out, Θ_out) by the textbook MLP recursion (as :func:`plain_nngp`, read-out with the same
    σ_w², σ_b²) with per-entry tensor Gauss–Hermite moments (:func:`gh_moments`)."""
    K, T = K0, K0
    for _ in range(depth):
        E, G = gh_moments(K, act, n)
        C = sigma_w2 * E + sigma_b2
        K, T = C, C + sigma_w2 * G * T
    E, G = gh_moments(K, act, n)
    K_out = sigma_w2 * E + sigma_b2
    return K, T, K_out, K_out + sigma_w2 * G * T


# ------------------------------------------------------------------------------------------------ CNN-GP / CNTK
def _conv_same(K, k, s, w, b, full):
    """SAME convolution (filter k, stride s, jax.lax geometry) of a block (A, B, h[, h'], w[, w']) the obvious
    way: zero-pad every spatial axis, add the strided slices of every filter offset (both positions of a pair
    shifted alike), times σ_w²/k², plus σ_b²."""
    n = K.shape[2]
    o = -(-n // s)
    pad = max((o - 1) * s + k - n, 0)
    lo = pad // 2
    Kp = np.pad(K, [(0, 0), (0, 0)] + [(lo, pad - lo)] * (K.ndim - 2))
    out = np.zeros(K.shape[:2] + (o,) * (K.ndim - 2))
    for fh in range(k):
        for fw in range(k):
            offs = (fh, fh, fw, fw) if full else (fh, fw)
            out += Kp[(slice(None), slice(None)) + tuple(slice(f, f + s * (o - 1) + 1, s) for f in offs)]
    return w / (k * k) * out + b


def plain_cnn_gap(X1, X2, convs, w_out, b_out):
    """(K_out, Θ_out) between X1, X2 (P, H, W, C) of [Conv k×k SAME stride s (σ_w², σ_b²), ReLU]* → GlobalAvgPool →
    Dense(w_out, b_out) (NTK parameterisation, ``convs`` a list of (k, s, σ_w², σ_b²)): the full covariance of
    every pair of positions (A, B, h, h', w, w') of the cross block, the per-position variances of each side
    (conv and ReLU map equal positions to equal positions), the closed-form ReLU on the broadcast variances."""
    if X1.shape[1] != X1.shape[2]:
        raise ValueError("plain_cnn_gap: square images only")
    C = X1.shape[-1]
    K = np.einsum("pikc,qjlc->pqijkl", X1, X2) / C
    q1, q2 = (np.einsum("pikc,pikc->pik", X, X) / C for X in (X1, X2))
    T = np.zeros_like(K)
    for k, s, w, b in convs:
        K = _conv_same(K, k, s, w, b, True)
        T = _conv_same(T, k, s, w, 0.0, True) + K
        q1, q2 = (_conv_same(q[:, None], k, s, w, b, False)[:, 0] for q in (q1, q2))
        g = np.sqrt(q1[:, None, :, None, :, None] * q2[None, :, None, :, None, :])
        K, G = relu_from(K, g)
        T = G * T
        q1, q2 = q1 / 2.0, q2 / 2.0
    K_out = w_out * K.mean(axis=(2, 3, 4, 5)) + b_out
    return K_out, w_out * T.mean(axis=(2, 3, 4, 5)) + K_out
