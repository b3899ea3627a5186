"""A composition read as the chain the DMFT of compositions solves (docs/theory/dmft.rst §6).

    x⁰ = ψ₀(X)  →  P₀  →  h⁰  →  ψ₁  →  x¹  →  P₁  →  h¹ … →  h^{L−1}  →  ψ_L  →  x^{L−1}  →  P_L (read-out)  →  m

``P_p`` are the parametric layers (Conv, or Dense acting on every position — after Flatten on all positions at once:
a convolution whose filter covers the whole input, VALID); ``h^k`` (k = 0 … L−1) the hidden fields, one vector over
positions per channel; between two parametric layers a channel-wise map ψ = M_b ∘ φ ∘ M_a made of linear position
maps (AvgPool, GlobalAvgPool; matrices on positions) around at most one Activation φ; ``m`` the position weights of
the read-out's output (trailing GlobalAvgPool / AvgPool / Flatten): f = Σ_i m_i h^L_i. ψ₀ (layers before the first
parametric one) acts on the data only and is applied to X numerically.

Each parametric layer p carries its patch selection ``sel`` (S_out × |F|: the input position read by output i at
filter offset f, −1 for zero padding) — the patch operator of the kernel rules,
(𝒫K)[i, j] = |F|⁻¹ Σ_f K[sel(i, f), sel(j, f)] (:mod:`limits.dmft.serial.spatial`).

Layers the DMFT of compositions does not treat are refused by name with the reason (:data:`REFUSED`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ModelError

WHAT = "limits.dmft.solve"
LINEAR_MAPS = ("AvgPool", "GlobalAvgPool", "Flatten", "Identity")
LAYERNORM_PLACE = ("a LayerNorm is treated directly after a Dense/Conv, on its field (where the kernel rule puts it); "
                   "after an activation or a pooling its input is not the field of one layer")
REFUSED = {
    "Attention": "its feature-learning limit (heads → ∞ at fixed head dimension, or head dimension → ∞: Bordelon, "
                 "Chaudhry & Pehlevan 2024) trains query and key weights whose attention matrix is a random functional "
                 "of the fields per head; the tied-key infinite-width layer of limits.layers.Attention has no such "
                 "DMFT here",
    "Residual": "a skip connection couples every layer of a path (the joint march of limits.dmft.residual, here with "
                "spatial operators); not implemented for compositions — MLP ResNets: limits.dmft.solve(X, y, "
                "model=limits.resnet(...))",
}


@dataclass(frozen=True)
class Stage:
    """A parametric layer (Conv or Dense): σ_w², σ_b², its patch selection (module docstring)."""

    index: int
    name: str
    sigma_w2: float
    sigma_b2: float
    sel: np.ndarray          # (S_out, F) input position per output position and filter offset, −1: padding
    S_in: int
    S_out: int

    @property
    def identity(self) -> bool:
        """Does 𝒫 leave position pairs unchanged (a Dense on every position, a 1×1 stride-1 Conv)?"""
        return self.sel.shape[1] == 1 and self.S_in == self.S_out and bool(np.all(self.sel[:, 0] == np.arange(self.S_out)))


@dataclass(frozen=True)
class Between:
    """ψ = M_b ∘ φ ∘ M_a between two parametric layers (None: identity; ``act`` None: no nonlinearity)."""

    Ma: np.ndarray | None    # (S_a, S_h)
    act: object
    act_name: str
    Mb: np.ndarray | None    # (S_x, S_a)
    S_h: int
    S_a: int
    S_x: int
    flat: bool               # a Flatten: the next layer is a Dense over every position
    ln_eps: float | None = None    # a LayerNorm right after the parametric layer (its ε), else None

    def smooth(self) -> bool:
        return self.act is None or bool(getattr(self.act, "smooth", True))


@dataclass(frozen=True)
class Chain:
    """The composition as the DMFT sees it (module docstring): ``stages`` P₀ … P_L, ``maps`` ψ₁ … ψ_L (after each
    hidden stage), the preprocessed inputs ``x0`` (P, S₀, C₀) and the read-out position weights ``m``."""

    stages: tuple
    maps: tuple
    x0: np.ndarray
    m: np.ndarray

    @property
    def L(self) -> int:
        """Number of hidden stages (fields h⁰ … h^{L−1})."""
        return len(self.maps)

    @property
    def P(self) -> int:
        return self.x0.shape[0]

    def describe(self) -> str:
        parts = []
        for k, st in enumerate(self.stages):
            parts.append(f"{st.name}[{st.S_in}→{st.S_out} positions]")
            if k < self.L:
                mp = self.maps[k]
                parts.append(("LayerNorm → " if mp.ln_eps is not None else "") + (mp.act_name or "linear"))
        return " → ".join(parts)


def _layers(comp):
    out = []
    for l in comp.layers:
        if type(l).__name__ == "Serial":
            out.extend(_layers(l))
        else:
            out.append(l)
    return out


def _refuse(i, layer):
    name = type(layer).__name__
    reason = REFUSED.get(name, "not a layer of this toolkit's compositions")
    raise ModelError(f"{WHAT} cannot treat layer {i} ({layer.describe()}) of this composition: {name}: {reason}. "
                     "The DMFT of compositions treats Dense, Conv, AvgPool, GlobalAvgPool, Flatten, Activation and "
                     "LayerNorm after a Dense/Conv (docs/theory/dmft.rst §6)")


def _selection(layer, spatial, flat, S_in):
    """(sel, S_out, out spatial) of a parametric layer on an input with ``spatial`` positions (``S_in`` of them; after
    Flatten ``spatial`` is () and ``flat`` True) (module docstring)."""
    if type(layer).__name__ == "Dense":
        if flat:                                     # Flatten → Dense: one output reading every input position
            return np.arange(S_in)[None, :], 1, ()
        return np.arange(S_in)[:, None], S_in, tuple(spatial)
    axes = layer.axes(tuple(spatial), where=f"{WHAT}: {layer.describe()}")
    per = [ax.sources() for ax in axes]              # (o, k) sources and inside masks
    out_sp = tuple(ax.o for ax in axes)
    grids = np.meshgrid(*[np.arange(ax.o) for ax in axes], indexing="ij")
    offs = np.meshgrid(*[np.arange(ax.k) for ax in axes], indexing="ij")
    pos = [g.ravel() for g in grids]
    off = [o.ravel() for o in offs]
    flat_src = np.zeros((pos[0].size, off[0].size), dtype=np.int64)
    ok = np.ones(flat_src.shape, bool)
    for d, (src, inside) in enumerate(per):
        s = src[pos[d][:, None], off[d][None, :]]
        ok &= inside[pos[d][:, None], off[d][None, :]]
        flat_src = flat_src * axes[d].n + s
    return np.where(ok, flat_src, -1), int(np.prod(out_sp)), out_sp


def _pool_matrix(layer, spatial):
    """(M, out spatial) of a linear position map (AvgPool, GlobalAvgPool) on ``spatial`` positions."""
    S = int(np.prod(spatial)) if spatial else 1
    name = type(layer).__name__
    if name == "GlobalAvgPool":
        if not spatial:
            raise ValueError(f"{WHAT}: GlobalAvgPool needs spatial positions")
        return np.full((1, S), 1.0 / S), ()
    out_sp = layer._sizes(tuple(spatial), where=f"{WHAT}: {layer.describe()}")
    M = np.ones((1, 1))
    for d, n in enumerate(spatial):
        M = np.kron(M, layer._matrix(d, n))
    return M, tuple(out_sp)


def _preprocess(layers, X):
    """ψ₀: the layers before the first parametric one, applied to X numerically; returns (x⁰ (P, S, C), spatial,
    index of the first parametric layer)."""
    x = np.asarray(X, dtype=np.float64)[None]
    i = 0
    while i < len(layers) and not layers[i].parametric:
        name = type(layers[i]).__name__
        if name not in LINEAR_MAPS + ("Activation", "LayerNorm"):
            _refuse(i, layers[i])
        if name != "Identity":
            x, _ = layers[i].apply({}, x)
        i += 1
    if i == len(layers):
        raise ModelError(f"{WHAT}: the composition has no Dense or Conv layer")
    x = x[0]
    spatial = tuple(x.shape[1:-1])
    return x.reshape(x.shape[0], -1, x.shape[-1]), spatial, i


def _between(layers, i0, i1, spatial, S_h):
    """ψ from layers[i0:i1] (no parametric layer among them) on a field with ``spatial`` positions."""
    Ma, Mb, act, act_name, flat, ln = None, None, None, "", False, None
    for i in range(i0, i1):
        l = layers[i]
        name = type(l).__name__
        if name == "LayerNorm":
            if i != i0:
                raise ModelError(f"{WHAT} cannot treat layer {i} ({l.describe()}): {LAYERNORM_PLACE}")
            ln = float(l.eps)
            continue
        if name == "Activation":
            if act is not None:
                raise ModelError(f"{WHAT} cannot treat layer {i} ({l.describe()}): two Activation layers without a "
                                 "Dense/Conv between them (ψ = M_b∘φ∘M_a has one nonlinearity; docs/theory/dmft.rst §6)")
            if l.name_ != "linear":
                act, act_name = l.act, l.name_
            continue
        if name not in LINEAR_MAPS:
            _refuse(i, l)
        if name == "Identity":
            continue
        if name == "Flatten":
            flat = flat or bool(spatial)
            spatial = ()
            continue
        if flat:
            raise ModelError(f"{WHAT}: layer {i} ({l.describe()}) after Flatten has no positions to act on")
        M, spatial = _pool_matrix(l, spatial)
        if act is None:
            Ma = M if Ma is None else M @ Ma
        else:
            Mb = M if Mb is None else M @ Mb
    S_a = S_h if Ma is None else Ma.shape[0]
    S_x = S_a if Mb is None else Mb.shape[0]
    return Between(Ma, act, act_name, Mb, S_h, S_a, S_x, flat, ln), spatial


def _readout(layers, i0, spatial, S):
    """Position weights m (S,) of the read-out's output from the trailing layers (linear maps only)."""
    m = np.eye(S)
    flat = False
    for i in range(i0, len(layers)):
        l = layers[i]
        name = type(l).__name__
        if name in ("Activation", "LayerNorm"):
            raise ModelError(f"{WHAT} cannot treat layer {i} ({l.describe()}): a nonlinear layer after the read-out "
                             "(the mean-field output f = O(1) is linear in the read-out weights)")
        if name not in LINEAR_MAPS:
            _refuse(i, l)
        if name in ("Identity", "Flatten"):
            flat = flat or name == "Flatten"
            continue
        if flat:
            raise ModelError(f"{WHAT}: layer {i} ({l.describe()}) after Flatten has no positions to act on")
        M, spatial = _pool_matrix(l, spatial)
        m = M @ m
    if m.shape[0] != 1:
        raise ModelError(f"{WHAT} cannot treat this composition: its output has {m.shape[0]} positions (one output "
                         "per input is needed: end with GlobalAvgPool or Flatten before the read-out Dense)")
    return m[0]


def build_chain(comp, X) -> Chain:
    """The :class:`Chain` of composition ``comp`` on inputs X (P, *spatial, C) or (P, D); ModelError naming the layer
    it cannot treat (module docstring)."""
    layers = _layers(comp)
    for i, l in enumerate(layers):
        if type(l).__name__ in REFUSED or (l.parametric and type(l).__name__ not in ("Dense", "Conv")):
            _refuse(i, l)
    x0, spatial, i = _preprocess(layers, X)
    par = [j for j in range(i, len(layers)) if layers[j].parametric]
    if len(par) < 2:
        raise ModelError(f"{WHAT} cannot treat this composition: it needs a hidden layer (at least two Dense/Conv "
                         "layers: a read-in and a read-out)")
    stages, maps, flat, S_in = [], [], False, x0.shape[1]
    for k, p in enumerate(par):
        l = layers[p]
        sel, S_out, out_sp = _selection(l, spatial, flat, S_in)
        if flat and type(l).__name__ != "Dense":
            raise ModelError(f"{WHAT}: layer {p} ({l.describe()}) after Flatten must be a Dense")
        stages.append(Stage(p, l.describe(), float(l.sigma_w2), float(l.sigma_b2), sel, S_in, S_out))
        if k + 1 < len(par):
            psi, spatial = _between(layers, p + 1, par[k + 1], out_sp, S_out)
            maps.append(psi)
            flat, S_in = psi.flat, psi.S_x
        else:
            spatial = out_sp
    if stages[-1].sigma_b2 != 0.0:
        raise ModelError(f"{WHAT} cannot treat layer {par[-1]} ({stages[-1].name}): a read-out bias has no "
                         "mean-field scale (the per-layer table gives it the constant role); use sigma_b2=0 there")
    m = _readout(layers, par[-1] + 1, spatial, stages[-1].S_out)
    return Chain(tuple(stages), tuple(maps), x0, m)


def refuse_kinks(chain):
    """A composition with two or more hidden stages needs the response functions, i.e. φ'' along each path: refused
    for a kinked activation (relu) as for MLPs (docs/theory/dmft.rst §3); one hidden stage needs none."""
    if chain.L < 2:
        return
    for k, psi in enumerate(chain.maps):
        if not psi.smooth():
            raise ModelError(f"{WHAT}: activation {psi.act_name!r} after {chain.stages[k].name} is not smooth; a "
                             "composition with two or more hidden Dense/Conv layers needs the response functions "
                             "(φ'' along each path, a δ at the kink; docs/theory/dmft.rst §3). Use a smooth "
                             "activation (gelu, tanh, erf), or one hidden layer (exact for any activation)")
