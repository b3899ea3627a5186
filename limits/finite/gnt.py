"""Gauss–Newton targets (GNT, seed 003 §3.1.2 and Prop. 3.3) for any network, batched over inits.

Per sample μ and weight layer l with pre-activation u_l, let ``J = ∂f_μ/∂u_{l,μ}`` (width × d_out) and
``e = ∂ℓ/∂f_μ``. The BP signal is ``J e``; the preconditioned (GNT) signal is

    s_l = (J Jᵀ + ρ I)^{-e_B} J e = J (JᵀJ + ρ I)^{-e_B} e          (push-through; d_out × d_out),

so e_B = 0 is plain gradient descent and e_B = 1 the damped Gauss–Newton target. The weight update
direction is ``m s_lᵀ a_{l−1}`` (the layer's input), as for BP. J is obtained with d_out backward
passes (g_f = unit vector of each output), so this costs d_out × a BP step. Here δ_l of the seed is
taken as ∂f/∂u_l (φ' included by the chain rule) — the seed's notation leaves this implicit.
"""
from __future__ import annotations

import numpy as np

from .backward import Grads, layer_grads, backward


def _matrix_power_psd(M, power):
    """(M)^power for a batch of symmetric PD matrices (..., d, d) via eigh."""
    lam, V = np.linalg.eigh(M)
    return np.matmul(V * lam[..., None, :] ** power, np.swapaxes(V, -1, -2))


def gnt_gradients(net, weights, fwd, g_f, damping=1.0, power=1.0) -> Grads:
    """GNT update directions ``dW``/``db`` (and ``dpre`` = the preconditioned signals s_l)."""
    damping = float(damping)
    if not damping > 0 and power != 0:
        raise ValueError(f"damping must be > 0, got {damping}")
    S, P, d = fwd.f.shape
    names = net.layer_names()
    Js = {n: [] for n in names}
    for o in range(d):
        e = np.zeros_like(fwd.f)
        e[:, :, o] = 1.0
        gr = backward(net, weights, fwd, e)
        for n in names:
            Js[n].append(gr.dpre[n])
    dW, db, dpre = {}, {}, {}
    layers = net.layers()
    eye = np.eye(d)
    for n in names:
        J = np.stack(Js[n], axis=-1)                                      # (S, P, width, d)
        if power == 0:
            coeff = g_f
        else:
            M = np.matmul(np.swapaxes(J, -1, -2), J) + damping * eye      # (S, P, d, d)
            if power == 1:
                coeff = np.linalg.solve(M, g_f[..., None])[..., 0]
            else:
                coeff = np.matmul(_matrix_power_psd(M, -float(power)), g_f[..., None])[..., 0]
        s = np.matmul(J, coeff[..., None])[..., 0]                         # (S, P, width)
        dpre[n] = s
        dW[n], bb, _ = layer_grads(layers[n], s, fwd.inp[n], None, want_input=False)
        if bb is not None:
            db[n] = bb
    return Grads(dW, db, [], dpre)
