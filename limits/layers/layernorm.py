"""LayerNorm over channels, at every position.

Finite: y = (x − mean_c x) / √(var_c x + eps) (no affine parameters).
Kernel (a Gaussian input has channel mean → 0 and channel variance → q at infinite width)::

    K'(x, y)[i, j] = K[i, j] / √((q_x,i + ε)(q_y,j + ε)),     Θ' = Θ / √((q_x,i + ε)(q_y,j + ε))

(as K·(r_x,i·r_y,j) with r = 1/√(q + ε) per input and position: the product once, then one pass per block).

with the finite layer's ε = ``eps`` kept (as neural-tangents does). Cost O(size of the blocks).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import real_number
from .base import Layer, register


@register
@dataclass(frozen=True)
class LayerNorm(Layer):
    """Normalise each position over its channels (module docstring)."""

    eps: float = 1e-12

    def __post_init__(self):
        object.__setattr__(self, "eps", real_number(self.eps, "LayerNorm.eps"))

    def kernel(self, k, need_full_after=True, where=""):
        if not k.is_gaussian:
            from ..errors import ModelError

            raise ModelError(f"{where}: LayerNorm needs a Gaussian (zero-mean) input, but its input is the output "
                             "of a nonlinearity; its channel mean does not vanish at infinite width")
        q1, q2 = k.variances()
        if np.min(q1) <= 0 or np.min(q2) <= 0:
            raise ValueError(f"{where}: LayerNorm of an input with zero variance at some position")
        e = self.eps

        def inverse_root(q):                     # 1/√(q + ε) per input and position
            return 1.0 / np.sqrt(q + e)

        def scaled(K, il, ir):
            return np.multiply(K, np.multiply(il, ir))

        def both(K, il, ir, T):                  # r_x,i·r_y,j once (one broadcast pass), then one pass per block
            rr = np.multiply(il, ir)
            return np.multiply(K, rr), np.multiply(T, rr, out=rr if rr.shape == T.shape else None)

        return k.map_pairs(scaled, lambda K, T, il, ir: scaled(T, il, ir), pair_fn=both, transform=inverse_root)

    def apply(self, params, x):
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        inv = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + self.eps)
        y = xc * inv
        return y, (y, inv)

    def backward(self, params, cache, gy):
        y, inv = cache
        gx = inv * (gy - gy.mean(-1, keepdims=True) - y * (gy * y).mean(-1, keepdims=True))
        return gx, self._no_theta(gy)
