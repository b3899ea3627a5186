"""The leading linear layers of a composition as per-input features — the read-in of :mod:`limits.kernels.packed`.

The read-in block K⁰(x, y)[i, j] = ⟨x_i, y_j⟩/C has rank C, and Dense, LayerNorm, Attention (without a positional
embedding) and Conv keep every block a bilinear form of per-input features F_x (S × m) with weights d_K, d_Θ
common to all inputs (m columns)::

    K(x, y) = F_x diag(d_K) F_yᵀ,     Θ(x, y) = F_x diag(d_Θ) F_yᵀ         (read-in: F = x, d_K = 1/C, d_Θ = 0)

    Dense(σ_w², σ_b²)     F ← [F, 1],        d_K ← [σ_w² d_K, σ_b²],   d_Θ ← [σ_w² d_Θ, 0] + d_K
    LayerNorm(ε)          F ← r F,  r_i = 1/√(q_i + ε),  q_i = Σ_c d_K,c F_ic²      (the diagonal of K(x, x))
    Attention(σ_w², σ_b²) F ← [A F, 1],      d_K ← [σ_w² d_K, σ_b²],   d_Θ ← [σ_w² (d_Θ + 2 d_K), σ_b²],
                          A = softmax_j(s·K(x, x))
    Conv(σ_w², σ_b²)      F ← [F[src(i, f)] for f ∈ F | 1] (0 outside the input),  d_K ← [σ_w²/|F| d_K per f, σ_b²],
                          d_Θ ← [σ_w²/|F| d_Θ per f, 0] + d_K

— the kernel rules of those layers (limits.layers) written on the factors (the 1 column: a bias is the same for
every position and input). So the layers before the first nonlinearity cost O(P·S·m²) once, and each pair of
inputs one matrix product (S × m by m × S: m multiply-adds per block entry) that gives its block at the first
layer that is not linear, instead of a pass per rule and entry. A layer that would make m larger than
``MAX_RANK`` (a Conv multiplies it by |F|) ends the prefix.
"""
from __future__ import annotations

import numpy as np

MAX_RANK = 32           # features per input beyond which the product costs more than the rules' passes


def _kinds():
    from ..layers.attention import Attention, softmax
    from ..layers.conv import Conv
    from ..layers.dense import Dense
    from ..layers.layernorm import LayerNorm

    return Dense, LayerNorm, Attention, Conv, softmax


def _rank_after(layer, m, spatial):
    """Columns after ``layer`` from m before it, or None when its rule is not one of the factored ones."""
    Dense, LayerNorm, Attention, Conv, _ = _kinds()
    if isinstance(layer, LayerNorm):
        return m
    if isinstance(layer, Dense):
        return m + bool(layer.sigma_b2)
    if isinstance(layer, Attention):
        return None if layer.embedded else m + bool(layer.sigma_b2)
    if isinstance(layer, Conv):
        if len(layer.filter_shape) != len(spatial):
            return None                          # the rule's own error names the mismatch
        return m * int(np.prod(layer.filter_shape)) + bool(layer.sigma_b2)
    return None


def _walk(layers, input_shape):
    """(layers factored, columns m after them) for inputs of shape ``(*spatial, C)``."""
    spatial, m = tuple(input_shape[:-1]), int(input_shape[-1])
    if not spatial:
        return 0, m
    n = 0
    for layer in layers:
        new = _rank_after(layer, m, spatial)
        if new is None or new > MAX_RANK:
            break
        if hasattr(layer, "axes"):               # Conv: its output resolution
            try:
                spatial = tuple(ax.o for ax in layer.axes(spatial))
            except ValueError:
                break                            # the rule raises it with the layer's position
        m, n = new, n + 1
    return n, m


def prefix(layers, input_shape) -> int:
    """How many leading ``layers`` are factored (module docstring) for inputs of shape ``(*spatial, C)``: 0 without
    spatial axes (the packed engine is for inputs with positions)."""
    return _walk(layers, input_shape)[0]


def rank(layers, input_shape) -> int:
    """The columns m of the features after ``layers`` (all factored)."""
    return _walk(layers, input_shape)[1]


class Factors:
    """Per-input features ``F`` (P, S, m) and the column weights ``dK``, ``dT`` (m,) (``dT`` None: no NTK) of
    the block after the factored layers, on ``spatial`` positions; ``wide``: a Dense / Conv / Attention among
    them (the channels are a width)."""

    def __init__(self, F, dK, dT, spatial, wide):
        self.F, self.dK, self.dT, self.spatial, self.wide = F, dK, dT, tuple(spatial), wide

    def variances(self):
        """q (P, S): the diagonal of K(x, x) per input and position."""
        return (self.F * self.F * self.dK).sum(-1)

    def _append(self, F, dK, dT, b, wide=True):
        """Factors (F, dK, dT) on these positions with the bias σ_b² = ``b`` as a column of ones (weight b in both
        d_K and d_Θ: the bias is in K' and, through Θ' = … + K', in Θ')."""
        if b:
            F = np.concatenate([F, np.ones(F.shape[:2] + (1,))], axis=-1)
            dK = np.append(dK, b)
            dT = None if dT is None else np.append(dT, b)
        return Factors(F, dK, dT, self.spatial, wide)


def factor(layers, X, want_ntk, where=""):
    """The :class:`Factors` of inputs ``X`` (P, *spatial, C) after ``layers`` (all factored: :func:`prefix`)."""
    Dense, LayerNorm, Attention, Conv, softmax = _kinds()
    P, C = X.shape[0], X.shape[-1]
    f = Factors(np.ascontiguousarray(X, dtype=np.float64).reshape(P, -1, C), np.full(C, 1.0 / C),
                np.zeros(C) if want_ntk else None, X.shape[1:-1], False)
    for i, layer in enumerate(layers):
        at = f"{where} layer {i} ({layer.describe()})".strip()
        w, b = getattr(layer, "sigma_w2", 1.0), getattr(layer, "sigma_b2", 0.0)
        if isinstance(layer, LayerNorm):
            q = f.variances()
            if np.min(q) <= 0:
                raise ValueError(f"{at}: LayerNorm of an input with zero variance at some position")
            f = Factors(f.F * (1.0 / np.sqrt(q + layer.eps))[..., None], f.dK, f.dT, f.spatial, f.wide)
        elif isinstance(layer, Dense):
            f = f._append(f.F, w * f.dK, None if f.dT is None else w * (f.dT + f.dK), b)
        elif isinstance(layer, Attention):
            A = softmax(layer.qk_scale * np.matmul(f.F * f.dK, np.swapaxes(f.F, 1, 2)))
            dT = None if f.dT is None else w * (f.dT + 2.0 * f.dK)
            f = f._append(np.matmul(A, f.F), w * f.dK, dT, b)
        else:
            f = _conv(f, layer, w, b)
    return f


def _conv(f, layer, w, b):
    """Conv on the factors: the window of every output position as columns (module docstring)."""
    axes = layer.axes(f.spatial)
    idx, ok = None, None
    for ax in axes:                               # flat source position and inside-ness, (outputs, offsets)
        src, inside = ax.sources()
        idx = src if idx is None else (idx[:, None, :, None] * ax.n + src[None, :, None, :]).reshape(
            idx.shape[0] * ax.o, idx.shape[1] * ax.k)
        ok = inside if ok is None else (ok[:, None, :, None] & inside[None, :, None, :]).reshape(idx.shape)
    S = f.F.shape[1]
    Fp = np.concatenate([f.F, np.zeros((f.F.shape[0], 1, f.F.shape[2]))], axis=1)   # row S: the zero padding
    F = Fp[:, np.where(ok, idx, S)].reshape(f.F.shape[0], idx.shape[0], -1)          # (P, O, |F|·m)
    n = idx.shape[1]
    dK = np.tile(f.dK * (w / n), n)
    dT = None if f.dT is None else np.tile((f.dT + f.dK) * (w / n), n)        # Θ' = σ_w² 𝒫Θ + K'
    return Factors(F, dK, dT, tuple(ax.o for ax in axes), True)._append(F, dK, dT, b)


def pairs_block(f1, f2, left, right):
    """(K, Θ) of the packed pairs (f1[left], f2[right]) as full ``(n, 1, *R)`` blocks (Θ None without the NTK): per
    pair one product of the weighted left features with the right ones for each."""
    from ..layers.state import full_from_positions

    Fl, FrT = f1.F[left], np.swapaxes(f2.F[right], 1, 2)
    K = full_from_positions(np.matmul(Fl * f1.dK, FrT)[:, None], f1.spatial)
    T = None if f1.dT is None else full_from_positions(np.matmul(Fl * f1.dT, FrT)[:, None], f1.spatial)
    return K, T
