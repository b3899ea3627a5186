"""Infinite-depth NNGP of the pre-activation ResNet (docs/theory/nfd.rst §2–3; seed 002 Prop. 2–6).

Network (docs/theory/nfd.rst §1): ``h⁰ = U x/√d``, ``h^{l+1} = h^l + √(T/L) n^{-1/2} W^l φ(h^l)``.
As n, L → ∞ the covariance of the forward McKean–Vlasov SDE obeys the **kernel ODE**

    dΣ_t/dt = E_{u~N(0,Σ_t)}[φ(u) φ(uᵀ)],     Σ_0 = X Xᵀ / d,                     (docs/theory/nfd.rst §2)

and ``K_T = E[φ(h_T) φ(h_T)ᵀ]`` is the NNGP kernel of the γ = 1/2 network (seed 002 Prop. 3).
The backward SDE (seed 002 Prop. 6) has gradient kernel ``Γ_t = E[g_t g_tᵀ]`` with

    −dΓ_t/dt = E[φ'(h_t) φ'(h_t)ᵀ] ⊙ Γ_t,         Γ_T = E[φ'(h_T) φ'(h_T)ᵀ]  (v ~ N(0,1)),

solved here as ``Γ_t = Γ_T ⊙ exp(A_T − A_t)``, ``A_t = ∫_0^t E[φ'φ'] ds``.

:func:`residual_recursion` is the explicit Euler scheme with step T/L — exactly the residual
NNGP recursion of docs/theory/kernels.rst / seed 004 with ρ² = T/L, σ_w² = 1, σ_b² = 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from ..checks import finite_array, positive_float, positive_int
from ..kernels.diagnostics import LARGE
from ..results import Result
from ..registry import sweep_computation


def activation_label(activation) -> str:
    return activation if isinstance(activation, str) else getattr(activation, "name", repr(activation))


def phi_gram(activation, S):
    from .. import gaussian

    G = gaussian.gram(activation, S)
    return 0.5 * (G + G.T)


def _dgram(activation, S):
    from .. import gaussian

    G = gaussian.dgram(activation, S)
    return 0.5 * (G + G.T)


def input_gram(X) -> np.ndarray:
    """Σ_0 = X Xᵀ / d for samples in rows (P × d)."""
    X = finite_array(X, "X", ndim=2)
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be non-empty P×d, got shape {X.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        S = X @ X.T / X.shape[1]
    if not np.all(np.isfinite(S)):
        raise ValueError(f"X: the input Gram Σ_0 = X Xᵀ/d overflows float64 (max |X| = "
                         f"{float(np.max(np.abs(X))):.3g}); rescale X")
    return S


@dataclass(frozen=True)
class KernelODE(Result):
    """Solution of the kernel ODE on [0, T] (docs/theory/nfd.rst §2).

    ``Sigma`` (P×P) = Σ_T, ``K`` = E[φ(h_T)φ(h_T)ᵀ], ``Gamma0`` = backward kernel E[g_0 g_0ᵀ],
    ``GammaT`` = E[g_T g_Tᵀ]; ``t``/``Sigma_t`` on the requested output grid.
    Diagnostics: ``nfev``, ``converged``, ``message``, ``error_estimate`` (``max |Σ_T − Σ_T'|`` between
    this solve and one at 100× looser tolerance — an upper bound on the solver error scale).
    """

    X: np.ndarray
    T: float
    activation: str
    t: np.ndarray
    Sigma_t: np.ndarray
    Sigma: np.ndarray
    K: np.ndarray
    Gamma0: np.ndarray
    GammaT: np.ndarray
    rtol: float
    atol: float
    nfev: int
    converged: bool
    message: str
    error_estimate: float

    @property
    def Sigma0(self) -> np.ndarray:
        return input_gram(self.X)


class _Stop(Exception):
    """Raised inside the right-hand side to end a solve that cannot finish (work limit, overflow)."""


_EXP_MAX = 700.0          # exp(A) overflows float64 beyond ~709.78


def _solve(Sigma0, T, activation, rtol, atol, t_eval, backward, method, max_nfev=None):
    P = Sigma0.shape[0]
    n2 = P * P
    calls = [0]

    def rhs(_t, y):
        calls[0] += 1
        if max_nfev is not None and calls[0] > max_nfev:
            raise _Stop(f"kernel ODE: more than max_nfev={max_nfev} right-hand-side evaluations before reaching "
                        f"T={T:g} (stopped at t = {_t:.3g}); T is too long for the adaptive solver at "
                        f"rtol={rtol:g}: reduce T (or raise max_nfev)")
        if not np.max(np.abs(y[:n2])) <= LARGE:
            raise _Stop(f"the kernel Σ_t exceeds {LARGE:g} at t = {_t:.3g} < T={T:g} (it explodes before T): "
                        f"reduce T")
        if backward and np.max(y[n2:]) > _EXP_MAX:
            raise _Stop(f"the backward kernel Γ_0 = Γ_T·exp(∫E[φ'φ']dt) overflows float64 beyond t = {_t:.3g} "
                        f"< T={T:g}: reduce T, or pass backward=False for Σ_T and K_T alone")
        S = y[:n2].reshape(P, P)
        S = 0.5 * (S + S.T)
        out = [phi_gram(activation, S).ravel()]
        if backward:
            out.append(_dgram(activation, S).ravel())
        return np.concatenate(out)

    y0 = np.concatenate([Sigma0.ravel()] + ([np.zeros(n2)] if backward else []))
    return solve_ivp(rhs, (0.0, T), y0, method=method, rtol=rtol, atol=atol, t_eval=t_eval)


@sweep_computation
def kernel_ode(X, T: float = 1.0, activation="erf", *, t_eval=None, rtol: float = 1e-10,
               atol: float = 1e-12, backward: bool = True, method: str = "DOP853",
               error_estimate: bool = True, max_nfev: int = 20_000) -> KernelODE:
    """Solve ``dΣ/dt = E_{N(0,Σ)}[φφᵀ]``, ``Σ_0 = XXᵀ/d`` on [0, T] adaptively (scipy solve_ivp).

    ``k = kernel_ode(X, T=1.0, activation="erf")``; ``k.Sigma``, ``k.K``, ``k.Gamma0``.
    Raises ``ValueError`` for T ≤ 0, non-finite X, if the solver fails, needs more than ``max_nfev``
    right-hand-side evaluations (a work limit: T = 1e8 needs ~1,300 for erf), or if Σ or the backward
    kernel Γ_0 leaves float64 before T (never returns NaN/inf; ``backward=False`` skips Γ).
    """
    T = positive_float(T, "T")
    max_nfev = positive_int(max_nfev, "max_nfev")
    Sigma0 = input_gram(X)
    X = np.asarray(X, dtype=np.float64)
    rtol = positive_float(rtol, "rtol")
    atol = positive_float(atol, "atol")
    if t_eval is None:
        t_eval = np.linspace(0.0, T, 11)
    else:
        t_eval = finite_array(t_eval, "t_eval", ndim=1)
        if t_eval.size == 0 or np.any(t_eval < 0) or np.any(t_eval > T) or np.any(np.diff(t_eval) <= 0):
            raise ValueError("t_eval must be increasing times in [0, T]")
        if t_eval[-1] != T:
            t_eval = np.append(t_eval, T)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            sol = _solve(Sigma0, T, activation, rtol, atol, t_eval, backward, method, max_nfev)
    except _Stop as exc:
        raise ValueError(str(exc)) from None
    except ValueError as exc:         # the kernel map met inf/NaN: Σ overflowed float64 before T
        if "NaN or inf" not in str(exc):
            raise
        raise ValueError(f"kernel ODE overflowed float64 before T={T} (Σ grows too fast for this "
                         f"activation and input scale); reduce T") from None
    P = Sigma0.shape[0]
    n2 = P * P
    if not sol.success or not np.all(np.isfinite(sol.y)):
        raise ValueError(f"kernel ODE solver did not converge for T={T}: {sol.message}")
    Sig_t = sol.y[:n2].T.reshape(-1, P, P)
    Sig_t = 0.5 * (Sig_t + np.swapaxes(Sig_t, 1, 2))
    Sigma = Sig_t[-1]
    K = phi_gram(activation, Sigma)
    GammaT = _dgram(activation, Sigma)
    if backward:
        A_T = sol.y[n2:, -1].reshape(P, P)
        A_T = 0.5 * (A_T + A_T.T)
        Gamma0 = GammaT * np.exp(A_T)
        if not np.all(np.isfinite(Gamma0)):
            raise ValueError(f"the backward kernel Γ_0 overflows float64 at T={T:g}: reduce T, or pass "
                             f"backward=False for Σ_T and K_T alone")
    else:
        Gamma0 = np.full((P, P), np.nan)
    err = float("nan")
    if error_estimate:
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                loose = _solve(Sigma0, T, activation, min(rtol * 100, 1e-4), min(atol * 100, 1e-6), [T], False,
                               method, max_nfev)
        except (_Stop, ValueError):
            loose = None
        if loose is not None and loose.success:
            err = float(np.max(np.abs(loose.y[:n2, -1].reshape(P, P) - Sigma)))
    return KernelODE(X=X, T=T, activation=activation_label(activation), t=np.asarray(sol.t, float), Sigma_t=Sig_t,
                     Sigma=Sigma, K=K, Gamma0=Gamma0, GammaT=GammaT, rtol=rtol, atol=atol,
                     nfev=int(sol.nfev), converged=True, message=str(sol.message), error_estimate=err)


@dataclass(frozen=True)
class ResidualRecursion(Result):
    """Explicit Euler scheme of the kernel ODE with step T/L (the n = ∞ ResNet of depth L).

    ``Sigma[l]`` (l = 0..L) = covariance of h^l, ``K`` = E[φ(h^L)φ(h^L)ᵀ], ``Gamma[l]`` = E[g^l g^lᵀ].
    """

    T: float
    L: int
    activation: str
    Sigma: np.ndarray
    K: np.ndarray
    Gamma: np.ndarray


@sweep_computation
def residual_recursion(X, L: int, T: float = 1.0, activation="erf", backward: bool = True) -> ResidualRecursion:
    """Σ_{l+1} = Σ_l + (T/L) E_{N(0,Σ_l)}[φφᵀ]; Γ_l = Γ_{l+1} + (T/L) E[φ'φ'](Σ_l) ⊙ Γ_{l+1}."""
    T = positive_float(T, "T")
    L = positive_int(L, "L")
    S = input_gram(X)
    dt = T / L
    Sig = np.empty((L + 1,) + S.shape)
    Sig[0] = S
    for l in range(L):
        Sig[l + 1] = Sig[l] + dt * phi_gram(activation, Sig[l])
    K = phi_gram(activation, Sig[L])
    Gam = np.full_like(Sig, np.nan)
    if backward:
        Gam[L] = _dgram(activation, Sig[L])
        for l in range(L - 1, -1, -1):
            Gam[l] = Gam[l + 1] + dt * _dgram(activation, Sig[l]) * Gam[l + 1]
    return ResidualRecursion(T=T, L=L, activation=activation_label(activation), Sigma=Sig, K=K, Gamma=Gam)


@dataclass(frozen=True)
class NestingCheck(Result):
    """K_{T'} − K_T PSD for T' > T (seed 002 Prop. 5) and λ_min(K_T) > 0 (Prop. 4)."""

    Ts: np.ndarray
    min_eig_K: np.ndarray          # λ_min(K_T) for each T
    min_eig_increment: np.ndarray  # λ_min(K_{T_{i+1}} − K_{T_i})
    max_abs_K: float
    activation: str


@sweep_computation(forwards=(kernel_ode,))
def nesting_check(X, Ts, activation="erf", **kw) -> NestingCheck:
    """Minimum eigenvalues of K_T and of K_{T_{i+1}} − K_{T_i} along increasing ``Ts``."""
    Ts = finite_array(Ts, "Ts", ndim=1)
    if Ts.size < 1 or np.any(Ts <= 0) or np.any(np.diff(Ts) <= 0):
        raise ValueError("Ts must be increasing positive times")
    k = kernel_ode(X, T=float(Ts[-1]), activation=activation, t_eval=Ts, backward=False, error_estimate=False, **kw)
    Ks = np.array([phi_gram(activation, S) for S in k.Sigma_t[-Ts.size:]])
    lam = np.array([np.linalg.eigvalsh(Kt)[0] for Kt in Ks])
    inc = np.array([np.linalg.eigvalsh(Ks[i + 1] - Ks[i])[0] for i in range(Ts.size - 1)])
    return NestingCheck(Ts=Ts, min_eig_K=lam, min_eig_increment=inc, max_abs_K=float(np.max(np.abs(Ks))),
                        activation=activation_label(activation))
