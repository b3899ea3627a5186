"""kernel(model, X1, X2): the P1×P2 block of the joint kernel without the joint Gram."""
import warnings

import numpy as np
import pytest

import limits
from limits.kernels.diagnostics import KernelWarning


@pytest.mark.parametrize("act", ["erf", "relu", "tanh", "gelu", "sigmoid", "linear"])
@pytest.mark.parametrize("residual", [False, True])
def test_cross_block_equals_joint_kernel(act, residual):
    rng = np.random.default_rng(3)
    X1, X2 = rng.standard_normal((4, 7)), 2.0 * rng.standard_normal((9, 7))
    build = limits.resnet if residual else limits.mlp
    m = build(7, 12, activation=act, sigma_w2=1.3, sigma_b2=0.1, **({"rho": 0.6} if residual else {}))
    k = limits.kernels.kernel(m, X1, X2, layers=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        j = limits.kernels.nngp(np.vstack([X1, X2]), model=m)
    # the joint Gram of 13 inputs in 7 dimensions: rank ≤ 8 for the linear network, so its (one) warning is
    # the expected "ill-conditioned" report; any other warning is a failure
    assert all(issubclass(w.category, KernelWarning) and "ill-conditioned" in str(w.message) for w in caught)
    if act == "linear":
        assert caught
    assert k.nngp.shape == (4, 9) and k.ntk.shape == (4, 9) and k.K.shape == (13, 4, 9)
    for got, full in [(k.nngp, j.K_out), (k.ntk, j.Theta_out)] + [(k.K[l], j.K[l]) for l in range(13)]:
        scale = np.max(np.abs(full))
        assert np.max(np.abs(got - full[:4, 4:])) <= 1e-12 * scale
    assert k.diagnostics["nngp_exploded_at"] == -1 and k.diagnostics["ntk_exploded_at"] == -1


def test_symmetric_and_get():
    X = np.random.default_rng(0).standard_normal((5, 3))
    m = limits.mlp(3, 2, activation="erf")
    k = limits.kernels.kernel(m, X)
    j = limits.kernels.nngp(X, model=m)
    np.testing.assert_array_equal(k.nngp, j.K_out)
    only = limits.kernels.kernel(m, X, X[:2], get="nngp")
    assert only.ntk is None and only.nngp.shape == (5, 2)
    with pytest.raises(ValueError, match="get"):
        limits.kernels.kernel(m, X, get=("nngp", "foo"))
    with pytest.raises(ValueError, match="X2 has 4 columns"):
        limits.kernels.kernel(m, X, np.ones((2, 4)))


def test_ntk_overflow_leaves_nngp_intact():
    """Chaotic erf (σ_w² = 4): the NTK grows like χ₁^L and overflows; the NNGP stays at its fixed point."""
    X = np.random.default_rng(2).standard_normal((2, 10))
    m = limits.mlp(10, 600, activation="erf", sigma_w2=4.0)
    with pytest.warns(limits.kernels.KernelWarning, match="NTK overflowed"):
        k = limits.kernels.kernel(m, X, X)          # identical points: the NTK's diagonal grows fastest
    assert np.all(np.isfinite(k.nngp)) and k.diagnostics["nngp_exploded_at"] == -1
    assert k.diagnostics["ntk_exploded_at"] > 0 and np.all(np.isinf(k.ntk))
    short = limits.kernels.kernel(limits.mlp(10, 520, activation="erf", sigma_w2=4.0), X, X, get="nngp")
    np.testing.assert_allclose(k.nngp, short.nngp, rtol=1e-12, atol=1e-12)     # off-diagonal → c* = 0


def test_save_load_roundtrip(tmp_path):
    X = np.random.default_rng(0).standard_normal((3, 4))
    k = limits.kernels.kernel(limits.mlp(4, 2), X, X[:2])
    k.save(tmp_path / "k")
    k2 = type(k).load(tmp_path / "k")
    np.testing.assert_array_equal(k2.nngp, k.nngp)
    np.testing.assert_array_equal(k2.X2, k.X2)


@pytest.mark.parametrize("act", ["tanh", "gelu"])
def test_cross_block_at_raw_pixel_scale(act):
    """Variances ~1e4 (inputs at raw-pixel scale) take the engine's large-variance rule on both routes."""
    rng = np.random.default_rng(7)
    X1, X2 = 100 * rng.standard_normal((3, 5)), 100 * rng.standard_normal((8, 5))
    m = limits.mlp(5, 2, activation=act, sigma_w2=1.1)
    k = limits.kernels.kernel(m, X1, X2)
    j = limits.kernels.nngp(np.vstack([X1, X2]), model=m)
    for got, full in [(k.nngp, j.K_out), (k.ntk, j.Theta_out)]:
        assert np.max(np.abs(got - full[:3, 3:])) <= 1e-12 * np.max(np.abs(full))
