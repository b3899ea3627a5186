"""First-order (small η̄) gradient-independence gap at infinite width (beyond seed 002 Cor. 1).

Network (docs/theory/nfd.rst §1, γ = 1): ``h⁰ = U x/√d``, ``h^{l+1} = h^l + √dt W^l φ(h^l)/√n`` (dt = T/L),
``f = v·φ(h^L)/n``, online SGD on ½(f − y)² with η = η̄ n on U, W^l, v. Two backward passes:
*coupled* (ordinary backprop, the network's own W^l) and *decoupled* (an independent copy W̃^l
receiving the same updates: the gradient-independence approximation whose infinite-width limit is
the NFD of seed 002).

To first order in η̄ the test output after K steps moves by −η̄ Σ_k χ_k Θ_mode(x, x_k), χ_k = f⁰(x_k) − y_k
(f⁰ = 0 at infinite width), with the coupled NTK

    Θ(x, x') = Σ_{l<L} dt K_l Γ_{l+1} + K^φ_L + [U trained] Σ_0 Γ_0,

K_l = E[φ(h_l)φ(h_l')], Σ_0 = x·x'/d, Γ_L = E[φ'φ'](Σ_L), Γ_l = Γ_{l+1} ⊙ (1 + dt E[φ'φ'](Σ_l)) (the
Euler form of seed 002 Prop. 6, exact at infinite width and finite L). The decoupled pass replaces
one backward factor by g̃ from W̃; W and W̃ are independent and zero-mean, so the mixed backward kernel
keeps only the read-out term, Γ^mix_l = Γ_L. Hence (per unit η̄)

    (f_c − f_d)/η̄ → −Σ_k χ_k [Σ_{l<L} dt K_l ⊙ (Γ_{l+1} − Γ_L) + [U trained] Σ_0 ⊙ (Γ_0 − Γ_L)](x, x_k).

Each layer contributes O(dt) and the sum is O(1): its L → ∞ limit
∫_0^T K_t ⊙ (Γ_t − Γ_T) dt + Σ_0 ⊙ (Γ_0 − Γ_T) is not zero, so the gap does not vanish with depth.
:func:`gia_first_order` computes it at finite L (``limits.check`` compares it with finite
ResNets of that depth: :mod:`limits.checking.nfd`) and, with ``limit=True``, the L → ∞ value.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checks import finite_array, positive_float, positive_int
from ..results import Result
from .kernel_ode import activation_label, phi_gram, residual_recursion
from ..registry import sweep_computation


@dataclass(frozen=True)
class GIAFirstOrder(Result):
    """First-order coupled − decoupled test-output gap per unit η̄ (module docstring).

    ``gap`` (P_test,) at depth ``L``; ``gap_limit`` its L → ∞ value (Richardson extrapolation of the
    O(1/L) Euler error from depths ``limit_depths``) or None. ``params`` records the inputs, so
    ``limits.check(result)`` can rebuild the finite networks."""

    L: int
    T: float
    activation: str
    train_input_layer: bool
    gap: np.ndarray
    gap_limit: np.ndarray | None
    chi: np.ndarray
    params: dict = field(default_factory=dict)


def _gap_per_eta(X, P, chi, L, T, activation, train_input_layer):
    r = residual_recursion(X, int(L), T, activation)
    dt = T / int(L)
    D = np.zeros_like(r.Sigma[0])
    for l in range(int(L)):
        D += dt * phi_gram(activation, r.Sigma[l]) * (r.Gamma[l + 1] - r.Gamma[-1])
    if train_input_layer:
        D += r.Sigma[0] * (r.Gamma[0] - r.Gamma[-1])
    return -(D[:P, P:] @ chi)


@sweep_computation
def gia_first_order(X_train, y_train, X_test, L: int, T: float = 1.0, activation="tanh",
                    train_input_layer: bool = True, chi=None, limit: bool = False,
                    limit_depths=(256, 512)) -> GIAFirstOrder:
    """(f_coupled − f_decoupled)/η̄ at η̄ → 0 after ``len(X_train)`` online-SGD steps (one sample per
    step, in order) at infinite width and depth ``L`` (module docstring). ``chi``: the residuals
    χ_k (default −y_k, the infinite-width value). ``limit=True`` adds the L → ∞ value
    2·gap(L₂) − gap(L₁) for ``limit_depths = (L₁, L₂ = 2L₁)``."""
    L = positive_int(L, "L")
    T = positive_float(T, "T")
    Xtr = finite_array(X_train, "X_train", ndim=2)
    ytr = finite_array(y_train, "y_train", ndim=1)
    Xte = finite_array(X_test, "X_test", ndim=2)
    if Xtr.shape[0] < 1 or Xtr.shape[1] < 1:
        raise ValueError(f"X_train must be non-empty K×d, got shape {Xtr.shape}")
    if ytr.shape[0] != Xtr.shape[0]:
        raise ValueError("y_train and X_train have different lengths")
    if Xte.shape[0] < 1 or Xte.shape[1] != Xtr.shape[1]:
        raise ValueError(f"X_test must be non-empty with d={Xtr.shape[1]} columns, got shape {Xte.shape}")
    ch = -ytr if chi is None else finite_array(chi, "chi", ndim=1)
    if ch.shape != ytr.shape:
        raise ValueError(f"chi must have one entry per training step ({ytr.shape[0]}), got {ch.shape[0]}")
    P = Xte.shape[0]
    X = np.vstack([Xte, Xtr])
    gap = _gap_per_eta(X, P, ch, L, T, activation, bool(train_input_layer))
    lim = None
    if limit:
        L1, L2 = (positive_int(v, "limit_depths") for v in limit_depths)
        if L2 != 2 * L1:
            raise ValueError(f"limit_depths must be (L₁, 2L₁) for the Richardson step, got {tuple(limit_depths)}")
        lim = (2 * _gap_per_eta(X, P, ch, L2, T, activation, bool(train_input_layer))
               - _gap_per_eta(X, P, ch, L1, T, activation, bool(train_input_layer)))
    return GIAFirstOrder(L=L, T=T, activation=activation_label(activation), train_input_layer=bool(train_input_layer),
                         gap=gap, gap_limit=lim, chi=ch,
                         params={"X_train": Xtr, "y_train": ytr, "X_test": Xte, "chi_given": chi is not None})
