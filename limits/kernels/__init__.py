"""NNGP/NTK recursions, signal propagation, residual response functions (docs/theory/kernels.rst; seed 004).

Public API::

    r = limits.kernels.nngp(X, depth=L, activation="erf", sigma_w2=1.2, sigma_b2=0.2, residual=True, rho=1.0)
    r.K[l], r.C[l], r.K_out, r.Theta[l], r.Theta_out, r.diagnostics
    s = limits.kernels.response(X, depth=L, ..., width=N)    # s.eta[l], s.chi[l], s.chi_out; eta[0] = N/d_in
    t = limits.kernels.linear_response(X, dK0, depth=L, ...) # full tangent ∂K^l/∂K⁰ [dK0]
    c = limits.kernels.critical_line("tanh", 0.05)         # c.sigma_w2 = 1.760955…, c.qstar = 0.570048…
    f = limits.kernels.fixed_point("tanh", 1.5, 0.05)      # q*, c*, χ_1, ξ_q, ξ_c
    v = limits.kernels.kernel_fluctuations(X, ..., width=N) # O(1/N) covariance of empirical kernels
    r = limits.kernels.finite_width(m, X1, X2=None)       # E[K_N] = K + K1/N: r.K1, r.K1_layers, r.Theta1
    o = limits.kernels.optimal_rho(K0=..., depth=L, ...)    # ρ* = argmax χ_out; rho_star_estimate (Eq. 61/62)
    b = limits.kernels.kernel_blocked(m, X, block=256)      # large P: upper-triangle tiles, memory = output + O(block²)
    k = limits.kernels.kernel(limits.serial(...), X)       # compositions of limits.layers (limits.kernels.composed)

Conventions: X is P×d_in (rows are samples) or pass K0 (P×P); read-in/read-out variances default to
the hidden ones; ρ for a feed-forward layer multiplies the whole layer (σ² → ρ²σ²); NTK in the NTK
parameterisation. Gaussian expectations: closed forms (erf, relu, linear) on whole Gram matrices,
Mehler expansion with a certified tail (``limits.mehler``, via ``limits.gaussian.gram``) for smooth activations at P ≥ 8, otherwise
``limits.gaussian``. Cost O(L P²) per recursion; memory (L+1)P² floats per stored stack (K, C, Θ;
pass ntk=False to skip Θ). Results are frozen dataclasses with ``.save``/``.load`` and ``diagnostics``.
"""
from __future__ import annotations

from .diagnostics import KernelExplosion, KernelWarning
from .nngp import NNGPResult, nngp
from .response import LinearResponseResult, ResponseResult, linear_response, response
from .signal import CriticalPoint, PhaseDiagram, SignalPropagation, critical_line, fixed_point, phase_diagram

from .cross import KernelResult, kernel
from .blocked import kernel_blocked
from .finite_width import FiniteWidth, finite_width
from .finite_width_posterior import PosteriorCorrection, finite_width_posterior
from .._lazy import lazy_attributes
from ..model import with_model as _with_model
from .modelview import kernel_view as _kview

nngp = _with_model(nngp, _kview("limits.kernels.nngp"))
response = _with_model(response, _kview("limits.kernels.response", ntk_arg=None))

__all__ = [
    "kernel", "KernelResult", "kernel_blocked", "finite_width", "FiniteWidth", "finite_width_posterior",
    "PosteriorCorrection",
    "nngp", "NNGPResult", "response", "ResponseResult", "linear_response", "LinearResponseResult",
    "critical_line", "CriticalPoint", "fixed_point", "SignalPropagation", "phase_diagram", "PhaseDiagram",
    "KernelWarning", "KernelExplosion",
]


# heavier optional pieces load on first use
__getattr__, __dir__ = lazy_attributes(
    __name__, globals(),
    exports={"kernel_fluctuations": "fluctuations", "KernelFluctuations": "fluctuations",
             "optimal_rho": "optimal", "OptimalRho": "optimal", "rho_star_estimate": "optimal"},
    wrap={"kernel_fluctuations": lambda f: _with_model(f, _kview("limits.kernels.kernel_fluctuations", ntk_arg=None))})
del lazy_attributes
