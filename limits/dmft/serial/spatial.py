"""Patch operators on kernels with spatial indices (docs/theory/dmft.rst §6).

A kernel over (block, position) pairs — block = (time, sample), time-major — is a matrix K of shape
(B₁·S, B₂·S). A parametric layer with patch selection ``sel`` (S_out × |F|, −1 for padding;
:mod:`limits.dmft.serial.chain`) maps it by

    (𝒫K)[(a, i), (b, j)]  = |F|⁻¹ Σ_f K[(a, sel(i, f)), (b, sel(j, f))]          (forward: features → next layer)
    (𝒫ᵀG)[(a, p), (b, q)] = |F|⁻¹ Σ_f Σ_{i: sel(i,f) = p} Σ_{j: sel(j,f) = q} G[(a, i), (b, j)]   (its adjoint)

the rule of :func:`limits.layers.conv.patch` (the kernel rule of Conv; tests check both agree) and its adjoint
⟨𝒫K, G⟩ = ⟨K, 𝒫ᵀG⟩. Both are one sparse matrix Π (S_out² × S_in², |F|·S_out² entries at most) applied to the
position pairs of every block pair: O(|F| S_out² B₁B₂) per application.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp


def patch_matrix(sel, S_in):
    """Π (S_out² × S_in², CSR) of a selection ``sel`` (S_out × F) (module docstring)."""
    S_out, F = sel.shape
    i, j, f = np.meshgrid(np.arange(S_out), np.arange(S_out), np.arange(F), indexing="ij")
    a, b = sel[i, f], sel[j, f]
    ok = (a >= 0) & (b >= 0)
    rows = (i * S_out + j)[ok]
    cols = (a * S_in + b)[ok]
    return sp.csr_matrix((np.full(rows.size, 1.0 / F), (rows, cols)), shape=(S_out * S_out, S_in * S_in))


@functools.lru_cache(maxsize=32)
def _cached(key):
    sel_bytes, shape, S_in = key
    sel = np.frombuffer(sel_bytes, dtype=np.int64).reshape(shape)
    Pi = patch_matrix(sel, S_in)
    return Pi, Pi.T.tocsr()


def stage_operator(stage):
    """(Π, Πᵀ) of a :class:`~limits.dmft.serial.chain.Stage` (cached per selection)."""
    sel = np.ascontiguousarray(stage.sel, dtype=np.int64)
    return _cached((sel.tobytes(), sel.shape, int(stage.S_in)))


def _apply(Pi, K, S_in, S_out):
    """Π on the position pairs of every block pair of K (B₁·S_in × B₂·S_in) → (B₁·S_out × B₂·S_out)."""
    B1, B2 = K.shape[0] // S_in, K.shape[1] // S_in
    K4 = K.reshape(B1, S_in, B2, S_in).transpose(1, 3, 0, 2).reshape(S_in * S_in, B1 * B2)
    out = np.asarray(Pi @ K4).reshape(S_out, S_out, B1, B2)
    return np.ascontiguousarray(out.transpose(2, 0, 3, 1)).reshape(B1 * S_out, B2 * S_out)


def forward(stage, K, scale=1.0):
    """``scale``·𝒫K for the stage's input kernel K (B₁·S_in × B₂·S_in)."""
    if stage.identity:
        return scale * K
    Pi, _ = stage_operator(stage)
    return scale * _apply(Pi, K, stage.S_in, stage.S_out)


def adjoint(stage, G, scale=1.0):
    """``scale``·𝒫ᵀG for a kernel G over the stage's output positions (B₁·S_out × B₂·S_out)."""
    if stage.identity:
        return scale * G
    _, PiT = stage_operator(stage)
    return scale * _apply(PiT, G, stage.S_out, stage.S_in)


def input_kernel(chain):
    """K̃⁰ = σ_w² 𝒫 K^x + σ_b² (P·S × P·S) of the first stage, K^x = x⁰x⁰ᵀ/C over channels (time-constant)."""
    x0 = chain.x0
    P, S, C = x0.shape
    flat = x0.reshape(P * S, C)
    Kx = flat @ flat.T / C
    st = chain.stages[0]
    return forward(st, Kx, st.sigma_w2) + st.sigma_b2


def readout_kernel(chain):
    """G̃^{L−1} = σ_w² 𝒫ᵀ(1_{P×P} ⊗ m mᵀ) (P·S × P·S): the backward source of the last hidden stage, from the
    read-out weights (time-constant, equal for all samples)."""
    st = chain.stages[-1]
    m = chain.m
    G = np.kron(np.ones((chain.P, chain.P)), np.outer(m, m))
    return adjoint(st, G, st.sigma_w2)


def block_sum(K, P1, P2, S1, S2, w1=None, w2=None):
    """Σ_{i, j} w1_i K[(μ, i), (ν, j)] w2_j (P1 × P2) of a (P1·S1 × P2·S2) kernel (w: uniform 1 when None)."""
    K4 = K.reshape(P1, S1, P2, S2)
    if w1 is not None:
        K4 = np.einsum("aibj,i->abj", K4, w1)
    else:
        K4 = K4.sum(axis=1)
    return np.einsum("abj,j->ab", K4, w2) if w2 is not None else K4.sum(axis=2)
