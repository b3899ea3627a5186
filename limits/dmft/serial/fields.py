"""The channel-wise map ψ = M_b ∘ φ ∘ M_a of one hidden stage on sampled fields, its backward pass and the pieces of
its Jacobian the response functions need (docs/theory/dmft.rst §6).

Arrays carry positions last: a field is (…, P, S). With a = M_a h (pre-activation positions), w = M_bᵀ z:

    x = M_b φ(a),    g = M_aᵀ (φ'(a) ⊙ M_bᵀ z)
    ∂x/∂h = M_b diag φ'(a) M_a,    ∂g/∂z = M_aᵀ diag φ'(a) M_bᵀ,    ∂g/∂h = M_aᵀ diag(φ''(a) ⊙ w) M_a
"""
from __future__ import annotations

import numpy as np


def _mat(v, M, transpose=False):
    """v @ Mᵀ (or v @ M with ``transpose``) on the last axis; M None is the identity."""
    if M is None:
        return v
    return v @ (M if transpose else M.T)


class Psi:
    """ψ of a :class:`~limits.dmft.serial.chain.Between` (module docstring)."""

    def __init__(self, between, P):
        self.b = between
        self.P = P
        act = between.act
        self.phi = (lambda v: v) if act is None else act.phi
        self.dphi = (lambda v: np.ones_like(v)) if act is None else act.dphi
        self.d2phi = (lambda v: np.zeros_like(v)) if act is None else act.d2phi

    def forward(self, h):
        """(a, x) of fields h (…, P·S_h) → a (…, P, S_a), x (…, P·S_x)."""
        lead = h.shape[:-1]
        a = _mat(h.reshape(lead + (self.P, self.b.S_h)), self.b.Ma)
        x = _mat(self.phi(a), self.b.Mb)
        return a, x.reshape(lead + (-1,))

    def backward(self, z, a):
        """g (…, P·S_h) from z (…, P·S_x) and the pre-activation a (…, P, S_a)."""
        lead = z.shape[:-1]
        w = _mat(z.reshape(lead + (self.P, self.b.S_x)), self.b.Mb, transpose=True)
        return _mat(self.dphi(a) * w, self.b.Ma, transpose=True).reshape(lead + (-1,))

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
