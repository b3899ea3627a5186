"""What every layer carries: its infinite-width kernel rule, its finite apply/backward at given weights,
its serialisation. Layers are frozen dataclasses whose fields are their hyper-parameters (no weights:
the weights of a finite network are drawn by ``limits.finite.serial`` at a chosen width N).

Interface (``x`` has leading axes (S, P): S independent initialisations, P inputs)::

    layer.kernel(k: Kernel, need_full_after: bool, where: str) -> Kernel     # NNGP/NTK rule
    layer.needs_full(after: bool) -> bool          # does the rule need every pair of positions at its input?
    layer.out_shape(in_shape, width) -> shape      # in_shape = (*spatial, C) of one input
    layer.param_shapes(in_shape, width) -> {name: shape}   # raw N(0, 1) weights (NTK parameterisation)
    layer.apply(params, x) -> (y, cache);  layer.backward(params, cache, gy) -> (gx, Θ-contribution (S, P, P))
    layer.vjp(params, cache, gy) -> (gx, {name: gradient summed over the inputs})    # parametric layers (training)
    layer.to_dict() / layer_from_dict(d)           # a description: checked against the layer's fields first
    layer.kernel_work(spatial, full) -> float      # entry updates per block entry of the kernel rule (cost estimate)
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


LAYERS = {}


def register(cls):
    LAYERS[cls.__name__] = cls
    return cls


@dataclass(frozen=True)
class Layer:
    """Base of every layer (module docstring)."""

    parametric = False          # draws weights (Dense, Conv, Attention): its output width is N
    fresh_output = False        # output = fresh zero-mean weights × input (+ bias): independent of the input

    @property
    def name(self) -> str:
        return type(self).__name__

    def describe(self) -> str:
        """``Name(field=value, …)`` over the fields :meth:`to_dict` writes (options left at a default that files
        omit, such as stride 1, are omitted here too)."""
        d = self.to_dict()
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name in d)
        return f"{self.name}({args})"

    def needs_full(self, after: bool) -> bool:
        return after

    def out_shape(self, in_shape, width):
        return tuple(in_shape)

    def param_shapes(self, in_shape, width):
        return {}

    def kernel_work(self, spatial, full) -> float:
        """Updates per entry of the input block that the kernel rule makes (for the cost estimate of
        :func:`limits.kernels.composed.estimate`): the number of window offsets for a rule that sums over a
        window (the product of the ``*_shape`` fields: a convolution's filter, a pooling window), else 1."""
        work = 1.0
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name.endswith("_shape") and isinstance(v, tuple):
                work *= float(np.prod([float(x) for x in v])) if v else 1.0
        return work

    def to_dict(self) -> dict:
        d = {"layer": self.name}
        for f in fields(self):
            v = getattr(self, f.name)
            d[f.name] = list(v) if isinstance(v, tuple) else v
        return d

    def _no_theta(self, x):
        return np.zeros((x.shape[0], x.shape[1], x.shape[1]))


MAX_EXTENT = 1 << 16        # the largest integer a layer description may give (a filter, window, stride, heads)


def layer_from_dict(d) -> Layer:
    """A layer from its :meth:`Layer.to_dict` form, checked before anything is built: ``layer`` names a registered
    layer, every other key is one of that layer's fields (its dataclass fields: an allowlist), and no integer in
    the description exceeds :data:`MAX_EXTENT` (a filter of 10¹² would take years). ``ValueError`` naming the
    layer and the key otherwise."""
    if isinstance(d, Layer):
        return d
    if not isinstance(d, dict) or "layer" not in d:
        raise ValueError(f"a layer description must be a mapping with a 'layer' key, got {_short(d)}")
    d = dict(d)
    kind = d.pop("layer")
    if not isinstance(kind, str) or kind not in LAYERS:
        raise ValueError(f"unknown layer {_short(kind)}; known: {sorted(LAYERS)}")
    cls = LAYERS[kind]
    allowed = description_keys(cls)
    unknown = sorted(map(str, set(d) - allowed))
    if unknown:
        raise ValueError(f"layer {kind}: unknown field(s) {unknown}; {kind} takes {sorted(allowed) or 'none'}")
    for key, value in d.items():
        big = _largest_int(value)
        if big is not None and big > MAX_EXTENT:
            raise ValueError(f"layer {kind}: {key} = {_short(value)} — {big} is larger than {MAX_EXTENT}, the largest "
                             "size a layer description may give")
    try:
        return cls.from_dict(d) if hasattr(cls, "from_dict") else cls(**d)
    except TypeError as exc:             # a value of the wrong kind met inside a constructor
        raise ValueError(f"layer {kind}: {exc}") from None


def description_keys(cls) -> set:
    """The keys a description of layer ``cls`` may hold: its dataclass fields (those not ending in ``_``, which
    store a value under another name) and the keys its :meth:`Layer.to_dict` writes for a default instance."""
    keys = {f.name for f in fields(cls) if not f.name.endswith("_")}
    try:
        keys |= set(cls().to_dict()) - {"layer"}
    except (TypeError, ValueError):          # no default instance (Residual needs a branch)
        pass
    return keys


def _largest_int(value):
    """The largest integer (absolute value) in ``value`` or the lists inside it (layer descriptions only)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return abs(int(value))
    if isinstance(value, (list, tuple)):
        found = [v for v in map(_largest_int, value) if v is not None]
        return max(found) if found else None
    return None


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def positions(x):
    """``(S, P, *spatial, C)`` → (S, P, I, C) with I = Π spatial (a view when possible)."""
    return x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1])


def gram_theta(a, g, scale):
    """Θ contribution of a weight used at every position: scale · Σ_{i,j} ⟨a_p,i, a_q,j⟩⟨g_p,i, g_q,j⟩
    (the inner product of the per-input gradients Σ_i a_p,i ⊗ g_p,i). a: (S, P, I, A), g: (S, P, I, G)."""
    if a.shape[2] == 1:
        return scale * np.einsum("spa,sqa->spq", a[:, :, 0], a[:, :, 0]) * np.einsum("spg,sqg->spq", g[:, :, 0], g[:, :, 0])
    if a.shape[-1] * g.shape[-1] <= a.shape[2] * a.shape[2]:
        J = np.einsum("spia,spig->spag", a, g, optimize=True)               # per-input gradients
        return scale * np.einsum("spag,sqag->spq", J, J, optimize=True)
    A = np.einsum("spia,sqja->spqij", a, a, optimize=True)
    G = np.einsum("spig,sqjg->spqij", g, g, optimize=True)
    return scale * np.einsum("spqij,spqij->spq", A, G, optimize=True)


def bias_theta(g, scale):
    """Θ contribution of a bias shared by all positions: scale · ⟨Σ_i g_p,i, Σ_j g_q,j⟩."""
    s = positions(g).sum(2)
    return scale * np.einsum("spo,sqo->spq", s, s)

