"""Target propagation (TP) and difference target propagation (DTP) with linear feedback at the ridge
fixed point (seed 003 §3.1.2 and App. C.1), for plain (MLP) networks, batched over inits.

Representations ``a_k`` are what weight layer k+1 multiplies (``a_0 = x``, ``a_k = φ(u_k)``), the
output is ``f``. The linear feedback ``g_k(x) = Q_k x`` is taken at the minimiser of the ridge
reconstruction loss ``‖Q a_k − a_{k−1}‖² + μ‖Q‖²`` over the batch (seed 003 Eq. S.120; samples are
rows here)::

    Q_k* = A_{k−1}ᵀ (A_k A_kᵀ + μ I_B)⁻¹ A_k   (= A_{k−1}ᵀ A_k (A_kᵀ A_k + μ I)⁻¹, push-through),

applied with a linear solve on the smaller side (B×B or width×width), never an inverse.
Output target ``f̂ = f − β ∂ℓ/∂f`` (Eq. S.122). Targets propagate as
    DTP:  â_{k−1} = a_{k−1} + Q_k (â_k − a_k)      (Eq. S.124)
    TP:   â_{k−1} = Q_k â_k                         (Eq. S.131; → DTP as μ → 0 when A_k has full row rank)
Hidden/read-in layers descend the local loss ``½ c ‖â_k − a_k‖²`` (c = 1/B or 1, as the MSE):
``∂/∂W_k = −m_k [φ'(u_k) ⊙ c(â_k − a_k)]ᵀ a_{k−1}``; the read-out uses the ordinary gradient (S.134).
"""
from __future__ import annotations

import numpy as np

from .backward import Grads, layer_grads
from .forward import Phi


def check_plain(net):
    if net.post_activation or net.readin_phi or not net.readout_phi:
        raise ValueError("net: TP/DTP is implemented for pre-activation MLPs (mlp(...) or plain blocks)")
    for i, b in enumerate(net.blocks):
        if b.residual or len(b.layers) != 1:
            raise ValueError(f"net: TP/DTP needs plain one-layer blocks; block {i} is residual or multi-layer")


def _solve_sym(G, R, mu):
    """Solve (G + μI) X = R for a batch of symmetric PSD G (S, n, n), R (S, n, k)."""
    n = G.shape[-1]
    A = G + mu * np.eye(n) if mu > 0 else G
    try:
        return np.linalg.solve(A, R)
    except np.linalg.LinAlgError:
        raise ValueError("mu: the feedback Gram matrix is singular; use mu > 0 (ridge) — the ridge-less "
                         "limit needs A_k of full rank on the smaller side") from None


def feedback_apply(D, A_next, A_prev, mu=0.0):
    """Rows of ``D`` (S, B, n_next) mapped by the ridge fixed point Q* of layer (prev → next):
    returns ``D Q*ᵀ = D A_nextᵀ (A_next A_nextᵀ + μI)⁻¹ A_prev`` (S, B, n_prev)."""
    B, n_next = A_next.shape[-2], A_next.shape[-1]
    if A_prev.ndim == 2:
        A_prev = A_prev[None]
    if B <= n_next:
        G = np.matmul(A_next, A_next.transpose(0, 2, 1))                 # (S, B, B)
        C = np.matmul(D, A_next.transpose(0, 2, 1))                      # (S, B, B)
        Xt = _solve_sym(G, C.transpose(0, 2, 1), mu)                     # (G+μ)⁻¹ Cᵀ
        return np.matmul(Xt.transpose(0, 2, 1), A_prev)
    H = np.matmul(A_next.transpose(0, 2, 1), A_next)                     # (S, n, n)
    Yt = _solve_sym(H, D.transpose(0, 2, 1), mu)                         # (H+μ)⁻¹ Dᵀ
    return np.matmul(np.matmul(Yt.transpose(0, 2, 1), A_next.transpose(0, 2, 1)), A_prev)


def ridge_feedback(A_next, A_prev, mu=0.0):
    """The matrix Q* (S, n_prev, n_next) explicitly (for tests/inspection; training never forms it)."""
    S, B, n_next = A_next.shape
    eye = np.broadcast_to(np.eye(n_next), (S, n_next, n_next))
    return feedback_apply(eye.copy(), A_next, A_prev if A_prev.ndim == 3 else A_prev[None], mu).transpose(0, 2, 1)


def targets(net, fwd, g_f, beta=1.0, mu=0.0, variant="dtp"):
    """Differences ``â_k − a_k`` for the inputs of layers 2..K (list indexed like the layers;
    entry k is for the input of layer k+1, k = 1..K−1) and the output target difference ``−β g_f``."""
    if variant not in ("tp", "dtp"):
        raise ValueError(f"variant must be 'tp' or 'dtp', got {variant!r}")
    names = net.layer_names()
    A = [fwd.inp[n] for n in names[1:]]                                  # a_1 .. a_{K−1}
    d_out = -beta * g_f                                                  # f̂ − f
    diffs = [None] * len(A)
    D = d_out
    nxt = fwd.f
    target_next = fwd.f + d_out                                          # f̂
    for k in range(len(A) - 1, -1, -1):
        if variant == "dtp":
            D = feedback_apply(D, nxt, A[k], mu)
        else:
            D = feedback_apply(target_next, nxt, A[k], mu) - A[k]
        diffs[k] = D
        target_next = A[k] + D
        nxt = A[k]
    return diffs, d_out


def tp_gradients(net, weights, fwd, g_f, beta=1.0, mu=0.0, variant="dtp", c=None) -> Grads:
    """Weight "gradients" of TP/DTP (the local-loss gradients; read-out: the BP gradient).
    ``c`` is the local-loss scale (default: 1/B, matching ``mse_loss(reduction='mean')``)."""
    check_plain(net)
    P_ = Phi(net)
    if c is None:
        c = 1.0 / fwd.f.shape[1]
    diffs, _ = targets(net, fwd, g_f, beta, mu, variant)
    names = net.layer_names()
    layers = net.layers()
    dW, db, dpre = {}, {}, {}
    g_out = g_f * net.out_scale
    dW["out"], bb, _ = layer_grads(net.readout, g_out, fwd.inp["out"], None, want_input=False)
    dpre["out"] = g_out
    if bb is not None:
        db["out"] = bb
    for k, name in enumerate(names[:-1]):
        # layer `name` produces u whose φ is a_{k+1} = fwd.inp[names[k+1]]; its target difference diffs[k]
        g_u = -c * P_.dphi(fwd.pre[name]) * diffs[k]
        dpre[name] = g_u
        dW[name], bb, _ = layer_grads(layers[name], g_u, fwd.inp[name], None, want_input=False)
        if bb is not None:
            db[name] = bb
    return Grads(dW, db, [], dpre)
