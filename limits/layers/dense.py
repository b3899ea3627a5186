"""Dense: a fully connected layer on the channel axis (position-wise on spatial inputs), NTK parameterisation.

Finite: y = σ_w/√C · x W + σ_b b with W (C × n), b (n) ~ N(0, 1) trained.
Kernel:  K' = σ_w² K + σ_b²,   Θ' = σ_w² Θ + K'          (every block, every position pair)
Cost O(size of the blocks); memory unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import real_number
from .base import Layer, bias_theta, gram_theta, positions, register


@register
@dataclass(frozen=True)
class Dense(Layer):
    """y = σ_w/√C · x W + σ_b b (module docstring); ``sigma_w2`` = σ_w², ``sigma_b2`` = σ_b²."""

    sigma_w2: float = 1.0
    sigma_b2: float = 0.0
    parametric = True
    fresh_output = True

    def __post_init__(self):
        object.__setattr__(self, "sigma_w2", real_number(self.sigma_w2, "Dense.sigma_w2"))
        object.__setattr__(self, "sigma_b2", real_number(self.sigma_b2, "Dense.sigma_b2"))

    # ------------------------------------------------------------------ kernel
    def kernel(self, k, need_full_after=True, where=""):
        w, b = self.sigma_w2, self.sigma_b2

        def affine(K):
            out = np.multiply(K, w)
            if b:
                out += b
            return out

        out = k.replace(ntk=None).map_linear(affine)
        if k.ntk is not None:
            ntk = np.multiply(k.ntk, w)
            ntk += out.nngp
            out = out.replace(ntk=ntk)
        return out.replace(is_gaussian=True, wide=True)

    # ------------------------------------------------------------------ finite
    def out_shape(self, in_shape, width):
        return tuple(in_shape[:-1]) + (width,)

    def param_shapes(self, in_shape, width):
        return {"W": (in_shape[-1], width), "b": (width,)}

    def apply(self, params, x):
        c = np.sqrt(self.sigma_w2 / x.shape[-1])
        y = c * np.matmul(x.reshape(x.shape[0], -1, x.shape[-1]), params["W"]).reshape(x.shape[:-1] + (-1,))
        if self.sigma_b2:
            y += np.sqrt(self.sigma_b2) * params["b"].reshape((y.shape[0],) + (1,) * (y.ndim - 2) + (-1,))
        return y, x

    def backward(self, params, x, gy):
        c2 = self.sigma_w2 / x.shape[-1]
        S = x.shape[0]
        gx = np.sqrt(c2) * np.matmul(gy.reshape(S, -1, gy.shape[-1]), params["W"].transpose(0, 2, 1)).reshape(x.shape)
        theta = gram_theta(positions(x), positions(gy), c2)
        if self.sigma_b2:
            theta += bias_theta(gy, self.sigma_b2)
        return gx, theta

    def vjp(self, params, x, gy):
        """∂/∂x and the parameter gradients summed over the inputs (training)."""
        S = x.shape[0]
        c = np.sqrt(self.sigma_w2 / x.shape[-1])
        xs, g = x.reshape(S, -1, x.shape[-1]), gy.reshape(S, -1, gy.shape[-1])
        gx = c * np.matmul(g, params["W"].transpose(0, 2, 1)).reshape(x.shape)
        return gx, {"W": c * np.matmul(xs.transpose(0, 2, 1), g), "b": np.sqrt(self.sigma_b2) * g.sum(1)}
