"""Deep linear DMFT: exact solver vs global iteration, exact oracles, discretisation orders."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import limits.dmft as dm
from limits.dmft.linear import march, picard


def _data(P, D, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    return X, X @ X.T / D, rng.standard_normal(P)


@pytest.mark.parametrize("L,g0", [(1, 1.3), (2, 1.3), (3, 0.8)])
def test_march_equals_global_iteration(L, g0):
    # (the undamped global iteration has a large transient — 5e3 here, 1e47 at γ0 = 1.3, L = 3 —
    #  which overflows the dense-inverse variant; the causal march has no transient at all)
    X, Kx, y = _data(3, 5, L)
    s = march(Kx, y, L, g0, 0.1, 10)
    for solver in ("triangular", "dense"):
        st, it, res, conv, hist = picard(Kx, y, L, g0, 0.1, 10, tol=1e-13, solver=solver)
        assert conv and res < 1e-13
        assert np.max(np.abs(s.f - st.f)) < 1e-10
        for a, b in zip(s.H + s.G + s.ar + s.bu, st.H + st.G + st.ar + st.bu):
            assert np.max(np.abs(a - b)) < 1e-10


def test_picard_causal_convergence_diagnostics():
    X, Kx, y = _data(2, 4, 7)
    st, it, res, conv, hist = picard(Kx, y, 2, 2.0, 0.1, 8, tol=1e-13)
    assert conv
    # causal Volterra structure: the iteration is exact after at most ~(n_t)·(2L+1) sweeps
    assert it <= 9 * 5 + 2
    assert hist[-1] < 1e-13 and hist[0] > 1e-3
    st2, it2, res2, conv2, _ = picard(Kx, y, 2, 2.0, 0.1, 8, tol=1e-13, max_iter=2)
    assert not conv2 and res2 > 1e-13
    with pytest.raises(dm.DMFTNotConverged):
        dm.solve(X, y, depth=2, gamma0=2.0, dt=0.1, steps=8, solver="picard", max_iter=2)


def test_two_layer_linear_moment_recursion_exact():
    """Independent oracle: for L = 1 the single-site state (h ∈ R^P, w) evolves linearly,
    h' = h + γ0 dt K^x Δ w, w' = w + γ0 dt Δ·h, so its covariance obeys Σ' = J Σ Jᵀ exactly."""
    X, Kx, y = _data(4, 5, 11)
    g0, dt, n = 1.7, 0.05, 30
    d = dm.solve(X, y, depth=1, gamma0=g0, dt=dt, steps=n)
    P = 4
    Sig = np.eye(P + 1)
    Sig[:P, :P] = Kx
    f = np.zeros((n + 1, P))
    for t in range(n):
        f[t] = Sig[:P, P] / g0
        J = np.eye(P + 1)
        J[:P, P] = g0 * dt * Kx @ (y - f[t])
        J[P, :P] = g0 * dt * (y - f[t])
        Sig = J @ Sig @ J.T
    f[n] = Sig[:P, P] / g0
    assert np.max(np.abs(d.f - f)) < 1e-12
    assert d.solver == "linear-march" and d.converged and d.residual < 1e-11


def _ode(g0, y, T):
    return solve_ivp(lambda t, f: 2 * np.sqrt(1 + g0 ** 2 * f ** 2) * (y - f), (0, T), [0.0],
                     rtol=1e-12, atol=1e-13, dense_output=True)


def test_single_sample_ode_orders():
    """ḟ = 2√(1+γ0²f²)(y−f): left-sum flow is first order in dt, Richardson second order."""
    g0, y, T = 1.5, 1.0, 2.0
    sol = _ode(g0, y, T)
    e1, e2 = [], []
    dts = [0.1, 0.05, 0.025]
    for dt in dts:
        d = dm.solve([[1.0]], [y], depth=1, gamma0=g0, T=T, dt=dt, method="flow")
        e1.append(np.max(np.abs(d.f[:, 0] - sol.sol(d.t)[0])))
        d2 = dm.solve([[1.0]], [y], depth=1, gamma0=g0, T=T, dt=dt, method="flow", richardson=True)
        e2.append(np.max(np.abs(d2.f[:, 0] - sol.sol(d2.t)[0])))
    p1 = np.polyfit(np.log(dts), np.log(e1), 1)[0]
    p2 = np.polyfit(np.log(dts), np.log(e2), 1)[0]
    assert 0.9 < p1 < 1.1, p1
    assert 1.8 < p2 < 2.3, p2
    assert e2[-1] < 1e-4


def test_single_sample_final_kernel():
    g0, y = 2.0, 0.8
    d = dm.solve([[1.0]], [y], depth=1, gamma0=g0, T=4.0, dt=0.04, method="flow", richardson=True)
    assert abs(d.f[-1, 0] - y) < 1e-4
    assert abs(d.ntk[-1, 0, 0] - 2 * np.sqrt(1 + g0 ** 2 * y ** 2)) < 2e-3


@pytest.mark.parametrize("method", ["gd", "flow"])
def test_lazy_limit_deep_linear(method):
    X, Kx, y = _data(4, 6, 3)
    t, f_lazy, K = dm.lazy(X, y, depth=3, T=1.0, dt=0.05, method="gd")
    assert np.allclose(K, 4 * Kx, atol=1e-14)
    d = dm.solve(X, y, depth=3, gamma0=1e-6, T=1.0, dt=0.05, method="gd")
    assert np.max(np.abs(d.f - f_lazy)) < 1e-9
    if method == "flow":
        t, f_flow, _ = dm.lazy(X, y, depth=3, T=1.0, dt=0.05, method="flow")
        lam, V = np.linalg.eigh(K)
        ref = y - V @ (np.exp(-lam * 1.0) * (V.T @ y))
        assert np.max(np.abs(f_flow[-1] - ref)) < 1e-12
        errs = []
        for dt in (0.05, 0.025):
            d = dm.solve(X, y, depth=3, gamma0=1e-6, T=1.0, dt=dt, method="flow", richardson=True)
            _, ref_t, _ = dm.lazy(X, y, depth=3, T=1.0, dt=dt, method="flow")
            errs.append(np.max(np.abs(d.f - ref_t)))
        assert errs[1] < errs[0] / 3.0 and errs[1] < 6e-3    # second order in dt


def test_feature_learning_speeds_up_deep_linear():
    X, Kx, y = _data(5, 8, 5)
    losses = [dm.solve(X, y, depth=3, gamma0=g, T=0.6, dt=0.02).loss[-1] for g in (0.1, 0.5, 1.0)]
    assert losses[0] > losses[1] > losses[2]


def test_step_too_large_and_bad_input():
    X, Kx, y = _data(3, 4, 1)
    with pytest.raises(ValueError, match="dt"):
        dm.solve(X, y, depth=2, dt=2.0, steps=3)
    with pytest.raises(ValueError, match="y"):
        dm.solve(X, y[:2], depth=2, dt=0.1, steps=3)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        dm.solve(Xn, y, depth=2, dt=0.1, steps=3)
    with pytest.raises(ValueError, match="gamma0"):
        dm.solve(X, y, depth=2, gamma0=0.0, dt=0.1, steps=3)
    with pytest.raises(ValueError, match="gamma0"):
        dm.solve(X, y, depth=2, gamma0=-1.0, dt=0.1, steps=3)
    with pytest.raises(ValueError, match="depth"):
        dm.solve(X, y, depth=0, dt=0.1, steps=3)
    with pytest.raises(ValueError, match="T"):
        dm.solve(X, y, depth=1, T=1.0, dt=0.3)
    with pytest.raises(ValueError, match="method"):
        dm.solve(X, y, depth=1, T=1.0, dt=0.1, method="adam")
    # large gamma0 grows the kernel during training: detected mid-run, not a silent blow-up
    with pytest.raises(dm.StepTooLarge):
        dm.solve([[1.0]], [3.0], depth=1, gamma0=20.0, dt=0.4, steps=40)


def test_result_roundtrip(tmp_path):
    X, Kx, y = _data(3, 4, 2)
    d = dm.solve(X, y, depth=2, gamma0=1.0, T=0.5, dt=0.1, keep_two_time=True)
    assert d.t.shape == (6,) and d.f.shape == (6, 3) and d.loss.shape == (6,)
    assert d.Phi.shape == (2, 6, 3, 3) and d.G2.shape == (2, 18, 18)
    assert np.allclose(d.loss, 0.5 * np.sum((d.f - y) ** 2, axis=1))
    d.save(tmp_path / "r")
    assert dm.DMFTResult.load(tmp_path / "r").equals(d)


def test_gd_step_extrapolation():
    """GD with a small step s approximated from grids dt, dt/2 (error O(dt²))."""
    X, Kx, y = _data(3, 5, 4)
    s = 0.00625
    exact = dm.solve(X, y, depth=2, gamma0=1.0, dt=s, steps=48)
    errs, plain = [], []
    for h in (0.05, 0.025):
        k, n = round(h / s), round(0.3 / h)
        errs.append(np.max(np.abs(dm.solve(X, y, depth=2, gamma0=1.0, dt=h, steps=n, gd_step=s).f - exact.f[::k])))
        plain.append(np.max(np.abs(dm.solve(X, y, depth=2, gamma0=1.0, dt=h, steps=n).f - exact.f[::k])))
    assert errs[1] < errs[0] / 4 and errs[1] < 0.05 * plain[1] and errs[1] < 2e-3
    # h/2 = s: the extrapolation weight vanishes and the result is the exact GD solve
    same = dm.solve(X, y, depth=2, gamma0=1.0, dt=2 * s, steps=24, gd_step=s)
    assert np.max(np.abs(same.f - exact.f[::2])) < 1e-12


@pytest.mark.parametrize("L,P", [(2, 3), (4, 4)])
def test_lowrank_march_equals_dense_march(L, P):
    from limits.dmft.linear import march_lowrank

    X, Kx, y = _data(P, 6, 10 + L)
    s = march(Kx, y, L, 0.7, 0.02, 15)
    o = march_lowrank(Kx, y, L, 0.7, 0.02, 15, keep_two_time=True)
    assert np.max(np.abs(s.f - o["f"])) < 1e-10
    for l in range(L):
        assert np.max(np.abs(s.H[l] - o["H2"][l])) < 1e-6 * np.max(np.abs(s.H[l]))
        assert np.max(np.abs(s.G[l] - o["G2"][l])) < 1e-6 * np.max(np.abs(s.G[l]))
    d = dm.solve(X, y, depth=L, gamma0=0.7, dt=0.02, steps=15, solver="march-dense")
    assert np.max(np.abs(d.f - o["f"])) < 1e-10
