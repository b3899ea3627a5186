"""One description of a network for every theory and the finite simulator: :class:`Model`.

A :class:`Model` lists the architecture (read-in, ``depth`` hidden N×N blocks, read-out),
activation, per-group variances and a width parameterisation — everything except the width N: a named way to
build a composition (:attr:`Model.composition`, a ``limits.serial`` of Dense/Activation/Residual layers) plus a
parameterisation (per tensor: ``limits.params.layer_table(model)``).
Theory entry points take it as ``model=`` (``limits.kernels.nngp(X, model=m)``, ``response``,
``kernel_fluctuations``, ``limits.kernels.kernel(m, X1, X2)``, ``limits.dmft.solve(X, y, model=m)``,
``limits.nfd.kernel_ode(X, model=m)``) and :meth:`Model.finite` turns it into the concrete
``limits.finite.Network`` at width N — the ONE place a Model becomes numbers at finite width::

    h⁰ = m_in W_in x + b_in                                  (read-in, d_in → N)
    h^l = [h^{l−1}] + ρ_eff (W^l φ(h^{l−1}) + b^l),  l = 1..depth   (block; [·] only if residual)
    f   = s_out (m_out W_out φ(h^depth) + b_out)               (read-out, N → d_out)

**depth** = the number of hidden N×N blocks (the L of seed 004 and of ``kernels.nngp``; layers
are indexed l = 0..depth by the kernels). A block has ``block_layers`` weight layers, so the
network has ``depth·block_layers + 2`` weight layers (:attr:`Model.n_weight_layers`) and
``depth + 1`` hidden pre-activation layers (:attr:`Model.n_hidden_layers`, the "depth" of the
legacy ``limits.dmft.solve(depth=…)`` signature).

Residual branches carry ρ_eff = ``rho`` (depth_scaling "none"), ``rho/√depth`` ("sqrt"),
``rho/depth`` ("linear") or ``rho·depth^{−alpha}`` ("alpha"). Variances follow docs/theory/kernels.rst §2:
W ~ N(0, σ²_w/fan_in), b ~ N(0, σ²_b); read-in/read-out variances default to the hidden ones.

Parameterisations: "NTK" (default; W = σ w/√fan_in with w ~ N(0,1) trained — the NTK of
``kernels.nngp``), "SP" (W ~ N(0, σ²/fan_in) trained directly), and the feature-learning ones
"MF", "muP", "depth-muP", "muPC" (variance convention of seed 000: f = h/γ, γ = γ0 √N,
η = lr·γ²N^{−c}), or any ``limits.params.Parameterisation`` object.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .checks import positive_int, real_number as _real

DEPTH_SCALINGS = ("none", "sqrt", "linear", "alpha")
KERNEL_PARAMS = ("NTK", "SP")
NAMED_PARAMS = ("SP", "NTK", "MF", "muP", "depth-muP", "muPC")
_PARAM_ALIASES = {p.lower(): p for p in NAMED_PARAMS}
_PARAM_ALIASES.update({"mup": "muP", "depth-mup": "depth-muP", "depthmup": "depth-muP", "mupc": "muPC",
                       "standard": "SP", "ntk": "NTK", "mf": "MF", "sp": "SP"})
_VAR_FIELDS = ("sigma_w2", "sigma_b2", "sigma_w2_in", "sigma_b2_in", "sigma_w2_out", "sigma_b2_out")


from .errors import ModelError  # noqa: E402  (defined in the foundation; re-exported here as before)


def _param_name(p):
    if isinstance(p, str):
        key = _PARAM_ALIASES.get(p.lower())
        if key is None:
            raise ValueError(f"parameterisation: unknown name {p!r}; known: {', '.join(NAMED_PARAMS)} "
                             "(or pass a limits.params.Parameterisation)")
        return key
    if hasattr(p, "exponent") and hasattr(p, "convention"):
        return p
    raise ValueError(f"parameterisation must be a name ({', '.join(NAMED_PARAMS)}) or a "
                     f"limits.params.Parameterisation, got {type(p).__name__}")


parameterisation_name = _param_name          # public within the package

_COMPOSITION_FILE = ("this describes a composition of layers, not an MLP/ResNet Model; load it with "
                     "limits.layers.load(path) or limits.layers.Serial.from_dict(d) (on the command line `limits kernel`, "
                     "`check`, `predict` and `regress` take it as --model FILE)")


@dataclass(frozen=True)
class Model:
    """A network description without its width (module docstring). Build with :func:`mlp` or
    :func:`resnet`; compare with ``==``; save with :meth:`to_json` / :meth:`save`."""

    d_in: int
    depth: int = 1
    d_out: int = 1
    activation: object = "erf"
    residual: bool = False
    rho: float = 1.0
    depth_scaling: str = "none"
    alpha: float = 0.5
    block_layers: int = 1
    post_activation: bool = False
    sigma_w2: float = 1.0
    sigma_b2: float = 0.0
    sigma_w2_in: float | None = None
    sigma_b2_in: float | None = None
    sigma_w2_out: float | None = None
    sigma_b2_out: float | None = None
    parameterisation: object = "NTK"
    gamma0: float = 1.0
    lr: float = 1.0

    def __post_init__(self):
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        s("d_in", positive_int(self.d_in, "d_in"))
        s("depth", positive_int(self.depth, "depth", minimum=0))
        s("d_out", positive_int(self.d_out, "d_out"))
        s("block_layers", positive_int(self.block_layers, "block_layers"))
        for k in ("residual", "post_activation"):
            v = getattr(self, k)
            if not isinstance(v, bool):
                try:
                    import numpy as np

                    ok = isinstance(v, np.bool_)
                except ImportError:       # pragma: no cover
                    ok = False
                if not ok:
                    raise ValueError(f"{k} must be True or False, got {v!r}")
            s(k, bool(v))
        s("rho", _real(self.rho, "rho", allow_negative=True))
        if self.depth_scaling is None:
            s("depth_scaling", "none")
        if self.depth_scaling not in DEPTH_SCALINGS:
            raise ValueError(f"depth_scaling must be one of {DEPTH_SCALINGS}, got {self.depth_scaling!r}")
        s("alpha", _real(self.alpha, "alpha", allow_negative=True))
        for k in _VAR_FIELDS:
            v = getattr(self, k)
            if v is not None:
                s(k, _real(v, k))
        s("gamma0", _real(self.gamma0, "gamma0", positive=True))
        s("lr", _real(self.lr, "lr"))
        s("parameterisation", _param_name(self.parameterisation))
        if not self.residual and (self.block_layers != 1):
            raise ValueError("block_layers > 1 needs residual=True (a plain MLP block is one layer)")
        if self.residual and self.depth_scaling == "alpha":
            _alpha_branch(self.rho, max(self.depth, 1), self.alpha)     # refuses an overflowing ρ·depth^−α
        # resolve the activation ONCE; keep its name as the (serialisable, comparable) field
        from .activations import Activation, activation as _activation

        act = self.activation
        if isinstance(act, str):
            try:
                resolved = _activation(act)
            except ValueError as exc:
                raise ValueError(f"activation: {exc}".replace("activation: activation: ", "activation: ")) from None
            s("activation", resolved.name)
        elif isinstance(act, Activation):
            resolved = act
        elif callable(act):
            resolved = _activation(act)
            s("activation", resolved)
        else:
            raise ValueError(f"activation must be a registered name, an Activation or a callable, got {act!r}")
        object.__setattr__(self, "_act", resolved)

    def __getstate__(self):
        """Pickled (loky, dask) without the resolved activation when it has a registered name: the receiving
        process resolves the name to its own registry object, so closed-form fast paths (which test identity
        with the registry) survive the trip."""
        state = dict(self.__dict__)
        if isinstance(self.activation, str):
            state.pop("_act", None)
        return state

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)
        if "_act" not in state:
            from .activations import activation as _activation

            object.__setattr__(self, "_act", _activation(self.activation))

    # ------------------------------------------------------------------ derived numbers
    @property
    def act(self):
        """The resolved :class:`limits.activations.Activation` (looked up once, at construction)."""
        return self._act

    @property
    def activation_name(self) -> str:
        return self.activation if isinstance(self.activation, str) else self._act.name

    @property
    def n_weight_layers(self) -> int:
        """Weight layers: read-in + depth·block_layers + read-out (seed 000's L)."""
        return self.depth * self.block_layers + 2

    @property
    def n_hidden_layers(self) -> int:
        """Hidden pre-activation layers h⁰…h^depth (the legacy DMFT ``depth``)."""
        return self.depth + 1

    @property
    def branch(self) -> float:
        """Effective residual branch multiplier ρ_eff (1 for a feed-forward model)."""
        if not self.residual:
            return 1.0
        L = max(self.depth, 1)
        if self.depth_scaling == "alpha":
            return _alpha_branch(self.rho, L, self.alpha)
        return {"none": self.rho, "sqrt": self.rho / math.sqrt(L), "linear": self.rho / L}[self.depth_scaling]

    def variances(self) -> dict:
        """σ² of every group with the read-in/read-out defaults filled in."""
        v = {"sigma_w2": self.sigma_w2, "sigma_b2": self.sigma_b2}
        for end in ("in", "out"):
            for k in ("sigma_w2", "sigma_b2"):
                own = getattr(self, f"{k}_{end}")
                v[f"{k}_{end}"] = v[k] if own is None else own
        return v

    @property
    def param_name(self) -> str:
        p = self.parameterisation
        return p if isinstance(p, str) else str(getattr(p, "name", "custom"))

    def params_object(self, convention: str = "variance"):
        """The ``limits.params.Parameterisation`` (derived by the constraint solver for a name)."""
        p = self.parameterisation
        if not isinstance(p, str):
            return p
        resolved = self.__dict__.setdefault("_params_objects", {})     # a name is solved once per model
        if convention not in resolved:
            from . import params

            resolved[convention] = params.named(p, convention=convention, algorithm="bp")
        return resolved[convention]

    @property
    def kernel_regime(self) -> bool:
        """True for the parameterisations whose read-out kernels have an N → ∞ limit at init (SP, NTK)."""
        return self.param_name in KERNEL_PARAMS and isinstance(self.parameterisation, str)

    # ------------------------------------------------------------------ views for the theories
    def require(self, what: str, *, kernel_regime=False, block_layers_one=False, pre_activation=False,
                residual=None, no_bias=False, unit_variances=False, params=None):
        """Raise :class:`ModelError` naming ``what`` and the offending property when this model is
        outside what a theory treats."""
        why = []
        if kernel_regime and not self.kernel_regime:
            why.append(f"parameterisation {self.param_name!r} has no read-out kernel limit at init "
                       "(f = O(N^-1/2) for MF/μP; use limits.dmft.solve for its dynamics, or "
                       "parameterisation='NTK'/'SP')")
        if params is not None and self.param_name not in params:
            why.append(f"parameterisation {self.param_name!r} is not one of {params}")
        if block_layers_one and self.block_layers != 1:
            why.append(f"block_layers={self.block_layers} (only one-layer blocks are treated)")
        if pre_activation and self.post_activation:
            why.append("post_activation=True (only pre-activation networks are treated)")
        if residual is not None and self.residual != residual:
            why.append("a feed-forward model" if residual else "a residual model")
            why[-1] = f"needs {'a residual' if residual else 'a feed-forward'} model, got {why[-1]}"
        v = self.variances()
        if no_bias and any(v[k] != 0 for k in ("sigma_b2", "sigma_b2_in", "sigma_b2_out")):
            why.append("bias variances must be 0")
        if unit_variances and any(v[k] != 1 for k in ("sigma_w2", "sigma_w2_in", "sigma_w2_out")):
            why.append("weight variances must be 1 (sigma_w2 = sigma_w2_in = sigma_w2_out = 1)")
        if why:
            raise ModelError(f"{what} cannot treat this model: " + "; ".join(why))

    def kernel_kwargs(self, what="limits.kernels") -> dict:
        """Keyword arguments of the kernel recursions (``kernels.nngp`` & co) for this model (the kernel side
        refuses a depth whose recursion would run too long: ``limits.kernels.modelview.kernel_arguments``)."""
        self.require(what, block_layers_one=True, pre_activation=True)
        return {"depth": self.depth, "activation": self._act, "residual": self.residual,
                "rho": self.branch, "depth_scaling": "none", "d_in": self.d_in, **self.variances()}

    @property
    def composition(self):
        """The architecture this model names, as a composition ``limits.serial(...)``: Dense(in), then per block
        [Activation, Dense] (feed-forward, σ² → ρ²σ²) or Residual([Activation, Dense]…, ρ_eff), then Activation,
        Dense(out). Its layers are written with raw N(0, 1) weights scaled by σ/√fan_in (the NTK parameterisation);
        :attr:`parameterisation` says how each tensor is rescaled (``limits.params.layer_table(model)``). For
        parameterisation NTK the composition's kernels are the model's (:meth:`to_serial`)."""
        from . import layers as L

        self.require("Model.composition", pre_activation=True)
        v, act, r2 = self.variances(), self.activation_name, self.branch ** 2
        body = []
        for _ in range(self.depth):
            if self.residual:
                blk = []
                for _ in range(self.block_layers):
                    blk += [L.Activation(act), L.Dense(v["sigma_w2"], v["sigma_b2"])]
                body.append(L.Residual(L.serial(*blk), rho=self.branch))
            else:
                for j in range(self.block_layers):
                    last = j == self.block_layers - 1
                    body += [L.Activation(act), L.Dense(v["sigma_w2"] * (r2 if last else 1.0),
                                                        v["sigma_b2"] * (r2 if last else 1.0))]
        return L.serial(L.Dense(v["sigma_w2_in"], v["sigma_b2_in"]), *body, L.Activation(act),
                        L.Dense(v["sigma_w2_out"], v["sigma_b2_out"]))

    def to_serial(self):
        """The equivalent composition of NTK-parameterised layers (same NNGP and NTK): :attr:`composition`, for
        parameterisation NTK only (another parameterisation rescales the layers: its kernels are not these)."""
        self.require("Model.to_serial", pre_activation=True)
        if self.param_name != "NTK":
            raise ModelError(f"Model.to_serial: the layers are NTK-parameterised; parameterisation "
                             f"{self.param_name!r} has no such composition (use parameterisation='NTK', or "
                             "Model.composition for the architecture with limits.params.layer_table for its scales)")
        return self.composition

    # ------------------------------------------------------------------ finite width
    def finite(self, width: int):
        """The concrete ``limits.finite.Network`` at width N with exactly this model's conventions
        (the one place a Model becomes numbers at finite width)."""
        from .finite.concretise import concretise
        from .finite.network import build_network

        N = positive_int(width, "width")
        if self.depth == 0 and self.residual:
            raise ModelError("a residual model needs depth >= 1")
        _check_finite_size(self, N)
        v = self.variances()
        p = self.parameterisation
        if isinstance(p, str) and p in KERNEL_PARAMS:
            net = build_network(self.d_in, N, self.depth, self.d_out, self._act, v["sigma_w2"], v["sigma_b2"],
                         v["sigma_w2_in"], v["sigma_b2_in"], v["sigma_w2_out"], v["sigma_b2_out"], self.lr,
                         "ntk" if p == "NTK" else "standard", residual=self.residual, rho=self.branch,
                         block_layers=self.block_layers, post_activation=self.post_activation)
        else:
            biases = {v[k] for k in ("sigma_b2", "sigma_b2_in", "sigma_b2_out")}
            if len(biases) > 1:
                raise ModelError(f"parameterisation {self.param_name!r}: finite networks take one bias "
                                 "variance for every layer; set sigma_b2_in = sigma_b2 = sigma_b2_out")
            sb2 = biases.pop()
            net = concretise(self.params_object(), N, self.n_weight_layers, d_in=self.d_in, d_out=self.d_out,
                             activation=self._act, eta0=self.lr, gamma0=self.gamma0,
                             sigma=math.sqrt(v["sigma_w2"]), sigma_in=math.sqrt(v["sigma_w2_in"]),
                             sigma_out=math.sqrt(v["sigma_w2_out"]), residual=self.residual,
                             branch=self.branch, blocks=self.depth, block_layers=self.block_layers,
                             bias=sb2 > 0, sigma_b=math.sqrt(sb2), post_activation=self.post_activation,
                             lr_depth={})
        return replace(net, meta={**net.meta, "model": self.to_dict(), "width": N})

    def to_torch(self, width: int, weights=None, index: int = 0, seed=None, dtype=None):
        """This model at width N as a ``torch.nn.Module`` computing exactly ``self.finite(width)``
        (init laws, forward multipliers; ``.param_groups(lr_scale)`` / ``.optimizer("sgd"|"adam")``
        for the per-parameter learning rates). Needs the optional extra ``torch``
        (:mod:`limits.torch.network`); ``weights``: a ``limits.finite.Weights`` to copy init ``index`` from."""
        from ._plugins import optional_extra

        kw = {} if dtype is None else {"dtype": dtype}
        return optional_extra("limits.torch.network", "torch").from_model(self, width, weights=weights, index=index,
                                                                            seed=seed, **kw)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict:
        if not isinstance(self.activation, str):
            raise ValueError("a model with a user activation (callable) cannot be serialised; "
                             "register it by name: limits.activation(f, name=..., register=True)")
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        p = self.parameterisation
        if not isinstance(p, str):
            d["parameterisation"] = {"custom": p.to_dict()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Model":
        if not isinstance(d, dict):
            raise ValueError(f"a model description must be a mapping, got {type(d).__name__}")
        if "serial" in d:
            raise ModelError(_COMPOSITION_FILE)
        if isinstance(d.get("model"), dict):
            outside = sorted(k for k in d if k != "model")
            if outside:                     # e.g. `depth = 7` above [model]: would be ignored silently
                raise ValueError(f"key(s) {outside} outside the [model] table; move them into [model]")
            d = d["model"]
        d = dict(d)
        if "serial" in d:
            raise ModelError(_COMPOSITION_FILE)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names - set(_ALIASES))
        if unknown:
            raise ValueError(f"unknown model field(s) {unknown}; known: {sorted(names)}")
        d = _apply_aliases(d)
        if "d_in" not in d:
            raise ValueError("the model description has no d_in (the input dimension, the one required field)"
                             + ("; it is empty" if not d else ""))
        p = d.get("parameterisation")
        if isinstance(p, dict):
            d["parameterisation"] = _custom_param(p)
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> "Model":
        from .readfile import parse_json

        return cls.from_dict(parse_json(text, "model JSON"))

    @classmethod
    def load(cls, path) -> "Model":
        """A model file: ``.json`` or ``.toml`` (a table of the fields, optionally under ``[model]``, nothing
        outside it): a regular file of at most 1 MiB, nested at most 100 deep (:mod:`limits.readfile`)."""
        from .readfile import named, parse_json, parse_toml, read_text

        path = Path(path)
        where = named("model file", path)
        text = read_text(path, "model file")
        d = (parse_toml if path.suffix.lower() == ".toml" else parse_json)(text, where)
        try:
            return cls.from_dict(d)
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

    def save(self, path) -> Path:
        """Write ``path`` (.json or .toml) atomically."""
        from .results import atomic_write_text

        path = Path(path)
        if path.suffix.lower() == ".toml":
            return atomic_write_text(path, self.to_toml())
        return atomic_write_text(path, self.to_json() + "\n")

    def to_toml(self) -> str:
        lines = ["[model]"]
        for k, v in self.to_dict().items():
            if v is None:
                continue
            if isinstance(v, dict):
                continue
            lines.append(f"{k} = {json.dumps(v) if isinstance(v, (str, bool)) else repr(v)}"
                         .replace("= True", "= true").replace("= False", "= false"))
        p = self.to_dict()["parameterisation"]
        if isinstance(p, dict):
            lines.append("\n[model.parameterisation.custom]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in p["custom"].items()]
        return "\n".join(lines) + "\n"

    def with_(self, **changes) -> "Model":
        """A copy with ``changes`` (validated like the constructor; aliases accepted)."""
        _check_fields(changes, "Model.with_")
        return replace(self, **_apply_aliases(changes))

    def describe(self) -> str:
        v = self.variances()
        kind = "ResNet" if self.residual else "MLP"
        br = (f", branch ρ_eff = {self.branch:.6g} ({self.depth_scaling})" if self.residual else "")
        return (f"{kind}: d_in={self.d_in}, depth={self.depth} hidden blocks × {self.block_layers} layer(s) "
                f"({self.n_weight_layers} weight layers), d_out={self.d_out}, φ={self.activation_name}"
                f"{', post-activation' if self.post_activation else ''}{br}; "
                f"σ²_w in/hidden/out = {v['sigma_w2_in']:.6g}/{v['sigma_w2']:.6g}/{v['sigma_w2_out']:.6g}, "
                f"σ²_b = {v['sigma_b2_in']:.6g}/{v['sigma_b2']:.6g}/{v['sigma_b2_out']:.6g}; "
                f"parameterisation {self.param_name}, γ0 = {self.gamma0:.6g}, lr = {self.lr:.6g}")


def _alpha_branch(rho, L, alpha) -> float:
    """ρ_eff = ρ·L^{−α} computed as ρ·exp(−α log L); ``ValueError`` naming alpha when it overflows float64
    (``L ** -alpha`` would raise OverflowError)."""
    e = -alpha * math.log(L)
    v = rho * math.exp(e) if e < 709.0 else math.inf
    if not math.isfinite(v):
        raise ValueError(f"alpha = {alpha:g}: the branch multiplier rho·depth^(-alpha) = {rho:g}·{L}^({-alpha:g}) "
                         "overflows float64; use a larger alpha (or a smaller depth/rho)")
    return v


MAX_FINITE_LAYERS = 10**6     # hidden weight layers a finite network may have (each one is a Python object)


def _check_finite_size(m, N):
    """``ModelError`` naming depth/width before building a finite network with more than
    :data:`MAX_FINITE_LAYERS` hidden layers, or whose weights (8·(depth·block_layers·N² + (d_in + d_out)·N)
    bytes) exceed half the available memory."""
    layers = m.depth * m.block_layers
    if layers > MAX_FINITE_LAYERS:
        raise ModelError(f"Model.finite: depth = {m.depth} gives {layers} hidden weight layers, more than the "
                         f"{MAX_FINITE_LAYERS} a finite network is built with; use a smaller depth")
    from .memory import available_memory

    need = 8.0 * (layers * float(N) ** 2 + (m.d_in + m.d_out + 2 * layers) * float(N))
    avail = available_memory()
    if avail is not None and need > 0.5 * avail:
        raise ModelError(f"Model.finite: width = {N} with depth = {m.depth} needs about {need / 2**30:.3g} GiB of "
                         f"weights, more than half the available memory ({avail / 2**31:.3g} GiB); use a smaller "
                         "width or depth")


def _check_fields(keys, where):
    """``ValueError`` naming the keyword(s) that are neither a :class:`Model` field nor an alias."""
    names = {f.name for f in fields(Model)}
    unknown = sorted(set(keys) - names - set(_ALIASES))
    if unknown:
        raise ValueError(f"{where}: unknown model field(s) {unknown}; known: {sorted(names)}")


# legacy keyword names accepted by the builders and from_dict (documented aliases)
_ALIASES = {"blocks": "depth", "L": "depth", "n_blocks": "depth", "param": "parameterisation",
            "parametrization": "parameterisation", "parameterization": "parameterisation",
            "branch_scaling": "depth_scaling", "eta0": "lr"}


def _apply_aliases(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        key = _ALIASES.get(k, k)
        if key in out and k != key:
            raise ValueError(f"{k!r} is an alias of {key!r}: give only one of them")
        if key in d and k != key:
            raise ValueError(f"{k!r} is an alias of {key!r}: give only one of them")
        out[key] = v
    return out


def _custom_param(p: dict):
    from .params.parameterisation import LAYERS, Parameterisation

    c = p.get("custom", p)
    if not isinstance(c, dict):
        raise ValueError("parameterisation.custom must be a table of exponents")
    try:
        trip = {s: {lay: c[f"{s}_{lay}"] for lay in LAYERS} for s in "abc"}
    except KeyError as exc:
        raise ValueError(f"parameterisation.custom is missing {exc.args[0]!r}") from None
    extra = {k: c[k] for k in ("depth_alpha", "depth_gamma", "gamma_bar_L", "e_B", "pc_model") if k in c}
    return Parameterisation.make(trip["a"], trip["b"], trip["c"], c.get("d", 0),
                                 convention=c.get("convention", "variance"),
                                 algorithm=c.get("algorithm", "bp"), optimizer=c.get("optimizer", "sgd"),
                                 name=c.get("name", "custom"), **extra)


def _builder(residual, d_in, depth, kw):
    _check_fields(kw, "resnet" if residual else "mlp")
    kw = _apply_aliases(kw)
    if "depth" in kw:
        if depth is not None:
            raise ValueError("depth given twice (positionally and as a keyword or alias)")
        depth = kw.pop("depth")
    return Model(d_in=d_in, depth=1 if depth is None else depth, residual=residual, **kw)


def mlp(d_in, depth=None, **kw) -> Model:
    """Feed-forward model: read-in, ``depth`` hidden N×N layers, read-out (``depth`` counts the
    hidden N×N layers, so the network has depth + 2 weight layers; ``blocks=`` is an alias).
    Other keywords: the :class:`Model` fields (activation, sigma_w2, sigma_b2, sigma_*_in/out,
    d_out, parameterisation, gamma0, lr)."""
    if kw.get("residual"):
        raise ValueError("mlp(...) builds a feed-forward model; use resnet(...) for residual=True")
    kw.pop("residual", None)
    return _builder(False, d_in, depth, kw)


def resnet(d_in, depth=None, **kw) -> Model:
    """Residual model: read-in, ``depth`` residual blocks h^l = h^{l−1} + ρ_eff F(h^{l−1}), read-out
    (``depth`` counts residual blocks — seed 004's and NFD's L; ``blocks=`` is an alias). ``rho`` with
    ``depth_scaling`` ∈ {"none", "sqrt", "linear", "alpha"} sets ρ_eff; ``block_layers=2`` for
    two-layer blocks; ``post_activation=True`` for x^l = φ(x^{l−1} + ρF)."""
    if "residual" in kw and not kw.pop("residual"):
        raise ValueError("resnet(...) builds a residual model; use mlp(...) for residual=False")
    return _builder(True, d_in, depth, kw)


# theories that read a limits.mlp / limits.resnet Model only: (theory, what it is derived for, the layers that fit
# it, what else a composition lacks)
_SERIAL_SCOPE = {
    "limits.dmft": ("DMFT", "fully connected MLPs/ResNets in a mean-field parameterisation (MF/μP)",
                    ("Dense", "Activation", "Residual", "Identity"), "its layers are NTK-parameterised"),
    "limits.nfd": ("NFD", "infinitely deep fully connected pre-activation ResNets (branches √(T/L), unit variances)",
                   ("Dense", "Activation", "Residual", "Identity"), "its depth is finite"),
    "limits.kernels.response": ("the recursion of the response functions", "MLPs/ResNets (seed 004)",
                                ("Dense", "Activation", "Residual", "Identity"), None),
    "limits.kernels.fluctuations": ("the O(1/N) fluctuation recursion", "MLP/ResNet layers",
                                    ("Dense", "Activation", "Residual", "Identity"), None),
    "limits.kernels.kernel_fluctuations": ("the O(1/N) fluctuation recursion", "MLP/ResNet layers",
                                           ("Dense", "Activation", "Residual", "Identity"), None),
    "limits.kernels.nngp": ("the per-layer recursion limits.kernels.nngp", "MLPs/ResNets (for a composition use "
                            "limits.kernels.kernel(composition, X))", ("Dense", "Activation", "Residual", "Identity"), None),
}


def _layer_names(layers):
    """Names of every layer of a composition, branches included, in order of first appearance."""
    out = []
    for l in layers:
        out.append(type(l).__name__)
        branch = getattr(l, "branch", None)
        if branch is not None:
            out += _layer_names(branch.layers)
    return list(dict.fromkeys(out))


def refuse_serial(model, what=""):
    """:class:`ModelError` when ``model`` is a composition (``limits.serial``) but ``what`` treats only
    MLP/ResNet models — one line naming the theory, what it is derived for and what this composition has
    that does not fit (e.g. "DMFT is derived for fully connected MLPs/ResNets …; this composition has Conv")."""
    from .layers import Layer, as_serial

    if not (isinstance(model, Layer) or (isinstance(model, dict) and "serial" in model)):
        return
    key = next((k for k in _SERIAL_SCOPE if what.startswith(k)), None)
    if key is None:
        raise ModelError(f"{what or 'this function'} cannot treat a composition of layers (limits.serial): it treats "
                         "limits.mlp / limits.resnet models only")
    theory, scope, fits, lacks = _SERIAL_SCOPE[key]
    S = as_serial(model)
    names = _layer_names(S.layers) if S is not None else []
    extra = [n for n in names if n not in fits]
    has = (f"this composition has {', '.join(extra)}" if extra else
           (f"this composition of {', '.join(names)} fits but {lacks}" if lacks else
            "a composition is read by limits.kernels.kernel, finite_width, check and predict; pass the "
            "limits.mlp/resnet model it spells"))
    raise ModelError(f"{what} cannot treat a composition of layers (limits.serial): {theory} is derived for {scope}; "
                     f"{has}")


def as_model(model) -> Model:
    """A :class:`Model` from a Model, a dict, or a path to a .json/.toml model file."""
    if isinstance(model, Model):
        return model
    refuse_serial(model)
    if isinstance(model, dict):
        return Model.from_dict(model)
    if isinstance(model, (str, Path)):
        return Model.load(model)
    raise ValueError(f"model must be a limits.Model, a dict or a model file path, got {type(model).__name__}")


def model_or_arguments(model_path, given: dict, defaults: dict, option="--model", explicit=None):
    """Command lines: the Model of ``--model FILE``, refusing architecture options that were also set
    (``given`` holds their values). ``explicit``: the options given on the command line (``args._explicit``,
    set by ``limits.cli``) — any of them is a conflict, even at its default value; without it, values
    differing from the parser ``defaults`` are."""
    if explicit is not None:
        clash = sorted(k for k in given if k in explicit)
    else:
        clash = sorted(k for k, v in given.items() if k in defaults and not _is_default(v, defaults[k]))
    if clash:
        opts = ", ".join("--" + k.replace("_", "-") for k in clash)
        raise ValueError(f"{option}: the model file fixes the architecture; drop {opts} (or edit the model file)")
    return Model.load(model_path)


__all__ = ["Model", "ModelError", "mlp", "resnet", "as_model", "NAMED_PARAMS", "DEPTH_SCALINGS"]


def with_model(fn, view, what=None, record=True):
    """Wrap a theory entry point so it also takes ``model=`` (a :class:`Model`, dict or model file):
    ``view(model, kwargs)`` returns the keyword arguments the model fixes; passing any of them
    explicitly as well is an error (one source of truth). The old keyword signature is unchanged."""
    import functools
    import inspect

    sig = inspect.signature(fn)
    what = what or f"{fn.__module__}.{fn.__name__}"

    @functools.wraps(fn)
    def wrapper(*args, model=None, **kw):
        if model is None:
            return fn(*args, **kw)
        refuse_serial(model, what)
        m = as_model(model)
        try:
            bound = sig.bind_partial(*args, **kw)
        except TypeError as exc:
            raise ValueError(f"{what}: {exc}") from None
        fixed = {k: v for k, v in view(m, dict(bound.arguments)).items() if k in sig.parameters}
        clash = sorted(k for k in bound.arguments if k in fixed
                       and not _is_default(bound.arguments[k], sig.parameters[k].default))
        if clash:
            raise ValueError(f"{what}: pass either model= or {clash}, not both "
                             "(change the model with model.with_(...))")
        out = fn(**{**bound.arguments, **fixed})
        if record and isinstance(getattr(out, "params", None), dict) and isinstance(m.activation, str):
            # the result remembers its model and inputs, so limits.check can rebuild the finite networks
            extra = {"model": m.to_dict()}
            if bound.arguments.get("X") is not None:
                import numpy as np

                extra["X"] = np.asarray(bound.arguments["X"], dtype=np.float64)
            out = replace(out, params={**out.params, **extra})
        elif record and hasattr(out, "inputs") and getattr(out, "inputs", 0) is None and isinstance(m.activation, str):
            import numpy as np

            X = bound.arguments.get("X")
            out = replace(out, inputs={"model": m.to_dict(),
                                       **({} if X is None else {"X": np.asarray(X, dtype=np.float64)})})
        return out

    params = list(sig.parameters.values())
    extra = inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY, default=None)
    pos = next((i for i, p in enumerate(params) if p.kind == inspect.Parameter.VAR_KEYWORD), len(params))
    wrapper.__signature__ = sig.replace(parameters=params[:pos] + [extra] + params[pos:])
    wrapper.__doc__ = (fn.__doc__ or "") + (
        "\n\n    ``model=``: a :class:`limits.Model` (or dict / model file) instead of the architecture "
        "arguments (depth, activation, variances, residual, ρ).\n")
    return wrapper


def _is_default(value, default) -> bool:
    """An explicitly passed argument equal to the signature default is not a conflicting choice."""
    if value is default:
        return True
    try:
        return bool(value == default) and type(value) is type(default)
    except (TypeError, ValueError):
        return False


FEATURE_LEARNING_PARAMS = ("MF", "muP", "depth-muP")


def dmft_view(m: Model, given: dict) -> dict:
    """``limits.dmft.solve`` of a mean-field model: MF/μP/Depth-μP, N(0, 1) weights, no biases, one
    output, one-layer pre-activation blocks; residual blocks need ``depth_scaling="sqrt"``
    (β0/√depth, docs/theory/dmft.rst §5). The legacy ``depth`` (hidden layers) is ``m.depth + 1``; ``dt``
    defaults to the model's learning rate (GD step η0)."""
    what = "limits.dmft.solve"
    m.require(what, params=FEATURE_LEARNING_PARAMS, block_layers_one=True, pre_activation=True,
              no_bias=True, unit_variances=True)
    if m.d_out != 1:
        raise ModelError(f"{what} cannot treat this model: d_out = {m.d_out} (one output only)")
    kw = {"depth": m.n_hidden_layers, "activation": m.act, "gamma0": m.gamma0}
    if m.residual:
        if m.depth_scaling != "sqrt":
            raise ModelError(f"{what} cannot treat this model: residual DMFT needs depth_scaling='sqrt' "
                             f"(branch β0/√depth), got {m.depth_scaling!r}")
        kw["beta0"] = m.rho
    if given.get("dt") is None and (given.get("T") is None or given.get("steps") is None):
        kw["dt"] = m.lr
    X = given.get("X")
    if X is not None and getattr(X, "ndim", 0) == 2 and X.shape[1] != m.d_in:
        raise ValueError(f"X has {X.shape[1]} columns but the model has d_in = {m.d_in}")
    return kw


def nfd_view(what: str, depth_arg: str | None = None):
    """NFD view: the pre-activation ResNet of docs/theory/nfd.rst, h^l = h^{l−1} + √(T/L) W φ(h^{l−1})/√N,
    i.e. ``resnet(d_in, L, depth_scaling="sqrt", rho=√T)`` with unit weight variances, no biases;
    ``T = rho²``. ``depth_arg`` names the solver's depth argument (particles: ``L``)."""

    def view(m: Model, given: dict) -> dict:
        m.require(what, residual=True, block_layers_one=True, pre_activation=True, no_bias=True,
                  unit_variances=True)
        if m.depth_scaling != "sqrt":
            raise ModelError(f"{what} cannot treat this model: NFD branches are √(T/L) "
                             f"(depth_scaling='sqrt', rho=√T), got depth_scaling={m.depth_scaling!r}")
        kw = {"T": m.rho ** 2, "activation": m.act}
        if depth_arg is not None:
            kw[depth_arg] = m.depth
        X = given.get("X")
        if X is not None and getattr(X, "ndim", 0) == 2 and X.shape[1] != m.d_in:
            raise ValueError(f"X has {X.shape[1]} columns but the model has d_in = {m.d_in}")
        return kw

    return view
