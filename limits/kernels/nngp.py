"""NNGP and NTK recursions on P×P Gram matrices: feed-forward and residual (seed 004 Eq. 29–30).

Network (seed 004 Eq. 1; ``residual=False`` drops the skip connection)::

    h⁰ = W_in x + b_in,     W_in ~ N(0, σ²_w,in/d_in),  b_in ~ N(0, σ²_b,in)
    h^l = [h^{l-1}] + ρ (W^l φ(h^{l-1}) + b^l),  W^l ~ N(0, σ_w²/N),  b^l ~ N(0, σ_b²)
    y = W_out φ(h^L) + b_out,  W_out ~ N(0, σ²_w,out/N)

Kernels:  K⁰ = σ²_w,in XXᵀ/d_in + σ²_b,in;  C^l = ρ² σ_w² E_{N(0,K^{l-1})}[φφ] + ρ² σ_b²;
K^l = K^{l-1} + C^l (residual) or K^l = C^l (feed-forward);  K^{L+1} = σ²_w,out E_{N(0,K^L)}[φφ] + σ²_b,out.

NTK in the NTK parameterisation (every W = σ w/√fan_in with w ~ N(0,1) trainable, biases trainable):
Θ⁰ = K⁰;  Θ^l = [Θ^{l-1}] + C^l + ρ² σ_w² E[φ'φ'] ∘ Θ^{l-1};  Θ_out = K_out + σ²_w,out E[φ'φ'] ∘ Θ^L.
Cost O(L P²) (one Gram of E[φφ] and one of E[φ'φ'] per layer).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..results import Result
from . import diagnostics as _diag
from ._args import resolve
from .expectations import dgram, gram, moments


@dataclass(frozen=True)
class NNGPResult(Result):
    """Layer kernels ``K[l]`` (l = 0..L, shape (L+1, P, P)), residual kernels ``C[l]`` (C[0] = K[0]),
    read-out kernel ``K_out`` (seed 004 K^{L+1}), NTK ``Theta[l]``/``Theta_out`` (None if ntk=False),
    the resolved parameters and diagnostics (``exploded_at`` = first bad layer or −1, spectra, warnings)."""

    K: np.ndarray
    C: np.ndarray
    K_out: np.ndarray
    Theta: np.ndarray | None
    Theta_out: np.ndarray | None
    params: dict
    diagnostics: dict

    @property
    def depth(self) -> int:
        return self.K.shape[0] - 1

    def correlations(self, layer: int | None = None):
        """c^l_αβ = K_αβ / √(K_αα K_ββ) at ``layer`` (default: the last)."""
        K = self.K[-1 if layer is None else layer]
        d = np.sqrt(np.diag(K))
        return K / np.outer(d, d)


def nngp(X=None, depth=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False, rho=1.0,
         sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, *, K0=None,
         depth_scaling="none", d_in=None, ntk=True, on_explode="warn") -> NNGPResult:
    """NNGP (and NTK) kernels of a feed-forward or residual network, seed 004 Eq. 29–30.

    ``X`` is P×d_in (rows are samples) or pass ``K0`` (P×P read-in kernel) instead. Read-in/read-out
    variances default to the hidden ones (``sigma_w2``, ``sigma_b2``). ``depth_scaling`` ∈
    {"none", "sqrt", "linear"} uses ρ_eff = rho, rho/√L, rho/L. ``on_explode`` ∈ {"warn", "raise",
    "ignore"} controls how a blow-up is reported (always recorded in ``diagnostics``).
    """
    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=rho, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                        depth_scaling=depth_scaling, d_in=d_in)
    _diag.check_on_explode(on_explode)
    return _run(K0m, arch, ntk=ntk, on_explode=on_explode)


def _run(K0m, arch, ntk=True, on_explode="warn") -> NNGPResult:
    act, L, P = arch.activation, arch.depth, K0m.shape[0]
    r2 = arch.rho ** 2
    Ks = np.empty((L + 1, P, P))
    Cs = np.empty((L + 1, P, P))
    Th = np.empty((L + 1, P, P)) if ntk else None
    Ks[0] = Cs[0] = K0m
    if ntk:
        Th[0] = K0m
    exploded = -1
    Gb = np.empty((P, P)) if ntk else None            # scratch reused by every layer (no per-layer
    Wb = np.empty((P, P))                              # temporaries: each would be freshly faulted in)
    c_w, c_b = r2 * arch.sigma_w2, r2 * arch.sigma_b2
    with np.errstate(over="ignore", invalid="ignore"):
        for l in range(1, L + 1):
            Kp = Ks[l - 1]
            E, G = moments(act, Kp, derivative=ntk, out=Cs[l], gout=Gb, work=Wb)
            C = Cs[l]                                  # C = ρ²(σ_w² E + σ_b²), in place
            C *= c_w
            C += c_b
            if arch.residual:
                np.add(Kp, C, out=Ks[l])
            else:
                Ks[l] = C
            if ntk:
                T = Th[l]                              # Θ^l = [Θ^{l-1}] + C + ρ²σ_w² G ∘ Θ^{l-1}
                np.multiply(G, Th[l - 1], out=T)
                T *= c_w
                T += C
                if arch.residual:
                    T += Th[l - 1]
            if not _diag.layer_ok(Ks[l], psd=True) or (ntk and not _diag.layer_ok(Th[l], psd=True)):
                exploded = l
                break
        if exploded >= 0:
            Ks[exploded:] = np.inf
            Cs[exploded:] = np.inf
            if ntk:
                Th[exploded:] = np.inf
            K_out = np.full((P, P), np.inf)
            T_out = np.full((P, P), np.inf) if ntk else None
        else:
            KL = Ks[L]
            E, G = moments(act, KL, derivative=ntk)
            K_out = arch.sigma_w2_out * E + arch.sigma_b2_out
            T_out = K_out + arch.sigma_w2_out * G * Th[L] if ntk else None
    diag = {"exploded_at": exploded, "max_abs_K": float(np.max(np.abs(Ks[: exploded if exploded > 0 else L + 1]))),
            "warnings": []}
    diag = _diag.finish(diag, Ks[L], K_out, on_explode, what="NNGP kernel")
    return NNGPResult(Ks, Cs, K_out, Th, T_out, arch.as_dict(), diag)
