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
