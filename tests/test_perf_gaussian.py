"""Correctness of the fast Gaussian-expectation paths against the slow ones (no timing here)."""
import numpy as np
import pytest

from limits import gaussian as G
from limits.activations import activation
from limits.gaussian.mehler import gram_series


@pytest.mark.parametrize("name", ["tanh", "gelu"])
def test_blocked_upper_gram_series_identical_to_unblocked(name):
    rng = np.random.default_rng(3)
    P = 57
    X = rng.standard_normal((P, 4))
    K = X @ X.T / 4
    phi = activation(name).phi
    E0, ok0 = gram_series(phi, phi, K, block=10 ** 9)
    E1, ok1 = gram_series(phi, phi, K, block=100)
    E2, ok2 = gram_series(phi, phi, K, block=100, upper=True)
    iu = np.triu_indices(P)
    np.testing.assert_array_equal(E1, E0)
    np.testing.assert_array_equal(ok1, ok0)
    np.testing.assert_array_equal(E2[iu], E0[iu])
    np.testing.assert_array_equal(ok2[iu], ok0[iu])
    assert not ok2[np.tril_indices(P, -1)].any()


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu"])
def test_gram_matches_trapezoid(name):
    rng = np.random.default_rng(4)
    P = 40
    X = rng.standard_normal((P, 3)) * rng.uniform(0.3, 1.5, (P, 1))
    K = X @ X.T / 3
    E = G.gram(name, K)
    iu = np.triu_indices(P)
    d = np.diag(K)
    ref = G.expect2(name, name, d[iu[0]], K[iu], d[iu[1]], method="trapezoid")
    np.testing.assert_allclose(E[iu], ref, rtol=0, atol=1e-10 * max(1.0, np.abs(ref).max()))
    np.testing.assert_array_equal(E, E.T)


def _random_triples(n, rng, kmax=2.0):
    k11 = rng.uniform(0.0, kmax, n)
    k22 = rng.uniform(0.0, kmax, n)
    c = rng.uniform(-1.0, 1.0, n)
    k11[:3] = 0.0                 # degenerate variances and |c| = 1 go through the fallback
    c[3:6] = [1.0, -1.0, 0.999999]
    return k11, c * np.sqrt(k11 * k22), k22


@pytest.mark.parametrize("f,g", [("tanh", "tanh"), ("gelu", "gelu"), ("sigmoid", "tanh"),
                                 ("tanh'", "tanh'"), ("gelu''", "sigmoid")])
def test_generic_batch_matches_converged_trapezoid(f, g):
    rng = np.random.default_rng(5)
    k11, k12, k22 = _random_triples(1500, rng)
    fast = G.expect2(f, g, k11, k12, k22)                       # auto: interpolated Mehler series
    sub = np.r_[np.arange(8), rng.choice(1500, 120, replace=False)]
    ref = G.expect2(f, g, k11[sub], k12[sub], k22[sub], n=609)  # converged tensor trapezoid
    np.testing.assert_allclose(fast[sub], ref, rtol=0, atol=1e-11)


@pytest.mark.slow
def test_generic_series_certificate_and_mpmath():
    mpmath = pytest.importorskip("mpmath")
    from limits.gaussian.mehler import series_generic

    rng = np.random.default_rng(6)
    k11, k12, k22 = _random_triples(600, rng, kmax=3.0)
    phi = activation("tanh").phi
    v, ok = series_generic(phi, phi, k11, k12, k22)
    assert ok[6:].mean() > 0.95
    mpmath.mp.dps = 20       # 20 digits are 8 more than the 1e-12 compared; 30 took twice as long
    for i in (7, 250):
        s1, s2 = np.sqrt(k11[i]), np.sqrt(k22[i])
        cc = k12[i] / (s1 * s2)
        a, b = mpmath.mpf(cc), mpmath.sqrt(1 - mpmath.mpf(cc) ** 2)
        val = mpmath.quad(lambda x, y: mpmath.tanh(s1 * x) * mpmath.tanh(s2 * (a * x + b * y))
                          * mpmath.exp(-(x * x + y * y) / 2) / (2 * mpmath.pi), [-12, 0, 12], [-12, 0, 12])
        assert ok[i] and abs(v[i] - float(val)) < 1e-12


@pytest.mark.parametrize("q", [0.3, 2.0, 7.0])
def test_rounding_degenerate_pair_uses_1d_rule_accurately(q):
    """A Gram diagonal (k12 = k11 = k22 up to rounding) takes the 1-D rule: it must agree with
    mpmath (30 digits) to 1e-12 and with the 2-D tensor rule at c = 1 − 1e-14 to 1e-13."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    k12 = np.sqrt(q) * np.sqrt(q)                       # a few ulps off q
    s = mpmath.sqrt(q)
    for f, fm in (("tanh", mpmath.tanh), ("sigmoid", lambda x: 1 / (1 + mpmath.exp(-x))),
                  ("tanh'", lambda x: mpmath.sech(x) ** 2)):
        v = G.expect2(f, f, q, k12, q, closed_form=False, method="trapezoid")
        v2 = G.expect2(f, f, q, q * (1 - 1e-14), q, closed_form=False, method="trapezoid")
        ref = float(mpmath.quad(lambda x: fm(s * x) ** 2 * mpmath.exp(-x * x / 2) / mpmath.sqrt(2 * mpmath.pi),
                                [-40, -5, 0, 5, 40]))
        assert abs(v - ref) < 1e-12
        assert abs(v - v2) < 1e-13
