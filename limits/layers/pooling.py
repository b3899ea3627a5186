"""Flatten, GlobalAvgPool and AvgPool: linear maps of the spatial axes.

Flatten (finite: reshape ``(*spatial, C)`` → (S·C,)): the next Dense sees ⟨x, y⟩/(S C) = mean_i K[i, i], so

    K' = (1/S) Σ_i K[i, i]          — needs only equal positions (the diagonal representation)

GlobalAvgPool (finite: mean over positions):   K' = (1/S²) Σ_{i,j} K[i, j]     — needs every pair
AvgPool(window, strides, padding) (finite: mean over each window; per axis the pooling matrix M,
M[o, o·s + a − lo] = 1/w):                     K' = M K Mᵀ on every pair of axes  — needs every pair
  padding "VALID": windows inside the input, o = ⌊(n − w)/s⌋ + 1 outputs, lo = 0;
  padding "SAME" (the convention of neural-tangents' ``stax.AvgPool`` and ``jax.lax``): o = ⌈n/s⌉ outputs,
  pad = max((o − 1)s + w − n, 0) zeros split lo = ⌊pad/2⌋ before, the rest after; the mean divides by the
  window size w (padded zeros count: neural-tangents' default ``normalize_edges=False``) or, with
  ``normalize_edges=True``, by the number of input positions inside the window (``jax.example_libraries.stax``).
Θ transforms by the same linear map. Cost O(size of the blocks); the full representation costs
P1·P2·S² floats per block against P1·P2·S for the diagonal one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..checks import positive_int
from .base import Layer, register
from .state import spatial_diagonal


def _need_spatial(k, where, what):
    if not k.spatial:
        raise ValueError(f"{where}: {what} needs inputs with spatial axes (P, *spatial, C); this input is (P, C)")


@register
@dataclass(frozen=True)
class Flatten(Layer):
    """``(P, *spatial, C)`` → (P, S·C) (module docstring)."""

    def needs_full(self, after):
        return False

    def kernel(self, k, need_full_after=True, where=""):
        if not k.spatial:
            return k
        n = k.nsp
        return k.map_linear(lambda K: spatial_diagonal(K, k.full, n).mean(axis=tuple(range(2, 2 + n))),
                            spatial=(), full=False)

    def out_shape(self, in_shape, width):
        return (int(np.prod(in_shape)),)

    def apply(self, params, x):
        return x.reshape(x.shape[0], x.shape[1], -1), x.shape

    def backward(self, params, shape, gy):
        return gy.reshape(shape), np.zeros((shape[0], shape[1], shape[1]))


@register
@dataclass(frozen=True)
class GlobalAvgPool(Layer):
    """Mean over all positions: ``(P, *spatial, C)`` → (P, C) (module docstring)."""

    def needs_full(self, after):
        return True

    def kernel(self, k, need_full_after=True, where=""):
        _need_spatial(k, where, "GlobalAvgPool")
        return k.map_linear(lambda K: K.mean(axis=tuple(range(2, K.ndim))), spatial=(), full=False)

    def out_shape(self, in_shape, width):
        return (in_shape[-1],)

    def apply(self, params, x):
        return x.mean(axis=tuple(range(2, x.ndim - 1))), x.shape

    def backward(self, params, shape, gy):
        S = int(np.prod(shape[2:-1]))
        g = np.broadcast_to(gy.reshape((shape[0], shape[1]) + (1,) * (len(shape) - 3) + (shape[-1],)), shape)
        return g / S, np.zeros((shape[0], shape[1], shape[1]))


@register
@dataclass(frozen=True)
class AvgPool(Layer):
    """Mean over windows ``window_shape`` moved by ``strides`` (default: the window — neural-tangents'
    default is 1), padding "VALID" or "SAME" (module docstring; ``normalize_edges`` as neural-tangents)."""

    window_shape: tuple = (2, 2)
    strides: tuple | None = None
    padding: str = "VALID"
    normalize_edges: bool = False

    def __post_init__(self):
        ws = self.window_shape
        ws = (ws,) if isinstance(ws, int) else tuple(ws)
        object.__setattr__(self, "window_shape", tuple(positive_int(w, "AvgPool.window_shape") for w in ws))
        st = self.strides
        st = ws if st is None else ((st,) if isinstance(st, int) else tuple(st))
        if len(st) != len(ws):
            raise ValueError(f"AvgPool.strides {st} must have one entry per window axis {ws}")
        object.__setattr__(self, "strides", tuple(positive_int(s, "AvgPool.strides") for s in st))
        p = str(self.padding).upper()
        if p not in ("VALID", "SAME"):
            raise ValueError(f"AvgPool.padding must be 'VALID' or 'SAME', got {self.padding!r}")
        object.__setattr__(self, "padding", p)
        if not isinstance(self.normalize_edges, (bool, np.bool_)):
            raise ValueError(f"AvgPool.normalize_edges must be True or False, got {self.normalize_edges!r}")
        object.__setattr__(self, "normalize_edges", bool(self.normalize_edges))

    def to_dict(self):
        d = super().to_dict()
        if not self.normalize_edges:             # files written before the option existed read the same
            d.pop("normalize_edges")
        return d

    def needs_full(self, after):
        return True

    def _sizes(self, spatial, where="AvgPool"):
        if len(spatial) != len(self.window_shape):
            raise ValueError(f"{where}: AvgPool window {self.window_shape} needs {len(self.window_shape)} "
                             f"spatial axes, got {len(spatial)}")
        if self.padding == "SAME":
            return tuple(-(-n // s) for n, s in zip(spatial, self.strides))
        out = tuple((n - w) // s + 1 for n, w, s in zip(spatial, self.window_shape, self.strides))
        if min(out) < 1:
            raise ValueError(f"{where}: AvgPool window {self.window_shape} is larger than the input {tuple(spatial)}")
        return out

    def _matrix(self, d, n):
        """The pooling matrix M (outputs × n) of spatial axis d (module docstring)."""
        w, s = self.window_shape[d], self.strides[d]
        if self.padding == "SAME":
            o = -(-n // s)
            lo = max((o - 1) * s + w - n, 0) // 2
        else:
            o, lo = (n - w) // s + 1, 0
        M = np.zeros((o, n))
        for i in range(o):
            a, b = max(i * s - lo, 0), min(i * s - lo + w, n)
            M[i, a:b] = 1.0 / (b - a if self.normalize_edges else w)
        return M

    def kernel(self, k, need_full_after=True, where=""):
        _need_spatial(k, where, "AvgPool")
        out_sp = self._sizes(k.spatial, where)

        def pool(K):
            for d, n in enumerate(k.spatial):
                M = self._matrix(d, n)
                for ax in (2 + 2 * d, 3 + 2 * d):
                    K = np.moveaxis(np.tensordot(K, M, axes=([ax], [1])), -1, ax)
            return K

        return k.map_linear(pool, spatial=out_sp)

    def out_shape(self, in_shape, width):
        return self._sizes(in_shape[:-1]) + (in_shape[-1],)

    def apply(self, params, x):
        nsp = x.ndim - 3
        if self.padding == "SAME":
            y = x
            for d in range(nsp):
                y = np.moveaxis(np.tensordot(y, self._matrix(d, x.shape[2 + d]), axes=([2 + d], [1])), -1, 2 + d)
            return np.ascontiguousarray(y), x.shape
        v = sliding_window_view(x, self.window_shape, axis=tuple(range(2, 2 + nsp)))
        sl = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in self.strides)
        y = v[sl].mean(axis=tuple(range(-nsp, 0)))
        return y, x.shape

    def backward(self, params, shape, gy):
        nsp = len(shape) - 3
        if self.padding == "SAME":
            gx = gy
            for d in range(nsp):
                gx = np.moveaxis(np.tensordot(gx, self._matrix(d, shape[2 + d]), axes=([2 + d], [0])), -1, 2 + d)
            return np.ascontiguousarray(gx), np.zeros((shape[0], shape[1], shape[1]))
        gx = np.zeros(shape)
        osz = gy.shape[2:-1]
        scale = 1.0 / np.prod(self.window_shape)
        for off in np.ndindex(*self.window_shape):
            sl = (slice(None), slice(None)) + tuple(slice(a, a + s * (o - 1) + 1, s)
                                                    for a, s, o in zip(off, self.strides, osz))
            gx[sl] += scale * gy
        return gx, np.zeros((shape[0], shape[1], shape[1]))
