"""limits.dmft.solve(..., X_test=): test predictions of mean-field networks."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import limits
import limits.dmft as dm


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((5, 6)), rng.standard_normal(5), rng.standard_normal((3, 6))


def test_test_points_do_not_change_the_training_solution(data):
    X, y, Xs = data
    d0 = dm.solve(X, y, depth=2, gamma0=1.0, dt=0.05, steps=10)
    d = dm.solve(X, y, depth=2, gamma0=1.0, dt=0.05, steps=10, X_test=Xs)
    assert np.max(np.abs(d.f - d0.f)) < 1e-12 and np.max(np.abs(d.ntk - d0.ntk)) < 1e-9
    assert d.f_test.shape == (11, 3) and d.ntk_test.shape == (11, 3, 5) and d.Phi_test.shape == (2, 11, 3, 5)
    assert np.all(d.f_test[0] == 0) and np.all(d.f_test_se == 0)
    # the test–train NTK at t = 0 is the lazy NTK's block
    K0 = dm.lazy_ntk(np.vstack([X, Xs]), 2)
    assert np.max(np.abs(d.ntk_test[0] - K0[5:, :5])) < 1e-12


def test_two_layer_linear_discrete_recursion_exact(data):
    """L = 1: (h over train and test inputs, w) evolve linearly; only training errors drive."""
    X, y, Xs = data
    g0, dt, n = 1.7, 0.05, 30
    d = dm.solve(X, y, depth=1, gamma0=g0, dt=dt, steps=n, X_test=Xs)
    Xa = np.vstack([X, Xs])
    Kx = Xa @ Xa.T / X.shape[1]
    P, Pa = 5, 8
    c = np.r_[np.ones(P), np.zeros(3)]
    yy = np.r_[y, np.zeros(3)]
    S = np.eye(Pa + 1)
    S[:Pa, :Pa] = Kx
    F = np.zeros((n + 1, Pa))
    for t in range(n):
        F[t] = S[:Pa, Pa] / g0
        D = (yy - F[t]) * c
        J = np.eye(Pa + 1)
        J[:Pa, Pa] = g0 * dt * Kx @ D
        J[Pa, :Pa] = g0 * dt * D
        S = J @ S @ J.T
    F[n] = S[:Pa, Pa] / g0
    assert np.max(np.abs(d.f_test - F[:, P:])) < 1e-12 and np.max(np.abs(d.f - F[:, :P])) < 1e-12


def test_two_layer_linear_flow_matches_test_point_ode(data):
    """Gradient flow: df*/dt = Σ_μ K(x*, x_μ; t) Δ_μ with K = G¹ K^x + Φ¹ (moments of (h, w))."""
    X, y, Xs = data
    g0, T = 1.3, 1.0
    Xa = np.vstack([X, Xs])
    Kx = Xa @ Xa.T / X.shape[1]
    P, Pa = 5, 8

    def rhs(t, s):
        S = s.reshape(Pa + 1, Pa + 1)
        D = np.r_[y - S[:P, Pa] / g0, np.zeros(3)]
        B = np.zeros((Pa + 1, Pa + 1))
        B[:Pa, Pa] = g0 * Kx @ D
        B[Pa, :Pa] = g0 * D
        return (B @ S + S @ B.T).ravel()

    S0 = np.eye(Pa + 1)
    S0[:Pa, :Pa] = Kx
    sol = solve_ivp(rhs, (0, T), S0.ravel(), rtol=1e-11, atol=1e-12, t_eval=[T])
    f_ode = sol.y[:, -1].reshape(Pa + 1, Pa + 1)[P:Pa, Pa] / g0
    errs = []
    for n in (20, 40):
        d = dm.solve(X, y, depth=1, gamma0=g0, dt=T / n, steps=n, method="flow", richardson=True, X_test=Xs)
        errs.append(np.max(np.abs(d.f_test[-1] - f_ode)))
    assert errs[1] < 2e-4 and errs[0] / errs[1] > 3.0      # second order in dt


def test_lazy_limit_is_the_ntk_prediction_deep_linear(data):
    X, y, Xs = data
    d = dm.solve(X, y, depth=3, gamma0=1e-4, dt=0.05, steps=20, X_test=Xs)
    m = limits.mlp(6, 2, activation="linear", sigma_w2=1.0, sigma_b2=0.0)
    g = limits.predict.gradient_descent(m, X, y, Xs, t=np.arange(21), flow=False, learning_rate=0.05)
    assert np.max(np.abs(d.f_test - g.mean[:, :, 0])) < 1e-7      # O(γ0²)
    assert np.max(np.abs(d.f - g.mean_train[:, :, 0])) < 1e-7


def test_feature_learning_changes_the_test_prediction(data):
    X, y, Xs = data
    lazy = dm.solve(X, y, depth=2, gamma0=1e-4, dt=0.05, steps=15, X_test=Xs)
    rich = dm.solve(X, y, depth=2, gamma0=2.0, dt=0.05, steps=15, X_test=Xs)
    assert np.max(np.abs(rich.f_test[-1] - lazy.f_test[-1])) > 1e-2


@pytest.mark.slow
def test_lazy_limit_nonlinear_monte_carlo(data):
    X, y, Xs = data
    d = dm.solve(X, y, depth=2, activation="tanh", gamma0=1e-3, dt=0.1, steps=6, X_test=Xs, M=1000, seed=0)
    m = limits.mlp(6, 1, activation="tanh", sigma_w2=1.0, sigma_b2=0.0)
    g = limits.predict.gradient_descent(m, X, y, Xs, t=np.arange(7), flow=False, learning_rate=0.1)
    z = (d.f_test[1:] - g.mean[1:, :, 0]) / np.maximum(d.f_test_se[1:], 1e-12)
    assert np.max(np.abs(z)) < 4.5 and np.all(d.f_test_se[1:] > 0)


def test_bad_test_inputs(data):
    X, y, Xs = data
    with pytest.raises(ValueError, match="X_test"):
        dm.solve(X, y, depth=2, dt=0.05, steps=3, X_test=Xs[:, :4])
    bad = Xs.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X_test"):
        dm.solve(X, y, depth=2, dt=0.05, steps=3, X_test=bad)


def test_check_dmft_test_predictions_against_finite_mean_field_networks():
    from dataclasses import replace

    rng = np.random.default_rng(0)
    X, y, Xs = rng.standard_normal((6, 5)), np.sign(rng.standard_normal(6)), rng.standard_normal((3, 5))
    m = limits.mlp(5, 1, activation="linear", parameterisation="muP", gamma0=1.0, sigma_b2=0.0, lr=0.1)
    d = dm.solve(X, y, model=m, steps=8, X_test=Xs)
    c = limits.check(d, widths=(64, 128, 256), inits=64, seed=0)
    assert c.passed, c.to_markdown()
    assert c.theory.size == 8 * 9 and c.power < 0.05
    assert not limits.check(replace(d, f_test=1.05 * d.f_test), widths=(64, 128, 256), inits=64, seed=0).passed
