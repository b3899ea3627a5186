"""How the optimal learning rate of a parameterisation must move with width or depth (μTransfer as a
prediction), derived from the same quantities that :func:`limits.params.classify` evaluates.

Width. Multiply every learning rate of ``p`` (std convention) by one global factor ``N^{-x}``: each layer's
update exponent ``−r_l`` and the read-out change through the hidden update (A2, ``W_L Δh``) become functions
of ``x`` (linear for Adam, piecewise linear for SGD, whose gradients feed back through the output). The
smallest shift that keeps every one of them from blowing up is

    x* = max_q  inf { x ≥ 0 : e_q(x) ≤ 0 },    q ∈ {r.input, r.hidden, r.output, A2.stable}.

If ``p`` is stable (x* = 0: μP, NTK, MF, SP-stable) the network has a width limit at every fixed learning
rate, the loss-vs-learning-rate curve converges and so does its minimiser: the optimum's drift per doubling of
width is predicted to be **exactly 0** (asymptotically). If x* > 0 (SP: Adam x* = 3/2 from A2 — the read-out
moves as N^{3/2}·η through the hidden update; SGD x* = 1), the largest stable learning rate shrinks as
``N^{-x*}``; the optimum must stay below it, so as N → ∞ its log2 falls by **at least x*** per doubling
(drift ≤ −x*). That is only a **bound**: at finite widths the optimum may still sit well below the edge and
move less (a drift fitted over 64…1024 can lie anywhere in [−x*, 0)); what is tested is its sign.

Depth (TP6, :func:`limits.params.depth_regime`). A residual network with branch multiplier ``L^{-α}`` whose
per-block update is ``L^{-γ}`` sums L block updates to ``L^{1−α−γ}``. A learning-rate factor ``L^{-x}`` raises
γ by x (Adam: lr ∝ L^{-γ}; SGD: lr ∝ L^{α−γ}), so ``x* = max(0, 1 − α − γ)``. Depth-μP (α = γ = ½): 0,
exact. Width-only μP (no branch multiplier, depth-independent rate: α = 0, γ = 0 for Adam, γ = α for SGD):
x* = 1, a bound, and TP6's init condition 1 − 2α ≤ 0 fails too (the unnormalised stream grows as
e^{L^{1−2α}}), so the drift bound additionally assumes a forward pass that stays finite (normalised blocks).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .classify import classify
from .constraints import std_quantities, substitution
from .depth import depth_quantities
from .parameterisation import Parameterisation
from ..vocabulary import LAYERS

_X = sp.Symbol("x", real=True)
_MAX_SHIFT = 100


@dataclass(frozen=True)
class LrDrift:
    """Predicted drift of the optimal log2 learning rate per doubling of ``axis`` ("width" or "depth").

    ``drift`` = −x* (float); ``kind``: "exact" (a limit exists at fixed learning rate: the optimum converges,
    drift → 0) or "bound" (asymptotically drift ≤ −x*; at finite size anywhere in [−x*, 0): the sign is what is
    tested) or "none" (no prediction: ``reason``); ``binding``: the quantities that set x*; ``derivation``."""

    axis: str
    drift: float
    kind: str
    binding: tuple
    derivation: str
    reason: str = ""

    def consistent_sign(self, low: float, high: float) -> bool:
        """Whether a measured CI [low, high] agrees: contains 0 (exact) or lies below 0 (bound)."""
        if self.kind == "exact":
            return low <= 0.0 <= high
        if self.kind == "bound":
            return high < 0.0
        return False


def _smallest_shift(exponent) -> sp.Expr:
    """inf{x ≥ 0 : exponent(x) ≤ 0} (exponent non-increasing, piecewise linear in x)."""
    s = sp.solveset(sp.Le(sp.expand(exponent), 0), _X, sp.Interval(0, _MAX_SHIFT))
    if s is sp.S.EmptySet:
        raise ValueError(f"no learning-rate shift up to N^-{_MAX_SHIFT} makes {exponent} ≤ 0")
    return sp.nsimplify(s.inf)


def _width(p: Parameterisation) -> LrDrift:
    s = p.to_std()
    init_fail = [v.key for v in classify(s).init if not v.holds]
    if init_fail:
        return LrDrift("width", float("nan"), "none", (), "", f"initialisation not Θ(1) ({', '.join(init_fail)}): "
                       "no learning rate repairs it")
    shifted = Parameterisation.make(s.a, s.b, tuple(c + _X for c in s.c), convention="std", algorithm=s.algorithm,
                                    optimizer=s.optimizer, gamma_bar_L=s.gamma_bar_L, e_B=s.e_B, pc_model=s.pc_model)
    alg = "bp" if (s.algorithm == "pc" and s.pc_model == "equilibrium") else s.algorithm
    q = std_quantities(alg, s.optimizer, s.gamma_bar_L, s.e_B)
    subs = substitution(shifted)
    exps = {f"r.{lay}": -q["r"][lay].xreplace(subs) for lay in LAYERS}
    exps["A2.stable"] = q["A2"].exponent.xreplace(subs)
    shifts = {k: _smallest_shift(e) for k, e in exps.items()}
    xs = max(shifts.values())
    binding = tuple(k for k, v in shifts.items() if v == xs and xs > 0)
    if xs == 0:
        return LrDrift("width", 0.0, "exact", (), f"{getattr(p, 'name', 'p')} ({s.optimizer}) is stable at a fixed "
                       "learning rate (x* = 0): the loss curve has a width limit, its minimiser converges")
    at0 = ", ".join(f"{k} ∝ N^{sp.nsimplify(exps[k].subs(_X, 0))}" for k in binding)
    return LrDrift("width", -float(xs), "bound", binding,
                   f"{getattr(p, 'name', 'p')} ({s.optimizer}) at a fixed learning rate: {at0}; one global factor "
                   f"N^-x keeps every update bounded from x* = {xs} on, so the optimum's log2 falls by at least {xs} "
                   "per doubling of width as N → ∞ (a bound: at finite width anywhere in [−x*, 0))")


def _depth(p: Parameterisation) -> LrDrift:
    alpha = sp.Integer(0) if p.depth_alpha is None else sp.nsimplify(p.depth_alpha)
    if p.depth_gamma is not None:
        gamma = sp.nsimplify(p.depth_gamma)
        how = f"α = {alpha}, γ = {gamma} from the table"
    else:      # width-only: no branch multiplier, depth-independent rate
        gamma = sp.Integer(0) if p.optimizer == "adam" else alpha
        how = f"width-only: branch multiplier L^0 (α = {alpha}), depth-independent {p.optimizer} rate (γ = {gamma})"
    dq = depth_quantities(alpha, gamma + _X)
    xs = _smallest_shift(dq["training_update"].exponent)
    init_ok = bool(sp.simplify(dq["init_log_variance"].exponent) <= 0)
    note = "" if init_ok else (f"; the init condition 1 − 2α ≤ 0 fails too (the unnormalised stream grows as "
                               f"e^(L^{1 - 2 * alpha})): the bound assumes a forward pass that stays finite")
    if xs == 0:
        return LrDrift("depth", 0.0, "exact" if init_ok else "none", (),
                       f"{how}: the summed update L^(1−α−γ) is bounded at a fixed learning rate" + note,
                       "" if init_ok else "unstable initialisation")
    return LrDrift("depth", -float(xs), "bound", ("training_update",) + (() if init_ok else ("init_log_variance",)),
                   f"{how}: L blocks sum their updates to L^{1 - alpha - gamma}; a factor L^-x restores a bounded "
                   f"update from x* = {xs} on: the optimum's log2 falls by at least {xs} per doubling of depth as "
                   "L → ∞ (a bound)"
                   + note)


def lr_drift(p: Parameterisation, axis: str = "width") -> LrDrift:
    """Predicted drift of the optimal log2 learning rate per doubling of width or depth (module docstring)."""
    if not isinstance(p, Parameterisation):
        raise ValueError(f"p must be a Parameterisation, got {type(p).__name__}")
    if axis == "width":
        return _width(p)
    if axis == "depth":
        return _depth(p)
    raise ValueError(f"axis must be 'width' or 'depth', got {axis!r}")


__all__ = ["lr_drift", "LrDrift"]
