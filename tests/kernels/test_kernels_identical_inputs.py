"""Identical inputs have correlation exactly 1 at every layer. Rounding in the Gram products (a matrix
product for the cross block, another for the variances) could leave it at 1 − ulp, where relu's
E[φ'φ'] = (π − θ)/(2π) has an infinite slope (θ ≈ √(2·ulp)): the relu NTK of the cross kernel was 2e-8 off
the joint Gram for inputs present in both sets. Every route now snaps identical rows (limits.kernels._args
.row_ids) — joint nngp, the cross kernel and the blocked kernel (symmetric and cross) agree to 1e-14."""
import warnings

import numpy as np
import pytest

import limits
from limits.kernels import kernel, kernel_blocked, nngp
from limits.kernels._args import row_ids, snap_identical, snap_variances


def _data():
    X = np.random.default_rng(0).standard_normal((90, 40)) * 0.5
    X[7] = X[3]
    X[61] = X[3]
    X[40] = X[12]
    X[89] = X[12]
    return X


def _rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


@pytest.mark.parametrize("act", ["relu", "erf", "gelu"])
def test_identical_inputs_agree_across_routes(act):
    X = _data()
    m = limits.Model(d_in=40, depth=6, activation=act, sigma_w2=2.0, sigma_b2=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # duplicated rows: the joint Gram is singular (a warning says so)
        full = nngp(X, model=m, keep="last")
    for a, b in ((3, 7), (3, 61), (12, 40), (12, 89)):
        assert full.K[0][a, b] == full.K[0][a, a] == full.K[0][b, b]      # read-in: exactly the variance
        assert full.Theta_out[a, a] == full.Theta_out[b, b]
        # relu: the same formula on and off the diagonal, so bit for bit; erf/gelu evaluate the diagonal by
        # its own cancellation-free form (a few ulps apart)
        assert full.Theta_out[a, b] == pytest.approx(full.Theta_out[a, a], rel=0 if act == "relu" else 1e-14)
        assert full.K_out[a, b] == pytest.approx(full.K_out[a, a], rel=0 if act == "relu" else 1e-14)
    cross = kernel(m, X[:45], X[45:])
    assert _rel(cross.ntk, full.Theta_out[:45, 45:]) <= 1e-14
    assert _rel(cross.nngp, full.K_out[:45, 45:]) <= 1e-14
    sym = kernel_blocked(m, X, block=16, progress=False)
    assert _rel(sym.ntk, full.Theta_out) <= 1e-14 and _rel(sym.nngp, full.K_out) <= 1e-14
    blk = kernel_blocked(m, X[:45], X2=X[45:], block=16, progress=False)
    assert _rel(blk.ntk, full.Theta_out[:45, 45:]) <= 1e-14


def test_relu_cross_kernel_at_identical_inputs_is_exact():
    """The case that was wrong: relu, an input in both sets; G(c = 1) = 1/2 exactly, so Θ_out(x, x) must equal
    the joint value to rounding (2e-8 before)."""
    X = _data()
    m = limits.Model(d_in=40, depth=3, activation="relu", sigma_w2=2.0, sigma_b2=0.0)
    r = kernel(m, X[[3, 12]], X[[7, 40, 5]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        j = nngp(X[[3, 12]], model=m, keep="last")
    assert r.ntk[0, 0] == pytest.approx(j.Theta_out[0, 0], rel=1e-15)
    assert r.ntk[1, 1] == pytest.approx(j.Theta_out[1, 1], rel=1e-15)


def test_row_ids_and_snaps():
    X = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [5.0, 6.0]])
    ids, none = row_ids(X)
    assert none is None and ids[0] == ids[2] >= 0 and ids[1] == ids[3] == -1
    i1, i2 = row_ids(X[:2], np.array([[3.0, 4.0], [7.0, 8.0], [1.0, 2.0]]))
    assert i1[1] == i2[0] >= 0 and i1[0] == i2[2] >= 0 and i2[1] == -1
    q = np.array([1.0, 2.0, 1.0 + 2e-16, 3.0])
    snap_variances(q, ids)
    assert q[2] == q[0] == 1.0
    K = np.arange(16.0).reshape(4, 4)
    snap_identical(K, ids, ids, q)
    assert K[0, 2] == K[2, 0] == K[0, 0] == K[2, 2] == 1.0 and K[1, 3] == 7.0   # distinct rows untouched
    assert row_ids(np.array([[0.0, 1.0], [0.5, 1.0]]))[0].max() == -1           # no duplicates: all −1
