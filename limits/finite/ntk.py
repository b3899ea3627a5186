"""Empirical neural tangent kernel of finite networks, batched over initialisations.

For output unit o, ``Θ̂_{μν} = Σ_θ ∂f_{μo}/∂θ ∂f_{νo}/∂θ``. A weight layer ``u = m W a + m_b b`` has
``∂f_μ/∂W = m g_μ a_μᵀ`` with ``g_μ = ∂f_μ/∂u_μ``, so its contribution is
``m² (g gᵀ) ∘ (a aᵀ) + m_b² (g gᵀ)`` — one backward pass (``g_f`` = e_o on every sample) gives all
``g_μ`` because f_μ depends only on sample μ's forward pass. ``lr_weighted=True`` weights each
layer by its learning rate (the kernel that drives gradient descent with per-layer rates).
"""
from __future__ import annotations

import numpy as np

from ._blas import limit_blas
from .backward import backward
from .forward import forward


@limit_blas
def empirical_ntk(net, weights, X, output=0, lr_weighted=False, per_layer=False):
    """(S, P, P) empirical NTK of output unit ``output``; with ``per_layer`` also a dict of each
    layer's contribution (W and b together)."""
    if not 0 <= int(output) < net.d_out:
        raise ValueError(f"output must lie in [0, {net.d_out}), got {output}")
    fwd = forward(net, weights, X)
    S, P = fwd.f.shape[:2]
    g_f = np.zeros_like(fwd.f)
    g_f[:, :, int(output)] = 1.0
    grads = backward(net, weights, fwd, g_f)
    total = np.zeros((S, P, P))
    parts = {}
    for name, d in net.layers().items():
        g = grads.dpre[name]
        a = fwd.inp[name]
        G = np.matmul(g, g.transpose(0, 2, 1))
        A = np.matmul(a, a.transpose(0, 2, 1))
        cW = d.mult**2 * G * A
        cb = d.bias_mult**2 * G if d.bias else 0.0
        c = d.lr * cW + d.b_lr * cb if lr_weighted else cW + cb
        parts[name] = c
        total = total + c
    if not np.all(np.isfinite(total)):              # never a silent inf/NaN kernel
        raise ValueError("empirical_ntk: the activations or gradients overflowed float64 (inf/NaN in the NTK): the "
                         "network explodes at these parameters or inputs; reduce the variances, the branch scale, "
                         "the depth or the input scale")
    return (total, parts) if per_layer else total
