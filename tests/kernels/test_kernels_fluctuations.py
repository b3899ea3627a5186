"""Finite-size covariance M⁻¹ΣM⁻ᵀ: four-point functions, propagator = response, Monte Carlo variance."""
import numpy as np
import pytest

import limits
from limits.kernels import linear_response
from limits.kernels.fluctuations import kernel_fluctuations, pair_index, price_jacobian
from limits.kernels.fourpoint import cov4

KW = dict(activation="erf", sigma_w2=1.2, sigma_b2=0.2, rho=1.0)


def test_fourpoint_reduces_to_two_dimensional_quadrature():
    """Cov(φ(x)², φ(y)²) for (x, y) Gaussian — 4 slots merged to 2 variables — vs limits.gaussian."""
    from scipy.special import erf

    act = limits.activation("erf")
    a, c, b = 0.8, 0.5, 1.7
    S = np.array([[a, a, c, c], [a, a, c, c], [c, c, b, b], [c, c, b, b]])[None]
    val, mx, my = cov4(act.phi, np.array([[True, True]]), S)
    f2 = lambda u: erf(u) ** 2  # noqa: E731
    ref = (float(limits.gaussian.expect2(f2, f2, a, c, b))
           - float(limits.gaussian.kernel(act, a, a, a)) * float(limits.gaussian.kernel(act, b, b, b)))
    assert abs(val[0] - ref) < 1e-10
    # identity slots: Cov(x1 x2, y1 y2) = K13 K24 + K14 K23 for a Gaussian (Isserlis)
    rng = np.random.default_rng(0)
    B = rng.standard_normal((4, 6))
    S4 = (B @ B.T / 6)[None]
    v, _, _ = cov4(act.phi, np.array([[False, False]]), S4)
    iss = S4[0, 0, 2] * S4[0, 1, 3] + S4[0, 0, 3] * S4[0, 1, 2]
    assert abs(v[0] - iss) < 1e-12


@pytest.mark.parametrize("residual", [True, False])
def test_propagator_inverse_reproduces_the_linear_response(residual):
    """N⟨δC δC̃⟩ = M⁻¹: M⁻¹ applied to the read-in source equals the forward tangent (1e-10)."""
    X = np.random.default_rng(2).standard_normal((2, 5))
    L = 4
    fl = kernel_fluctuations(X, depth=L, width=100, residual=residual, include_gram=False, **KW)
    res = limits.kernels.nngp(X, depth=L, residual=residual, **KW)
    act = limits.activation("erf")
    pairs = pair_index(2)
    m = len(pairs)
    dK0 = np.array([[0.3, -0.7], [-0.7, 1.1]])
    v0 = np.array([dK0[a, b] for a, b in pairs])
    s = [1.2] * L + [1.2]
    src = np.zeros((L + 1) * m)
    for l in range(1, L + 2):
        if residual or l == 1:
            src[(l - 1) * m:l * m] = s[l - 1] * price_jacobian(act, res.K[l - 1]) @ v0
    dC = np.linalg.solve(fl.M, src)
    t = linear_response(X, dK0, depth=L, residual=residual, **KW)
    for l in range(1, L + 1):
        got = dC[(l - 1) * m:l * m]
        ref = np.array([t.dC[l][a, b] for a, b in pairs])
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    ref_out = np.array([t.dK_out[a, b] for a, b in pairs])
    np.testing.assert_allclose(dC[L * m:], ref_out, rtol=1e-10, atol=1e-12)


def test_fluctuations_structure():
    X = np.random.default_rng(2).standard_normal((2, 5))
    fl = kernel_fluctuations(X, depth=3, width=50, residual=True, **KW)
    assert np.allclose(fl.cov, fl.cov.T)
    assert np.linalg.eigvalsh(fl.cov)[0] > -1e-12 * np.max(np.abs(fl.cov))
    # the seed's δK formula drops cross-layer covariances; ours includes them
    assert np.all(fl.var_K[3] > fl.var_K_seed[3])
    fl2 = kernel_fluctuations(X, depth=3, width=100, residual=True, **KW)
    np.testing.assert_allclose(fl2.cov * 100, fl.cov * 50, rtol=1e-12)
    with pytest.raises(ValueError, match="width"):
        kernel_fluctuations(X, depth=3, width=-1)


@pytest.mark.parametrize("residual", [True, False])
def test_fluctuations_match_monte_carlo_variance(residual):
    """Var across inits of C^l (Eq. 17) and of the Grams h^l·h^l/N vs M⁻¹ΣM⁻ᵀ/N (z-scores)."""
    from limits.finite import empirical_kernels, mlp, resnet

    L, N, S = 3, 100, 3000
    X = np.random.default_rng(1).standard_normal((2, 10))
    fl = kernel_fluctuations(X, depth=L, width=N, residual=residual, **KW)
    kw = dict(activation="erf", sigma_w2=1.2, sigma_b2=0.2)
    net = resnet(10, N, L, rho=1.0, **kw) if residual else mlp(10, N, L, **kw)
    ek = empirical_kernels(net, X, S, seed=11, phi_kernels=True)
    C = np.stack([1.2 * ek.K_phi[:, l - 1] + 0.2 for l in range(1, L + 2)], 1)
    zs = []
    for emp, theory in [(C, fl.var_C[1:]), (ek.K, fl.var_gram)]:
        d = emp - emp.mean(0)
        v = (d ** 2).sum(0) / (S - 1)
        se = np.sqrt(((d ** 2 - v) ** 2).mean(0) / S)
        zs.append((v - theory) / se)
    z = np.concatenate([a.ravel() for a in zs])
    assert np.max(np.abs(z)) < 4.0, z
    # the elementwise (seed C6) Jacobian gives a visibly different prediction for the Grams
    if residual:
        fe = kernel_fluctuations(X, depth=L, width=N, residual=True, elementwise_jacobian=True, **KW)
        assert np.max(np.abs(fe.var_gram - fl.var_gram) / fl.var_gram) > 0.01
