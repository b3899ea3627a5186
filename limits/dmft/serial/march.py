"""One replica of the DMFT of a composition, marched once in time (docs/theory/dmft.rst §6).

With GD's left sums every quantity at time t depends on earlier times only, and on the same time through the
order forward (stages 0 … L−1) then backward (L−1 … 0): the two-time kernels' rows K(t, s ≤ t), the responses'
rows, the causal source factors (:mod:`limits.dmft.serial.factor`) and the fields of all M paths are built in one
pass — no fixed-point iteration. Per time t:

forward, stage k:  K̃_k(t, ·) = σ²𝒫Φ_{k−1}(t, ·) + σ_b² (k = 0: the input kernel, constant), u_k(t) drawn,
                   C_k(t, s) = γ0 dt K̃_k(t, s) Δ(s) + σ²𝒫⟨∂x_{k−1}(t)/∂r_{k−1}(s)⟩,  h = u + Σ_{s<t} C g,  x = ψ(h)
backward, stage k: G̃_k(t, ·) = σ²𝒫ᵀG_{k+1}(t, ·) (k = L−1: the read-out's, constant), r_k(t) drawn,
                   D_k(t, s) = γ0 dt G̃_k(t, s) Δ(s) [s < t] + σ²𝒫ᵀ⟨∂g_{k+1}(t)/∂u_{k+1}(s)⟩ [s ≤ t],
                   z = r + Σ_{s≤t} D x,  g = ψ'ᵀ z
read-out:          f(t) = γ0⁻¹ ⟨Σ_i z_{L−1,i}(t) x_{L−1,i}(t) − (the same at t = 0)⟩,  Δ(t) = (y − f(t))·mask

(ΔK multiplies the columns of sample ν by Δ_ν(s); the t = 0 product has mean zero: a control variate). With one
hidden stage (L = 1) C and D are constant kernels times Δ and the march is incremental: O(M n_t b²).
"""
from __future__ import annotations

import numpy as np

from . import spatial
from .factor import CausalFactor, psd_root
from .fields import Psi
from .responses import response_row


class Stage:
    """Paths and causal operators of hidden stage k (module docstring)."""

    def __init__(self, chain, k, M, n_t, rng, static_u=None, static_r=None, rcond=1e-10):
        st = chain.stages[k]
        self.k, self.P, self.stage = k, chain.P, st
        self.psi = Psi(chain.maps[k], chain.P)
        self.bh, self.bx = chain.P * st.S_out, chain.P * chain.maps[k].S_x
        self.h = np.zeros((M, n_t, self.bh))
        self.g = np.zeros((M, n_t, self.bh))
        self.a = np.zeros((M, n_t, chain.P, chain.maps[k].S_a))
        self.x = np.zeros((M, n_t, self.bx))
        self.z = np.zeros((M, n_t, self.bx))
        self.C = np.zeros((n_t * self.bh, n_t * self.bh))
        self.D = np.zeros((n_t * self.bx, n_t * self.bx))
        self.K0, self.Gtop = static_u, static_r
        self.u_static = None if static_u is None else static_source(static_u, M, rng, rcond)
        self.r_static = None if static_r is None else static_source(static_r, M, rng, rcond)
        self.zu = None if static_u is not None else rng.standard_normal((M, n_t * self.bh))
        self.zr = None if static_r is not None else rng.standard_normal((M, n_t * self.bx))
        self.Fu = None if static_u is not None else CausalFactor(n_t, self.bh, rcond)
        self.Fr = None if static_r is not None else CausalFactor(n_t, self.bx, rcond)
        self.Kt = []                       # equal-time K̃_k(t, t)

    def source_u(self, t, Krow):
        if self.Fu is None:
            return self.u_static
        L = self.Fu.add_row(t, Krow)
        return self.zu[:, :L.shape[1]] @ L.T

    def source_r(self, t, Grow):
        if self.Fr is None:
            return self.r_static
        L = self.Fr.add_row(t, Grow)
        return self.zr[:, :L.shape[1]] @ L.T


def _scale(K):
    return max(float(np.max(np.abs(np.diag(K)))), 1e-300)


def static_source(K, M, rng, rcond=1e-10):
    """M draws (M × b) of a time-constant source with covariance K (the input's and the read-out's)."""
    return rng.standard_normal((M, K.shape[0])) @ psd_root(K, _scale(K), rcond)[0]


def _row_gram(v_t, hist, M):
    """⟨v(t) v(s)⟩ for s ≤ t: v_t (M, b), hist (M, t+1, b) → (b, (t+1)·b)."""
    return v_t.T @ hist.reshape(M, -1) / M


def _delta_cols(Delta, t, S, upto):
    """Column weights Δ_ν(s) (repeated over S positions) for s < upto: ((upto)·P·S,)."""
    return np.repeat(Delta[:upto], S, axis=1).ravel()


def pooled_positions(K, P, S):
    """Each (μ, ν) block replaced by its mean over position pairs (the 'no spatial index' ablation)."""
    B1, B2 = K.shape[0] // S, K.shape[1] // S
    mean = K.reshape(B1, S, B2, S).mean(axis=(1, 3))
    return np.kron(mean, np.ones((S, S)))


def forward_step(chain, stages, t, Delta, g0dt, A_rows, ablate):
    """Stage k = 0 … L−1 at time t (module docstring); returns the equal-time K̃_k(t, t) per stage."""
    M = stages[0].h.shape[0]
    for k, st in enumerate(stages):
        stage = chain.stages[k]
        if k == 0:
            K0 = st.K0
            Krow = np.tile(K0, (1, t + 1))
            u = st.source_u(t, None)
        else:
            prev = stages[k - 1]
            Phi_row = _row_gram(prev.x[:, t], prev.x[:, :t + 1], M)
            Krow = spatial.forward(stage, Phi_row, stage.sigma_w2) + stage.sigma_b2
            u = st.source_u(t, Krow)
        st.Kt.append(Krow[:, t * st.bh:])
        h = u.copy()
        if t > 0:
            Kfl = Krow[:, :t * st.bh]
            if ablate:
                Kfl = pooled_positions(Kfl, st.P, stage.S_out)
            row = g0dt * Kfl * _delta_cols(Delta, t, stage.S_out, t)[None, :]
            if k > 0:
                row = row + spatial.forward(stage, A_rows[k - 1], stage.sigma_w2)
            st.C[t * st.bh:(t + 1) * st.bh, :t * st.bh] = row
            h += st.g[:, :t].reshape(M, -1) @ row.T
        st.h[:, t] = h
        st.a[:, t], st.x[:, t] = st.psi.forward(h, t)
        if k + 1 < len(stages):
            A_rows[k] = response_row(st, t, "A") if t > 0 else None


def backward_step(chain, stages, t, Delta, g0dt, ablate):
    """Stage k = L−1 … 0 at time t (module docstring)."""
    M = stages[0].h.shape[0]
    L = len(stages)
    B_row = None
    for k in range(L - 1, -1, -1):
        st = stages[k]
        nxt = chain.stages[k + 1]
        if k == L - 1:
            Grow = np.tile(st.Gtop, (1, t + 1))
            r = st.source_r(t, None)
        else:
            up = stages[k + 1]
            G_row = _row_gram(up.g[:, t], up.g[:, :t + 1], M)
            Grow = spatial.adjoint(nxt, G_row, nxt.sigma_w2)
            r = st.source_r(t, Grow)
        row = np.zeros((st.bx, (t + 1) * st.bx))
        if t > 0:
            Gfl = Grow[:, :t * st.bx]
            if ablate:
                Gfl = pooled_positions(Gfl, st.P, chain.maps[k].S_x)
            row[:, :t * st.bx] = g0dt * Gfl * _delta_cols(Delta, t, chain.maps[k].S_x, t)[None, :]
        if B_row is not None:
            row += spatial.adjoint(nxt, B_row, nxt.sigma_w2)
        st.D[t * st.bx:(t + 1) * st.bx, :(t + 1) * st.bx] = row
        z = r + st.x[:, :t + 1].reshape(M, -1) @ row.T
        st.z[:, t] = z
        st.g[:, t] = st.psi.backward(z, st.a[:, t], t)
        B_row = response_row(st, t, "B") if k > 0 else None
