"""Attention: global multi-head self-attention, the infinite-width limit of Hron et al. (2020) in the
convention of neural-tangents' ``GlobalSelfAttention(linear_scaling=True)`` (softmax, no positional
embedding).

Finite (positions i, j over all spatial positions; per head h, key/query weights tied, W ~ N(0, 1))::

    k_h,i = x_i W^K_h,   logits_h,ij = s · ⟨k_h,i, k_h,j⟩ / (C · n_key)      ← the logit scaling: 1/n_key (not 1/√n_key)
    A_h = softmax_j(logits_h),   v_h = x W^V_h,   y = σ_w/√(n_val · H · C) · concat_h(A_h v_h) W^O + σ_b b

with s = ``qk_scale`` (neural-tangents' W_query_std·W_key_std) and σ_w² = ``sigma_w2``
((W_out_std·W_value_std)²). At infinite width the logits converge to s·K(x, x)[i, j], so
A(x) = softmax_j(s Σ_x) is deterministic and::

    K'(x, y) = σ_w² A(x) K(x, y) A(y)ᵀ + σ_b²,      Θ' = σ_w² A(x) (Θ + 2K) A(y)ᵀ + σ_b²

(the value and output weights each contribute σ_w² A K Aᵀ; the key weights' share vanishes like 1/N).
Needs every pair of positions; cost O(P1·P2·S³), memory P1·P2·S² per block.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import positive_int, real_number
from .base import Layer, bias_theta, gram_theta, register
from .state import full_from_positions, positions_from_full


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _heads(xs, W):
    """x W_h for every head: (S, P, T, C), (S, H, C, n) → (S, P, H, T, n) by one batched matmul per init."""
    S, P, T, C = xs.shape
    H, n = W.shape[1], W.shape[-1]
    out = np.matmul(xs.reshape(S, P * T, C), W.transpose(0, 2, 1, 3).reshape(S, C, H * n))
    return out.reshape(S, P, T, H, n).transpose(0, 1, 3, 2, 4)


def _heads_back(d, W):
    """Σ_h d_h W_hᵀ: (S, P, H, T, n), (S, H, C, n) → (S, P, T, C)."""
    S, P, H, T, n = d.shape
    Wt = W.transpose(0, 1, 3, 2).reshape(S, H * n, W.shape[2])
    return np.matmul(d.transpose(0, 1, 3, 2, 4).reshape(S, P * T, H * n), Wt).reshape(S, P, T, -1)


@register
@dataclass(frozen=True)
class Attention(Layer):
    """Multi-head self-attention (module docstring): ``n_heads`` heads, logits s·⟨k_i, k_j⟩/(C n_key)."""

    n_heads: int = 1
    qk_scale: float = 1.0
    sigma_w2: float = 1.0
    sigma_b2: float = 0.0
    parametric = True
    fresh_output = True

    def __post_init__(self):
        object.__setattr__(self, "n_heads", positive_int(self.n_heads, "Attention.n_heads"))
        object.__setattr__(self, "qk_scale", real_number(self.qk_scale, "Attention.qk_scale", allow_negative=True))
        object.__setattr__(self, "sigma_w2", real_number(self.sigma_w2, "Attention.sigma_w2"))
        object.__setattr__(self, "sigma_b2", real_number(self.sigma_b2, "Attention.sigma_b2"))

    def needs_full(self, after):
        return True

    def kernel_work(self, spatial, full):
        """A_l K A_rᵀ per pair of inputs: 2·S updates per block entry (S positions)."""
        return 2.0 * float(np.prod(spatial)) if spatial else 1.0

    # ------------------------------------------------------------------ kernel
    def kernel(self, k, need_full_after=True, where=""):
        if not k.spatial:
            raise ValueError(f"{where}: Attention needs inputs with positions (P, *spatial, C); this input is (P, C)")
        sp, w, b = k.spatial, self.sigma_w2, self.sigma_b2
        A1 = _softmax(self.qk_scale * positions_from_full(k.cov1, sp)[:, 0])            # (P1, S, S)
        A2 = A1 if k.cov2 is None else _softmax(self.qk_scale * positions_from_full(k.cov2, sp)[:, 0])

        def weigh(K, Al, Ar, self_block=False):
            G = positions_from_full(K, sp)
            if self_block:
                out = np.einsum("xia,xab,xjb->xij", Al, G[:, 0], Al, optimize=True)[:, None]
            else:
                out = np.einsum("xia,xyab,yjb->xyij", Al, G, Ar, optimize=True)
            return full_from_positions(out, sp)

        nngp = w * weigh(k.nngp, A1, A2) + b
        ntk = None if k.ntk is None else w * weigh(k.ntk + 2.0 * k.nngp, A1, A2) + b
        cov1 = w * weigh(k.cov1, A1, None, True) + b
        cov2 = None if k.cov2 is None else w * weigh(k.cov2, A2, None, True) + b
        return k.replace(nngp=nngp, ntk=ntk, cov1=cov1, cov2=cov2, is_gaussian=True)

    # ------------------------------------------------------------------ finite
    def out_shape(self, in_shape, width):
        if len(in_shape) < 2:
            raise ValueError("Attention needs inputs with positions (P, *spatial, C)")
        return tuple(in_shape[:-1]) + (width,)

    def param_shapes(self, in_shape, width, n_key=None):
        C, H = in_shape[-1], self.n_heads
        n = width if n_key is None else n_key
        return {"K": (H, C, n), "V": (H, C, n), "O": (H * n, width), "b": (width,)}

    def apply(self, params, x):
        S, P, C = x.shape[0], x.shape[1], x.shape[-1]
        xs = x.reshape(S, P, -1, C)                                   # (S, P, T, C)
        T = xs.shape[2]
        Wk, Wv, Wo = params["K"], params["V"], params["O"]
        H, nk, nv = Wk.shape[1], Wk.shape[-1], Wv.shape[-1]
        keys = _heads(xs, Wk)                                         # (S, P, H, T, nk)
        s = self.qk_scale / (C * nk)
        A = _softmax(s * np.matmul(keys, keys.transpose(0, 1, 2, 4, 3)))
        vals = _heads(xs, Wv)
        heads = np.matmul(A, vals)                                    # (S, P, H, T, nv)
        cat = heads.transpose(0, 1, 3, 2, 4).reshape(S, P, T, H * nv)
        c = np.sqrt(self.sigma_w2 / (nv * H * C))
        y = c * np.matmul(cat.reshape(S, P * T, H * nv), Wo).reshape(S, P, T, -1)
        if self.sigma_b2:
            y += np.sqrt(self.sigma_b2) * params["b"][:, None, None, :]
        return y.reshape(x.shape[:-1] + (Wo.shape[-1],)), (x.shape, xs, keys, A, vals, cat, s, c)

    def _signals(self, params, cache, gy):
        """Backward signals: g (S, P, T, O), ∂/∂values, ∂/∂keys (S, P, H, T, n) and ∂/∂x."""
        shape, xs, keys, A, vals, cat, s, c = cache
        S, P, T, C = xs.shape
        Wk, Wv, Wo = params["K"], params["V"], params["O"]
        H, nv = Wk.shape[1], Wv.shape[-1]
        g = gy.reshape(S, P, T, -1)
        dcat = c * np.matmul(g.reshape(S, P * T, -1), Wo.transpose(0, 2, 1))     # (S, P·T, H·nv)
        dheads = dcat.reshape(S, P, T, H, nv).transpose(0, 1, 3, 2, 4)
        dvals = np.matmul(A.transpose(0, 1, 2, 4, 3), dheads)          # (S, P, H, T, nv)
        dA = np.matmul(dheads, vals.transpose(0, 1, 2, 4, 3))
        dlog = A * (dA - (dA * A).sum(-1, keepdims=True))             # softmax backward
        dkeys = s * np.matmul(dlog + dlog.transpose(0, 1, 2, 4, 3), keys)   # logits = s·k kᵀ (tied)
        gx = _heads_back(dvals, Wv) + _heads_back(dkeys, Wk)
        return g, dvals, dkeys, gx.reshape(shape)

    def backward(self, params, cache, gy):
        shape, xs, keys, A, vals, cat, s, c = cache
        g, dvals, dkeys, gx = self._signals(params, cache, gy)
        theta = gram_theta(cat, g, c * c)
        if self.sigma_b2:
            theta += bias_theta(gy, self.sigma_b2)
        for h in range(dvals.shape[2]):
            theta += gram_theta(xs, dvals[:, :, h], 1.0) + gram_theta(xs, dkeys[:, :, h], 1.0)
        return gx, theta

    def vjp(self, params, cache, gy):
        """∂/∂x and the parameter gradients summed over the inputs (training)."""
        shape, xs, keys, A, vals, cat, s, c = cache
        g, dvals, dkeys, gx = self._signals(params, cache, gy)
        grads = {"O": c * np.einsum("sptk,spto->sko", cat, g, optimize=True),
                 "V": np.einsum("sptc,sphtn->shcn", xs, dvals, optimize=True),
                 "K": np.einsum("sptc,sphtn->shcn", xs, dkeys, optimize=True),
                 "b": np.sqrt(self.sigma_b2) * g.sum(axis=(1, 2))}
        return gx, grads
