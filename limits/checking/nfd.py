"""``limits.check`` of the first-order GIA gap (:func:`limits.nfd.gia_first_order`) against finite
ResNets of the same depth.

Finite side: :func:`limits.finite.gia.online_sgd_modes` trains one width-N, depth-L pre-activation
ResNet (the network of :mod:`limits.nfd.gia`; U_0, v_0, W_0 shared by both modes) by the same
online-SGD steps twice — ordinary (coupled) backprop and backprop through an independent copy W̃
(decoupled) — at two small rates η̄ and 2η̄. With D(η̄) = (f_c − f_d)/η̄ on the test inputs
(f_c = f_d at η̄ = 0: same initialisation), D(η̄) = D₀ + a η̄ + O(η̄²), and each initialisation gives the
Richardson estimate D₀ ≈ 2 D(η̄) − D(2η̄), whose error is O(η̄²) (reported: the size of the removed
a η̄ term). Per init the O(N^{-1/2}) fluctuations of the empirical kernels remain; the mean carries
an O(1/N) bias, extrapolated away (N → ∞ fit mean_N = a + b/N) by :func:`limits.checking.analyse`.
Expected rate of one network's relative deviation: N^{-1/2}. The prediction is the infinite-width
value at the SAME finite depth L (the L → ∞ value is ``result.gap_limit``, not compared here).
"""
from __future__ import annotations

import time

import numpy as np

from .core import spawn_seeds, analyse, register
from ..checks import positive_float

DEFAULT_ETA_BAR = 0.01


def gap_samples(result, widths, inits, seed, *, eta_bar=DEFAULT_ETA_BAR, antithetic=True, progress=None):
    """Per-width sample matrices (inits × P_test) of the Richardson gap 2D(η̄) − D(2η̄) of finite
    ResNets for the prediction ``result`` (module docstring), and the per-width largest removed
    a·η̄ term. Init seeds: ``SeedSequence(seed)`` spawned per width, then per init."""
    from ..finite.gia import online_sgd_modes
    from ..progress import progress as _progress

    eta = positive_float(eta_bar, "eta_bar")
    if eta > 0.1:
        raise ValueError(f"eta_bar must be small (≤ 0.1) for a first-order check, got {eta:g}")
    p = result.params
    if p.get("chi_given"):
        raise ValueError("check: this prediction was computed with given residuals chi=; finite networks have "
                         "their own χ_k = f(x_k) − y_k → −y_k, so recompute it without chi=")
    Xtr, ytr, Xte = (np.asarray(p[k], dtype=float) for k in ("X_train", "y_train", "X_test"))
    L, T, act, train_in = int(result.L), float(result.T), result.activation, bool(result.train_input_layer)
    etas = (eta, 2 * eta)
    base = spawn_seeds(seed, len(widths))
    samples, lin_terms = [], []
    bar = _progress(total=len(widths) * inits, desc="check GIA", disable=None if progress is None else not progress)
    for k, N in enumerate(widths):
        Y = np.empty((inits, Xte.shape[0]))
        lin = np.empty((inits, Xte.shape[0]))
        for s, sd in enumerate(spawn_seeds(base[k], inits)):
            out = online_sgd_modes(Xtr, ytr, Xte, int(N), L, T, act, eta_bars=etas, seed=sd,
                                   train_input_layer=train_in, antithetic=antithetic)
            D = (out[0] - out[1]) / np.asarray(etas)[:, None]
            Y[s] = 2 * D[0] - D[1]
            lin[s] = D[0] - Y[s]                       # the removed a·η̄ term
            bar.update(1)
        samples.append(Y)
        lin_terms.append(float(np.max(np.abs(lin.mean(0)))))
    bar.close()
    return samples, lin_terms


def analyse_gap(result, widths, samples, *, seed=0, alpha=0.01, seconds=0.0, eta_bar=DEFAULT_ETA_BAR,
                lin_terms=None, antithetic=True):
    """The :class:`limits.checking.CheckResult` of ``result`` against ``samples`` (from :func:`gap_samples`)."""
    p = result.params
    L, T, act, train_in = int(result.L), float(result.T), result.activation, bool(result.train_input_layer)
    K = int(np.asarray(p["X_train"]).shape[0])
    labels = [f"gap/η̄[x_test,{j}]" for j in range(np.asarray(result.gap).size)]
    return analyse(f"GIA first-order gap (f_c − f_d)/η̄, L = {L}", widths, result.gap, samples, labels=labels,
                   model={"network": "pre-activation ResNet (limits.finite.gia)", "L": L, "T": T,
                          "activation": act, "train_input_layer": train_in, "steps": K},
                   seed=seed, seconds=seconds, alpha=alpha,
                   details={"model_text": (f"pre-activation ResNet h^(l+1) = h^l + √(T/L) W φ(h^l)/√N, f = v·φ(h^L)/N, "
                                           f"{act}, L = {L}, T = {T:g}, η = η̄N, {K} online-SGD step(s), "
                                           f"U {'trained' if train_in else 'frozen'}"),
                            "observable": (f"Richardson 2D(η̄) − D(2η̄) of D = (f_coupled − f_decoupled)/η̄, "
                                           f"η̄ = {eta_bar:g}, same initialisation and samples in both modes"
                                           + ("; decoupled output averaged over W̃_0 and −W̃_0 (antithetic)"
                                              if antithetic else "")),
                            "eta_bar": eta_bar, "removed_linear_term": lin_terms})


def check_gia_first_order(result, widths, inits, seed, *, alpha=0.01, progress=None, eta_bar=DEFAULT_ETA_BAR,
                          antithetic=True):
    """Check a :class:`limits.nfd.GIAFirstOrder` against finite ResNets (module docstring)."""
    t0 = time.perf_counter()
    samples, lin = gap_samples(result, widths, inits, seed, eta_bar=eta_bar, antithetic=antithetic,
                               progress=progress)
    return analyse_gap(result, widths, samples, seed=seed, alpha=alpha, seconds=time.perf_counter() - t0,
                       eta_bar=eta_bar, lin_terms=lin, antithetic=antithetic)


@register(lambda r: type(r).__name__ == "GIAFirstOrder")
def check_gia(result, widths, inits, seed, *, model=None, X=None, alpha=0.01, progress=None):
    """:func:`check_gia_first_order` as :func:`limits.check` calls it (a GIAFirstOrder records its own
    network and inputs, so ``model=`` and ``X=`` are refused)."""
    if model is not None or X is not None:
        raise ValueError("check: a GIAFirstOrder records its network and inputs; model= and X= are not used")
    return check_gia_first_order(result, widths, inits, seed, alpha=alpha, progress=progress)
