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


def _relu_pair(K, sl, sr, T):
    """ReLU's E[φφ] and E[φ'φ']·T from the block K and the left/right standard deviations sl, sr (per position,
    broadcast; :func:`root_below`), one arctan per entry (:func:`_relu_chunk`), in chunks of leading rows
    (``CHUNK`` entries) so that the temporaries stay in cache. Standard deviations above 1e150 (variances beyond
    1e300, where g + |k| could overflow): the library's scale-free forms on sl², sr²."""
    if K.size and max(np.max(sl), np.max(sr)) > 1e150:
        from ..activations import relu_dkernel, relu_kernel

        ql, qr = sl * sl, sr * sr
        return relu_kernel(ql, K, qr), (None if T is None else relu_dkernel(ql, K, qr) * T)
    zero = bool(K.size) and min(np.min(sl), np.min(sr)) == 0.0
    sl, sr = _plane(sl, K.shape), _plane(sr, K.shape)
    nngp, ntk = np.empty(K.shape), (np.empty(K.shape) if T is not None else None)
    P1, P2 = K.shape[:2]
    per = max(1, K[:1, :1].size)                  # entries per pair of inputs
    c = P2 if per * P2 <= CHUNK else max(1, CHUNK // per)
    r = max(1, CHUNK // (per * c))
    work = np.empty(3 * min(K.size, r * c * per))
    for i in range(0, P1, r):
        for j in range(0, P2, c):
            k = K[i:i + r, j:j + c]
            w = [work[m * k.size:(m + 1) * k.size].reshape(k.shape) for m in range(3)]
            _relu_chunk(k, _part(sl, i, r, j, c), _part(sr, i, r, j, c), None if T is None else _part(T, i, r, j, c),
                        nngp[i:i + r, j:j + c], None if T is None else ntk[i:i + r, j:j + c], *w, zero=zero)
    return nngp, (ntk if T is not None else None)


def _plane(q, shape):
    """A factor broadcast against a block of ``shape``, made contiguous over the block's last two axes (the
    broadcast product of the two factors then runs in long inner loops, not in loops of one axis)."""
    if q.ndim < 2 or len(shape) < 4:
        return q
    return np.ascontiguousarray(np.broadcast_to(q, q.shape[:-2] + tuple(shape[-2:])))


def root_below(q):
    """√q rounded so that (√q)² ≤ q in floating point (one ulp down where the rounded root squares above q): the
    ReLU rule's g = √q_l·√q_r is then ≤ k for an input with itself (k = q_l = q_r) and clips to c = 1 exactly."""
    s = np.sqrt(q)
    return np.where(s * s > q, np.nextafter(s, 0.0), s)


def _relu_chunk(k, sl, sr, T, E, G, w1, w2, w3, zero=False):
    """E ← E[φ(u)φ(v)], G ← E[φ'(u)φ'(v)]·T (G None: skipped) for covariance k and standard deviations sl, sr
    (broadcast) — one arctan per entry, by the half-angle formula (g = sl·sr, k clipped to |k| ≤ g)::

        t = √((g − |k|)/(g + |k|)) = tan(θ_|k|/2),   √det = (g + |k|)·t,
        E[φ'φ'] = (π − θ)/2π = 1/4 + sign(k)·(1/4 − atan(t)/π),   E[φφ] = E[φ'φ']·k + √det/2π

    (k itself in E[φφ]: it exceeds g only by rounding, where √det = 0 and π − θ ∈ {0, π}, one ulp apart.)
    sl² ≤ q_l (:func:`root_below`), so an entry with k = q_l = q_r has g ≤ k, is clipped to k = g and gets
    θ = 0 exactly (a correlation of 1, where E[φ'φ'] has an infinite slope). ``zero``: some standard deviation is
    0 — there g = k = 0 and t = 0/0 is taken as 0 (θ = 0, as atan2(0, 0))."""
    g = np.multiply(sl, sr, out=w1)
    a = np.abs(k, out=w2)
    np.minimum(a, g, out=a)                      # |k| clipped to g
    u = np.subtract(g, a, out=w3)
    v = np.add(g, a, out=w1)                     # g + |k|
    t = np.divide(u, v, out=u)
    if zero:
        np.fmax(t, 0.0, out=t)                   # 0/0 → 0
    np.sqrt(t, out=t)                            # tan(θ_|k|/2) ∈ [0, 1]
    root = np.multiply(v, t, out=v)              # √((g − |k|)(g + |k|))
    m = np.arctan(t, out=t)
    m *= -1.0 / np.pi
    m += 0.25                                    # (π/2 − θ_|k|)/2π ≥ 0
    np.copysign(m, k, out=m)
    m += 0.25                                    # (π − θ)/2π = E[φ'φ']
    np.multiply(m, k, out=E)
    root *= 0.5 / np.pi
    E += root
    if G is not None:
        np.multiply(m, T, out=G)


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
        if k.probe is not None:                      # who watches the inputs of the nonlinearities (composed.py)
            k.probe(self, k)
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

        if not k.spatial and k.cov2 is None and k.pairs is None:
            # symmetric P×P Gram: the engine's Gram rule (upper triangle; Mehler series / interpolants),
            # exactly what limits.kernels.nngp uses for the same matrix
            K = k.nngp
            nngp = np.asarray(gaussian.gram(act, K))
            ntk = None if k.ntk is None else np.asarray(gaussian.dgram(act, K)) * k.ntk
            return k.replace(nngp=nngp, ntk=ntk, cov1=np.diag(nngp)[:, None].copy(), is_gaussian=False)
        if self.name_ == "relu":
            # self blocks by the same formula as the cross block: equal inputs in X1 and X2 keep equal bits
            nngp_only = lambda K, sl, sr: _relu_pair(K, sl, sr, None)[0]  # noqa: E731
            return k.map_pairs(nngp_only, gaussian_out=False, pair_fn=_relu_pair, self_fn=nngp_only,
                               transform=root_below)
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
