"""The neural covariance SDE: shaped MLPs in the proportional depth-and-width limit T = L/N (docs/theory/depth_width.rst).

Network (width N, depth L, P inputs): h⁰ with Gram V⁰ = K₀, h^{l+1} = √(c/N) W^{l+1} φ(h^l), W_ij ~ N(0, 1), with the
shaped leaky relu φ(x) = s₊ max(x, 0) + s₋ min(x, 0), s± = 1 + c±/√N, and c = 2/(s₊² + s₋²) (norm preserving).
Given layer l the rows of h^{l+1} are iid N(0, c Φ̂^l), Φ̂ = φφᵀ/N, so the Gram V^l = h^l h^lᵀ/N is a Wishart chain.
Writing φ = α x + β_N |x| (α = (s₊+s₋)/2, β_N = (s₊−s₋)/2 = (c₊−c₋)/(2√N)), exactly

    c E_{N(0,V)}[φφᵀ] = V + λ_N (E_{N(0,V)}[|h||h|ᵀ] − V),   λ_N = β_N²/(α² + β_N²) = κ_N/N,

and with t = l/N, N → ∞ (κ_N → κ = (c₊ − c₋)²/4) the Gram solves the Itô SDE

    dV_ab = κ [E|h_a||h_b| − V_ab] dt + (V^{1/2} dZ V^{1/2})_ab,   d⟨V_ab, V_cd⟩ = (V_ac V_bd + V_ad V_bc) dt,

E|h_a||h_b| = √(V_aa V_bb)·(2/π)(√(1−ρ²) + ρ arcsin ρ), ρ = V_ab/√(V_aa V_bb). The diagonal has no drift
(d log V_aa = −dt + √2 dB_a: a log-normal norm); the correlation of two inputs is autonomous,
dρ = [ν(ρ) − ρ(1−ρ²)/2] dt + (1−ρ²) dB, ν(ρ) = κ(2/π)(√(1−ρ²) − ρ arccos ρ).

Scheme (weak order 1, PSD by construction): V′ = V + dt·b(V); F = chol(V′);
V ← F A Aᵀ Fᵀ, A = a I + √(q/2) ΔB (ΔB a P×P matrix of iid N(0, dt)), a² = 1 − q P dt/2, so that
E[V_{k+1} | V_k] = V_k + b(V_k) dt exactly and the martingale part has quadratic variation q × the above (q = 1 is
the SDE; ``noise=q`` ≠ 1 is a deliberately wrong SDE for power studies). With ``noise=0`` and dt = 1/N, κ = κ_N the
scheme is the shaped network's NNGP recursion exactly. A driftless chain on the same increments has mean K₀ exactly
and serves as a control variate for E[V_T].

Unshaped relu (He init, c = 2): ``relu_log_norm`` — log(V^L/V⁰) of one input is a sum of L independent factors
log(χ²_N/N) + log R, R = 2 Beta(K/2, (N−K)/2), K ~ Bin(N, ½) (exact moments), → N(−5T/2, 5T) as L = TN → ∞.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..checks import finite_array, generator, nonnegative_float, positive_float, positive_int, psd_matrix
from ..results import Result


# ----------------------------------------------------------------------------- coefficients
def shaped_slopes(c_plus: float, c_minus: float, N: int) -> tuple[float, float, float]:
    """(s₊, s₋, c): slopes s± = 1 + c±/√N of the shaped leaky relu and the weight variance c = 2/(s₊² + s₋²)."""
    N = positive_int(N, "N")
    sp, sm = 1.0 + float(c_plus) / np.sqrt(N), 1.0 + float(c_minus) / np.sqrt(N)
    return sp, sm, 2.0 / (sp * sp + sm * sm)


def drift_coefficient(c_plus: float, c_minus: float, N: int | None = None) -> float:
    """κ = (c₊ − c₋)²/4 (N = None: the limit), or the width-N network's κ_N = N β_N²/(α² + β_N²) (its NNGP step
    is exactly V + (κ_N/N)(E|h||h|ᵀ − V))."""
    cp, cm = float(c_plus), float(c_minus)
    if not (np.isfinite(cp) and np.isfinite(cm)):
        raise ValueError(f"c_plus, c_minus must be finite, got {c_plus!r}, {c_minus!r}")
    if N is None:
        return 0.25 * (cp - cm) ** 2
    sp, sm, _ = shaped_slopes(cp, cm, N)
    a, b = 0.5 * (sp + sm), 0.5 * (sp - sm)
    return float(N) * b * b / (a * a + b * b)


def abs_gram(V: np.ndarray) -> np.ndarray:
    """E_{N(0,V)}[|h||h|ᵀ] for a stack of covariances V (..., P, P) (diagonal = diag V exactly)."""
    d = np.sqrt(np.clip(np.diagonal(V, axis1=-2, axis2=-1), 0.0, None))
    s = d[..., :, None] * d[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(s > 0, V / np.where(s > 0, s, 1.0), 0.0)
    r = np.clip(r, -1.0, 1.0)
    out = s * (2.0 / np.pi) * (np.sqrt(1.0 - r * r) + r * np.arcsin(r))
    idx = np.arange(V.shape[-1])
    out[..., idx, idx] = np.diagonal(V, axis1=-2, axis2=-1)
    return out


def drift(V: np.ndarray, kappa: float) -> np.ndarray:
    """b(V) = κ (E|h||h|ᵀ − V), stacked over leading axes; zero on the diagonal."""
    return kappa * (abs_gram(V) - V)


def smooth_drift(V: np.ndarray, a: float, b: float) -> np.ndarray:
    """Drift of the smooth shaped activation φ(x) = x + a x²/√N + b x³/N (weight variance 1):
    N(E[φ_a φ_b] − V_ab) → a² (V_aa V_bb + 2 V_ab²) + 3b V_ab (V_aa + V_bb)."""
    d = np.diagonal(V, axis1=-2, axis2=-1)
    return a * a * (d[..., :, None] * d[..., None, :] + 2 * V * V) + 3 * b * V * (d[..., :, None] + d[..., None, :])


def _drift_fn(kappa, smooth):
    if smooth is not None:
        a, b = smooth
        return lambda V: smooth_drift(V, a, b)
    return (lambda V: drift(V, kappa)) if kappa else None


# ----------------------------------------------------------------------------- the scheme
def _chol(Vp, repairs):
    """Stacked Cholesky factors of V′; a matrix that is not numerically PD is projected to PSD (eigenvalues
    clipped at 1e-300·scale) and counted in ``repairs``."""
    try:
        return np.linalg.cholesky(Vp)
    except np.linalg.LinAlgError:
        pass
    lam, U = np.linalg.eigh(Vp)
    bad = lam[:, 0] <= 1e-14 * np.maximum(lam[:, -1], 1e-300)
    repairs[0] += int(bad.sum())
    lam = np.clip(lam, 1e-14 * np.maximum(lam[:, -1:], 1e-300), None)
    return U * np.sqrt(lam)[:, None, :]


def _step(V, dB, bfun, dt, q, repairs):
    """One step V → F A Aᵀ Fᵀ (module docstring) for a stack V (M, P, P) and increments dB (M, P, P); ``bfun``
    the drift b(V) (None: none)."""
    P = V.shape[-1]
    Vp = V + dt * bfun(V) if bfun is not None else V
    F = _chol(Vp, repairs)
    A = np.sqrt(1.0 - q * P * dt / 2.0) * np.eye(P) + np.sqrt(q / 2.0) * dB
    C = F @ A
    out = C @ np.swapaxes(C, -1, -2)
    return 0.5 * (out + np.swapaxes(out, -1, -2))


def correlations(V: np.ndarray, a: int = 0, b: int = 1) -> np.ndarray:
    """ρ_ab = V_ab/√(V_aa V_bb) of a stack of Grams."""
    return V[..., a, b] / np.sqrt(V[..., a, a] * V[..., b, b])


@dataclass(frozen=True)
class CovarianceSDE(Result):
    """Euler paths of the neural covariance SDE: ``V[k]`` (paths × P × P) at ``times[k]``; ``mean``/``mean_se``
    (times × P × P) E[V_t] by the driftless control variate (exact mean K₀) and its standard error;
    ``diagnostics``: step-halving changes (``halving_*``: dt/2 − dt on the same Brownian path, with the SE of the
    paired difference), ``psd_repairs``, ``cpu_seconds``."""

    K0: np.ndarray
    T: float
    dt: float
    kappa: float
    smooth: tuple | None
    noise: float
    paths: int
    seed: int | None
    times: np.ndarray
    V: np.ndarray
    mean: np.ndarray
    mean_se: np.ndarray
    diagnostics: dict

    def correlation(self, a: int = 0, b: int = 1) -> np.ndarray:
        """ρ_ab per path (times × paths)."""
        return correlations(self.V, a, b)

    def log_norm(self, a: int = 0) -> np.ndarray:
        """log(V_aa(t)/K₀_aa) per path (times × paths)."""
        return np.log(self.V[..., a, a] / self.K0[a, a])


def _halving_report(Vc, Vf, K0):
    """Mean change (fine − coarse) of every correlation and log-norm and the SE of the paired difference."""
    P = K0.shape[0]
    out = {}
    for a in range(P):
        for b in range(a, P):
            if a == b:
                x, y = np.log(Vc[:, a, a] / K0[a, a]), np.log(Vf[:, a, a] / K0[a, a])
                key = f"log_norm_{a}"
            else:
                x, y = correlations(Vc, a, b), correlations(Vf, a, b)
                key = f"rho_{a}{b}"
            d = y - x
            out[key] = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)))
    return out


def _inputs(K0, T, dt, paths, times, noise, kappa):
    K0 = psd_matrix(K0, "K0")
    if np.any(np.diag(K0) <= 0):
        raise ValueError("K0 must have a positive diagonal (every input a non-zero vector)")
    T = positive_float(T, "T")
    dt = positive_float(dt, "dt")
    n = int(round(T / dt))
    if n < 1 or abs(n * dt - T) > 1e-9 * T:
        raise ValueError(f"T/dt must be a whole number of steps, got T={T:g}, dt={dt:g}")
    q = nonnegative_float(noise, "noise")
    if q * K0.shape[0] * dt / 2.0 >= 1.0:
        raise ValueError(f"dt={dt:g} too large for P={K0.shape[0]} inputs (need noise·P·dt/2 < 1)")
    times = np.array([T] if times is None else sorted(float(t) for t in times))
    if np.any(~np.isfinite(times)) or np.any(times < 0) or np.any(times > T * (1 + 1e-12)):
        raise ValueError(f"times must lie in [0, T={T:g}]")
    ks = np.unique(np.rint(times / dt).astype(int))        # snapped to the grid; the result keeps k·dt
    times = ks * dt
    kappa = float(kappa)
    if not np.isfinite(kappa) or kappa < 0:
        raise ValueError(f"kappa must be finite and >= 0, got {kappa!r}")
    return K0, T, dt, n, positive_int(paths, "paths", minimum=2), times, ks, q, kappa


def covariance_sde(K0, T: float, *, c_plus: float = 1.0, c_minus: float = -1.0, kappa: float | None = None,
                   smooth: tuple | None = None, dt: float = 1.0 / 256, paths: int = 10_000, times=None, noise: float = 1.0, rng=None,
                   seed=None, halving: bool = True, progress: bool | None = None) -> CovarianceSDE:
    """Euler paths of the neural covariance SDE from V₀ = K₀ (P×P) to time T (module docstring).

    ``smooth=(a, b)``: instead the smooth shaped activation x + a x²/√N + b x³/N (:func:`smooth_drift`; the
    limit of s·σ(x/s), s ∝ √N, with a = σ''(0)/2, b = σ‴(0)/6 in units of s).
    ``kappa`` (default (c₊ − c₋)²/4; :func:`drift_coefficient` gives a width-N network's κ_N); ``dt`` with T/dt
    whole; ``times`` (default [T]; snapped to the grid k·dt, the result records the snapped times) where the paths are kept; ``noise`` multiplies the diffusion's
    quadratic variation (1 = the SDE); ``halving`` also runs dt/2 on the same Brownian path and reports the change.
    Randomness only through ``rng`` or ``seed``.
    """
    rng = generator(rng, seed)
    kappa = drift_coefficient(c_plus, c_minus) if kappa is None else kappa
    K0, T, dt, n, M, times, ks, q, kappa = _inputs(K0, T, dt, paths, times, noise, kappa)
    if smooth is not None:
        smooth = tuple(float(x) for x in smooth)
        if len(smooth) != 2 or not all(np.isfinite(smooth)):
            raise ValueError(f"smooth must be two finite numbers (a, b), got {smooth!r}")
        kappa = 0.0
    bfun = _drift_fn(kappa, smooth)
    P = K0.shape[0]
    cpu0 = time.process_time()
    V = np.broadcast_to(K0, (M, P, P)).copy()
    Vcv, Vf = V.copy(), (V.copy() if halving else None)
    rep, rep_f = [0], [0]
    keep = {int(k): i for i, k in enumerate(ks)}
    out = np.empty((len(ks), M, P, P))
    mean, se = np.empty((len(ks), P, P)), np.empty((len(ks), P, P))
    change = []

    def record(k):
        i = keep[k]
        out[i] = V
        d = V - Vcv
        mean[i] = K0 + d.mean(axis=0)
        se[i] = d.std(axis=0, ddof=1) / np.sqrt(M)
        if halving:
            change.append(_halving_report(V, Vf, K0))

    from ..progress import progress as _progress

    bar = _progress(total=n, desc="covariance SDE (Euler steps)", disable=True if progress is False else None)
    try:
        if 0 in keep:
            record(0)
        for k in range(1, n + 1):
            if halving:
                h1 = np.sqrt(dt / 2) * rng.standard_normal((M, P, P))
                h2 = np.sqrt(dt / 2) * rng.standard_normal((M, P, P))
                dB = h1 + h2
                Vf = _step(_step(Vf, h1, bfun, dt / 2, q, rep_f), h2, bfun, dt / 2, q, rep_f)
            else:
                dB = np.sqrt(dt) * rng.standard_normal((M, P, P))
            V = _step(V, dB, bfun, dt, q, rep)
            Vcv = _step(Vcv, dB, None, dt, q, rep)
            if k in keep:
                record(k)
            bar.update(1)
    finally:
        bar.close()
    if not np.all(np.isfinite(out)):
        raise ValueError("the covariance SDE produced non-finite values (reduce dt)")
    diag = {"psd_repairs": rep[0], "psd_repairs_halved": rep_f[0], "steps": n,
            "cpu_seconds": time.process_time() - cpu0}
    if halving:
        diag["halving"] = {f"{t:g}": c for t, c in zip(times, change)}
        diag["halving_max_z"] = max((abs(m) / s if s > 0 else 0.0) for c in change for m, s in c.values())
    return CovarianceSDE(K0=K0, T=T, dt=dt, kappa=kappa, smooth=smooth, noise=q, paths=M,
                         seed=seed if isinstance(seed, (int, np.integer)) else None, times=times, V=out,
                         mean=mean, mean_se=se, diagnostics=diag)


# ----------------------------------------------------------------------------- unshaped relu: the log-normal norm
def relu_log_norm(T: float, N: int | None = None) -> tuple[float, float]:
    """(mean, variance) of log(V^L/V⁰) for one input through L = T·N layers of a He-initialised relu MLP
    (h^{l+1} = √(2/N) W φ(h^l)): exact at width N (sum of independent per-layer factors, module docstring;
    conditioned on no layer being dead, probability ≥ 1 − L 2^{−N}); N = None: the limit N(−5T/2, 5T)."""
    T = positive_float(T, "T", allow_zero=True)
    if N is None:
        return -2.5 * T, 5.0 * T
    from scipy.special import digamma, polygamma
    from scipy.stats import binom

    N = positive_int(N, "N")
    L = int(round(T * N))
    if abs(L - T * N) > 1e-9 * max(1.0, T * N):
        raise ValueError(f"T·N must be a whole number of layers, got T={T:g}, N={N}")
    half = N / 2.0
    K = np.arange(1, N + 1)
    p = binom.pmf(K, N, 0.5)
    p = p / p.sum()
    mR = np.log(2.0) + digamma(K / 2.0) - digamma(half)
    m_logR = float(p @ mR)
    v_logR = float(p @ (polygamma(1, K / 2.0) - polygamma(1, half)) + p @ (mR - m_logR) ** 2)
    m_chi, v_chi = float(digamma(half) - np.log(half)), float(polygamma(1, half))
    return L * (m_logR + m_chi), L * (v_logR + v_chi)
