"""Named parameterisations, each DERIVED by the solver from desiderata plus one defining
(gauge) condition — no table of exponents is stored here.

| name | desiderata solved | defining condition |
|---|---|---|
| SP | initialisation Θ(1) (read-out at fan-in scale) | no multipliers (a_l = 0), raw learning rate Θ(1) |
| SP-stable | SP initialisation + stable + Condition 3.2 (hidden updates reach the output) | a_l = 0, one global learning rate (TP4's "SP, lr η/N") |
| NTK | init + df/dt = Θ(1) (variance) / kernel regime (std) | unit-variance weights (b_l = 0), no output scale (d = 0) |
| MF | Desiderata 1–3 / feature learning | unit-variance weights (b_l = 0) |
| muP | Desiderata 1–3 / feature learning | raw learning rate Θ(1) (η = Θ(1)) |
| muPC | MF + Depth-μP depth exponents (seed 001: multipliers N_0^{-1/2}, (N L)^{-1/2}, N^{-1}; N(0,1) weights) |
| depth-muP | muP + Depth-μP depth exponents (α = γ = 1/2 from :func:`limits.params.depth.solve_depth`) |

Variance convention with ``algorithm`` "bp" or "pc" (PC learning on the equilibrated energy,
``pc_model="equilibrium"``) uses seed 000's Desiderata 1–3; every other combination
(std convention, Adam, GNT, TP/DTP, PC with single-shot inference and ``gamma_bar_L``) uses the
TP4 / seed 003 conditions in the std convention, converted when a variance result is asked for.
"""
from __future__ import annotations

import functools

import sympy as sp

from .constraints import E_B, GAMMA_BAR_L, U, seed000_quantities, std_quantities, std_requirements, unknowns
from .expr import as_exponent
from .parameterisation import ALGORITHMS, CONVENTIONS, LAYERS, OPTIMIZERS, Parameterisation, check_choice
from .solver import solve_quantities
from ..registry import sweep_computation

_ALIASES = {
    "sp": "SP", "standard": "SP",
    "sp-stable": "SP-stable", "sp (η/n)": "SP-stable", "sp-eta/n": "SP-stable",
    "ntk": "NTK", "ntp": "NTK",
    "mf": "MF", "mean-field": "MF", "meanfield": "MF",
    "mup": "muP", "μp": "muP",
    "mupc": "muPC", "μpc": "muPC",
    "depth-mup": "depth-muP", "depth-μp": "depth-muP", "depthmup": "depth-muP",
}
NAMES = ("SP", "SP-stable", "NTK", "MF", "muP", "muPC", "depth-muP")
_EXTRA = ("gamma_bar_L", "e_B", "pc_model", "gauge", "uniform_lr")
REFERENCE_POINT = {GAMMA_BAR_L: sp.Integer(0), E_B: sp.Integer(0)}


def canonical_name(name) -> str:
    if not isinstance(name, str) or name.strip().lower() not in _ALIASES:
        raise ValueError(f"unknown parameterisation name {name!r}; known: {', '.join(NAMES)}")
    return _ALIASES[name.strip().lower()]


def _zero(prefix):
    return {U[f"{prefix}_{lay}"]: 0 for lay in LAYERS}


def _select(sol, given: dict):
    """Pick the solution piece valid for the user's parameter values ``given`` = {internal symbol:
    value or None}; the pieces' conditions are in the internal symbols (γ̄_L, e_B) and are reported
    with the user's values substituted (any symbol or linear expression, under its assumptions).
    Preference: a piece whose conditions all hold; else the piece containing the reference point
    (γ̄_L = 0, the SGD limit; e_B = 0); else the first piece not excluded, with its conditions
    reported symbolically. Returns (piece, notes)."""
    if sol.empty:
        sol.unique()  # raises with the constraint list
    user = {k: v for k, v in given.items() if v is not None}
    numeric = {k: v for k, v in user.items() if not v.free_symbols}
    ref = dict(REFERENCE_POINT)
    ref.update(numeric)

    def holds_at_ref(c):
        try:
            return bool(c.subs(ref))
        except TypeError:          # still relational: depends on symbols outside the reference point
            return False

    ok, other = [], []
    for p in sol.pieces:
        conds = [c.subs(user) for c in p.conditions]
        if any(c == sp.false for c in conds):
            continue
        pending = [c for c in conds if c != sp.true]
        if not pending or all(holds_at_ref(c) for c in p.conditions):
            ok.append((p, pending))
        else:
            other.append((p, pending))
    if not ok and not other:
        given_txt = ", ".join(f"{k} = {v}" for k, v in user.items())
        raise ValueError(f"no solution piece is valid for the given parameters ({given_txt}):\n" + str(sol))
    p, conds = (ok or other)[0]
    notes = (f"valid for {' and '.join(str(c) for c in conds)}",) if conds else ()
    return p, notes


def _from_values(values, convention, **kw):
    get = lambda k: sp.expand(values.get(U[k], U[k]))  # noqa: E731
    a = [get(f"a_{lay}") for lay in LAYERS]
    b = [get(f"b_{lay}") for lay in LAYERS]
    c = [get(f"c_{lay}") for lay in LAYERS]
    d = get("d") if convention == "variance" else 0
    leftover = set()
    for v in (*a, *b, *c, as_exponent(d, "d")):
        leftover |= {s for s in v.free_symbols if s in set(U.values())}
    if leftover:
        raise ValueError(f"the defining conditions leave exponents undetermined: {sorted(map(str, leftover))}")
    return Parameterisation.make(a, b, c, d, convention=convention, **kw)


@functools.lru_cache(maxsize=256)
def _derive_cached(name, convention, algorithm, optimizer, gamma_bar_L, e_B, pc_model, uniform_lr):
    return _derive_width(name, convention, algorithm, optimizer, gamma_bar_L, e_B, pc_model, uniform_lr)


def derive_width(name, convention="variance", algorithm="bp", optimizer="sgd", gamma_bar_L=None, e_B=None,
                 pc_model=None, uniform_lr=True):
    """Solve for the width exponents of ``name`` ∈ {SP, NTK, MF, muP}; returns (Parameterisation, Solution)."""
    g = None if gamma_bar_L is None else as_exponent(gamma_bar_L, "gamma_bar_L")
    eb = None if e_B is None else as_exponent(e_B, "e_B")
    return _derive_cached(canonical_name(name), convention, algorithm, optimizer, g, eb, pc_model, bool(uniform_lr))


def _derive_width(name, convention="variance", algorithm="bp", optimizer="sgd", gamma_bar_L=None, e_B=None,
                  pc_model=None, uniform_lr=True):
    """Solve for the width exponents of ``name`` ∈ {SP, NTK, MF, muP}; returns (Parameterisation, Solution)."""
    name = canonical_name(name)
    if name not in ("SP", "SP-stable", "NTK", "MF", "muP"):
        raise ValueError(f"derive_width handles SP, SP-stable, NTK, MF, muP; got {name!r}")
    check_choice(convention, CONVENTIONS, "convention")
    check_choice(algorithm, ALGORITHMS, "algorithm")
    check_choice(optimizer, OPTIMIZERS, "optimizer")
    g = None if gamma_bar_L is None else as_exponent(gamma_bar_L, "gamma_bar_L")
    eb = None if e_B is None else as_exponent(e_B, "e_B")
    if algorithm == "pc" and pc_model is None:
        pc_model = "single-shot" if g is not None else "equilibrium"
    if algorithm == "pc" and pc_model == "single-shot" and g is None:
        g = GAMMA_BAR_L                     # keep γ̄_L symbolic
    seed000 = optimizer == "sgd" and (algorithm == "bp" or (algorithm == "pc" and pc_model == "equilibrium")) \
        and name != "SP-stable"
    kw = dict(algorithm=algorithm, optimizer=optimizer, name=name,
              gamma_bar_L=g if algorithm == "pc" and pc_model == "single-shot" else None,
              e_B=(eb if eb is not None else sp.Integer(1)) if algorithm == "gnt" else None,
              pc_model=pc_model if algorithm == "pc" else None)
    if algorithm != "gnt" and e_B is not None:
        raise ValueError("e_B is only meaningful for algorithm='gnt'")
    if (algorithm != "pc" or pc_model != "single-shot") and g is not None:
        raise ValueError("gamma_bar_L is only meaningful for algorithm='pc' with pc_model='single-shot'")
    if seed000:
        q = seed000_quantities(algorithm, uniform_lr=uniform_lr)
        d = U["d"]
        if name == "SP":
            qs, fixed = q["D1"], {**_zero("a"), d: 0, U["c_input"] - 2 * d: 0}
        elif name == "NTK":
            qs, fixed = q["D1"] + q["D2"], {**_zero("b"), d: 0}
        elif name == "MF":
            qs, fixed = q["D1"] + q["D2"] + q["D3"], _zero("b")
        else:
            qs, fixed = q["D1"] + q["D2"] + q["D3"], {U["c_input"] - 2 * d: 0}
        qs = qs + q["lr"]
        sol = solve_quantities(qs, unknowns("variance").values(), fixed)
        piece, notes = _select(sol, {})
        p = _from_values(piece.values, "variance", notes=notes, **kw)
        return (p if convention == "variance" else p.to_std()), sol
    # TP4 / seed 003 framework, std convention. Symbolic user values (any symbol or linear
    # expression) are solved with the internal symbols γ̄_L, e_B and substituted afterwards, so the
    # piece selection and the reported conditions work for every name and assumption.
    user = {GAMMA_BAR_L: g, E_B: kw["e_B"]}
    internal = lambda v, s: s if (v is not None and v.free_symbols) else v  # noqa: E731
    gg = internal(g, GAMMA_BAR_L) if g is not None else (GAMMA_BAR_L if algorithm == "pc" else None)
    ee = internal(kw["e_B"], E_B)
    if name == "SP":
        qs = std_requirements("kernel", algorithm, optimizer, gg, ee)
        qs = [x for x in qs if x.key.startswith("init")]
        fixed = {**_zero("a"), **_zero("c")}
    elif name == "SP-stable":
        from .constraints import Quantity

        init = [x for x in std_requirements("kernel", algorithm, optimizer, gg, ee) if x.key.startswith("init")]
        stable = [x for x in std_requirements("stable", algorithm, optimizer, gg, ee) if not x.key.startswith("init")]
        a2 = std_quantities(algorithm if not (algorithm == "pc" and pc_model == "equilibrium") else "bp",
                            optimizer, gg, ee)["A2"]
        qs = init + stable + [a2, Quantity("lr.hidden=input", U["c_hidden"] - U["c_input"], "=0", "one learning rate"),
                              Quantity("lr.output=input", U["c_output"] - U["c_input"], "=0", "one learning rate")]
        fixed = _zero("a")
    elif name == "NTK":
        qs, fixed = std_requirements("kernel", algorithm, optimizer, gg, ee), _zero("b")
    elif name == "MF":
        qs, fixed = std_requirements("feature-learning", algorithm, optimizer, gg, ee), _zero("b")
    else:
        qs, fixed = std_requirements("feature-learning", algorithm, optimizer, gg, ee), _zero("c")
    sol = solve_quantities(qs, unknowns("std").values(), fixed)
    piece, notes = _select(sol, user)
    back = {k: v for k, v in user.items() if v is not None}
    vals = {k: sp.expand(v.subs(back)) for k, v in piece.values.items()}
    p = _from_values(vals, "std", notes=notes, **kw)
    if name == "NTK":
        from .classify import update_exponents

        r = update_exponents(p)["r"]
        if r.free_symbols:          # decide at the reference point, in the internal symbols
            p_int = _from_values(piece.values, "std", **{**kw, "gamma_bar_L": gg if kw["gamma_bar_L"] is not None
                                                          else None, "e_B": ee})
            r_ref = sp.simplify(update_exponents(p_int)["r"].subs(REFERENCE_POINT))
        else:
            r_ref = r
        if not bool(r_ref > 0):
            raise ValueError(f"no kernel regime exists for algorithm={algorithm!r}: the NTK-type conditions "
                             f"(f_0 = Θ(1), Condition 3.2, r_L = 0) force r = {r}"
                             + (" (CLT: α = 1/2, seed 003 Cor. C.1)" if algorithm in ("tp", "dtp") else ""))
    return (p if convention == "std" else p.to_variance()), sol


def named(name, convention="variance", algorithm=None, optimizer="sgd", **extra) -> Parameterisation:
    """A named parameterisation, derived by the constraint solver.

    ``name`` ∈ {"SP", "NTK", "MF", "muP", "muPC", "depth-muP"}; ``convention`` ∈ {"variance", "std"};
    ``algorithm`` ∈ {"bp", "pc", "gnt", "tp", "dtp"}; extras: ``gamma_bar_L`` (PC inference step
    exponent, number or sympy Symbol; selects seed 003's single-shot PC), ``e_B`` (GNT
    preconditioner exponent, default 1), ``pc_model`` ("equilibrium" | "single-shot"),
    ``gauge`` (None = as derived, "a0" = seed 003's a_l = 0 gauge), ``uniform_lr``.
    ``algorithm`` defaults to "bp" ("pc" for "muPC", a predictive-coding parameterisation).
    """
    bad = [k for k in extra if k not in _EXTRA]
    if bad:
        raise ValueError(f"unknown argument(s) {bad}; allowed extras: {', '.join(_EXTRA)}")
    extra = dict(extra)
    gauge = extra.pop("gauge", None)
    cname = canonical_name(name)
    if algorithm is None:
        algorithm = "pc" if cname == "muPC" else "bp"
    if cname in ("muPC", "depth-muP"):
        from .depth import solve_depth

        base = "MF" if cname == "muPC" else "muP"
        p, _ = derive_width(base, convention, algorithm, optimizer, **extra)
        alpha, gamma = solve_depth()
        from dataclasses import replace

        p = replace(p, name=cname, depth_alpha=alpha, depth_gamma=gamma)
    else:
        p, _ = derive_width(cname, convention, algorithm, optimizer, **extra)
    if gauge is not None:
        if p.convention != "std":
            raise ValueError("gauge='a0' is defined for the std convention")
        p = p.gauge(gauge)
    return p


def _number(v) -> float:
    """A sympy exponent as a float (NaN while it still holds a symbol such as ``gamma_bar_L``)."""
    return float("nan") if v is None or getattr(v, "free_symbols", None) else float(v)


@sweep_computation
def named_exponents(name, convention="variance", algorithm=None, optimizer="sgd", gamma_bar_L=None, e_B=None,
                    gauge=None) -> dict:
    """The exponents of :func:`named` as numbers, for sweeps and tables over names, conventions and
    algorithms: ``{"a_input", …, "c_output", "d"}`` (every weight ``∝ N^{-exponent}``, docs/theory/params.rst)
    plus ``depth_alpha``, ``depth_gamma`` and ``depth_lr_exponent`` (NaN without depth exponents); an exponent
    left symbolic (in ``gamma_bar_L`` when it is not given) is NaN."""
    extra = {k: v for k, v in (("gamma_bar_L", gamma_bar_L), ("e_B", e_B), ("gauge", gauge)) if v is not None}
    p = named(name, convention=convention, algorithm=algorithm, optimizer=optimizer, **extra)
    out = {k: _number(v) for k, v in p.exponents().items()}
    out.update(depth_alpha=_number(p.depth_alpha), depth_gamma=_number(p.depth_gamma),
               depth_lr_exponent=_number(p.depth_lr_exponent))
    return out
