"""relu / step moments in three and four Gaussian variables without a quadrature across a kink
(limits/kernels/relu_fourpoint.py): exact identities for independent blocks, Monte Carlo for coupled ones, and the
tensor Gauss–Hermite rule it replaces, which is off by percents."""
import numpy as np
import pytest

from limits.activations import BUILTIN
from limits.kernels import relu_fourpoint as rf
from limits.kernels.fourpoint import expect4, polar_rule, rule

RELU = BUILTIN["relu"]


def _arccos(k11, k12, k22, step=False):
    """E[relu u relu v] (or E[step u step v]) of a bivariate normal in closed form."""
    c = np.clip(k12 / np.sqrt(k11 * k22), -1.0, 1.0)
    th = np.arccos(c)
    if step:
        return (np.pi - th) / (2 * np.pi)
    return np.sqrt(k11 * k22) * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi)


def test_independent_pairs_factorise_to_the_arc_cosine_kernels():
    """Block-diagonal 4×4 covariances: E[relu relu relu relu] and E[step step step step] are products of the
    two-variable closed forms, to 1e-13; three variables with one independent: E[relu² relu step] = E[relu² relu]/2 (the
    exact polar rule)."""
    rng = np.random.default_rng(0)
    for _ in range(5):
        A, B = rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
        S1, S2 = A @ A.T + 0.1 * np.eye(2), B @ B.T + 0.1 * np.eye(2)
        S = np.zeros((4, 4))
        S[:2, :2], S[2:, 2:] = S1, S2
        k = lambda M, step=False: _arccos(M[0, 0], M[0, 1], M[1, 1], step)     # noqa: E731
        assert rf.expect(S, [1, 1, 1, 1]) == pytest.approx(k(S1) * k(S2), rel=1e-13)
        assert rf.expect(S, [0, 0, 0, 0]) == pytest.approx(k(S1, True) * k(S2, True), rel=1e-13)
        S3 = np.zeros((3, 3))
        S3[:2, :2], S3[2, 2] = S1, 0.7
        x, w = polar_rule(S1)                          # exact for relu(x)² relu(y): a cubic in the radius
        ref = 0.5 * (np.maximum(x[0], 0) ** 2 * np.maximum(x[1], 0)) @ w
        assert rf.expect(S3, [2, 1, 0]) == pytest.approx(ref, rel=1e-12)


def test_coupled_variables_agree_with_monte_carlo_where_gauss_hermite_does_not():
    """Full 4×4 covariances, every relu/step pattern of the self-interaction: the exact rule within 5 SE of 4·10⁶
    Monte Carlo draws (false failure ≈ 1e-5 per value); the 20⁴ tensor Gauss–Hermite rule is off by > 10 SE on
    some of them."""
    rng = np.random.default_rng(3)
    worst_gh = 0.0
    for t in range(3):
        A = rng.normal(size=(4, 4))
        S = A @ A.T / 4 + 0.2 * np.eye(4)
        x = rng.multivariate_normal(np.zeros(4), S, size=4_000_000)
        for powers in ([1, 1, 1, 1], [0, 1, None, 0], [1, 0, 0, 1], [0, 0, 1, 1]):
            f = np.ones(len(x))
            for v, p in enumerate(powers):
                if p is not None:
                    f = f * np.where(x[:, v] > 0, x[:, v] ** p, 0.0)
            mc, se = f.mean(), f.std() / np.sqrt(len(f))
            assert abs(rf.expect(S, powers) - mc) < 5 * se, (powers, rf.expect(S, powers), mc, se)
            fns = [RELU.phi if p == 1 else (RELU.dphi if p == 0 else np.ones_like) for p in powers]
            Z, W = rule(4)
            lam, V = np.linalg.eigh(S)
            xs = (V * np.sqrt(lam)) @ Z.T
            gh = np.prod([fns[v](xs[v]) for v in range(4)], axis=0) @ W
            worst_gh = max(worst_gh, abs(gh - mc) / se)
    assert worst_gh > 10


def test_expect4_uses_it_for_relu():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(4, 4))
    S = A @ A.T / 4 + 0.2 * np.eye(4)
    got = expect4(RELU, [RELU.phi, RELU.dphi, RELU.phi, RELU.dphi], S[None])[0]
    assert got == rf.expect(S, [1, 0, 1, 0])


def test_the_orthant_probability_is_scipys_including_zero_arguments():
    from scipy.stats import multivariate_normal

    for h in (-1.3, 0.0, 0.4):
        for k in (-0.7, 0.0, 1.5):
            for r in (-0.9, 0.0, 0.95):
                ref = multivariate_normal(mean=[0, 0], cov=[[1, r], [r, 1]]).cdf([h, k])
                assert float(rf.orthant(h, k, r)) == pytest.approx(ref, abs=1e-12)


def test_covariances_of_relu_and_identity_pairs_agree_with_monte_carlo():
    """fourpoint.cov_pairs (kernel_fluctuations' Σ for relu: φφ and hh observables) within 5 SE of 4·10⁶ draws;
    two identity pairs are Isserlis exactly."""
    from limits.kernels.fourpoint import cov_pairs

    rng = np.random.default_rng(5)
    A = rng.normal(size=(4, 4))
    S = A @ A.T / 4 + 0.2 * np.eye(4)
    x = rng.multivariate_normal(np.zeros(4), S, size=4_000_000)
    r = np.maximum(x, 0)
    for kinds in ([True, True], [True, False], [False, True]):
        a = r[:, 0] * r[:, 1] if kinds[0] else x[:, 0] * x[:, 1]
        b = r[:, 2] * r[:, 3] if kinds[1] else x[:, 2] * x[:, 3]
        c = (a - a.mean()) * (b - b.mean())
        assert abs(cov_pairs(np.array([kinds]), S[None])[0] - c.mean()) < 5 * c.std() / np.sqrt(len(c))
    assert cov_pairs(np.array([[False, False]]), S[None])[0] == pytest.approx(S[0, 2] * S[1, 3] + S[0, 3] * S[1, 2],
                                                                               rel=1e-15)
