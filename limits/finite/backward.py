"""Hand-written backward pass (reverse-mode), batched over initialisations.

Given ``g_f = ∂ℓ/∂f`` it returns ∂ℓ/∂W, ∂ℓ/∂b for every layer and ∂ℓ/∂(pre-activation) for every
hidden representation (``g^l = ∂ℓ/∂h^l`` of docs/theory/nfd.rst §3). Propagation to earlier layers uses
``weights.backward_weight(name)`` — the same W for ordinary backprop, an independent copy W̃ in the
decoupled ("GIA") mode of docs/theory/nfd.rst §5. Verified against central finite differences in
``tests/finite/test_finite_backward.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._blas import limit_blas
from .forward import Phi


@dataclass
class Grads:
    """``dW[name]`` (S, out, in), ``db[name]`` (S, out), ``dh[l]`` = ∂ℓ/∂h^l (S, P, N),
    ``dpre[name]`` = ∂ℓ/∂(output of layer name) (S, P, fan_out)."""

    dW: dict
    db: dict
    dh: list
    dpre: dict


def mse_loss(f, Y, reduction="mean"):
    """``ℓ_s = c Σ_{μ,o} ½ (f_{sμo} − y_{μo})²`` with ``c = 1/P`` ("mean") or 1 ("sum").

    Returns (loss (S,), ∂ℓ/∂f (S, P, d_out))."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    r = f - Y[None] if Y.ndim == 2 else f - Y
    c = 1.0 / f.shape[1] if reduction == "mean" else 1.0
    loss = 0.5 * c * np.einsum("spo,spo->s", r, r)
    return loss, c * r


def layer_grads(dense, g_pre, inp, Wb, want_input=True, want_params=True):
    """For u = m·inp Wᵀ + b: (∂ℓ/∂W, ∂ℓ/∂b, ∂ℓ/∂inp) given g_pre = ∂ℓ/∂u (∂ℓ/∂W, ∂ℓ/∂b are None
    without ``want_params``)."""
    if not want_params:
        dW = None
    elif inp.shape[0] == 1 and g_pre.shape[0] != 1:
        dW = np.einsum("spo,pi->soi", g_pre, inp[0], optimize=True)
    else:
        dW = np.matmul(g_pre.transpose(0, 2, 1), inp)
    if dW is not None and dense.mult != 1.0:
        dW *= dense.mult
    db = dense.bias_mult * g_pre.sum(axis=1) if dense.bias and want_params else None
    g_in = None
    if want_input:
        g_in = Wb.apply_T(g_pre) if hasattr(Wb, "apply_T") else np.matmul(g_pre, Wb)
        if dense.mult != 1.0:
            g_in *= dense.mult
    return dW, db, g_in


@limit_blas
def backward(net, weights, fwd, g_f, params=True) -> Grads:
    """Reverse pass: ``g_f`` = ∂ℓ/∂f with shape (S, P, d_out). ``params=False`` skips ∂ℓ/∂W, ∂ℓ/∂b
    (``dW``/``db`` stay empty; ``dh``, ``dpre`` are filled) — what the NTK needs."""
    P = Phi(net)
    dW, db, dpre = {}, {}, {}
    nB = net.n_blocks
    dh = [None] * (nB + 1)

    g_out = g_f * net.out_scale
    dpre["out"] = g_out
    dW["out"], bb, g_a = layer_grads(net.readout, g_out, fwd.inp["out"], weights.backward_weight("out"),
                                      want_params=params)
    if bb is not None:
        db["out"] = bb
    g_h = P.dphi(fwd.h[nB]) * g_a if net.readout_phi else g_a
    dh[nB] = g_h

    for i in range(nB, 0, -1):
        blk = net.blocks[i - 1]
        h_prev = fwd.h[i - 1]
        if net.post_activation:
            g_z = P.dphi(fwd.z[i - 1]) * g_h
        else:
            g_z = g_h
        g_u = g_z if blk.branch == 1.0 else blk.branch * g_z
        nL = len(blk.layers)
        for k in range(nL, 0, -1):
            name = f"{i}.{k}"
            d = blk.layers[k - 1]
            dpre[name] = g_u
            dW[name], bb, g_in = layer_grads(d, g_u, fwd.inp[name], weights.backward_weight(name),
                                              want_params=params)
            if bb is not None:
                db[name] = bb
            if k > 1:
                g_u = P.dphi(fwd.pre[f"{i}.{k - 1}"]) * g_in
        if not net.post_activation:
            g_in = P.dphi(h_prev) * g_in
        g_h = g_z + g_in if blk.residual else g_in
        dh[i - 1] = g_h

    g_pre0 = P.dphi(fwd.pre["in"]) * g_h if net.readin_phi else g_h
    dpre["in"] = g_pre0
    dW["in"], bb, _ = layer_grads(net.readin, g_pre0, fwd.inp["in"], None, want_input=False,
                                   want_params=params)
    if bb is not None:
        db["in"] = bb
    return Grads(dW if params else {}, db, dh, dpre)


def loss_and_grads(net, weights, X, Y, reduction="mean", f0=None):
    """Forward + MSE loss + backward. ``f0`` (S, P, d_out): centre the output (f − f0)."""
    from .forward import forward

    fwd = forward(net, weights, X)
    f = fwd.f if f0 is None else fwd.f - f0
    loss, g = mse_loss(f, Y, reduction)
    return loss, backward(net, weights, fwd, g), fwd
