"""``gradient_descent(..., t=np.inf)``: the converged ensemble is the limit of finite t (well-conditioned and
singular NTKs), equals an independent pseudo-inverse formula, and goes through results, plots and checks."""
import numpy as np
import pytest

import limits

P = limits.predict


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((10, 3))
    Xs = rng.standard_normal((4, 3))
    Y = np.stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]], axis=1)
    m = limits.mlp(3, 2, d_out=2, activation="erf", sigma_w2=1.6, sigma_b2=0.1, lr=0.5)
    return m, X, Y, Xs


def _rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def _pinv_prediction(m, X, Y, Xs):
    """μ_∞, Σ_∞ from the dense kernels with numpy's pseudo-inverse (rcond P ε, the cutoff of the docstring)."""
    k = limits.kernels.kernel(m, np.vstack([X, Xs]))
    n = X.shape[0]
    K, Ksx, Kss, T, Tsx = k.nngp[:n, :n], k.nngp[n:, :n], k.nngp[n:, n:], k.ntk[:n, :n], k.ntk[n:, :n]
    A = Tsx @ np.linalg.pinv(T, rcond=n * np.finfo(float).eps, hermitian=True)
    return A @ Y, Kss + A @ K @ A.T - A @ Ksx.T - Ksx @ A.T, np.linalg.eigvalsh(T)


@pytest.mark.parametrize("flow", [True, False])
def test_infinite_time_is_the_limit_of_finite_time(data, flow):
    m, X, Y, Xs = data
    g = P.gradient_descent(m, X, Y, Xs, t=[1e6, np.inf], flow=flow, learning_rate=0.05)
    lam = np.linalg.eigvalsh(limits.kernels.kernel(m, X).ntk)
    assert lam[0] * 0.05 * 1e6 > 100 and lam[-1] / lam[0] < 1e5          # well conditioned: converged by t = 1e6
    assert np.isposinf(g.t[-1]) and g.mean.shape == (2, 4, 2)
    assert _rel(g.mean[1], g.mean[0]) < 1e-10 and _rel(g.cov[1], g.cov[0]) < 1e-10
    assert _rel(g.mean_train[1], g.mean_train[0]) < 1e-10 and _rel(g.var[1], g.var[0]) < 1e-10
    mu, S, _ = _pinv_prediction(m, X, Y, Xs)
    assert _rel(g.mean[1], mu) < 1e-9 and _rel(g.cov[1], S) < 1e-9
    assert np.max(np.abs(g.mean_train[1] - Y)) < 1e-9 * np.max(np.abs(Y))     # interpolates the training data


def test_singular_ntk_is_pseudo_inverted(data):
    """Repeated training inputs with different targets: Θ_XX is singular, the flow converges to the
    least-squares fit, t = ∞ equals t = 1e6 and the pseudo-inverse formula, all finite."""
    m, X, Y, Xs = data
    Xd = np.vstack([X, X[:3]])
    Yd = np.vstack([Y, Y[:3] + 0.5])
    mu, S, lam = _pinv_prediction(m, Xd, Yd, Xs)
    assert lam[0] < 1e-12 * lam[-1]                                          # singular
    g = P.gradient_descent(m, Xd, Yd, Xs, t=[1e6, np.inf], learning_rate=0.05)
    assert np.all(np.isfinite(g.mean)) and np.all(np.isfinite(g.cov))
    assert _rel(g.mean[1], g.mean[0]) < 1e-10 and _rel(g.cov[1], g.cov[0]) < 1e-10
    assert _rel(g.mean[1], mu) < 1e-8 and _rel(g.cov[1], S) < 1e-8
    # the duplicated inputs are fitted by the mean of their two targets (least squares)
    assert np.max(np.abs(g.mean_train[1][:3] - (Y[:3] + 0.25))) < 1e-8


def test_infinite_time_is_ntk_kernel_regression(data):
    m, X, Y, Xs = data
    g = P.gradient_descent(m, X, Y, Xs, t=np.inf)
    r = P.kernel_regression(m, X, Y, Xs, kernel="ntk")
    assert _rel(g.mean[0], r.mean) < 1e-9 and _rel(g.var[0], r.var) < 1e-8


def test_times_are_checked(data):
    m, X, Y, Xs = data
    for bad, match in (([np.nan], "NaN"), ([-np.inf], ">= 0"), ([-1.0], ">= 0"), (["a"], "numeric")):
        with pytest.raises(ValueError, match=match):
            P.gradient_descent(m, X, Y, Xs, t=bad)
    g = P.gradient_descent(m, X, Y, Xs, t=[0, 3, np.inf], flow=False, learning_rate=0.05)    # inf is a step count
    assert np.isposinf(g.t[-1]) and "t = 0…∞" in str(g)


def test_result_round_trip_plot_and_check(data, tmp_path):
    m, X, Y, Xs = data
    g = P.gradient_descent(m, X, Y, Xs, t=[0.5, 2.0, np.inf])
    g.save(tmp_path / "g")
    assert P.GDResult.load(tmp_path / "g").equals(g)
    fig = g.plot(tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 1000 and any("∞" in t.get_text()
                                                              for t in fig.axes[0].get_legend().get_texts())
    c = limits.check(g, widths=(64, 128), inits=8, seed=0)                 # compares the finite times only
    assert c.details["blocks"]["gd mean"]["entries"] == 2 * (4 * 2 + 10 * 2)     # t = 0.5 and 2, not ∞
    with pytest.raises(ValueError, match="finite time"):
        limits.check(P.gradient_descent(m, X, Y, Xs, t=np.inf), widths=(64, 128), inits=8)
