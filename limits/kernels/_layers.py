"""Checkpointed per-layer store for deep NNGP/NTK recursions (``nngp(..., keep="checkpoint")``).

Keeping every layer of an L-layer recursion costs 3(L+1)P² float64 numbers. The store keeps the full
(K, C, Θ̃) of every k-th layer (k = ⌈√L⌉ by default) plus the last, and recomputes a requested layer from
the checkpoint below it with the very same code (so every layer is bit-identical to ``keep="all"``);
the most recently recomputed stretch between two checkpoints is cached, so a sweep over l = 0..L costs
one extra recursion. Memory: 3(L/k + 2 + k)P² ≈ 6√L P² instead of 3(L+1)P².

:class:`LayerStack` is the read-only, array-like (L+1, P, P) view a result hands out as ``r.K``, ``r.C``,
``r.Theta``: integer/slice/fancy indexing on the layer axis (``r.K[l]``, ``r.K[-1]``, ``r.K[:, 0, 0]``),
``len``, ``shape``, iteration, and ``np.asarray(r.K)`` (materialises all layers).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


def default_every(L: int) -> int:
    return max(1, int(math.ceil(math.sqrt(L))))


class Checkpoints:
    """Checkpointed layers of one recursion and the means to recompute the others (``recompute``: the
    recursion itself, :func:`limits.kernels.nngp.run_recursion`, handed in so this store does not import it)."""

    def __init__(self, arch, ntk, every, checkpoints, logs, exploded, ntk_exploded, ntk_scale, recompute, edges=None):
        self.arch, self.ntk, self.every = arch, bool(ntk), int(every)
        self.recompute = recompute
        self.ck = checkpoints                     # layer -> (K, C, Θ̃) full P×P
        self.logs = logs                          # Θ^l = exp(logs[l]) Θ̃^l, every layer
        self.exploded, self.ntk_exploded, self.ntk_scale = exploded, ntk_exploded, ntk_scale
        self.L = arch.depth
        self.P = checkpoints[0][0].shape[0]
        self._cache = None                        # (first layer, Ks, Cs, Θ̃s) of the last recomputed stretch
        self.edges = edges or {}                  # layer -> the delicate pairs' state (limits.kernels.halfangle)

    def _raw(self, l):
        if l in self.ck:
            return self.ck[l]
        c = (l // self.every) * self.every
        if self._cache is None or self._cache[0] != c:
            d = min(c + self.every, self.L) - c
            K0, C0, T0 = self.ck[c]
            Ks, Cs, Th, _, _ = self.recompute(K0, dataclasses.replace(self.arch, depth=d), ntk=self.ntk, keep="all",
                                    C0=C0, T0=T0, s0=float(self.logs[c]) if self.ntk else 0.0, segment=True,
                                    edge=self.edges.get(c))
            self._cache = (c, Ks, Cs, Th)
        _, Ks, Cs, Th = self._cache
        j = l - c
        return Ks[j], Cs[j], (Th[j] if self.ntk else None)

    def layer(self, field: str, l: int) -> np.ndarray:
        if self.exploded >= 0 and l >= self.exploded:
            return np.full((self.P, self.P), np.inf)
        K, C, T = self._raw(l)
        if field == "K":
            out = K
        elif field == "C":
            out = C
        else:
            if self.ntk_scale == "linear":
                if self.ntk_exploded >= 0 and l >= self.ntk_exploded:
                    return np.full((self.P, self.P), np.inf)
                if self.logs[l] != 0.0:
                    with np.errstate(over="ignore", invalid="ignore"):
                        return T * np.exp(self.logs[l])
            out = T
        v = out.view()
        v.flags.writeable = False
        return v


class PackedLayers:
    """Every layer of one recursion as it was computed (``nngp(..., keep="auto")`` on the packed path of
    :mod:`limits.kernels._fused`): layer l is (packed?, K, C, Θ̃) — packed upper-triangle vectors of the
    layout ``pk`` (C may be K itself: a feed-forward layer's C^l is K^l), or full P×P arrays for layers the
    general path computed. A layer is unpacked when read (the most recent one is cached); Θ follows
    :class:`Checkpoints`' rules (exp(log scale)·Θ̃, +inf from the NTK overflow on with ``ntk_scale="linear"``)."""

    def __init__(self, pk, layers, logs, exploded, ntk_exploded, ntk_scale):
        self.pk, self.store, self.logs = pk, layers, logs
        self.exploded, self.ntk_exploded, self.ntk_scale = exploded, ntk_exploded, ntk_scale
        self.L = len(layers) - 1
        self.P = layers[0][1].shape[0]
        self._last = None                         # ((field, l), array) of the most recent read

    def describe(self):
        return "every layer stored as packed upper triangles, unpacked when read"

    def layer(self, field: str, l: int) -> np.ndarray:
        if self._last is not None and self._last[0] == (field, l):
            return self._last[1]
        out = self._layer(field, l)
        v = out.view()
        v.flags.writeable = False
        self._last = ((field, l), v)
        return v

    def _layer(self, field, l):
        if (self.exploded >= 0 and l >= self.exploded) or self.store[l] is None:
            return np.full((self.P, self.P), np.inf)
        packed, K, C, T = self.store[l]
        a = {"K": K, "C": C, "Theta": T}[field]
        if field == "Theta" and self.ntk_scale == "linear":
            if self.ntk_exploded >= 0 and l >= self.ntk_exploded:
                return np.full((self.P, self.P), np.inf)
        a = self.pk.unpack(a) if packed else a
        if field == "Theta" and self.ntk_scale == "linear" and self.logs[l] != 0.0:
            with np.errstate(over="ignore", invalid="ignore"):
                return a * np.exp(self.logs[l])
        return a


class LayerStack:
    """Read-only (L+1, P, P) array-like of one field of a checkpointed recursion (module docstring)."""

    lazy_array = True              # limits.results saves/compares it as the materialised array

    def __init__(self, store: Checkpoints, field: str):
        self._s, self._f = store, field

    @property
    def shape(self):
        return (self._s.L + 1, self._s.P, self._s.P)

    ndim = 3
    dtype = np.dtype(np.float64)

    @property
    def size(self):
        return int(np.prod(self.shape))

    def __len__(self):
        return self._s.L + 1

    def _layer(self, l):
        n = self._s.L + 1
        l = int(l)
        if not -n <= l < n:
            raise IndexError(f"layer {l} out of range for depth {self._s.L}")
        return self._s.layer(self._f, l % n)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            return np.asarray(self)[key]
        first, rest = key[0], key[1:]
        if isinstance(first, (int, np.integer)):
            return self._layer(first)[rest] if rest else self._layer(first)
        idx = np.arange(len(self))[first]
        if np.size(idx) == 0:
            return np.asarray(self)[key]
        parts = [self._layer(i)[rest] if rest else self._layer(i) for i in np.ravel(idx)]
        return np.stack(parts).reshape(np.shape(idx) + np.shape(parts[0]))

    def __iter__(self):
        for l in range(len(self)):
            yield self._layer(l)

    def __array__(self, dtype=None, copy=None):
        out = np.empty(self.shape)
        for l in range(len(self)):
            out[l] = self._layer(l)
        return out if dtype is None else out.astype(dtype)

    def __repr__(self):
        how = (self._s.describe() if hasattr(self._s, "describe") else
               f"checkpoints every {self._s.every} layers")
        return f"LayerStack({self._f}, shape={self.shape}, {how}; np.asarray() materialises)"

    def __getattr__(self, name):       # ndarray methods and attributes (tolist, max, T, …) on the materialised stack
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)

    def _binary(op, reflected=False):
        def f(self, other):
            a = np.asarray(self)
            return op(other, a) if reflected else op(a, other)
        return f

    import operator as _op
    __add__, __radd__ = _binary(_op.add), _binary(_op.add, True)
    __sub__, __rsub__ = _binary(_op.sub), _binary(_op.sub, True)
    __mul__, __rmul__ = _binary(_op.mul), _binary(_op.mul, True)
    __truediv__, __rtruediv__ = _binary(_op.truediv), _binary(_op.truediv, True)
    __pow__ = _binary(_op.pow)
    __matmul__, __rmatmul__ = _binary(_op.matmul), _binary(_op.matmul, True)
    __lt__, __le__, __gt__, __ge__ = _binary(_op.lt), _binary(_op.le), _binary(_op.gt), _binary(_op.ge)
    del _binary, _op

    def __neg__(self):
        return -np.asarray(self)

    def __abs__(self):
        return np.abs(np.asarray(self))
