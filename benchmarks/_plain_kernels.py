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


def relu_moments(K):
    q = np.diag(K)
    g = np.sqrt(np.outer(q, q))
    c = np.clip(K / g, -1.0, 1.0)
    th = np.arccos(c)
    E = g / (2.0 * np.pi) * (np.sqrt(1.0 - c * c) + (np.pi - th) * c)
    G = (np.pi - th) / (2.0 * np.pi)
    return E, G


def gelu_moments(K):
    """gelu(x) = xΦ(x): Gaussian integration by parts gives closed forms in det(I + K)."""
    q = np.diag(K)
    k11, k22 = q[:, None], q[None, :]
    det = np.maximum(k11 * k22 - K * K, 0.0)
    D = 1.0 + k11 + k22 + det
    B4 = 1.0 / (2.0 * np.pi * np.sqrt(D))
    B1 = 0.25 + np.arctan2(K, np.sqrt(D)) / (2.0 * np.pi)
    E = k11 * B4 * (k22 + det) / (1.0 + k11) + K * B1 + K * K * B4 / (1.0 + k22)
    G = B1 + K * B4 * (1.0 / (1.0 + k11) + 1.0 / (1.0 + k22) + 1.0 / D)
    return E, G


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
