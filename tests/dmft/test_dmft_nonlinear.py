"""Nonlinear (Monte Carlo) DMFT: lazy oracle, agreement with the exact linear solver, failure modes,
and the seed-000 abcd mapping."""
import numpy as np
import pytest
from fractions import Fraction as F

import limits
import limits.stats
import limits.dmft as dm


def _data(P, D, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    return X, rng.standard_normal(P)


def test_relu_two_layer_lazy_kernel_is_arccosine():
    X, y = _data(4, 6, 0)
    Kx = X @ X.T / 6
    K = dm.lazy_ntk(X, 1, "relu")
    # arc-cosine kernels written out: k1 = E[relu relu], k0 = E[relu' relu']
    s = np.sqrt(np.diag(Kx))
    c = np.clip(Kx / np.outer(s, s), -1, 1)
    th = np.arccos(c)
    k1 = np.outer(s, s) * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi)
    k0 = (np.pi - th) / (2 * np.pi)
    assert np.max(np.abs(K - (k1 + k0 * Kx))) < 1e-10


def test_mc_linear_matches_exact_two_and_three_layer():
    """The MC scheme run on φ = id must reproduce the exact linear solution (z-test over seeds)."""
    X, y = _data(2, 4, 1)
    for L in (1, 2):
        ex = dm.solve(X, y, depth=L, gamma0=1.0, T=0.5, dt=0.1)
        runs = [dm.solve(X, y, depth=L, gamma0=1.0, T=0.5, dt=0.1, solver="mc", M=1500, seed=s).f
                for s in range(4)]
        m, se = limits.stats.mean_se(np.array(runs))
        z = np.abs(m - ex.f)[1:] / se[1:]
        assert np.max(z) < 4.5, (L, np.max(z))
        assert np.max(np.abs(m - ex.f)) < 0.05


def test_mc_relu_small_gamma_is_kernel_regression():
    X, y = _data(3, 5, 2)
    t, f_lazy, K = dm.lazy(X, y, depth=1, activation="relu", T=0.6, dt=0.1)
    d = dm.solve(X, y, depth=1, activation="relu", gamma0=1e-3, T=0.6, dt=0.1, M=3000, seed=0)
    assert d.converged and d.residual < 1e-8 and d.solver == "mc-alternating"
    # the finite-M lazy kernel differs from K by O(1/√M): compare with generous MC error
    assert np.max(np.abs(d.f - f_lazy)) < 6 * max(np.max(d.f_se), 0.02)
    # and its NTK at t = 0 is the sampled estimate of the arc-cosine NTK
    assert np.max(np.abs(d.ntk[0] - K)) < 0.1


def test_mc_tanh_feature_learning_and_diagnostics():
    X, y = _data(3, 5, 3)
    d = dm.solve(X, y, depth=1, activation="tanh", gamma0=2.0, T=1.0, dt=0.1, M=1000, seed=1)
    assert d.converged and d.iterations > 2 and d.residual < 1e-8
    assert d.loss[-1] < d.loss[0]
    assert d.summary()["ntk_change"] > 0.02          # features move at γ0 = 2
    lazy_d = dm.solve(X, y, depth=1, activation="tanh", gamma0=0.05, T=1.0, dt=0.1, M=1000, seed=1)
    assert lazy_d.summary()["ntk_change"] < d.summary()["ntk_change"] / 10


def test_mc_nonconvergence_is_loud():
    X, y = _data(3, 5, 4)
    with pytest.raises(dm.DMFTNotConverged, match="did not converge"):
        dm.solve(X, y, depth=1, activation="tanh", gamma0=2.0, T=1.0, dt=0.1, M=200, seed=0, max_iter=2)
    d = dm.solve(X, y, depth=1, activation="tanh", gamma0=2.0, T=1.0, dt=0.1, M=200, seed=0, max_iter=2,
                 strict=False)
    assert not d.converged and "NOT converged" in d.message and np.all(np.isfinite(d.f))


def test_mc_three_layer_tanh_runs_and_converges():
    X, y = _data(2, 4, 5)
    d = dm.solve(X, y, depth=2, activation="tanh", gamma0=1.0, T=0.4, dt=0.1, M=600, seed=2)
    assert d.converged and d.Phi.shape == (2, 5, 2, 2)
    assert d.loss[-1] < d.loss[0]


def test_mc_reproducible_with_seed():
    X, y = _data(2, 3, 6)
    a = dm.solve(X, y, depth=1, activation="erf", gamma0=1.0, T=0.3, dt=0.1, M=300, seed=5)
    b = dm.solve(X, y, depth=1, activation="erf", gamma0=1.0, T=0.3, dt=0.1, M=300, seed=5)
    assert np.array_equal(a.f, b.f)


def test_abcd_mapping():
    half = F(1, 2)
    mf = dm.from_abcd([0, half, half, half, half], [0, 0, 0, 0, 0], 0, half, gamma0=1.0, eta0=0.025, P=20)
    assert mf.depth == 4 and abs(mf.dt - 0.025 / 20) < 1e-15 and mf.gamma0 == 1.0
    mup = dm.from_abcd([-half, 0, 0, 0, 0], [1, 1, 1, 1, 1], 1, half, gamma0=2.0, eta0=0.1, P=10, loss="sum")
    assert mup.dt == 0.1 and mup.depth == 4
    with pytest.raises(ValueError, match="d"):
        dm.from_abcd([0, half], [0, 0], 0, 0, gamma0=1.0, eta0=0.1, P=4)       # NTK: d = 0 (lazy)
    with pytest.raises(ValueError, match="b"):
        dm.from_abcd([0, 0], [0, 0], 0, half, gamma0=1.0, eta0=0.1, P=4)        # SP-like hidden layer
    with pytest.raises(ValueError, match="gamma0"):
        dm.from_abcd([0, half], [0, 0], 0, half, gamma0=0.0, eta0=0.1, P=4)
    assert dm.gd_time_step(0.025, 20) == 0.025 / 20 and dm.gd_time_step(0.025, 20, loss="sum") == 0.025
    with pytest.raises(ValueError, match="loss"):
        dm.gd_time_step(0.1, 3, loss="max")


def test_abcd_family_is_one_dynamics_at_finite_width():
    """Seed 000 Eq. 15: MF (a_l=½, b=c=0) and μP (a_1=−½, b=c=1, a_l=0) give identical outputs
    under GD at finite N (the mapping's claim), here for a 3-weight-layer linear net."""
    rng = np.random.default_rng(0)
    N, D, P, g0, eta0 = 64, 5, 4, 1.3, 0.05
    X = rng.standard_normal((P, D))
    y = rng.standard_normal(P)
    W0 = [rng.standard_normal((N, D)), rng.standard_normal((N, N)), rng.standard_normal(N)]

    def run(a, b, c):
        W = [w * N ** (-bl / 2) for w, bl in zip(W0, b)]
        gam = g0 * np.sqrt(N)
        eta = eta0 * gam ** 2 * N ** (-c)
        out = []
        for _ in range(5):
            h1 = N ** (-a[0]) * W[0] @ X.T / np.sqrt(D)
            h2 = N ** (-a[1]) * W[1] @ h1
            f = N ** (-a[2]) * W[2] @ h2 / gam
            out.append(f)
            dl = (f - y) / P
            gf = N ** (-a[2]) * W[2][:, None] * dl[None, :] / gam
            g2 = N ** (-a[1]) * W[1].T @ gf
            W = [W[0] - eta * N ** (-a[0]) * g2 @ X / np.sqrt(D), W[1] - eta * N ** (-a[1]) * gf @ h1.T,
                 W[2] - eta * N ** (-a[2]) * (h2 @ dl) / gam]
        return np.array(out)

    mf = run([0, 0.5, 0.5], [0, 0, 0], 0)
    mup = run([-0.5, 0, 0], [1, 1, 1], 1)
    assert np.max(np.abs(mf - mup)) < 1e-10


def test_seed000_helper_matches_explicit_call():
    X, y = dm.toy_task(6, 10, seed=0)
    a = dm.seed000(X, y, steps=12)
    b = dm.solve(X, y, depth=4, gamma0=1.0, dt=0.025 / 6, steps=12)
    assert np.array_equal(a.f, b.f) and a.depth == 4 and abs(a.dt - 0.025 / 6) < 1e-15
    assert np.allclose(a.loss_mean, np.mean((a.f - y) ** 2, axis=1) / 2)


@pytest.mark.parametrize("kw", [dict(depth=2), dict(depth=2, beta0=0.5)])
def test_relu_is_refused_where_responses_need_phi_second_derivative(kw):
    """φ'' of relu is a δ at 0: the pathwise response Jacobians would drop it (docs/theory/dmft.rst §3)."""
    X, y = np.random.default_rng(0).standard_normal((2, 3)), np.array([1.0, -1.0])
    with pytest.raises(ValueError, match="not smooth.*phi''"):
        dm.solve(X, y, activation="relu", gamma0=1.0, dt=0.1, steps=2, M=50, **kw)
