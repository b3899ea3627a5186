"""The packed upper-triangle NNGP/NTK layers (limits.kernels._fused) against the full-matrix path they
replace (``nngp.FUSED = False``: limits.kernels.expectations.moments on whole P×P Grams), on a grid of
activations, depths, architectures and storage modes: ≤ 1e-14 relative (measured ≤ 1.5e-15: the packed
kernels evaluate arcsin/arccos/atan2 through half-angle arctangents with the scales folded into the
constants, a few ulps per layer; linear is bit-identical)."""
import sys

import numpy as np
import pytest

import limits.kernels  # noqa: F401
from limits.kernels import _fused

N = sys.modules["limits.kernels.nngp"]
FIELDS = ("K", "C", "Theta", "K_out", "Theta_out", "Theta_log_scale", "Theta_out_log_scale")


def _both(X, **kw):
    old = N.FUSED
    try:
        N.FUSED = False
        a = N.nngp(X, **kw)
        N.FUSED = True
        b = N.nngp(X, **kw)
    finally:
        N.FUSED = old
    return a, b


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    fin = np.isfinite(a)
    assert np.array_equal(fin, np.isfinite(b))
    if not fin.any():
        return 0.0
    return float(np.max(np.abs(a[fin] - b[fin])) / max(np.max(np.abs(a[fin])), 1e-300))


def _compare(a, b, tol=1e-12):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if x is None:
            assert y is None
            continue
        assert _rel(x, y) <= tol, f
        if np.ndim(x) == 3:                       # every kept layer is exactly symmetric
            assert all(np.array_equal(m, m.T) for m in np.asarray(y))
    assert a.diagnostics["exploded_at"] == b.diagnostics["exploded_at"]
    assert a.diagnostics["ntk_exploded_at"] == b.diagnostics["ntk_exploded_at"]
    assert a.diagnostics["status"] == b.diagnostics["status"]
    assert a.diagnostics["max_abs_K"] == pytest.approx(b.diagnostics["max_abs_K"], rel=1e-12)


@pytest.mark.parametrize("act", ["erf", "relu", "gelu", "linear"])
@pytest.mark.parametrize("depth", [1, 4, 13])
@pytest.mark.parametrize("residual", [False, True])
def test_fused_matches_full_matrix_path(act, depth, residual):
    X = np.random.default_rng(depth).standard_normal((37, 5)) * np.linspace(0.3, 2.0, 37)[:, None]
    for keep in ("all", "last"):
        a, b = _both(X, depth=depth, activation=act, sigma_w2=1.6, sigma_b2=0.1, residual=residual,
                     rho=0.7 if residual else 1.0, keep=keep, on_explode="ignore")
        _compare(a, b, tol=1e-14)
        if act == "linear":                        # bit for bit
            assert np.array_equal(a.K, b.K) and np.array_equal(a.Theta, b.Theta)
            assert np.array_equal(a.K_out, b.K_out) and np.array_equal(a.Theta_out, b.Theta_out)


@pytest.mark.parametrize("act", ["erf", "relu", "gelu"])
def test_fused_ntk_rescaling_and_log_scale(act):
    """Chaotic NTK (Θ grows like χ₁^L past 1e50 and 1e100): rescaled Θ̃ and log scales agree."""
    X = np.random.default_rng(1).standard_normal((19, 4))
    for ntk_scale in ("linear", "log"):
        a, b = _both(X, depth=200, activation=act, sigma_w2=8.0 if act != "relu" else 2.0, sigma_b2=0.3,
                     residual=act == "relu", rho=1.0, ntk_scale=ntk_scale, on_explode="ignore")
        _compare(a, b)
    assert b.diagnostics["ntk_overflow_at"] > 0 or np.any(b.Theta_log_scale != 0)


def test_fused_leaves_packed_path_when_variances_shrink():
    """gelu with σ_w² = 1e-30, σ_b² = 0: the variances fall below 1e-145 mid-recursion, where the general
    (scale-free) closed form takes over from the packed path; both routes agree to the end."""
    X = np.random.default_rng(2).standard_normal((11, 3))
    d = []
    for keep in ("all", "last"):
        a, b = _both(X, depth=8, activation="gelu", sigma_w2=1e-30, sigma_b2=0.0, keep=keep, on_explode="ignore")
        _compare(a, b)
        d.append(np.diag(b.K[-1]))
    assert 0 < d[0].max() < 1e-200 and np.array_equal(d[0], d[1])


@pytest.mark.parametrize("act", ["erf", "relu", "linear"])
def test_fused_zero_variance_input(act):
    """An all-zero input with σ_b² = 0 has variance 0 at every layer (relu's half-angle ratio is 0/0 there:
    θ = 0 as atan2(0, 0) gives); fused and full-matrix paths agree and stay finite."""
    X = np.random.default_rng(3).standard_normal((9, 3))
    X[4] = 0.0
    with pytest.warns(RuntimeWarning, match="ill-conditioned"):      # a zero row: K_out is singular, and says so
        a, b = _both(X, depth=3, activation=act, sigma_w2=2.0, sigma_b2=0.0, keep="all")
    _compare(a, b, tol=1e-14)
    assert np.isfinite(b.Theta_out).all() and np.all(b.K_out[4] == 0.0)


@pytest.mark.parametrize("P", [1, 2, 3])
def test_fused_tiny_sizes(P):
    X = np.random.default_rng(P).standard_normal((P, 2))
    a, b = _both(X, depth=3, activation="erf", sigma_w2=1.3, sigma_b2=0.2, residual=True)
    _compare(a, b)


def test_packed_roundtrip_and_segments():
    rng = np.random.default_rng(0)
    for P in (1, 2, 7, 300, 1000):
        A = rng.standard_normal((P, P))
        A = A + A.T
        pk = _fused.Packed(P, block=64 if P < 1000 else _fused.BLOCK)
        assert np.array_equal(pk.unpack(pk.pack(A)), A)
        assert np.array_equal(pk.diag(pk.pack(A)), np.diag(A))
        # row blocks tile the rows and the storage; each block is rows a..b−1 × columns a..P−1
        segs = pk.segments
        assert segs[0][0] == 0 and segs[-1][1] == P and segs[0][2] == 0 and segs[-1][3] == pk.n
        assert all(b == a2 and e == s2 for (_, b, _, e), (a2, _, s2, _) in zip(segs, segs[1:]))
        assert all(e - s == (b - a) * (P - a) for a, b, s, e in segs)
        v = pk.pack(A)
        for seg in segs:
            assert np.array_equal(pk.rect(v, seg), A[seg[0]:seg[1], seg[0]:])
        # the entries below the diagonal inside the blocks: ≤ 1/8 of each block plus the last ≤ 64-row square
        assert all(b - a <= max(1, (P - a) // 4) for a, b, _, _ in segs[:-1])
        assert pk.n <= P * (P + 1) // 2 * (1.05 if P == 1000 else 1.2 if P == 300 else 2.0)
