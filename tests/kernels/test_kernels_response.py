"""Response functions: Price derivatives, elementwise η/χ vs the full tangent, tangent vs finite differences."""
import warnings

import numpy as np
import pytest

import limits
from limits.kernels import linear_response, nngp, response
from limits.kernels.expectations import cross_price, diag_price

KW = dict(depth=8, activation="erf", sigma_w2=1.2, sigma_b2=0.2)


def _X(P=3, d=6, seed=1):
    return np.random.default_rng(seed).standard_normal((P, d))


@pytest.mark.parametrize("name", ["erf", "linear"])
def test_diag_price_closed_form_vs_quadrature(name):
    act = limits.activation(name)
    q = np.array([1e-3, 0.05, 0.3, 1.0, 4.0, 25.0])
    with warnings.catch_warnings():   # q = 25 needs 449 trapezoid nodes (≤ 1217): certified, so no AccuracyWarning
        warnings.simplefilter("error", limits.gaussian.AccuracyWarning)
        quad = np.array([float(limits.gaussian.expect2(act.dphi, act.dphi, v, v, v)
                               + limits.gaussian.expect2(act.phi, act.d2phi, v, v, v)) for v in q])
    np.testing.assert_allclose(diag_price(act, q), quad, rtol=0, atol=1e-10)


def test_cross_price_erf_closed_form_vs_quadrature():
    act = limits.activation("erf")
    K = np.array([[0.7, 0.3, -0.2], [0.3, 1.5, 0.9], [-0.2, 0.9, 2.5]])
    A = cross_price(act, K)
    d = np.diag(K)
    for a in range(3):
        for b in range(3):
            ref = 0.5 * float(limits.gaussian.expect2(act.d2phi, act.phi, d[a], K[a, b], d[b]))
            assert abs(A[a, b] - ref) <= 1e-10


def test_cross_price_relu_matches_derivative_of_closed_form():
    act = limits.activation("relu")
    K = np.array([[0.7, 0.3], [0.3, 1.5]])
    h = 1e-5
    f = lambda k11: float(limits.gaussian.kernel(act, k11, 0.3, 1.5))  # noqa: E731
    # 4th-order central difference: error O(h^4) ~ 1e-19, rounding ~ 1e-11
    fd = (-f(0.7 + 2 * h) + 8 * f(0.7 + h) - 8 * f(0.7 - h) + f(0.7 - 2 * h)) / (12 * h)
    assert abs(cross_price(act, K)[0, 1] - fd) < 1e-9


@pytest.mark.parametrize("residual", [True, False])
def test_response_matches_tangent_on_matching_entries(residual):
    """η/χ (elementwise) equal the exact tangent for single-entry perturbations (1e-10)."""
    X = _X()
    N, d = 300, X.shape[1]
    s = response(X, width=N, residual=residual, rho=0.6, **KW)
    assert np.all(s.eta[0] == N / d)
    for (a, b) in [(0, 1), (1, 2), (0, 0), (2, 2)]:
        dK0 = np.zeros((3, 3))
        dK0[a, b] = dK0[b, a] = 1.0
        t = linear_response(X, dK0, residual=residual, rho=0.6, **KW)
        np.testing.assert_allclose(t.dK[:, a, b] * N / d, s.chi[:, a, b], rtol=1e-10)
        np.testing.assert_allclose(t.dC[1:, a, b] * N / d, s.eta[1:, a, b], rtol=1e-10)
        np.testing.assert_allclose(t.dK_out[a, b] * N / d, s.chi_out[a, b], rtol=1e-10)


def test_elementwise_response_misses_cross_entry_terms():
    """A variance perturbation moves the covariances downstream; the elementwise formula says zero."""
    X = _X()
    N, d = 300, X.shape[1]
    s = response(X, width=N, residual=True, rho=0.6, **KW)
    dK0 = np.zeros((3, 3))
    dK0[0, 0] = 1.0
    t = linear_response(X, dK0, residual=True, rho=0.6, **KW)
    assert abs(t.dK[-1, 0, 1]) > 1e-3          # elementwise prediction: exactly 0
    assert t.dK[-1, 1, 2] == 0.0               # entries not touching α = 0 are unaffected
    # uniform perturbation (a bias shift): full tangent ≠ elementwise sum on off-diagonal entries
    t1 = linear_response(X, np.ones((3, 3)), residual=True, rho=0.6, **KW)
    elem = s.chi[-1] * d / N
    np.testing.assert_allclose(np.diag(t1.dK[-1]), np.diag(elem), rtol=1e-10)
    assert np.max(np.abs(t1.dK[-1] - elem)) > 1e-3


@pytest.mark.parametrize("act", ["erf", "tanh", "relu"])
def test_tangent_matches_central_differences_of_nngp(act):
    X = _X()
    rng = np.random.default_rng(5)
    B = rng.standard_normal((3, 3))
    dK0 = B + B.T
    kw = dict(depth=5, activation=act, sigma_w2=1.3, sigma_b2=0.1, residual=True, rho=0.5)
    K0 = 1.0 * X @ X.T / X.shape[1] + 0.1 + 3 * np.eye(3)
    t = linear_response(K0=K0, dK0=dK0, **kw)
    h = 1e-5
    rp = nngp(K0=K0 + h * dK0, ntk=False, **kw)
    rm = nngp(K0=K0 - h * dK0, ntk=False, **kw)
    fd = (rp.K - rm.K) / (2 * h)
    np.testing.assert_allclose(t.dK, fd, rtol=0, atol=2e-7 * np.max(np.abs(fd)))
    np.testing.assert_allclose(t.dK_out, (rp.K_out - rm.K_out) / (2 * h), rtol=0, atol=2e-7)


def test_feedforward_response_decays_faster_than_residual():
    X = _X()
    ff = response(X, width=500, residual=False, **{**KW, "depth": 30})
    rn = response(X, width=500, residual=True, **{**KW, "depth": 30})
    assert ff.eta[-1, 0, 1] < 1e-2 * rn.eta[-1, 0, 1]
    np.testing.assert_allclose(ff.chi[1:], ff.eta[1:], rtol=0)
    np.testing.assert_allclose(rn.chi, np.cumsum(rn.eta, axis=0), rtol=1e-13)


def test_response_requires_d_in_with_K0():
    with pytest.raises(ValueError, match="d_in"):
        response(K0=np.eye(2), depth=2, width=10)
    s = response(K0=np.eye(2) * 0.05, depth=2, width=500, d_in=100)
    assert s.eta[0, 0, 0] == 5.0


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), act=st.sampled_from(["erf", "tanh", "relu", "linear"]),
       L=st.integers(1, 5), sw2=st.floats(0.2, 2.5), sb2=st.floats(0.0, 0.5), rho=st.floats(0.05, 1.2),
       residual=st.booleans())
def test_response_equals_tangent_property(seed, act, L, sw2, sb2, rho, residual):
    """For every activation and architecture: χ^l_αβ · d_in/N = (∂K^l/∂K⁰)[E_αβ + E_βα] (1e-9)."""
    X = np.random.default_rng(seed).standard_normal((3, 4))
    kw = dict(depth=L, activation=act, sigma_w2=sw2, sigma_b2=sb2, residual=residual, rho=rho)
    s = response(X, width=8, on_explode="ignore", **kw)
    dK0 = np.zeros((3, 3))
    dK0[0, 2] = dK0[2, 0] = 1.0
    t = linear_response(X, dK0, **kw)
    np.testing.assert_allclose(t.dK[:, 0, 2] * 8 / 4, s.chi[:, 0, 2], rtol=1e-9, atol=1e-12)
    dK0 = np.zeros((3, 3))
    dK0[1, 1] = 1.0
    t = linear_response(X, dK0, **kw)
    np.testing.assert_allclose(t.dK[:, 1, 1] * 8 / 4, s.chi[:, 1, 1], rtol=1e-9, atol=1e-12)
