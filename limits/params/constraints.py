"""Constraint generators: exponents of physical quantities as functions of the unknown exponents.

Every generator returns :class:`Quantity` objects ``X ∝ N^{e}`` (``e`` = growth exponent, a
piecewise-linear sympy expression of the unknown exponents that may contain ``Min``/``Max``) with
the *requirement* a desideratum imposes on ``e`` (``"=0"``: Θ(1), ``"<=0"``: does not blow up,
``">=0"``). The solver (:mod:`limits.params.solver`) turns requirements into equations and
inequalities; :func:`limits.params.classify` evaluates the same quantities at a given
parameterisation. One source of truth for derivation and diagnosis.

Two frameworks, following the seeds:

* **seed 000** (variance convention; gradient flow; ``algorithm="bp"`` or PC learning on the
  equilibrated energy ``F* = L/s(θ)``): Desiderata 1–3 (§A.4, Eqs. 36, 64–73, 82–94).
  PC factors: ``s = 1 + Θ(N^{-2d})`` (Eq. 47 at fixed depth) gives ``1/s ∝ N^{min(0, 2d)}``.
  The PC-only terms carry ``1/s²`` hence ``2·min(0, 2d)``; the seed's boxed Eqs. 73/94 write
  ``min(0, 2d)`` — identical whenever ``d ≥ 0``, which includes every solution.
  PC-only terms are required not to blow up (``<= 0``); with d = 1/2 they vanish as N^{-1/2}
  (seed 000 below Eq. 83).
* **TP4 / seed 003** (std convention, per-layer learning rates, one-step/perturbative
  analysis): per-layer update exponents ``r_l`` (``ΔW_l h_{l-1} = Θ(N^{-r_l})``) for SGD (TP4
  Thm 3.3 with per-layer rates), Adam (TP IVb: sign-like updates, ``r_l = a_l + c_l − 1``),
  GNT with preconditioner exponent ``e_B`` (seed 003 Prop. 3.3), PC with single-shot sequential
  inference and ``γ_L = γ' N^{-γ̄_L}`` (seed 003 Eqs. S.43–S.62), TP/DTP with linear feedback
  (seed 003 Eq. S.143); Condition 3.2 "W_L initialised maximally" ``W_L Δh_{L-1} ∝
  N^{-(a_L+b_L+r-α)}`` with α = 1 (law of large numbers, W_L correlated with Δh) for BP/GNT/PC and
  α = 1/2 (central limit theorem: TP's feedback weights are independent of W_L) for TP/DTP
  (seed 003 Eq. 18, S.148).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy as sp

from ..vocabulary import LAYERS, check_choice
from .expr import HALF, SYMBOLS

_S = lambda name: sp.Symbol(name, real=True)  # noqa: E731
#: unknown exponents, one symbol per (symbol, layer class)
U = {f"{s}_{lay}": _S(f"{s}_{lay}") for s in "abc" for lay in LAYERS}
U["d"] = _S("d")
GAMMA_BAR_L = SYMBOLS["gamma_bar_L"]
E_B = SYMBOLS["e_B"]
REQUIREMENTS = ("=0", "<=0", ">=0", "<0", ">0")


@dataclass(frozen=True)
class Quantity:
    """``key ∝ N^{exponent}``; ``requirement`` on the exponent; ``label`` says what it is."""

    key: str
    exponent: sp.Expr
    requirement: str
    label: str
    source: str = ""

    def relation(self):
        e = self.exponent
        return {"=0": sp.Eq(e, 0), "<=0": e <= 0, ">=0": e >= 0, "<0": e < 0, ">0": e > 0}[self.requirement]


def unknowns(convention: str) -> dict:
    """The unknown exponent symbols of a convention (std has no ``d``)."""
    check_choice(convention, ("variance", "std"), "convention")
    return {k: v for k, v in U.items() if convention == "variance" or k != "d"}


def substitution(p: Parameterisation) -> dict:
    """Map the unknown symbols to the exponents of ``p`` (in ``p``'s own convention)."""
    m = {U[f"{s}_{lay}"]: p.exponent(lay, s) for s in "abc" for lay in LAYERS}
    m[U["d"]] = p.d
    return m


# ====================================================================== seed 000 (variance)
@functools.lru_cache(maxsize=64)
def seed000_quantities(algorithm: str = "bp", uniform_lr: bool = True) -> dict:
    """Desiderata 1–3 of seed 000 as quantities (variance convention, gradient flow).

    Returns ``{"D1": [...], "D2": [...], "D3": [...], "lr": [...]}``; ``lr`` holds the
    "one global learning rate" equalities (seed 000 Eq. 14) when ``uniform_lr``.
    """
    check_choice(algorithm, ("bp", "pc"), "algorithm")
    a1, ah, ao = U["a_input"], U["a_hidden"], U["a_output"]
    b1, bh, bo = U["b_input"], U["b_hidden"], U["b_output"]
    c1, ch, co = U["c_input"], U["c_hidden"], U["c_output"]
    d = U["d"]
    pc = algorithm == "pc"
    inv_s = sp.Min(0, 2 * d) if pc else sp.Integer(0)            # 1/s ∝ N^{min(0,2d)}  (Eq. 47)
    D1 = [
        Quantity("D1.input", -(2 * a1 + b1), "=0", "first-layer preactivation variance at init", "seed 000 Eq. 30, 36"),
        Quantity("D1.hidden", 1 - 2 * ah - bh, "=0", "hidden preactivation variance at init", "seed 000 Eq. 35, 36"),
        Quantity("D1.output", 1 - 2 * ao - bo, "=0", "pre-output h_L variance at init", "seed 000 Eq. 35, 36"),
    ]
    D2 = [
        Quantity("D2.input", -(c1 + 2 * a1) + inv_s, "=0", "df/dt: input-layer NTK term" + (" (q, ×1/s)" if pc else ""),
                 "seed 000 Eq. 64–67"),
        Quantity("D2.hidden", 1 - ch - 2 * ah + inv_s, "=0", "df/dt: hidden-layer NTK term" + (" (q, ×1/s)" if pc else ""),
                 "seed 000 Eq. 64–66"),
        Quantity("D2.output", 1 - co - 2 * ao + inv_s, "=0", "df/dt: read-out NTK term" + (" (q, ×1/s)" if pc else ""),
                 "seed 000 Eq. 64–66"),
    ]
    D3 = [
        Quantity("D3.input", -(c1 + 2 * a1 - d + HALF) + inv_s, "=0", "dh^1/dt (first-layer features)",
                 "seed 000 Eq. 82–83"),
        Quantity("D3.hidden", -(ch + 2 * ah - d - HALF) + inv_s, "=0", "dh^l/dt (hidden features, own update)",
                 "seed 000 Eq. 89–90"),
    ]
    if pc:
        D2 += [
            Quantity("D2.pc_r.hidden", -(ch + d + 2 * ah - 1) + 2 * inv_s, "<=0",
                     "df/dt: PC-only term r (∂s/∂W, hidden)", "seed 000 Eq. 68–73"),
            Quantity("D2.pc_r.output", -(co + d + 2 * ao - 1) + 2 * inv_s, "<=0",
                     "df/dt: PC-only term r (∂s/∂W, read-out)", "seed 000 Eq. 68–73"),
        ]
        D3 += [
            Quantity("D3.pc_D.hidden", -(ch + 2 * ah - HALF) + 2 * inv_s, "<=0",
                     "dh^l/dt: PC-only term D (∂s/∂W)", "seed 000 Eq. 91–94"),
        ]
    lr = []
    if uniform_lr:
        lr = [Quantity("lr.hidden=input", ch - c1, "=0", "one global learning rate", "seed 000 Eq. 14"),
              Quantity("lr.output=input", co - c1, "=0", "one global learning rate", "seed 000 Eq. 14")]
    return {"D1": D1, "D2": D2, "D3": D3, "lr": lr}


def pc_asymptotics() -> dict:
    """Useful asymptotics of seed 000 §A.4.2 (variance convention, width N, depth L):
    ``s(θ) − 1``, ``∂f/∂W_ij`` and ``∂s/∂W_ij`` as sympy expressions in N, L."""
    N, L = sp.Symbol("N", positive=True), sp.Symbol("L", positive=True)
    d, al = U["d"], U["a_hidden"]
    return {
        "s_minus_1": L * N ** (-2 * d),                                   # Eq. 47
        "df_dW": N ** (-d - al - HALF),                                  # Eq. 44
        "ds_dW": L * N ** (-2 * d - al - HALF),                          # Eq. 55
    }


# ====================================================================== TP4 / seed 003 (std)
def _alpha_lln(algorithm):
    return HALF if algorithm in ("tp", "dtp") else sp.Integer(1)


@functools.lru_cache(maxsize=256)
def std_quantities(algorithm: str = "bp", optimizer: str = "sgd", gamma_bar_L=None, e_B=None,
                   one_step: bool = False) -> dict:
    """Per-layer update exponents and conditions in the std convention (TP4 / seed 003).

    Returns ``{"r": {"input": r_1, "hidden": r_h, "output": r_L}, "alpha": α, "init": [...],
    "A2": Quantity, "extra": [...]}`` where ``r_l`` are decay exponents (Δ = Θ(N^{-r_l})).
    ``one_step=True``: the first update from initialisation (backward signal through the initial
    read-out, ``N^{-(a_L+b_L)}``) instead of TP4's ``min(a_L+b_L, 2a_L+c_L)`` (which accounts for
    the read-out having moved in earlier steps).
    """
    check_choice(algorithm, ("bp", "pc", "gnt", "tp", "dtp"), "algorithm")
    check_choice(optimizer, ("sgd", "adam"), "optimizer")
    a = {lay: U[f"a_{lay}"] for lay in LAYERS}
    b = {lay: U[f"b_{lay}"] for lay in LAYERS}
    c = {lay: U[f"c_{lay}"] for lay in LAYERS}
    w = a["output"] + b["output"]                      # read-out entries Θ(N^{-w})
    extra = []
    if optimizer == "adam":
        th = {lay: a[lay] + c[lay] for lay in LAYERS}
        r = {"input": th["input"], "hidden": th["hidden"] - 1, "output": th["output"] - 1}
    else:
        th = {lay: 2 * a[lay] + c[lay] for lay in LAYERS}
        if algorithm == "bp":
            we = w if one_step else sp.Min(w, th["output"])   # backward signal through the read-out (TP4)
            r = {"input": we + th["input"], "hidden": we + th["hidden"] - 1, "output": th["output"] - 1}
        elif algorithm == "gnt":
            eb = E_B if e_B is None else e_B
            we = w if one_step else sp.Min(w, th["output"])
            pre = eb * (1 - 2 * we)                    # (δδᵀ + ρ)^{-e_B}, δᵀδ = Θ(N^{1-2w}) (seed 003 Prop. 3.3)
            r = {"input": we + pre + th["input"], "hidden": we + pre + th["hidden"] - 1,
                 "output": th["output"] - 1}
        elif algorithm == "pc":
            g = GAMMA_BAR_L if gamma_bar_L is None else gamma_bar_L
            r = {"input": th["input"] + w + sp.Min(0, g),                       # S.47–48
                 "hidden": th["hidden"] + w - 1 + sp.Min(0, g),                 # S.43–45
                 "output": sp.Min(th["output"] - 1, th["output"] + g + 2 * w - 2,
                                  th["output"] + g + w - HALF)}                 # S.60–62
            extra.append(Quantity("pc.inference_first_order", g, "<=0",
                                  "inference (first order in γ'_L) reaches the weight update at leading order",
                                  "seed 003 Eq. S.44"))
        else:  # tp, dtp
            r = {"input": th["input"] - w + HALF, "hidden": th["hidden"] - 1 - w + HALF,
                 "output": th["output"] - 1}                                    # S.143
    alpha = _alpha_lln(algorithm)
    r_feat = sp.Min(r["input"], r["hidden"])           # Δx of the last hidden layer (TP4's r)
    init = [
        Quantity("init.input", -(a["input"] + b["input"]), "=0", "first-layer preactivation at init", "TP4 / seed 003 Eq. S.14"),
        Quantity("init.hidden", HALF - a["hidden"] - b["hidden"], "=0", "hidden preactivation at init",
                 "TP4 / seed 003 Eq. S.14"),
        Quantity("init.output", HALF - w, "<=0", "output f_0 = O(1) at init", "TP4 / seed 003 Eq. S.14"),
    ]
    A2 = Quantity("A2", -(w + r_feat - alpha), "=0",
                  f"W_L Δh_(L-1): hidden updates reach the output (Condition 3.2, α = {alpha})",
                  "seed 003 Eq. 18, S.65, S.148; TP4")
    return {"r": r, "r_feat": r_feat, "alpha": alpha, "init": init, "A2": A2, "extra": extra, "theta": th}


def std_requirements(kind: str, algorithm="bp", optimizer="sgd", gamma_bar_L=None, e_B=None) -> list:
    """Quantities with requirements for ``kind`` ∈ {"init", "stable", "feature-learning", "kernel"}.

    * ``feature-learning`` (μP; Conditions 3.1 for every layer and 3.2): ``r_l = 0`` ∀l, A2 = Θ(1)
      (+ γ̄_L ≤ 0 for PC);
    * ``kernel`` (NTK-type): read-out initialised at the standard scale (``f_0 = Θ(1)``), uniform
      ``r_input = r_hidden``, ``r_L = 0``, A2 = Θ(1) — the value of r is then *derived*;
    * ``stable``: nothing blows up (``r_l ≥ 0``, A2 ≤ 0).
    """
    check_choice(kind, ("init", "stable", "feature-learning", "kernel"), "kind")
    q = std_quantities(algorithm, optimizer, gamma_bar_L, e_B)
    r = q["r"]
    out = list(q["init"])
    if kind == "init":
        return out
    if kind == "stable":
        out += [Quantity(f"r.{lay}", -r[lay], "<=0", f"{lay}-layer update does not blow up") for lay in LAYERS]
        out.append(Quantity("A2", q["A2"].exponent, "<=0", q["A2"].label, q["A2"].source))
        return out
    if kind == "feature-learning":
        out += [Quantity(f"r.{lay}", r[lay], "=0", f"{lay}-layer updated maximally (Condition 3.1)",
                         "seed 003 Condition 3.1 / A.3") for lay in LAYERS]
        out.append(q["A2"])
        out += q["extra"]
        return out
    # kernel
    out = [qq for qq in out if qq.key != "init.output"]
    out.append(Quantity("init.output", q["init"][2].exponent, "=0", "read-out at standard scale, f_0 = Θ(1)",
                        "seed 003 Eq. S.74"))
    out.append(Quantity("r.uniform", r["input"] - r["hidden"], "=0", "uniform feature-update exponent",
                        "seed 003 Eq. S.71–72"))
    out.append(Quantity("r.output", r["output"], "=0", "read-out updated maximally", "seed 003 Eq. S.73"))
    out.append(q["A2"])
    return out


def numeric_exponent(e, what):
    """The exponent ``e`` as a number (simplified), or ``ValueError`` naming ``what`` if symbols remain."""
    e = sp.expand(e)
    if e.free_symbols:
        e = sp.simplify(e)
    if e.free_symbols:
        raise ValueError(f"{what} = {e} depends on {sorted(map(str, e.free_symbols))}; substitute numbers "
                         f"with p.subs({{...}}) before classifying")
    return e


def one_step_exponents(p) -> dict:
    """Growth exponents (powers of N) of what one small BP step from initialisation changes,
    first order in the learning rate — the predictions of the empirical exponent checker
    (``limits.finite.coordcheck``). Keys follow ``limits.finite.train`` records:

    ``"df"`` (rms change of f), ``"f0"`` (f at init), ``"dh:h0"`` (first representation),
    ``"dh:hidden"`` (deeper stream states: own + propagated updates), ``"dWh:in"``,
    ``"dWh:hidden"``, ``"dWh:out"`` (rms of multiplier·ΔW·input; for the read-out this is before
    the output scale 1/γ, hence ``+ d`` in the variance convention).
    Derived from the std-convention one-step quantities (TP4 with the initial read-out; seed 003
    S.143 for TP/DTP with α = 1/2; Prop. 3.3 for GNT, whose damping must scale like δᵀδ:
    ``"gnt_damping_exponent"`` = 1 − 2(a_L + b_L)).
    """
    if p.algorithm not in ("bp", "gnt", "tp", "dtp"):
        raise ValueError("one_step_exponents covers algorithm 'bp', 'gnt', 'tp', 'dtp' (finite training); got "
                         + repr(p.algorithm))
    s = p.to_std()
    q = std_quantities(s.algorithm, s.optimizer, None, s.e_B, one_step=True)
    subs = substitution(s)
    ev = lambda e, k: numeric_exponent(sp.expand(e.xreplace(subs)), k)  # noqa: E731
    r = {lay: ev(q["r"][lay], f"r_{lay}") for lay in LAYERS}
    rf = ev(q["r_feat"], "r")
    w = ev(sp.Symbol("a_output", real=True) + sp.Symbol("b_output", real=True), "w")
    extra = {}
    if s.algorithm == "gnt":   # damping of the same order as δᵀδ = Θ(N^{1-2w}) (seed 003 §C / Ishikawa–Karakida)
        extra["gnt_damping_exponent"] = 1 - 2 * w
    a2 = ev(q["A2"].exponent, "A2")
    d = p.d if p.convention == "variance" else sp.Integer(0)
    return {
        "df": sp.Max(-r["output"], a2),
        "f0": sp.Rational(1, 2) - w,
        "dh:h0": -r["input"],
        "dh:hidden": sp.Max(-r["input"], -r["hidden"]),
        "dWh:in": -r["input"],
        "dWh:hidden": -r["hidden"],
        "dWh:out": -r["output"] + d,
        "r": rf,
        **extra,
    }
