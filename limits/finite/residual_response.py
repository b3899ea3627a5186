"""Empirical response functions of finite residual / feed-forward networks by finite differences
(seed 004 Fig. 7 and Fig. 2b): perturb one entry of the read-in kernel K⁰ by ±ε, keep the other
entries of the 2×2 block fixed (for a covariance the two variances are restored: "rescaling the
variances to their original values so that only the covariances are perturbed"), run the *same*
weights on both inputs (common random numbers: explicit weight matrices), and difference

    C^l = s_l φ(h^{l-1})·φ(h^{l-1})/N + b_l          (seed 004 Eq. 17–18; l = 1..L+1)
    K^l = h^l·h^l/N                                   (stream Gram)

giving per-initialisation estimates  η^l = (N/d_in) ∂C^l/∂K⁰,  χ^l = (N/d_in) ∂K^l/∂K⁰,
χ_out = (N/d_in) ∂C^{L+1}/∂K⁰, with central differences. η⁰ = χ⁰ = N/d_in by construction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array, generator, positive_float, positive_int
from ..results import Result
from .forward import forward
from .network import mlp, resnet
from .weights import init_weights, streams_from_root
from ..registry import sweep_computation


def perturbed_pair(x_a, x_b, delta, diagonal=False):
    """Inputs (x_a', x_b') whose overlap matrix differs from that of (x_a, x_b) by ``delta`` in one
    entry: the covariance x_a·x_b (norms kept: x_b rotated in the span of x_a, x_b) or, with
    ``diagonal=True``, the variance x_a·x_a (x_a rescaled)."""
    x_a = np.asarray(x_a, float)
    x_b = np.asarray(x_b, float)
    if diagonal:
        n2 = float(x_a @ x_a)
        if n2 + delta <= 0:
            raise ValueError("delta makes the variance negative")
        return x_a * np.sqrt((n2 + delta) / n2), x_b.copy()
    na, nb = np.linalg.norm(x_a), np.linalg.norm(x_b)
    u = x_a / na
    c = float(x_b @ u)
    v = x_b - c * u
    nv = np.linalg.norm(v)
    if nv == 0:
        raise ValueError("x_a and x_b are parallel; the covariance cannot be perturbed at fixed norms")
    v /= nv
    cos_new = (float(x_a @ x_b) + delta) / (na * nb)
    if abs(cos_new) >= 1:
        raise ValueError("delta too large: |cos| would exceed 1")
    return x_a.copy(), nb * (cos_new * u + np.sqrt(1 - cos_new ** 2) * v)


@dataclass(frozen=True)
class FDResponse(Result):
    """Per-initialisation finite-difference responses of entry (α, β): ``eta`` (S, L+1), ``chi``
    (S, L+1), ``chi_out`` (S,), with ``mean``/``se`` views, plus the settings."""

    eta: np.ndarray
    chi: np.ndarray
    chi_out: np.ndarray
    entry: tuple
    eps: float
    width: int
    d_in: int
    n_inits: int

    def mean_se(self, name):
        """Mean and standard error over inits (ValueError for one init: the SE is undefined)."""
        from ..stats import mean_se

        return mean_se(getattr(self, name), axis=0, name="n_inits")


@sweep_computation
def fd_response(X, depth, width, n_inits, *, entry=(0, 1), eps=1e-5, rng=None, seed=None, activation="erf",
                sigma_w2=1.0, sigma_b2=0.0, rho=1.0, residual=True, sigma_w2_in=None, sigma_b2_in=None,
                sigma_w2_out=None, sigma_b2_out=None, chunk=None, memory_mb=256) -> FDResponse:
    """Finite-difference response of entry ``entry`` = (α, β) of the read-in kernel (module docstring)."""
    X = finite_array(X, "X", ndim=2)
    L = positive_int(depth, "depth")
    N = positive_int(width, "width")
    S = positive_int(n_inits, "n_inits")
    eps = positive_float(eps, "eps")
    a, b = (int(i) for i in entry)
    P, d = X.shape
    if not (0 <= a < P and 0 <= b < P):
        raise ValueError(f"entry {entry} out of range for P = {P}")
    sw2_in = sigma_w2 if sigma_w2_in is None else sigma_w2_in
    sw2_out = sigma_w2 if sigma_w2_out is None else sigma_w2_out
    sb2_out = sigma_b2 if sigma_b2_out is None else sigma_b2_out
    delta = eps * d / sw2_in                       # ΔK⁰ = σ²_in Δ(x·x)/d_in = ε
    diagonal = a == b
    xa, xb = X[a], X[b if not diagonal else (a + 1) % P if P > 1 else a]
    xa_p, xb_p = perturbed_pair(xa, xb, +delta, diagonal)
    xa_m, xb_m = perturbed_pair(xa, xb, -delta, diagonal)
    Xs = np.stack([xa_p, xb_p, xa_m, xb_m])
    sb2_in = sigma_b2 if sigma_b2_in is None else sigma_b2_in
    common = dict(d_out=1, activation=activation, sigma_w2_in=sw2_in, sigma_b2_in=sb2_in,
                  sigma_w2_out=sw2_out, sigma_b2_out=sb2_out)
    if residual:
        net = resnet(d, N, L, sigma_w2=sigma_w2, sigma_b2=sigma_b2, rho=rho, **common)
    else:   # ρ on a feed-forward layer is the same as σ² → ρ²σ² (as in limits.kernels.nngp)
        net = mlp(d, N, L, sigma_w2=rho ** 2 * sigma_w2, sigma_b2=rho ** 2 * sigma_b2, **common)
    phi = net.act().phi
    s_hidden = rho ** 2 * sigma_w2
    root = int(generator(rng, seed).integers(0, 2**63 - 1))
    if chunk is None:
        chunk = max(1, int(memory_mb * 2**20 // (8.0 * (L * N * N + N * d + 8 * N * (L + 2)))))
    chunk = min(chunk, S)
    j = 1 if not diagonal else 0                   # column of the perturbed entry in the 2×2 block
    eta = np.empty((S, L + 1))
    chi = np.empty((S, L + 1))
    chi_out = np.empty(S)
    scale = N / d / (2 * eps)
    for st in range(0, S, chunk):
        idx = range(st, min(st + chunk, S))
        w = init_weights(net, streams=streams_from_root(root, idx))
        fwd = forward(net, w, Xs)
        sl = slice(st, st + len(idx))
        for l, h in enumerate(fwd.h):
            Kp = np.einsum("sn,sn->s", h[:, 0], h[:, j]) / N
            Km = np.einsum("sn,sn->s", h[:, 2], h[:, 2 + j]) / N
            chi[sl, l] = (Kp - Km) * scale
            f = phi(h)
            Cp = np.einsum("sn,sn->s", f[:, 0], f[:, j]) / N
            Cm = np.einsum("sn,sn->s", f[:, 2], f[:, 2 + j]) / N
            dC = (Cp - Cm) * scale
            if l < L:
                eta[sl, l + 1] = s_hidden * dC
            else:
                chi_out[sl] = sw2_out * dC
    eta[:, 0] = N / d
    return FDResponse(eta, chi, chi_out, (a, b), eps, N, d, S)
