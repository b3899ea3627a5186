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

    init    w ← w · r^{b_SP − b}     (the factory's own init is taken as SP's at every width: b_SP = 0 input, ½ else;
                                     checked per weight at the two widths, :mod:`limits.torch.initscale`)
    forward W = r^{−a} w             (a torch parametrization, only where a ≠ 0; none in the default gauge "a0")
    lr      η = lr · r^{−c}          (one optimizer group per tensor; SGD, Adam, AdamW)

so the parameterised network equals the factory's at the base width (as mup).

Graph (:mod:`limits.torch.graph`, traced on ``example_inputs`` or a guess). Attention: every
``nn.MultiheadAttention``, ``F.scaled_dot_product_attention`` and explicit softmax(q·kᵀ·s) is located with the
Linear rows that produce its query; under a feature-learning table (regime of ``limits.params.classify``) those
rows are multiplied by r^{q} so that logits ∝ q·k/d_h when the head dimension scales (q = −½ for 1/√d_h) and
keep their scale when heads ∝ width (q = 0); an attention that cannot be rewritten is refused by name; SP/NTK
keep the module's scale. Ties: a read-out sharing the token embedding's tensor follows mup's shared read-out
(the embedding's init and lr, a forward multiplier r^{−a_r} on the read-out; :mod:`limits.torch.structure`);
other ties between different roles are refused with the reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

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
    table exponents (a, b, c; 0 for constants) and ``query_exponent`` (μP attention: rows ``query_rows`` =
    (start, stop) of dimension 0 are multiplied by r^{query_exponent})."""

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
    query_rows: tuple | None = None

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
    """(:class:`TensorRule` (role only, exponents 0) for every parameter of ``factory(width)``, the smallest
    width) from two instantiations at the two smallest ``widths`` (module docstring)."""
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
    return _classify(ma, mb, na, nb, roles), na


def _classify(ma, mb, na, nb, roles):
    from .graph import find_ties
    from .structure import tie_roles

    pa, pb = dict(ma.named_parameters()), dict(mb.named_parameters())
    if list(pa) != list(pb):
        diff = sorted(set(pa) ^ set(pb))
        raise ValueError(f"parameterise: the factory builds different parameters at widths {na} and {nb} "
                         f"({diff[:3]}…); the architecture may change only in its sizes")
    unknown = sorted(set(roles) - set(pa))
    if unknown:
        raise ValueError(f"roles: no parameter named {unknown}; parameters: {list(pa)[:8]}…")
    forced = tie_roles(find_ties(ma), set(pa))
    rules = []
    for full, p in pa.items():
        sa, sb = tuple(p.shape), tuple(pb[full].shape)
        if len(sa) != len(sb):
            raise ValueError(f"parameterise: tensor {full!r} changes rank between widths {na} and {nb}")
        scaled = _scaled_dims(full, sa, sb, na, nb)
        mod_name, mod, attr = _owner(ma, full)
        kind = _module_kind(mod, attr)
        if full in forced and full not in roles:         # a tied read-out's tensor: the embedding's row
            role, mod_name, mtype = forced[full]
            rules.append(TensorRule(full, mod_name, mtype, sa, scaled, role))
            continue
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
    return tuple(rules)


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
    """Parametrization W = s · w, with rows ``[start, stop)`` of dimension 0 (a query block) further
    multiplied by ``q``; ``inverse`` maps an effective W back to w (not torch's ``right_inverse``, which would
    make registration keep the effective weight instead of the stored one)."""

    def __init__(self, s, q=1.0, rows=None):
        super().__init__()
        self.s, self.q, self.rows = float(s), float(q), rows

    def _factor(self, w):
        if self.rows is None:
            return self.s
        f = torch.full((w.shape[0],) + (1,) * (w.dim() - 1), self.s, dtype=w.dtype, device=w.device)
        f[self.rows[0]:self.rows[1]] *= self.q
        return f

    def forward(self, w):
        return w * self._factor(w)

    def inverse(self, W):
        return W / self._factor(W)


@dataclass(frozen=True)
class Parameterised:
    """A factory with a parameterisation applied: ``P(width, seed=None)`` builds the module (init scaled,
    multipliers registered), ``P.optimizer(module, lr=…)`` its per-tensor learning rates (and weight decay),
    ``P.export_state_dict(module)`` / ``P.import_state_dict(module, sd)`` plain checkpoints; ``attention``:
    the traced attention sites (:class:`limits.torch.graph.AttentionScaling`), ``readouts``: tied read-outs."""

    factory: object
    name: str
    optimizer_name: str
    gauge: str | None
    base_width: int
    rules: tuple
    table: object
    feature_learning: bool
    attention: tuple = ()
    readouts: tuple = ()
    traced: str = ""

    def __repr__(self):
        from .reprs import parameterised_repr          # a few lines, not every rule (limits.torch.reprs)

        return parameterised_repr(self)

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
                rows = _rows_at(q, tuple(params[q.name].shape))
                parametrize.register_parametrization(
                    mod, attr, _Scale(s, r ** q.query_exponent, rows=rows), unsafe=True)
            elif s != 1.0:
                parametrize.register_parametrization(mod, attr, _Scale(s), unsafe=True)
        for t in self.readouts:                    # a tied read-out: its own multiplier on the shared tensor
            if t.exponent:
                parametrize.register_parametrization(m.get_submodule(t.module), t.name.rpartition(".")[2],
                                                     _Scale(r ** -t.exponent), unsafe=True)
        object.__setattr__(m, "limits_lr_multipliers", tuple(lr_mult))
        object.__setattr__(m, "limits_width", width)
        return m

    def param_groups(self, module, lr, weight_decay=0.0, no_decay=()) -> list:
        """One group per tensor: lr · m (m = r^{−c}, r = width/base width, kept as ``lr_mult``) and, with
        ``weight_decay``, wd/m so that lr·wd is the same for every tensor (:mod:`limits.torch.optim`);
        ``no_decay``: parameter names without decay. Parameters are taken from ``module`` as it is now, by name
        (DDP, torch.compile and FSDP2 wrappers: build the optimizer after wrapping)."""
        from .graph import unwrap
        from .optim import current_parameters, param_groups

        mults = getattr(unwrap(module), "limits_lr_multipliers", None)
        if mults is None:
            raise ValueError("param_groups: module was not built by this Parameterised (call P(width) first)")
        return param_groups(mults, lr, weight_decay, no_decay, self.optimizer_name, current_parameters(module))

    def optimizer(self, module, lr, weight_decay=None, no_decay=(), **kw):
        """``torch.optim.{SGD, Adam, AdamW}`` (the optimizer the table was derived for) over :meth:`param_groups`;
        ``weight_decay`` defaults to torch's (AdamW 0.01, else 0), width-scaled as in :meth:`param_groups`."""
        from .optim import build

        if weight_decay is None:
            weight_decay = 0.01 if self.optimizer_name == "adamw" else 0.0
        return build(self.optimizer_name, self.param_groups(module, lr, weight_decay, no_decay), lr, **kw)

    def export_state_dict(self, module) -> dict:
        """The plain state dict of ``factory(width)`` computing what ``module`` (from ``self(width)``) computes:
        every multiplier folded into the weights (:mod:`limits.torch.checkpoint`)."""
        from .checkpoint import export_state_dict

        return export_state_dict(self, module, _build)

    def import_state_dict(self, module, state_dict):
        """Load a plain checkpoint of ``factory(width)`` into ``module`` (from ``self(width)``) so that it computes
        the same function; keys and shapes must be exactly the factory's (:mod:`limits.torch.checkpoint`)."""
        from .checkpoint import import_state_dict

        return import_state_dict(self, module, state_dict, _build)

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
            fwd = f"{m['mult']:.4g}" + (f" (query rows {q.query_rows} ×{r ** q.query_exponent:.4g})"
                                        if q.query_exponent else "")
            rows.append(f"| {q.name} | {q.module_type} | {tuple(q.shape)} | {q.role} | {q.a:g} | {q.b:g} | {q.c:g} "
                        f"| {m['init']:.4g} | {fwd} | {m['lr']:.4g} |")
        for t in self.readouts:
            rows.append(f"| {t.name} | Linear (tied to {t.storage}) | | read-out use | | | | (shared) "
                        f"| {r ** -t.exponent:.4g} | (shared) |")
        return "\n".join(rows) + "\n" + self._attention_markdown(r)

    def _attention_markdown(self, r) -> str:
        if not self.attention:
            return f"\nNo attention in the traced forward ({self.traced or 'not traced'}).\n"
        rows = [f"\nAttention (traced by {self.traced}):\n",
                "| site | kind | heads | head dim | scale | query projection | query × |", "|---|---|---|---|---|---|---|"]
        qe = {q.name: q.query_exponent for q in self.rules}
        for a in self.attention:
            s = a.site
            proj = f"{s.query.param} rows [{s.query.start}, {s.query.stop})" if s.query else f"— ({s.reason})"
            e = qe.get(s.query.param, 0.0) if s.query else 0.0
            rows.append(f"| {s.name} | {s.kind} | {s.heads} ({a.heads}) | {s.head_dim} ({a.head_dim}) | {s.scale_expr} "
                        f"| {proj} | {r ** e:.4g} |")
        return "\n".join(rows) + "\n"


def _rows_at(q, shape):
    """The query rows of rule ``q`` (given at its classification shape) at a tensor of ``shape``."""
    if 0 not in q.scaled:
        return q.query_rows
    return tuple(int(round(x * shape[0] / q.shape[0])) for x in q.query_rows)


def _check_scaling(q, shape, r):
    for i, (s0, s) in enumerate(zip(q.shape, shape)):
        want = s0 * r if i in q.scaled else s0
        if not math.isclose(s, want, rel_tol=0, abs_tol=1e-9):
            raise ValueError(f"tensor {q.name!r}: dimension {i} is {s} at this width, expected {want:g} "
                             f"({'∝ width' if i in q.scaled else 'fixed'})")


def parameterise(factory, parameterisation, widths=(64, 128), optimizer="adam", gauge="a0", base_width=None,
                 roles=None, example_inputs=None, check_init=True) -> Parameterised:
    """Apply ``parameterisation`` (a name: SP, NTK, MF, muP, … or a ``limits.params.Parameterisation``) to
    the modules built by ``factory(width)`` (module docstring). ``optimizer``: "sgd", "adam" or "adamw"
    (the learning-rate exponents depend on it); ``gauge``: "a0" (no forward multipliers, default) or None
    (the solver's own gauge, multipliers as parametrizations); ``roles``: {parameter name: role} overrides;
    ``example_inputs``: a tuple of inputs for tracing the forward (default: guessed from the first layer);
    ``check_init``: refuse a factory whose own init is not SP (:mod:`limits.torch.initscale`) when the table
    changes anything."""
    if not callable(factory):
        raise ValueError(f"factory must be a callable width -> nn.Module, got {type(factory).__name__}")
    if gauge not in ("a0", None):
        raise ValueError(f"gauge must be 'a0' or None, got {gauge!r}")
    p = resolve_table(parameterisation, optimizer, gauge)
    ws = sorted({int(w) for w in widths})
    base_rules, na = classify(factory, ws, roles)
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
        rules.append(TensorRule(q.name, q.module, q.module_type, q.shape, q.scaled, q.role, a, b, c,
                                init_exponent=_SP_B[row] - b))
    identity = all(q.init_exponent == 0 and q.a == 0 and q.c == 0 for q in rules)
    if check_init and not identity:
        from .initscale import check_sp_init

        check_sp_init(factory, base_rules, ws[0], ws[1], _build)
    graph_info = _graph(factory, ws[0], ws[1], example_inputs, fl)
    rules, attention, readouts = _structures(rules, graph_info, p, optimizer, fl, identity)
    return Parameterised(factory, getattr(p, "name", str(parameterisation)), optimizer, gauge, n0, tuple(rules),
                         p, fl, attention, readouts, graph_info[3])


def _graph(factory, na, nb, example_inputs, fl):
    """(attention scalings, ties, {read-out: fold}, how traced) from the forwards at widths na and nb."""
    from .graph import analyse, example_inputs as guess, find_ties, width_scaling

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ma, mb = _build(factory, na), _build(factory, nb)
    try:
        xa = guess(ma) if example_inputs is None else example_inputs
        xb = guess(mb) if example_inputs is None else example_inputs
        ga, gb = analyse(ma, xa), analyse(mb, xb)
    except Exception as exc:           # noqa: BLE001 — reported (and refused under a feature-learning table)
        if example_inputs is not None:
            _plain_forward(ma, example_inputs)    # the forward failing on the user's own inputs: the user's error
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if fl:
            raise ValueError(f"parameterise: cannot trace factory({na})'s forward to find its attention ({why}); "
                             "pass example_inputs=(…) — a feature-learning parameterisation must set every "
                             "attention's logit scale") from None
        return (), tuple(find_ties(ma)), {}, f"not traced ({why})"
    return width_scaling(ga.sites, gb.sites, na, nb), ga.ties, ga.readout_inputs, ga.method


def _plain_forward(module, inputs):
    """``module(*inputs)`` without autograd (raises what the module's forward raises)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        module(*(inputs if isinstance(inputs, (tuple, list)) else (inputs,)))


def _structures(rules, graph_info, p, optimizer, fl, identity):
    """Rules with the μP attention scales applied, the attention scalings and the tied read-outs."""
    from .structure import attention_rules, tied_readouts

    scalings, ties, folds, _ = graph_info
    functional = [t for t in ties if t.kind == "functional"]
    if functional and not identity:
        raise ValueError(f"parameterise: {functional[0].detail}; a read-out sharing the embedding must be an "
                         "nn.Linear whose weight is the embedding's (lm_head.weight = wte.weight) to get its own "
                         "multiplier")
    queries = attention_rules(scalings, rules, fl)
    rules = [replace(q, query_exponent=queries[q.name][0], query_rows=queries[q.name][1]) if q.name in queries
             else q for q in rules]
    return rules, tuple(scalings), tied_readouts(ties, rules, p, optimizer, folds, identity)


__all__ = ["parameterise", "Parameterised", "TensorRule", "classify", "resolve_table", "ROLES"]
