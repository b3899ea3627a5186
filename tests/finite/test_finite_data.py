"""Synthetic data generators and user-array loading."""
import numpy as np
import pytest

from limits.finite import data


def test_toy_task_seed000():
    X, Y = data.toy_task(seed=0)
    assert X.shape == (20, 40) and Y.shape == (20, 1)
    assert set(np.unique(Y)) <= {-1.0, 1.0}
    X2, Y2 = data.toy_task(seed=0, labels="teacher")
    assert set(np.unique(Y2)) <= {-1.0, 1.0}
    np.testing.assert_array_equal(data.toy_task(seed=0)[0], X)


def test_sphere_and_gaussian():
    X = data.sphere_inputs(7, 5, seed=1)
    np.testing.assert_allclose(np.sum(X**2, axis=1) / 5, 1.0, rtol=1e-13)
    assert data.gaussian_inputs(3, 4, seed=1, scale=2.0).shape == (3, 4)


def test_angle_inputs_have_prescribed_angles():
    P = 8
    for kw in ({}, {"seed": 3}):
        X = data.angle_inputs(P, 10, kernel_scale=0.05, **kw)
        G = X @ X.T / 10
        th = 2 * np.pi * np.arange(P) / P
        np.testing.assert_allclose(G, 0.05 * np.cos(th[:, None] - th[None, :]), atol=1e-14)


def test_load_arrays(tmp_path):
    X = np.arange(6.0).reshape(3, 2)
    np.save(tmp_path / "x.npy", X)
    np.savez(tmp_path / "d.npz", X=X, Y=np.array([1.0, -1.0, 1.0]))
    X1, Y1 = data.load_arrays(tmp_path / "x.npy")
    assert Y1 is None
    np.testing.assert_array_equal(X1, X)
    X2, Y2 = data.load_arrays(tmp_path / "d.npz")
    assert Y2.shape == (3, 1)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError):
        data.load_arrays(tmp_path / "obj.npy")
    np.save(tmp_path / "nan.npy", np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="NaN"):
        data.load_arrays(tmp_path / "nan.npy")
    with pytest.raises(ValueError, match="path"):
        data.load_arrays(tmp_path / "missing.npz")
    np.savez(tmp_path / "bad.npz", X=X, Y=np.ones(4))
    with pytest.raises(ValueError, match="Y"):
        data.load_arrays(tmp_path / "bad.npz")
