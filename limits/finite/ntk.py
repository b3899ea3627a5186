"""Empirical neural tangent kernel of finite networks, batched over initialisations.

For output unit o, ``Θ̂_{μν} = Σ_θ ∂f_{μo}/∂θ ∂f_{νo}/∂θ``. A weight layer ``u = m W a + m_b b`` has
``∂f_μ/∂W = m g_μ a_μᵀ`` with ``g_μ = ∂f_μ/∂u_μ``, so its contribution is
``m² (g gᵀ) ∘ (a aᵀ) + m_b² (g gᵀ)`` — one backward pass (``g_f`` = e_o on every sample) gives all
``g_μ`` because f_μ depends only on sample μ's forward pass. ``lr_weighted=True`` weights each
layer by its learning rate (the kernel that drives gradient descent with per-layer rates).

:func:`conditional_ntk` draws the same random matrix Θ̂ (exactly in distribution) without ever forming
a weight matrix: a layer's W enters only as ``W a`` (forward, P inputs a) and ``gᵀ W`` (backward, P
vectors g). With ``aᵀ = Q R`` (reduced QR), ``W Q`` is an iid Gaussian fan_out × r block, so
``a Wᵀ = Rᵀ (W Q)ᵀ``; given the forward pass, ``W (I − Q Qᵀ)`` is still iid and independent of it, and
``g W = (g W Q) Qᵀ + R_gᵀ Z₂ (I − Q Qᵀ)`` with ``gᵀ = Q_g R_g`` and Z₂ an iid r' × fan_in block. Cost
O(S·L·N·P²) and memory O(S·L·N·P) instead of O(S·L·N²·P) and O(S·N²) for the dense weights.
"""
from __future__ import annotations

import numpy as np

from ._blas import limit_blas
from .backward import backward
from .forward import check_inputs, forward
from .weights import Streams, init_streams


@limit_blas
def empirical_ntk(net, weights, X, output=0, lr_weighted=False, per_layer=False):
    """(S, P, P) empirical NTK of output unit ``output``; with ``per_layer`` also a dict of each
    layer's contribution (W and b together)."""
    if not 0 <= int(output) < net.d_out:
        raise ValueError(f"output must lie in [0, {net.d_out}), got {output}")
    fwd = forward(net, weights, X)
    return _assemble(net, weights, fwd, output, lr_weighted, per_layer)


def _assemble(net, weights, fwd, output, lr_weighted, per_layer):
    """Θ̂ = Σ_layers m² (g gᵀ) ∘ (a aᵀ) + m_b² (g gᵀ) from one backward pass with g_f = e_output."""
    S, P = fwd.f.shape[:2]
    g_f = np.zeros_like(fwd.f)
    g_f[:, :, int(output)] = 1.0
    grads = backward(net, weights, fwd, g_f, params=False)
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


class ConditionalWeight:
    """One layer's W (S inits) known only through ``W a`` and ``g W`` — drawn when first used.

    Standard normals are consumed from substream (init, layer j) in the fixed order Z₁ (fan_out × r),
    bias (fan_out), Z₂ (r' × fan_in), r = min(fan_in, P), r' = min(fan_out, P): the draw of init s
    does not depend on how the inits are chunked.
    """

    def __init__(self, dense, streams, j, P):
        S, fi, fo = len(streams), dense.fan_in, dense.fan_out
        r, r2 = min(fi, P), min(fo, P)
        nb = fo if dense.bias else 0
        buf = np.empty((S, fo * r + nb + r2 * fi))
        for k in range(S):
            streams.gen(k, j).standard_normal(buf.shape[1], out=buf[k])
        self.G1 = dense.std * buf[:, :fo * r].reshape(S, fo, r)
        self.b = dense.bias_std * buf[:, fo * r:fo * r + nb] if nb else None
        self.G2 = dense.std * buf[:, fo * r + nb:].reshape(S, r2, fi)
        self.Q = None

    def apply(self, inp):
        """``inp Wᵀ`` (S, P, fan_out) for inp (S|1, P, fan_in); fixes W Q = G₁ on span(inp)."""
        if self.Q is not None:
            raise RuntimeError("a ConditionalWeight is applied once (one forward pass)")
        Q, R = np.linalg.qr(inp.transpose(0, 2, 1))
        self.Q = Q
        return np.matmul(R.transpose(0, 2, 1), self.G1.transpose(0, 2, 1))

    def apply_T(self, g):
        """``g W`` (S, P, fan_in) for g (S, P, fan_out), conditional on the forward pass."""
        Q = self.Q
        QT = Q.transpose(0, 2, 1)
        known = np.matmul(np.matmul(g, self.G1), QT)
        _, Rg = np.linalg.qr(g.transpose(0, 2, 1))
        fresh = np.matmul(Rg.transpose(0, 2, 1), self.G2)
        fresh -= np.matmul(np.matmul(fresh, Q), QT)
        return known + fresh


class ConditionalWeights:
    """Stand-in for :class:`limits.finite.weights.Weights` in one forward + backward pass."""

    def __init__(self, net, streams, P):
        self.W, self.b = {}, {}
        for j, (name, dense) in enumerate(net.layers().items()):
            w = ConditionalWeight(dense, streams, j, P)
            self.W[name] = w
            if w.b is not None:
                self.b[name] = w.b

    def backward_weight(self, name):
        return self.W[name]


@limit_blas
def conditional_ntk(net, X, n_inits=None, seed=None, rng=None, streams=None, output=0,
                    lr_weighted=False, per_layer=False):
    """(S, P, P) empirical NTK of output unit ``output`` for S fresh initialisations, drawn exactly in
    distribution like :func:`empirical_ntk` of ``init_weights(net, S)`` but without weight matrices
    (module docstring): O(N·P²) per layer and init instead of O(N²·P). Ordinary (coupled) backprop only.
    ``streams`` (a :class:`limits.finite.weights.Streams`) overrides ``n_inits``/``seed``/``rng``."""
    if not 0 <= int(output) < net.d_out:
        raise ValueError(f"output must lie in [0, {net.d_out}), got {output}")
    X = check_inputs(net, X)
    if streams is None:
        if n_inits is None:
            raise ValueError("conditional_ntk needs n_inits (or streams)")
        streams = init_streams(n_inits, rng, seed)
    elif not isinstance(streams, Streams):
        raise ValueError("streams must be a limits.finite.weights.Streams")
    weights = ConditionalWeights(net, streams, X.shape[0])
    fwd = forward(net, weights, X, check=False)
    return _assemble(net, weights, fwd, output, lr_weighted, per_layer)


assemble_ntk = _assemble     # public within the package: limits.checking.finite_width assembles the same NTK
