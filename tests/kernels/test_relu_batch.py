"""The vectorised relu moments (limits/kernels/relu_batch.py) against the one-covariance-at-a-time route they replace
(limits.kernels.relu_lowrank.expect_many): equal to 1e-12 relative on full-rank, singular, nearly singular and
repeated covariances, and a relu composition's K1 through both routes."""
import numpy as np
import pytest

from limits.kernels import relu_batch as rb
from limits.kernels import relu_lowrank as rl

LISTS = {3: [[1, 1, 1], [2, 1, 0], [0, 0, None], [None, 1, 2], [1, 0, 1]],
         4: [[1, 1, 1, 1], [1, 1, 0, 0], [2, 1, 1, None], [0, 0, 0, 0], [None, None, 1, 1], [0, 1, 2, 1]]}


def _one_by_one(S, powers_list):
    return np.array([rl.expect_many(s, powers_list) for s in S]).T


def _covariances(r, rng):
    A = rng.standard_normal((6, r, r + 2))
    full = A @ A.transpose(0, 2, 1)
    B = rng.standard_normal((2, r, r - 1))
    singular = B @ B.transpose(0, 2, 1)                           # rank r − 1: the rank rules
    lam, V = np.linalg.eigh(full[0])
    near = (V * np.r_[1e-8 * lam[-1], lam[1:]]) @ V.T             # inside the nearly singular band
    return np.concatenate([full, singular, near[None], full[:2]])  # the last two repeat (integrated once)


@pytest.mark.parametrize("r", [3, 4])
def test_batch_equals_one_by_one(r):
    rng = np.random.default_rng(r)
    S = _covariances(r, rng)
    got = rb.expect_batch(S, LISTS[r])
    ref = _one_by_one(S, LISTS[r])
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(got[:, -2:], got[:, :2])


def test_unique_rows_is_exact():
    S = np.zeros((3, 4, 4))
    S[:] = np.eye(4)
    S[1, 0, 0] += 1e-16 * 4                                        # one ulp apart: distinct
    U, inv = rb.unique_rows(S)
    assert U.shape[0] == 2 and np.array_equal(U[inv], S)


def test_composition_K1_through_both_routes(monkeypatch):
    """A relu 1-D conv ResNet (stream self-interaction: 3- and 4-variable moments) on two inputs of length 2: the
    batched route and the one-by-one route give the same K1 to 1e-12."""
    import limits

    L = limits.layers
    conv = L.Conv(filter_shape=(2,), padding="SAME", sigma_w2=2.0, sigma_b2=0.1)
    s = limits.serial(conv, L.Residual(limits.serial(L.Activation("relu"), L.Conv((2,), "SAME", 1.0, 0.05)), rho=0.7),
                      L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    X = np.random.default_rng(0).normal(size=(2, 2, 2))
    new = limits.kernels.finite_width(s, X, ntk=False).K1
    monkeypatch.setattr(rb, "expect_batch", _one_by_one)
    old = limits.kernels.finite_width(s, X, ntk=False).K1
    assert np.all(new != 0)
    np.testing.assert_allclose(new, old, rtol=1e-12)
