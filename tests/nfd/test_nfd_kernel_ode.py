"""Kernel ODE of the infinite-depth ResNet (docs/theory/nfd.rst §2): exact identities, O(1/L) Euler agreement,
RKHS nesting and strict positive definiteness, bad input."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import limits
from limits.nfd import kernel_ode, nesting_check, residual_recursion
from limits.stats import loglog_fit


def _X(P=5, d=3, seed=0):
    return np.random.default_rng(seed).standard_normal((P, d))


def test_linear_closed_form():
    # φ = id: dΣ/dt = Σ ⇒ Σ_T = e^T Σ_0, K = Σ_T; E[φ'φ'] = 1 ⇒ Γ_T = 1, Γ_0 = e^T.
    X = _X()
    for T in (0.3, 1.0, 2.5):
        k = kernel_ode(X, T=T, activation="linear")
        S0 = X @ X.T / X.shape[1]
        np.testing.assert_allclose(k.Sigma, np.exp(T) * S0, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(k.K, k.Sigma, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(k.Gamma0, np.exp(T) * np.ones((5, 5)), rtol=1e-10)
        assert k.converged and k.nfev > 0


def test_linear_euler_closed_form():
    X = _X()
    L, T = 7, 1.3
    r = residual_recursion(X, L, T, "linear")
    np.testing.assert_allclose(r.Sigma[L], (1 + T / L) ** L * X @ X.T / 3, rtol=1e-12)
    np.testing.assert_allclose(r.Gamma[0], (1 + T / L) ** L * np.ones((5, 5)), rtol=1e-12)


def test_public_contract_shapes_and_symmetry():
    X = _X(6, 4)
    k = limits.nfd.kernel_ode(X, T=1.0, activation="erf")
    assert k.Sigma.shape == (6, 6) and k.K.shape == (6, 6)
    np.testing.assert_array_equal(k.Sigma, k.Sigma.T)
    np.testing.assert_allclose(k.K, limits.gaussian.gram("erf", k.Sigma), atol=1e-14)
    assert k.error_estimate < 1e-6
    np.testing.assert_allclose(k.Sigma_t[0], X @ X.T / 4, atol=1e-14)


@pytest.mark.parametrize("act", ["erf", "relu", "tanh"])
def test_euler_recursion_converges_at_rate_one(act):
    X = _X(4, 3, seed=1)
    k = kernel_ode(X, T=1.0, activation=act, rtol=1e-11, atol=1e-13)
    Ls = np.array([4, 8, 16, 32, 64])
    errS = np.array([np.abs(residual_recursion(X, L, 1.0, act).Sigma[-1] - k.Sigma).max() for L in Ls])
    errG = np.array([np.abs(residual_recursion(X, L, 1.0, act).Gamma[0] - k.Gamma0).max() for L in Ls])
    for err in (errS, errG):
        fit = loglog_fit(Ls, err)
        assert fit.contains(-1.0) or abs(fit.slope + 1) < 0.05, (act, str(fit))
    # Richardson extrapolation removes the O(1/L) term: 2R(2L) − R(L) is O(1/L²)
    r32, r64 = residual_recursion(X, 32, 1.0, act), residual_recursion(X, 64, 1.0, act)
    rich = np.abs(2 * r64.Sigma[-1] - r32.Sigma[-1] - k.Sigma).max()
    assert rich < 0.05 * errS[-1]


def test_agrees_with_kernels_residual_nngp():
    kernels = pytest.importorskip("limits.kernels")
    if not hasattr(kernels, "nngp"):
        pytest.skip("limits.kernels.nngp not available")
    X = _X(5, 3, seed=2)
    T = 1.0
    k = kernel_ode(X, T=T, activation="erf")
    errs = []
    Ls = [8, 16, 32, 64]
    for L in Ls:
        r = kernels.nngp(X, depth=L, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=True,
                         rho=np.sqrt(T / L), sigma_w2_in=1.0, sigma_b2_in=0.0)
        mine = residual_recursion(X, L, T, "erf")
        np.testing.assert_allclose(r.K[L], mine.Sigma[L], rtol=1e-12, atol=1e-14)  # same Euler scheme
        errs.append(np.abs(r.K[L] - k.Sigma).max())
    fit = loglog_fit(Ls, errs)
    assert abs(fit.slope + 1) < 0.05, str(fit)


@pytest.mark.parametrize("act", ["erf", "tanh", "relu"])
def test_nesting_and_strict_pd(act):
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((8, 3))
    X = Z / np.linalg.norm(Z, axis=1, keepdims=True) * np.sqrt(3)   # distinct points on the sphere
    nc = nesting_check(X, [0.25, 0.5, 1.0, 2.0, 4.0], act)
    assert np.all(nc.min_eig_increment >= -1e-10 * nc.max_abs_K), nc.min_eig_increment   # Prop. 5
    assert np.all(nc.min_eig_K > 1e-6 * nc.max_abs_K), nc.min_eig_K                      # Prop. 4


def test_linear_kernel_is_not_strictly_pd():
    # negative control for Prop. 4: polynomial φ with P > d gives a rank-d Gram matrix
    X = _X(8, 3)
    nc = nesting_check(X, [0.5, 1.0], "linear")
    assert np.all(np.abs(nc.min_eig_K) < 1e-10 * nc.max_abs_K)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.floats(0.1, 3.0), st.integers(0, 10**6))
def test_kernel_symmetric_psd_property(P, d, T, seed):
    X = np.random.default_rng(seed).standard_normal((P, d))
    k = kernel_ode(X, T=T, activation="erf", error_estimate=False)
    for A in (k.Sigma, k.K, k.Gamma0):
        assert np.allclose(A, A.T, atol=1e-13)
        assert np.linalg.eigvalsh(A)[0] >= -1e-10 * max(1.0, np.abs(A).max())
    # Σ_T − Σ_0 = ∫ E[φφᵀ] is PSD
    assert np.linalg.eigvalsh(k.Sigma - X @ X.T / d)[0] >= -1e-10


def test_bad_input():
    X = _X()
    with pytest.raises(ValueError, match="T"):
        kernel_ode(X, T=0.0)
    with pytest.raises(ValueError, match="T"):
        kernel_ode(X, T=-1.0)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        kernel_ode(Xn)
    with pytest.raises(ValueError, match="L"):
        residual_recursion(X, 0)
    with pytest.raises(ValueError, match="X"):
        kernel_ode(np.ones(3))


def test_save_load_roundtrip(tmp_path):
    k = kernel_ode(_X(), T=0.7, activation="erf")
    k.save(tmp_path / "k")
    k2 = type(k).load(tmp_path / "k")
    assert k.equals(k2)


def test_relu_single_input_closed_form():
    # relu, one input: dΣ/dt = Σ/2 ⇒ Σ_T = e^{T/2} Σ_0, K = Σ_T/2; E[φ'²] = 1/2 ⇒ Γ_0 = ½ e^{T/2}
    X = np.array([[1.0, -2.0, 0.5]])
    q0 = float((X @ X.T)[0, 0]) / 3
    for T in (0.5, 2.0):
        k = kernel_ode(X, T=T, activation="relu")
        np.testing.assert_allclose(k.Sigma[0, 0], np.exp(T / 2) * q0, rtol=1e-9)
        np.testing.assert_allclose(k.K[0, 0], np.exp(T / 2) * q0 / 2, rtol=1e-9)
        np.testing.assert_allclose(k.Gamma0[0, 0], 0.5 * np.exp(T / 2), rtol=1e-9)
