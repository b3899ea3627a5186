"""``limits.serial(*layers)``: a frozen composition of layers — itself a layer, so compositions nest
(``Residual(serial(...))``) — with its serialisation (JSON / TOML model files).

One pass over the composition decides the covariance representation (:meth:`Serial.needs_full`,
from the read-out backwards): every pair of positions is kept only where a later GlobalAvgPool,
AvgPool or Attention mixes positions; elsewhere (e.g. a CNN read out through Flatten) only equal
positions (the CNN-GP shortcut, P²·S instead of P²·S² floats per block).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import real_number
from .base import Layer, layer_from_dict, register


@register
@dataclass(frozen=True)
class Serial(Layer):
    """Layers applied in order (module docstring). Build with :func:`limits.serial`."""

    layers: tuple = ()

    def __post_init__(self):
        ls = tuple(self.layers)
        for i, l in enumerate(ls):
            if not isinstance(l, Layer):
                raise ValueError(f"serial: argument {i} is a {type(l).__name__}, not a limits.layers layer")
        object.__setattr__(self, "layers", ls)

    @property
    def parametric(self):
        return any(l.parametric for l in self.layers)

    @property
    def fresh_output(self):
        return bool(self.layers) and self.layers[-1].fresh_output

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def describe(self) -> str:
        return "serial(" + ", ".join(l.describe() for l in self.layers) + ")"

    # ------------------------------------------------------------------ kernel
    def needs_full(self, after: bool) -> bool:
        for l in reversed(self.layers):
            after = l.needs_full(after)
        return after

    def needs(self, after: bool):
        """Per layer: does its input need every pair of positions? (and, last, the read-out's need)."""
        out = [after]
        for l in reversed(self.layers):
            out.append(l.needs_full(out[-1]))
        return out[::-1]

    def kernel(self, k, need_full_after=True, where="", trace=None):
        needs = self.needs(need_full_after)
        for i, l in enumerate(self.layers):
            at = f"{where} layer {i} ({l.describe()})".strip()
            try:
                k = l.kernel(k, needs[i + 1], at)
            except ValueError as exc:
                if "is not a valid covariance matrix" not in str(exc):
                    raise
                raise ValueError(_degenerate(k, at, i, len(self.layers), exc)) from None
            if k.full and not needs[i + 1]:
                k = k.to_diagonal()
            k = k.synced()
            if trace is not None:
                trace.append({"layer": i, "name": l.name, "representation": k.representation,
                              "spatial": list(k.spatial), "bytes": int(k.nbytes)})
        return k

    # ------------------------------------------------------------------ finite
    def hidden_outputs(self) -> list:
        """Top-level layer indices whose outputs are the hidden representations: every parametric layer (Dense,
        Conv, Attention) and Residual block before the last parametric layer (whose output is f) — what a per-layer
        coordinate check measures (:mod:`limits.finite.serial_coordcheck`)."""
        last = max((i for i, l in enumerate(self.layers) if l.parametric), default=-1)
        return [i for i, l in enumerate(self.layers[:last]) if l.parametric or isinstance(l, Residual)]

    def plan(self, in_shape, width, d_out=None):
        """Per layer (layer, in_shape, out_shape, n_out): the output width of every parametric layer is
        ``width``, except the last parametric layer of this composition when ``d_out`` is given."""
        last = max((i for i, l in enumerate(self.layers) if l.parametric), default=-1)
        out, shape = [], tuple(in_shape)
        for i, l in enumerate(self.layers):
            n = d_out if (d_out is not None and i == last) else width
            if isinstance(l, Residual):
                sub = l.branch.plan(shape, width, shape[-1] if l.branch.parametric else None)
                new = sub[-1][2] if sub else shape
                if new != shape:
                    raise ValueError(f"layer {i} (Residual): the branch maps {shape} to {new}; the skip connection "
                                     "needs the same shape (use as many channels as its input)")
                out.append((l, shape, shape, sub))
                continue
            new = l.out_shape(shape, n)
            out.append((l, shape, new, n))
            shape = new
        return out

    def init(self, plan, draw):
        """Raw N(0, 1) weights per layer: ``draw(shape)`` → ``(S, *shape)``."""
        params = []
        for l, sin, sout, n in plan:
            if isinstance(l, Residual):
                params.append(l.branch.init(n, draw))
            elif l.parametric:
                params.append({k: draw(s) for k, s in l.param_shapes(sin, n).items()})
            else:
                params.append({})
        return params

    def apply(self, params, x):
        caches = []
        for l, p in zip(self.layers, params):
            if isinstance(l, Residual):
                y, c = l.branch.apply(p, x)
                x = x + l.rho * y
            else:
                x, c = l.apply(p, x)
            caches.append(c)
        return x, caches

    def backward(self, params, caches, gy):
        theta = np.zeros((gy.shape[0], gy.shape[1], gy.shape[1]))
        for l, p, c in zip(reversed(self.layers), reversed(params), reversed(caches)):
            if isinstance(l, Residual):
                gb, th = l.branch.backward(p, c, l.rho * gy)
                gy = gy + gb
            else:
                gy, th = l.backward(p, c, gy)
            theta += th
        return gy, theta

    def vjp(self, params, caches, gy):
        """∂/∂x and, per layer, the parameter gradients summed over the inputs (training)."""
        grads = [None] * len(self.layers)
        for i in range(len(self.layers) - 1, -1, -1):
            l, p, c = self.layers[i], params[i], caches[i]
            if isinstance(l, Residual):
                gb, grads[i] = l.branch.vjp(p, c, l.rho * gy)
                gy = gy + gb
            elif l.parametric:
                gy, grads[i] = l.vjp(p, c, gy)
            else:
                gy, _ = l.backward(p, c, gy)
                grads[i] = {}
        return gy, grads

    def finite(self, width: int, d_out: int = 1):
        """The finite network at width N (``limits.finite.serial.SerialNetwork``): every Dense/Conv/Attention
        has N output channels, the last one ``d_out``; NTK parameterisation, weights N(0, 1)."""
        from ..finite.serial import SerialNetwork

        return SerialNetwork(self, width, d_out)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict:
        return {"serial": [l.to_dict() for l in self.layers]}

    @classmethod
    def from_dict(cls, d) -> "Serial":
        if isinstance(d, dict) and isinstance(d.get("model"), dict):
            outside = sorted(map(str, set(d) - {"model"}))
            if outside:                     # e.g. `depth = 7` beside [model]: would be ignored silently
                raise ValueError(f"key(s) {outside} beside the 'model' table; a composition file holds "
                                 "{'model': {'serial': [...]}} or {'serial': [...]} only")
            d = d["model"]
        if not isinstance(d, dict) or not isinstance(d.get("serial"), list):
            raise ValueError("a composition is a mapping {'serial': [layer, …]} (each layer a mapping with 'layer')")
        unknown = sorted(map(str, set(d) - {"serial"}))
        if unknown:
            raise ValueError(f"a composition holds 'serial' only; unknown key(s) {unknown}")
        layers = []
        for i, x in enumerate(d["serial"]):
            try:
                layers.append(layer_from_dict(x))
            except ValueError as exc:
                raise ValueError(f"serial[{i}]: {exc}") from None
        return cls(tuple(layers))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Serial":
        from ..readfile import parse_json

        return cls.from_dict(parse_json(text, "composition JSON"))

    def to_toml(self) -> str:
        return "serial = [\n" + "".join(f"  {_toml(l.to_dict())},\n" for l in self.layers) + "]\n"

    def save(self, path) -> Path:
        """Write ``path`` (.json or .toml) atomically."""
        from ..results import atomic_write_text

        path = Path(path)
        text = self.to_toml() if path.suffix.lower() == ".toml" else self.to_json() + "\n"
        return atomic_write_text(path, text)

    @classmethod
    def load(cls, path) -> "Serial":
        """A composition file (.json / .toml): a regular file of at most 1 MiB nested at most 100 deep
        (:mod:`limits.readfile`), every layer description checked (:func:`limits.layers.layer_from_dict`)."""
        from ..readfile import named, parse_json, parse_toml, read_text

        path = Path(path)
        where = named("composition file", path)
        d = (parse_toml if path.suffix.lower() == ".toml" else parse_json)(read_text(path, "composition file"), where)
        try:
            return cls.from_dict(d)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def _degenerate(k, at, i, n, exc) -> str:
    """What is wrong when a layer meets a kernel that is no longer a covariance (rounding broke k12² ≤ k11·k22):
    the scale it decayed (or grew) to over ``i`` layers of ``n``, or correlations at ±1 to rounding."""
    a = np.abs(np.asarray(k.nngp, dtype=float))
    top = float(np.nanmax(a)) if a.size else 0.0
    if top < 1e-100 or top > 1e100:
        why = (f"its input kernel has {'decayed' if top < 1 else 'grown'} to {top:.3g} after {i} of {n} layers: the "
               "variance changes by a constant factor per layer and this depth takes it to the edge of float64 (a "
               "degenerate kernel, not a covariance the next layer can use) — use fewer layers, or variances on the "
               "critical line (e.g. σ_w² = 2 for relu without bias)")
    else:
        why = (f"after {i} of {n} layers the inputs' correlations have reached ±1 to rounding (a degenerate, "
               "rank-deficient kernel: at this depth every input maps to the same point) — use fewer layers or "
               "variances that keep inputs apart")
    return f"{at}: {why} ({exc})"


def _toml(v) -> str:
    """A TOML inline value (strings, booleans, numbers, lists, tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not np.isfinite(v):
            raise ValueError(f"cannot write {v!r} to TOML")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items() if x is not None) + "}"
    raise ValueError(f"cannot write a {type(v).__name__} to TOML")


def serial(*layers) -> Serial:
    """A frozen composition of ``layers`` (nested compositions are flattened; a ``limits.Model`` enters as its
    :meth:`~limits.Model.to_serial` layers); a runnable example: the :mod:`limits.layers` docstring."""
    out = []
    for l in layers:
        if hasattr(l, "to_serial") and not isinstance(l, Layer):
            l = l.to_serial()
        if isinstance(l, Serial):
            out.extend(l.layers)
        else:
            out.append(l)
    return Serial(tuple(out))


# ---------------------------------------------------------------------------------------------------------
# Residual(branch, rho) and Identity live here because a Residual wraps a Serial and a Serial validates its
# Residual blocks (one module: no import cycle).
#
# Finite: y = x + ρ · branch(x). Kernel (the branch ends in fresh zero-mean weights, so it is uncorrelated
# with its input):  K' = K + ρ² K_branch,  Θ' = Θ + ρ² Θ_branch.  Identity: y = x, K' = K, Θ' = Θ.
# Cost: that of the branch.


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
        branch = d.get("branch", [])
        if not isinstance(branch, list):
            raise ValueError(f"Residual.branch must be a list of layer descriptions, got {type(branch).__name__}")
        return cls(serial(*(layer_from_dict(x) for x in branch)), d.get("rho", 1.0))

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

        def add(a, c):                           # a + ρ² c
            if a is None:
                return None
            if r2 == 1.0:
                return np.add(a, c)
            out = np.multiply(c, r2)
            out += a
            return out

        return k.replace(nngp=add(k.nngp, kb.nngp), ntk=add(k.ntk, kb.ntk), cov1=add(k.cov1, kb.cov1),
                         cov2=add(k.cov2, kb.cov2), is_gaussian=k.is_gaussian and kb.is_gaussian)

    def out_shape(self, in_shape, width):
        return tuple(in_shape)
