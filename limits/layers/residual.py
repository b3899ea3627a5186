"""Residual(branch, rho) and Identity.

Finite: y = x + ρ · branch(x). Kernel (the branch ends in fresh zero-mean weights, so it is uncorrelated
with its input)::

    K' = K + ρ² K_branch,      Θ' = Θ + ρ² Θ_branch

Identity: y = x, K' = K, Θ' = Θ. Cost: that of the branch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import real_number
from .base import Layer, layer_from_dict, register


@register
@dataclass(frozen=True)
class Identity(Layer):
    """y = x."""

    def kernel(self, k, need_full_after=True, where=""):
        return k

    def apply(self, params, x):
        return x, x.shape

    def backward(self, params, shape, gy):
        return gy, np.zeros((shape[0], shape[1], shape[1]))


@register
@dataclass(frozen=True)
class Residual(Layer):
    """y = x + ρ · branch(x); ``branch`` is a layer or a :func:`limits.serial` composition."""

    branch: object = None
    rho: float = 1.0

    def __post_init__(self):
        from .serial import Serial, serial

        b = self.branch
        if b is None:
            raise ValueError("Residual needs a branch (a layer or limits.serial(...))")
        if isinstance(b, (list, tuple)):
            b = serial(*b)
        elif isinstance(b, Layer) and not isinstance(b, Serial):
            b = serial(b)
        if not isinstance(b, Serial):
            raise ValueError(f"Residual.branch must be a layer or limits.serial(...), got {type(b).__name__}")
        last = [l for l in b.layers if not isinstance(l, Identity)]
        if not last or not last[-1].fresh_output:
            raise ValueError("Residual.branch must end with a Dense, Conv or Attention layer (fresh zero-mean weights, "
                             "so that the branch is uncorrelated with the skip connection)")
        object.__setattr__(self, "branch", b)
        object.__setattr__(self, "rho", real_number(self.rho, "Residual.rho", allow_negative=True))

    def describe(self):
        return f"Residual({self.branch.describe()}, rho={self.rho:g})"

    def to_dict(self):
        return {"layer": "Residual", "rho": self.rho, "branch": [l.to_dict() for l in self.branch.layers]}

    @classmethod
    def from_dict(cls, d):
        from .serial import serial

        return cls(serial(*(layer_from_dict(x) for x in d.get("branch", []))), d.get("rho", 1.0))

    def needs_full(self, after):
        return after or self.branch.needs_full(after)

    def kernel(self, k, need_full_after=True, where=""):
        kb = self.branch.kernel(k, need_full_after, where=f"{where} branch")
        if kb.spatial != k.spatial:
            raise ValueError(f"{where}: the residual branch changes the spatial shape {k.spatial} → {kb.spatial}")
        if kb.full != k.full:
            k = k.to_diagonal()
            kb = kb.to_diagonal()
        r2 = self.rho ** 2
        add = lambda a, c: None if a is None else a + r2 * c  # noqa: E731
        return k.replace(nngp=k.nngp + r2 * kb.nngp, ntk=None if k.ntk is None else k.ntk + r2 * kb.ntk,
                         cov1=k.cov1 + r2 * kb.cov1, cov2=add(k.cov2, kb.cov2),
                         is_gaussian=k.is_gaussian and kb.is_gaussian)

    def out_shape(self, in_shape, width):
        return tuple(in_shape)
