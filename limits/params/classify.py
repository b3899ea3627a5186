"""Classification of a parameterisation: per-desideratum verdicts, regime, per-layer r_l.

``classify(p)`` evaluates the quantities of :mod:`limits.params.constraints` at ``p``:

* TP4 / seed 003 framework (every algorithm; std convention): per-layer update exponents
  ``r_l`` (``ΔW_l h_{l-1} = Θ(N^{-r_l})``), the feature-update exponent ``r = min(r_input,
  r_hidden)``, initialisation, stability, Condition 3.2 (hidden updates reach the output).
  Regime: ``"unstable"`` (initialisation not Θ(1) or anything blows up), ``"feature-learning"``
  (stable, nontrivial, r = 0), ``"kernel"`` (stable, nontrivial, r > 0), ``"trivial"`` (stable,
  Δf → 0). Nontrivial: for BP (SGD/Adam, and PC on the equilibrated energy) the TP4 rule
  ``a_L+b_L+r = 1 or 2a_L+c_L = 1`` (Condition 3.2 holds or the read-out's own update is Θ(1); so a
  μP net with a zero/small read-out init is feature-learning, and "read-out only" learning counts as
  kernel, flagged ``readout_only``); for GNT, single-shot PC and TP/DTP the seed 003 rule — Condition
  3.2 must hold ("both NTK and feature learning regimes are characterized by this condition",
  §3.2), which is what makes TP/DTP have no kernel regime.
* seed 000 Desiderata 1–3 (variance convention, canonical ``d``) for ``bp`` and equilibrium PC.

Each :class:`Verdict` carries the growth exponent ``e`` of its worst term: Θ(1) iff e = 0,
"blows up as N^e" if e > 0, "vanishes as N^e" if e < 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from .constraints import (E_B, GAMMA_BAR_L, numeric_exponent, one_step_exponents,  # noqa: F401 (re-exported)
                          seed000_quantities, std_quantities, substitution)
from .expr import fmt
from ..vocabulary import LAYERS
from .parameterisation import Parameterisation


def _sign(e, what) -> int:
    e = numeric_exponent(e, what)
    return 0 if e == 0 else (1 if e > 0 else -1)


@dataclass(frozen=True)
class Verdict:
    """One requirement evaluated at a parameterisation."""

    key: str
    label: str
    holds: bool
    exponent: sp.Expr          # growth exponent of the worst term (X ∝ N^exponent)
    requirement: str
    source: str = ""

    @property
    def status(self) -> str:
        s = _sign(self.exponent, self.key)
        return "Θ(1)" if s == 0 else (f"blows up as N^{fmt(self.exponent)}" if s > 0 else
                                       f"vanishes as N^{fmt(self.exponent)}")

    def __str__(self):
        mark = "ok " if self.holds else "FAIL"
        return f"[{mark}] {self.key}: {self.label} — {self.status} (requires exponent {self.requirement})"


def _verdict(q, subs):
    e = sp.expand(q.exponent.xreplace(subs))
    e = numeric_exponent(e, q.key)
    holds = bool({"=0": e == 0, "<=0": e <= 0, ">=0": e >= 0, "<0": e < 0, ">0": e > 0}[q.requirement])
    return Verdict(q.key, q.label, holds, e, q.requirement, q.source)


def _params_subs(p):
    m = {}
    if p.gamma_bar_L is not None:
        m[GAMMA_BAR_L] = p.gamma_bar_L
    if p.e_B is not None:
        m[E_B] = p.e_B
    return m


def update_exponents(p: Parameterisation) -> dict:
    """Symbolic per-layer update exponents of ``p`` (std framework): ``{"r_input", "r_hidden",
    "r_output", "r", "A2", "alpha"}`` (sympy, may contain symbols such as gamma_bar_L)."""
    s = p.to_std()
    model_alg = "bp" if (s.algorithm == "pc" and s.pc_model == "equilibrium") else s.algorithm
    q = std_quantities(model_alg, s.optimizer, s.gamma_bar_L, s.e_B)
    subs = substitution(s)
    subs.update(_params_subs(s))
    out = {f"r_{lay}": sp.expand(q["r"][lay].xreplace(subs)) for lay in LAYERS}
    out["r"] = sp.expand(q["r_feat"].xreplace(subs))
    out["A2"] = sp.expand(q["A2"].exponent.xreplace(subs))
    out["alpha"] = q["alpha"]
    return out


@dataclass(frozen=True)
class Classification:
    """Result of :func:`classify`."""

    regime: str
    r: sp.Expr
    r_layers: dict
    init: tuple
    stability: tuple
    condition_3_2: Verdict
    desiderata: dict = field(default_factory=dict)   # "D1"/"D2"/"D3" -> tuple of Verdicts (seed 000)
    readout_only: bool = False
    notes: tuple = ()
    parameterisation: Parameterisation | None = None
    depth: object = None                              # DepthRegime (TP6) when p has α and γ

    @property
    def failures(self) -> list:
        out = [v for v in (*self.init, *self.stability) if not v.holds]
        for vs in self.desiderata.values():
            out += [v for v in vs if not v.holds]
        return out

    def desideratum(self, name: str) -> bool:
        """Whether seed 000's Desideratum ``name`` ("D1", "D2", "D3") holds (all its terms)."""
        if name not in self.desiderata:
            raise ValueError(f"desideratum {name!r} not evaluated for this algorithm; have {list(self.desiderata)}")
        return all(v.holds for v in self.desiderata[name])

    def to_dict(self) -> dict:
        conv = lambda vs: [{"key": v.key, "holds": v.holds, "exponent": fmt(v.exponent), "status": v.status,  # noqa: E731
                            "label": v.label} for v in vs]
        return {"regime": self.regime, "r": fmt(self.r), "r_layers": {k: fmt(v) for k, v in self.r_layers.items()},
                "init": conv(self.init), "stability": conv(self.stability),
                "condition_3_2": conv([self.condition_3_2])[0],
                "desiderata": {k: conv(v) for k, v in self.desiderata.items()},
                "readout_only": self.readout_only, "notes": list(self.notes),
                "depth": None if self.depth is None else {
                    "alpha": fmt(self.depth.alpha), "gamma": fmt(self.depth.gamma),
                    "stable_init": self.depth.stable_init, "stable_training": self.depth.stable_training,
                    "nontrivial": self.depth.nontrivial, "faithful": self.depth.faithful,
                    "sgd_lr_exponent": fmt(self.depth.sgd_lr_exponent),
                    "adam_lr_exponent": fmt(self.depth.adam_lr_exponent)}}

    def __str__(self):
        lines = [f"regime: {self.regime}   r = {fmt(self.r)}   r_l: " +
                 ", ".join(f"{k}={fmt(v)}" for k, v in self.r_layers.items())]
        for v in (*self.init, *self.stability, self.condition_3_2):
            lines.append("  " + str(v))
        for k, vs in self.desiderata.items():
            lines.append(f"  seed 000 {k}: {'holds' if all(v.holds for v in vs) else 'VIOLATED'}")
            for v in vs:
                lines.append("    " + str(v))
        if self.depth is not None:
            lines.append(f"  depth: {self.depth}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def classify(p: Parameterisation) -> Classification:
    """Per-desideratum verdicts, regime and per-layer r_l of ``p`` (see module docstring)."""
    if not isinstance(p, Parameterisation):
        raise ValueError(f"p must be a Parameterisation, got {type(p).__name__}")
    s = p.to_std()
    model_alg = "bp" if (s.algorithm == "pc" and s.pc_model == "equilibrium") else s.algorithm
    q = std_quantities(model_alg, s.optimizer, s.gamma_bar_L, s.e_B)
    subs = substitution(s)
    subs.update(_params_subs(s))
    init = tuple(_verdict(x, subs) for x in q["init"])
    r_layers = {lay: numeric_exponent(q["r"][lay].xreplace(subs), f"r_{lay}") for lay in LAYERS}
    r = numeric_exponent(q["r_feat"].xreplace(subs), "r")
    from .constraints import Quantity

    stab = tuple(_verdict(Quantity(f"r.{lay}", -q["r"][lay], "<=0",
                                   f"{lay}-layer update ΔW h = Θ(N^(-r_{lay})) does not blow up"), subs)
                 for lay in LAYERS)
    a2 = q["A2"]
    stab_a2 = _verdict(Quantity("A2.stable", a2.exponent, "<=0", "Δf through W_L Δh does not blow up"), subs)
    stab = stab + (stab_a2,)
    cond = _verdict(a2, subs)
    notes = list(p.notes)
    for x in q["extra"]:
        v = _verdict(x, subs)
        if not v.holds:
            notes.append(f"{x.label}: violated (γ̄_L > 0: inference contributes only at higher order)")
    tp4 = model_alg == "bp"           # TP4 rules (docs/theory/params.rst §2); seed 003 rules otherwise
    readout_moves = r_layers["output"] == 0
    nontrivial = cond.holds or (tp4 and readout_moves)
    if not all(v.holds for v in init) or not all(v.holds for v in stab):
        regime = "unstable"
    elif nontrivial:
        regime = "feature-learning" if r == 0 else "kernel"
    else:
        regime = "trivial"
    readout_only = (not cond.holds) and readout_moves and regime != "unstable"
    desiderata = {}
    if s.optimizer == "sgd" and (s.algorithm == "bp" or (s.algorithm == "pc" and s.pc_model == "equilibrium")):
        v = p if p.convention == "variance" else p.to_variance()
        dq = seed000_quantities(s.algorithm, uniform_lr=False)
        vs = substitution(v)
        for k in ("D1", "D2", "D3"):
            desiderata[k] = tuple(_verdict(x, vs) for x in dq[k])
    depth = None
    if p.depth_alpha is not None and p.depth_gamma is not None and not (
            p.depth_alpha.free_symbols or p.depth_gamma.free_symbols):
        from .depth import depth_regime

        depth = depth_regime(p.depth_alpha, p.depth_gamma)
    return Classification(regime, r, r_layers, init, stab, cond, desiderata, readout_only, tuple(notes), p, depth)
