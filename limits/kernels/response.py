"""Response functions of residual and feed-forward networks (seed 004 Eq. 45–48, App. C Eq. C15–C17).

Elementwise response (the seed's formula), for every entry (α, β) separately::

    η⁰ = N/d_in
    η^l = ρ² σ_w² R(K^{l-1})_αβ · Σ_{k<l} η^k         (residual; feed-forward: · η^{l-1})
    χ^l = Σ_{k≤l} η^k                                  (feed-forward: χ^l = η^l)
    χ_out = σ²_w,out R(K^L)_αβ · χ^L
    R(K)_αβ = E[φ'_α φ'_β] (α ≠ β),  R(K)_αα = E[φ'_α² + φ_α φ''_α]

η⁰ = N/d_in is the field-theory normalisation (ν₀ = d_in/N): η^l = (N/d_in) ∂C^l_αβ/∂K⁰_αβ.

The elementwise formula is the exact derivative of K^l_αβ with respect to K⁰_αβ *with every other
entry held fixed* (for α ≠ β: a change of the covariance at fixed variances — how seed 004 Fig. 7
measures it). :func:`linear_response` is the full forward-mode tangent ``δK^l = (∂K^l/∂K⁰)[δK⁰]`` for
any symmetric δK⁰; it adds the cross-entry terms ½E[φ''_α φ_β] δK_αα + ½E[φ_α φ''_β] δK_ββ that the
elementwise formula drops (a change of a variance moves the covariances downstream).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import EXACT_INT, positive_int
from ..results import Result
from . import diagnostics as _diag
from ._args import resolve
from .expectations import cross_price, dgram, diag_price, gram, moments
from .nngp import check_keep, check_memory, layer_slots
from ..registry import sweep_computation


@dataclass(frozen=True)
class ResponseResult(Result):
    """``eta[l]``, ``chi[l]`` (l = 0..L, each P×P), ``chi_out`` (P×P), the NNGP kernels ``K[l]`` and
    ``K_out`` they were evaluated on, ``width`` N, ``d_in``, parameters and diagnostics.

    ``layers`` names the layer index l of each stored slice: None (default, ``keep="all"``) means
    every layer 0..L; with ``keep="last"`` it is ``(0, L)`` and ``eta``, ``chi``, ``K`` have shape
    (2, P, P): ``eta[0]`` = η⁰, ``eta[1]`` = η^L, ``chi[1]`` = χ^L, ``K[1]`` = K^L (``[-1]`` is the last
    layer either way)."""

    eta: np.ndarray
    chi: np.ndarray
    chi_out: np.ndarray
    K: np.ndarray
    K_out: np.ndarray
    width: int
    d_in: int
    params: dict
    diagnostics: dict
    layers: tuple | None = None


@sweep_computation
def response(X=None, depth=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False, rho=1.0,
             sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, *, width,
             K0=None, d_in=None, depth_scaling="none", on_explode="warn", keep="all",
             max_memory=None) -> ResponseResult:
    """Elementwise response η^l, χ^l, χ_out of seed 004 Eq. 45–48 / C15–C17 (feed-forward counterpart
    with ``residual=False``: η^l = ρ²σ_w² R ∘ η^{l-1}, χ^l = η^l). Same arguments as :func:`nngp`
    plus ``width`` = N; with ``K0`` instead of ``X`` also pass ``d_in`` (η⁰ = N/d_in).

    ``keep`` ∈ {"all", "last"}: "all" (default) returns every layer, arrays of shape (L+1, P, P) and
    ``layers=None``; "last" stores only layers 0 and L — ``eta``, ``chi``, ``K`` of shape (2, P, P),
    ``layers=(0, L)`` — so the 3(L+1)P² per-layer arrays are never allocated (O(P²) memory); the kept
    layers and ``chi_out``/``K_out`` are bit-identical to those of keep="all".

    An overflowing response (χ grows like a product of ρ²σ_w² R over layers) never overwrites the
    kernel: ``diagnostics["exploded_at"]`` is the first layer where K blew up, ``diagnostics
    ["chi_exploded_at"]`` the first where η/χ left range (those and later η, χ, χ_out are +inf; K goes on),
    ``diagnostics["status"]`` = {"kernel": ..., "response": ...}. Memory is checked first (``max_memory``
    bytes, default half the available memory; ``ValueError`` otherwise)."""
    keep = check_keep(keep)
    N = positive_int(width, "width", maximum=EXACT_INT)      # η⁰ = N/d_in: a width, not an overflow
    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=rho, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                        depth_scaling=depth_scaling, d_in=d_in)
    if arch.d_in is None:
        raise ValueError("d_in is required when K0 is given (response normalisation eta[0] = N/d_in)")
    _diag.check_on_explode(on_explode)
    act, L, P = arch.activation, arch.depth, K0m.shape[0]
    r2sw2 = arch.rho ** 2 * arch.sigma_w2
    last = keep == "last"
    n, ix = layer_slots(L, keep)
    check_memory(3 * n + 4, P, max_memory, what="response", keep=keep)
    Ks = np.empty((n, P, P))
    eta = np.empty((n, P, P))
    chi = np.empty((n, P, P))
    Ks[0] = K0m
    eta[0] = chi[0] = N / arch.d_in
    exploded = -1
    chi_bad = -1
    fused = str(getattr(act, "name", "")) == "erf"
    W = np.empty((P, P)) if fused else None                   # scratch reused by every fused layer
    with np.errstate(over="ignore", invalid="ignore"):
        for l in range(1, L + 1):
            i, ip = ix(l), ix(l - 1)                   # slots of layers l and l−1 (= l, l−1 for keep="all")
            Kp = Ks[ip]
            if fused:
                _erf_step(Kp, chi[ip], eta[ip], Ks[i], eta[i], chi[i], arch, W)
                if not _diag.layer_ok(Ks[i], psd=True):
                    exploded = l
                    break
                if chi_bad < 0 and not _diag.layer_ok(chi[i]):
                    chi_bad = l
                continue
            E, R = moments(act, Kp)
            np.fill_diagonal(R, diag_price(act, np.diag(Kp)))       # E[φ'² + φφ''] on the diagonal
            if arch.residual:
                np.multiply(E, r2sw2, out=Ks[i])
                Ks[i] += arch.rho ** 2 * arch.sigma_b2
                Ks[i] += Kp
                np.multiply(R, chi[ip], out=eta[i])
                eta[i] *= r2sw2
                np.add(chi[ip], eta[i], out=chi[i])
            else:
                Ks[i] = arch.rho ** 2 * (arch.sigma_w2 * E + arch.sigma_b2)
                eta[i] = r2sw2 * R * eta[ip]
                chi[i] = eta[i]
            if not _diag.layer_ok(Ks[i], psd=True):
                exploded = l
                break
            if chi_bad < 0 and not _diag.layer_ok(chi[i]):
                chi_bad = l
        if exploded >= 0:
            first = 1 if last else exploded            # keep="last": only layer L (slot 1) is after it
            for a in (Ks, eta, chi):
                a[first:] = np.inf
            K_out = np.full((P, P), np.inf)
            chi_out = np.full((P, P), np.inf)
        else:
            KL = Ks[ix(L)]
            E, R = moments(act, KL)
            np.fill_diagonal(R, diag_price(act, np.diag(KL)))
            K_out = arch.sigma_w2_out * E + arch.sigma_b2_out
            chi_out = arch.sigma_w2_out * R * chi[ix(L)]
            if chi_bad < 0 and not _diag.layer_ok(chi_out):
                chi_bad = L + 1
    msgs = []
    if exploded < 0 and chi_bad >= 0:                 # the response overflowed, the kernel did not
        lay = (lambda j: j) if not last else (lambda j: (0, L)[j] if j < 2 else L)
        for j in range(eta.shape[0]):
            if lay(j) >= chi_bad:
                eta[j] = np.inf
                chi[j] = np.inf
        chi_out = np.full((P, P), np.inf)
        msgs.append(f"response χ exploded at layer {chi_bad} (|χ| > {_diag.LARGE:g} or non-finite); "
                    "later η, χ and χ_out are +inf; the NNGP kernel K is unaffected and finite")
    diag = {"exploded_at": exploded, "chi_exploded_at": chi_bad if exploded < 0 else exploded,
            "status": {"kernel": "exploded" if exploded >= 0 else "ok",
                       "response": "exploded" if (exploded >= 0 or chi_bad >= 0) else "ok"},
            "warnings": msgs}
    diag = _diag.finish(diag, Ks[ix(L)], K_out, on_explode, what="response recursion")
    if last:
        return ResponseResult(eta[:2], chi[:2], chi_out, Ks[:2], K_out, N, int(arch.d_in), arch.as_dict(),
                              diag, layers=(0, L))
    return ResponseResult(eta, chi, chi_out, Ks, K_out, N, int(arch.d_in), arch.as_dict(), diag)


def _erf_step(Kp, chi_prev, eta_prev, K_new, eta_new, chi_new, arch, W=None):
    """One erf layer of the kernel + elementwise-response recursion, written straight into the output
    slices with one reusable P×P scratch ``W`` (no per-layer temporaries): s = 2K/√(a_α a_β),
    E = (2/π) arcsin s, R = (4/π)/√(a_α a_β (1 − s²)) off the diagonal, E[φ'² + φφ''] on it."""
    P = Kp.shape[0]
    if W is None:
        W = np.empty_like(Kp)
    d = np.diag(Kp)
    inv = 1.0 / np.sqrt(1.0 + 2.0 * d)
    dp = diag_price(arch.activation, d)
    X = chi_prev if arch.residual else eta_prev
    np.multiply.outer(2.0 * inv, inv, out=W)                   # exactly symmetric
    s_ = np.multiply(Kp, W, out=K_new)                         # s (K_new used as scratch)
    np.multiply(s_, s_, out=eta_new)                           # s²
    if not eta_new.max() <= 1.0 and not np.isnan(eta_new.max()):
        np.clip(s_, -1.0, 1.0, out=s_)
        np.multiply(s_, s_, out=eta_new)
    np.multiply(W, X, out=W)
    np.subtract(1.0, eta_new, out=eta_new)
    np.sqrt(eta_new, out=eta_new)
    np.divide(W, eta_new, out=eta_new)                         # (π/2) E[φ'φ'] ∘ X
    eta_new.flat[:: P + 1] = dp * (np.pi / 2.0) * np.diag(X)   # (π/2) E[φ'² + φφ''] ∘ X
    r2 = arch.rho ** 2
    c = r2 * arch.sigma_w2 * (2.0 / np.pi)
    eta_new *= c
    np.arcsin(s_, out=K_new)                                   # (π/2) E[φφ]
    K_new *= c
    if arch.residual:
        K_new += Kp
    K_new += r2 * arch.sigma_b2
    if arch.residual:
        np.add(chi_prev, eta_new, out=chi_new)
    else:
        chi_new[...] = eta_new


@dataclass(frozen=True)
class LinearResponseResult(Result):
    """Full tangent of the NNGP recursion: ``dK[l] = (∂K^l/∂K⁰)[dK0]`` (l = 0..L), ``dC[l]``, ``dK_out``."""

    dK: np.ndarray
    dC: np.ndarray
    dK_out: np.ndarray
    K: np.ndarray
    K_out: np.ndarray
    params: dict


def tangent_of_expectation(act, K, dK):
    """Directional derivative of E_{N(0,K)}[φ_α φ_β] along symmetric dK (Price's theorem):
    E[φ'_α φ'_β] dK_αβ + ½E[φ''_α φ_β] dK_αα + ½E[φ_α φ''_β] dK_ββ (diagonal: E[φ'²+φφ''] dK_αα)."""
    G = dgram(act, K)
    A = cross_price(act, K)
    dk = np.diag(dK)
    dE = G * dK + A * dk[:, None] + A.T * dk[None, :]
    return 0.5 * (dE + dE.T)


@sweep_computation
def linear_response(X=None, dK0=None, depth=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False,
                    rho=1.0, sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, *,
                    K0=None, depth_scaling="none") -> LinearResponseResult:
    """Forward-mode tangent δK^l of the NNGP recursion for a symmetric perturbation ``dK0`` of the
    read-in kernel (includes the cross-entry terms the elementwise η/χ drop). Multiply by N/d_in to
    compare with :func:`response` on matching entries."""
    from ..checks import finite_array

    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=rho, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out, depth_scaling=depth_scaling)
    if dK0 is None:
        raise ValueError("dK0 (symmetric P×P perturbation of the read-in kernel) is required")
    D = finite_array(dK0, "dK0", ndim=2)
    P = K0m.shape[0]
    if D.shape != (P, P):
        raise ValueError(f"dK0 must have shape {(P, P)}, got {D.shape}")
    if not np.allclose(D, D.T, rtol=0, atol=1e-12 * max(1.0, float(np.max(np.abs(D))))):
        raise ValueError("dK0 must be symmetric")
    act, L = arch.activation, arch.depth
    r2sw2 = arch.rho ** 2 * arch.sigma_w2
    check_memory(3 * (L + 1) + 4, P, None, what="linear_response", keep="none")
    Ks = np.empty((L + 1, P, P))
    dKs = np.empty((L + 1, P, P))
    dCs = np.empty((L + 1, P, P))
    Ks[0] = K0m
    dKs[0] = dCs[0] = 0.5 * (D + D.T)
    for l in range(1, L + 1):
        Kp, dKp = Ks[l - 1], dKs[l - 1]
        C = arch.rho ** 2 * (arch.sigma_w2 * gram(act, Kp) + arch.sigma_b2)
        dC = r2sw2 * tangent_of_expectation(act, Kp, dKp)
        dCs[l] = dC
        Ks[l] = Kp + C if arch.residual else C
        dKs[l] = dKp + dC if arch.residual else dC
    K_out = arch.sigma_w2_out * gram(act, Ks[L]) + arch.sigma_b2_out
    dK_out = arch.sigma_w2_out * tangent_of_expectation(act, Ks[L], dKs[L])
    return LinearResponseResult(dKs, dCs, dK_out, Ks, K_out, arch.as_dict())
