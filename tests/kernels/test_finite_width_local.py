"""K1 of two-hidden-layer compositions by the local route (limits/kernels/finite_width_local.py) against the general
route of limits.kernels.finite_width_serial (all m² four-point functions and dense pair operators): equal to 1e-12
relative on small cases (relu with the batched moments, erf/tanh with pooling, Dense layers, skipped zero terms),
the routing of finite_width's ``var`` and its refusal of a bad value."""
import numpy as np
import pytest

import limits
from limits.kernels import finite_width_local as fl
from limits.kernels.finite_width_serial import finite_width_serial

L = limits.layers


def _both(s, X):
    K, K1, info = fl.correction(s, X)
    Kg, K1g, _, _ = finite_width_serial(s, X)
    np.testing.assert_allclose(K, Kg, rtol=1e-13)
    assert np.max(np.abs(K1)) > 0
    np.testing.assert_allclose(K1, K1g, rtol=1e-12, atol=1e-12 * np.max(np.abs(K1g)))
    return info


def test_relu_1d_cnn_equals_general_route():
    s = limits.serial(L.Conv((2,), "SAME", 2.0, 0.1), L.Activation("relu"), L.Conv((2,), "SAME", 1.5, 0.05),
                      L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    info = _both(s, np.random.default_rng(1).normal(size=(2, 3, 2)))
    assert info["four_point"] <= info["v_entries"] * 4


def test_relu_2d_valid_flatten_equals_general_route():
    s = limits.serial(L.Conv((2, 2), "VALID", 2.0, 0.1), L.Activation("relu"), L.Conv((2, 2), "SAME", 1.5, 0.0),
                      L.Activation("relu"), L.Flatten(), L.Dense(1.0, 0.05))
    _both(s, np.random.default_rng(2).normal(size=(2, 3, 3, 2)))


def test_smooth_activations_with_pooling_equal_general_route():
    s = limits.serial(L.Conv((2,), "SAME", 2.0, 0.1), L.Activation("erf"), L.Conv((2,), "SAME", 1.5, 0.05),
                      L.Activation("tanh"), L.AvgPool((2,)), L.Flatten(), L.Dense(1.0, 0.05))
    _both(s, np.random.default_rng(3).normal(size=(2, 4, 2)))


def test_uncorrelated_terms_are_skipped_and_change_nothing():
    """No first-layer bias, inputs on disjoint channels: the two inputs' first-layer variables are uncorrelated, those
    four-point functions vanish and are skipped, and the K1 is the general route's."""
    X = np.random.default_rng(4).normal(size=(2, 3, 2))
    X[0, :, 1] = 0.0
    X[1, :, 0] = 0.0
    s = limits.serial(L.Conv((2,), "SAME", 2.0, 0.0), L.Activation("relu"), L.Conv((2,), "SAME", 1.5, 0.05),
                      L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    info = _both(s, X)
    assert info["integrated"] < info["four_point"]


def test_background_without_bias():
    """Zero pixels and no first-layer bias: those first-layer variables are identically 0 (the general route refuses
    them at its first Price derivative); here their terms are exactly 0 and the K1 is finite."""
    X = np.random.default_rng(6).normal(size=(2, 5, 2))
    X[:, :2] = 0.0
    s = limits.serial(L.Conv((2,), "SAME", 2.0, 0.0), L.Activation("relu"), L.Conv((2,), "SAME", 1.5, 0.05),
                      L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    K, K1, info = fl.correction(s, X)
    assert np.all(np.isfinite(K1)) and info["integrated"] < info["four_point"]
    with pytest.raises(ValueError, match="every variance must be positive"):
        finite_width_serial(s, X)


def test_finite_width_routes_by_var():
    s = limits.serial(L.Conv((2,), "SAME", 2.0, 0.1), L.Activation("erf"), L.Conv((2,), "SAME", 1.5, 0.05),
                      L.Activation("erf"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    X = np.random.default_rng(5).normal(size=(3, 3, 2))
    general = limits.kernels.finite_width(s, X, ntk=False)             # "auto": small, the general route
    local = limits.kernels.finite_width(s, X[:2], X[2:], ntk=False, var=False)
    assert np.all(np.isfinite(general.var_K)) and general.params_cov is not None
    assert np.all(np.isnan(local.var_K)) and "local route" in local.note
    np.testing.assert_allclose(local.K1, general.K1[:2, 2:], rtol=1e-12)
    with pytest.raises(ValueError, match="var must be"):
        limits.kernels.finite_width(s, X, var="yes")


def test_plan_recognises_only_the_two_layer_form():
    assert fl.plan(limits.serial(L.Dense(1.0), L.Activation("relu"), L.Dense(1.0), L.Activation("relu"),
                                 L.Dense(1.0))) is not None
    assert fl.plan(limits.serial(L.Dense(1.0), L.Activation("relu"), L.Dense(1.0))) is None
    assert fl.plan(limits.serial(L.Dense(1.0), L.Activation("relu"), L.Dense(1.0), L.Activation("relu"),
                                 L.Dense(1.0), L.Activation("relu"), L.Dense(1.0))) is None
