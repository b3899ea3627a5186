"""``parameterise(factory, name, widths=…)``: a derived width parameterisation applied to any torch module
built by a width-taking factory (``factory(width) -> nn.Module``).

Shapes. The factory's sizes are read at every width asked (with 2× and 4× the largest when fewer than three are
given, built on the meta device: :func:`probe_sizes`), once: a dimension of a parameter is *fixed* when its size
is the same at all of them and *scales* when it is proportional to the width up to rounding — size/N within
±25 % of one ratio k at every width, growing (SwiGLU's 16·⌈8N/48⌉, heads·⌈N/heads⌉); anything else is refused.
A module built later at another width is accepted when its sizes are within that band of k·N. With the
fan-in/fan-out dimensions of ``Linear`` (out, in), ``Conv*d`` (out, in/groups,
k…), ``ConvTranspose*d`` (in, out/groups, k…), ``Embedding`` (vocabulary → dim: fan-in fixed) and
``MultiheadAttention`` projections, each tensor is classified as in Tensor Programs IV / mup base shapes:

    input-like   fan-in fixed, fan-out scales        → the table's "input" row
    hidden       fan-in and fan-out scale            → "hidden"
    output-like  fan-in scales, fan-out fixed        → "output"
    vector-like  one dimension, it scales (biases, LayerNorm gains) → "input" (finite fan-in)
    constant     no dimension scales                 → not width-scaled

A parameter outside these modules (``cls_token``, ``pos_embed``, register tokens, learned scalars, gains on the
root module) gets its role from its use in the traced forward (:func:`graph_role`): contracted with the
activations — hidden when two dimensions scale, else input-like when the product is width-sized, output-like
when not; looked up (an embedding table) — input-like; added, multiplied or concatenated elementwise —
input-like (2-D and more: tokens, position embeddings) or vector-like (1-D: gains). What the graph cannot decide
is refused with the reason, unless ``roles={name: role}`` (``--role NAME=ROLE``) says what it is.

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
other ties between different roles are refused with the reason; a tied tensor initialised as the read-out
(``wte.weight = lm_head.weight``: ∝ N^−½) is rescaled from that init.

Multipliers (:func:`_compensate`, :mod:`limits.torch.offsets`). A width-dependent constant in the factory's own
forward (``self.output(h) * (1/r)``, ``h / r`` before a Linear, a scale on a residual branch) is folded into the
init and rate of the one weight between it and the next non-linearity (of several, the one read last; a tied
read-out's own multiplier for a tied read-out; a module's bias with it), so that the effective network is the
table's; a multiplier no weight can absorb (between a non-linearity and a residual sum) is refused by name. The
same offsets give :func:`limits.torch.coord_check` its predictions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn.utils import parametrize

from .roles import ROLES

_TABLE_ROW = {"input": "input", "hidden": "hidden", "output": "output", "vector": "input", "constant": None}
_SP_B = {"input": 0.0, "hidden": 0.5, "output": 0.5}
OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass(frozen=True)
class TensorRule:
    """How one parameter scales: its ``role``, which dims scale (``scaled``), the module type, the
    table exponents (a, b, c; 0 for constants) and ``query_exponent`` (μP attention: rows ``query_rows`` =
    (start, stop) of dimension 0 are multiplied by r^{query_exponent}); ``base_init``: the factory's own init
    exponent when it is not SP's for the role (a tied tensor initialised as the read-out); ``size_ratio``: per
    scaled dimension, its size over the width (∝ width up to rounding); ``gauge``: the power of r folded into init
    and rate to compensate a width-dependent multiplier of the factory's forward (:mod:`limits.torch.offsets`)."""

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
    base_init: float | None = None
    size_ratio: tuple = ()
    gauge: float = 0.0

    def multipliers(self, r: float) -> dict:
        """init factor, forward multiplier and lr multiplier at relative width r."""
        return {"init": r ** self.init_exponent, "mult": r ** (-self.a), "lr": r ** (-self.c)}


def _module_kind(mod, pname):
    """(fan_in dims, fan_out dims) of a parameter of a known module, or None (:func:`limits.torch.graph.module_kind`)."""
    from .graph import module_kind

    return module_kind(mod, pname)


ROUNDING = 0.25          # a size ∝ width "up to rounding": within ±25 % of k·N at every width probed


def _scaled_dims(name, shapes):
    """(scaled dims, their size/width ratios k) of a tensor from its ``shapes`` {width: shape}: a dimension is
    fixed when its size is the same at every width, scales when size/width stays within ±``ROUNDING`` of its
    geometric mean k at every width (SwiGLU's 16·⌈8N/48⌉, heads·⌈N/heads⌉) and grows with the width; anything
    else is refused."""
    ws = sorted(shapes)
    out, ks = [], []
    for i in range(len(shapes[ws[0]])):
        vals = [shapes[w][i] for w in ws]
        if len(set(vals)) == 1:
            continue
        ratios = [v / w for v, w in zip(vals, ws)]
        k = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if min(ratios) > 0 else 0.0
        ok = k > 0 and all(k / (1 + ROUNDING) <= x <= k * (1 + ROUNDING) for x in ratios) and all(
            b > a for a, b in zip(vals, vals[1:]))
        if not ok:
            raise ValueError(f"parameterise: tensor {name!r} dimension {i} is {vals} at widths {ws} — neither fixed "
                             f"nor proportional to the width within rounding (±{ROUNDING:.0%}); cannot classify it")
        out.append(i)
        ks.append(k)
    return tuple(out), tuple(ks)


def probe_widths(widths) -> list:
    """The widths whose sizes decide what scales: those asked, with 2× and 4× the largest when fewer than 3."""
    ws = sorted({int(w) for w in widths})
    return ws if len(ws) >= 3 else ws + [2 * ws[-1], 4 * ws[-1]]


def probe_sizes(factory, widths) -> dict:
    """{width: {parameter: shape}} of ``factory`` at :func:`probe_widths` (built on the meta device where the
    factory allows it: no memory, no init; a probe width beyond those asked that cannot be built is skipped)."""
    asked = sorted({int(w) for w in widths})
    out = {}
    for w in probe_widths(widths):
        try:
            try:
                with torch.device("meta"), torch.random.fork_rng(devices=[]):
                    m = _build(factory, w)
            except Exception:            # noqa: BLE001 — a factory that needs real tensors: build it for real
                with torch.random.fork_rng(devices=[]):
                    m = _build(factory, w)
        except Exception:                # noqa: BLE001
            if w in asked:
                raise
            continue
        out[w] = {n: tuple(p.shape) for n, p in m.named_parameters()}
    return out


def _owner(model, pname):
    parts = pname.split(".")
    if len(parts) >= 3 and parts[-3] == "parametrizations" and parts[-1] == "original":
        mod_name, attr = ".".join(parts[:-3]), parts[-2]       # a torch parametrization's original tensor
        return mod_name, (model.get_submodule(mod_name) if mod_name else model), attr
    mod_name, _, attr = pname.rpartition(".")
    return mod_name, (model.get_submodule(mod_name) if mod_name else model), attr


def classify(factory, widths, roles=None, inputs=None) -> tuple:
    """(:class:`TensorRule` (role only, exponents 0) for every parameter of ``factory(width)``, the smallest
    width) from instantiations at the two smallest ``widths``, the sizes at every width probed
    (:func:`probe_sizes`) and, for parameters outside Linear/Conv/Embedding/attention modules, their use in the
    forward traced on ``inputs`` (module docstring)."""
    ws = sorted({int(w) for w in widths})
    if len(ws) < 2 or ws[0] < 1:
        raise ValueError(f"widths: need at least two distinct positive widths to infer shapes, got {widths!r}")
    na, nb = ws[0], ws[1]
    roles = _check_roles(roles)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ma, mb = _build(factory, na), _build(factory, nb)
    return _classify(ma, mb, na, nb, roles, probe_sizes(factory, ws), lambda: _traces(ma, mb, inputs)), na


def _check_roles(roles):
    roles = dict(roles or {})
    bad = [r for r in roles.values() if r not in ROLES]
    if bad:
        raise ValueError(f"roles: unknown role(s) {bad}; known: {', '.join(ROLES)}")
    return roles


def _traces(ma, mb, inputs):
    """The traced forwards of ``ma`` and ``mb`` on ``inputs`` (guessed when None), or None when untraceable."""
    from .graph import example_inputs as guess, trace

    try:
        with torch.random.fork_rng(devices=[]):
            xa = guess(ma) if inputs is None else inputs
            xb = guess(mb) if inputs is None else inputs
            return trace(ma, xa), trace(mb, xb)
    except Exception:                    # noqa: BLE001 — no graph: roles outside known modules stay undecided
        return None


_ELEMENTWISE = frozenset(("add", "sub", "mul", "div", "cat", "stack", "where", "masked_fill", "lerp", "addcmul"))
_CONTRACT = frozenset(("matmul", "rmatmul", "bmm", "einsum", "baddbmm", "linear", "mm"))
_LOOKUP = frozenset(("embedding", "index_select", "getitem_index", "take"))


def graph_role(traces, name, ndim, scaled) -> tuple:
    """(role, reason) of a parameter outside known modules from its first uses in the traced forwards: a
    contraction (matmul, linear, einsum) — hidden when two dimensions scale, else input-like when the product
    is width-sized and output-like when it is not; elementwise (added, multiplied, concatenated: a token, a
    position embedding, a gain) — input-like (2-D or more) or vector-like (1-D); anything else undecided."""
    from .graph import SHAPE_OPS as _SHAPE_OPS, plain_key

    if traces is None:
        return None, "the forward could not be traced"
    ta, tb = traces
    users = {}
    for n in ta.nodes:
        for r in _flat_refs((n.args, n.kwargs)):
            users.setdefault(r, []).append(n)
    todo = [n.index for n in ta.nodes if n.kind == "param" and plain_key(n.name) == name]
    if not todo:
        return None, "the traced forward never reads it"
    ops, seen = [], set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for u in users.get(i, []):
            if u.kind == "call" and (u.name in _SHAPE_OPS or u.name in ("getitem", "expand", "to", "clone")):
                todo.append(u.index)
            else:
                ops.append(u)
    if not ops:
        return None, "the traced forward only reshapes it"
    if any(u.kind == "call" and u.name in _CONTRACT for u in ops):
        if len(scaled) >= 2:
            return "hidden", "contracted with the activations, two dimensions ∝ width"
        u = next(u for u in ops if u.kind == "call" and u.name in _CONTRACT)
        va, vb = ta.nodes[u.index].value, tb.nodes[u.index].value
        wide = isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and tuple(va.shape) != tuple(vb.shape)
        return ("input", f"{u.name!r} makes a width-sized product") if wide else (
            "output", f"{u.name!r} contracts its width dimension")
    if all(u.kind == "call" and u.name in _LOOKUP for u in ops):
        return "input", f"rows looked up by {ops[0].name!r} (an embedding table)"
    if all(u.kind == "call" and u.name in _ELEMENTWISE for u in ops):
        return ("input" if ndim >= 2 else "vector"), f"combined elementwise ({ops[0].name!r}) with the activations"
    other = next(u for u in ops if not (u.kind == "call" and u.name in _ELEMENTWISE))
    return None, f"it is read by {other.name!r}"


def _flat_refs(x):
    from .graph import Ref, flat

    return [r.index for r in flat(x) if isinstance(r, Ref)]


def _classify(ma, mb, na, nb, roles, sizes, traces=None):
    """Rules of the parameters of ``ma``/``mb`` (module docstring); ``sizes``: :func:`probe_sizes`; ``traces``:
    a callable giving the traced forwards (called only when a parameter outside known modules needs a role)."""
    from .graph import find_ties
    from .structure import tie_roles

    pa, pb = dict(ma.named_parameters()), dict(mb.named_parameters())
    if list(pa) != list(pb) or any(list(v) != list(pa) for v in sizes.values()):
        diff = sorted(set(pa) ^ set(pb)) or sorted(set().union(*(set(v) ^ set(pa) for v in sizes.values())))
        raise ValueError(f"parameterise: the factory builds different parameters at widths {na} and {nb} "
                         f"({diff[:3]}…); the architecture may change only in its sizes")
    unknown = sorted(set(roles) - set(pa))
    if unknown:
        raise ValueError(f"roles: no parameter named {unknown}; parameters: {list(pa)[:8]}…")
    forced = tie_roles(find_ties(ma), set(pa))
    got = {}
    rules = []
    for full, p in pa.items():
        sa, sb = tuple(p.shape), tuple(pb[full].shape)
        if len(sa) != len(sb) or any(len(v[full]) != len(sa) for v in sizes.values()):
            raise ValueError(f"parameterise: tensor {full!r} changes rank between widths {na} and {nb}")
        scaled, ratio = _scaled_dims(full, {w: v[full] for w, v in sizes.items()})
        mod_name, mod, attr = _owner(ma, full)
        if full in forced and full not in roles:         # a tied read-out's tensor: the embedding's row
            role, mod_name, mtype = forced[full]
            rules.append(TensorRule(full, mod_name, mtype, sa, scaled, role, size_ratio=ratio))
            continue
        role = roles.get(full) or _role(full, sa, scaled, mod, attr)
        if role is None:
            if "traces" not in got:
                got["traces"] = traces() if callable(traces) else traces
            role, why = graph_role(got["traces"], full, len(sa), scaled)
            if role is None:
                raise ValueError(
                    f"parameterise: cannot classify tensor {full!r} of shape {sa} ({type(mod).__name__}): it scales "
                    f"in dimension(s) {list(scaled)} but its role is not decided by the graph ({why}); pass roles={{"
                    f"{full!r}: 'input'|'hidden'|'output'|'vector'|'constant'}} (limits coord-check / transfer: "
                    f"--role {full}=input)")
        rules.append(TensorRule(full, mod_name, type(mod).__name__, sa, scaled, role, size_ratio=ratio))
    return tuple(rules)


def _role(full, sa, scaled, mod, attr):
    """The role of a tensor decided by its own module (None: outside Linear/Conv/Embedding/attention)."""
    kind = _module_kind(mod, attr)
    if not scaled:
        return "constant"
    if len(sa) == 1 or (isinstance(mod, nn.MultiheadAttention) and attr in ("bias_k", "bias_v")):
        return "vector"
    if kind is None:
        return None
    fin, fout = kind
    s_in = any(d in scaled for d in fin)
    s_out = any(d in scaled for d in fout)
    extra = [d for d in scaled if d not in fin + fout]
    if extra:
        raise ValueError(f"parameterise: tensor {full!r} ({type(mod).__name__}) scales in dimension "
                         f"{extra[0]}, not a fan-in/fan-out dimension; cannot classify it")
    return {(False, True): "input", (True, True): "hidden", (True, False): "output"}[(s_in, s_out)]


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
                _check_scaling(q, tuple(p.shape), r, width)
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


def _check_scaling(q, shape, r, width=None):
    """Refuse a tensor whose size at this width is not its classification's: fixed dimensions equal, scaled ones
    within rounding of k·width (k: ``q.size_ratio``) — or exactly r times the base size for a rule without k."""
    ks = dict(zip(q.scaled, q.size_ratio)) if q.size_ratio and width is not None else {}
    for i, (s0, s) in enumerate(zip(q.shape, shape)):
        if i in ks:
            k = ks[i]
            if k / (1 + ROUNDING) <= s / width <= k * (1 + ROUNDING):
                continue
            raise ValueError(f"tensor {q.name!r}: dimension {i} is {s} at width {width}, not ∝ width within rounding "
                             f"(expected ≈ {k * width:.4g} ± {ROUNDING:.0%})")
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
    if len(ws) < 2 or ws[0] < 1:
        raise ValueError(f"widths: need at least two distinct positive widths to infer shapes, got {widths!r}")
    roles = _check_roles(roles)
    na, nb = ws[0], ws[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ma, mb = _build(factory, na), _build(factory, nb)
    traces, why = _trace_pair(ma, mb, example_inputs)
    base_rules = _tie_bases(_classify(ma, mb, na, nb, roles, probe_sizes(factory, ws), traces), ma, mb, na, nb)
    n0 = na if base_width is None else int(base_width)
    from ..params import classify as classify_p

    fl = classify_p(p).regime == "feature-learning"
    rules = [_table_rule(q, p) for q in base_rules]
    identity = all(q.init_exponent == 0 and q.a == 0 and q.c == 0 for q in rules)
    if check_init and not identity:
        from .initscale import check_sp_init

        check_sp_init(factory, base_rules, na, nb, _build, models=(ma, mb))
    graph_info = _graph(ma, mb, na, nb, traces, why, fl)
    rules, attention, readouts = _structures(rules, graph_info, p, optimizer, fl, identity)
    P = Parameterised(factory, getattr(p, "name", str(parameterisation)), optimizer, gauge, n0, tuple(rules),
                      p, fl, attention, readouts, graph_info[3])
    return P if traces is None else _compensate(P, ma, mb, na, nb, traces)


def _table_rule(q, p):
    """``q`` with the table's exponents for its role and the init rescale from the factory's own init."""
    row = _TABLE_ROW[q.role]
    if row is None:
        return q
    a, b, c = (_exp(p, row, s) for s in "abc")
    base = -_SP_B[row] if q.base_init is None else q.base_init
    return replace(q, a=a, b=b, c=c, init_exponent=-base - b)


def _tie_bases(rules, ma, mb, na, nb):
    """Rules of tied tensors (an embedding shared with a read-out) whose factory init is the read-out's SP
    (∝ N^−½: ``lm_head.weight`` assigned to the embedding) get that as their base init."""
    from .graph import find_ties
    from .initscale import measured_exponent

    stores = {n for t in find_ties(ma) if t.kind == "embedding-readout" for n in t.names}
    out = []
    for q in rules:
        if q.name in stores and q.role == "input":
            e = measured_exponent(ma, mb, na, nb, q.name)
            if e is not None and abs(e + 0.5) < 0.25:
                q = replace(q, base_init=-0.5)
        out.append(q)
    return tuple(out)


def _trace_pair(ma, mb, example_inputs):
    """((trace at na, trace at nb), None) or (None, why): the forward on ``example_inputs`` (guessed if None); a
    forward that fails on the user's own inputs raises its own error."""
    from .graph import example_inputs as guess, trace

    try:
        with torch.random.fork_rng(devices=[]):
            xa = guess(ma) if example_inputs is None else example_inputs
            xb = guess(mb) if example_inputs is None else example_inputs
            return (trace(ma, xa), trace(mb, xb)), None
    except Exception as exc:           # noqa: BLE001 — reported (and refused under a feature-learning table)
        if example_inputs is not None:
            _plain_forward(ma, example_inputs)    # the forward failing on the user's own inputs: the user's error
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _graph(ma, mb, na, nb, traces, why, fl):
    """(attention scalings, ties, {read-out: fold}, how traced) from the traced forwards at widths na and nb."""
    from .graph import analyse, find_ties, width_scaling

    if traces is None:
        if fl:
            raise ValueError(f"parameterise: cannot trace factory({na})'s forward to find its attention ({why}); "
                             "pass example_inputs=(…) — a feature-learning parameterisation must set every "
                             "attention's logit scale") from None
        return (), tuple(find_ties(ma)), {}, f"not traced ({why})"
    ga, gb = analyse(ma, None, t=traces[0]), analyse(mb, None, t=traces[1])
    return width_scaling(ga.sites, gb.sites, na, nb), ga.ties, ga.readout_inputs, ga.method


def _compensate(P, ma, mb, na, nb, traces):
    """``P`` with every width-dependent multiplier of the factory's forward folded into the init and rate of the
    one weight between it and the next non-homogeneous op (:func:`limits.torch.offsets.solve`; of several, the
    one read last), so that the effective network is the table's; a multiplier no weight can absorb is refused."""
    from .offsets import build, role_of_use, solve
    from .plan import plan_gauges

    graph = build(ma, mb, na, nb, None, role_of_use(P.rules), P.feature_learning, traces)
    gauges = plan_gauges(P, graph)
    plain = {_plain(q.name): q.name for q in P.rules}
    ties = {t.module: t for t in P.readouts}
    adjustable, last, also = {}, {}, {}
    for u in graph.uses:
        if u.param not in plain:
            continue
        mod = graph.names[u.node] if u.in_leaf else None
        key = f"tie:{mod}" if mod in ties and ties[mod].storage == plain[u.param] else plain[u.param]
        if key != plain[u.param] or u.var.endswith("|q"):
            also[u.var] = (plain[u.param],)            # moves with its tensor, but is not the one to move
        if u.var.endswith("|q"):
            continue
        adjustable[u.var] = key
        last[key] = max(last.get(key, -1), u.node)
    shift, left = solve(graph, gauges.value, adjustable, last, also)
    if left:
        found = "; ".join(f"×N^{e:+.3g} ({op} in {sc or 'the root module'!r})" for _, op, e, sc in graph.constants[:6])
        con, res = left[0]
        raise ValueError(f"parameterise: {con.where} sits at N^{res:+.3g} relative to {P.name}'s network and no "
                         f"weight between the multiplier and it can absorb it (width-dependent constants in the "
                         f"forward: {found or 'none found'}); move the multiplier next to a Linear, or remove it")
    if not shift:
        return P
    off, _ = graph.evaluate(lambda v: gauges.value(v) + shift.get(adjustable.get(v), 0.0)
                            + sum(shift.get(x, 0.0) for x in also.get(v, ())))
    k = 2.0 if P.optimizer_name == "sgd" else 1.0
    rules = []
    for q in P.rules:
        g = shift.get(q.name)
        node = graph.module_node(q.module) if q.role in ("vector", "constant") and q.name.endswith("bias") else None
        if g is None and node is not None and graph.kinds[node] == "module" and math.isfinite(off[node]):
            now = q.gauge + (q.query_exponent if q.query_rows == (0, q.shape[0]) else 0.0)
            g = (off[node] - now) if abs(off[node] - now) > 1e-9 else None   # a bias sits where its module's output does
        if g:
            q = replace(q, init_exponent=q.init_exponent + g, c=q.c - k * g, gauge=q.gauge + g)
        rules.append(q)
    readouts = tuple(replace(t, exponent=t.exponent - shift[f"tie:{t.module}"]) if f"tie:{t.module}" in shift
                     else t for t in P.readouts)
    return replace(P, rules=tuple(rules), readouts=readouts)


def _plain(name):
    from .graph import plain_key

    return plain_key(name)


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
