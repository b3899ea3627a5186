"""No numerical differentiation across a non-smooth point (docs/theory/finite_width.rst §3–4): exact Price/Stein
derivatives (limits.kernels.price), Θ equal to limits.kernels.kernel's NTK, Θ1 of MLPs from the tangent network,
relu's exact symmetry (the diagonal of K and Θ has no 1/N correction) and relu's Θ1, K1 against Monte Carlo."""
import importlib

import numpy as np
import pytest

import limits
from limits.activations import BUILTIN, erf_dkernel, erf_kernel, relu_dkernel, relu_kernel
from limits.kernels.price import HESS_KEYS, hessian_contract, jacobian, pair_derivatives

FW = importlib.import_module("limits.kernels.finite_width")
X = np.array([[1.0, 0.2, -0.5], [0.3, -0.9, 0.4]])
K = np.array([[1.3, 0.6, -0.2], [0.6, 0.9, 0.3], [-0.2, 0.3, 0.7]])
SLOT = {"11_11": (0, 0), "11_12": (0, 1), "11_22": (0, 2), "12_12": (1, 1), "12_22": (1, 2), "22_22": (2, 2)}


def _fd(F, k, h):
    """Gradient and Hessian of F(k11, k12, k22) by central differences at a smooth point (a test reference)."""
    k = np.asarray(k, float)
    g, H = np.zeros(3), np.zeros((3, 3))
    for p in range(3):
        e = np.eye(3)[p] * h
        g[p] = (F(*(k + e)) - F(*(k - e))) / (2 * h)
        for q in range(3):
            f = np.eye(3)[q] * h
            H[p, q] = (F(*(k + e + f)) - F(*(k + e - f)) - F(*(k - e + f)) + F(*(k - e - f))) / (4 * h * h)
    return g, H


@pytest.mark.parametrize("name,closed", [("relu", (relu_kernel, relu_dkernel)), ("erf", (erf_kernel, erf_dkernel))])
@pytest.mark.parametrize("order", [0, 1])
def test_price_derivatives_match_differences_of_closed_forms_away_from_kinks(name, closed, order):
    pd = pair_derivatives(BUILTIN[name], K, order)
    for a, b in ((0, 1), (0, 2), (1, 2)):
        g, H = _fd(closed[order], (K[a, a], K[a, b], K[b, b]), 1e-4)
        np.testing.assert_allclose([pd.g1[a, b], pd.g12[a, b], pd.g1[b, a]], g, atol=1e-8)
        np.testing.assert_allclose([pd.h[k][a, b] for k in HESS_KEYS], [H[SLOT[k]] for k in HESS_KEYS], atol=3e-7)
        assert pd.F[a, b] == pytest.approx(closed[order](K[a, a], K[a, b], K[b, b]), abs=1e-13)


def test_price_rules_equal_the_closed_forms_and_one_variable_derivatives():
    """erf by the generic rules (Price + Stein scaling, the engine's quadrature) equals erf's closed form
    differentiated by hand through relu's route: compare the two generic/closed paths on tanh vs a user copy."""
    tanh = BUILTIN["tanh"]
    user = limits.activation(tanh.phi, dphi=tanh.dphi, d2phi=tanh.d2phi, name="tanh_copy", d3phi=tanh.d3phi)
    for order in (0, 1):
        a, b = pair_derivatives(tanh, K, order), pair_derivatives(user, K, order)
        np.testing.assert_allclose(a.d2, b.d2, atol=1e-10)
        for k in HESS_KEYS:
            np.testing.assert_allclose(a.h[k], b.h[k], atol=1e-10)
    # the diagonal of relu: E[relu²] = q/2, E[step²] = 1/2 — straight lines, no curvature
    pd0, pd1 = pair_derivatives(BUILTIN["relu"], K, 0), pair_derivatives(BUILTIN["relu"], K, 1)
    assert np.all(pd0.d1 == 0.5) and np.all(pd0.d2 == 0) and np.all(pd1.d1 == 0) and np.all(pd1.d2 == 0)
    pairs = [(0, 0), (0, 1), (1, 1)]
    D = jacobian(pd0, pairs)
    assert D[0, 0] == 0.5 and D[1, 1] == pytest.approx(relu_dkernel(1.3, 0.6, 0.9), abs=1e-15)
    W = np.eye(3)
    assert hessian_contract(pd0, W, pairs)[0] == 0.0


def test_first_derivatives_need_no_third_derivative_and_user_functions_say_what_is_missing():
    user = limits.activation(np.tanh, dphi=BUILTIN["tanh"].dphi, d2phi=BUILTIN["tanh"].d2phi, name="tanh_nod3")
    pair_derivatives(user, K, 1, second=False)
    with pytest.raises(ValueError, match="φ‴"):
        pair_derivatives(user, K, 1)
    r = limits.kernels.finite_width(limits.mlp(3, depth=1, activation=user), X)
    assert r.Theta1 is None and "φ‴" in r.note and r.K1 is not None


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_theta_is_the_kernel_ntk_for_every_activation(name):
    X2 = np.vstack([X[1:], [[0.4, 0.4, 0.4]]])
    m = limits.mlp(3, depth=2, activation=name, sigma_w2=1.5, sigma_b2=0.05)
    np.testing.assert_allclose(limits.kernels.finite_width(m, X).Theta, limits.kernels.kernel(m, X).ntk, rtol=1e-12,
                               atol=0)
    np.testing.assert_allclose(limits.kernels.finite_width(m, X, X2).Theta, limits.kernels.kernel(m, X, X2).ntk,
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["relu", pytest.param("tanh", marks=pytest.mark.slow)])
def test_theta_of_resnets_is_the_kernel_ntk(name):
    """(a smooth activation's ResNet Θ1 is the slower derivative in c: minutes on a loaded machine)"""
    m = limits.resnet(3, depth=2, activation=name, sigma_w2=1.0, sigma_b2=0.05, rho=0.7)
    r = limits.kernels.finite_width(m, X[:1])
    np.testing.assert_allclose(r.Theta, limits.kernels.kernel(m, X[:1]).ntk, rtol=1e-12, atol=0)
    assert (r.Theta1 is None) == (name == "relu")


def test_relu_diagonal_has_no_correction_exactly():
    """E[relu(u)²] = q/2 and E[step(u)² ḣ²] = ½E[ḣ²] are linear: E[K_N(x, x)] and E[Θ_N(x, x)] equal their
    N = ∞ values at every width (any bias, any number of inputs); the c-difference got 0.5–1.5 % here."""
    Xs = np.vstack([X, [[0.5, 0.5, -1.0]]])
    for depth in (1, 3):
        r = limits.kernels.finite_width(limits.mlp(3, depth=depth, activation="relu", sigma_w2=1.5, sigma_b2=0.05), Xs)
        assert np.all(np.diag(r.K1) == 0) and np.all(np.diag(r.Theta1) == 0)
        assert np.all(r.K1_layers[:, [0, 1, 2], [0, 1, 2]] == 0)
        assert np.all(np.abs(r.Theta1[np.triu_indices(3, 1)]) > 1e-4)


def test_tangent_theta1_equals_the_coupled_networks_derivative_for_smooth_activations():
    """For smooth φ the derivative in c of the coupled pair of networks (what Θ1 was before; a cubic through
    c = 1 − kε) converges to the tangent network's Θ1 like ε³ (one input: two variables, order-128 quadrature)."""
    from limits.model import as_model

    for name in ("erf", "tanh"):
        m = as_model(limits.mlp(3, depth=2, activation=name, sigma_w2=1.5, sigma_b2=0.05))
        T1 = limits.kernels.finite_width(m, X[:1]).Theta1[0, 0]
        e1, e2 = (FW._theta1(m, X[:1], eps=e)[1][0, 0] / T1 - 1 for e in (5e-4, 2.5e-4))
        assert abs(e2) < 3e-6 and 6 < e1 / e2 < 10, (name, e1, e2)


def test_duplicate_inputs_are_one_variable():
    m = limits.mlp(3, depth=2, activation="relu", sigma_w2=1.5, sigma_b2=0.05)
    r = limits.kernels.finite_width(m, X)
    rd = limits.kernels.finite_width(m, np.vstack([X, X[:1]]))
    assert np.all(np.isfinite(rd.K1)) and np.all(np.isfinite(rd.Theta1))
    np.testing.assert_array_equal(rd.K1[:2, :2], r.K1)
    np.testing.assert_array_equal(rd.Theta1[2], rd.Theta1[0])
    assert rd.params_cov.shape == (6, 6)


def test_resnet_theta1_is_refused_for_relu():
    rr = limits.kernels.finite_width(limits.resnet(3, depth=2, activation="relu", rho=0.7), X)
    assert rr.Theta1 is None and "kink" in rr.note and np.all(np.isfinite(rr.K1))


def test_user_activations_are_never_differentiated_across_a_kink():
    with pytest.raises(ValueError, match="needs dphi"):
        limits.activation(np.abs, smooth=False)
    a = limits.activation(np.abs, dphi=np.sign, smooth=False, name="abs_user")
    with pytest.raises(ValueError, match="δ at the kinks"):
        a.d2phi(np.zeros(2))


def _fit_tangent(depth, inits, seed):
    from limits.checking.finite_width import fit_slope
    from limits.checking.tangent import measure_tangent

    m = limits.mlp(3, depth=depth, activation="relu", sigma_w2=1.5, sigma_b2=0.05)
    r = limits.kernels.finite_width(m, X)
    widths = (16, 32, 64, 128)
    _, samples = measure_tangent(m, X, widths, inits, seed)
    mean = np.stack([s.mean(0) for s in samples])
    se = np.stack([np.maximum(s.std(0, ddof=1), 1e-300) / np.sqrt(len(s)) for s in samples])
    a, a_se, b, b_se, _ = fit_slope(widths, mean[:, [1, 4]], se[:, [1, 4]], quadratic=True)
    return r, b, b_se


def test_relu_off_diagonal_K1_and_Theta1_agree_with_monte_carlo():
    """Finite relu MLPs (depth 2) with their tangent network, 6000 networks per width N = 16…128, control
    variates, fit a + b/N + c/N²: the slopes of K_out[0,1] and Θ[0,1] agree with K1, Θ1 within 4 SE (false
    failure ≈ 1e-4). The full table (400 000 networks per width, depths 1 and 2): docs/theory/finite_width.rst §7."""
    r, b, b_se = _fit_tangent(2, 6000, 11)
    z = (b - np.array([r.K1[0, 1], r.Theta1[0, 1]])) / b_se
    assert np.all(np.abs(z) < 4), (b, b_se, r.K1[0, 1], r.Theta1[0, 1])


def test_the_coupled_networks_err_like_sqrt_eps_on_the_diagonal_only():
    """The former route, ∂/∂c at c = 1 of two coupled copies (one-sided cubic through c = 1 − kε): on the diagonal it
    crosses the arc-cosine kink at c = 1 and errs like √ε (Θ[0,0] 0.9 % low at ε = 1e-3, half that at ε/4); off the
    diagonal it is smooth and equals the tangent network's Θ1 to 1e-8 (with the exact relu four-point functions of
    limits/kernels/relu_fourpoint.py — the tensor Gauss–Hermite rule they replace made it 0.00538 instead of 0.00171
    at depth 1)."""
    from limits.model import as_model

    m = as_model(limits.mlp(3, depth=1, activation="relu", sigma_w2=1.5, sigma_b2=0.05))
    r = limits.kernels.finite_width(m, X)
    T_a, T1_a = FW._theta1(m, X, eps=4e-3)
    T_b, T1_b = FW._theta1(m, X, eps=1e-3)
    err_a, err_b = T_a[0, 0] / r.Theta[0, 0] - 1, T_b[0, 0] / r.Theta[0, 0] - 1
    assert -0.02 < err_a < err_b < -0.005 and err_a / err_b == pytest.approx(2.0, rel=0.02)     # ∝ √ε
    assert T1_b[0, 0] / T1_a[0, 0] == pytest.approx(0.5, rel=0.02) and r.Theta1[0, 0] == 0.0
    assert abs(T1_b[0, 1] - r.Theta1[0, 1]) < 1e-8 < abs(T1_a[0, 1] - r.Theta1[0, 1]) < 1e-6


def test_dq_expect_of_relu_keeps_its_delta():
    """∂/∂q E[relu(u)] = 1/(2√(2πq)) (not ½E[relu''] = 0: relu'' is a δ); E[step(u)] = ½ for every q."""
    G = limits.gaussian
    q = np.array([0.3, 1.3])
    np.testing.assert_allclose(G.dq_expect("relu", q), 1 / (2 * np.sqrt(2 * np.pi * q)), rtol=1e-15)
    h = 1e-5
    np.testing.assert_allclose(G.dq_expect("relu", q), (G.expect("relu", q + h) - G.expect("relu", q - h)) / (2 * h),
                               rtol=1e-6)
    assert np.all(G.dq_expect("relu'", q) == 0)
