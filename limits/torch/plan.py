"""From a plan to the predictions of every row: the gauges of each tensor use (:mod:`limits.torch.offsets`) from
what :func:`limits.torch.parameterise` applied — or, for a module checked as built, from its measured init and its
optimizer groups' rates — and the offsets they give each row of :func:`limits.torch.coord_check`.

    plan      stored init N^{−b} · (the factory's own init exponent), rate N^{−c}, forward multipliers N^{−a}, the
              query block's r^{q}, a tied read-out's r^{−a_r}                              (exact)
    as built  init exponent fitted over the check's widths (rounded to ¼ within 3 SE), rate exponent of the
              optimizer groups over the widths                                            (measured)

Row offsets (``row_offsets``): a module row sits at its output node's offset, a packed projection at the larger
of its row blocks', a tensor's effect at its owner's output offset (with the gauge the constraints require of it:
:func:`limits.torch.offsets.attribute`) — or, for a tensor its owner reads between other layers (a class token), at
the op where it enters the stream, as :mod:`limits.torch.recording` measures it — a forced point (an input of a non-homogeneous op, the output) at 0;
a read-out use of a tensor that an earlier use of the forward read as an input (a tied embedding) has a coherent
self-term at init: its scale is predicted in [e, e + ½]; a read-out initialised below the table's scale makes
the scale at init of the rows it feeds an upper bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .offsets import Gauges, attribute, choose, table_row, use_gauge
from .graph import SHAPE_OPS, plain_key

_SP_B = {"input": 0.0, "hidden": 0.5, "output": 0.5, "vector": 0.0}


def _base_init(q):
    """The factory's own init exponent of a rule's stored tensor (SP's for its role, or measured for a tie)."""
    b = getattr(q, "base_init", None)
    return b if b is not None else -_SP_B.get(q.role, 0.0)


def _own_mult(q):
    """The forward multiplier's exponent of a rule's tensor: r^−a, and the query block's r^q when it is all of it."""
    return -q.a + (q.query_exponent if q.query_rows == (0, q.shape[0]) else 0.0)


def plan_gauges(P, graph) -> Gauges:
    """:class:`limits.torch.offsets.Gauges` of every use in ``graph`` under the plan of ``P`` (a Parameterised)."""
    rules = {plain_key(q.name): q for q in P.rules}
    ties = {t.module: t for t in P.readouts}
    identity = all(q.init_exponent == 0 and q.a == 0 and q.c == 0 for q in P.rules)
    init, upd, gauge, in_graph, mults, shift = {}, {}, {}, {}, {}, {}
    for u in graph.uses:
        q = rules.get(u.param)
        if q is None:
            continue
        mult = -q.a
        full = q.query_rows is not None and q.query_rows == (0, q.shape[0])
        if u.var.endswith("|q") or (u.in_leaf and full):
            mult += q.query_exponent
        mod = graph.names[u.node] if u.in_leaf else None
        role = u.role
        if mod in ties and ties[mod].storage == q.name:
            mult = -ties[mod].exponent          # the read-out's own multiplier on the stored tensor, not the embedding's
            if identity:                        # a table that keeps the factory: the tie's rule, the embedding's row
                role = q.role
                shift[u.var] = sum(table_row(P.table, u.role)[:2]) - sum(table_row(P.table, q.role)[:2])
        o_i, o_u = use_gauge(_base_init(q) + q.init_exponent, -q.c, mult, role, P.table, P.optimizer_name)
        init[u.var], upd[u.var], mults[u.var] = o_i, o_u, mult
        gauge[u.var] = choose(o_i, o_u, u.role)
        if not u.in_leaf:
            in_graph[u.var] = -q.a              # a raw parameter's parametrization is a node of the graph
    tensor_update = {plain_key(q.name): use_gauge(_base_init(q) + q.init_exponent, -q.c, _own_mult(q), q.role, P.table,
                                                  P.optimizer_name)[1] for q in P.rules if q.role != "constant"}
    return Gauges(init, upd, gauge, in_graph, mults, shift, tensor_update)


def measured_gauges(rules, table, optimizer, graph, init_exp, lr_exp) -> Gauges:
    """Gauges of a module checked as built: ``init_exp``/``lr_exp`` {tensor: exponent} measured (module docstring)."""
    by = {plain_key(q.name): q for q in rules}
    init, upd, gauge = {}, {}, {}
    for u in graph.uses:
        if u.param not in by or u.param not in init_exp or u.param not in lr_exp:
            continue
        o_i, o_u = use_gauge(init_exp[u.param], lr_exp[u.param], 0.0, u.role, table, optimizer)
        init[u.var], upd[u.var] = o_i, o_u
        gauge[u.var] = choose(o_i, o_u, u.role)
    tensor_update = {n: use_gauge(init_exp.get(n, 0.0), lr_exp[n], 0.0, by[n].role, table, optimizer)[1]
                     for n in lr_exp if n in by and by[n].role != "constant"}
    return Gauges(init, upd, gauge, {}, {v: 0.0 for v in gauge}, {}, tensor_update)


def fitted_exponent(widths, values, quarter=True) -> float:
    """Width exponent of ``values`` (k widths × S seeds, positive): the log-log slope of the means, rounded to a
    quarter when within max(0.08, 3 SE) of one; −inf when every value is 0 (a zero init)."""
    v = np.asarray(values, float)
    if np.all(v == 0):
        return -math.inf
    m = np.nanmean(v, axis=1)
    if not np.all(m > 0):
        return math.nan
    x, y = np.log(np.asarray(widths, float)), np.log(m)
    A = np.vstack([x, np.ones_like(x)]).T
    coef, res, *_ = np.linalg.lstsq(A, y, rcond=None)
    slope = float(coef[0])
    dof = max(len(x) - 2, 1)
    s2 = float(np.sum((y - A @ coef) ** 2)) / dof
    se = math.sqrt(s2 / float(np.sum((x - x.mean()) ** 2))) if len(x) > 2 else 0.0
    q = round(slope * 4) / 4
    return q if quarter and abs(slope - q) <= max(0.08, 3 * se) else slope


@dataclass(frozen=True)
class RowOffset:
    """Offset of a row's predictions: ``offset`` (added to the scale at init and the change), ``tie_range`` (the
    scale at init in [e, e + ½]: a coherent self-term), ``upper_init`` (the scale at init is an upper bound),
    ``upper_effect`` (a tensor's effect is an upper bound: a bias below its module's scale), ``change_low`` (the
    change may fall short by N^this: a read-out initialised below the table's moves its rows less through its
    own init — W₀·Δh — and, under SGD, back-propagates less to every layer), ``init`` (a tensor's
    stored init exponent that realises the table, nan: not judged), ``direct`` (a tensor's effect is read on the
    module that uses it, not through other layers)."""

    offset: float = 0.0
    tie_range: bool = False
    upper_init: bool = False
    upper_effect: bool = False
    init: float = math.nan
    direct: bool = True
    init_shift: float = 0.0
    change_low: float = 0.0
    judge_effect: bool = True


class _Rows:
    """The offsets of one check's rows (:func:`row_offsets`): the graph evaluated at the required gauges."""

    def __init__(self, graph, gauges, table, optimizer):
        self.graph, self.gauges, self.table = graph, gauges, table
        self.req = attribute(graph, gauges)
        self.final = {v: (self.req[v] + gauges.graph.get(v, 0.0)) if v in self.req else g
                      for v, g in gauges.gauge.items()}
        self.off, self.sym = graph.evaluate(self.value)
        self.forced = graph.forced_nodes()
        self.below = {v for v in self.final if v.split("|")[1] in ("output", "vector")
                      and gauges.init[v] < self.final[v] - 0.05}
        self.short = {v: gauges.init[v] - self.final[v] for v in self.below if v.split("|")[1] == "output"}
        self.sgd_low = min(self.short.values(), default=0.0) if optimizer == "sgd" else 0.0
        first_input, self.uses_of = {}, {}
        for u in graph.uses:
            self.uses_of.setdefault(u.param, []).append(u)
            if u.role == "input":
                first_input.setdefault(u.param, u.node)
        self.self_read = {u.var for u in graph.uses          # read-outs of a tensor the stream carries (a tie)
                          if u.role == "output" and first_input.get(u.param, 1 << 60) < u.node}

    def value(self, v):
        return self.req[v] if v in self.req else self.gauges.value(v)

    def at(self, node) -> float:
        """A node's offset (0 at a forced point); a packed projection's at the larger of its row blocks."""
        g = self.graph
        if node is None or node in self.forced or not math.isfinite(self.off[node]):
            return 0.0
        blocks = g.row_blocks.get(g.names[node]) if g.kinds[node] == "module" else None
        extra = max(0.0, self.value(blocks[1]) - self.value(blocks[0])) if blocks and blocks[1] else 0.0
        return self.off[node] + extra

    def module(self, key) -> RowOffset:
        node = self.graph.module_node(key)
        vs = set(self.sym[node] or {}) if node is not None else set()
        shift = max((self.gauges.shift.get(u.var, 0.0) for u in self.graph.uses if u.node == node), default=0.0)
        low = min([self.short[v] for v in vs if v in self.short] + [self.sgd_low])
        return RowOffset(self.at(node), bool(vs & self.self_read), bool(vs & self.below), init_shift=shift,
                         change_low=low)

    def tensor(self, key, q, owner) -> RowOffset:
        g, name = self.graph, plain_key(key)
        node = g.module_node(owner)
        leaf = node is not None and g.kinds[node] == "module" and g.names[node] == owner
        direct = node is not None and (leaf or not any(
            g.kinds[i] == "module" and (s == owner or s.startswith(owner + ".") or owner == "")
            for i, s in enumerate(g.scopes)))
        mine = self.uses_of.get(name, [])
        init = math.nan
        if mine:
            v = mine[0].var
            a, b, _ = table_row(self.table, mine[0].role)
            init = self.final[v] - self.gauges.mult.get(v, 0.0) - (a + b) + self.gauges.shift.get(v, 0.0)
        o = self.at(node)
        if mine and not direct and not mine[0].in_leaf:     # read where it enters the stream (the recorder's rule)
            o, direct = self.entry(mine[0].node), True
        if q is not None and q.role in ("vector", "constant") and not mine and leaf:   # a bias: at its module's
            upd = self.gauges.tensor_update.get(name, math.nan)                        # scale, or below (dominated)
            return RowOffset(o, upper_effect=bool(math.isfinite(upd) and upd < o - 0.05), init=init, direct=direct)
        return RowOffset(o, upper_init=bool(mine) and mine[0].var in self.below, init=init, direct=direct,
                         change_low=self.sgd_low)

    def entry(self, node) -> float:
        """Offset of a tensor's effect where it enters the stream (:mod:`limits.torch.recording`): at the first op
        reading parameter node ``node`` other than through shape ops — its own path's offset into a sum or
        concatenation (the op adds its change unscaled), the op's offset otherwise (``gamma * x``)."""
        g = self.graph
        while True:
            nxt = next((j for j in range(node + 1, len(g.recs)) if g.recs[j] is not None
                        and any(o == node for o, _ in g.recs[j].operands)), None)
            if nxt is not None and g.kinds[nxt] == "call" and g.names[nxt] in SHAPE_OPS:
                node = nxt
                continue
            if nxt is None or g.recs[nxt].mode == "max":
                return self.off[node] if math.isfinite(self.off[node]) else 0.0
            return self.at(nxt)


def row_offsets(order, graph, gauges, rule_of, owner_of, table, optimizer="adam") -> tuple:
    """({row key: :class:`RowOffset`}, required gauges, notes) for the recorded rows ``order`` [(key, kind,
    extra)]; ``owner_of(param) -> module path`` of the module whose output a tensor's effect is measured on."""
    rows = _Rows(graph, gauges, table, optimizer)
    out = {}
    for key, kind, _ in order:
        if kind == "module":
            out[key] = rows.module(key)
        elif kind == "tensor":
            out[key] = rows.tensor(key, rule_of.get(plain_key(key)), owner_of(key))
    return out, rows.req, _notes(graph, gauges, rows.req, rows.final, rows.below)


def _notes(graph, gauges, req, final, below) -> list:
    """Human-readable lines: constants found, tensors whose plan differs from the table, read-outs below it."""
    notes = []
    for node, op, e, scope in graph.constants[:12]:
        notes.append(f"width-dependent constant ×N^{e:+.3g} ({op} in {scope or 'the root module'!r})")
    for v, r in req.items():
        notes.append(f"{v.split('|')[0]}: the table needs its multiplier at N^{final[v]:+.3g}, the plan gives "
                     f"N^{gauges.gauge[v]:+.3g}")
    for v in sorted(below):
        if v.split("|")[1] != "output":
            continue
        found = "zero" if not math.isfinite(gauges.init[v]) else f"N^{gauges.init[v] - final[v]:+.3g} times"
        notes.append(f"read-out {v.split('|')[0]}: initialised {found} the table's scale (smaller: accepted, its "
                     "scale at init is an upper bound)")
    return notes


__all__ = ["plan_gauges", "measured_gauges", "fitted_exponent", "row_offsets", "RowOffset"]
