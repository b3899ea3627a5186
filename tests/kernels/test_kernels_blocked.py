"""limits.kernels.kernel_blocked: the tiled NNGP/NTK for large P equals the unblocked kernels."""
import numpy as np
import pytest

import limits
from limits.kernels import kernel, kernel_blocked
from limits.kernels.blocked import kernel_diag


def _models():
    return [limits.mlp(7, depth=10, activation="erf", sigma_w2=1.5, sigma_b2=0.1),
            limits.mlp(7, depth=10, activation="relu", sigma_w2=2.0, sigma_b2=0.05),
            limits.resnet(7, depth=4, activation="erf", sigma_w2=1.3, sigma_b2=0.1, rho=0.5),
            limits.resnet(7, depth=4, activation="relu", sigma_w2=1.3, sigma_b2=0.1, rho=0.5),
            limits.mlp(7, depth=3, activation="linear", sigma_w2=1.1, sigma_b2=0.2)]


@pytest.fixture(scope="module")
def X():
    X = np.random.default_rng(0).standard_normal((53, 7))
    X[17] = X[4]                          # a repeated input: correlation exactly 1 (relu's E[φ'φ'] is steep there)
    return X


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("mi", range(5))
def test_blocked_equals_unblocked_every_block_size(X, mi):
    m = _models()[mi]
    ref = limits.kernels.nngp(X, model=m, keep="last", on_explode="ignore")
    for block in ((1,) if mi == 0 else ()) + (4, 10, 16, 53, 200):       # 53 = P; 4, 10, 16 do not divide P
        r = kernel_blocked(m, X, block=block, progress=False)
        assert r.diagnostics["path"] == "fused"
        assert r.nngp.dtype == np.float64 and r.nngp.shape == (53, 53)
        assert _rel(r.nngp, ref.K_out) <= 1e-12 and _rel(r.ntk, ref.Theta_out) <= 1e-12
        assert np.array_equal(r.nngp, r.nngp.T) and np.array_equal(r.ntk, r.ntk.T)


def test_blocked_cross_fallback_and_rectangle(X):
    """tanh has no closed form: tiles go through limits.kernels.kernel (the cross kernel of the whole
    set, to 1e-12); the symmetric route (limits.kernels.nngp) sums its Mehler series on the whole Gram
    with its own certified truncation, so it agrees to the series' accuracy (measured 6e-12), not to
    rounding. X2 gives the P×P2 block."""
    m = limits.mlp(7, depth=2, activation="tanh", sigma_w2=1.5, sigma_b2=0.1)
    Xs = X[:9]
    r = kernel_blocked(m, Xs, block=4, progress=False)
    assert r.diagnostics["path"] == "cross"
    ref = kernel(m, Xs, Xs.copy())
    assert _rel(r.nngp, ref.nngp) <= 1e-12 and _rel(r.ntk, ref.ntk) <= 1e-12
    sym = kernel(m, Xs)
    assert _rel(r.nngp, sym.nngp) <= 1e-10 and _rel(r.ntk, sym.ntk) <= 1e-10
    X2 = np.random.default_rng(1).standard_normal((6, 7))
    for mm in (m, _models()[0], _models()[3]):
        c = kernel(mm, X[:11], X2)
        rb = kernel_blocked(mm, X[:11], X2=X2, block=4, progress=False)
        assert rb.nngp.shape == (11, 6)
        assert _rel(rb.nngp, c.nngp) <= 1e-12 and _rel(rb.ntk, c.ntk) <= 1e-12


def test_triangles_and_get(X):
    m = _models()[1]
    full = kernel_blocked(m, X, block=10, progress=False)
    up = kernel_blocked(m, X, block=10, get="nngp", fill="upper", progress=False)
    lo = kernel_blocked(m, X, block=10, get=("ntk",), fill="lower", progress=False)
    assert up.ntk is None and lo.nngp is None
    iu, il = np.triu_indices(53), np.tril_indices(53)
    assert np.array_equal(up.nngp[iu], full.nngp[iu]) and np.array_equal(lo.ntk[il], full.ntk[il])


def test_float32_error_bound(X):
    """float32 output: one rounding of the float64 tile, relative error ≤ 2⁻²⁴ per entry."""
    for m in _models()[:2]:
        a = kernel_blocked(m, X, block=16, progress=False)
        b = kernel_blocked(m, X, block=16, dtype=np.float32, progress=False)
        assert b.nngp.dtype == np.float32
        for g in ("nngp", "ntk"):
            A, B = getattr(a, g), getattr(b, g).astype(np.float64)
            err = np.max(np.abs(B - A) / np.abs(A))
            assert 0 < err <= 2.0 ** -24 * (1 + 1e-9)


def test_out_arrays_and_memmap_file(X, tmp_path):
    m = _models()[0]
    ref = kernel_blocked(m, X, block=8, progress=False)
    buf = np.full((53, 53), np.nan)
    r = kernel_blocked(m, X, block=8, get="nngp", out=buf, progress=False)
    assert r.nngp is buf and np.array_equal(buf, ref.nngp)
    path = tmp_path / "sub" / "K.npy"
    r = kernel_blocked(m, X, block=8, out={"nngp": path, "ntk": None}, progress=False)
    assert np.array_equal(np.load(path, allow_pickle=False), ref.nngp) and np.array_equal(r.ntk, ref.ntk)
    assert [p.name for p in path.parent.iterdir()] == ["K.npy"]     # no temporary left behind
    with pytest.raises(ValueError, match="out"):
        kernel_blocked(m, X, out=np.empty((53, 53)), progress=False)          # two kernels, one array
    with pytest.raises(ValueError, match="dtype"):
        kernel_blocked(m, X, get="nngp", out=np.empty((53, 53), np.float32), progress=False)
    with pytest.raises(ValueError, match=".npy"):
        kernel_blocked(m, X, get="nngp", out=tmp_path / "K.bin", progress=False)


def test_bad_arguments(X):
    m = _models()[0]
    for kw, word in (({"block": 0}, "block"), ({"dtype": np.int32}, "dtype"), ({"fill": "diag"}, "fill"),
                     ({"get": "cov"}, "get"), ({"progress": 2}, "progress")):
        with pytest.raises(ValueError, match=word):
            kernel_blocked(m, X, **kw)
    with pytest.raises(ValueError, match="X has 3 columns"):
        kernel_blocked(m, X[:, :3])


def test_diagonal_and_overflow(X):
    for m in _models():
        d = kernel_diag(m, X)
        r = kernel(m, X)
        assert _rel(d["nngp"], np.diag(r.nngp)) <= 1e-12 and _rel(d["ntk"], np.diag(r.ntk)) <= 1e-12
    big = limits.mlp(7, depth=400, activation="relu", sigma_w2=4.0, sigma_b2=0.1)      # variance grows 2^L
    with pytest.warns(limits.kernels.KernelWarning):
        r = kernel_blocked(big, X[:5], block=2, progress=False)
        c = kernel(big, X[:5], X[:5].copy())
    assert r.diagnostics["nngp_exploded_at"] == c.diagnostics["nngp_exploded_at"] > 300
    assert np.all(np.isinf(r.nngp)) and np.all(np.isinf(r.ntk))
    with pytest.raises(ValueError, match="overflows"):
        kernel_diag(big, X[:5])


def test_progress_line(X, monkeypatch, capsys):
    monkeypatch.setenv("LIMITS_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    kernel_blocked(_models()[0], X, block=20)
    assert "kernel_blocked 53×53: 6/6 (100%)" in capsys.readouterr().err
