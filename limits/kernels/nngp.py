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
    the resolved parameters and diagnostics (``exploded_at`` = first bad layer or −1, spectra, warnings).

    ``layers`` names the layer index l of each stored slice: None (the default, ``keep="all"``) means
    every layer 0..L; with ``keep="last"`` it is ``(0, L)`` and ``K``, ``C``, ``Theta`` have shape
    (2, P, P): ``K[0]`` = K⁰, ``K[1]`` = K^L (``K[-1]`` is the last layer either way)."""

    K: np.ndarray
    C: np.ndarray
    K_out: np.ndarray
    Theta: np.ndarray | None
    Theta_out: np.ndarray | None
    params: dict
    diagnostics: dict
    layers: tuple | None = None

    @property
    def depth(self) -> int:
        return self.K.shape[0] - 1 if self.layers is None else int(self.layers[-1])

    def correlations(self, layer: int | None = None):
        """c^l_αβ = K_αβ / √(K_αα K_ββ) at layer l = ``layer`` (default: the last; with
        ``keep="last"`` only l ∈ ``layers`` is available)."""
        if layer is None:
            K = self.K[-1]
        elif self.layers is None:
            K = self.K[layer]
        else:
            idx = {int(v): i for i, v in enumerate(self.layers)}
            lay = layer + self.depth + 1 if layer < 0 else layer
            if lay not in idx:
                raise ValueError(f"layer {layer} was not stored (keep='last' keeps layers {tuple(self.layers)})")
            K = self.K[idx[lay]]
        d = np.sqrt(np.diag(K))
        return K / np.outer(d, d)


def nngp(X=None, depth=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False, rho=1.0,
         sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, *, K0=None,
         depth_scaling="none", d_in=None, ntk=True, on_explode="warn", keep="all") -> NNGPResult:
    """NNGP (and NTK) kernels of a feed-forward or residual network, seed 004 Eq. 29–30.

    ``X`` is P×d_in (rows are samples) or pass ``K0`` (P×P read-in kernel) instead. Read-in/read-out
    variances default to the hidden ones (``sigma_w2``, ``sigma_b2``). ``depth_scaling`` ∈
    {"none", "sqrt", "linear"} uses ρ_eff = rho, rho/√L, rho/L. ``on_explode`` ∈ {"warn", "raise",
    "ignore"} controls how a blow-up is reported (always recorded in ``diagnostics``).

    ``keep`` ∈ {"all", "last"}: "all" (default) returns every layer, K/C/Theta of shape (L+1, P, P)
    and ``layers=None``; "last" stores only K⁰ and the last layer — K/C/Theta of shape (2, P, P) with
    ``layers=(0, L)`` — so memory is O(P²) instead of O(L P²); the kept layers are bit-identical.
    """
    keep = check_keep(keep)
    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=rho, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                        depth_scaling=depth_scaling, d_in=d_in)
    _diag.check_on_explode(on_explode)
    return _run(K0m, arch, ntk=ntk, on_explode=on_explode, keep=keep)


def check_keep(keep) -> str:
    if not isinstance(keep, str) or keep not in ("all", "last"):
        raise ValueError(f"keep must be 'all' or 'last', got {keep!r}")
    return keep


def layer_slots(L: int, keep: str):
    """(number of P×P slots, slot of layer l). keep="last": layer 0 in slot 0, layers l ≥ 1 alternate
    between slots 1 and 2 so that layer L lands in slot 1 (the stored result is ``array[:2]``)."""
    if keep == "all":
        return L + 1, (lambda l: l)
    return min(L + 1, 3), (lambda l: 0 if l == 0 else 1 + (L - l) % 2)


def _run(K0m, arch, ntk=True, on_explode="warn", keep="all") -> NNGPResult:
    act, L, P = arch.activation, arch.depth, K0m.shape[0]
    r2 = arch.rho ** 2
    last = keep == "last"
    n, ix = layer_slots(L, keep)
    Ks = np.empty((n, P, P))
    Cs = np.empty((n, P, P))
    Th = np.empty((n, P, P)) if ntk else None
    max_abs = float(np.max(np.abs(K0m))) if last else None
    Ks[0] = Cs[0] = K0m
    if ntk:
        Th[0] = K0m
    exploded = -1
    Gb = np.empty((P, P)) if ntk else None            # scratch reused by every layer (no per-layer
    Wb = np.empty((P, P))                              # temporaries: each would be freshly faulted in)
    c_w, c_b = r2 * arch.sigma_w2, r2 * arch.sigma_b2
    with np.errstate(over="ignore", invalid="ignore"):
        for l in range(1, L + 1):
            i, ip = ix(l), ix(l - 1)
            Kp = Ks[ip]
            E, G = moments(act, Kp, derivative=ntk, out=Cs[i], gout=Gb, work=Wb)
            C = Cs[i]                                  # C = ρ²(σ_w² E + σ_b²), in place
            C *= c_w
            C += c_b
            if arch.residual:
                np.add(Kp, C, out=Ks[i])
            else:
                Ks[i] = C
            if ntk:
                T = Th[i]                              # Θ^l = [Θ^{l-1}] + C + ρ²σ_w² G ∘ Θ^{l-1}
                np.multiply(G, Th[ip], out=T)
                T *= c_w
                T += C
                if arch.residual:
                    T += Th[ip]
            if not _diag.layer_ok(Ks[i], psd=True) or (ntk and not _diag.layer_ok(Th[i], psd=True)):
                exploded = l
                break
            if last:                                   # running max |K^l| (no P² temporary)
                max_abs = max(max_abs, float(Ks[i].max()), -float(Ks[i].min()))
        if exploded >= 0:
            first = 1 if last else exploded            # keep="last": only layer L (slot 1) is after it
            Ks[first:] = np.inf
            Cs[first:] = np.inf
            if ntk:
                Th[first:] = np.inf
            K_out = np.full((P, P), np.inf)
            T_out = np.full((P, P), np.inf) if ntk else None
        else:
            KL = Ks[ix(L)]
            E, G = moments(act, KL, derivative=ntk)
            K_out = arch.sigma_w2_out * E + arch.sigma_b2_out
            T_out = K_out + arch.sigma_w2_out * G * Th[ix(L)] if ntk else None
    if last:
        diag = {"exploded_at": exploded, "max_abs_K": max_abs, "warnings": []}
    else:
        diag = {"exploded_at": exploded,
                "max_abs_K": float(np.max(np.abs(Ks[: exploded if exploded > 0 else L + 1]))), "warnings": []}
    diag = _diag.finish(diag, Ks[ix(L)], K_out, on_explode, what="NNGP kernel")
    if last:
        return NNGPResult(Ks[:2], Cs[:2], K_out, Th[:2] if ntk else None, T_out, arch.as_dict(), diag,
                          layers=(0, L))
    return NNGPResult(Ks, Cs, K_out, Th, T_out, arch.as_dict(), diag)
