"""keep="checkpoint" (and keep="auto" beyond AUTO_ALL_BYTES): every layer of the lazily recomputed stack
equals keep="all" bit for bit, under every kind of indexing, and saves/loads/compares as the array."""
import sys

import numpy as np
import pytest

import limits.kernels  # noqa: F401
from limits.kernels import nngp
from limits.kernels._layers import LayerStack

N = sys.modules["limits.kernels.nngp"]


@pytest.mark.parametrize("act, residual, ntk_scale", [(a, r, s) for a in ("erf", "relu") for r in (False, True)
                                                     for s in ("linear", "log")]
                         + [pytest.param("tanh", True, "linear", marks=pytest.mark.slow)])
def test_checkpoint_stack_equals_all(act, residual, ntk_scale, tmp_path):
    """(tanh, the general quadrature path, once: each recomputed stretch costs seconds there.)"""
    X = np.random.default_rng(0).standard_normal((13 if act != "tanh" else 6, 4))
    kw = dict(depth=11, activation=act, sigma_w2=1.5 if act != "relu" else 2.0, sigma_b2=0.1, residual=residual,
              rho=0.8, ntk_scale=ntk_scale, on_explode="ignore")
    a = nngp(X, keep="all", **kw)
    for every in ((None, 3, 11, 50) if act != "tanh" else (4,)):
        b = nngp(X, keep="checkpoint", checkpoint_every=every, **kw)
        for f in ("K", "C", "Theta"):
            A, B = getattr(a, f), getattr(b, f)
            assert isinstance(B, LayerStack) and B.shape == A.shape and len(B) == len(A)
            assert np.array_equal(np.asarray(B), A)
            for l in (0, 1, 4, 10, 11, -1, -12):
                assert np.array_equal(B[l], A[l])
            assert np.array_equal(B[:, 0, 1], A[:, 0, 1]) and np.array_equal(B[2:9:3], A[2:9:3])
            assert np.array_equal(B[[1, 7]], A[[1, 7]]) and np.array_equal(B[..., 2], A[..., 2])
            with pytest.raises(IndexError):
                B[12]
        np.testing.assert_array_equal(a.Theta_log_scale, b.Theta_log_scale)
        assert b.depth == a.depth == 11
        np.testing.assert_array_equal(a.correlations(4), b.correlations(4))
        np.testing.assert_array_equal(a.K_out, b.K_out)
        np.testing.assert_array_equal(a.Theta_out, b.Theta_out)
        assert b.equals(a)
    b.save(tmp_path / "r")
    assert type(b).load(tmp_path / "r").equals(a)


def test_checkpoint_after_explosion():
    X = np.random.default_rng(1).standard_normal((5, 3))
    kw = dict(depth=9, activation="relu", sigma_w2=1e30, on_explode="ignore")
    a, b = nngp(X, keep="all", **kw), nngp(X, keep="checkpoint", checkpoint_every=2, **kw)
    assert a.diagnostics["exploded_at"] == b.diagnostics["exploded_at"] > 0
    np.testing.assert_array_equal(np.asarray(b.K), a.K)
    np.testing.assert_array_equal(np.asarray(b.Theta), a.Theta)


def test_auto_switches_to_checkpoint_beyond_budget(monkeypatch):
    X = np.random.default_rng(2).standard_normal((9, 3))
    assert isinstance(nngp(X, depth=6, activation="tanh").K, np.ndarray)   # small, no closed form: plain arrays
    small = nngp(X, depth=6)          # closed form (erf): the packed layers, read-only, bit-identical to "all"
    assert isinstance(small.K, LayerStack) and "packed" in repr(small.K)
    np.testing.assert_array_equal(np.asarray(small.K), nngp(X, depth=6, keep="all").K)
    monkeypatch.setattr(N, "AUTO_ALL_BYTES", 1000)
    r = nngp(X, depth=6)
    assert isinstance(r.K, LayerStack)
    np.testing.assert_array_equal(np.asarray(r.K), nngp(X, depth=6, keep="all").K)
    with pytest.raises(ValueError, match="checkpoint_every"):
        nngp(X, depth=6, keep="checkpoint", checkpoint_every=0)
    with pytest.raises(ValueError, match="keep"):
        nngp(X, depth=6, keep="some")
