"""Width offsets through the traced graph: how far each activation of a module sits, as a power of the width, from
the table's *canonical network* — one computation that :func:`limits.torch.parameterise` solves (where must a
multiplier be compensated?) and :func:`limits.torch.coord_check` evaluates (what does each row predict?).

**Canonical network** C_T: the same architecture with table T's exponents in the a0 gauge (no forward multipliers;
effective init N^{−(a+b)}, Adam rate N^{−(a+c)}, SGD rate N^{−(2a+c)} of each tensor's row) and TP5's attention
scale (1/d_h when the head dimension d_h ∝ N; the module's own 1/√d_h under a kernel-regime table).

**Gauges.** Each use u of a tensor (a weight read by a Linear/Conv/Embedding/MultiheadAttention/norm, or a
parameter read by an op) has a gauge g_u: the exponent of its effective weight relative to C_T's for the role of
that use (a tied read-out's use of the embedding's tensor has the read-out's role). From a plan: its init, its
forward multiplier, its rate (:func:`plan_gauges`); for a module checked as built: its measured init and its
optimizer groups' rates.

**Offsets.** Every node of the traced forward gets o(node): real = N^{o} · canonical. Exact through homogeneous
ops — o(W x) = o(x) + g_W, o(x · c) = o(x) + e_c for a constant c ∝ N^{e_c} (read by comparing the forward at two
widths), o(x ⊙ y) = o(x) + o(y), o(xᵏ) = k·o(x), rsqrt: −½o, sums and reductions keep o, shape ops keep o —
while normalisations restart at their gain's gauge and non-homogeneous ops (GELU, SiLU, tanh, softmax, exp, …)
restart at 0. A module *realises* T when the plan's offsets vanish wherever the forward is not homogeneous:

    forced   o = 0 at the input of every non-homogeneous op and at the network's output
    logits   o(q) + o(k) + (σ − σ_T) = 0 at every attention site (s ∝ N^σ the scale after q·kᵀ, σ_T C_T's)
    equal    the operands of a sum (residual adds, concatenations, x + pos_embed) have equal offsets

(:attr:`OffsetGraph.constraints`). Where one fails the plan differs from T there: a coordinate check predicts C_T
at a forced point and names the one tensor whose gauge made the difference (:func:`attribute`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from .graph import SHAPE_OPS as _SHAPE_OPS, Ref, flat as _flat, mm_operands as _mm_operands, plain_key, \
    sites_of as _sites, trace

PASS = frozenset(_SHAPE_OPS | {
    "contiguous", "dropout", "relu", "relu_", "leaky_relu", "hardtanh", "relu6", "max_pool1d", "max_pool2d",
    "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "interpolate", "upsample", "pad", "roll",
    "flip", "index_select", "gather", "masked_fill", "type_as", "mean", "sum", "amax", "amin", "max", "min", "norm",
    "abs", "cumsum", "unfold", "fold", "pixel_shuffle", "pixel_unshuffle", "tril", "triu", "detach", "float",
    "squeeze", "take_along_dim", "scatter", "index_put", "nan_to_num", "flatten", "max_pool2d_with_indices"})
RESET = frozenset(("gelu", "silu", "tanh", "sigmoid", "exp", "log", "softplus", "elu", "selu", "celu", "mish",
                   "hardswish", "hardsigmoid", "erf", "sin", "cos", "logsigmoid", "glu", "softmax", "log_softmax",
                   "softsign", "tanhshrink", "sigmoid_", "tanh_", "cross_entropy", "mse_loss", "nll_loss"))
NORMS_F = frozenset(("layer_norm", "group_norm", "rms_norm", "batch_norm", "instance_norm"))
POWERS = {"sqrt": 0.5, "rsqrt": -0.5, "reciprocal": -1.0, "square": 2.0, "var": 2.0, "std": 1.0}
SUMS = frozenset(("add", "sub", "cat", "stack", "where", "lerp", "addcmul"))
_PASS_MODULES = (nn.ReLU, nn.LeakyReLU, nn.Identity, nn.modules.dropout._DropoutNd, nn.Flatten, nn.Unflatten,
                 nn.modules.pooling._MaxPoolNd, nn.modules.pooling._AvgPoolNd,
                 nn.modules.pooling._AdaptiveAvgPoolNd, nn.modules.pooling._AdaptiveMaxPoolNd, nn.Upsample,
                 nn.PixelShuffle, nn.PixelUnshuffle, nn.ReLU6, nn.Hardtanh, nn.ZeroPad2d, nn.ConstantPad2d)
_RESET_MODULES = (nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Softmax, nn.LogSoftmax, nn.Mish, nn.ELU, nn.SELU,
                  nn.CELU, nn.Softplus, nn.Hardswish, nn.Hardsigmoid, nn.GLU, nn.LogSigmoid, nn.Softsign)
_NORM_MODULES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm,
                 nn.LocalResponseNorm) + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ())
TOL = 1e-6


# ----------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Use:
    """A read of parameter ``param`` by the forward at node ``node``: gauge variable ``var``
    (``"param|role"``, ``"param|role|q"`` for a query block of rows), the canonical ``role`` of this use, and
    ``in_leaf``: read inside a leaf module (its parametrization is not a node of the graph)."""

    var: str
    param: str
    role: str
    node: int
    in_leaf: bool


@dataclass(frozen=True)
class Constraint:
    """``kind`` "forced" (``terms`` must sum to 0), "logits" (the same, at an attention site) or "equal"
    (every operand of ``terms`` equal); ``node``: where; ``where``: a short text."""

    kind: str
    node: int
    terms: tuple            # forced/logits: ((node, coef), …), vars ((var, coef), …), const; equal: operand nodes
    where: str


@dataclass
class _Rec:
    mode: str                       # "lin" (Σ coef·operand + vars + const) or "max" (max over operands)
    operands: tuple = ()            # ((node index, coef), …)
    vars: tuple = ()                # ((var, coef), …)
    const: float = 0.0


@dataclass
class OffsetGraph:
    """The offset equations of one traced forward (module docstring): ``recs[i]`` per node (None: not a tensor),
    ``constraints``, ``uses``, ``outputs`` (node indices), ``method`` of the trace, ``notes`` (ops not understood,
    constants found)."""

    recs: list
    constraints: list
    uses: list
    outputs: tuple
    method: str
    scopes: list
    names: list
    kinds: list
    notes: list = field(default_factory=list)
    constants: list = field(default_factory=list)      # (node, op, exponent, scope) of width-dependent constants

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, value) -> tuple:
        """(offsets per node (nan: not a tensor), symbolic {var: coef} per node) for gauge values ``value(var)``."""
        n = len(self.recs)
        off = [math.nan] * n
        sym = [None] * n
        for i, r in enumerate(self.recs):
            if r is None:
                continue
            if r.mode == "max":
                live = [(j, c) for j, c in r.operands if math.isfinite(off[j])]
                if not live:
                    off[i], sym[i] = r.const, {}
                    continue
                j = max(live, key=lambda jc: off[jc[0]])[0]
                off[i], sym[i] = off[j], dict(sym[j])
                continue
            o, s = r.const, {}
            for j, c in r.operands:
                if not math.isfinite(off[j]):
                    continue
                o += c * off[j]
                for v, k in sym[j].items():
                    s[v] = s.get(v, 0.0) + c * k
            for v, c in r.vars:
                x = value(v)
                o += c * (x if math.isfinite(x) else 0.0)
                s[v] = s.get(v, 0.0) + c
            off[i], sym[i] = o, s
        return off, sym

    def residual(self, con, off, sym, value) -> tuple:
        """(residual, {var: coef}) of a forced/logits constraint; for "equal": (max − min, {}), the spread."""
        if con.kind == "equal":
            vals = [off[j] for j in con.terms if math.isfinite(off[j])]
            return (max(vals) - min(vals) if vals else 0.0), {}
        nodes, vars_, const = con.terms
        res, s = const, {}
        for j, c in nodes:
            if math.isfinite(off[j]):
                res += c * off[j]
                for v, k in sym[j].items():
                    s[v] = s.get(v, 0.0) + c * k
        for v, c in vars_:
            x = value(v)
            res += c * (x if math.isfinite(x) else 0.0)
            s[v] = s.get(v, 0.0) + c
        return res, {v: c for v, c in s.items() if abs(c) > TOL}

    def forced_nodes(self) -> set:
        """Nodes whose offset a realising plan sets to 0 (inputs of non-homogeneous ops, outputs)."""
        return {c.node for c in self.constraints if c.kind == "forced"}

    def module_node(self, path) -> int | None:
        """The node of the last call of leaf module ``path``, or of a non-leaf module's output (the last node in
        its scope used outside it; the network output for the root)."""
        leaf = [i for i, (k, nm) in enumerate(zip(self.kinds, self.names)) if k == "module" and nm == path]
        if leaf:
            return leaf[-1]
        if path == "":
            return self.outputs[0] if self.outputs else None
        inside = [i for i, s in enumerate(self.scopes) if s == path or s.startswith(path + ".")]
        if not inside:
            return None
        pos = set(inside)
        used_out = [i for i in inside if i in self.outputs or any(
            j not in pos and self.recs[j] is not None and any(o == i for o, _ in self.recs[j].operands)
            for j in range(i + 1, len(self.recs)))]
        return (used_out or inside)[-1]


# ----------------------------------------------------------------------------------------------- building
def _exponent(va, vb, na, nb):
    """e with vb/va = (nb/na)^e, or 0 (not a width-dependent number)."""
    try:
        a, b = abs(float(va)), abs(float(vb))
    except (TypeError, ValueError):
        return 0.0
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)) or a == b:
        return 0.0
    e = math.log(b / a) / math.log(nb / na)
    return 0.0 if abs(e) < 1e-9 else round(e, 9)


def _tensor_exponent(ta, tb, na, nb):
    """Width exponent of a constant tensor (a buffer): its scalar's, or the rms ratio's rounded to a quarter
    (|e| < ⅛: 0 — RoPE tables, masks, positions)."""
    if not (isinstance(ta, torch.Tensor) and isinstance(tb, torch.Tensor)) or not ta.is_floating_point():
        return 0.0
    if ta.numel() == 1 and tb.numel() == 1:
        return _exponent(float(ta), float(tb), na, nb)
    ra, rb = float(ta.detach().double().pow(2).mean().sqrt()), float(tb.detach().double().pow(2).mean().sqrt())
    e = _exponent(ra, rb, na, nb)
    q = round(e * 4) / 4
    return 0.0 if abs(q) < 0.125 else q


class _Builder:
    """Builds an :class:`OffsetGraph` from traces ``ta``, ``tb`` of the same factory at widths na < nb."""

    def __init__(self, ta, tb, model_a, model_b, na, nb, use_role, fl):
        self.ta, self.tb, self.model, self.model_b, self.na, self.nb = ta, tb, model_a, model_b, na, nb
        self.aligned = len(ta.nodes) == len(tb.nodes) and all(
            (x.kind, x.name) == (y.kind, y.name) for x, y in zip(ta.nodes, tb.nodes))
        self.use_role, self.fl = use_role, fl
        self.recs, self.constraints, self.uses, self.notes, self.constants = [], [], [], [], []
        self.num = {}                       # node -> width exponent of a number
        self.skip_softmax, self.query_rows, self.row_blocks = set(), {}, {}
        self.scalings = ()
        self.params = {n for n, _ in model_a.named_parameters(remove_duplicate=False)}

    # -------------------------------------------------------------- numbers
    def _arg_exp(self, i, pos):
        """Width exponent of the literal number argument ``pos`` of node i (compared with the other width)."""
        if not self.aligned:
            return 0.0
        a, b = self.ta.nodes[i].args, self.tb.nodes[i].args
        if pos >= len(a) or pos >= len(b):
            return 0.0
        va, vb = a[pos], b[pos]
        if isinstance(va, (Ref, bool)) or not isinstance(va, (int, float)):
            return 0.0
        e = _exponent(va, vb, self.na, self.nb)
        if e:
            n = self.ta.nodes[i]
            self.constants.append((i, n.name, e, n.scope))
        return e

    def _split(self, i, args, first_pos=0):
        """Tensor operands and the summed width exponent of the number operands among ``args``."""
        ops, const = [], 0.0
        for k, a in enumerate(args):
            if isinstance(a, Ref):
                if self.recs[a.index] is not None:
                    ops.append(a.index)
                else:
                    e = self.num.get(a.index, 0.0)
                    if e:
                        n = self.ta.nodes[i]
                        self.constants.append((i, n.name, e, n.scope))
                    const += e
            elif isinstance(a, (int, float)) and not isinstance(a, bool):
                const += self._arg_exp(i, first_pos + k)
        return ops, const

    # -------------------------------------------------------------- attention
    def sites(self):
        """Attention sites at both widths (:func:`limits.torch.graph._sites`); their query rows and softmaxes."""
        from .graph import width_scaling

        sa, sb = _sites(self.ta, self.model), _sites(self.tb, self.model_b)
        try:
            scal = width_scaling(sa, sb, self.na, self.nb)
        except ValueError as exc:
            self.notes.append(f"attention not compared across widths: {exc}")
            scal = ()
        for sc in scal:
            s = sc.site
            _, soft = self.ta.site_nodes.get(s.name, (None, None))
            if soft is not None:
                self.skip_softmax.add(soft)
            if s.query is not None and s.kind != "multihead":
                w = _param_of(self.model, s.query.param)
                if w is not None and (s.query.start, s.query.stop) != (0, w.shape[0]):
                    self.query_rows[s.query.module] = s.query.param
        self.scalings = scal
        return scal

    def site_constraint(self, sc):
        s = sc.site
        if s.kind == "unrecognised" or s.query is None or s.key is None or sc.head_dim == "unknown":
            return
        op, _ = self.ta.site_nodes.get(s.name, (None, None))
        if op is None:
            return
        node = self.ta.nodes[op]
        if s.kind in ("multihead", "sdpa"):
            q, k = _arg_ref(node, 0, "query"), _arg_ref(node, 1, "key")
        else:
            ops = _mm_operands(self.ta, node)
            if len(ops) != 2:
                return
            q, k = ops
        if not (isinstance(q, Ref) and isinstance(k, Ref)) or self.recs[q.index] is None or self.recs[k.index] is None:
            return
        vars_ = []
        if s.kind == "multihead":
            vars_ += self._mha_qk_vars(node)
        elif s.query.module in self.query_rows:              # a packed projection: its query rows' own gauge
            var, qvar = self.row_blocks.get(s.query.module, (None, None))
            if var and qvar:
                vars_ += [(var, -1.0), (qvar, 1.0)]
        b = sc.site_b
        post_a = s.scale / s.path_factor if s.path_factor else s.scale
        post_b = (b.scale / b.path_factor if b.path_factor else b.scale) if b is not None else post_a
        sigma = _exponent(post_a, post_b, self.na, self.nb)
        want = (-1.0 if self.fl else -0.5) if sc.head_dim == "scales" else 0.0
        self.constraints.append(Constraint("logits", op, (((q.index, 1.0), (k.index, 1.0)), tuple(vars_),
                                                          sigma - want), f"the attention logits of {s.name!r}"))

    def _mha_qk_vars(self, node):
        mod = self.model.get_submodule(node.name)
        if mod._qkv_same_embed_dim:
            v = self._weight_var(node.name, "in_proj_weight", node)
            q = self._weight_var(node.name, "in_proj_weight", node, rows=True)
            return [(q, 1.0), (v, 1.0)] if q and v else []
        q = self._weight_var(node.name, "q_proj_weight", node)
        k = self._weight_var(node.name, "k_proj_weight", node)
        return [(x, 1.0) for x in (q, k) if x]

    # -------------------------------------------------------------- the graph
    def build(self):
        t = self.ta
        scal = self.sites()
        for node in t.nodes:
            self.recs.append(None)
            self.recs[node.index] = self._node(node)
        for sc in scal:
            self.site_constraint(sc)
        for r in t.outputs:
            if self.recs[r.index] is not None:
                self.constraints.append(Constraint("forced", r.index, (((r.index, 1.0),), (), 0.0),
                                                   "the network output"))
        notes = list(dict.fromkeys(self.notes))
        if not self.aligned:
            notes.append("the forward differs between the two widths: width-dependent constants not read")
        g = OffsetGraph(self.recs, self.constraints, self.uses, tuple(r.index for r in t.outputs),
                        t.method + (f" ({t.note})" if t.note else ""), [n.scope for n in t.nodes],
                        [n.name for n in t.nodes], [n.kind for n in t.nodes], notes,
                        list(dict.fromkeys(self.constants)))
        g.row_blocks, g.scalings = dict(self.row_blocks), scal
        return g

    def _node(self, node):
        v = node.value
        if node.kind == "input":
            return _Rec("lin") if isinstance(v, torch.Tensor) else None
        if node.kind == "param":
            return self._param(node)
        if not _tensorish(v):
            if node.kind == "call" and self.aligned and isinstance(v, (int, float)) and not isinstance(v, bool):
                self.num[node.index] = _exponent(v, self.tb.nodes[node.index].value, self.na, self.nb)
            return None
        if node.kind == "module":
            return self._module(node)
        return self._call(node)

    def _param(self, node):
        name = plain_key(node.name)
        if node.name in self.params or name in self.params:
            role = self.use_role(name, None, None)
            if role is None:
                return _Rec("lin")
            var = f"{name}|{role}"
            self.uses.append(Use(var, name, role, node.index, False))
            return _Rec("lin", vars=((var, 1.0),))
        if not isinstance(node.value, torch.Tensor):
            return None
        vb = self.tb.nodes[node.index].value if self.aligned else None
        e = _tensor_exponent(node.value, vb, self.na, self.nb)
        if e:
            self.constants.append((node.index, node.name, e, node.scope))
        return _Rec("lin", const=e)

    def _weight_var(self, path, attr, node, rows=False):
        mod = self.model.get_submodule(path) if path else self.model
        stored = _stored_name(self.model, mod, attr)
        if stored is None:
            return None
        role = self.use_role(stored, mod, attr)
        if role is None:
            return None
        var = f"{stored}|{role}" + ("|q" if rows else "")
        self.uses.append(Use(var, stored, role, node.index, True))
        return var

    def _module(self, node):
        mod = self.model.get_submodule(node.name)
        acts = [r for r in _flat((node.args, node.kwargs)) if isinstance(r, Ref) and self.recs[r.index] is not None]
        first = acts[0].index if acts else None
        ops = ((first, 1.0),) if first is not None else ()
        if isinstance(mod, (nn.Linear, nn.modules.conv._ConvNd)):
            var = self._weight_var(node.name, "weight", node)
            if node.name in self.query_rows and var:
                self.row_blocks[node.name] = (var, self._weight_var(node.name, "weight", node, rows=True))
            return _Rec("lin", ops, ((var, 1.0),) if var else (), self._hidden_multiplier(mod, node))
        if isinstance(mod, nn.Embedding):
            var = self._weight_var(node.name, "weight", node)
            return _Rec("lin", (), ((var, 1.0),) if var else ())
        if isinstance(mod, _NORM_MODULES):
            var = self._weight_var(node.name, "weight", node) if getattr(mod, "weight", None) is not None else None
            return _Rec("lin", (), ((var, 1.0),) if var else ())
        if isinstance(mod, nn.MultiheadAttention):
            return self._mha(node, mod)
        if isinstance(mod, _PASS_MODULES):
            return _Rec("lin", ops)
        if isinstance(mod, _RESET_MODULES):
            self._force(first, node, f"{type(mod).__name__} {node.name!r}")
            return _Rec("lin")
        self.notes.append(f"module {node.name!r} ({type(mod).__name__}): offsets passed through unchanged")
        return _Rec("max", tuple((r.index, 1.0) for r in acts))

    def _hidden_multiplier(self, mod, node):
        """Width exponent of a multiplier inside a user subclass of ``nn.Linear`` with its own forward (mup's
        MuReadout): its output over the plain ``F.linear``'s, compared at the two widths."""
        if not isinstance(mod, nn.Linear) or type(mod).forward is nn.Linear.forward or not self.aligned:
            return 0.0
        ratios = []
        for t, model in ((self.ta, self.model), (self.tb, self.model_b)):
            n = t.nodes[node.index]
            m = model.get_submodule(n.name)
            x = t.value(n.args[0]) if n.args and isinstance(n.args[0], Ref) else None
            out = n.value
            if not (isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor)):
                return 0.0
            with torch.no_grad():
                plain = nn.functional.linear(x, m.weight, m.bias)
            if plain.shape != out.shape:
                return 0.0
            ratios.append(float(out.detach().double().norm() / plain.detach().double().norm().clamp_min(1e-300)))
        e = _exponent(ratios[0], ratios[1], self.na, self.nb)
        q = round(e * 4) / 4
        e = q if abs(e - q) < 0.02 else e
        if abs(e) > 0.02:
            self.constants.append((node.index, f"{type(mod).__name__}.forward", e, node.name))
            return e
        return 0.0

    def _mha(self, node, mod):
        value = _arg_ref(node, 2, "value")
        ops = ((value.index, 1.0),) if isinstance(value, Ref) and self.recs[value.index] is not None else ()
        attr = "in_proj_weight" if mod._qkv_same_embed_dim else "v_proj_weight"
        out_path = f"{node.name}.out_proj" if node.name else "out_proj"
        vars_ = [(v, 1.0) for v in (self._weight_var(node.name, attr, node),
                                    self._weight_var(out_path, "weight", node)) if v]
        return _Rec("lin", ops, tuple(vars_))

    def _force(self, j, node, what):
        if j is not None and self.recs[j] is not None:
            scope = f" in {node.scope!r}" if node.scope else ""
            self.constraints.append(Constraint("forced", j, (((j, 1.0),), (), 0.0), f"the input of {what}{scope}"))

    def _call(self, node):
        name, i = node.name, node.index
        if name in ("mul", "matmul", "bmm", "einsum", "baddbmm", "rmatmul", "outer", "kron"):
            first = 1 if name in ("einsum", "baddbmm") else 0
            args = node.args[1:] if name == "einsum" else node.args[1:3] if name == "baddbmm" else node.args[:2]
            ops, const = self._split(i, args, first)
            if name == "baddbmm":
                const += self._arg_exp(i, 4)
            return _Rec("lin", tuple((j, 1.0) for j in ops), (), const)
        if name == "div":
            ops_a, ca = self._split(i, node.args[:1], 0)
            ops_b, cb = self._split(i, node.args[1:2], 1)
            return _Rec("lin", tuple((j, 1.0) for j in ops_a) + tuple((j, -1.0) for j in ops_b), (), ca - cb)
        if name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                    "conv_transpose3d"):
            refs = (_arg_ref(node, 0, "input"), _arg_ref(node, 1, "weight"))
            return _Rec("lin", tuple((r.index, 1.0) for r in refs
                                     if isinstance(r, Ref) and self.recs[r.index] is not None))
        if name in ("embedding", *NORMS_F):
            w = _arg_ref(node, {"embedding": 1, "batch_norm": 3}.get(name, 2), "weight")
            return _Rec("lin", ((w.index, 1.0),) if isinstance(w, Ref) and self.recs[w.index] is not None else ())
        if name == "normalize":
            return _Rec("lin")
        if name == "sdpa":
            v = _arg_ref(node, 2, "value")
            return _Rec("lin", ((v.index, 1.0),) if isinstance(v, Ref) and self.recs[v.index] is not None else ())
        if name in RESET:
            if i not in self.skip_softmax:
                self._force(_first_tensor(node, self.recs), node, name)
            return _Rec("lin")
        if name == "pow":
            ops, _ = self._split(i, node.args[:1])
            k = node.args[1] if len(node.args) > 1 else node.kwargs.get("exponent")
            if ops and isinstance(k, (int, float)) and not isinstance(k, bool):
                return _Rec("lin", ((ops[0], float(k)),))
        if name in POWERS:
            ops, _ = self._split(i, node.args[:1])
            if ops:
                return _Rec("lin", ((ops[0], POWERS[name]),))
        if name in SUMS:
            return self._sum(node)
        if name in PASS or name in ("getitem", "to", "clone", "expand", "view", "reshape"):
            src = _first_tensor(node, self.recs)
            return _Rec("lin", ((src, 1.0),) if src is not None else ())
        ops = [r.index for r in _flat((node.args, node.kwargs)) if isinstance(r, Ref) and self.recs[r.index] is not None]
        if ops:
            self.notes.append(f"op {name!r}: offsets passed through unchanged")
        return _Rec("max", tuple((j, 1.0) for j in ops))

    def _sum(self, node):
        args = node.args[0] if node.name in ("cat", "stack") and node.args else node.args
        if node.name == "where":
            args = node.args[1:3]
        elif node.name == "lerp":
            args = node.args[:2]
        elif node.name == "addcmul":
            args = node.args[:1]
        ops = list(dict.fromkeys(r.index for r in _flat(args) if isinstance(r, Ref) and self.recs[r.index] is not None))
        if len(ops) > 1:
            scope = f" in {node.scope!r}" if node.scope else ""
            self.constraints.append(Constraint("equal", node.index, tuple(ops), f"{node.name}{scope}"))
        return _Rec("max", tuple((j, 1.0) for j in ops))


def _arg_ref(node, i, key):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(key)


def _first_tensor(node, recs):
    for r in _flat((node.args, node.kwargs)):
        if isinstance(r, Ref) and recs[r.index] is not None:
            return r.index
    return None


def _tensorish(v):
    return isinstance(v, torch.Tensor) or (isinstance(v, (tuple, list)) and any(isinstance(x, torch.Tensor) for x in v))


def _stored_name(model, mod, attr):
    """The plain name ``named_parameters()`` gives the tensor ``mod.<attr>`` (a tie's storage name), or None."""
    base = getattr(mod, "parametrizations", None)
    p = base[attr].original if base is not None and attr in base else getattr(mod, attr, None)
    if not isinstance(p, torch.Tensor):
        return None
    for n, q in model.named_parameters():
        if q is p:
            return plain_key(n)
    return None


def _param_of(model, name):
    mod, _, attr = name.rpartition(".")
    m = model.get_submodule(mod) if mod else model
    return getattr(m, attr, None)


def build(model_a, model_b, na, nb, inputs, use_role, feature_learning, traces=None) -> OffsetGraph:
    """The :class:`OffsetGraph` of a factory's modules at widths ``na`` < ``nb`` (the same forward, ``inputs``);
    ``use_role(stored name, module or None, attribute)``: the canonical role of a use (None: not width-scaled);
    ``traces``: the two :func:`limits.torch.graph.trace` results if already made."""
    ta, tb = traces if traces is not None else (trace(model_a, inputs), trace(model_b, inputs))
    return _Builder(ta, tb, model_a, model_b, na, nb, use_role, feature_learning).build()


# ----------------------------------------------------------------------------------------------- roles of uses
def role_of_use(rules):
    """``use_role`` for :func:`build` from a factory's :class:`limits.torch.apply_params.TensorRule` s: a raw
    parameter's rule role; a module's weight by that module's fan-in/fan-out (a tied read-out reading the
    embedding's tensor has the read-out's role)."""
    from .graph import module_kind as _module_kind

    by = {plain_key(q.name): q for q in rules}

    def use_role(stored, mod, attr):
        q = by.get(stored)
        if q is None or q.role == "constant":
            return None
        if mod is None or q.role == "vector":
            return q.role
        kind = _module_kind(mod, attr)
        if kind is None:
            return q.role
        fin, fout = kind
        s_in, s_out = any(d in q.scaled for d in fin), any(d in q.scaled for d in fout)
        return {(False, True): "input", (True, True): "hidden", (True, False): "output"}.get((s_in, s_out), q.role)

    return use_role


# ----------------------------------------------------------------------------------------------- gauges
def table_row(table, role):
    """(a, b, c) of the table's row for a use role (vectors: the input row)."""
    row = {"vector": "input"}.get(role, role)
    return tuple(float(table.exponent(row, s)) for s in "abc")


def use_gauge(init_exp, lr_exp, mult_exp, role, table, optimizer) -> tuple:
    """(init offset, update offset) of a use whose stored tensor has init ∝ N^``init_exp`` and rate
    ∝ N^``lr_exp``, multiplied in the forward by N^``mult_exp``, relative to the table's row for ``role``:
    init N^{−(a+b)}, Adam update N^{−(a+c)}, SGD update N^{−(2a+c)} of the effective weight (an SGD gradient of
    a weight whose output sits at offset o is N^{−o} the canonical one)."""
    a, b, c = table_row(table, role)
    o_i = init_exp + mult_exp + (a + b)
    if optimizer in ("adam", "adamw"):
        return o_i, lr_exp + mult_exp + (a + c)
    o_u = lr_exp + 2 * mult_exp + (2 * a + c) - (o_i if math.isfinite(o_i) else 0.0)
    return o_i, o_u


def choose(o_i, o_u, role) -> float:
    """The gauge of a use: its init offset, unless its init is below its update's (zero, or a read-out / vector
    initialised smaller than the table's — accepted as an upper bound): then the update's."""
    if not math.isfinite(o_i) or (role in ("output", "vector") and o_i < o_u - 1e-9):
        return o_u
    return o_i


@dataclass(frozen=True)
class Gauges:
    """Per gauge variable: ``init`` and ``update`` offsets, the chosen ``gauge`` (:func:`choose`), ``graph``: the
    part of the multiplier that is a node of the traced graph (not counted in the variable's value), ``mult``: the
    whole forward multiplier's exponent (to predict the stored tensor's init)."""

    init: dict
    update: dict
    gauge: dict
    graph: dict
    mult: dict = field(default_factory=dict)
    shift: dict = field(default_factory=dict)     # var -> init exponent of its canonical above its role's (a tie)
    tensor_update: dict = field(default_factory=dict)   # tensor -> update offset for its own row (biases too)

    def value(self, var) -> float:
        return self.gauge.get(var, 0.0) - self.graph.get(var, 0.0)

    def suspects(self, tol=0.05) -> set:
        """Variables whose init and update are not one multiplier (beyond an init below the update's)."""
        return {v for v in self.gauge if math.isfinite(self.update[v]) and abs(self.update[v] - self.gauge[v]) > tol}


# ----------------------------------------------------------------------------------------------- solving
def _violations(graph, value, kinds=("forced", "logits", "equal")):
    """[(constraint, residual, {var: coef})] of the constraints that fail under ``value``, in forward order."""
    off, sym = graph.evaluate(value)
    out = []
    for con in sorted(graph.constraints, key=lambda c: c.node):
        if con.kind not in kinds:
            continue
        if con.kind == "equal":                 # operands that differ: each should sit at the canonical 0
            live = [j for j in con.terms if math.isfinite(off[j])]
            if len(live) < 2 or max(off[j] for j in live) - min(off[j] for j in live) <= TOL:
                continue
            for j in live:
                if abs(off[j]) > TOL:
                    out.append((con, off[j], {v: c for v, c in sym[j].items() if abs(c) > TOL}))
            continue
        res, coefs = graph.residual(con, off, sym, value)
        if abs(res) > TOL:
            out.append((con, res, coefs))
    return out


def solve(graph, base, adjustable, last_use, also=None):
    """Gauges that make every constraint hold: start from ``base(var)``; for the first failing constraint in
    forward order, shift the one adjustable knob on it (``adjustable``: {var: knob} — a tensor's name, or a tied
    read-out's own multiplier; of several, the one read last in the forward: ``last_use[knob]``) by
    −residual/coefficient, and repeat (the operands of a sum that differ are each brought to 0); ``also``: {var:
    knobs that move it too} (a tied read-out moves with its tensor). Returns ({knob: shift}, [(constraint,
    residual)] that no knob could absorb)."""
    also = also or {}
    shift, locked, left = {}, set(), []

    def value(v):
        return base(v) + shift.get(adjustable.get(v), 0.0) + sum(shift.get(k, 0.0) for k in also.get(v, ()))

    for _ in range(len(graph.constraints) + len(adjustable) + 1):
        seen = {(c, round(r, 9)) for c, r in left}
        viol = [x for x in _violations(graph, value) if (x[0], round(x[1], 9)) not in seen]
        if not viol:
            break
        con, res, coefs = viol[0]
        per = {}
        for v, c in coefs.items():
            t = adjustable.get(v)
            if t is not None and t not in locked:
                per[t] = per.get(t, 0.0) + c
        per = {t: c for t, c in per.items() if abs(c) > TOL}
        if not per:
            left.append((con, res))
            continue
        t = max(per, key=lambda x: last_use.get(x, -1))
        shift[t] = shift.get(t, 0.0) - res / per[t]
        locked.add(t)
    return shift, left


def attribute(graph, gauges, tol=0.05) -> dict:
    """{var: required value} for the constraints the gauges break where one variable is to blame: the only one
    on the constraint that is a suspect (init and rate not one multiplier) or away from 0; the check predicts that
    tensor's rows as if it had the required gauge (so it, not the rows after it, is named first)."""
    suspects = gauges.suspects(tol)
    req = {}
    for con, res, coefs in _violations(graph, gauges.value, kinds=("forced", "logits")):
        if abs(res) <= tol:
            continue
        cand = [v for v in coefs if v not in req and (v in suspects or abs(gauges.value(v)) > tol)]
        if len(cand) == 1:
            v = cand[0]
            req[v] = gauges.value(v) - res / coefs[v]
    return req


__all__ = ["OffsetGraph", "Use", "Constraint", "Gauges", "build", "role_of_use", "use_gauge", "choose", "solve",
           "attribute", "table_row", "PASS", "RESET"]
