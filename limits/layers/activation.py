"""Activation: any registered activation φ applied entrywise (``limits.activation(name)``).

Kernel (u, v jointly Gaussian with variances q_u, q_v and covariance K; ``limits.gaussian`` — closed forms
where they exist, otherwise the certified Mehler series / quadrature)::

    K' = E[φ(u) φ(v)],   Θ' = E[φ'(u) φ'(v)] · Θ

The input must be Gaussian (the output of Dense / Conv / pooling / attention / LayerNorm of Gaussians).
Cost: one Gaussian expectation per block entry; memory unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Layer, register


CHUNK = 1 << 15         # entries per chunk of the ReLU rule: its ~6 temporaries stay in the L2 cache


def _part(a, i, r, j, c):
    """Rows i:i+r and columns j:j+c of a block, or of a factor of length 1 along either axis."""
    a = a[i:i + r] if a.shape[0] > 1 else a
    return a[:, j:j + c] if a.shape[1] > 1 else a


def _relu_pair(K, ql, qr, T):
    """ReLU's E[φφ] and E[φ'φ']·T from one angle (the closed forms of ``limits.activations`` for moderate
    variances): g = √(q_l q_r), det = (g − |K|)(g + |K|), θ = atan2(√det, K);
    E[φφ] = (√det + (π − θ) K)/2π, E[φ'φ'] = (π − θ)/2π — one atan2 per entry for both kernels, done in
    chunks of leading rows (``CHUNK`` entries) so that the temporaries stay in cache."""
    if K.size and max(np.max(ql), np.max(qr)) >= 1e150:   # extreme variances: the library's scale-free forms
        g = np.sqrt(ql * qr)
        if np.max(g) >= 1e150:
            from ..activations import relu_dkernel, relu_kernel

            return relu_kernel(ql, K, qr), (None if T is None else relu_dkernel(ql, K, qr) * T)
    nngp, ntk = np.empty(K.shape), (np.empty(K.shape) if T is not None else None)
    P1, P2 = K.shape[:2]
    per = max(1, K[:1, :1].size)                  # entries per pair of inputs
    c = P2 if per * P2 <= CHUNK else max(1, CHUNK // per)
    r = max(1, CHUNK // (per * c))
    for i in range(0, P1, r):
        for j in range(0, P2, c):
            k = K[i:i + r, j:j + c]
            g = _part(ql, i, r, j, c) * _part(qr, i, r, j, c)
            if g.shape != k.shape:
                g = np.broadcast_to(g, k.shape).copy()
            np.sqrt(g, out=g)
            a = np.abs(k)
            det = g - a
            a += g
            det *= a
            np.maximum(det, 0.0, out=det)
            np.sqrt(det, out=det)
            Kc = np.minimum(k, g, out=a)             # K clipped to [−g, g] (np.clip with array bounds is slower)
            np.negative(g, out=g)
            np.maximum(Kc, g, out=Kc)
            theta = np.arctan2(det, Kc, out=g)
            np.subtract(np.pi, theta, out=theta)     # π − θ
            out = nngp[i:i + r, j:j + c]
            np.multiply(theta, Kc, out=out)
            out += det
            out /= 2.0 * np.pi
            theta /= 2.0 * np.pi
            if T is not None:
                np.multiply(theta, _part(T, i, r, j, c), out=ntk[i:i + r, j:j + c])
    return nngp, (ntk if T is not None else None)


@register
@dataclass(frozen=True)
class Activation(Layer):
    """φ entrywise; ``name`` is any registered activation ("relu", "erf", "tanh", "gelu", …)."""

    name_: str = "relu"

    def __init__(self, name="relu"):
        from .. import activation as _act

        if not isinstance(name, str):
            raise ValueError(f"Activation takes a registered activation name, got {type(name).__name__}")
        _act(name)                                   # ValueError naming the unknown activation
        object.__setattr__(self, "name_", name)

    @property
    def act(self):
        from .. import activation as _act

        return _act(self.name_)

    def describe(self):
        return f"Activation({self.name_!r})"

    def to_dict(self):
        return {"layer": "Activation", "name": self.name_}

    @classmethod
    def from_dict(cls, d):
        return cls(d.get("name", "relu"))

    # ------------------------------------------------------------------ kernel
    def kernel(self, k, need_full_after=True, where=""):
        from .. import gaussian

        if not k.is_gaussian:
            from ..errors import ModelError

            raise ModelError(f"{where}: Activation({self.name_!r}) needs a Gaussian input, but its input is the "
                             "output of a nonlinearity; put a Dense, Conv or Attention layer before it")
        act = self.act
        smooth = getattr(act, "kernel", None) is None and getattr(act, "strip", 0) > 0
        kw = {"method": "mehler"} if smooth else {}

        closed = {gaussian.kernel: act.kernel, gaussian.dkernel: act.dkernel}

        def E(fn, ql, K, qr, kw=kw):
            if closed[fn] is not None:
                # closed form on the broadcast (never expanded) variances; the blocks are covariances by
                # construction, so the engine's input validation (a full-size pass) is skipped
                return np.asarray(closed[fn](ql, K, qr), dtype=np.float64)
            ql, K, qr = np.broadcast_arrays(ql, K, qr)
            return np.asarray(fn(act, ql, K, qr, **kw), dtype=np.float64).reshape(K.shape)

        if not k.spatial and k.cov2 is None:
            # symmetric P×P Gram: the engine's Gram rule (upper triangle; Mehler series / interpolants),
            # exactly what limits.kernels.nngp uses for the same matrix
            K = k.nngp
            nngp = np.asarray(gaussian.gram(act, K))
            ntk = None if k.ntk is None else np.asarray(gaussian.dgram(act, K)) * k.ntk
            return k.replace(nngp=nngp, ntk=ntk, cov1=np.diag(nngp)[:, None].copy(), is_gaussian=False)
        if self.name_ == "relu":
            # self blocks by the same formula as the cross block: equal inputs in X1 and X2 keep equal bits
            nngp_only = lambda K, ql, qr: _relu_pair(K, ql, qr, None)[0]  # noqa: E731
            return k.map_pairs(nngp_only, gaussian_out=False, pair_fn=_relu_pair, self_fn=nngp_only)
        # self blocks without position pairs hold only variances E[φ(u)²]: the engine's default rule for
        # unrelated triples (as limits.kernels.kernel's variance vectors); Gram-like blocks: Mehler series
        var_only = not k.full
        return k.map_pairs(lambda K, ql, qr: E(gaussian.kernel, ql, K, qr),
                           lambda K, T, ql, qr: E(gaussian.dkernel, ql, K, qr) * T, gaussian_out=False,
                           self_fn=lambda K, ql, qr: E(gaussian.kernel, ql, K, qr, {} if var_only else kw))

    # ------------------------------------------------------------------ finite
    def apply(self, params, x):
        return self.act.phi(x), x

    def backward(self, params, x, gy):
        return self.act.dphi(x) * gy, self._no_theta(x)
