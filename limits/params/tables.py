"""Tables of named parameterisations (Markdown, LaTeX, dict), every entry derived by the solver.

Variance convention rows follow seed 000 Table 2 (``a_1, b_1, a_l, b_l (l ≥ 2), c, d``; hidden and
output rows are merged when they coincide, ``c`` is one row when the learning rate is global);
std convention rows give ``a, b, c`` per layer class (``gauge="a0"`` → seed 003 Table 1's gauge)
plus ``r`` and the regime from :func:`limits.params.classify`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import sympy as sp

from .expr import fmt, latex
from .parameterisation import check_choice

_LAB = {"input": ("1", "1"), "hidden": ("l", "l"), "output": ("L", "L")}


@dataclass(frozen=True)
class Table:
    title: str
    convention: str
    algorithm: str
    columns: tuple
    rows: tuple            # (key, text label, latex label, cells: tuple of sympy expr / str)
    notes: tuple
    parameterisations: tuple

    def cell(self, row_key, column):
        for key, _, _, cells in self.rows:
            if key == row_key:
                return cells[self.columns.index(column)]
        raise KeyError(row_key)

    def to_dict(self) -> dict:
        txt = lambda v: v if isinstance(v, str) else fmt(v)  # noqa: E731
        return {"title": self.title, "convention": self.convention, "algorithm": self.algorithm,
                "columns": list(self.columns),
                "rows": [{"key": k, "label": lab, "cells": {c: txt(v) for c, v in zip(self.columns, cells)}}
                         for k, lab, _, cells in self.rows],
                "notes": list(self.notes),
                "parameterisations": {c: (p.to_dict() if p is not None else None)
                                      for c, p in zip(self.columns, self.parameterisations)}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False)

    def to_markdown(self) -> str:
        txt = lambda v: v if isinstance(v, str) else fmt(v)  # noqa: E731
        lines = [f"**{self.title}**", "", "| exponent | " + " | ".join(self.columns) + " |",
                 "|---|" + "---|" * len(self.columns)]
        for _, lab, _, cells in self.rows:
            lines.append(f"| {lab} | " + " | ".join(txt(v) for v in cells) + " |")
        if self.notes:
            lines.append("")
            lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        def tex(v):
            if isinstance(v, str):
                return v.replace("_", r"\_").replace("μ", r"$\mu$")
            return f"${latex(v)}$"

        head = " & ".join(["exponent"] + [c.replace("mu", r"$\mu$") for c in self.columns])
        lines = [r"\begin{table}[t]", r"\centering",
                 r"\caption{" + self.title.replace("_", r"\_").replace("μ", r"$\mu$") + "}",
                 r"\begin{tabular}{l" + "c" * len(self.columns) + "}", r"\hline", head + r" \\", r"\hline"]
        for _, _, tl, cells in self.rows:
            lines.append(" & ".join([tl] + [tex(v) for v in cells]) + r" \\")
        lines += [r"\hline", r"\end{tabular}"]
        for n in self.notes:
            lines.append(r"\par\footnotesize " + n.replace("_", r"\_").replace("≤", r"$\le$").replace("≥", r"$\ge$"))
        lines.append(r"\end{table}")
        return "\n".join(lines) + "\n"

    def __str__(self):
        return self.to_markdown()


def _regime(p):
    """(r, regime). With a symbolic γ̄_L the regime is evaluated at the end points γ̄_L = 0 and −1 of
    the validity interval of seed 003's PC μP (conditions are piecewise linear and Min(0, γ̄_L) is
    linear there, so agreement at both end points means the regime holds on the whole interval)."""
    from .classify import classify, update_exponents

    if not p.free_symbols:
        c = classify(p)
        return c.r, c.regime
    g = p.gamma_bar_L
    if g is not None and g.free_symbols == p.free_symbols and len(g.free_symbols) == 1:
        # γ̄_L may be any symbol s (any assumptions) or a linear expression in it: rewrite r in a
        # nonpositive γ̄_L (its validity side), and evaluate the regime at the s giving γ̄_L = 0, −1
        (s,) = g.free_symbols
        gam = sp.Symbol("gamma_bar_L_", nonpositive=True)
        x = sp.Dummy("x", real=True)             # solve without the user's assumptions on s
        gx = g.subs(s, x)
        sol = sp.solve(sp.Eq(gx, gam), x, dict=True)
        if len(sol) == 1:
            r = sp.simplify(update_exponents(p)["r"].subs(s, sol[0][x])).subs(gam, g)
            ends = [sp.solve(sp.Eq(gx, v), x, dict=True) for v in (0, -1)]
            if all(len(e) == 1 for e in ends):
                regs = {classify(p.subs({s: e[0][x]})).regime for e in ends}
                return r, (regs.pop() + " (−1 ≤ γ̄_L ≤ 0)") if len(regs) == 1 else "depends on γ̄_L"
    return update_exponents(p)["r"], "(symbolic)"


def make_table(names=("SP", "NTK", "MF", "muP"), algorithm="bp", convention="variance", gauge=None,
               optimizer="sgd", with_regime=True, **extra) -> Table:
    from .named import canonical_name

    check_choice(convention, ("variance", "std"), "convention")
    if isinstance(names, str):
        names = [names]
    names = [canonical_name(n) for n in names]
    if not names:
        raise ValueError("names must list at least one parameterisation")
    cols = [(n, n, algorithm, dict(extra, optimizer=optimizer)) for n in names]
    g = "" if gauge is None else f", gauge {gauge}"
    alg = algorithm + (f"/{optimizer}" if optimizer != "sgd" else "")
    title = f"Width parameterisations ({convention} convention, algorithm {alg}{g}; derived by the constraint solver)"
    return make_column_table(cols, convention=convention, gauge=gauge, with_regime=with_regime, title=title,
                             algorithm=algorithm)


def make_column_table(columns, convention="std", gauge=None, with_regime=True, title=None, algorithm="mixed") -> Table:
    """Table with one column per ``(label, name, algorithm, extras)`` — e.g. seed 003 Table 1,
    which puts SGD μP, GNT μP, PC μP(γ̄_L) and TP μP side by side."""
    from .named import named

    check_choice(convention, ("variance", "std"), "convention")
    if not columns:
        raise ValueError("columns must not be empty")
    names = [c[0] for c in columns]
    if len(set(names)) != len(names):
        raise ValueError(f"column labels must be unique, got {names}")
    params, notes = [], []
    for n, nm, alg, ex in columns:
        try:
            kw = dict(ex)
            if gauge is not None:
                kw["gauge"] = gauge
            params.append(named(nm, convention=convention, algorithm=alg, **kw))
        except ValueError as exc:
            params.append(None)
            notes.append(f"{n}: {str(exc).splitlines()[0]}")
    for n, p in zip(names, params):
        if p is not None:
            notes += [f"{n}: {x}" for x in p.notes]
    valid = [p for p in params if p is not None]

    def cells(fn):
        return tuple("—" if p is None else fn(p) for p in params)

    rows = []
    merge = all(p.a[1] == p.a[2] and p.b[1] == p.b[2] for p in valid) and convention == "variance"
    for s in "ab":
        rows.append((f"{s}_input", f"{s}_1", f"${s}_1$", cells(lambda p, s=s: getattr(p, s)[0])))
    for s in "ab":
        if merge:
            rows.append((f"{s}_hidden", f"{s}_l (l ≥ 2)", f"${s}_\\ell,\\ \\ell\\ge 2$", cells(lambda p, s=s: getattr(p, s)[1])))
        else:
            rows.append((f"{s}_hidden", f"{s}_l (hidden)", f"${s}_\\ell$ (hidden)", cells(lambda p, s=s: getattr(p, s)[1])))
    if not merge:
        for s in "ab":
            rows.append((f"{s}_output", f"{s}_L (output)", f"${s}_L$ (output)", cells(lambda p, s=s: getattr(p, s)[2])))
    if all(p.c[0] == p.c[1] == p.c[2] for p in valid):
        rows.append(("c", "c", "$c$", cells(lambda p: p.c[0])))
    else:
        rows.append(("c_input", "c_1", "$c_1$", cells(lambda p: p.c[0])))
        rows.append(("c_hidden", "c_l (hidden)", r"$c_\ell$ (hidden)", cells(lambda p: p.c[1])))
        rows.append(("c_output", "c_L (output)", "$c_L$ (output)", cells(lambda p: p.c[2])))
    if convention == "variance":
        rows.append(("d", "d", "$d$", cells(lambda p: p.d)))
    if any(p.depth_alpha is not None for p in valid):
        rows.append(("alpha", "α (branch L^-α)", r"$\alpha$", cells(lambda p: "—" if p.depth_alpha is None else p.depth_alpha)))
        rows.append(("gamma", "γ (update L^-γ)", r"$\gamma$", cells(lambda p: "—" if p.depth_gamma is None else p.depth_gamma)))
    if with_regime:
        reg = [None if p is None else _regime(p) for p in params]
        rows.append(("r", "r (Δh = Θ(N^-r))", "$r$", tuple("—" if x is None else x[0] for x in reg)))
        rows.append(("regime", "regime", "regime", tuple("—" if x is None else x[1] for x in reg)))
    title = title or f"Parameterisations ({convention} convention; derived by the constraint solver)"
    return Table(title, convention, algorithm, tuple(names), tuple(rows), tuple(dict.fromkeys(notes)), tuple(params))
