"""``parameterise(factory, name, widths=…)``: a derived width parameterisation applied to any torch module
built by a width-taking factory (``factory(width) -> nn.Module``).

Shapes. The factory is instantiated at two widths n_a ≠ n_b; a dimension of a parameter *scales* when its
size is proportional to the width (size_b/size_a = n_b/n_a exactly) and is *fixed* when equal (anything
else is refused). With the fan-in/fan-out dimensions of ``Linear`` (out, in), ``Conv*d`` (out, in/groups,
k…), ``ConvTranspose*d`` (in, out/groups, k…), ``Embedding`` (vocabulary → dim: fan-in fixed) and
``MultiheadAttention`` projections, each tensor is classified as in Tensor Programs IV / mup base shapes:

    input-like   fan-in fixed, fan-out scales        → the table's "input" row
    hidden       fan-in and fan-out scale            → "hidden"
    output-like  fan-in scales, fan-out fixed        → "output"
    vector-like  one dimension, it scales (biases, LayerNorm gains) → "input" (finite fan-in)
    constant     no dimension scales                 → not width-scaled

Any other parameter with a scaling dimension (a raw 2-D ``Parameter`` of an unknown module: input- or
output-like?) is refused with the reason, unless ``roles={name: role}`` says what it is.

Table. ``limits.params.named(name, convention="std", optimizer=…, gauge=…)`` (TP4's abc-parameterisation:
W = N^{-a} w, w ~ N(0, σ² N^{-2b}), η = η0 N^{-c}). With r = n/n0 (the tensor's width relative to the base
width n0, default the smallest inference width), each tensor gets

    init    w ← w · r^{b_SP − b}     (the factory's own init is taken as SP's at every width: b_SP = 0 input, ½ else)
    forward W = r^{−a} w             (a torch parametrization, only where a ≠ 0; none in the default gauge "a0")
    lr      η = lr · r^{−c}          (one optimizer group per tensor; SGD, Adam, AdamW)

so the parameterised network equals the factory's at the base width (as mup). Attention: under a
feature-learning parameterisation (regime of ``limits.params.classify``) the query projection of every
``nn.MultiheadAttention`` is multiplied by r^{−1/2}, turning logits q·k/√d into ∝ q·k/d (TP5's μP
attention); SP/NTK keep 1/√d.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils import parametrize

ROLES = ("input", "hidden", "output", "vector", "constant")
_TABLE_ROW = {"input": "input", "hidden": "hidden", "output": "output", "vector": "input", "constant": None}
_SP_B = {"input": 0.0, "hidden": 0.5, "output": 0.5}
OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass(frozen=True)
class TensorRule:
    """How one parameter scales: its ``role``, which dims scale (``scaled``), the module type, the
    table exponents (a, b, c; 0 for constants) and ``query_scale`` (μP attention, 0 or −½)."""

    name: str
    module: str
    module_type: str
    shape: tuple
    scaled: tuple
    role: str
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    init_exponent: float = 0.0
    query_exponent: float = 0.0

    def multipliers(self, r: float) -> dict:
        """init factor, forward multiplier and lr multiplier at relative width r."""
        return {"init": r ** self.init_exponent, "mult": r ** (-self.a), "lr": r ** (-self.c)}


def _module_kind(mod, pname):
    """(fan_in dims, fan_out dims) of a parameter of a known module, or None."""
    if isinstance(mod, (nn.modules.conv._ConvTransposeNd,)):
        return ((0,), (1,)) if pname == "weight" else None
    if isinstance(mod, (nn.Linear, nn.modules.conv._ConvNd)):
        return ((1,), (0,)) if pname == "weight" else None
    if isinstance(mod, nn.Embedding):
        return ((0,), (1,)) if pname == "weight" else None
    if isinstance(mod, nn.MultiheadAttention) and pname in ("in_proj_weight", "q_proj_weight", "k_proj_weight",
                                                            "v_proj_weight"):
        return ((1,), (0,))
    return None


def _scaled_dims(name, sa, sb, na, nb):
    out = []
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x == y:
            continue
        if x * nb == y * na:
            out.append(i)
            continue
        raise ValueError(f"parameterise: tensor {name!r} dimension {i} goes from {x} to {y} between widths "
                         f"{na} and {nb} — neither fixed nor proportional to the width; cannot classify it")
    return tuple(out)


def _owner(model, pname):
    parts = pname.split(".")
    if len(parts) >= 3 and parts[-3] == "parametrizations" and parts[-1] == "original":
        mod_name, attr = ".".join(parts[:-3]), parts[-2]       # a torch parametrization's original tensor
        return mod_name, (model.get_submodule(mod_name) if mod_name else model), attr
    mod_name, _, attr = pname.rpartition(".")
    return mod_name, (model.get_submodule(mod_name) if mod_name else model), attr


def classify(factory, widths, roles=None) -> tuple:
    """:class:`TensorRule` (role only, exponents 0) for every parameter of ``factory(width)`` from two
    instantiations at the two smallest ``widths`` (module docstring)."""
    ws = sorted({int(w) for w in widths})
    if len(ws) < 2 or ws[0] < 1:
        raise ValueError(f"widths: need at least two distinct positive widths to infer shapes, got {widths!r}")
    na, nb = ws[0], ws[1]
    roles = dict(roles or {})
    bad = [r for r in roles.values() if r not in ROLES]
    if bad:
        raise ValueError(f"roles: unknown role(s) {bad}; known: {', '.join(ROLES)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ma, mb = _build(factory, na), _build(factory, nb)
    pa, pb = dict(ma.named_parameters()), dict(mb.named_parameters())
    if list(pa) != list(pb):
        diff = sorted(set(pa) ^ set(pb))
        raise ValueError(f"parameterise: the factory builds different parameters at widths {na} and {nb} "
                         f"({diff[:3]}…); the architecture may change only in its sizes")
    unknown = sorted(set(roles) - set(pa))
    if unknown:
        raise ValueError(f"roles: no parameter named {unknown}; parameters: {list(pa)[:8]}…")
    seen = {}
    for full, p in ma.named_parameters(remove_duplicate=False):
        if id(p) in seen and seen[id(p)] != full:
            raise ValueError(f"parameterise: tensor {seen[id(p)]!r} is shared with {full!r} (tied weights); a "
                             "tied tensor has two roles and cannot be classified")
        seen[id(p)] = full
    rules = []
    for full, p in pa.items():
        sa, sb = tuple(p.shape), tuple(pb[full].shape)
        if len(sa) != len(sb):
            raise ValueError(f"parameterise: tensor {full!r} changes rank between widths {na} and {nb}")
        scaled = _scaled_dims(full, sa, sb, na, nb)
        mod_name, mod, attr = _owner(ma, full)
        kind = _module_kind(mod, attr)
        if full in roles:
            role = roles[full]
        elif not scaled:
            role = "constant"
        elif len(sa) == 1 or (isinstance(mod, nn.MultiheadAttention) and attr in ("bias_k", "bias_v")):
            role = "vector"
        elif kind is not None:
            fin, fout = kind
            s_in = any(d in scaled for d in fin)
            s_out = any(d in scaled for d in fout)
            extra = [d for d in scaled if d not in fin + fout]
            if extra:
                raise ValueError(f"parameterise: tensor {full!r} ({type(mod).__name__}) scales in dimension "
                                 f"{extra[0]}, not a fan-in/fan-out dimension; cannot classify it")
            role = {(False, True): "input", (True, True): "hidden", (True, False): "output"}[(s_in, s_out)]
        else:
            raise ValueError(f"parameterise: cannot classify tensor {full!r} of shape {sa} "
                             f"({type(mod).__name__}): it scales in dimension(s) {list(scaled)} but its fan-in "
                             "is unknown (input-like or output-like?); pass roles={" + repr(full) + ": 'input'|"
                             "'hidden'|'output'|'vector'|'constant'}")
        rules.append(TensorRule(full, mod_name, type(mod).__name__, sa, scaled, role))
    return tuple(rules), na


def _build(factory, width):
    m = factory(width)
    if isinstance(m, tuple) and m and isinstance(m[0], nn.Module):
        m = m[0]
    if not isinstance(m, nn.Module):
        raise ValueError(f"factory({width}) must return a torch.nn.Module, got {type(m).__name__}")
    return m


build_module = _build          # public within the package


def resolve_table(parameterisation, optimizer="adam", gauge="a0"):
    """The ``limits.params`` parameterisation (std convention) for a name or object, for this optimizer."""
    from .. import params
    from ..model import parameterisation_name as _param_name

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    opt = "sgd" if optimizer == "sgd" else "adam"
    p = _param_name(parameterisation)
    if isinstance(p, str):
        return params.named(p, convention="std", optimizer=opt, gauge=gauge)
    if p.convention != "std":
        p = p.to_std()
    return p.gauge(gauge) if gauge else p


def _exp(p, row, sym):
    v = p.exponent(row, sym)
    if getattr(v, "free_symbols", None):
        raise ValueError(f"parameterisation: exponent {sym}_{row} = {v} has free symbols; substitute numbers first")
    return float(v)


class _Scale(nn.Module):
    """Parametrization W = s · w, with rows ``[0, rows)`` (the query block) further multiplied by ``q``."""

    def __init__(self, s, q=1.0, rows=None):
        super().__init__()
        self.s, self.q, self.rows = float(s), float(q), rows

    def forward(self, w):
        if self.rows is None:
            return w * self.s
        return torch.cat([w[:self.rows] * (self.s * self.q), w[self.rows:] * self.s], dim=0)


@dataclass(frozen=True)
class Parameterised:
    """A factory with a parameterisation applied: ``P(width, seed=None)`` builds the module (init scaled,
    multipliers registered), ``P.optimizer(module, lr=…)`` its per-tensor learning rates."""

    factory: object
    name: str
    optimizer_name: str
    gauge: str | None
    base_width: int
    rules: tuple
    table: object
    feature_learning: bool

    def __call__(self, width, seed=None):
        width = int(width)
        if seed is not None:
            torch.manual_seed(int(seed))
        m = _build(self.factory, width)
        r = width / self.base_width
        params = dict(m.named_parameters())
        if list(params) != [q.name for q in self.rules]:
            raise ValueError(f"factory({width}) builds different parameters than at the inference widths")
        lr_mult = []
        with torch.no_grad():
            for q in self.rules:
                p = params[q.name]
                _check_scaling(q, tuple(p.shape), r)
                mlt = q.multipliers(r)
                if mlt["init"] != 1.0:
                    p.mul_(mlt["init"])
                lr_mult.append((q.name, p, mlt["lr"]))
        for q in self.rules:
            mod = m.get_submodule(q.module) if q.module else m
            attr = q.name.rpartition(".")[2]
            s = q.multipliers(r)["mult"]
            if q.query_exponent:
                parametrize.register_parametrization(
                    mod, attr, _Scale(s, r ** q.query_exponent, rows=mod.embed_dim), unsafe=True)
            elif s != 1.0:
                parametrize.register_parametrization(mod, attr, _Scale(s), unsafe=True)
        object.__setattr__(m, "limits_lr_multipliers", tuple(lr_mult))
        return m

    def param_groups(self, module, lr) -> list:
        """One group per tensor: ``lr · r^{−c}`` (r = width/base width)."""
        mults = getattr(module, "limits_lr_multipliers", None)
        if mults is None:
            raise ValueError("param_groups: module was not built by this Parameterised (call P(width) first)")
        return [{"params": [p], "lr": float(lr) * m, "name": n} for n, p, m in mults]

    def optimizer(self, module, lr, **kw):
        """``torch.optim.{SGD, Adam, AdamW}`` (the optimizer the table was derived for) over :meth:`param_groups`."""
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[self.optimizer_name]
        return cls(self.param_groups(module, lr), lr=float(lr), **kw)

    def to_markdown(self, width=None) -> str:
        """Per-tensor table: role, scaling dims, exponents (a, b, c) and the multipliers at ``width``."""
        w = self.base_width if width is None else int(width)
        r = w / self.base_width
        rows = [f"**{self.name}** ({self.optimizer_name}, gauge {self.gauge or 'as derived'}), base width "
                f"{self.base_width}; multipliers at width {w}\n",
                "| tensor | module | shape (base) | role | a | b | c | init × | forward × | lr × |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for q in self.rules:
            m = q.multipliers(r)
            fwd = f"{m['mult']:.4g}" + (f" (query ×{r ** q.query_exponent:.4g})" if q.query_exponent else "")
            rows.append(f"| {q.name} | {q.module_type} | {tuple(q.shape)} | {q.role} | {q.a:g} | {q.b:g} | {q.c:g} "
                        f"| {m['init']:.4g} | {fwd} | {m['lr']:.4g} |")
        return "\n".join(rows) + "\n"


def _check_scaling(q, shape, r):
    for i, (s0, s) in enumerate(zip(q.shape, shape)):
        want = s0 * r if i in q.scaled else s0
        if not math.isclose(s, want, rel_tol=0, abs_tol=1e-9):
            raise ValueError(f"tensor {q.name!r}: dimension {i} is {s} at this width, expected {want:g} "
                             f"({'∝ width' if i in q.scaled else 'fixed'})")


def parameterise(factory, parameterisation, widths=(64, 128), optimizer="adam", gauge="a0", base_width=None,
                 roles=None, depths=None, base_depth=None):
    """Apply ``parameterisation`` (a name: SP, NTK, MF, muP, … or a ``limits.params.Parameterisation``) to
    the modules built by ``factory(width)`` (module docstring). ``optimizer``: "sgd", "adam" or "adamw"
    (the learning-rate exponents depend on it); ``gauge``: "a0" (no forward multipliers, default) or None
    (the solver's own gauge, multipliers as parametrizations); ``roles``: {parameter name: role} overrides.
    ``depths``: the factory is ``factory(width, depth)`` of a residual network — a
    :class:`limits.torch.depth.DepthParameterised` (``"depth-muP"``: branch multiplier and block rates of the
    table's depth exponents; a width-only table such as ``"muP"`` applies none)."""
    if depths is not None:
        from .depth import parameterise_depth

        return parameterise_depth(factory, parameterisation, widths=widths, depths=depths, optimizer=optimizer,
                                  gauge=gauge, base_width=base_width, base_depth=base_depth, roles=roles)
    if not callable(factory):
        raise ValueError(f"factory must be a callable width -> nn.Module, got {type(factory).__name__}")
    if gauge not in ("a0", None):
        raise ValueError(f"gauge must be 'a0' or None, got {gauge!r}")
    p = resolve_table(parameterisation, optimizer, gauge)
    base_rules, na = classify(factory, widths, roles)
    n0 = na if base_width is None else int(base_width)
    from ..params import classify as classify_p

    fl = classify_p(p).regime == "feature-learning"
    rules = []
    for q in base_rules:
        row = _TABLE_ROW[q.role]
        if row is None:
            rules.append(q)
            continue
        a, b, c = (_exp(p, row, s) for s in "abc")
        qe = -0.5 if (fl and q.module_type == "MultiheadAttention"
                      and q.name.rpartition(".")[2] in ("in_proj_weight", "in_proj_bias")) else 0.0
        if fl and q.module_type == "MultiheadAttention" and q.name.endswith("q_proj_weight"):
            raise ValueError(f"parameterise: {q.name!r}: separate q/k/v projections are not supported for μP "
                             "attention; use the packed in_proj_weight (kdim = vdim = embed_dim)")
        rules.append(TensorRule(q.name, q.module, q.module_type, q.shape, q.scaled, q.role, a, b, c,
                                init_exponent=_SP_B[row] - b, query_exponent=qe))
    return Parameterised(factory, getattr(p, "name", str(parameterisation)), optimizer, gauge, n0, tuple(rules),
                         p, fl)


__all__ = ["parameterise", "Parameterised", "TensorRule", "classify", "resolve_table", "ROLES"]
