"""Conv: 1-D / 2-D convolution with strides, padding "SAME", "VALID" or "CIRCULAR", NTK parameterisation — the
geometry of neural-tangents' ``stax.Conv`` (that of ``jax.lax``).

Geometry of one spatial axis (input size n, filter size k, stride s; :func:`geometry`)::

    VALID     o = ⌊(n − k)/s⌋ + 1 outputs, lo = 0 (windows inside the input)
    SAME      o = ⌈n/s⌉ outputs, pad = max((o − 1)·s + k − n, 0) zeros, lo = ⌊pad/2⌋ of them before the input
    CIRCULAR  as SAME, but the padding wraps around (positions mod n)

Output position i reads the input positions src(i, f) = i·s + f − lo, f = 0 … k−1 (outside the input: 0, or mod n).

Finite: ``y_i = σ_w/√(C·|F|) Σ_{f∈F} x_{src(i,f)} W_f + σ_b b``, W (``|F|·C × n``), b ~ N(0, 1) trained.

Kernel — the patch operator 𝒫 (:func:`patch`: the same filter offset on both positions of a pair, per axis)::

    full:      (𝒫K)[i, j] = 1/|F| Σ_f K[src(i, f), src(j, f)]
    diagonal:  (𝒫K)[i]    = 1/|F| Σ_f K[src(i, f)]                  (equal positions only)
    K' = σ_w² 𝒫K + σ_b²,    Θ' = σ_w² 𝒫Θ + K'

computed at the output resolution (o entries per axis, never a stride-1 convolution then subsampling).
𝒫 is a linear map of each spatial axis (of the pair (i, j) in the full representation): for 2-D inputs
with small axes (n ≤ ``DENSE_MAX``) it is applied as one small matrix per axis (o²×n² on a pair, o×n on
one position), two stacked matrix products per block (:func:`_band_2d`); otherwise (larger axes, 1-D)
as strided slice additions, one per filter offset and wrap-around piece (:func:`_slice_sum`).

Cost O(k·o² per axis pair × the other axes) per block entry of the output — a stride-s layer costs about
1/s² (full) or 1/s (diagonal) per axis of its stride-1 version; memory: the output block and one temporary.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..checks import positive_int, real_number
from .base import Layer, bias_theta, gram_theta, register

PADDINGS = ("SAME", "VALID", "CIRCULAR")
DENSE_MAX = 8          # 2-D axes up to this size: small matrix products; larger: strided slice additions
FLAT = True            # stride-1 SAME axes: shifted additions over flattened rows (:func:`_flat_sum`)


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a convolution: input size n, filter k, stride s, outputs o, lo positions padded
    before the input, wrap-around (CIRCULAR) or zeros (module docstring)."""

    n: int
    k: int
    s: int
    o: int
    lo: int
    circular: bool

    def sources(self):
        """src (o, k): input position read by output i at offset f (mod n when circular), and which are inside."""
        src = np.arange(self.o)[:, None] * self.s + np.arange(self.k)[None, :] - self.lo
        inside = np.ones(src.shape, bool) if self.circular else (src >= 0) & (src < self.n)
        return src % self.n, inside

    def runs(self, f):
        """(output slice, input slice) pieces of offset f: out[dst] reads K[src] (strided by s); one piece
        without wrap-around, one per pass over the input with it."""
        src = np.arange(self.o) * self.s + f - self.lo
        q = np.floor_divide(src, self.n)
        out = []
        for w in (np.unique(q) if self.circular else [0]):
            i = np.flatnonzero(q == w)
            if i.size:
                a = int(src[i[0]] - w * self.n)
                out.append((slice(int(i[0]), int(i[-1]) + 1), slice(a, a + self.s * (i.size - 1) + 1, self.s)))
        return out


def geometry(n, k, s, padding) -> Axis:
    """The :class:`Axis` of an input axis of size n under filter k, stride s and ``padding`` (module docstring);
    ValueError when a VALID window does not fit."""
    if padding == "VALID":
        if k > n:
            raise ValueError(f"a VALID window of size {k} does not fit an input axis of size {n}")
        return Axis(n, k, s, (n - k) // s + 1, 0, False)
    o = -(-n // s)
    return Axis(n, k, s, o, max((o - 1) * s + k - n, 0) // 2, padding == "CIRCULAR")


@functools.lru_cache(maxsize=64)
def _band(ax: Axis, pair):
    """𝒫 of one axis as a matrix (without 1/|F|): on one position B[i, i'] = #{f : i' = src(i, f)} (o × n);
    on a pair B[(i, j), (i', j')] = #{f : i' = src(i, f), j' = src(j, f)} (o² × n²). Cached (read-only)."""
    src, inside = ax.sources()
    B = np.zeros((ax.o * ax.o, ax.n * ax.n) if pair else (ax.o, ax.n))
    idx = np.arange(ax.o)
    for f in range(ax.k):
        ok = inside[:, f]
        if pair:
            I, J = np.meshgrid(idx[ok], idx[ok], indexing="ij")
            SI, SJ = np.meshgrid(src[ok, f], src[ok, f], indexing="ij")
            np.add.at(B, (I * ax.o + J, SI * ax.n + SJ), 1.0)
        else:
            np.add.at(B, (idx[ok], src[ok, f]), 1.0)
    B.setflags(write=False)
    return B


def _band_2d(K, B0, B1, out_shape):
    """2-D rule on blocks (A, B, *axis 0, *axis 1): K'[x] = B0 · K[x] · B1ᵀ for every pair of inputs x, with
    K[x] the (m0 × m1) matrix of that pair (m_d = n_d² on position pairs, n_d on single positions; B_d None:
    that axis unchanged). One stacked product per side whose items all have the same shape, so an entry's
    rounding does not depend on how many inputs the block holds (a cross block and a self block give the
    same bits for equal inputs — what the ReLU rule's exact correlation 1 needs)."""
    n_items = K.shape[0] * K.shape[1]
    m0 = B0.shape[1] if B0 is not None else None
    K3 = K.reshape(n_items, m0 or -1, B1.shape[1] if B1 is not None else K.size // (n_items * m0))
    out = K3 if B0 is None else np.matmul(B0, K3)
    if B1 is not None:
        out = np.matmul(out, B1.T)
    return out.reshape(out_shape)


def _slice_sum(K, axes, ax: Axis):
    """Σ_f K[…, src(i, f), …] on ``axes`` jointly (one axis, or both positions of a pair) at the output
    resolution: one strided slice addition per offset and wrap-around piece, no padded copy (an offset whose
    piece covers every output starts the sum as a copy)."""
    shape = list(K.shape)
    for a in axes:
        shape[a] = ax.o
    pieces = [ax.runs(f) for f in range(ax.k)]
    whole = slice(0, ax.o)
    pieces.sort(key=lambda p: not (len(p) == 1 and p[0][0] == whole))      # a covering offset first
    out = None
    for runs in pieces:
        for combo in itertools.product(*[runs] * len(axes)):
            dst = [slice(None)] * K.ndim
            src = [slice(None)] * K.ndim
            for a, (d, s_) in zip(axes, combo):
                dst[a], src[a] = d, s_
            if out is None:
                if all(d == whole for d, _ in combo):
                    out = np.array(K[tuple(src)])
                    continue
                out = np.zeros(shape)
            out[tuple(dst)] += K[tuple(src)]
    return np.zeros(shape) if out is None else out


MAX_RUNS = 16           # a shift whose out-of-input entries form at most this many runs (per pair of inputs)
                        # restores them after the addition; otherwise the shifted block is multiplied by a 0/1 mask


@functools.lru_cache(maxsize=256)
def _pair_plan(tail, dims, ax: Axis):
    """Offsets of a stride-1 axis whose outputs are its inputs (SAME, no wrap-around) as shifts of the flattened
    block ``tail`` of one pair of inputs (``dims``: the shifted axes within it): per offset δ = f − lo ≠ 0 the flat
    shift s, the range [a, b) of entries it reaches, and what to do with the entries of that range whose shifted
    position leaves the input (they read padding: nothing may be added to them) — restore them (a few runs, as
    slices) or multiply the shifted block by a 0/1 mask (from :func:`_flat_plan`'s). The offset with the fewest
    such entries first."""
    L = int(np.prod(tail))
    plan = []
    for shift, ok in _flat_plan(tail, dims, ax):
        a, b = max(0, -shift), L - max(0, shift)
        bad = ok[a:b] == 0.0
        idx = np.flatnonzero(bad) + a
        runs = _as_slices(idx)
        mask = None
        if len(runs) > MAX_RUNS:
            mask = (~bad).astype(np.float64)
            mask.setflags(write=False)
            runs = ()
        plan.append((idx.size, shift, a, b, runs, mask))
    plan.sort(key=lambda t: t[0])
    return tuple(p[1:] for p in plan)


def _as_slices(idx):
    """Sorted flat indices as slices, one per run of consecutive indices."""
    if idx.size == 0:
        return ()
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    return tuple(slice(int(r[0]), int(r[-1]) + 1) for r in np.split(idx, cut))


def _pair_sum(K, dims, ax: Axis):
    """Σ_f K[…, i + δ_f, …] (δ_f = f − lo; both positions of a pair, or one axis) for a stride-1 SAME axis
    without wrap-around: each offset one shifted addition over the flattened block of each pair of inputs (long
    contiguous rows), what a shift carries past the input's edge restored or masked (:func:`_pair_plan`; 0 is
    added there, exactly); the first offset summed with the centre copy-free."""
    plan = _pair_plan(tuple(K.shape[2:]), tuple(d - 2 for d in dims), ax)
    if not plan:
        return K.copy()
    F = K.reshape(K.shape[0] * K.shape[1], -1)
    out = np.empty_like(F)
    tmp = None
    for i, (s, a, b, runs, mask) in enumerate(plan):
        src = F[:, a + s:b + s]
        if mask is not None:
            tmp = np.empty_like(F) if tmp is None else tmp
            src = np.multiply(src, mask, out=tmp[:, a:b])
        if i == 0:
            np.add(F[:, a:b], src, out=out[:, a:b])
            out[:, :a] = F[:, :a]
            out[:, b:] = F[:, b:]
            for sl in runs:
                out[:, sl] = F[:, sl]
            continue
        keep = [out[:, sl].copy() for sl in runs]
        out[:, a:b] += src
        for sl, v in zip(runs, keep):
            out[:, sl] = v
    return out.reshape(K.shape)


@functools.lru_cache(maxsize=256)
def _flat_plan(tail, dims, ax: Axis):
    """Offsets of a stride-1 axis whose outputs are its inputs (SAME, no wrap-around) as shifts of the flattened
    block ``tail`` of one pair of inputs (``dims``: the shifted axes within it): per offset δ = f − lo ≠ 0 the flat
    shift s and the 0/1 mask over the block of the entries that may receive the shifted value (0 where the shifted
    position leaves the input: it reads padding). Read-only."""
    strides = np.cumprod((1,) + tail[:0:-1])[::-1]
    L = int(np.prod(tail))
    pos = np.indices(tail).reshape(len(tail), L)
    plan = []
    for f in range(ax.k):
        d = f - ax.lo
        if d == 0:
            continue
        shift = d * int(sum(strides[i] for i in dims))
        ok = np.ones(L, bool)
        for i in dims:
            ok &= (pos[i] + d >= 0) & (pos[i] + d < ax.n)
        mask = ok.astype(np.float64)
        mask.setflags(write=False)
        plan.append((shift, mask))
    return tuple(plan)


_TILED = {}             # (tail, dims, axis) → the masks of _flat_plan repeated over the largest chunk seen


def _tiled_masks(tail, dims, ax: Axis, n):
    """The masks of :func:`_flat_plan` repeated n times (at least: a slice of those of a larger chunk), one per
    offset — so that a whole chunk of pairs of inputs is one flat array (kept for the last 8 block shapes)."""
    key = (tail, dims, ax)
    got = _TILED.get(key)
    if got is None or got[0] < n:
        plan = _flat_plan(tail, dims, ax)
        tiled = tuple((shift, np.tile(mask, n)) for shift, mask in plan)
        for _, m in tiled:
            m.setflags(write=False)
        _TILED.pop(key, None)
        while len(_TILED) >= 8:
            _TILED.pop(next(iter(_TILED)))
        got = _TILED[key] = (n, tiled)
    return got[1]


def _chunk_sum(K, dims, ax: Axis):
    """Σ_f K[…, i + δ_f, …] (δ_f = f − lo; both positions of a pair, or one axis) for a stride-1 SAME axis
    without wrap-around, on the whole block as one flat array: each offset one shifted addition of the masked
    shifted array (:func:`_flat_plan`; exactly 0 is added where the shift leaves the input, or crosses into
    another pair of inputs), the first summed with the centre copy-free; the offsets in the order of the filter."""
    tail = tuple(K.shape[2:])
    n = K.shape[0] * K.shape[1]
    plan = _tiled_masks(tail, tuple(d - 2 for d in dims), ax, n)
    if not plan:
        return K.copy()
    F = K.reshape(-1)
    N = F.size
    out = np.empty_like(F)
    tmp = np.empty_like(F)
    for i, (s, mask) in enumerate(plan):
        if s >= 0:                               # out[p] += F[p + s]·mask[p], p < N − s
            dst, src, m = slice(0, N - s), slice(s, N), mask[:N - s]
        else:
            dst, src, m = slice(-s, N), slice(0, N + s), mask[-s:N]
        t = np.multiply(F[src], m, out=tmp[dst])
        if i == 0:
            np.add(F[dst], t, out=out[dst])
            rest = slice(N - s, N) if s >= 0 else slice(0, -s)
            out[rest] = F[rest]
        else:
            out[dst] += t
    return out.reshape(K.shape)


PAIR_MIN = 1024         # block entries per pair of inputs from which the shifts run pair by pair (_pair_sum: long
                        # rows, a few restored runs); below (equal positions), over the whole chunk (_chunk_sum)


def _flat_sum(K, dims, ax: Axis):
    """Σ_f K[…, i + δ_f, …] for a stride-1 SAME axis without wrap-around (:func:`_pair_sum` for blocks of at least
    ``PAIR_MIN`` entries per pair of inputs, else :func:`_chunk_sum`: both add exactly 0 where a shift reads
    padding)."""
    if int(np.prod(K.shape[2:])) >= PAIR_MIN:
        return _pair_sum(K, dims, ax)
    return _chunk_sum(K, dims, ax)


def _flat(ax: Axis):
    """Does the flat shifted-sum path apply (stride 1, zero padding, as many outputs as inputs)?"""
    return ax.s == 1 and not ax.circular and ax.o == ax.n and ax.k > 1


def patch(K, axes, full, scale=1.0):
    """The patch operator: ``scale``·𝒫K of a block ``(A, B, *R)`` (module docstring; R = (s1, s1', s2, s2', …)
    when ``full``, else (s1, s2, …)); ``axes`` one :class:`Axis` per spatial axis. Every entry of the output
    is one filter sum at the output resolution (strides and padding included)."""
    nsp = len(axes)
    F = float(np.prod([ax.k for ax in axes]))
    out_shape = list(K.shape[:2])
    for ax in axes:
        out_shape += [ax.o, ax.o] if full else [ax.o]
    bands, slices = [None] * nsp, []
    for d, ax in enumerate(axes):
        if ax.k == 1 and ax.s == 1 and ax.o == ax.n:
            continue                               # the identity on this axis
        if _flat(ax) and FLAT:
            slices.append(((2 + 2 * d, 3 + 2 * d) if full else (2 + d,), ax))
        elif nsp == 2 and ax.n <= DENSE_MAX:
            bands[d] = _band(ax, full)
        else:
            slices.append(((2 + 2 * d, 3 + 2 * d) if full else (2 + d,), ax))
    banded = [d for d in range(nsp) if bands[d] is not None]
    if banded:                                     # the factor scale/|F| rides on the first band
        bands[banded[0]] = bands[banded[0]] * (scale / F)
        mid = list(K.shape[:2])
        for d, ax in enumerate(axes):
            m = ax.o if bands[d] is not None else ax.n
            mid += [m, m] if full else [m]
        out = _band_2d(K, bands[0], bands[1], mid)
    else:
        out = K
    for dims, ax in slices:
        out = (_flat_sum if _flat(ax) and FLAT else _slice_sum)(out, dims, ax)
    if out is K:
        out = K.copy()
    if not banded and scale / F != 1.0:
        out *= scale / F
    return out


@register
@dataclass(frozen=True)
class Conv(Layer):
    """Convolution with ``filter_shape`` and ``strides`` (one entry per spatial axis; default 1) and ``padding``
    "SAME", "VALID" or "CIRCULAR" (module docstring)."""

    filter_shape: tuple = (3, 3)
    padding: str = "SAME"
    sigma_w2: float = 1.0
    sigma_b2: float = 0.0
    strides: tuple | None = None
    parametric = True
    fresh_output = True

    def __post_init__(self):
        fs = self.filter_shape
        fs = (fs,) if isinstance(fs, int) else tuple(fs)
        if len(fs) not in (1, 2):
            raise ValueError(f"Conv.filter_shape must have 1 or 2 entries (1-D / 2-D), got {self.filter_shape!r}")
        object.__setattr__(self, "filter_shape", tuple(positive_int(f, "Conv.filter_shape") for f in fs))
        st = self.strides
        st = (1,) * len(fs) if st is None else ((st,) if isinstance(st, int) else tuple(st))
        if len(st) != len(fs):
            raise ValueError(f"Conv.strides {self.strides!r} must have one entry per filter axis {fs}")
        object.__setattr__(self, "strides", tuple(positive_int(s, "Conv.strides") for s in st))
        p = str(self.padding).upper()
        if p not in PADDINGS:
            raise ValueError(f"Conv.padding must be one of {PADDINGS}, got {self.padding!r}")
        object.__setattr__(self, "padding", p)
        object.__setattr__(self, "sigma_w2", real_number(self.sigma_w2, "Conv.sigma_w2"))
        object.__setattr__(self, "sigma_b2", real_number(self.sigma_b2, "Conv.sigma_b2"))

    def to_dict(self):
        d = super().to_dict()
        if all(s == 1 for s in self.strides):        # files written before strides existed read the same
            d.pop("strides")
        return d

    def axes(self, spatial, where="Conv"):
        """One :class:`Axis` per spatial axis of an input with spatial shape ``spatial``."""
        if len(spatial) != len(self.filter_shape):
            raise ValueError(f"{where}: Conv with filter_shape {self.filter_shape} needs inputs with "
                             f"{len(self.filter_shape)} spatial axes (P, *spatial, C), got {len(spatial)}")
        try:
            return tuple(geometry(int(n), k, s, self.padding)
                         for n, k, s in zip(spatial, self.filter_shape, self.strides))
        except ValueError as exc:
            raise ValueError(f"{where}: Conv {self.filter_shape} VALID on an input of spatial shape "
                             f"{tuple(spatial)}: {exc}") from None

    # ------------------------------------------------------------------ kernel
    def patch(self, K, spatial, full, scale=1.0):
        """``scale``·𝒫K for a block ``(A, B, *R)`` whose input has spatial shape ``spatial`` (:func:`patch`)."""
        return patch(K, self.axes(spatial), full, scale)

    def kernel(self, k, need_full_after=True, where=""):
        axes = self.axes(k.spatial, where or "Conv")
        w, b = self.sigma_w2, self.sigma_b2

        def conv(K):
            out = patch(K, axes, k.full, w)
            if b:
                out += b
            return out

        out = k.replace(ntk=None).map_linear(conv, spatial=tuple(ax.o for ax in axes))
        if k.ntk is not None:                    # Θ' = σ_w² 𝒫Θ + K'
            ntk = patch(k.ntk, axes, k.full, w)
            ntk += out.nngp
            out = out.replace(ntk=ntk)
        return out.replace(is_gaussian=True, wide=True)

    # ------------------------------------------------------------------ finite
    def out_shape(self, in_shape, width):
        return tuple(ax.o for ax in self.axes(in_shape[:-1])) + (width,)

    def param_shapes(self, in_shape, width):
        return {"W": tuple(self.filter_shape) + (in_shape[-1], width), "b": (width,)}

    def _patches(self, x, axes):
        """(S, P, *out, *F, C): the input window of every output position (a strided view of the padded input)."""
        nsp = len(axes)
        pad = [(0, 0), (0, 0)] + [(ax.lo, max((ax.o - 1) * ax.s + ax.k - ax.n - ax.lo, 0)) for ax in axes] + [(0, 0)]
        xp = np.pad(x, pad, mode="wrap" if self.padding == "CIRCULAR" else "constant")
        v = sliding_window_view(xp, self.filter_shape, axis=tuple(range(2, 2 + nsp)))   # (S, P, *L, C, *F)
        v = v[(slice(None), slice(None)) + tuple(slice(0, ax.s * (ax.o - 1) + 1, ax.s) for ax in axes)]
        return np.moveaxis(v, 2 + nsp, -1)

    def apply(self, params, x):
        S, P, C = x.shape[0], x.shape[1], x.shape[-1]
        axes = self.axes(x.shape[2:-1])
        F = int(np.prod(self.filter_shape))
        pt = np.ascontiguousarray(self._patches(x, axes)).reshape(S, -1, F * C)
        W = params["W"].reshape(S, F * C, -1)
        y = np.sqrt(self.sigma_w2 / (F * C)) * np.matmul(pt, W)
        y = y.reshape((S, P) + tuple(ax.o for ax in axes) + (W.shape[-1],))
        if self.sigma_b2:
            y += np.sqrt(self.sigma_b2) * params["b"].reshape((S,) + (1,) * (y.ndim - 2) + (-1,))
        return y, (x.shape, pt.reshape(S, P, -1, F * C))

    def _input_gradient(self, gp, shape, axes):
        """∂/∂x from the gradient of every patch gp (S, P, *out, *F, C): each window entry added back to the
        input position it read (zeros dropped, wrap-around folded back)."""
        S, P, C = shape[0], shape[1], shape[-1]
        padded = np.zeros((S, P) + tuple(max(ax.lo + ax.n, (ax.o - 1) * ax.s + ax.k) for ax in axes) + (C,))
        for off in np.ndindex(*self.filter_shape):
            sl = (slice(None), slice(None)) + tuple(slice(a, a + ax.s * (ax.o - 1) + 1, ax.s) for a, ax in zip(off, axes))
            padded[sl] += gp[(Ellipsis,) + tuple(off) + (slice(None),)]
        gx = padded
        for d, ax in enumerate(axes):
            a = 2 + d
            if not ax.circular:
                gx = np.take(gx, range(ax.lo, ax.lo + ax.n), axis=a)
                continue
            out = np.zeros(gx.shape[:a] + (ax.n,) + gx.shape[a + 1:])
            L = gx.shape[a]
            for w in range((-ax.lo) // ax.n, (L - 1 - ax.lo) // ax.n + 1):     # padded p reads (p − lo) mod n
                p0, p1 = max(0, ax.lo + w * ax.n), min(L, ax.lo + (w + 1) * ax.n)
                if p0 < p1:
                    idx = [slice(None)] * gx.ndim
                    idx[a] = slice(p0 - ax.lo - w * ax.n, p1 - ax.lo - w * ax.n)
                    src = [slice(None)] * gx.ndim
                    src[a] = slice(p0, p1)
                    out[tuple(idx)] += gx[tuple(src)]
            gx = out
        return gx

    def backward(self, params, cache, gy, want_theta=True):
        shape, pt = cache
        S, P, C = shape[0], shape[1], shape[-1]
        axes = self.axes(shape[2:-1])
        F = int(np.prod(self.filter_shape))
        c2 = self.sigma_w2 / (F * C)
        W = params["W"].reshape(S, F * C, -1)
        g = gy.reshape(S, P, -1, gy.shape[-1])
        gp = np.sqrt(c2) * np.matmul(g.reshape(S, -1, g.shape[-1]), W.transpose(0, 2, 1))
        gp = gp.reshape((S, P) + tuple(ax.o for ax in axes) + tuple(self.filter_shape) + (C,))
        gx = self._input_gradient(gp, shape, axes)
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
