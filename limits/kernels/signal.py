"""Signal propagation in deep feed-forward networks (Poole et al. 2016; Schoenholz et al. 2017).

For h^l = W φ(h^{l-1}) + b with W ~ N(0, σ_w²/N), b ~ N(0, σ_b²):

* length map  q ↦ σ_w² E[φ(√q z)²] + σ_b²,  fixed point q*;
* χ_1 = σ_w² E[φ'(√q* z)²] (slope of the correlation map at c = 1; order-to-chaos at χ_1 = 1);
* correlation map c ↦ (σ_w² E[φ(u₁)φ(u₂)] + σ_b²)/q*, (u₁,u₂) ~ N(0, q*[[1,c],[c,1]]), fixed point c*
  (c* = 1 in the ordered phase χ_1 ≤ 1);
* depth scales ξ_q⁻¹ = −ln[χ_1 + σ_w² E(φφ'')] and ξ_c⁻¹ = −ln[σ_w² E(φ'(u₁)φ'(u₂))] at c*.

The critical line σ_w²(σ_b²) solves χ_1 = 1 jointly with the q fixed point: with
σ_w²(q) = 1/E[φ'(√q z)²] the fixed-point condition becomes the scalar equation
``q − E[φ²](q)/E[φ'²](q) = σ_b²`` in q, solved by bracketing on a log grid and Brent's method; for odd φ
and σ_b² = 0 the root is the limit q* → 0 with σ_w² = 1/φ'(0)².
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import positive_float
from ..results import Result
from ._args import resolve_activation
from .expectations import diag_price
from ..registry import sweep_computation

_QGRID = np.logspace(-12, 5, 69)


def _Ephi2(act, q):
    from .. import gaussian

    q = np.asarray(q, dtype=np.float64)
    return np.asarray(gaussian.kernel(act, q, q, q), dtype=np.float64)


def _Edphi2(act, q):
    from .. import gaussian

    q = np.asarray(q, dtype=np.float64)
    return np.asarray(gaussian.dkernel(act, q, q, q), dtype=np.float64)


@sweep_computation
def qmap(activation, q, sigma_w2, sigma_b2):
    """Length map q ↦ σ_w² E[φ(√q z)²] + σ_b² (vectorised over q)."""
    act = resolve_activation(activation)
    return sigma_w2 * _Ephi2(act, q) + sigma_b2


@sweep_computation
def cmap(activation, c, qstar, sigma_w2, sigma_b2):
    """Correlation map at variance q*: (σ_w² E[φ(u₁)φ(u₂)] + σ_b²)/q*."""
    from .. import gaussian

    act = resolve_activation(activation)
    c = np.asarray(c, dtype=np.float64)
    return (sigma_w2 * np.asarray(gaussian.kernel(act, qstar, c * qstar, qstar)) + sigma_b2) / qstar


@dataclass(frozen=True)
class SignalPropagation(Result):
    """Fixed points and depth scales of the mean-field signal-propagation maps.

    ``phase`` is "ordered" (χ_1 < 1), "chaotic" (χ_1 > 1) or "critical"; ``qstar = inf`` with
    ``converged=False`` when the length map has no finite fixed point (e.g. relu with σ_w² > 2)."""

    activation: str
    sigma_w2: float
    sigma_b2: float
    qstar: float
    cstar: float
    chi1: float
    chi_c: float
    xi_q: float
    xi_c: float
    phase: str
    converged: bool
    residual: float
    note: str = ""


def _qstar(act, sw2, sb2):
    """Stable fixed point of the length map; returns (q*, residual, converged, note)."""
    from scipy import optimize

    f = lambda q: sw2 * _Ephi2(act, q) + sb2 - q  # noqa: E731
    fq = f(_QGRID)
    if np.all(np.abs(fq) <= 1e-13 * np.maximum(_QGRID, 1e-300)):
        return float("nan"), 0.0, True, "every q is a fixed point (marginal homogeneous map); q* = q⁰"
    phi0 = float(np.asarray(act.phi(np.array([0.0])))[0])
    # stable fixed point: f changes sign from + to − ; take the largest such crossing
    idx = np.nonzero((fq[:-1] > 0) & (fq[1:] <= 0))[0]
    if idx.size:
        i = idx[-1]
        if fq[i + 1] == 0.0:
            return float(_QGRID[i + 1]), 0.0, True, ""
        q = optimize.brentq(f, _QGRID[i], _QGRID[i + 1], xtol=1e-300, rtol=4 * np.finfo(float).eps,
                            maxiter=500)
        return float(q), float(abs(f(q))), True, ""
    if np.all(fq < 0) and sb2 == 0.0 and phi0 == 0.0:
        return 0.0, 0.0, True, "q* = 0 (σ_b² = 0, φ(0) = 0, contracting length map)"
    if fq[-1] > 0:
        return float("inf"), float("inf"), False, "length map has no finite fixed point (q grows without bound)"
    return float("nan"), float("nan"), False, "no stable fixed point found on q ∈ [1e-12, 1e5]"


@sweep_computation
def fixed_point(activation, sigma_w2, sigma_b2=0.0) -> SignalPropagation:
    """q*, c*, χ_1, ξ_q, ξ_c for a deep feed-forward network (Schoenholz et al. 2017)."""
    from scipy import optimize

    from .. import gaussian

    act = resolve_activation(activation)
    sw2 = positive_float(sigma_w2, "sigma_w2")
    sb2 = positive_float(sigma_b2, "sigma_b2", allow_zero=True)
    name = str(getattr(act, "name", "custom"))
    q, res, conv, note = _qstar(act, sw2, sb2)
    if not conv or not np.isfinite(q):
        if np.isnan(q) and conv:  # marginal: report χ_1 from q-independent derivative kernel
            chi1 = float(sw2 * _Edphi2(act, np.array(1.0)))
            phase = "critical" if abs(chi1 - 1) < 1e-12 else ("ordered" if chi1 < 1 else "chaotic")
            return SignalPropagation(name, sw2, sb2, q, 1.0, chi1, chi1, float("inf"),
                                     float("inf") if chi1 == 1 else -1 / np.log(chi1) if chi1 < 1 else float("inf"),
                                     phase, True, 0.0, note)
        return SignalPropagation(name, sw2, sb2, q, float("nan"), float("nan"), float("nan"), float("nan"),
                                 float("nan"), "unbounded", False, res, note)
    if q == 0.0:
        d0 = float(np.asarray(act.dphi(np.array([0.0])))[0])
        chi1 = sw2 * d0 * d0
        chi_q = chi1  # E[φφ''] → 0 as q → 0 for φ(0) = 0
    else:
        chi1 = float(sw2 * _Edphi2(act, np.array(q)))
        chi_q = float(sw2 * diag_price(act, np.array(q)))
    xi_q = float("inf") if chi_q >= 1 else float(-1.0 / np.log(chi_q))
    if abs(chi1 - 1.0) <= 1e-10:
        phase = "critical"
    else:
        phase = "ordered" if chi1 < 1 else "chaotic"
    c = 1.0
    if phase == "chaotic" and q > 0:
        g = lambda c_: (sw2 * float(gaussian.kernel(act, q, c_ * q, q)) + sb2) / q - c_  # noqa: E731
        hi = 1.0 - 1e-6
        while g(hi) >= 0 and hi > 1 - 1e-3:
            hi = 1.0 - 10 * (1.0 - hi)
        g0 = g(0.0)
        g0 = 0.0 if abs(g0) < 1e-12 else g0
        lo = 0.0 if g0 >= 0 else -1.0
        if lo == 0.0 and g0 == 0.0 and g(1e-6) > 1e-15:      # c = 0 is an unstable fixed point (odd φ, σ_b² = 0)
            lo = 1e-6
        if lo == 0.0 and g0 == 0.0:
            c = 0.0
        elif g(lo) > 0 > g(hi):
            c = optimize.brentq(g, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
        else:
            note = (note + "; " if note else "") + "c* not bracketed"
            conv = False
    if q == 0.0:
        chi_c = chi1
    else:
        chi_c = float(sw2 * gaussian.dkernel(act, q, c * q, q))
    xi_c = float("inf") if chi_c >= 1 - 1e-12 else float(-1.0 / np.log(chi_c))
    return SignalPropagation(name, sw2, sb2, float(q), float(c), float(chi1), chi_c, xi_q, xi_c, phase,
                             conv, float(res), note)


@dataclass(frozen=True)
class CriticalPoint(Result):
    """A point (σ_w², σ_b²) of the order-to-chaos line (χ_1 = 1) with its q*."""

    activation: str
    sigma_b2: float
    sigma_w2: float
    qstar: float
    chi1: float
    residual: float
    converged: bool
    note: str = ""


@sweep_computation
def critical_line(activation, sigma_b2=0.0) -> CriticalPoint:
    """σ_w² on the order-to-chaos line for the given σ_b² (χ_1 = 1 with q = q*).

    References: tanh σ_b² = 0.05 → σ_w² = 1.760955, q* = 0.570048; erf σ_b² = 0 → π/4 (q* → 0);
    relu → σ_w² = 2 at σ_b² = 0 only (every q is then a fixed point; qstar is NaN and ``note`` says so).
    """
    from scipy import optimize

    act = resolve_activation(activation)
    sb2 = positive_float(sigma_b2, "sigma_b2", allow_zero=True)
    name = str(getattr(act, "name", "custom"))
    f = lambda q: q - _Ephi2(act, q) / _Edphi2(act, q) - sb2  # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        fq = f(_QGRID)
    scale = np.maximum(_QGRID, 1e-300)
    if np.all(np.abs(fq + sb2) <= 1e-12 * scale):
        # q − E[φ²]/E[φ'²] ≡ 0: homogeneous (linear, relu) — σ_w² is q-independent
        sw2 = float(1.0 / _Edphi2(act, np.array(1.0)))
        if sb2 > 0:
            raise ValueError(f"sigma_b2: {name} has an order-to-chaos point only at sigma_b2 = 0 "
                             f"(σ_w² = {sw2:g}); with sigma_b2 > 0 the length map has no fixed point there")
        return CriticalPoint(name, sb2, sw2, float("nan"), 1.0, 0.0, True,
                             "homogeneous activation: every q is a fixed point at the critical σ_w² (q* = q⁰)")
    phi0 = float(np.asarray(act.phi(np.array([0.0])))[0])
    d0 = float(np.asarray(act.dphi(np.array([0.0])))[0])
    if sb2 == 0.0 and phi0 == 0.0 and d0 != 0.0:
        return CriticalPoint(name, sb2, 1.0 / d0 ** 2, 0.0, 1.0, 0.0, True,
                             "σ_b² = 0 and φ(0) = 0: q* → 0, σ_w² = 1/φ'(0)²")
    ok = np.isfinite(fq)
    qs, fs = _QGRID[ok], fq[ok]
    idx = np.nonzero(np.sign(fs[:-1]) * np.sign(fs[1:]) <= 0)[0]
    if idx.size == 0:
        raise ValueError(f"sigma_b2: no order-to-chaos point found for {name} at sigma_b2 = {sb2:g} "
                         "(q − E[φ²]/E[φ'²] = σ_b² has no root on q ∈ [1e-12, 1e5])")
    i = idx[0]
    if fs[i] == 0.0:
        q = float(qs[i])
    else:
        q = optimize.brentq(lambda x: float(f(np.array(x))), qs[i], qs[i + 1], xtol=1e-300,
                            rtol=4 * np.finfo(float).eps, maxiter=500)
    sw2 = float(1.0 / _Edphi2(act, np.array(q)))
    resid = float(abs(sw2 * _Ephi2(act, np.array(q)) + sb2 - q))
    return CriticalPoint(name, sb2, sw2, float(q), float(sw2 * _Edphi2(act, np.array(q))), resid,
                         resid <= 1e-10 * max(1.0, q))


@dataclass(frozen=True)
class PhaseDiagram(Result):
    """χ_1, ξ_c, q*, c* on a σ_w² × σ_b² grid (rows: σ_b², columns: σ_w²) and the critical line."""

    activation: str
    sigma_w2: np.ndarray
    sigma_b2: np.ndarray
    chi1: np.ndarray
    xi_c: np.ndarray
    qstar: np.ndarray
    cstar: np.ndarray
    critical_sigma_w2: np.ndarray


def _bisect(f, lo, hi, n=60):
    """Vectorised bisection on a sign change f(lo)·f(hi) ≤ 0 (arrays); returns the midpoint."""
    flo = f(lo)
    for _ in range(n):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        left = np.sign(fm) == np.sign(flo)
        lo = np.where(left, mid, lo)
        flo = np.where(left, fm, flo)
        hi = np.where(left, hi, mid)
    return 0.5 * (lo + hi)


@sweep_computation
def phase_diagram(activation, sigma_w2, sigma_b2) -> PhaseDiagram:
    """χ_1, ξ_c, q*, c* on the grid ``sigma_b2 × sigma_w2`` (vectorised over the grid: q* by a scan of
    the length map on a log grid + bisection in log q, c* by bisection) plus :func:`critical_line`.
    Points without a finite q* (unbounded length map) are NaN in every field and listed as such by
    ``qstar = inf``."""
    from .. import gaussian
    from ..checks import finite_array

    sw = finite_array(sigma_w2, "sigma_w2", ndim=1)
    sb = finite_array(sigma_b2, "sigma_b2", ndim=1)
    if np.any(sw <= 0):
        raise ValueError("sigma_w2 grid must be > 0")
    if np.any(sb < 0):
        raise ValueError("sigma_b2 grid must be >= 0")
    act = resolve_activation(activation)
    W, B = np.meshgrid(sw, sb)
    w, b = W.ravel(), B.ravel()
    qg = np.logspace(-10, 4, 71)
    F = w[:, None] * _Ephi2(act, np.broadcast_to(qg, (w.size, qg.size))) + b[:, None] - qg[None, :]
    crossing = (F[:, :-1] > 0) & (F[:, 1:] <= 0)
    has = crossing.any(axis=1)
    last = np.where(has, crossing.shape[1] - 1 - np.argmax(crossing[:, ::-1], axis=1), 0)
    lo, hi = np.log(qg[last]), np.log(qg[np.minimum(last + 1, qg.size - 1)])
    f = lambda lq: w * _Ephi2(act, np.exp(lq)) + b - np.exp(lq)  # noqa: E731
    q = np.exp(_bisect(f, lo, hi))
    phi0 = float(np.asarray(act.phi(np.array([0.0])))[0])
    zero = (~has) & (b == 0) & (phi0 == 0.0) & np.all(F < 0, axis=1)
    unbounded = (~has) & ~zero
    q = np.where(zero, 0.0, np.where(unbounded, np.inf, q))
    qs = np.where(np.isfinite(q) & (q > 0), q, 1.0)
    d0 = float(np.asarray(act.dphi(np.array([0.0])))[0])
    chi1 = np.where(q > 0, w * _Edphi2(act, qs), w * d0 * d0)
    chaotic = (chi1 > 1 + 1e-10) & (q > 0) & np.isfinite(q)
    g = lambda c: (w * np.asarray(gaussian.kernel(act, qs, c * qs, qs)) + b) / qs - c  # noqa: E731
    g0 = g(np.zeros_like(w))
    g0 = np.where(np.abs(g0) < 1e-12, 0.0, g0)
    lo_c = np.where(g0 >= 0, 0.0, -1.0)
    stuck = (g0 == 0) & ~(g(np.full_like(w, 1e-6)) > 1e-15)     # c = 0 is the stable fixed point
    lo_c = np.where((g0 == 0) & ~stuck, 1e-6, lo_c)          # c = 0 unstable: look above it
    c = np.where(chaotic, _bisect(g, lo_c, np.full_like(w, 1 - 1e-9)), 1.0)
    c = np.where(chaotic & stuck, 0.0, c)
    chi_c = np.where(q > 0, w * np.asarray(gaussian.dkernel(act, qs, c * qs, qs)), chi1)
    with np.errstate(divide="ignore"):
        xi_c = np.where(chi_c < 1 - 1e-12, -1.0 / np.log(np.where(chi_c < 1 - 1e-12, chi_c, 0.5)), np.inf)
    bad = ~np.isfinite(q)
    chi1, xi_c, c = (np.where(bad, np.nan, a) for a in (chi1, xi_c, c))
    shape = W.shape
    crit = np.empty(sb.size)
    for i, bb in enumerate(sb):
        try:
            crit[i] = critical_line(act, bb).sigma_w2
        except ValueError:
            crit[i] = np.inf
    return PhaseDiagram(str(getattr(act, "name", "custom")), sw, sb, chi1.reshape(shape), xi_c.reshape(shape),
                        q.reshape(shape), c.reshape(shape), crit)
