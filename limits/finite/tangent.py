"""Finite MLPs together with their tangent network, sampled layer by layer (docs/theory/finite_width.rst §3).

For ``model.finite(N)`` (MLP, NTK parameterisation: every parameter θ ~ N(0, 1)) and an independent
direction δ ~ N(0, I) in parameter space, the pre-activations h^l and their tangents ḣ^l = ∇_θ h^l·δ have,
given layer l, iid rows z_k = (h_k, ḣ_k) ∈ R^{2P} of the next layer with covariance (s, b = σ_w², σ_b²;
σ²_w,out, σ²_b,out at the read-out)::

    C = [[s Φ̂(φ, φ) + b,  s Φ̂(φ, ψ)],  [s Φ̂(ψ, φ),  s (Φ̂(φ, φ) + Φ̂(ψ, ψ)) + b]],   ψ = φ'(h) ḣ,

Φ̂(a, c) = (1/N) Σ_k a_k c_kᵀ, and the read-in rows are iid N(0, K⁰) for h⁰ and, independently, for ḣ⁰.
Drawing z = C^{1/2} ξ per neuron reproduces the joint law of the weights' forward pass exactly (the
conditional sampler of :mod:`limits.finite.empirical`, for the pair). The read-out block C^{L+1} is
E[f fᵀ | hidden layers] (upper-left) and E_δ[ḟ ḟᵀ | hidden layers] (lower-right), whose mean over
networks is E[Θ_N] exactly: the empirical NTK Rao–Blackwellised over the read-out weights and the
direction δ. :func:`tangent_samples` returns every layer's C per network.
"""
from __future__ import annotations

import numpy as np

from ..checks import positive_int


def _sqrt_psd(C):
    """Batched symmetric square roots of PSD matrices (eigendecomposition, negative rounding clipped)."""
    lam, V = np.linalg.eigh(0.5 * (C + np.swapaxes(C, -1, -2)))
    return V * np.sqrt(np.clip(lam, 0.0, None))[..., None, :]


def _layer_cov(act, z, P, s, b):
    """(S, 2P, 2P) conditional covariance of the next layer's (h, ḣ) from this layer's neurons z (S, N, 2P)."""
    h, hd = z[..., :P], z[..., P:]
    a = np.concatenate([act.phi(h), act.dphi(h) * hd], axis=-1)          # (S, N, 2P): φ, ψ
    G = np.matmul(np.swapaxes(a, -1, -2), a) / z.shape[-2]              # (S, 2P, 2P)
    C = s * G
    C[:, P:, P:] += s * G[:, :P, :P]
    C[:, :P, :P] += b
    C[:, P:, P:] += b
    return C


def tangent_samples(model, X, width, n_inits, seed, chunk=2000):
    """(S, L+2, 2P, 2P) for a :class:`limits.Model` ``model``: per network, the conditional covariance C^l of (h^l, ḣ^l) for l = 0..L+1
    (C⁰ = the exact read-in block diag(K⁰, K⁰); l = L+1 the read-out: E[f fᵀ|·] and E[Θ|·] blocks).
    ``seed`` fixes every chunk's generator (``numpy.random.SeedSequence(seed).spawn``)."""
    from ..errors import ModelError

    m = model
    if m.residual or m.param_name != "NTK" or m.block_layers != 1 or m.post_activation:
        raise ModelError("tangent_samples: MLPs in the NTK parameterisation (pre-activation, one-layer blocks) only")
    N, S = positive_int(width, "width"), positive_int(n_inits, "n_inits")
    X = np.asarray(X, dtype=np.float64)
    P, L = X.shape[0], m.depth
    v = m.variances()
    s = [v["sigma_w2"]] * L + [v["sigma_w2_out"]]
    b = [v["sigma_b2"]] * L + [v["sigma_b2_out"]]
    K0 = v["sigma_w2_in"] * (X @ X.T) / X.shape[1] + v["sigma_b2_in"]
    C0 = np.zeros((2 * P, 2 * P))
    C0[:P, :P] = C0[P:, P:] = K0
    out = np.empty((S, L + 2, 2 * P, 2 * P))
    out[:, 0] = C0
    n_chunks = -(-S // chunk)
    for c, ss in enumerate(np.random.SeedSequence(int(seed)).spawn(n_chunks)):
        rng = np.random.default_rng(ss)
        lo, hi = c * chunk, min(S, (c + 1) * chunk)
        C = np.broadcast_to(C0, (hi - lo, 2 * P, 2 * P))
        for l in range(L + 1):
            xi = rng.standard_normal((hi - lo, N, 2 * P))
            z = np.matmul(xi, np.swapaxes(_sqrt_psd(C), -1, -2))          # rows ~ N(0, C)
            C = _layer_cov(m.act, z, P, s[l], b[l])
            out[lo:hi, l + 1] = C
    return out
