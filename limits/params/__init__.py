"""Symbolic width/depth parameterisations (sympy): derive, classify, tabulate.

Quick use::

    import limits
    p = limits.params.named("muP", convention="variance", algorithm="bp")
    p.exponent("hidden", "b")          # -> 1   (sympy Rational)
    limits.params.classify(p).regime   # -> "feature-learning"
    limits.params.table(["SP", "NTK", "MF", "muP"]).to_markdown()   # seed 000 Table 2, derived

The :class:`Parameterisation` object (read by ``limits.finite.concretise``)
---------------------------------------------------------------------------
* ``p.convention`` — ``"variance"`` or ``"std"``:

  - variance (seed 000): ``h_l = N^{-a_l} W_l h_{l-1}``, ``W_ij ~ N(0, N^{-b_l})``, output
    ``f = h_L / γ`` with ``γ = γ0 N^d``, learning rate of layer l ``η_l = η0 γ² N^{-c_l}`` for SGD
    (``η0 N^{-c_l}`` for Adam); the first layer also has the constant ``1/√D``.
  - std (TP4 / seed 003): ``W_l = N^{-a_l} w_l``, ``w_ij ~ N(0, N^{-2 b_l})``, ``η_l = η' N^{-c_l}``,
    output ``f = W_out h`` (d = 0).

* ``p.exponent(layer, symbol)`` — layer ∈ {"input", "hidden", "output"}, symbol ∈ {"a","b","c","d"};
  ``d`` is global (0 in std). Exponents are sympy Rationals (or linear expressions in symbols
  such as ``gamma_bar_L``; substitute with ``p.subs({...})`` before making numbers).
* depth: ``p.depth_alpha`` (α: residual branch multiplier ``L^{-α}``, None for MLPs),
  ``p.depth_gamma`` (γ: effective per-layer update ``L^{-γ}``), ``p.depth_lr_exponent``
  (learning rate ∝ ``L^{α−γ}`` for SGD, ``L^{-γ}`` for Adam, TP6). For ``depth-muP``/``muPC``:
  α = γ = 1/2 (SGD learning rate depth-independent, Adam ∝ L^{-1/2}).
* ``p.algorithm`` ∈ {"bp","pc","gnt","tp","dtp"}, ``p.optimizer`` ∈ {"sgd","adam"},
  ``p.gamma_bar_L`` (PC: last inference step ``γ_L = γ' N^{-γ̄_L}``), ``p.e_B`` (GNT),
  ``p.pc_model`` ("equilibrium": learning on F* = L/s(θ), seed 000; "single-shot": seed 003).
* ``p.to_std()``, ``p.to_variance(d=None)``, ``p.shift(θ, layer=None)`` (TP4 symmetry),
  ``p.gauge("a0")``, ``p.theta(layer)`` (= 2a + c, shift invariant), ``p.equivalent(q)``.

Derivation machinery
--------------------
* :mod:`.constraints` — quantities ``X ∝ N^e`` with requirements, per desideratum/algorithm;
* :func:`solve` — piecewise-linear exact solver → :class:`Solution` (pieces, free symbols);
* :func:`named` — SP, SP-stable, NTK, MF, muP (+ muPC, depth-muP) derived from desiderata + one defining condition;
* :func:`classify` — verdicts, regime, per-layer r_l, blow-up/vanishing exponents;
* :mod:`.depth` — :func:`depth_regime` (TP6), :func:`alpha_analysis` (seed 000 §A.5),
  Adam ``(LN)^{-1/2}``, two-layer residual block correction ``η_1 = η̄ n √(L/T)``;
* :func:`table` — Markdown / LaTeX / dict tables; CLI in :mod:`limits.cli.params`;
* :func:`layer_table` — the same rows per trained tensor of a composition (``limits.serial``) or a ``limits.Model``:
  role by fan-in/fan-out, exponents, attention logit scaling (:mod:`.layer_table`); trained at finite width and
  checked per layer by ``limits.finite.serial_coordcheck``;
* :func:`lr_drift` — how the optimal learning rate must move per doubling of width or depth (μTransfer as a
  prediction: 0 for stable tables, a bound −x* for SP-like ones; tested by ``limits.torch.transfer``);
* :func:`parse` — restricted parser for user-typed exponents (no eval/sympify of raw text).

Cross-checks against finite networks (not imported here — theory never imports limits.finite):
``p.one_step_exponents()`` feeds ``limits.finite.coordcheck.width_check`` (BP/Adam/TP/DTP/GNT) and
``pc_width_check`` (single-shot PC); ``limits validate params [--full]`` runs the cases of
``limits/validate/params.py``; figures ``params_coordcheck_width``, ``params_coordcheck_depth``,
``params_two_layer_block``, ``params_pc_single_shot`` (``limits figure NAME``).

Findings worth knowing (derived by the solver, confirmed by the exponent checker):

* seed 003's PC NTK-type read-out rate: Eq. S.62 gives ``c_L = 1 − γ̄_L`` (S.73's ``c_L = 1`` makes
  the read-out update blow up as ``N^{-γ̄_L}`` for γ̄_L < 0); the μP column holds for −1 ≤ γ̄_L ≤ 0.
* two-layer residual blocks: the corrected first-layer rate ``η̄ n √L`` restores Δu = Θ(1) but,
  to first order in η̄, the stream change through W² then grows as ``L^{1/2}``.
"""
from __future__ import annotations

from .classify import Classification, Verdict, classify, update_exponents
from .constraints import Quantity, pc_asymptotics, seed000_quantities, std_quantities, std_requirements, unknowns
from .depth import (DepthRegime, adam_lr_exponents, alpha_analysis, depth_regime, solve_depth, two_layer_block,
                    two_layer_block_correction)
from .expr import as_exponent, parse
from .layer_table import LayerTable, TensorRow, layer_table
from .lr_drift import LrDrift, lr_drift
from .named import NAMES, derive_width, named, named_exponents
from .parameterisation import ALGORITHMS, CONVENTIONS, LAYERS, OPTIMIZERS, SYMBOLS, Parameterisation
from .solver import Piece, Solution, solve_quantities


def solve(algorithm="bp", desiderata=("init", "feature-learning"), convention="std", optimizer="sgd",
          fixed=None, constraints=(), gamma_bar_L=None, e_B=None, uniform_lr=None):
    """Solve desiderata for the exponents; returns a :class:`Solution` (pieces with free symbols).

    ``convention="variance"`` (seed 000, algorithm "bp"/"pc"): desiderata ⊂ {"D1","D2","D3"}
    (one global learning rate unless ``uniform_lr=False``). ``convention="std"`` (TP4/seed 003):
    desiderata ⊂ {"init","stable","feature-learning","kernel"}. ``fixed``: ``{name or expr: value}``
    extra equalities (e.g. ``{"a_hidden": "1/2"}``); ``constraints``: extra :class:`Quantity`.
    """
    import sympy as sp

    from .constraints import U
    from .parameterisation import check_choice

    check_choice(convention, CONVENTIONS, "convention")
    check_choice(algorithm, ALGORITHMS, "algorithm")
    if isinstance(desiderata, str):
        desiderata = (desiderata,)
    qs = []
    if convention == "variance":
        if algorithm not in ("bp", "pc") or optimizer != "sgd":
            raise ValueError("the variance-convention desiderata (seed 000) cover algorithm 'bp'/'pc' with SGD; "
                             "use convention='std' for other algorithms")
        q = seed000_quantities(algorithm, uniform_lr=True if uniform_lr is None else uniform_lr)
        for d in desiderata:
            if d not in ("D1", "D2", "D3"):
                raise ValueError(f"variance-convention desiderata are 'D1', 'D2', 'D3'; got {d!r}")
            qs += q[d]
        qs += q["lr"]
    else:
        g = None if gamma_bar_L is None else as_exponent(gamma_bar_L, "gamma_bar_L")
        eb = None if e_B is None else as_exponent(e_B, "e_B")
        seen = set()
        for d in desiderata:
            for x in std_requirements(d, algorithm, optimizer, g, eb):
                if (x.key, x.requirement) not in seen:
                    seen.add((x.key, x.requirement))
                    qs.append(x)
        if uniform_lr:
            qs += [Quantity("lr.hidden=input", U["c_hidden"] - U["c_input"], "=0", "one learning rate"),
                   Quantity("lr.output=input", U["c_output"] - U["c_input"], "=0", "one learning rate")]
    qs += list(constraints)
    fx = {}
    for k, v in (fixed or {}).items():
        key = U[k] if isinstance(k, str) and k in U else (parse(k, symbols={**{n: s for n, s in U.items()}})
                                                          if isinstance(k, str) else as_exponent(k, "fixed key"))
        fx[key] = as_exponent(v, f"fixed[{k}]")
    return solve_quantities(qs, unknowns(convention).values(), fx)


def table(names=("SP", "NTK", "MF", "muP"), algorithm="bp", convention="variance", **kw):
    """Table of named parameterisations (see :mod:`.tables`)."""
    from .tables import make_table

    return make_table(names, algorithm=algorithm, convention=convention, **kw)


__all__ = [
    "Parameterisation", "named", "named_exponents", "classify", "solve", "table", "layer_table", "LayerTable", "TensorRow", "depth_regime", "solve_depth",
    "alpha_analysis", "adam_lr_exponents", "lr_drift", "LrDrift", "two_layer_block", "two_layer_block_correction",
    "parse", "as_exponent", "Solution",
    "Piece", "Classification", "Verdict", "DepthRegime", "Quantity", "seed000_quantities", "std_quantities",
    "std_requirements", "unknowns", "pc_asymptotics", "update_exponents", "derive_width", "solve_quantities",
    "NAMES", "LAYERS", "SYMBOLS", "CONVENTIONS", "ALGORITHMS", "OPTIMIZERS",
]
