"""Conv: 1-D / 2-D convolution, stride 1, padding "SAME" (zeros) or "CIRCULAR", NTK parameterisation.

Finite: ``y_i = σ_w/√(C·|F|) Σ_{f∈F} x_{i+f−⌊(k−1)/2⌋} W_f + σ_b b``, W (``|F|·C × n``), b ~ N(0, 1) trained;
positions outside the input are 0 (SAME) or wrap around (CIRCULAR).
Kernel (per spatial axis, offsets a = 0..k−1, o = ⌊(k−1)/2⌋):

    full:      K'[i, j] = σ_w² /|F| Σ_f K[i+f−o, j+f−o] + σ_b²      (same offset on both positions)
    diagonal:  K'[i]    = σ_w² /|F| Σ_f K[i+f−o]          + σ_b²
    Θ' = σ_w² (same average of Θ) + K'

Both rules are linear maps of each spatial axis's index (the pair (i, j) in the full representation):
with n entries per axis they are applied, for 2-D inputs, as small banded matrices B (n²×n² on a pair,
n×n on one position; entries 1 where (i', j') = (i+f−o, j+f−o)): K' = B₀ K B₁ᵀ per pair of inputs, two
stacked matrix products (``_band_2d``) — BLAS-friendly, no padded copies. For larger axes
(n > ``DENSE_MAX``: the dense band costs more flops than it saves) and 1-D inputs, shifted slice additions
(``_shift_sum``).

Cost O(min(n², filter size) × size of the blocks) per axis; memory: the output block and one temporary.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..checks import positive_int, real_number
from .base import Layer, bias_theta, gram_theta, register

PADDINGS = ("SAME", "CIRCULAR")
DENSE_MAX = 8          # axes up to this size: banded matrix products; larger: shifted slice additions


def _pieces(o, n, circular):
    """(destination, source) slices of one axis for out[i] += K[i + o] (zero outside, or wrapped)."""
    if o == 0:
        return [(slice(0, n), slice(0, n))]
    if o > 0:
        main = [(slice(0, n - o), slice(o, n))] if o < n else []
        wrap = [(slice(max(n - o, 0), n), slice(0, min(o, n)))] if circular else []
    else:
        main = [(slice(-o, n), slice(0, n + o))] if -o < n else []
        wrap = [(slice(0, min(-o, n)), slice(max(n + o, 0), n))] if circular else []
    return main + wrap


def _shift_sum(K, axes, k, circular):
    """Σ_a K[…, i + a − o, …] on ``axes`` jointly (one axis, or both positions of a pair), o = ⌊(k−1)/2⌋:
    slice additions into one new array (no padded copy)."""
    import itertools

    lo = (k - 1) // 2
    n = K.shape[axes[0]]
    out = K.copy()
    for a in range(k):
        off = a - lo
        if off == 0:
            continue
        per_axis = [_pieces(off, n, circular) for _ in axes]
        for combo in itertools.product(*per_axis):
            dst = [slice(None)] * K.ndim
            src = [slice(None)] * K.ndim
            for ax, (d, s_) in zip(axes, combo):
                dst[ax], src[ax] = d, s_
            out[tuple(dst)] += K[tuple(src)]
    return out


def _band(n, k, circular, pair):
    """The conv rule of one axis as a matrix: B[i, i'] = #{f : i' = i + f − o} (one position, n×n) or, on a
    pair of positions, B[(i, j), (i', j')] = #{f : i' = i + f − o, j' = j + f − o} (n²×n²); positions outside
    the axis are dropped (SAME) or wrapped (CIRCULAR)."""
    o = (k - 1) // 2
    idx = np.arange(n)
    m = n * n if pair else n
    B = np.zeros((m, m))
    for f in range(k):
        src = idx + f - o
        ok = np.ones(n, bool) if circular else (src >= 0) & (src < n)
        src = src % n
        if pair:
            I, J = np.meshgrid(idx[ok], idx[ok], indexing="ij")
            SI, SJ = np.meshgrid(src[ok], src[ok], indexing="ij")
            np.add.at(B, (I * n + J, SI * n + SJ), 1.0)
        else:
            np.add.at(B, (idx[ok], src[ok]), 1.0)
    return B


def _band_2d(K, B0, B1):
    """2-D rule on blocks (A, B, *axis 0, *axis 1): K'[x] = B0 · K[x] · B1ᵀ for every pair of inputs x, with
    K[x] the (m0 × m1) matrix of that pair (m_d = n_d² on position pairs, n_d on single positions). One
    stacked product per side whose items all have the same shape, so an entry's rounding does not depend
    on how many inputs the block holds (a cross block and a self block give the same bits for equal
    inputs — what the ReLU rule's exact correlation 1 needs)."""
    m0 = B0.shape[0] if B0 is not None else None
    m1 = B1.shape[0] if B1 is not None else None
    n_items = K.shape[0] * K.shape[1]
    K3 = K.reshape(n_items, m0 or -1, m1 or K.size // (n_items * m0))
    out = K3 if B0 is None else np.matmul(B0, K3)
    if B1 is not None:
        out = np.matmul(out, B1.T)
    return out.reshape(K.shape)


@register
@dataclass(frozen=True)
class Conv(Layer):
    """Convolution with ``filter_shape`` (one entry per spatial axis), stride 1 (module docstring)."""

    filter_shape: tuple = (3, 3)
    padding: str = "SAME"
    sigma_w2: float = 1.0
    sigma_b2: float = 0.0
    parametric = True
    fresh_output = True

    def __post_init__(self):
        fs = self.filter_shape
        fs = (fs,) if isinstance(fs, int) else tuple(fs)
        if len(fs) not in (1, 2):
            raise ValueError(f"Conv.filter_shape must have 1 or 2 entries (1-D / 2-D), got {self.filter_shape!r}")
        object.__setattr__(self, "filter_shape", tuple(positive_int(f, "Conv.filter_shape") for f in fs))
        p = str(self.padding).upper()
        if p not in PADDINGS:
            raise ValueError(f"Conv.padding must be one of {PADDINGS} (stride 1), got {self.padding!r}")
        object.__setattr__(self, "padding", p)
        object.__setattr__(self, "sigma_w2", real_number(self.sigma_w2, "Conv.sigma_w2"))
        object.__setattr__(self, "sigma_b2", real_number(self.sigma_b2, "Conv.sigma_b2"))

    def _check(self, nsp, where):
        if nsp != len(self.filter_shape):
            raise ValueError(f"{where}: Conv with filter_shape {self.filter_shape} needs inputs with "
                             f"{len(self.filter_shape)} spatial axes (P, *spatial, C), got {nsp}")

    # ------------------------------------------------------------------ kernel
    def kernel(self, k, need_full_after=True, where=""):
        self._check(k.nsp, where)
        circ = self.padding == "CIRCULAR"
        w, b = self.sigma_w2, self.sigma_b2

        F = float(np.prod(self.filter_shape))

        full, sp = k.full, k.spatial
        bands = [None] * len(sp)              # 2-D: small axes as banded matrices (stacked products)
        shifts = []                           # other axes: shifted slice additions
        for d, f in enumerate(self.filter_shape):
            if f == 1:
                continue
            if len(sp) == 2 and sp[d] <= DENSE_MAX:
                bands[d] = _band(sp[d], f, circ, full)
            else:
                shifts.append(((2 + 2 * d, 3 + 2 * d) if full else (2 + d,), f))
        scaled = bands[0] is not None or (len(bands) > 1 and bands[1] is not None)
        if scaled:                            # the factor σ_w²/|F| rides on the first band
            i = 0 if bands[0] is not None else 1
            bands[i] = bands[i] * (w / F)

        def conv(K):
            out = _band_2d(K, *bands) if scaled else K
            for axes, f in shifts:
                out = _shift_sum(out, axes, f, circ)
            if out is K:
                out = K.copy()
            if not scaled:
                out *= w / F
            out += b
            return out

        out = k.map_linear(conv)
        if k.ntk is not None:
            out = out.replace(ntk=out.ntk - b + out.nngp)
        return out.replace(is_gaussian=True)

    # ------------------------------------------------------------------ finite
    def out_shape(self, in_shape, width):
        self._check(len(in_shape) - 1, "Conv")
        return tuple(in_shape[:-1]) + (width,)

    def param_shapes(self, in_shape, width):
        return {"W": tuple(self.filter_shape) + (in_shape[-1], width), "b": (width,)}

    def _patches(self, x):
        nsp = len(self.filter_shape)
        pad = [(0, 0), (0, 0)] + [((f - 1) // 2, f // 2) for f in self.filter_shape] + [(0, 0)]
        xp = np.pad(x, pad, mode="wrap" if self.padding == "CIRCULAR" else "constant")
        axes = tuple(range(2, 2 + nsp))
        v = sliding_window_view(xp, self.filter_shape, axis=axes)       # (S, P, *sp, C, *F)
        return np.moveaxis(v, 2 + nsp, -1)                              # (S, P, *sp, *F, C)

    def apply(self, params, x):
        S, P, C = x.shape[0], x.shape[1], x.shape[-1]
        F = int(np.prod(self.filter_shape))
        pt = np.ascontiguousarray(self._patches(x)).reshape(S, -1, F * C)
        W = params["W"].reshape(S, F * C, -1)
        y = np.sqrt(self.sigma_w2 / (F * C)) * np.matmul(pt, W)
        y = y.reshape(x.shape[:-1] + (W.shape[-1],))
        if self.sigma_b2:
            y += np.sqrt(self.sigma_b2) * params["b"].reshape((S,) + (1,) * (y.ndim - 2) + (-1,))
        return y, (x.shape, pt.reshape(S, P, -1, F * C))

    def backward(self, params, cache, gy, want_theta=True):
        shape, pt = cache
        S, P, C = shape[0], shape[1], shape[-1]
        nsp = len(self.filter_shape)
        F = int(np.prod(self.filter_shape))
        c2 = self.sigma_w2 / (F * C)
        W = params["W"].reshape(S, F * C, -1)
        g = gy.reshape(S, P, -1, gy.shape[-1])
        gp = np.sqrt(c2) * np.matmul(g.reshape(S, -1, g.shape[-1]), W.transpose(0, 2, 1))
        gp = gp.reshape(tuple(shape[:-1]) + tuple(self.filter_shape) + (C,))
        spatial = shape[2:-1]
        padded = np.zeros((S, P) + tuple(n + f - 1 for n, f in zip(spatial, self.filter_shape)) + (C,))
        for off in np.ndindex(*self.filter_shape):
            sl = (slice(None), slice(None)) + tuple(slice(a, a + n) for a, n in zip(off, spatial))
            padded[sl] += gp[(Ellipsis,) + tuple(off) + (slice(None),)]
        gx = padded
        for d, f in enumerate(self.filter_shape):
            lo, n, ax = (f - 1) // 2, spatial[d], 2 + d
            core = np.take(gx, range(lo, lo + n), axis=ax)
            if self.padding == "CIRCULAR":
                low = np.take(gx, range(0, lo), axis=ax)
                high = np.take(gx, range(lo + n, gx.shape[ax]), axis=ax)
                idx = [slice(None)] * core.ndim
                if lo:
                    idx[ax] = slice(n - lo, n)
                    core[tuple(idx)] += low
                if high.shape[ax]:
                    idx[ax] = slice(0, high.shape[ax])
                    core[tuple(idx)] += high
            gx = core
        if not want_theta:
            return gx, None
        theta = gram_theta(pt, g, c2)
        if self.sigma_b2:
            theta += bias_theta(gy, self.sigma_b2)
        return gx, theta

    def vjp(self, params, cache, gy):
        """∂/∂x and the parameter gradients summed over the inputs (training)."""
        shape, pt = cache
        S, C = shape[0], shape[-1]
        F = int(np.prod(self.filter_shape))
        gx, _ = self.backward(params, cache, gy, want_theta=False)
        g = gy.reshape(S, -1, gy.shape[-1])
        dW = np.sqrt(self.sigma_w2 / (F * C)) * np.matmul(pt.reshape(S, -1, F * C).transpose(0, 2, 1), g)
        return gx, {"W": dW.reshape(params["W"].shape), "b": np.sqrt(self.sigma_b2) * g.sum(1)}
