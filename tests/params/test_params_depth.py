"""Depth: TP6 rules, seed 000 α analysis, optimiser LR rules, two-layer residual block correction."""
import pytest
import sympy as sp

from limits.params import (adam_lr_exponents, alpha_analysis, depth_regime, named, pc_asymptotics, solve_depth,
                           two_layer_block, two_layer_block_correction)
from limits.params.depth import L, N

R = sp.Rational
h = R(1, 2)


@pytest.mark.parametrize("alpha,gamma,expect", [
    (h, h, (True, True, True, True)),          # Depth-μP
    (1, 0, (True, True, True, True)),          # ODE scaling
    (0, 0, (False, False, True, False)),       # no branch scaling
    (h, 0, (True, False, True, True)),         # blows up in training
    (1, 1, (True, True, False, True)),         # trivial
    (R(3, 2), 0, (True, True, False, False)),  # not faithful (α > 1), trivial
    (R(1, 4), 1, (False, True, False, False)),
])
def test_tp6_rules(alpha, gamma, expect):
    r = depth_regime(alpha, gamma)
    assert (r.stable_init, r.stable_training, r.nontrivial, r.faithful) == expect


def test_lr_rules():
    dm = depth_regime(h, h)
    assert dm.sgd_lr_exponent == 0 and dm.adam_lr_exponent == -h and dm.name == "Depth-muP"
    ode = depth_regime(1, 0)
    assert ode.sgd_lr_exponent == 1 and ode.adam_lr_exponent == 0 and ode.name == "ODE"
    assert solve_depth() == (h, h)
    p = named("depth-muP")
    assert (p.depth_alpha, p.depth_gamma, p.depth_lr_exponent) == (h, h, 0)
    pa = named("depth-muP", convention="std", optimizer="adam")
    assert pa.depth_lr_exponent == -h
    with pytest.raises(ValueError):
        depth_regime("x", 0)


def test_seed000_alpha_analysis():
    a = alpha_analysis()
    alpha = sp.Symbol("alpha", real=True)
    # init covariance (1 + L^{-2α})^{L-2}: bounded at α = 1/2 (→ e), explodes for α < 1/2
    f = a["init_covariance_factor"]
    assert sp.limit(f.subs(alpha, h), L, sp.oo) == sp.E
    assert sp.limit(f.subs(alpha, 1), L, sp.oo) == 1
    assert sp.limit(sp.log(f.subs(alpha, R(1, 4))), L, sp.oo) == sp.oo
    assert a["init_log_growth_exponent"] == 1 - 2 * alpha
    # feature updates Θ(L^{1-2α}) → α = 1/2 exactly; PC-only term L^{2-2α}N^{-2} = L/N² there
    assert a["feature_update"].subs(alpha, h) == 1
    assert sp.simplify(a["pc_term"].subs(alpha, h) - L / N ** 2) == 0
    assert a["s_minus_1"] == L / N                        # s(θ) = 1 + Θ(L/N): PC → BP iff N ≫ L
    assert sp.simplify(a["ds_dW"].subs(alpha, h) - sp.sqrt(L) * N ** R(-5, 2)) == 0
    w = pc_asymptotics()
    d, al = sp.Symbol("d", real=True), sp.Symbol("a_hidden", real=True)
    assert w["s_minus_1"] == L * N ** (-2 * d)
    assert w["df_dW"] == N ** (-d - al - h) and w["ds_dW"] == L * N ** (-2 * d - al - h)


def test_adam_width_depth():
    assert adam_lr_exponents() == (-h, -h)                  # η ∝ (LN)^{-1/2}  (seed 000 §A.6)
    assert adam_lr_exponents(alpha=1, gamma=0) == (-h, 0)


def test_two_layer_block_collapse_and_correction():
    b = two_layer_block()                                  # η = η̄ n for both layers
    assert b["delta_u"] == (0, -h)                         # first-layer feature learning collapses: Θ(L^{-1/2})
    assert b["delta_increment"] == (0, -1) and b["delta_stream"] == (0, 0)   # residual stream Θ(1)
    x, y = two_layer_block_correction()
    assert (x, y) == (1, h)                                # η_1 = η̄ n √(L/T)
    fixed = two_layer_block(eta1_n=x, eta1_L=y)
    assert fixed["delta_u"] == (0, 0) and fixed["delta_stream_direct"] == (0, 0)
    # first order in η̄: the corrected Δu feeds back coherently through W² (stream ∝ L^{1/2})
    assert b["delta_stream_via_u"] == (0, 0) and fixed["delta_stream_via_u"] == (0, h)
    assert fixed["delta_stream"] == (0, h)
