"""One Monte Carlo replica of the DMFT of a composition: the time march (:mod:`limits.dmft.serial.march`) and what
it records per time — f, the NTK, and per hidden stage the equal-time feature kernel Φ_k(t, t) = ⟨x_k x_kᵀ⟩ and
gradient kernel G_k(t, t) = ⟨g_k g_kᵀ⟩ with their spatial indices (docs/theory/dmft.rst §6):

    NTK(t)_{μν} = Σ_k Σ_{ij} G_k[(μi), (νj)](t, t) K̃_k[(μi), (νj)](t, t) + Σ_{ij} m_i m_j K̃_L[(μi), (νj)](t, t)
"""
from __future__ import annotations

import numpy as np

from ..linear import check_stable
from . import spatial
from .fields import Psi
from .march import Stage, backward_step, forward_step, static_source


class Recorder:
    """Per-time outputs of one replica (module docstring); ``keep`` keeps the spatial equal-time kernels."""

    def __init__(self, chain, n_t, keep):
        L, P = chain.L, chain.P
        self.chain, self.keep = chain, keep
        self.f = np.zeros((n_t, P))
        self.ntk = np.zeros((n_t, P, P))
        self.Phi_pool = np.zeros((L, n_t, P, P))
        self.G_pool = np.zeros((L, n_t, P, P))
        self.Phi = [[] for _ in range(L)]
        self.G = [[] for _ in range(L)]
        self.prod0 = None

    def record(self, t, xs, gs, Kts, z_top, gamma0):
        """Fields of every stage at time t: xs[k] (M, b_x), gs[k] (M, b_h), Kts[k] = K̃_k(t, t); z_top (M, b_x)."""
        ch, P = self.chain, self.chain.P
        M = xs[0].shape[0]
        ntk = np.zeros((P, P))
        for k in range(ch.L):
            Phi = xs[k].T @ xs[k] / M
            G = gs[k].T @ gs[k] / M
            Sx, Sh = ch.maps[k].S_x, ch.stages[k].S_out
            self.Phi_pool[k, t] = spatial.block_sum(Phi, P, P, Sx, Sx) / Sx ** 2
            self.G_pool[k, t] = spatial.block_sum(G, P, P, Sh, Sh) / Sh ** 2
            ntk += spatial.block_sum(G * Kts[k], P, P, Sh, Sh)
            if self.keep:
                self.Phi[k].append(Phi)
                self.G[k].append(G)
        top = ch.stages[-1]
        KL = spatial.forward(top, Phi, top.sigma_w2)
        ntk += spatial.block_sum(KL, P, P, top.S_out, top.S_out, ch.m, ch.m)
        self.ntk[t] = ntk
        prod = (z_top * xs[-1]).reshape(M, P, -1).sum(axis=2)
        if self.prod0 is None:
            self.prod0 = prod
        self.f[t] = np.mean(prod - self.prod0, axis=0) / gamma0

    def result(self):
        out = {"f": self.f, "ntk": self.ntk, "Phi_pool": self.Phi_pool, "G_pool": self.G_pool}
        if self.keep:
            out["Phi"] = tuple(np.stack(v) for v in self.Phi)
            out["G"] = tuple(np.stack(v) for v in self.G)
        return out


def run_two_layer(chain, y, mask, gamma0, dt, n_t, M, rng, keep, ablate=False, tick=None, rcond=1e-10):
    """One hidden stage (L = 1): constant C = γ0 dt K̃⁰Δ and D = γ0 dt G̃Δ, so the march is incremental and keeps only
    the current fields (O(M·b) memory, O(M n_t b²) time)."""
    K0, Gt = spatial.input_kernel(chain), spatial.readout_kernel(chain)
    Kf, Gf = (_pool_all(K0, chain.P, chain.stages[0].S_out), _pool_all(Gt, chain.P, chain.maps[0].S_x)) if ablate \
        else (K0, Gt)
    psi = Psi(chain.maps[0], chain.P)
    u, r = static_source(K0, M, rng, rcond), static_source(Gt, M, rng, rcond)
    acc_h, acc_z = np.zeros_like(u), np.zeros_like(r)
    rec = Recorder(chain, n_t, keep)
    Delta = np.zeros((n_t, chain.P))
    Sh, Sx = chain.stages[0].S_out, chain.maps[0].S_x
    g0dt = gamma0 * dt
    for t in range(n_t):
        a, x = psi.forward(u + acc_h, t)
        z = r + acc_z
        g = psi.backward(z, a, t)
        rec.record(t, [x], [g], [K0], z, gamma0)
        _stable(rec, mask, dt, t)
        Delta[t] = (y - rec.f[t]) * mask
        acc_h += g0dt * (g * np.repeat(Delta[t], Sh)[None, :]) @ Kf
        acc_z += g0dt * (x * np.repeat(Delta[t], Sx)[None, :]) @ Gf
        if tick is not None:
            tick()
    return rec.result(), {"dropped": 0.0}


def _stable(rec, mask, dt, t):
    """StepTooLarge as soon as dt·λ_max(NTK(t)) ≥ 2 on the training inputs (GD diverges; stop before the rest)."""
    tr = np.flatnonzero(mask)
    check_stable(rec.ntk[t][np.ix_(tr, tr)], dt, t)


def _pool_all(K, P, S):
    from .march import pooled_positions

    return pooled_positions(K, P, S)


def run_deep(chain, y, mask, gamma0, dt, n_t, M, rng, keep, ablate=False, tick=None, rcond=1e-10):
    """Two or more hidden stages: the one-pass march with two-time operators and responses (module docstring of
    :mod:`limits.dmft.serial.march`)."""
    L = chain.L
    K0, Gt = spatial.input_kernel(chain), spatial.readout_kernel(chain)
    stages = [Stage(chain, k, M, n_t, rng, static_u=K0 if k == 0 else None, static_r=Gt if k == L - 1 else None,
                    rcond=rcond) for k in range(L)]
    rec = Recorder(chain, n_t, keep)
    Delta = np.zeros((n_t, chain.P))
    A_rows = [None] * L
    for t in range(n_t):
        forward_step(chain, stages, t, Delta, gamma0 * dt, A_rows, ablate)
        backward_step(chain, stages, t, Delta, gamma0 * dt, ablate)
        rec.record(t, [s.x[:, t] for s in stages], [s.g[:, t] for s in stages], [s.Kt[t] for s in stages],
                   stages[-1].z[:, t], gamma0)
        _stable(rec, mask, dt, t)
        Delta[t] = (y - rec.f[t]) * mask
        if tick is not None:
            tick()
    dropped = max([s.Fu.dropped for s in stages if s.Fu is not None]
                  + [s.Fr.dropped for s in stages if s.Fr is not None] + [0.0])
    return rec.result(), {"dropped": dropped}
