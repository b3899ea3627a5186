"""Exact solver for piecewise-linear exponent constraints (sympy + a feasibility LP).

Constraints are relations ``e ⋈ 0`` with ``e`` linear in the unknowns and parameters except for
``Min``/``Max`` nodes. The solver branches on which argument of each ``Min``/``Max`` is active
(adding the ordering conditions), solves the linear equalities exactly (``sympy.linsolve``),
substitutes into the inequalities, and keeps a branch if the remaining linear conditions are
feasible (checked exactly for one free symbol, by a small LP otherwise). The result is a
:class:`Solution`: a list of :class:`Piece` s, each a family ``unknown → expression`` in its
free symbols (unconstrained unknowns and parameters such as ``gamma_bar_L``) valid under its
conditions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from .expr import as_exponent

_REL = {"=0": "eq", "<=0": "le", ">=0": "ge", "<0": "lt", ">0": "gt"}


@dataclass(frozen=True)
class Piece:
    values: dict            # unknown Symbol -> expression
    conditions: tuple       # sympy relationals in the free symbols (all must hold)
    free: tuple             # free symbols (sorted by name)
    branch: tuple = ()      # which Min/Max argument was taken (for diagnostics)

    def value(self, name):
        for k, v in self.values.items():
            if k.name == name:
                return v
        raise KeyError(name)

    def __str__(self):
        vals = ", ".join(f"{k} = {v}" for k, v in sorted(self.values.items(), key=lambda kv: kv[0].name))
        cond = " and ".join(str(c) for c in self.conditions) or "always"
        return f"{{{vals}}} if {cond}; free: {', '.join(map(str, self.free)) or 'none'}"


@dataclass(frozen=True)
class Solution:
    pieces: tuple
    unknowns: tuple
    constraints: tuple      # (label, relation) pairs that were solved
    branches_tried: int

    @property
    def empty(self) -> bool:
        return not self.pieces

    @property
    def free_symbols(self) -> set:
        out = set()
        for p in self.pieces:
            out |= set(p.free)
        return out

    def unique(self) -> Piece:
        """The single solution piece; ``ValueError`` when there is none or several."""
        if not self.pieces:
            raise ValueError("the constraints have no solution:\n  " +
                             "\n  ".join(f"{lab}: {rel}" for lab, rel in self.constraints))
        if len(self.pieces) > 1:
            raise ValueError("the constraints have several solution pieces:\n  " + "\n  ".join(map(str, self.pieces)))
        return self.pieces[0]

    def piece_for(self, assumptions: dict | None = None) -> Piece:
        """The piece whose conditions hold for the given parameter values (or hold identically)."""
        for p in self.pieces:
            conds = [c.subs(assumptions or {}) for c in p.conditions]
            if all(c == sp.true or c is True for c in conds):
                return p
        return self.unique()

    def __str__(self):
        if not self.pieces:
            return "no solution"
        return "\n".join(f"piece {i}: {p}" for i, p in enumerate(self.pieces))


def _innermost_minmax(exprs):
    atoms = set()
    for e in exprs:
        atoms |= e.atoms(sp.Min, sp.Max)
    for a in sorted(atoms, key=sp.default_sort_key):
        if not any(arg.has(sp.Min, sp.Max) for arg in a.args):
            return a
    return None


def _branches(items):
    """Expand Min/Max: yields (list of (expr, kind, label), extra conditions, branch tags)."""
    stack = [(items, [], ())]
    while stack:
        cur, conds, tags = stack.pop()
        exprs = [e for e, _, _ in cur] + [c for c, _ in conds]
        node = _innermost_minmax(exprs)
        if node is None:
            yield cur, conds, tags
            continue
        is_min = isinstance(node, sp.Min)
        for i, arg in enumerate(node.args):
            new = [(e.xreplace({node: arg}), k, lab) for e, k, lab in cur]
            newc = [(c.xreplace({node: arg}), k) for c, k in conds]
            for j, other in enumerate(node.args):
                if j != i:  # arg active: arg <= other (Min) or arg >= other (Max)
                    newc.append(((other - arg) if is_min else (arg - other), "ge"))
            stack.append((new, newc, tags + (f"{node} -> {arg}",)))


def _as_linear(e, syms):
    e = sp.expand(e)
    coeffs = [float(e.coeff(s)) for s in syms]
    const = float(e.subs({s: 0 for s in syms}))
    return np.array(coeffs), const


def _interval(conds, s):
    """Exact feasible interval of linear conditions in one symbol: (lo, lo_strict, hi, hi_strict, ok)."""
    lo, hi, los, his = -sp.oo, sp.oo, False, False
    for e, k in conds:
        a = sp.expand(e).coeff(s)
        b = sp.expand(e - a * s)
        if a.free_symbols or b.free_symbols:
            return None
        if a == 0:
            val = {"ge": b >= 0, "gt": b > 0, "le": b <= 0, "lt": b < 0, "eq": b == 0}[k]
            if not bool(val):
                return (0, False, 0, False, False)
            continue
        root = -b / a
        kinds = [k] if k != "eq" else ["ge", "le"]
        for kk in kinds:
            # a s + b ≥ 0  ⇔  s ≥ root (a > 0) or s ≤ root (a < 0)
            lower = (kk in ("ge", "gt")) == (a > 0)
            strict = kk in ("gt", "lt")
            if lower:
                if root > lo or (root == lo and strict):
                    lo, los = root, strict
            else:
                if root < hi or (root == hi and strict):
                    hi, his = root, strict
    ok = lo < hi or (lo == hi and not los and not his)
    return (lo, los, hi, his, bool(ok))


def _feasible(conds, syms) -> bool:
    """Exact check for ≤1 symbol, LP otherwise. ``conds``: list of (expr, kind) meaning expr ⋈ 0."""
    if not conds:
        return True
    if len(syms) == 1:
        iv = _interval(conds, syms[0])
        if iv is not None:
            return iv[4]
        s = syms[0]
        rels = []
        for e, k in conds:
            rels.append({"ge": e >= 0, "gt": e > 0, "le": e <= 0, "lt": e < 0, "eq": sp.Eq(e, 0)}[k])
        sset = sp.S.Reals
        for r in rels:
            if r is sp.true:
                continue
            if r is sp.false:
                return False
            sset = sset.intersect(sp.solveset(r, s, sp.S.Reals))
        return sset != sp.S.EmptySet
    from scipy.optimize import linprog

    n = len(syms)
    A_ub, b_ub, A_eq, b_eq = [], [], [], []
    for e, k in conds:
        coef, const = _as_linear(e, syms)
        if k in ("ge", "gt"):   # coef·x + const >= (t)  ->  -coef·x + t*[strict] <= const
            A_ub.append(np.r_[-coef, 1.0 if k == "gt" else 0.0]); b_ub.append(const)
        elif k in ("le", "lt"):
            A_ub.append(np.r_[coef, 1.0 if k == "lt" else 0.0]); b_ub.append(-const)
        else:
            A_eq.append(np.r_[coef, 0.0]); b_eq.append(-const)
    c = np.zeros(n + 1); c[-1] = -1.0
    bounds = [(None, None)] * n + [(0, 1)]
    res = linprog(c, A_ub=np.array(A_ub) if A_ub else None, b_ub=np.array(b_ub) if b_ub else None,
                  A_eq=np.array(A_eq) if A_eq else None, b_eq=np.array(b_eq) if b_eq else None,
                  bounds=bounds, method="highs")
    if res.status != 0:
        return False
    strict = any(k in ("gt", "lt") for _, k in conds)
    return (not strict) or res.x[-1] > 1e-9


def _simplify_conditions(conds, syms):
    out = []
    for e, k in conds:
        rel = {"ge": e >= 0, "gt": e > 0, "le": e <= 0, "lt": e < 0, "eq": sp.Eq(e, 0)}[k]
        if rel is sp.true:
            continue
        out.append(rel)
    if len(syms) == 1 and out:
        s = syms[0]
        iv = _interval(conds, s)
        if iv is not None:
            lo, los, hi, his, _ = iv
            if lo == hi:
                return (sp.Eq(s, lo),)
            res = []
            if lo != -sp.oo:
                res.append(sp.StrictLessThan(lo, s) if los else sp.LessThan(lo, s))
            if hi != sp.oo:
                res.append(sp.StrictLessThan(s, hi) if his else sp.LessThan(s, hi))
            return tuple(res)
        sset = sp.S.Reals
        for r in out:
            sset = sset.intersect(sp.solveset(r, s, sp.S.Reals))
        if sset == sp.S.Reals:
            return ()
        rel = sset.as_relational(s)
        return tuple(rel.args) if isinstance(rel, sp.And) else (rel,)
    uniq = []
    for r in out:
        if r not in uniq:
            uniq.append(r)
    return tuple(uniq)


def solve_quantities(quantities, unknowns, fixed=None) -> Solution:
    """Solve ``quantity.exponent ⋈ 0`` for the ``unknowns`` (Symbols).

    ``fixed``: extra equalities ``{expr: value}`` (gauge conditions, e.g. ``{a_hidden: 0}``).
    """
    unknowns = tuple(sorted(unknowns, key=lambda s: s.name))
    items = [(sp.expand(q.exponent), _REL[q.requirement], q.key) for q in quantities]
    for k, v in (fixed or {}).items():
        items.append((sp.expand(as_exponent(k, "fixed key") - as_exponent(v, f"fixed[{k}]")), "eq", f"fix {k} = {v}"))
    constraints = tuple((lab, {"eq": "= 0", "le": "<= 0", "ge": ">= 0", "lt": "< 0", "gt": "> 0"}[k].join(
        [str(e) + " ", ""])) for e, k, lab in items)
    params = set()
    for e, _, _ in items:
        params |= e.free_symbols
    params -= set(unknowns)
    pieces = []
    tried = 0
    for cur, extra, tags in _branches(items):
        tried += 1
        eqs = [e for e, k, _ in cur if k == "eq"]
        ineqs = [(e, k) for e, k, _ in cur if k != "eq"] + list(extra)
        sol = sp.linsolve(eqs, *unknowns) if eqs else sp.FiniteSet(tuple(unknowns))
        if sol == sp.S.EmptySet or len(sol) == 0:
            continue
        (tup,) = tuple(sol)
        values = dict(zip(unknowns, (sp.expand(t) for t in tup)))
        free = set()
        for v in values.values():
            free |= v.free_symbols
        free |= params
        # linsolve may leave consistency conditions among parameters: re-check every equation
        sub_conds = [(sp.expand(e.xreplace(values)), "eq") for e in eqs]
        sub_conds = [(e, k) for e, k in sub_conds if e != 0]
        sub = [(sp.expand(e.xreplace(values)), k) for e, k in ineqs] + sub_conds
        ok = True
        rest = []
        for e, k in sub:
            if e.free_symbols:
                rest.append((e, k))
                continue
            val = {"ge": e >= 0, "gt": e > 0, "le": e <= 0, "lt": e < 0, "eq": e == 0}[k]
            if not bool(val):
                ok = False
                break
        if not ok:
            continue
        syms = sorted(set().union(*[e.free_symbols for e, _ in rest]) if rest else set(), key=lambda s: s.name)
        if not _feasible(rest, syms):
            continue
        conds = _simplify_conditions(rest, syms)
        if len(syms) == 1 and len(conds) == 1 and isinstance(conds[0], sp.Equality):
            # the inequalities pin the single free symbol: substitute it
            (s,) = syms
            val = sp.solve(conds[0], s)[0]
            if s in values:
                values = {k: sp.expand(v.subs(s, val)) for k, v in values.items()}
                free.discard(s)
                conds = ()
            elif any(s in v.free_symbols for v in values.values()):
                values = {k: sp.expand(v.subs(s, val)) for k, v in values.items()}
        piece = Piece(values, conds, tuple(sorted(free, key=lambda s: s.name)), tags)
        if not any(p.values == piece.values and set(p.conditions) == set(piece.conditions) for p in pieces):
            pieces.append(piece)
    # merge pieces with identical values (union of conditions is represented by keeping the first
    # when one piece's conditions are a subset of another's)
    merged = []
    for p in pieces:
        dup = [m for m in merged if m.values == p.values]
        if dup and (set(dup[0].conditions) <= set(p.conditions)):
            continue
        if dup and set(p.conditions) <= set(dup[0].conditions):
            merged[merged.index(dup[0])] = p
            continue
        merged.append(p)
    # drop degenerate pieces (conditions pin a parameter) contained in a wider piece
    final = []
    for p in merged:
        pins = {}
        for c in p.conditions:
            if isinstance(c, sp.Equality) and len(c.free_symbols) == 1:
                (s,) = c.free_symbols
                pins[s] = sp.solve(c, s)[0]
        contained = False
        if pins:
            for q in merged:
                if q is p:
                    continue
                same = all(sp.expand(q.values[k].subs(pins) - v.subs(pins)) == 0 for k, v in p.values.items())
                holds = all(bool(c.subs(pins)) for c in q.conditions)
                if same and holds:
                    contained = True
                    break
        if not contained:
            final.append(p)
    return Solution(tuple(final), unknowns, constraints, tried)
