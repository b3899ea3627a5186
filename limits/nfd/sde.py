"""Particle Euler–Maruyama for McKean–Vlasov SDEs (docs/theory/nfd.rst §2–3), in separate pieces:

* Brownian sampling — :func:`brownian_increments` (standard normals × √dt, shape L×M×q), or any
  array of increments the caller supplies (common random numbers, couplings).
* coefficient terms — :func:`forward_coefficients` / :func:`backward_coefficients` build the
  ``drift(l, t, X)`` and ``diffusion(l, t, X, dW)`` callables; law-dependent coefficients use
  the empirical measure of the M particles (``interaction="empirical"``) or a supplied exact
  law (``interaction="exact"``: covariances of the Euler iterate from the kernel recursion).
* the solver — :func:`euler_maruyama` (forward or reverse time), which knows nothing about
  networks.

Forward SDE (seed 002 Prop. 2, eq. (2)):  ``dh_t = √(E[φ(h_t)²]) dB_t``; for P inputs sharing B
the increment covariance is ``E[φ(h^a)φ(h^b)] dt``.  Backward SDE (seed 002 Prop. 6):
``g_t = g_T + ∫_t^T φ'(h_s) √(E[g_s²]) dB̃_s``, ``g_T = v φ'(h_T)``, B̃ independent of B.
With empirical coefficients and M particles, the forward scheme with step T/L has exactly the
law of a width-M ResNet of depth L (rows of W^l φ(h^l)/√n are i.i.d. N(0, φᵀφ/n) given h^l).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..checks import finite_array, generator, positive_float, positive_int
from ..results import Result
from .kernel_ode import activation_label, input_gram
from ..registry import sweep_computation


# ----------------------------------------------------------------------------- Brownian sampling
def brownian_increments(rng, L: int, M: int, q: int, dt: float) -> np.ndarray:
    """Independent Brownian increments ``ΔB`` of shape (L, M, q) with variance ``dt``."""
    return np.sqrt(dt) * rng.standard_normal((L, M, q))


def psd_sqrt(C: np.ndarray, rel_tol: float = 1e-13) -> np.ndarray:
    """R with RᵀR = C for symmetric PSD C, tolerant of rank deficiency (eigenvalues below
    ``rel_tol · λ_max`` are set to zero; small negative round-off is clipped)."""
    C = 0.5 * (C + C.T)
    lam, V = np.linalg.eigh(C)
    lmax = max(float(lam[-1]), 0.0)
    lam = np.where(lam > rel_tol * lmax, lam, 0.0)
    return np.sqrt(lam)[:, None] * V.T


def correlate(dW: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Rows of ``dW`` (i.i.d. N(0, dt I)) mapped to i.i.d. N(0, dt C)."""
    return dW @ psd_sqrt(C)


# ----------------------------------------------------------------------------- the solver
@dataclass(frozen=True)
class SDEPath(Result):
    """Euler–Maruyama path: ``X[l]`` (M × q) at time ``t[l]``, l = 0..L (reverse: X[L] is the start)."""

    t: np.ndarray
    X: np.ndarray
    reverse: bool


def euler_maruyama(drift: Callable | None, diffusion: Callable, x0, T: float, L: int, dW,
                   reverse: bool = False) -> SDEPath:
    """Generic (McKean–Vlasov) Euler–Maruyama on the grid ``t_l = l T/L``.

    Forward: ``X_{l+1} = X_l + drift(l, t_l, X_l) dt + diffusion(l, t_l, X_l, dW[l])``.
    Reverse (a backward-running integral from T to 0):
    ``X_l = X_{l+1} + drift(l, t_l, X_{l+1}) dt + diffusion(l, t_l, X_{l+1}, dW[l])``.
    ``X`` is the whole particle ensemble (M × q), so coefficients may depend on its law.

    Parameters
    ----------
    drift : callable or None
        ``drift(l, t, X) -> (M, q)``; ``None`` for no drift.
    diffusion : callable
        ``diffusion(l, t, X, dW_l) -> (M, q)``, the noise increment of step ``l``.
    x0 : array (M, q)
        Start of the path (at t = 0, or at t = T when ``reverse``).
    T, L : float, int
        Time horizon and number of steps (``dt = T/L``).
    dW : array (L, ...)
        The random increments, one per step, passed to ``diffusion``.
    reverse : bool
        Integrate from T down to 0.

    Returns
    -------
    SDEPath
        ``X[l]`` at ``t[l]``, l = 0..L; raises ``ValueError`` if the path is not finite.
    """
    T = positive_float(T, "T")
    L = positive_int(L, "L")
    x0 = finite_array(x0, "x0", ndim=2)
    dW = np.asarray(dW, dtype=np.float64)
    if dW.shape[0] != L:
        raise ValueError(f"dW must have L={L} increments along axis 0, got {dW.shape[0]}")
    dt = T / L
    X = np.empty((L + 1,) + x0.shape)
    t = np.linspace(0.0, T, L + 1)
    if not reverse:
        X[0] = x0
        for l in range(L):
            inc = diffusion(l, t[l], X[l], dW[l])
            if drift is not None:
                inc = inc + dt * drift(l, t[l], X[l])
            X[l + 1] = X[l] + inc
    else:
        X[L] = x0
        for l in range(L - 1, -1, -1):
            inc = diffusion(l, t[l], X[l + 1], dW[l])
            if drift is not None:
                inc = inc + dt * drift(l, t[l], X[l + 1])
            X[l] = X[l + 1] + inc
    if not np.all(np.isfinite(X)):
        raise ValueError("Euler–Maruyama produced non-finite values (diverging dynamics)")
    return SDEPath(t=t, X=X, reverse=reverse)


# ----------------------------------------------------------------------------- coefficients
def _exact_forward_covs(Sigma0, T, L, activation):
    from .kernel_ode import phi_gram

    dt = T / L
    S = Sigma0.copy()
    out = []
    for _ in range(L):
        C = phi_gram(activation, S)
        out.append(C)
        S = S + dt * C
    return out


def forward_coefficients(activation, interaction="empirical", Sigma0=None, T=None, L=None):
    """Diffusion of the forward SDE: ``dW @ sqrt(C)``, C = E[φ(h)φ(h)ᵀ] (empirical or exact)."""
    act = _activation(activation)
    if interaction == "empirical":
        def diffusion(l, t, H, dW):
            F = act.phi(H)
            return correlate(dW, F.T @ F / H.shape[0])
    elif interaction == "exact":
        covs = _exact_forward_covs(Sigma0, T, L, activation)

        def diffusion(l, t, H, dW):
            return correlate(dW, covs[l])
    else:
        raise ValueError(f"interaction must be 'empirical' or 'exact', got {interaction!r}")
    return None, diffusion


def backward_coefficients(activation, H_path: np.ndarray, interaction="empirical", Gamma=None):
    """Diffusion of the backward SDE: ``φ'(h_l) ⊙ (dW @ sqrt(E[g gᵀ]))`` using the forward path."""
    act = _activation(activation)
    if interaction == "empirical":
        def diffusion(l, t, G, dW):
            return act.dphi(H_path[l]) * correlate(dW, G.T @ G / G.shape[0])
    elif interaction == "exact":
        def diffusion(l, t, G, dW):
            return act.dphi(H_path[l]) * correlate(dW, Gamma[l + 1])
    else:
        raise ValueError(f"interaction must be 'empirical' or 'exact', got {interaction!r}")
    return None, diffusion


def _activation(activation):
    import limits

    return limits.activation(activation)


# ----------------------------------------------------------------------------- network-level drivers
@dataclass(frozen=True)
class ParticleInit(Result):
    """Forward (and backward) particle solution at initialisation, M particles, L Euler steps.

    ``H`` ((L+1) × M × P) forward path, ``G`` backward path (or empty), ``v`` read-out coordinates;
    ``Sigma_emp`` = HᵀH/M per step, ``K_emp`` = φ(H_L)ᵀφ(H_L)/M, ``Gamma_emp[l]`` = G_lᵀG_l/M.
    """

    T: float
    L: int
    M: int
    activation: str
    design: str
    interaction: str
    H: np.ndarray
    G: np.ndarray
    Sigma_emp: np.ndarray
    K_emp: np.ndarray
    Gamma_emp: np.ndarray
    mean_feature: np.ndarray     # E[h^l] (average over particles and inputs), l = 0..L
    rms_feature: np.ndarray      # sqrt(E[(h^l)²]), l = 0..L


def initial_features(X, M: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """h_0 = U x/√d for M particles (rows of U ~ N(0, I_d)) and read-out coordinates v ~ N(0,1)."""
    X = finite_array(X, "X", ndim=2)
    Ucoord = rng.standard_normal((M, X.shape[1]))
    return Ucoord @ X.T / np.sqrt(X.shape[1]), rng.standard_normal(M)


def particles_needed(M, se, target_se) -> str:
    """How many particles bring a Monte Carlo SE ∝ M^{-1/2} from ``se`` down to ``target_se`` (text;
    no integer overflow for a tiny target)."""
    with np.errstate(over="ignore"):
        need = float(M) * np.square(np.float64(se) / target_se)
    return f"{int(np.ceil(need))}" if need < 1e15 else f"{need:.3g}"


@sweep_computation(not_paths={"store_path": "a flag: keep the particle paths in memory"})
def particles(X, T: float = 1.0, L: int = 64, M: int = 10_000, activation="erf", *, rng=None, seed=None,
              design="pre", interaction="empirical", backward=True, store_path=True,
              target_se: float | None = None) -> ParticleInit:
    """Particle Euler–Maruyama for the forward (and backward) SDE at initialisation.

    ``design="pre"``: ``h_{l+1} = h_l + √dt ξ_l``, ξ_l ~ N(0, E[φ(h_l)φ(h_l)ᵀ]) (docs/theory/nfd.rst §2);
    ``design="post"``: ``h_{l+1} = φ(h_l + √dt ξ_l)``, ξ_l ~ N(0, E[h_l h_lᵀ]) (docs/theory/nfd.rst §1);
    ``design="post_branch"``: ``h_{l+1} = h_l + φ(√dt ξ_l)`` (skip added after φ of the branch — the
    reading under which seed 002 Prop. 1's bound E[h^{l+1}] ≥ E[h^l] + c₁√(T/L)σ + c₂ applies).
    For relu, "post" converges to reflected Brownian motion (bounded in L) while "post_branch"
    grows like √L; both are measured (the seed's Eq. 9 was lost).
    Backward (pre only): ``g_L = v φ'(h_L)``, ``g_l = g_{l+1} + φ'(h_l) √dt ξ̃_l``, ξ̃ ~ N(0, E[g_{l+1}g_{l+1}ᵀ]).
    ``target_se``: warn (RuntimeWarning, with the Monte Carlo error) when the particle standard
    error of the terminal covariance exceeds it — too few particles for the requested accuracy.
    """
    T = positive_float(T, "T")
    L = positive_int(L, "L")
    M = positive_int(M, "M", minimum=2)
    rng = generator(rng, seed)
    if design not in ("pre", "post", "post_branch"):
        raise ValueError(f"design must be 'pre', 'post' or 'post_branch', got {design!r}")
    act = _activation(activation)
    S0 = input_gram(X)                             # ValueError naming X if X Xᵀ/d overflows
    H0, v = initial_features(X, M, rng)
    P = H0.shape[1]
    dt = T / L
    dW = brownian_increments(rng, L, M, P, dt)
    if design == "pre":
        _, diff = forward_coefficients(activation, interaction, S0, T, L)
        path = euler_maruyama(None, diff, H0, T, L, dW)
        H = path.X
    else:
        if interaction != "empirical":
            raise ValueError(f"design={design!r} supports interaction='empirical' only")
        H = np.empty((L + 1, M, P))
        H[0] = H0
        for l in range(L):
            xi = correlate(dW[l], H[l].T @ H[l] / M)
            H[l + 1] = act.phi(H[l] + xi) if design == "post" else H[l] + act.phi(xi)
        if not np.all(np.isfinite(H)):
            raise ValueError("post-activation particles diverged (non-finite values)")
    G = np.empty((0,))
    Gam = np.empty((0,))
    if backward and design == "pre":
        Gamma_exact = None
        if interaction == "exact":
            from .kernel_ode import residual_recursion

            Gamma_exact = residual_recursion(X, L, T, activation).Gamma
        _, bdiff = backward_coefficients(activation, H, interaction, Gamma_exact)
        dWb = brownian_increments(rng, L, M, P, dt)
        GT = v[:, None] * act.dphi(H[L])
        G = euler_maruyama(None, bdiff, GT, T, L, dWb, reverse=True).X
        Gam = np.einsum("lma,lmb->lab", G, G) / M
    Sig = np.einsum("lma,lmb->lab", H, H) / M
    if target_se is not None:
        prod = H[L][:, :, None] * H[L][:, None, :]
        se = float(np.max(prod.std(axis=0, ddof=1)) / np.sqrt(M))
        if se > target_se:
            import warnings

            warnings.warn(f"Monte Carlo standard error of Σ_L is ≈{se:.3g} > target_se={target_se:g}; "
                          f"M={M} particles are too few (≈{particles_needed(M, se, target_se)} needed)",
                          RuntimeWarning, stacklevel=2)
    F = act.phi(H[L])
    with np.errstate(over="ignore", invalid="ignore"):
        mean_feat = H.mean(axis=(1, 2))
        rms = np.sqrt((H ** 2).mean(axis=(1, 2)))
    if not all(np.all(np.isfinite(a)) for a in (Sig, Gam, mean_feat, rms)):
        raise ValueError(f"the particles overflowed float64 (T={T:g}, max |Σ_0| = {float(np.max(np.abs(S0))):.3g}): "
                         f"reduce T or rescale X")
    if not store_path:
        H = H[[0, L]]
        G = G[[0, L]] if G.size else G
    return ParticleInit(T=T, L=L, M=M, activation=activation_label(activation), design=design, interaction=interaction,
                        H=H, G=G, Sigma_emp=Sig, K_emp=F.T @ F / M, Gamma_emp=Gam,
                        mean_feature=mean_feat, rms_feature=rms)
