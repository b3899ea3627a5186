"""NNGP/NTK recursions: closed forms vs quadrature, exact identities, bad input, explosion reporting."""
import warnings

import numpy as np
import pytest

import limits
from limits.kernels import KernelExplosion, KernelWarning, nngp


def _X(P=4, d=7, seed=0):
    return np.random.default_rng(seed).standard_normal((P, d))


def _naive_recursion(X, L, f_expect, sw2, sb2, residual, rho, sw2_out, sb2_out):
    """Per-entry loop over the recursion with a user-supplied E[φ(u)φ(v)] (the baseline)."""
    P, d = X.shape
    K = sw2 * X @ X.T / d + sb2
    Ks = [K]
    for _ in range(L):
        E = np.empty_like(K)
        for a in range(P):
            for b in range(P):
                E[a, b] = f_expect(K[a, a], K[a, b], K[b, b])
        C = rho ** 2 * (sw2 * E + sb2)
        K = K + C if residual else C
        Ks.append(K)
    Eo = np.array([[f_expect(K[a, a], K[a, b], K[b, b]) for b in range(P)] for a in range(P)])
    return np.array(Ks), sw2_out * Eo + sb2_out


@pytest.mark.parametrize("residual", [False, True])
def test_erf_closed_form_recursion_matches_quadrature(residual):
    """The recursion with the erf closed form equals the recursion with 2-D Gauss–Hermite (callable φ)."""
    from scipy.special import erf

    X = _X()
    r = nngp(X, depth=6, activation="erf", sigma_w2=1.2, sigma_b2=0.2, residual=residual, rho=0.7)
    quad = lambda k11, k12, k22: float(limits.gaussian.expect2(erf, erf, k11, k12, k22))  # noqa: E731
    Ks, Kout = _naive_recursion(X, 6, quad, 1.2, 0.2, residual, 0.7, 1.2, 0.2)
    np.testing.assert_allclose(r.K, Ks, rtol=0, atol=1e-10 * np.max(np.abs(Ks)))
    np.testing.assert_allclose(r.K_out, Kout, rtol=0, atol=1e-10)


def test_tanh_quadrature_recursion_matches_naive_loop():
    X = _X(3)
    r = nngp(X, depth=4, activation="tanh", sigma_w2=1.5, sigma_b2=0.1, residual=True, rho=0.5)
    quad = lambda k11, k12, k22: float(limits.gaussian.expect2(np.tanh, np.tanh, k11, k12, k22))  # noqa: E731
    Ks, Kout = _naive_recursion(X, 4, quad, 1.5, 0.1, True, 0.5, 1.5, 0.1)
    np.testing.assert_allclose(r.K, Ks, rtol=0, atol=1e-10 * np.max(np.abs(Ks)))


def test_linear_and_relu_exact_identities():
    X = _X()
    # linear feed-forward: K^l = σ_w² K^{l-1} + σ_b² exactly
    r = nngp(X, depth=5, activation="linear", sigma_w2=0.9, sigma_b2=0.3)
    K = r.K[0]
    for l in range(1, 6):
        K = 0.9 * K + 0.3
        np.testing.assert_allclose(r.K[l], K, rtol=1e-13, atol=1e-13)
    # linear NTK: Θ^l = K^l + σ_w² Θ^{l-1}
    T = r.K[0]
    for l in range(1, 6):
        T = r.K[l] + 0.9 * T
        np.testing.assert_allclose(r.Theta[l], T, rtol=1e-13)
    # relu diagonal: K_aa^l = (σ_w²/2) K_aa^{l-1} + σ_b²  (residual: K + ρ²(...))
    r = nngp(X, depth=8, activation="relu", sigma_w2=2.0, sigma_b2=0.1, residual=True, rho=0.4)
    d = np.diag(r.K[0])
    for l in range(1, 9):
        d = d + 0.16 * (1.0 * d + 0.1)
        np.testing.assert_allclose(np.diag(r.K[l]), d, rtol=1e-12)


def test_residual_is_cumulative_sum_and_depth_scalings():
    X = _X()
    r = nngp(X, depth=10, activation="erf", sigma_w2=1.2, sigma_b2=0.2, residual=True, rho=2.0,
             depth_scaling="sqrt")
    np.testing.assert_allclose(r.K, np.cumsum(r.C, axis=0), rtol=1e-13, atol=1e-13)
    assert r.params["rho"] == pytest.approx(2.0 / np.sqrt(10))
    r2 = nngp(X, depth=10, activation="erf", sigma_w2=1.2, sigma_b2=0.2, residual=True, rho=2.0 / np.sqrt(10))
    np.testing.assert_allclose(r.K, r2.K, rtol=1e-14)
    r3 = nngp(X, depth=10, activation="erf", sigma_w2=1.2, sigma_b2=0.2, residual=True, rho=2.0,
              depth_scaling="linear")
    assert r3.params["rho"] == pytest.approx(0.2)


def test_K0_argument_and_readin_defaults():
    X = _X()
    r = nngp(X, depth=2, sigma_w2=1.3, sigma_b2=0.1, sigma_w2_in=2.0, sigma_b2_in=0.5)
    np.testing.assert_allclose(r.K[0], 2.0 * X @ X.T / X.shape[1] + 0.5, rtol=1e-14)
    r2 = nngp(K0=r.K[0], depth=2, sigma_w2=1.3, sigma_b2=0.1)
    np.testing.assert_allclose(r.K, r2.K, rtol=1e-14)


def test_save_load_roundtrip(tmp_path):
    r = nngp(_X(), depth=3, residual=True)
    r.save(tmp_path / "r")
    assert type(r).load(tmp_path / "r").equals(r)


@pytest.mark.parametrize("kwargs,name", [
    (dict(depth=-1), "depth"), (dict(depth=2.5), "depth"), (dict(activation="nope"), "activation"),
    (dict(sigma_w2=-1.0), "sigma_w2"), (dict(sigma_b2=float("nan")), "sigma_b2"),
    (dict(sigma_w2_out=-0.1), "sigma_w2_out"), (dict(rho=-1.0), "rho"),
    (dict(depth_scaling="cube"), "depth_scaling"), (dict(residual="yes"), "residual"),
])
def test_bad_arguments_raise_naming_the_argument(kwargs, name):
    args = dict(depth=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        nngp(_X(), **args)


def test_bad_data_raise():
    X = _X()
    X[1, 2] = np.nan
    with pytest.raises(ValueError, match="X"):
        nngp(X, depth=2)
    with pytest.raises(ValueError, match="K0"):
        nngp(K0=np.array([[1.0, 2.0], [2.0, 1.0]]), depth=2)   # not PSD
    with pytest.raises(ValueError, match="K0|X"):
        nngp(depth=2)
    with pytest.raises(ValueError, match="width"):
        limits.kernels.response(_X(), depth=2, width=0)


def test_exploding_kernel_is_reported_not_nan():
    X = _X()
    with pytest.warns(KernelWarning, match="exploded"):
        r = nngp(X, depth=3000, activation="relu", sigma_w2=4.0, sigma_b2=0.0)
    l0 = r.diagnostics["exploded_at"]
    assert 0 < l0 <= 3000
    assert not np.any(np.isnan(r.K))
    assert np.all(np.isinf(r.K[l0:])) and np.all(np.isfinite(r.K[:l0]))
    with pytest.raises(KernelExplosion):
        nngp(X, depth=3000, activation="relu", sigma_w2=4.0, on_explode="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = nngp(X, depth=50, activation="erf", sigma_w2=1.2, sigma_b2=0.2, residual=True)
    assert ok.diagnostics["exploded_at"] == -1
    assert ok.diagnostics["cond_K_L"] >= 1.0


def test_duplicate_inputs_flag_singular_kernel():
    X = _X()
    X[1] = X[0]
    with pytest.warns(KernelWarning, match="ill-conditioned|PSD"):
        r = nngp(X, depth=3)
    assert r.diagnostics["cond_K_L"] > 1e14 or r.diagnostics["min_eig_K_L"] <= 0


@pytest.mark.parametrize("name", ["tanh", "gelu", "sigmoid"])
def test_mehler_gram_matches_brute_force_and_falls_back(name):
    """Hermite-expansion Grams (limits.mehler via limits.gaussian.gram) vs a fine 2-D trapezoid,
    1e-10; a short expansion (M = 8) must flag entries as uncertified, and the certified ones stay
    exact."""
    from limits.gaussian.mehler import gram_series

    act = limits.activation(name)
    X = _X(8, 20, seed=4)
    K = 2.0 * X @ X.T / 20 + 0.3
    z = np.arange(-9, 9 + 1e-9, 0.02)      # trapezoid, spectrally accurate for these analytic φ
    w = np.exp(-z * z / 2) / np.sqrt(2 * np.pi) * 0.02

    def brute(f, k11, k12, k22):
        b = k12 / np.sqrt(k11)
        c = np.sqrt(max(k22 - b * b, 0.0))
        return float((f(np.sqrt(k11) * z) * w) @ (f(b * z[:, None] + c * z[None, :]) @ w))

    for f, gram in ((act.phi, limits.gaussian.gram), (act.dphi, limits.gaussian.dgram)):
        E = gram(name, K)
        for (a, b) in [(0, 1), (2, 5), (3, 3), (6, 7)]:
            assert abs(E[a, b] - brute(f, K[a, a], K[a, b], K[b, b])) < 1e-10
        E8, ok8 = gram_series(f, f, K, M=8)
        off = ~np.eye(K.shape[0], dtype=bool)
        assert not np.all(ok8[off])                    # some entries need the exact fallback
        np.testing.assert_allclose(E8[ok8], E[ok8], rtol=0, atol=1e-10)


def test_residual_linear_ntk_identity():
    X = _X()
    r = nngp(X, depth=4, activation="linear", sigma_w2=0.8, sigma_b2=0.1, residual=True, rho=0.5)
    T = r.K[0]
    for l in range(1, 5):
        T = T + r.C[l] + 0.25 * 0.8 * T
        np.testing.assert_allclose(r.Theta[l], T, rtol=1e-13)
    np.testing.assert_allclose(r.Theta_out, r.K_out + 0.8 * r.Theta[4], rtol=1e-13)
