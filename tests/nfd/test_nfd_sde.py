"""Particle Euler–Maruyama for the forward/backward McKean–Vlasov SDEs (docs/theory/nfd.rst §2–3)."""
import numpy as np
import pytest

from limits.nfd import (brownian_increments, correlate, euler_maruyama, particles, psd_sqrt,
                        residual_recursion)
from limits.stats import loglog_fit


def _X(P=3, d=4, seed=0):
    return np.random.default_rng(seed).standard_normal((P, d))


def test_psd_sqrt_rank_deficient():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(4)
    for C in (np.outer(a, a), np.eye(4), np.zeros((4, 4)), np.diag([1.0, 0.0, 2.0, 0.0])):
        R = psd_sqrt(C)
        np.testing.assert_allclose(R.T @ R, C, atol=1e-12)


def test_euler_maruyama_additive_noise_is_cumulative_sum():
    rng = np.random.default_rng(1)
    L, M, q = 10, 5, 2
    dW = brownian_increments(rng, L, M, q, 0.1)
    x0 = rng.standard_normal((M, q))
    path = euler_maruyama(lambda l, t, X: -X * 0 + 1.0, lambda l, t, X, dw: 2.0 * dw, x0, 1.0, L, dW)
    expect = x0 + np.concatenate([np.zeros((1, M, q)), np.cumsum(2 * dW + 0.1, axis=0)])
    np.testing.assert_allclose(path.X, expect, atol=1e-12)
    back = euler_maruyama(None, lambda l, t, X, dw: dw, x0, 1.0, L, dW, reverse=True)
    np.testing.assert_allclose(back.X[0], x0 + dW.sum(0), atol=1e-12)


def test_correlate_covariance():
    rng = np.random.default_rng(2)
    C = np.array([[2.0, 0.6], [0.6, 1.0]])
    Z = correlate(rng.standard_normal((200_000, 2)), C)
    np.testing.assert_allclose(np.cov(Z.T), C, atol=0.02)   # ≈ 5 SE


def _z_cov(A, B, target):
    """z-scores of the particle mean of A_a B_b against target (independent particles)."""
    prod = A[:, :, None] * B[:, None, :]
    m = prod.mean(0)
    se = prod.std(0, ddof=1) / np.sqrt(A.shape[0])
    return (m - target) / se


def test_exact_interaction_matches_euler_recursion_in_law():
    # with the exact law in the coefficients, particles are i.i.d. and E[h_L h_Lᵀ] = Σ_L (Euler)
    X = _X()
    L, T = 12, 1.0
    p = particles(X, T, L, 40_000, "erf", seed=3, interaction="exact")
    r = residual_recursion(X, L, T, "erf")
    z = _z_cov(p.H[L], p.H[L], r.Sigma[L])
    assert np.all(np.abs(z) < 4.5), z
    zg = _z_cov(p.G[0], p.G[0], r.Gamma[0])
    assert np.all(np.abs(zg) < 4.5), zg


def test_empirical_interaction_matches_recursion_over_seeds():
    # McKean–Vlasov particles (= a width-M ResNet in law): mean over seeds of the empirical
    # covariance → Σ_L with O(1/M) bias, well below the standard error here.
    X = _X()
    L, T, M, S = 8, 1.0, 2000, 24
    r = residual_recursion(X, L, T, "erf")
    Sig = np.array([particles(X, T, L, M, "erf", seed=s).Sigma_emp[L] for s in range(S)])
    Gam = np.array([particles(X, T, L, M, "erf", seed=100 + s).Gamma_emp[0] for s in range(S)])
    for A, target in ((Sig, r.Sigma[L]), (Gam, r.Gamma[0])):
        z = (A.mean(0) - target) / (A.std(0, ddof=1) / np.sqrt(S))
        assert np.all(np.abs(z) < 4.5), z
    # a wrong target (T off by 10 %) is detected: the check can fail
    wrong = residual_recursion(X, L, 1.1, "erf").Sigma[L]
    z = (Sig.mean(0) - wrong) / (Sig.std(0, ddof=1) / np.sqrt(S))
    assert np.max(np.abs(z)) > 4.5


def test_post_activation_relu_feature_growth():
    """Prop. 1 (seed 002): measured for both readings of the lost Eq. 9.  φ(h + branch) stays
    bounded (reflected Brownian motion); h + φ(branch) grows at least like √L.  Pre-act: bounded."""
    X = np.ones((1, 4))
    Ls = np.array([8, 16, 32, 64, 128])
    def mean_at(design):
        return np.array([particles(X, 1.0, L, 3000, "relu", seed=int(L), design=design, backward=False)
                         .mean_feature[-1] for L in Ls])
    grow = mean_at("post_branch")
    assert loglog_fit(Ls, grow).ci_low > 0.5
    post = mean_at("post")
    assert loglog_fit(Ls, post).ci_high < 0.25
    pre = np.array([particles(X, 1.0, L, 3000, "relu", seed=int(L), backward=False).rms_feature[-1] for L in Ls])
    assert loglog_fit(Ls, pre).ci_high < 0.1


def test_bad_input():
    X = _X()
    with pytest.raises(ValueError, match="T"):
        particles(X, T=0.0, L=4, M=10, seed=0)
    with pytest.raises(ValueError, match="L"):
        particles(X, T=1.0, L=0, M=10, seed=0)
    with pytest.raises(ValueError, match="M"):
        particles(X, T=1.0, L=4, M=1, seed=0)
    with pytest.raises(ValueError, match="X"):
        particles(np.full((2, 2), np.inf), T=1.0, L=4, M=10, seed=0)
    with pytest.raises(ValueError, match="design"):
        particles(X, T=1.0, L=4, M=10, seed=0, design="sideways")
    with pytest.raises(ValueError, match="rng"):
        particles(X, T=1.0, L=4, M=10)


def test_too_few_particles_warns_with_mc_error():
    with pytest.warns(RuntimeWarning, match="too few"):
        particles(_X(), T=1.0, L=4, M=50, seed=0, target_se=1e-3)
