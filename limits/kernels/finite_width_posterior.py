"""O(1/N) correction of the read-out Bayesian posterior predictive of finite networks
(docs/theory/finite_width.rst §6).

Inference as in ``limits.predict.nngp_posterior`` with only the read-out Bayesian: the hidden layers of
``model.finite(N)`` are drawn at initialisation and kept, the read-out weights get their Gaussian prior
and the likelihood y = f(X) + N(0, σ²_noise). Given the hidden layers, the posterior predictive at X*
is Gaussian with the network's own read-out kernel C = C^{L+1} (Rao–Blackwellised f fᵀ)::

    μ(C) = C_*X (C_XX + σ²I)⁻¹ y,     Σ(C) = C_** − C_*X (C_XX + σ²I)⁻¹ C_X*.

Across networks C = K + δ with E δ = K1/N, Cov δ = V/N (:func:`limits.kernels.finite_width`), so by
the delta method to O(1/N)::

    E[μ(C)] = μ(K) + (1/N) [ Dμ·K1 + ½ Σ_k λ_k D²μ[e_k, e_k] ],   V = Σ_k λ_k e_k e_kᵀ,
    E[Σ(C)] = Σ(K) + (1/N) [ DΣ·K1 + ½ Σ_k λ_k D²Σ[e_k, e_k] ],
    N·Var(μ(C)) = Σ_k λ_k (Dμ·e_k)²,

and the predictive variance of the ensemble of networks is E[Σ] + Var(μ) (law of total variance).
The directional derivatives of the rational maps are exact (:func:`posterior_derivatives`; A = C_XX + σ²I,
α = A⁻¹y, B = A⁻¹C_X*, E a symmetric direction)::

    Dμ[E] = E_*X α − C_*X A⁻¹E_XX α,         D²μ[E, E] = 2 (C_*X A⁻¹E_XX − E_*X) A⁻¹E_XX α,
    DΣ[E] = E_** − 2 sym(E_*X B) + Bᵀ E_XX B,  D²Σ[E, E] = −2 (E_*X − BᵀE_XX) A⁻¹ (E_X* − E_XX B).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array
from ..results import Result


@dataclass(frozen=True)
class PosteriorCorrection(Result):
    """``mean`` (P*,), ``mean1``: E[μ_N] = mean + mean1/N; ``var`` (P*,), ``var1``: E[Σ_N] diagonal likewise;
    ``mean_var``: N·Var of μ_N across networks; ``noise``, ``params`` (model, X, y, X_test)."""

    mean: np.ndarray
    mean1: np.ndarray
    var: np.ndarray
    var1: np.ndarray
    mean_var: np.ndarray
    noise: float
    params: dict

    def predict(self, width):
        N = float(width)
        return self.mean + self.mean1 / N, self.var + (self.var1 + self.mean_var) / N


def posterior_maps(C, n, y, noise):
    """(μ, diag Σ) of the read-out posterior for a read-out kernel C on [X; X*] (n training rows);
    C may carry leading batch axes."""
    A = C[..., :n, :n] + noise * np.eye(n)
    Cs = C[..., n:, :n]
    sol = np.linalg.solve(A, np.broadcast_to(y, C.shape[:-2] + (n,))[..., None])[..., 0]
    mu = np.einsum("...ij,...j->...i", Cs, sol)
    W = np.linalg.solve(A, np.swapaxes(Cs, -1, -2))
    var = np.diagonal(C[..., n:, n:], axis1=-2, axis2=-1) - np.einsum("...ij,...ji->...i", Cs, W)
    return mu, var


def posterior_derivatives(C, n, y, noise, E):
    """(Dμ[E], D²μ[E, E], diag DΣ[E], diag D²Σ[E, E]) of :func:`posterior_maps` at C along the symmetric
    direction E (module docstring; one Cholesky factorisation of A = C_XX + σ²I, no differences)."""
    from scipy.linalg import cho_factor, cho_solve

    fac = cho_factor(C[:n, :n] + noise * np.eye(n))
    Cs, Es, Exx = C[n:, :n], E[n:, :n], E[:n, :n]
    alpha = cho_solve(fac, y)
    B = cho_solve(fac, Cs.T)                                   # A⁻¹ C_X*
    Aea = cho_solve(fac, Exx @ alpha)                          # A⁻¹ E_XX α
    d_mu = Es @ alpha - Cs @ Aea
    d2_mu = 2.0 * (Cs @ cho_solve(fac, Exx @ Aea) - Es @ Aea)
    R = Es.T - Exx @ B                                          # E_X* − E_XX B
    d_var = np.diag(E[n:, n:]) - 2.0 * np.einsum("ij,ji->i", Es, B) + np.einsum("ji,jk,ki->i", B, Exx, B)
    d2_var = -2.0 * np.einsum("ji,ji->i", R, cho_solve(fac, R))
    return d_mu, d2_mu, d_var, d2_var


def finite_width_posterior(model, X, y, X_test, noise=1e-2) -> PosteriorCorrection:
    """O(1/N) correction of the read-out posterior predictive (module docstring)."""
    from ..model import as_model
    from .finite_width import finite_width
    from .fluctuations import pair_index, to_matrix

    m = as_model(model)
    X = finite_array(X, "X", ndim=2)
    Xt = finite_array(X_test, "X_test", ndim=2)
    y = finite_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    noise = float(noise)
    if not noise > 0:
        raise ValueError(f"noise must be > 0 (the likelihood variance), got {noise}")
    n = X.shape[0]
    Z = np.vstack([X, Xt])
    r = finite_width(m, Z, ntk=False)
    P = Z.shape[0]
    pairs = pair_index(P)
    V = r.params_cov
    lam, U = np.linalg.eigh(0.5 * (V + V.T))
    K = r.K
    f0 = np.concatenate(posterior_maps(K, n, y, noise))
    d = posterior_derivatives(K, n, y, noise, r.K1)
    corr = np.concatenate([d[0], d[2]])
    mvar = np.zeros_like(f0)
    for lk, u in zip(lam, U.T):
        if abs(lk) < 1e-14 * max(1.0, float(np.max(np.abs(lam)))):
            continue
        d_mu, d2_mu, d_var, d2_var = posterior_derivatives(K, n, y, noise, to_matrix(u, pairs, P))
        corr = corr + 0.5 * lk * np.concatenate([d2_mu, d2_var])
        mvar = mvar + lk * np.concatenate([d_mu, d_var]) ** 2
    k = Xt.shape[0]
    return PosteriorCorrection(f0[:k], corr[:k], f0[k:], corr[k:], mvar[:k], noise,
                               {"model": m.to_dict() if isinstance(m.activation, str) else None,
                                "X": X, "y": y, "X_test": Xt})
