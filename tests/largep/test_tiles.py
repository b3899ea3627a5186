"""The tile store: equal to the in-memory blocked kernel, resumable, refusing what it cannot hold."""
import os

import numpy as np
import pytest

import limits
from limits.kernels import kernel_blocked
from limits.largep import TileStore, kernel_tiles


def _X(P=300, d=5, seed=0):
    X = np.random.default_rng(seed).standard_normal((P, d))
    X[250] = X[3]                      # identical inputs in different tiles (the relu NTK's infinite slope)
    return X


@pytest.mark.parametrize("act", ["erf", "relu", "tanh"])
def test_tiles_equal_the_blocked_kernel(act, tmp_path):
    m = limits.mlp(5, depth=3, activation=act)
    X = _X()
    ref = kernel_blocked(m, X, progress=False)
    st = kernel_tiles(m, X, tmp_path / "K", block=128, get=("nngp", "ntk"), progress=False)
    assert st.diagnostics["tiles"] == 6 and st.diagnostics["computed"] == 6
    for g in ("nngp", "ntk"):
        full = st.to_array(g)
        scale = np.abs(getattr(ref, g)).max()
        assert np.abs(full - getattr(ref, g)).max() <= 1e-12 * scale
        np.testing.assert_array_equal(full, full.T)
        V = np.random.default_rng(1).standard_normal((300, 3))
        np.testing.assert_allclose(st.matvec(V, g, shift=0.5), full @ V + 0.5 * V, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_array_equal(st.diagonal(g), np.diag(full))


def test_resume_recomputes_only_missing_or_damaged_tiles(tmp_path):
    m = limits.mlp(5, depth=2, activation="erf")
    X = _X()
    st = kernel_tiles(m, X, tmp_path / "K", block=100, progress=False)
    before = st.to_array()
    os.unlink(st.tile_path("nngp", 0, 2))
    os.unlink(st.tile_path("nngp", 1, 1))
    p = st.tile_path("nngp", 0, 1)
    p.write_bytes(p.read_bytes()[:200])                  # a torn tile (as no atomic write would leave)
    (tmp_path / "K" / "nngp" / ".000000_000000.npy.abc.tmp").write_bytes(b"partial")
    st2 = kernel_tiles(m, X, tmp_path / "K", block=100, progress=False)
    assert (st2.diagnostics["computed"], st2.diagnostics["reused"]) == (3, 3)
    np.testing.assert_array_equal(st2.to_array(), before)
    st3 = kernel_blocked(m, X, out=tmp_path / "K", block=100, get=("nngp",), progress=False)
    assert isinstance(st3, TileStore) and st3.diagnostics["computed"] == 0


def test_a_store_of_another_kernel_is_refused_not_overwritten(tmp_path):
    X = _X()
    kernel_tiles(limits.mlp(5, depth=2, activation="erf"), X, tmp_path / "K", block=100, progress=False)
    with pytest.raises(ValueError, match="different kernel"):
        kernel_tiles(limits.mlp(5, depth=3, activation="erf"), X, tmp_path / "K", block=100, progress=False)
    with pytest.raises(ValueError, match="different kernel"):
        kernel_tiles(limits.mlp(5, depth=2, activation="erf"), X + 1e-9, tmp_path / "K", block=100, progress=False)
    with pytest.raises(ValueError, match="different kernel"):
        kernel_tiles(limits.mlp(5, depth=2, activation="erf"), X, tmp_path / "K", block=50, progress=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.txt").write_text("user data")
    with pytest.raises(ValueError, match="non-empty directory"):
        kernel_tiles(limits.mlp(5, depth=2), X, tmp_path / "other", progress=False)
    assert (tmp_path / "other" / "mine.txt").read_text() == "user data"
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        kernel_tiles(limits.mlp(5, depth=2), X, tmp_path / "f", progress=False)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "store.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a readable kernel tile store"):
        kernel_tiles(limits.mlp(5, depth=2), X, tmp_path / "bad", progress=False)


def test_bad_arguments(tmp_path):
    m = limits.mlp(5, depth=2)
    with pytest.raises(ValueError, match="backend"):
        kernel_tiles(m, _X(), tmp_path / "K", backend="threads")
    with pytest.raises(ValueError, match="scheduler"):
        kernel_tiles(m, _X(), tmp_path / "K", scheduler="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="get"):
        kernel_tiles(m, _X(), tmp_path / "K", get=("nngp", "nngp"))
    with pytest.raises(ValueError, match="X must be"):
        kernel_tiles(m, _X()[:, :3], tmp_path / "K")
    with pytest.raises(ValueError, match="needs out=DIRECTORY"):
        kernel_blocked(m, _X(), backend="dask")
    with pytest.raises(ValueError, match=r"\.npy"):
        kernel_blocked(m, _X(), get=("nngp",), out=tmp_path / "K.npz")
    assert not (tmp_path / "K").exists()


@pytest.mark.slow
def test_dask_tiles_equal_serial_tiles(tmp_path):
    distributed = pytest.importorskip("distributed")
    m = limits.mlp(5, depth=2, activation="erf")
    X = _X(400)
    ser = kernel_tiles(m, X, tmp_path / "S", block=100, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GiB", dashboard_address=":0",
                                  processes=True) as cluster, distributed.Client(cluster) as client:
        st = kernel_blocked(m, X, out=tmp_path / "D", block=100, backend="dask", scheduler=client, progress=False)
    assert st.diagnostics["computed"] == 10 and st.diagnostics["backend"] == "dask"
    # the same code on another process: equal to rounding (BLAS's SIMD sums of X Xᵀ depend on the alignment
    # of the deserialised inputs — measured 2.5e-16 absolute, 1.1e-15 relative), not bit for bit
    a, b = st.to_array(), ser.to_array()
    assert np.abs(a - b).max() <= 1e-14 * np.abs(b).max()
