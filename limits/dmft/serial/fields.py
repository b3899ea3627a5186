"""The channel-wise map ψ = M_b ∘ φ ∘ M_a of one hidden stage on sampled fields, its backward pass and the pieces of
its Jacobian the response functions need (docs/theory/dmft.rst §6).

Arrays carry positions last: a field is (…, P, S). With a = M_a h (pre-activation positions), w = M_bᵀ z:

    x = M_b φ(a),    g = M_aᵀ (φ'(a) ⊙ M_bᵀ z)
    ∂x/∂h = M_b diag φ'(a) M_a,    ∂g/∂z = M_aᵀ diag φ'(a) M_bᵀ,    ∂g/∂h = M_aᵀ diag(φ''(a) ⊙ w) M_a

A LayerNorm directly after the parametric layer (M_a = I) normalises over channels: at infinite width a = (h − m)/s
with m, s² the channel mean and variance — order parameters per sample, position and time, the averages over the
paths — and its backward g = s⁻¹(w − ⟨w⟩ − a⟨a w⟩) (w = φ'(a) ⊙ M_bᵀz) holds ⟨w⟩, ⟨a w⟩ likewise; along one path
they are fixed, so ∂x/∂h and ∂g/∂z gain s⁻¹ and ∂g/∂h = s⁻²(φ''(a) ⊙ M_bᵀz − ⟨a w⟩).
"""
from __future__ import annotations

import numpy as np


def _mat(v, M, transpose=False):
    """v @ Mᵀ (or v @ M with ``transpose``) on the last axis; M None is the identity."""
    if M is None:
        return v
    return v @ (M if transpose else M.T)


class Psi:
    """ψ of a :class:`~limits.dmft.serial.chain.Between` (module docstring), with its LayerNorm statistics per time
    when the stage normalises (``between.ln_eps`` not None)."""

    def __init__(self, between, P):
        self.b = between
        self.P = P
        act = between.act
        self.phi = (lambda v: v) if act is None else act.phi
        self.dphi = (lambda v: np.ones_like(v)) if act is None else act.dphi
        self.d2phi = (lambda v: np.zeros_like(v)) if act is None else act.d2phi
        self.ln = getattr(between, "ln_eps", None)
        self.stats = {}

    def forward(self, h, t=None, frozen=False):
        """(a, x) of fields h (…, P·S_h) → a (…, P, S_a), x (…, P·S_x). With LayerNorm, a is the normalised field
        (a − m)/s, m and s² the mean and variance over the paths (= channels) at time t (``frozen``: the stored ones)."""
        lead = h.shape[:-1]
        a = _mat(h.reshape(lead + (self.P, self.b.S_h)), self.b.Ma)
        if self.ln is not None:
            if not frozen:
                self.stats[t] = {"m": a.mean(axis=0), "inv": 1.0 / np.sqrt(a.var(axis=0) + self.ln)}
            a = (a - self.stats[t]["m"]) * self.stats[t]["inv"]
        x = _mat(self.phi(a), self.b.Mb)
        return a, x.reshape(lead + (-1,))

    def backward(self, z, a, t=None, frozen=False):
        """g (…, P·S_h) from z (…, P·S_x) and the pre-activation a (…, P, S_a); with LayerNorm the backward of the
        normalisation, g = s⁻¹(w − ⟨w⟩ − a⟨a w⟩), the channel averages over the paths at time t."""
        lead = z.shape[:-1]
        w = self.dphi(a) * _mat(z.reshape(lead + (self.P, self.b.S_x)), self.b.Mb, transpose=True)
        if self.ln is not None:
            st = self.stats[t]
            if not frozen:
                st["c1"], st["c2"] = w.mean(axis=0), (a * w).mean(axis=0)
            w = (w - st["c1"] - a * st["c2"]) * st["inv"]
        return _mat(w, self.b.Ma, transpose=True).reshape(lead + (-1,))

    def jacobian_factors(self, a, z):
        """(d1, d2w) for the adjoints over times 0 … a.shape[1]−1 (a (m, T, P, S_a), z (m, T, P·S_x)): φ'(a) and
        φ''(a) ⊙ M_bᵀz, times the LayerNorm's s⁻¹ resp. s⁻² (with −⟨a w⟩ added: the channel averages are order
        parameters, fixed along a path)."""
        d1, d2w = self.dphi(a), self.curvature(z, a)
        if self.ln is not None:
            for s in range(a.shape[1]):
                st = self.stats[s]
                d1[:, s] = d1[:, s] * st["inv"]
                # ⟨a w⟩ at the output time of a forward response (⟨∂x(t)/∂r⟩) is not known yet, and not needed:
                # nothing at time t feeds back into x(t) through g(t)
                d2w[:, s] = (d2w[:, s] - st.get("c2", 0.0)) * st["inv"] ** 2
        return d1, d2w

    # ------------------------------------------------------------------ adjoints (row vectors on the left)
    def bar_h_from_x(self, xb, d1):
        """x̄ ∂x/∂h: xb (m, o, P·S_x), d1 = φ'(a) (m, P, S_a) → (m, o, P·S_h)."""
        m, o = xb.shape[:2]
        v = _mat(xb.reshape(m, o, self.P, self.b.S_x), self.b.Mb, transpose=True) * d1[:, None]
        return _mat(v, self.b.Ma, transpose=True).reshape(m, o, -1)

    def bar_z_from_g(self, gb, d1):
        """ḡ ∂g/∂z: gb (m, o, P·S_h) → (m, o, P·S_x)."""
        m, o = gb.shape[:2]
        v = _mat(gb.reshape(m, o, self.P, self.b.S_h), self.b.Ma) * d1[:, None]
        return _mat(v, self.b.Mb).reshape(m, o, -1)

    def bar_h_from_g(self, gb, d2w):
        """ḡ ∂g/∂h: gb (m, o, P·S_h), d2w = φ''(a) ⊙ M_bᵀz (m, P, S_a) → (m, o, P·S_h)."""
        m, o = gb.shape[:2]
        v = _mat(gb.reshape(m, o, self.P, self.b.S_h), self.b.Ma) * d2w[:, None]
        return _mat(v, self.b.Ma, transpose=True).reshape(m, o, -1)

    def curvature(self, z, a):
        """φ''(a) ⊙ M_bᵀ z (…, P, S_a)."""
        lead = z.shape[:-1]
        w = _mat(z.reshape(lead + (self.P, self.b.S_x)), self.b.Mb, transpose=True)
        return self.d2phi(a) * w
