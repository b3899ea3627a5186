"""Core parameterisation objects: conversion, θ-shift symmetry, exponent(), named via the solver."""
import pytest
import sympy as sp

import limits
from limits.params import Parameterisation, classify, named

R = sp.Rational


def test_exponent_api_and_convention():
    p = named("muP", convention="variance", algorithm="bp")
    assert p.convention == "variance"
    assert p.exponent("input", "a") == R(-1, 2)
    assert p.exponent("hidden", "b") == 1
    assert p.exponent("output", "d") == R(1, 2)
    q = named("muP", convention="std")
    assert q.convention == "std" and q.exponent("output", "d") == 0
    with pytest.raises(ValueError, match="layer"):
        p.exponent("middle", "a")
    with pytest.raises(ValueError, match="symbol"):
        p.exponent("input", "e")


def test_conversion_round_trip_named():
    for name in ("SP", "NTK", "MF", "muP"):
        v = named(name, convention="variance")
        s = v.to_std()
        assert s.to_variance() == v
        assert named(name, convention="std").equivalent(s)


def test_std_variance_conversion_is_derived_not_guessed():
    # variance: W ~ N(0, N^-b) has std N^{-b/2}; γ is a read-out multiplier; η = η0 γ² N^{-c}
    v = Parameterisation.make(a=[R(-1, 2), 0, 0], b=[1, 1, 1], c=1, d=R(1, 2), convention="variance")
    s = v.to_std()
    assert s.a == (R(-1, 2), 0, R(1, 2))
    assert s.b == (R(1, 2),) * 3
    assert s.c == (0, 0, 0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown parameterisation"):
        named("XYZ")
    with pytest.raises(ValueError, match="convention"):
        named("muP", convention="weird")
    with pytest.raises(ValueError, match="algorithm"):
        named("muP", algorithm="hebb")
    with pytest.raises(ValueError, match="unknown argument"):
        named("muP", foo=1)
    with pytest.raises(ValueError, match="d must be 0"):
        Parameterisation.make(0, 0, 0, d=1, convention="std")
    with pytest.raises(ValueError):
        Parameterisation.make([0, 0], 0, 0)


def test_public_api_names():
    assert limits.params.classify(named("muP")).regime == "feature-learning"
    assert classify(named("NTK")).regime == "kernel"
    r = limits.params.depth_regime(R(1, 2), R(1, 2))
    assert r.stable_init and r.stable_training and r.nontrivial and r.faithful


def test_regimes_and_failure_exponents():
    R = sp.Rational
    mup = named("muP", convention="std")
    slow = Parameterisation.make(a=mup.a, b=mup.b, c=[1, 1, 1])          # learning rate N^-1 too small
    c = classify(slow)
    assert c.regime == "trivial" and c.r == 1 and not c.condition_3_2.holds
    assert c.condition_3_2.exponent == -1 and c.condition_3_2.status == "vanishes as N^-1"
    vanish = Parameterisation.make(a=0, b=[0, 1, R(1, 2)], c=0)             # hidden init N^{-1/2}
    c = classify(vanish)
    assert c.regime == "unstable" and {v.key: v.exponent for v in c.init}["init.hidden"] == -R(1, 2)
    assert not c.desideratum("D1")
    explode = Parameterisation.make(a=0, b=[0, R(1, 2), 0], c=1)            # read-out too large: f_0 ∝ N^{1/2}
    c = classify(explode)
    assert c.regime == "unstable" and {v.key: v.exponent for v in c.init}["init.output"] == R(1, 2)
    assert "blows up" in str(c)


def test_inconsistent_and_symbolic_inputs():
    from limits.params import solve

    sol = solve("bp", ["D1", "D2", "D3"], convention="variance", fixed={"d": 0})
    assert sol.empty
    with pytest.raises(ValueError, match="no solution"):
        sol.unique()
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=sp.Symbol("gamma_bar_L"))
    with pytest.raises(ValueError, match="gamma_bar_L"):
        classify(p)
    assert classify(p.subs({"gamma_bar_L": -1})).regime == "feature-learning"
    with pytest.raises(ValueError, match="variance-convention desiderata"):
        solve("bp", ["init"], convention="variance")
    with pytest.raises(ValueError, match="kind"):
        solve("bp", ["D1"], convention="std")
    with pytest.raises(ValueError, match="gamma_bar_L is only meaningful"):
        named("muP", algorithm="bp", gamma_bar_L=0)
    with pytest.raises(ValueError, match="p must be a Parameterisation"):
        classify({"a": 0})


def test_adam_variance_convention():
    p = named("muP", convention="std", optimizer="adam")
    v = p.to_variance()
    assert v.optimizer == "adam" and v.to_std() == p
    assert classify(p).regime == classify(v).regime == "feature-learning"
    assert classify(p.shift(sp.Rational(1, 3))).regime == "feature-learning"


def test_tp4_nontriviality_rule_for_bp():
    """TP4: nontrivial ⇔ a_L+b_L+r = 1 or 2a_L+c_L = 1. A μP net with a tiny read-out init (b_L = 2)
    is still feature-learning (seed 003: b_L ≥ 1 reduces to b_L = 1 after one update); read-out-only
    learning is a kernel regime for BP, while seed 003's rule (Condition 3.2) is used for TP."""
    R = sp.Rational
    small_head = Parameterisation.make(a=0, b=[0, R(1, 2), 2], c=[-1, 0, 1])
    c = classify(small_head)
    assert c.regime == "feature-learning" and not c.condition_3_2.holds and c.readout_only
    frozen = Parameterisation.make(a=0, b=[0, R(1, 2), 1], c=[0, 1, 1])        # hidden rates N^-1 too small
    c = classify(frozen)
    assert c.regime == "kernel" and c.r == 1 and c.readout_only
    tp_frozen = Parameterisation.make(a=0, b=[0, R(1, 2), R(1, 2)], c=[1, 2, 1], algorithm="tp")
    c = classify(tp_frozen)
    assert c.regime == "trivial" and c.readout_only
