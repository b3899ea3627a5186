"""Correctness of the fast Gaussian-expectation paths against the slow ones (no timing here)."""
import numpy as np
import pytest

from limits import gaussian as G
from limits.activations import activation
from limits.mehler import gram_series


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
