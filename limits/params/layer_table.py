"""Per-layer parameterisation tables of a composition (``limits.serial``): which row of a width table
(input / hidden / output) every trained tensor takes, and its exponents (docs/theory/params.rst §10).

Roles, by which of fan-in / fan-out grows with the width N (Tensor Programs IV, the rule of
:mod:`limits.torch.apply_params` for torch modules)::

    input     fan-in fixed, fan-out ∝ N        (the first layer: fan-in = data dimension D)
    hidden    fan-in ∝ N, fan-out ∝ N
    output    fan-in ∝ N, fan-out fixed        (the last Dense/Conv/Attention: fan-out = d_out)
    vector    one dimension, ∝ N (biases)      → the input row (fan-in 1)
    constant  nothing grows with N             → not width-scaled (exponents 0)

Fan-in of Dense = C (input channels), of Conv = C·|F| (|F| the filter size, fixed), of Attention's key (= query,
tied) and value weights = C, of its output weights = H·n_val; the positional embedding E (positions × C) is
input-like (one-hot positions in, C out). Every tensor of role ρ gets the table's ``a_ρ, b_ρ, c_ρ`` (and the global
``d`` in the variance convention); Attention's logits scale as N^{-1} (1/n_key) under a feature-learning table
(μP, MF: TP5) and as N^{-1/2} (1/√n_key) otherwise (SP, NTK), what ``limits.torch.parameterise`` applies.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import sympy as sp

from ..results import Result
from .expr import fmt

ROLES = ("input", "hidden", "output", "vector", "constant")
TABLE_ROW = {"input": "input", "hidden": "hidden", "output": "output", "vector": "input", "constant": None}
_NO_PARAMS = ("Activation", "Flatten", "GlobalAvgPool", "AvgPool", "LayerNorm", "Identity")


@dataclass(frozen=True)
class TensorRow(Result):
    """One trained tensor of a composition: where it is (``layer``: index path, ``kind``: layer type), its fan-in /
    fan-out ("D", "N", "d_out", …), role, exponents in the table's convention (text and number; NaN while symbolic)
    and ``std`` = (a, b, c) in the std convention (what a finite network is trained with)."""

    layer: str
    kind: str
    tensor: str
    fan_in: str
    fan_out: str
    role: str
    a: str
    b: str
    c: str
    std: tuple
    note: str = ""

    def __post_init__(self):
        _check_fields(self, str, ("layer", "kind", "tensor", "fan_in", "fan_out", "role", "a", "b", "c", "note"))
        if self.role not in ROLES:
            raise TypeError(f"TensorRow.role must be one of {ROLES}, got {self.role!r:.60}")
        if not isinstance(self.std, tuple) or len(self.std) != 3 or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in self.std):
            raise TypeError(f"TensorRow.std must be a tuple of three numbers (a, b, c), got {self.std!r:.80}")


def _check_fields(obj, kind, names):
    """``TypeError`` naming the first field of ``obj`` among ``names`` that is not a ``kind`` (what
    :func:`limits.results.load_result` reports as a file that does not describe the result)."""
    for n in names:
        v = getattr(obj, n)
        if not isinstance(v, kind) or isinstance(v, bool):
            raise TypeError(f"{type(obj).__name__}.{n} must be a {kind.__name__}, got {type(v).__name__} {v!r:.60}")


@dataclass(frozen=True)
class LayerTable(Result):
    """The per-tensor table of a composition (module docstring): ``rows`` (:class:`TensorRow`), the attention logit
    exponents ``logits`` ({layer: e}, logits ∝ N^{-e}), the parameterisation (``to_dict`` form, in ``convention``),
    its one-step growth predictions per quantity of :func:`limits.finite.serial_coordcheck.width_check`
    (``predicted``) and the composition's description."""

    name: str
    convention: str
    regime: str
    parameterisation: dict
    composition: dict
    rows: tuple
    logits: dict
    predicted: dict
    notes: tuple = ()

    def __post_init__(self):
        """Every field of the kind it is (a table read back from a file is checked here: ``rows = 5`` is refused,
        not a table that fails later)."""
        _check_fields(self, str, ("name", "convention", "regime"))
        _check_fields(self, dict, ("parameterisation", "composition", "logits", "predicted"))
        _check_fields(self, tuple, ("rows", "notes"))
        if not self.rows or not all(isinstance(r, TensorRow) for r in self.rows):
            raise TypeError(f"LayerTable.rows must be a non-empty tuple of TensorRow, got "
                            f"{[type(r).__name__ for r in self.rows][:5]}")
        if not all(isinstance(n, str) for n in self.notes):
            raise TypeError("LayerTable.notes must be a tuple of strings")
        if not all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                   for k, v in self.logits.items()):
            raise TypeError(f"LayerTable.logits must map layers to exponents, got {self.logits!r:.80}")

    def row(self, layer, tensor) -> TensorRow:
        for r in self.rows:
            if r.layer == str(layer) and r.tensor == tensor:
                return r
        raise KeyError(f"no tensor {tensor!r} of layer {layer!r}; have {[(r.layer, r.tensor) for r in self.rows]}")

    def roles(self) -> dict:
        """{(layer, tensor): role}."""
        return {(r.layer, r.tensor): r.role for r in self.rows}

    def to_markdown(self) -> str:
        d = f", d = {self.parameterisation.get('d', '0')}" if self.convention == "variance" else ""
        lines = [f"**{self.name}** per tensor ({self.convention} convention{d}; regime {self.regime})", "",
                 "| layer | type | tensor | fan-in | fan-out | role | a | b | c |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            lines.append(f"| {r.layer} | {r.kind} | {r.tensor} | {r.fan_in} | {r.fan_out} | {r.role} | {r.a} | {r.b} "
                         f"| {r.c} |")
        for lay, e in self.logits.items():
            lines.append(f"\nAttention {lay}: logits ∝ N^-{e:g} ({'1/n_key' if e == 1 else '1/√n_key'})")
        lines += ([""] + [f"- {n}" for n in self.notes]) if self.notes else []
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        head = r"layer & type & tensor & fan-in & fan-out & role & $a$ & $b$ & $c$ \\"
        body = [" & ".join([r.layer, r.kind, r.tensor.replace("_", r"\_"), f"${r.fan_in}$", f"${r.fan_out}$", r.role,
                            f"${r.a}$", f"${r.b}$", f"${r.c}$"]) + r" \\" for r in self.rows]
        return "\n".join([r"\begin{tabular}{lllllllll}", r"\hline", head, r"\hline", *body, r"\hline",
                          r"\end{tabular}"]) + "\n"

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "convention": self.convention, "regime": self.regime,
                           "rows": [{k: getattr(r, k) for k in ("layer", "kind", "tensor", "fan_in", "fan_out", "role",
                                                                 "a", "b", "c")} for r in self.rows],
                           "logits": self.logits, "notes": list(self.notes)}, indent=1, ensure_ascii=False)

    def __str__(self):
        return self.to_markdown()


# ---------------------------------------------------------------------------------------------------------
# walking a composition
def _role(fin_scales: bool, fout_scales: bool) -> str:
    return {(False, True): "input", (True, True): "hidden", (True, False): "output",
            (False, False): "constant"}[(fin_scales, fout_scales)]


def _size(scales: bool, fixed: str) -> str:
    return "N" if scales else fixed


def _tensors(layer, c_in: bool, c_out: bool, fixed_in: str, fixed_out: str):
    """(tensor, fan-in text, fan-out text, role, note) of one parametric layer whose input channels scale iff
    ``c_in`` and output channels iff ``c_out``."""
    name = type(layer).__name__
    cin, cout = _size(c_in, fixed_in), _size(c_out, fixed_out)
    bias = ("b", "1", cout, "vector" if c_out else "constant", "bias (trained; multiplier σ_b)")
    if name == "Dense":
        return [("W", cin, cout, _role(c_in, c_out), ""), bias]
    if name == "Conv":
        F = "·".join(str(k) for k in layer.filter_shape)
        return [("W", f"{cin}·{F}", cout, _role(c_in, c_out), f"fan-in = channels × filter {F}"), bias]
    out = [("K", cin, "N", _role(c_in, True), "key = query weights (tied)"),
           ("V", cin, "N", _role(c_in, True), "value weights"),
           ("O", f"{layer.n_heads}·N", cout, _role(True, c_out), "output weights (fan-in heads × n_val)"), bias]
    if layer.embedded:
        out.append(("E", "positions", cin, "input" if c_in else "constant", "positional embedding (added)"))
    return out


def walk(net, d_out="d_out"):
    """[(layer path, layer, tensor, fan-in, fan-out, role, note)] over every trained tensor of ``net`` (Residual
    branches included), the attention layers' paths, the LayerNorm paths; ValueError naming a layer whose rule is not
    derived."""
    rows, attn, norms = [], [], []
    last = max((i for i, l in enumerate(net.layers) if l.parametric), default=-1)

    def go(s, prefix, scales, fixed, out_scales, out_fixed, last_i):
        for i, l in enumerate(s.layers):
            path = f"{prefix}{i}"
            kind = type(l).__name__
            if kind == "Residual":
                b_last = max((j for j, x in enumerate(l.branch.layers) if x.parametric), default=-1)
                go(l.branch, f"{path}.branch.", scales, fixed, scales, fixed, b_last)
                continue
            if kind in _NO_PARAMS:
                if kind == "LayerNorm":
                    norms.append(path)
                continue
            if kind not in ("Dense", "Conv", "Attention"):
                raise ValueError(f"layer_table: layer {path} ({l.describe()}): no per-layer parameterisation rule is "
                                 "derived for this layer type (derived: Dense, Conv, Attention, and the parameter-free "
                                 f"{', '.join(_NO_PARAMS)}, Residual)")
            o_sc, o_fx = (out_scales, out_fixed) if i == last_i else (True, "N")
            for t, fi, fo, role, note in _tensors(l, scales, o_sc, fixed, o_fx):
                rows.append((path, l, t, fi, fo, role, note))
            if kind == "Attention":
                attn.append(path)
            scales, fixed = o_sc, o_fx

    go(net, "", False, "D", False, d_out, last)
    return rows, attn, norms


# ---------------------------------------------------------------------------------------------------------
# the table
def _resolve(net, parameterisation, convention, optimizer):
    """(composition, Parameterisation in ``convention``) from a composition / Model and a name or object (None: a
    Model's own parameterisation; NTK for a composition, whose layers are NTK-parameterised)."""
    from .named import named
    from .parameterisation import Parameterisation, check_choice

    check_choice(convention, ("variance", "std"), "convention")
    if hasattr(net, "composition") and hasattr(net, "params_object"):          # a limits.Model
        comp = net.composition
        p = parameterisation if parameterisation is not None else net.params_object(convention)
    else:
        comp = net if hasattr(net, "layers") and hasattr(net, "hidden_outputs") else None
        if comp is None:
            raise ValueError(f"layer_table: expected a limits.serial composition or a limits.Model, got "
                             f"{type(net).__name__}")
        p = "NTK" if parameterisation is None else parameterisation
    if isinstance(p, str):
        p = named(p, convention=convention, optimizer=optimizer)
    if not isinstance(p, Parameterisation):
        raise ValueError(f"layer_table: parameterisation must be a name (SP, NTK, MF, muP, …) or a "
                         f"limits.params.Parameterisation, got {type(p).__name__}")
    if p.algorithm != "bp":
        raise ValueError(f"layer_table: per-layer rules are derived for backpropagation (TP4); {p.name!r} is for "
                         f"algorithm {p.algorithm!r}, whose exponents are derived for MLPs only")
    return comp, p.convert(convention)


def _number(v) -> float:
    return float("nan") if getattr(v, "free_symbols", None) else float(v)


def layer_table(net, parameterisation=None, convention="variance", optimizer="sgd") -> LayerTable:
    """Per-tensor parameterisation table of a composition ``net`` (``limits.serial``, or a ``limits.Model`` via
    :attr:`~limits.Model.composition`) under ``parameterisation`` (a name — SP, NTK, MF, muP, … — or a
    :class:`~limits.params.Parameterisation`; default: a Model's own, NTK for a composition) in ``convention``
    ("variance": seed 000's a, b, c, d; "std": TP4's). Module docstring for the rule; a layer whose rule is not
    derived is refused by name (ValueError)."""
    from .classify import classify

    comp, p = _resolve(net, parameterisation, convention, optimizer)
    s = p.to_std()
    rows_in, attn, norms = walk(comp)
    zero = sp.Integer(0)
    rows = []
    for path, layer, t, fi, fo, role, note in rows_in:
        row = TABLE_ROW[role]
        ex = [p.exponent(row, k) if row else zero for k in "abc"]
        std = tuple(_number(s.exponent(row, k)) if row else 0.0 for k in "abc")
        rows.append(TensorRow(path, type(layer).__name__, t, fi, fo, role, *(fmt(e) for e in ex), std, note))
    if not rows:
        raise ValueError("layer_table: the composition has no trained tensor (no Dense, Conv or Attention)")
    regime = classify(p).regime
    fl = regime == "feature-learning"
    notes = [f"layer {n} (LayerNorm): no trained gain or bias (normalises over channels only)" for n in norms]
    if p.depth_alpha is not None:
        notes.append(f"depth exponents: residual branches ∝ L^-{fmt(p.depth_alpha)}, learning rate of hidden "
                     f"tensors ∝ L^{fmt(p.depth_lr_exponent)} (L = number of residual blocks)")
    if attn:
        notes.append("Attention here is the infinite-width layer of docs/theory/layers.rst §3 (tied query/key, "
                     "logits s⟨k_i, k_j⟩/(C·n_key) = 1/n_key on unit-scale keys): the μP scaling; SP/NTK's "
                     "1/√n_key is the usual finite transformer's")
    return LayerTable(p.name, p.convention, regime, p.to_dict(), comp.to_dict(), tuple(rows),
                      {a: (1.0 if fl else 0.5) for a in attn}, _predictions(comp, p, rows), tuple(notes))


ONE_STEP_KEY = {"input": "dWh:in", "hidden": "dWh:hidden", "output": "dWh:out"}


def _predictions(comp, p, rows=()) -> dict:
    """One-step growth exponents (powers of N, SGD, first order in the learning rate) of the quantities a per-layer
    coordinate check measures: ``"df"``, and ``"dh:<i>"`` for the output of top-level layer i
    (:meth:`limits.layers.Serial.hidden_outputs`) — the first as the MLP's h0 (−r_input), later ones as its deeper
    states (max(−r_input, −r_hidden)), ``"dh:hidden"`` the mean of the later ones (when there are two or more);
    ``"dWh:<path>"`` for the own update W_t − W_0 of every Dense/Conv weight (``rows``) applied to its input, as the
    MLP's ``dWh:in`` / ``dWh:hidden`` / ``dWh:out`` of its role (−r_role; std convention: the read-out's
    contribution is already f's, no output scale 1/γ)."""
    try:
        one = p.one_step_exponents()
        own = p.to_std().one_step_exponents()
    except ValueError:
        return {}
    idx = comp.hidden_outputs()
    out = {"df": _number(one["df"])}
    for k, i in enumerate(idx):
        out[f"dh:{i}"] = _number(one["dh:h0" if k == 0 else "dh:hidden"])
    if len(idx) > 2:
        out["dh:hidden"] = _number(one["dh:hidden"])
    for r in rows:
        if r.kind in ("Dense", "Conv") and r.tensor == "W" and r.role in ONE_STEP_KEY:
            out[f"dWh:{r.layer}"] = _number(own[ONE_STEP_KEY[r.role]])
    return out
