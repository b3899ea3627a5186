"""Compare the weight-update directions of different learning rules on the same networks
(seed 003 Fig. 2: BP vs Gauss–Newton-target cosines; TP/DTP too)."""
from __future__ import annotations

import numpy as np

from ._blas import limit_blas
from .backward import backward, mse_loss
from .forward import forward

ALGORITHMS = ("bp", "gnt", "dtp", "tp")


@limit_blas
def update_directions(net, weights, X, Y, algorithms=("bp", "gnt"), reduction="mean", gnt_damping=1.0,
                      gnt_power=1.0, tp_beta=1.0, tp_mu=0.0) -> dict:
    """``{algorithm: {layer: dW (S, out, in)}}`` — the descent directions each rule would apply."""
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad:
        raise ValueError(f"algorithms: unknown {bad}; choose from {ALGORITHMS}")
    fwd = forward(net, weights, X)
    Y = np.asarray(Y, float).reshape(X.shape[0], net.d_out)
    _, g = mse_loss(fwd.f, Y, reduction)
    out = {}
    for a in algorithms:
        if a == "bp":
            out[a] = backward(net, weights, fwd, g).dW
        elif a == "gnt":
            from .gnt import gnt_gradients

            out[a] = gnt_gradients(net, weights, fwd, g, gnt_damping, gnt_power).dW
        else:
            from .tp import tp_gradients

            c = 1.0 / X.shape[0] if reduction == "mean" else 1.0
            out[a] = tp_gradients(net, weights, fwd, g, tp_beta, tp_mu, a, c=c).dW
    return out


def cosines(dirs_a: dict, dirs_b: dict) -> dict:
    """Per-layer cosine similarity (S,) between two direction dicts, plus 'all' (concatenated)."""
    out = {}
    num = den_a = den_b = 0.0
    for k in dirs_a:
        a, b = dirs_a[k].reshape(len(dirs_a[k]), -1), dirs_b[k].reshape(len(dirs_b[k]), -1)
        ab, aa, bb = (np.einsum("si,si->s", a, b), np.einsum("si,si->s", a, a), np.einsum("si,si->s", b, b))
        out[k] = ab / np.sqrt(np.maximum(aa * bb, 1e-300))
        num, den_a, den_b = num + ab, den_a + aa, den_b + bb
    out["all"] = num / np.sqrt(np.maximum(den_a * den_b, 1e-300))
    return out
