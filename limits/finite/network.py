"""Network descriptions: one frozen object lists read-in, hidden blocks and read-out with concrete
per-layer numbers (multiplier, init std, learning rate, biases), branch multipliers and the
output scale. Everything the simulators run is described by a :class:`Network`.

Pre-activation networks (seed 004 §II, docs/theory/nfd.rst §1, docs/theory/dmft.rst §1)::

    h⁰ = m_in W_in x + b_in
    block l (residual):  h^l = h^{l−1} + β_l F_l(h^{l−1}),   (plain: h^l = F_l(h^{l−1}))
        F_l:  u_1 = m_1 W_1 φ(h) + b_1,  u_k = m_k W_k φ(u_{k−1}) + b_k,  F_l = u_last
    f = s_out · (m_out W_out φ(h^B) + b_out)          (s_out = 1/γ)

Post-activation networks (docs/theory/nfd.rst §1 variant) carry x^l = φ(·) in the stream::

    x⁰ = m_in W_in x + b_in   (φ applied too if readin_phi)
    block l:  x^l = φ( [x^{l−1}] + β_l F_l(x^{l−1}) ),  u_1 = m_1 W_1 x + b_1, u_k = m_k W_k φ(u_{k−1}) + b_k
    f = s_out · (m_out W_out x^B + b_out)             (φ(x^B) if readout_phi)

Weights have entries N(0, std²); biases N(0, bias_std²). Samples are rows.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace

from ..checks import positive_int


def _real(x, name, allow_zero=True, allow_negative=False):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {x!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if not allow_negative and (v < 0 or (v == 0 and not allow_zero)):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {v}")
    return v


@dataclass(frozen=True)
class Dense:
    """One weight layer ``u = mult · W · input + bias_mult · b`` with ``W_ij ~ N(0, std²)``.

    ``lr`` is the learning rate of ``W`` (0 freezes it); ``bias`` switches the bias on,
    ``bias_std`` its init std, ``bias_lr`` its learning rate (defaults to ``lr``).
    """

    fan_in: int
    fan_out: int
    mult: float = 1.0
    std: float = 1.0
    lr: float = 1.0
    bias: bool = False
    bias_std: float = 0.0
    bias_lr: float | None = None
    bias_mult: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "fan_in", positive_int(self.fan_in, "fan_in"))
        object.__setattr__(self, "fan_out", positive_int(self.fan_out, "fan_out"))
        object.__setattr__(self, "mult", _real(self.mult, "mult", allow_negative=True))
        object.__setattr__(self, "std", _real(self.std, "std"))
        object.__setattr__(self, "lr", _real(self.lr, "lr"))
        object.__setattr__(self, "bias", bool(self.bias))
        object.__setattr__(self, "bias_std", _real(self.bias_std, "bias_std"))
        object.__setattr__(self, "bias_mult", _real(self.bias_mult, "bias_mult", allow_negative=True))
        if self.bias_lr is not None:
            object.__setattr__(self, "bias_lr", _real(self.bias_lr, "bias_lr"))

    @property
    def b_lr(self) -> float:
        return self.lr if self.bias_lr is None else self.bias_lr


@dataclass(frozen=True)
class Block:
    """A hidden block: ``layers`` (1 = one-layer block, 2 = two-layer residual block, n = n-skip),
    ``residual`` (identity skip or not) and the branch multiplier ``branch`` (ρ, √(T/L), L^{-α})."""

    layers: tuple
    residual: bool = True
    branch: float = 1.0

    def __post_init__(self):
        layers = tuple(self.layers)
        if not layers or not all(isinstance(d, Dense) for d in layers):
            raise ValueError("layers must be a non-empty sequence of Dense")
        for a, b in zip(layers[:-1], layers[1:]):
            if a.fan_out != b.fan_in:
                raise ValueError("layers: consecutive fan_out/fan_in mismatch inside a block")
        if self.residual and layers[0].fan_in != layers[-1].fan_out:
            raise ValueError("layers: a residual block must map width N to width N")
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "residual", bool(self.residual))
        object.__setattr__(self, "branch", _real(self.branch, "branch", allow_negative=True))


@dataclass(frozen=True)
class Network:
    """Read-in, hidden blocks, read-out, activation name and output scale ``out_scale = 1/γ``."""

    readin: Dense
    blocks: tuple
    readout: Dense
    activation: object = "linear"
    out_scale: float = 1.0
    post_activation: bool = False
    readin_phi: bool = False
    readout_phi: bool | None = None
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if not isinstance(self.readin, Dense):
            raise ValueError("readin must be a Dense layer")
        if not isinstance(self.readout, Dense):
            raise ValueError("readout must be a Dense layer")
        blocks = tuple(self.blocks)
        if not all(isinstance(b, Block) for b in blocks):
            raise ValueError("blocks must be a sequence of Block")
        width = self.readin.fan_out
        for i, b in enumerate(blocks):
            if b.layers[0].fan_in != width:
                raise ValueError(f"blocks[{i}]: fan_in {b.layers[0].fan_in} != incoming width {width}")
            width = b.layers[-1].fan_out
        if self.readout.fan_in != width:
            raise ValueError(f"readout: fan_in {self.readout.fan_in} != incoming width {width}")
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "out_scale", _real(self.out_scale, "out_scale", allow_zero=False,
                                                    allow_negative=True))
        if self.readout_phi is None:
            object.__setattr__(self, "readout_phi", not self.post_activation)
        act = self.activation
        if isinstance(act, str):
            from .. import activation as _activation

            try:
                _activation(act)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"activation: unknown activation {act!r} ({exc})") from None
        elif not callable(act) and not hasattr(act, "phi"):
            raise ValueError(f"activation must be a name or an Activation, got {act!r}")

    # -- convenience -------------------------------------------------------------------------
    @property
    def d_in(self) -> int:
        return self.readin.fan_in

    @property
    def d_out(self) -> int:
        return self.readout.fan_out

    @property
    def width(self) -> int:
        return self.readin.fan_out

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    def act(self):
        """The shared-registry Activation (φ, φ', φ'')."""
        from .. import activation as _activation

        return self.activation if hasattr(self.activation, "phi") else _activation(self.activation)

    def layer_names(self) -> list[str]:
        """Names of all weight layers in forward order: 'in', '1.1', '1.2', …, 'out'."""
        names = ["in"]
        for i, b in enumerate(self.blocks, 1):
            names += [f"{i}.{k}" for k in range(1, len(b.layers) + 1)]
        return names + ["out"]

    def layers(self) -> dict:
        """Mapping layer name → Dense, forward order."""
        out = {"in": self.readin}
        for i, b in enumerate(self.blocks, 1):
            for k, d in enumerate(b.layers, 1):
                out[f"{i}.{k}"] = d
        out["out"] = self.readout
        return out

    def with_lr(self, scale=1.0, **per_layer) -> "Network":
        """Copy with every learning rate multiplied by ``scale`` (and ``per_layer`` overrides by name,
        e.g. ``with_lr(**{'in': 0.0})`` freezes the read-in)."""
        scale = _real(scale, "scale")

        def upd(name, d):
            lr = per_layer.get(name, d.lr * scale)
            blr = None if d.bias_lr is None else d.bias_lr * scale
            return replace(d, lr=lr, bias_lr=blr)

        blocks = tuple(replace(b, layers=tuple(upd(f"{i}.{k}", d) for k, d in enumerate(b.layers, 1)))
                       for i, b in enumerate(self.blocks, 1))
        return replace(self, readin=upd("in", self.readin), blocks=blocks, readout=upd("out", self.readout))

    def describe(self) -> str:
        """Human-readable table of the concrete per-layer numbers."""
        rows = [f"Network: d_in={self.d_in}, width={self.width}, blocks={self.n_blocks}, d_out={self.d_out}, "
                f"activation={getattr(self.activation, 'name', self.activation)}, "
                f"{'post' if self.post_activation else 'pre'}-activation, out_scale={self.out_scale:.6g}",
                f"{'layer':>8} {'mult':>12} {'std':>12} {'lr':>12} {'branch':>10} bias"]
        branch = {f"{i}.{k}": b.branch if b.residual else float('nan')
                  for i, b in enumerate(self.blocks, 1) for k in range(1, len(b.layers) + 1)}
        for name, d in self.layers().items():
            br = branch.get(name)
            rows.append(f"{name:>8} {d.mult:12.6g} {d.std:12.6g} {d.lr:12.6g} "
                        f"{'' if br is None else format(br, '10.4g'):>10} "
                        f"{'std=%.3g' % d.bias_std if d.bias else '-'}")
        return "\n".join(rows)


def _bias_kw(sigma_b2):
    sb = _real(sigma_b2, "sigma_b2")
    return {"bias": sb > 0, "bias_std": math.sqrt(sb)}


def mlp(d_in, width, blocks, d_out=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, sigma_w2_in=None,
        sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, lr=1.0, parameterisation="standard"):
    """Feed-forward net ``h⁰ = W_in x + b``, ``h^l = W φ(h^{l−1}) + b`` (``blocks`` hidden N×N layers),
    ``f = W_out φ(h^B) + b``; docs/theory/kernels.rst §2 conventions: ``W ~ N(0, σ_w²/fan_in)``.

    ``parameterisation="ntk"``: ``W = σ_w w/√fan_in``, ``b = σ_b β`` with w, β ~ N(0, 1) the trained
    parameters (multiplier σ_w/√fan_in, std 1) — the convention of ``limits.kernels.nngp``'s NTK.
    Seed 000 depth L (weight layers) ↔ ``blocks = L − 2``; DMFT depth L ↔ ``blocks = L − 1``.
    """
    return build_network(d_in, width, blocks, d_out, activation, sigma_w2, sigma_b2, sigma_w2_in, sigma_b2_in,
                  sigma_w2_out, sigma_b2_out, lr, parameterisation, residual=False, rho=1.0, block_layers=1,
                  post_activation=False)


def resnet(d_in, width, blocks, d_out=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, rho=1.0,
           sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, lr=1.0,
           parameterisation="standard", block_layers=1, post_activation=False):
    """Residual net of seed 004 §II / docs/theory/kernels.rst §3: ``h^l = h^{l−1} + ρ [W φ(h^{l−1}) + b]``
    (``blocks`` = L residual blocks, ``block_layers`` = 2 for two-layer blocks), read-in/out as in
    :func:`mlp`. ``rho`` is the branch multiplier (ρ, β/√L, √(T/L), L^{-α}: pass the number)."""
    return build_network(d_in, width, blocks, d_out, activation, sigma_w2, sigma_b2, sigma_w2_in, sigma_b2_in,
                  sigma_w2_out, sigma_b2_out, lr, parameterisation, residual=True, rho=rho,
                  block_layers=block_layers, post_activation=post_activation)


_MAX_WEIGHTS = 2 ** 31          # 16 GB of float64 weights: anything larger cannot be built on one machine


def build_network(d_in, width, blocks, d_out, activation, sigma_w2, sigma_b2, sigma_w2_in, sigma_b2_in,
           sigma_w2_out, sigma_b2_out, lr, parameterisation, residual, rho, block_layers, post_activation):
    """The finite MLP/ResNet in the NTK or standard parameterisation from per-group variances (what
    :func:`mlp`, :func:`resnet` and ``Model.finite`` for SP/NTK models build)."""
    d_in = positive_int(d_in, "d_in")
    width = positive_int(width, "width")
    blocks = positive_int(blocks, "blocks", minimum=0)
    d_out = positive_int(d_out, "d_out")
    block_layers = positive_int(block_layers, "block_layers")
    n_weights = d_in * width + blocks * block_layers * width * width + width * d_out      # exact (Python ints)
    if n_weights > _MAX_WEIGHTS:
        size = f"about 10^{len(str(n_weights)) - 1}"
        raise ValueError(f"network too large: {size} weights (d_in={d_in}, width={width:.3g}, blocks={blocks:.3g}, "
                         f"block_layers={block_layers}, d_out={d_out}); at most {_MAX_WEIGHTS}")
    if parameterisation not in ("standard", "ntk"):
        raise ValueError(f"parameterisation must be 'standard' or 'ntk', got {parameterisation!r}")
    sw2 = _real(sigma_w2, "sigma_w2")
    sb2 = _real(sigma_b2, "sigma_b2")
    sw2_in = sw2 if sigma_w2_in is None else _real(sigma_w2_in, "sigma_w2_in")
    sb2_in = sb2 if sigma_b2_in is None else _real(sigma_b2_in, "sigma_b2_in")
    sw2_out = sw2 if sigma_w2_out is None else _real(sigma_w2_out, "sigma_w2_out")
    sb2_out = sb2 if sigma_b2_out is None else _real(sigma_b2_out, "sigma_b2_out")

    def dense(fi, fo, s2, b2):
        if parameterisation == "standard":
            return Dense(fi, fo, mult=1.0, std=math.sqrt(s2 / fi), lr=lr, **_bias_kw(b2))
        # NTK parameterisation: W = σ w/√fan_in, b = σ_b β with w, β ~ N(0, 1) trainable
        return Dense(fi, fo, mult=math.sqrt(s2 / fi), std=1.0, lr=lr, bias=b2 > 0, bias_std=1.0,
                     bias_mult=math.sqrt(b2))

    readin = dense(d_in, width, sw2_in, sb2_in)
    hidden = tuple(Block(tuple(dense(width, width, sw2, sb2) for _ in range(block_layers)),
                         residual=residual, branch=rho if residual else 1.0) for _ in range(blocks))
    readout = dense(width, d_out, sw2_out, sb2_out)
    return Network(readin, hidden, readout, activation=activation, post_activation=post_activation)
