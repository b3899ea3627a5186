"""limits.predict: NNGP posterior and NTK gradient-descent ensembles against dense direct formulas."""
import numpy as np
import pytest
from scipy.linalg import expm
from scipy.stats import multivariate_normal

import limits
from limits.model import ModelError
from limits.predict import SingularKernelError


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 4))
    Xs = rng.standard_normal((5, 4))
    Y = np.stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]], axis=1)
    m = limits.mlp(4, 2, d_out=2, activation="erf", sigma_w2=1.6, sigma_b2=0.1, lr=0.3)
    return m, X, Y, Xs


def _k(m, X, Xs):
    K = limits.kernels.kernel(m, np.vstack([X, Xs]))
    P = X.shape[0]
    return K.nngp[:P, :P], K.nngp[P:, :P], K.nngp[P:, P:], K.ntk[:P, :P], K.ntk[P:, :P]


def test_posterior_matches_dense_formula(data):
    m, X, Y, Xs = data
    K, Ksx, Kss, _, _ = _k(m, X, Xs)
    s2 = 0.05
    A = K + s2 * np.eye(len(X))
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=s2)
    assert np.max(np.abs(p.mean - Ksx @ np.linalg.solve(A, Y))) < 1e-10
    assert np.max(np.abs(p.cov - (Kss - Ksx @ np.linalg.solve(A, Ksx.T)))) < 1e-10
    assert np.allclose(p.var, np.diag(p.cov), rtol=0, atol=1e-15)
    lml = sum(multivariate_normal(np.zeros(len(X)), A).logpdf(Y[:, o]) for o in range(2))
    assert abs(p.log_marginal_likelihood - lml) < 1e-10 * max(1, abs(lml))
    # 1-d targets for a one-output model give a P_test × 1 mean
    m1 = m.with_(d_out=1)
    p1 = limits.predict.nngp_posterior(m1, X, Y[:, 0], Xs, noise=s2)
    assert p1.mean.shape == (5, 1) and np.max(np.abs(p1.mean[:, 0] - p.mean[:, 0])) < 1e-12


def test_any_number_of_outputs(data):
    """The read-out kernel is shared by the outputs: a model with d_out = 2 accepts 1 or 3 target columns,
    output by output equal to the two-column predictions (posterior, GD, kernel regression), and the result
    records the model with the targets' d_out."""
    m, X, Y, Xs = data
    Y3 = np.column_stack([Y, Y[:, 0] - Y[:, 1]])
    P = limits.predict
    p2 = P.nngp_posterior(m, X, Y, Xs, noise=0.05)
    p1 = P.nngp_posterior(m, X, Y[:, 0], Xs, noise=0.05)
    p3 = P.nngp_posterior(m, X, Y3, Xs, noise=0.05)
    assert p1.mean.shape == (5, 1) and p3.mean.shape == (5, 3)
    assert np.max(np.abs(p1.mean[:, 0] - p2.mean[:, 0])) < 1e-12
    assert np.max(np.abs(p3.mean[:, :2] - p2.mean)) < 1e-12
    assert np.max(np.abs(p3.mean[:, 2] - (p2.mean[:, 0] - p2.mean[:, 1]))) < 1e-10
    assert np.array_equal(p3.cov, p2.cov) and p3.model["d_out"] == 3 and p1.model["d_out"] == 1
    lml1 = P.nngp_posterior(m, X, Y[:, 1], Xs, noise=0.05).log_marginal_likelihood
    assert abs(p1.log_marginal_likelihood + lml1 - p2.log_marginal_likelihood) < 1e-10 * abs(lml1)
    g2 = P.gradient_descent(m, X, Y, Xs, t=[1.0, 10.0])
    g3 = P.gradient_descent(m, X, Y3, Xs, t=[1.0, 10.0])
    assert g3.mean.shape == (2, 5, 3) and np.max(np.abs(g3.mean[:, :, :2] - g2.mean)) < 1e-12
    assert np.array_equal(g3.cov, g2.cov) and g3.model["d_out"] == 3
    r1 = P.kernel_regression(m, X, Y[:, :1], Xs, noise=0.05)
    assert np.max(np.abs(r1.mean[:, 0] - p2.mean[:, 0])) < 1e-10


def test_posterior_result_round_trip(tmp_path, data):
    m, X, Y, Xs = data
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=0.01)
    p.save(tmp_path / "post")
    q = limits.results.load_result(tmp_path / "post")
    assert np.array_equal(q.cov, p.cov) and q.model == p.model and q.noise == p.noise


def _van_loan(Th, eta, t):
    """∫_0^t η e^{−ηΘs} ds by the augmented exponential (exact, singular Θ included)."""
    P = Th.shape[0]
    Aug = np.zeros((2 * P, 2 * P))
    Aug[:P, :P] = -eta * Th
    Aug[:P, P:] = np.eye(P)
    return eta * expm(Aug * t)[:P, P:]


def test_flow_matches_matrix_exponential_and_infinite_time_is_kernel_regression(data):
    m, X, Y, Xs = data
    K, Ksx, Kss, Th, Tsx = _k(m, X, Xs)
    ts = np.array([0.0, 0.7, 3.0, 20.0])
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=ts)
    for i, t in enumerate(ts):
        A = Tsx @ _van_loan(Th, m.lr, t)
        S = Kss + A @ K @ A.T - A @ Ksx.T - Ksx @ A.T
        assert np.max(np.abs(g.mean[i] - A @ Y)) < 1e-10
        assert np.max(np.abs(g.cov[i] - S)) < 1e-10
        assert np.max(np.abs(g.mean_train[i] - (np.eye(len(X)) - expm(-m.lr * t * Th)) @ Y)) < 1e-10
    assert np.max(np.abs(g.cov[0] - Kss)) < 1e-12 and np.max(np.abs(g.mean[0])) == 0
    ginf = limits.predict.gradient_descent(m, X, Y, Xs, t=[1e7])
    A = Tsx @ np.linalg.solve(Th, np.eye(len(X)))
    assert np.max(np.abs(ginf.mean[0] - Tsx @ np.linalg.solve(Th, Y))) < 1e-9
    S = Kss + A @ K @ A.T - A @ Ksx.T - Ksx @ A.T
    assert np.max(np.abs(ginf.cov[0] - S)) < 1e-9


def test_discrete_gd_matches_explicit_iteration_of_linearised_model(data):
    m, X, Y, Xs = data
    K, Ksx, Kss, Th, Tsx = _k(m, X, Xs)
    P, Pt = len(X), len(Xs)
    for reduction in ("sum", "mean"):
        eta = 0.15
        c = 1.0 if reduction == "sum" else 1.0 / P
        g = limits.predict.gradient_descent(m, X, Y, Xs, t=[0, 1, 5, 40], learning_rate=eta, flow=False,
                                            reduction=reduction)
        # joint state z = [f(X); f(X*)]: z ← M z + b, cov ← M cov Mᵀ
        Mx = np.eye(P + Pt)
        Mx[:P, :P] -= eta * c * Th
        Mx[P:, :P] = -eta * c * Tsx
        b = np.vstack([eta * c * Th @ Y, eta * c * Tsx @ Y])
        z = np.zeros((P + Pt, 2))
        C = np.block([[K, Ksx.T], [Ksx, Kss]])
        for k in range(41):
            if k in (0, 1, 5, 40):
                i = [0, 1, 5, 40].index(k)
                assert np.max(np.abs(g.mean[i] - z[P:])) < 1e-10
                assert np.max(np.abs(g.mean_train[i] - z[:P])) < 1e-10
                assert np.max(np.abs(g.cov[i] - C[P:, P:])) < 1e-10
            z = Mx @ z + b
            C = Mx @ C @ Mx.T


def test_flow_is_small_step_limit_of_gd(data):
    m, X, Y, Xs = data
    t = 2.0
    f = limits.predict.gradient_descent(m, X, Y, Xs, t=[t], learning_rate=0.5)
    errs = []
    for n in (50, 100, 200):
        d = limits.predict.gradient_descent(m, X, Y, Xs, t=[n * t], learning_rate=0.5 / n, flow=False)
        errs.append(np.max(np.abs(d.mean - f.mean)))
    assert errs[0] < 1e-2 and 1.8 < errs[0] / errs[1] < 2.2 and 1.8 < errs[1] / errs[2] < 2.2   # O(η)


def test_singular_ntk_directions_exact():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 3))
    X = np.vstack([X, X[:2]])                     # repeated inputs: Θ_XX and K_XX singular
    Y = rng.standard_normal(8)
    Y[6:] = Y[:2] + np.array([0.3, -0.2])         # inconsistent labels on the repeats
    Xs = rng.standard_normal((3, 3))
    m = limits.mlp(3, 1, activation="relu", sigma_b2=0.2, lr=0.7)
    K, Ksx, Kss, Th, Tsx = _k(m, X, Xs)
    ts = [0.5, 4.0, 50.0]
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=ts)
    for i, t in enumerate(ts):
        A = Tsx @ _van_loan(Th, 0.7, t)
        S = Kss + A @ K @ A.T - A @ Ksx.T - Ksx @ A.T
        assert np.max(np.abs(g.mean[i, :, 0] - A @ Y)) < 1e-9
        assert np.max(np.abs(g.cov[i] - S)) < 1e-9
    with pytest.raises(SingularKernelError) as e:
        limits.predict.nngp_posterior(m, X, Y, Xs, noise=0.0)
    assert "noise >=" in str(e.value)
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=e.value.suggested_noise)
    assert np.all(np.isfinite(p.mean)) and np.all(np.isfinite(p.cov))


def test_bad_inputs(data):
    m, X, Y, Xs = data
    P = limits.predict
    with pytest.raises(ValueError, match="Y_train"):
        P.nngp_posterior(m, X, Y[:-1], Xs)
    with pytest.raises(ValueError, match="X_test"):
        P.nngp_posterior(m, X, Y, Xs[:, :3])
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="X_train"):
        P.gradient_descent(m, Xn, Y, Xs, t=[1.0])
    Yn = Y.copy()
    Yn[1, 1] = np.inf
    with pytest.raises(ValueError, match="Y_train"):
        P.nngp_posterior(m, X, Yn, Xs)
    with pytest.raises(ValueError, match="noise"):
        P.nngp_posterior(m, X, Y, Xs, noise=-1.0)
    with pytest.raises(ValueError, match="integer"):
        P.gradient_descent(m, X, Y, Xs, t=[1.5], flow=False)
    with pytest.raises(ValueError, match="t must be >= 0"):
        P.gradient_descent(m, X, Y, Xs, t=[-1.0])
    with pytest.raises(ValueError, match="learning_rate"):
        P.gradient_descent(m, X, Y, Xs, t=[1], flow=False, learning_rate=100.0)
    with pytest.raises(ValueError, match="reduction"):
        P.gradient_descent(m, X, Y, Xs, t=[1], reduction="avg")
    with pytest.raises(ModelError, match="dmft"):
        P.gradient_descent(m.with_(parameterisation="muP", sigma_b2=0), X, Y, Xs, t=[1])
    with pytest.raises(ModelError, match="NTK"):
        P.gradient_descent(m.with_(parameterisation="SP"), X, Y, Xs, t=[1])
    # the NNGP posterior of an SP model exists (same NNGP as NTK parameterisation)
    a = P.nngp_posterior(m.with_(parameterisation="SP"), X, Y, Xs, noise=0.01)
    b = P.nngp_posterior(m, X, Y, Xs, noise=0.01)
    assert np.max(np.abs(a.mean - b.mean)) < 1e-12


def test_joint_and_separate_kernel_paths_agree(data, monkeypatch):
    """A Model's kernels come from one joint recursion on the stacked inputs when it fits in memory_limit,
    else from three kernel() calls: the predictions agree to rounding either way."""
    from limits.predict import _JOINT_UNITS, predict_memory

    m, X, Y, Xs = data
    n = X.shape[0] + Xs.shape[0]
    joint, sep = 8.0 * _JOINT_UNITS * n * n, predict_memory(X.shape[0], Xs.shape[0], "gd", n_times=2)
    assert sep < joint
    lim = 0.5 * (sep + joint)                         # room for the separate path only
    import limits.kernels.cross as cross

    calls = []
    real = cross.kernel
    monkeypatch.setattr(cross, "kernel", lambda *a, **k: calls.append(1) or real(*a, **k))
    P = limits.predict
    a = P.nngp_posterior(m, X, Y, Xs, noise=0.01)
    assert calls == []
    b = P.nngp_posterior(m, X, Y, Xs, noise=0.01, memory_limit=lim)
    assert len(calls) == 3
    assert np.max(np.abs(a.mean - b.mean)) < 1e-12 and np.max(np.abs(a.cov - b.cov)) < 1e-12
    g = P.gradient_descent(m, X, Y, Xs, t=[1.0, 30.0])
    h = P.gradient_descent(m, X, Y, Xs, t=[1.0, 30.0], memory_limit=lim)
    assert np.max(np.abs(g.mean - h.mean)) < 1e-11 and np.max(np.abs(g.cov - h.cov)) < 1e-11
