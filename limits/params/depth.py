"""Depth exponents: residual branch multiplier ``L^{-α}``, effective per-layer update ``L^{-γ}``.

Everything is derived from exponents of L (sympy):

* Tensor Programs VI rules (:func:`depth_regime`): the init variance grows as
  ``Π(1 + L^{-2α}) ≈ exp(L^{1−2α})`` → stable iff ``1 − 2α ≤ 0``; the summed feature update over L
  blocks is ``L · L^{-α-γ}`` (each block: multiplier ``L^{-α}`` times weight update ``L^{-γ}``) →
  stable in training iff ``1 − α − γ ≤ 0``, nontrivial iff ``1 − α − γ ≥ 0``; faithful iff
  ``α ∈ [1/2, 1]`` (docs/theory/params.rst §4). Learning rates: a block's SGD gradient carries one factor
  ``L^{-α}``, so ``η L^{-2α} = L^{-α-γ}`` ⇒ SGD lr ``∝ L^{α−γ}``; Adam normalises the gradient ⇒
  ``η L^{-α} = L^{-α-γ}`` ⇒ ``∝ L^{-γ}``.
* seed 000 §A.5 (linear residual net, mean-field width, α only): see :func:`alpha_analysis`.
* seed 000 §A.6: Adam width+depth learning rate ``(LN)^{-1/2}`` (:func:`adam_lr_exponents`).
* seed 002 §5 / docs/theory/nfd.rst §6 two-layer residual block: :func:`two_layer_block`.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .constraints import Quantity
from .expr import as_exponent, fmt
from .solver import solve_quantities
from ..registry import sweep_computation

ALPHA = sp.Symbol("alpha", real=True)
GAMMA = sp.Symbol("gamma", real=True)
N = sp.Symbol("N", positive=True)
L = sp.Symbol("L", positive=True)
T = sp.Symbol("T", positive=True)
HALF = sp.Rational(1, 2)


def depth_quantities(alpha=ALPHA, gamma=GAMMA) -> dict:
    """Exponents of L (growth exponents; Θ(1) iff 0) for the TP6 rules and seed 000 §A.5."""
    alpha, gamma = as_exponent(alpha, "alpha"), as_exponent(gamma, "gamma")   # text: the restricted parser only
    return {
        "init_log_variance": Quantity("init", 1 - 2 * alpha, "<=0", "log of init variance growth Σ_l L^{-2α}",
                                      "seed 000 Eq. 102-103; TP6"),
        "training_update": Quantity("train", 1 - alpha - gamma, "<=0", "summed feature update L·L^{-α-γ}", "TP6"),
        "nontrivial": Quantity("nontrivial", 1 - alpha - gamma, ">=0", "summed feature update does not vanish", "TP6"),
        "faithful_low": Quantity("faithful.lo", HALF - alpha, "<=0", "α ≥ 1/2", "TP6 / docs/theory/params.rst §4"),
        "faithful_high": Quantity("faithful.hi", alpha - 1, "<=0", "α ≤ 1", "TP6 / docs/theory/params.rst §4"),
        "seed000_D5": Quantity("D5", 1 - 2 * alpha, "=0", "residual feature updates Θ(L^{1-2α}) = Θ_L(1) "
                               "(SGD, depth-independent η)", "seed 000 Eq. 122-124"),
        "sgd_lr_depth_independent": Quantity("lr", alpha - gamma, "=0", "SGD learning rate L^{α-γ} independent of L",
                                             "TP6"),
    }


@dataclass(frozen=True)
class DepthRegime:
    alpha: sp.Expr
    gamma: sp.Expr
    stable_init: bool
    stable_training: bool
    nontrivial: bool
    faithful: bool
    sgd_lr_exponent: sp.Expr      # learning rate ∝ L^{this}
    adam_lr_exponent: sp.Expr
    name: str

    def __str__(self):
        return (f"α = {fmt(self.alpha)}, γ = {fmt(self.gamma)} ({self.name}): stable_init={self.stable_init}, "
                f"stable_training={self.stable_training}, nontrivial={self.nontrivial}, faithful={self.faithful}; "
                f"SGD lr ∝ L^{fmt(self.sgd_lr_exponent)}, Adam lr ∝ L^{fmt(self.adam_lr_exponent)}")


def _holds(q, subs):
    e = sp.simplify(q.exponent.subs(subs))
    if e.free_symbols:
        raise ValueError(f"cannot decide {q.label}: {e} depends on {sorted(map(str, e.free_symbols))}")
    return bool({"=0": e == 0, "<=0": e <= 0, ">=0": e >= 0}[q.requirement])


@sweep_computation
def depth_regime(alpha, gamma) -> DepthRegime:
    """TP6 verdicts for branch exponent ``alpha`` and update exponent ``gamma`` (numbers/strings)."""
    a = as_exponent(alpha, "alpha")
    g = as_exponent(gamma, "gamma")
    q = depth_quantities()
    subs = {ALPHA: a, GAMMA: g}
    si = _holds(q["init_log_variance"], subs)
    st = _holds(q["training_update"], subs)
    nt = _holds(q["nontrivial"], subs)
    fa = _holds(q["faithful_low"], subs) and _holds(q["faithful_high"], subs)
    name = "Depth-muP" if (a, g) == (HALF, HALF) else ("ODE" if (a, g) == (1, 0) else "custom")
    return DepthRegime(a, g, si, st, nt, fa, sp.expand(a - g), sp.expand(-g), name)


def solve_depth():
    """Derive Depth-μP: seed 000's D5 (α = 1/2) + TP6 stable and nontrivial training (α + γ = 1).
    Returns ``(alpha, gamma)``."""
    q = depth_quantities()
    sol = solve_quantities([q["seed000_D5"], q["init_log_variance"], q["training_update"], q["nontrivial"]],
                           [ALPHA, GAMMA])
    piece = sol.unique()
    return piece.values[ALPHA], piece.values[GAMMA]


def alpha_analysis(alpha=ALPHA, d=HALF) -> dict:
    """seed 000 §A.5 asymptotics (linear residual network, mean-field width ``d = 1/2``):

    ``init_covariance_factor`` (1 + L^{-2α})^{L-2} (Eq. 102, exact), ``feature_update`` L^{1−2α}
    (BP term, Eq. 123), ``pc_term`` L^{2−2α} N^{-2} (PC-only term, Eq. 123), ``s_minus_1`` L N^{-2d}
    (Eq. 47/107), ``ds_dW`` L^{1−α} N^{-5/2} (Eq. 110), and the exponents of L of each.
    """
    a = as_exponent(alpha, "alpha") if not isinstance(alpha, sp.Symbol) else alpha
    dd = as_exponent(d, "d")
    out = {
        "init_covariance_factor": (1 + L ** (-2 * a)) ** (L - 2),
        "init_log_growth_exponent": 1 - 2 * a,
        "feature_update": L ** (1 - 2 * a),
        "pc_term": L ** (2 - 2 * a) * N ** (-2),
        "s_minus_1": L * N ** (-2 * dd),
        "ds_dW": L ** (1 - a) * N ** sp.Rational(-5, 2),
    }
    return out


def adam_lr_exponents(alpha=HALF, gamma=HALF, width_exponent_hidden=HALF):
    """Adam learning rate ∝ N^{x} L^{y} keeping hidden feature updates Θ(1) in the mean-field
    width parameterisation (hidden multiplier N^{-1/2}, entries Θ(1)) and residual branches
    L^{-α} (seed 000 §A.6): one block changes h by ``L^{-α} N^{-a} · N · η`` (sign-like update,
    coherent sum over N inputs); summed over L blocks (coherent) ``L^{1-α} N^{1-a} η`` = Θ(1).
    Returns ``(x, y)``; at α = 1/2, a = 1/2: ``(−1/2, −1/2)`` i.e. η ∝ (LN)^{-1/2}."""
    a = as_exponent(width_exponent_hidden, "width_exponent_hidden")
    al = as_exponent(alpha, "alpha")
    x, y = sp.symbols("x y", real=True)
    sol = sp.solve([sp.Eq(1 - a + x, 0), sp.Eq(1 - al + y, 0)], [x, y], dict=True)[0]
    return sol[x], sol[y]


def two_layer_block(eta1_n=1, eta1_L=0, eta2_n=1, eta2_L=0):
    """Exponent bookkeeping for the two-layer residual block of docs/theory/nfd.rst §6 (seed 002 §5):
    ``u = n^{-1/2} W¹ φ(h)``, ``h⁺ = h + √(T/L) n^{-1/2} W² φ(u)``, mean-field read-out
    (``∂f/∂h_i = Θ(n^{-1})``), learning rates ``η_k = η̄ n^{eta_k_n} L^{eta_k_L}``.

    Steps (exponents of n and L)::

      ∂f/∂u_j = √(T/L) n^{-1/2} Σ_i W²_ij ∂f/∂h_i φ'(u_j): CLT sum (W² independent of ∂f/∂h at
      init) → L^{-1/2} n^{-1/2} · n^{1/2} · n^{-1} = L^{-1/2} n^{-1};
      ∂f/∂W¹_jk = n^{-1/2} ∂f/∂u_j φ(h_k) = L^{-1/2} n^{-3/2};
      Δu_j = n^{-1/2} Σ_k ΔW¹_jk φ(h_k): LLN (update aligned with φ(h)) → n^{1/2} η_1 L^{-1/2} n^{-3/2};
      ∂f/∂W²_ij = √(T/L) n^{-1/2} ∂f/∂h_i φ(u_j) = L^{-1/2} n^{-3/2};
      Δ(increment)_i = √(T/L) n^{-1/2} Σ_j ΔW²_ij φ(u_j) (LLN) → L^{-1} n^{-1} η_2.

    Returns exponents of (n, L) for ``delta_u`` (first-layer feature update from ΔW¹, per block),
    ``delta_increment`` (update of the residual increment from ΔW², per block),
    ``delta_stream_direct`` (those increments summed over L blocks), ``delta_stream_via_u`` (the
    stream change caused by Δu through the fixed W², summed coherently over blocks) and
    ``delta_stream`` (the larger of the two). With η_1 = η̄ n: Δu = Θ(L^{-1/2}) (collapse), stream
    Θ(1). With the corrected η_1 = η̄ n √L: Δu = Θ(1) but the indirect stream change becomes
    Θ(L^{1/2}) (first order in η̄; measured by ``limits.validate.params``).
    """
    e1n, e1L, e2n, e2L = (as_exponent(v, k) for v, k in ((eta1_n, "eta1_n"), (eta1_L, "eta1_L"),
                                                          (eta2_n, "eta2_n"), (eta2_L, "eta2_L")))
    df_dh = (-1, 0)
    df_du = (-HALF + HALF + df_dh[0], -HALF)            # √(T/L) n^{-1/2} · CLT n^{1/2} · ∂f/∂h
    df_dW1 = (-HALF + df_du[0], df_du[1])
    dW1 = (e1n + df_dW1[0], e1L + df_dW1[1])
    du = (-HALF + 1 + dW1[0], dW1[1])                   # n^{-1/2} · LLN n · ΔW¹
    df_dW2 = (-HALF - HALF + df_dh[0] + HALF, -HALF)   # √(T/L) n^{-1/2} ∂f/∂h_i φ(u_j)
    df_dW2 = (-HALF + df_dh[0], -HALF)
    dW2 = (e2n + df_dW2[0], e2L + df_dW2[1])
    dinc = (-HALF + 1 + dW2[0], -HALF + dW2[1])
    dstream_direct = (dinc[0], dinc[1] + 1)
    # indirect path: Δu_j = c_u (W²ᵀ g)_j with (W²ᵀ g)_j = Θ(n^{1/2}·n^{-1}) (CLT), so
    # c_u = n^{du_n + 1/2} L^{du_L}; the increment changes by √(T/L) n^{-1/2} Σ_j W²_ij φ' Δu_j whose
    # coherent part Σ_j W²_ij (W²ᵀ g)_j ≈ n g_i gives L^{-1/2} n^{-1/2} c_u n · n^{-1} per block, with
    # the same sign in every block (same g) → summed coherently over L blocks.
    via_u_block = (du[0], du[1] - HALF)
    dstream_via_u = (via_u_block[0], via_u_block[1] + 1)
    dstream = (sp.Max(dstream_direct[0], dstream_via_u[0]), sp.Max(dstream_direct[1], dstream_via_u[1]))
    f = lambda t: (sp.nsimplify(t[0]), sp.nsimplify(t[1]))  # noqa: E731
    return {"delta_u": f(du), "delta_increment": f(dinc), "delta_stream_direct": f(dstream_direct),
            "delta_stream_via_u": f(dstream_via_u), "delta_stream": f(dstream)}


def two_layer_block_correction():
    """Solve for the first-layer learning-rate exponents (x, y), ``η_1 = η̄ n^x L^y``, that make the
    first-layer feature update Δu = Θ(1) (with the second layer at η̄ n): returns ``(1, 1/2)``,
    i.e. ``η_1 = η̄ n √L`` (docs/theory/nfd.rst §6: ``η̄ n √(L/T)``; T is a constant)."""
    x, y = sp.symbols("x y", real=True)
    du = two_layer_block(eta1_n=0, eta1_L=0)["delta_u"]
    sol = sp.solve([sp.Eq(du[0] + x, 0), sp.Eq(du[1] + y, 0)], [x, y], dict=True)[0]
    return sol[x], sol[y]


def s_expectation(N=N, L=L, alpha=HALF, gamma0=1):
    """Exact E[s(θ)] − 1 at initialisation for seed 000's mean-field linear ResNet (Eqs. 104–105):
    with independent N(0,1) weights, ``E‖x (I + W/(L^α √N))‖² = ‖x‖² (1 + L^{-2α})`` and
    ``E‖w_L‖² = N``, so ``E[s] − 1 = (γ0² N)^{-1} Σ_{k=0}^{L-2} q^k`` with ``q = 1 + L^{-2α}``
    (k = 0 is the ‖w_L‖² term). At α = 1/2 this is ``(e − 1) L/N`` as L → ∞ (Eq. 107: Θ(L/N))."""
    a = as_exponent(alpha, "alpha") if not isinstance(alpha, sp.Basic) or alpha.is_number else alpha
    q = 1 + L ** (-2 * a) if isinstance(L, sp.Basic) else 1 + sp.Integer(L) ** (-2 * a)
    k = sp.Symbol("k", integer=True, nonnegative=True)
    total = sp.summation(q ** k, (k, 0, L - 2))
    return sp.simplify(total / (gamma0 ** 2 * N))
