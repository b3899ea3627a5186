"""Spectral diagnostics (min eigenvalue, condition number: two O(P³) Cholesky factorisations) of closed-form
kernels with P > MAX_EIG_P are computed on first access — with the same values and warnings as the eager
computation — while quadrature kernels keep computing (and warning) at once."""
import json
import warnings

import numpy as np
import pytest

from limits.kernels import KernelWarning, nngp
from limits.kernels import diagnostics as D
from limits.results import load_result

P = D.MAX_EIG_P + 1


def _X(dup=True):
    X = np.random.default_rng(0).standard_normal((P, 6))
    if dup:
        X[5] = X[2]                                   # a repeated input: singular Gram
    return X


def test_closed_form_spectra_are_deferred_and_equal_to_eager(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # nothing is emitted at call time
        r = nngp(_X(), depth=3, activation="erf", sigma_w2=1.5, sigma_b2=0.1, keep="last")
    assert r.diagnostics._pending is not None and dict.get(r.diagnostics, "cond_K_L") is None
    assert r.diagnostics["exploded_at"] == -1 and r.diagnostics._pending is not None   # cheap keys: no fill
    with pytest.warns(KernelWarning, match="ill-conditioned|positive definite"):
        cond = r.diagnostics["cond_K_L"]
    assert r.diagnostics._pending is None
    lo, c = D.spectrum_summary(r.K[-1])
    lo2, c2 = D.spectrum_summary(r.K_out)
    # K^L is singular (cond ~1e17): eigvalsh's last bits depend on the arrays' memory alignment (LAPACK's SIMD
    # paths), so the lazy and the direct call agree to rounding, not bit for bit (seen under pytest-xdist)
    scale = float(np.max(np.abs(r.K[-1])))
    assert cond == pytest.approx(c, rel=1e-12) and r.diagnostics["cond_K_out"] == pytest.approx(c2, rel=1e-12)
    assert r.diagnostics["min_eig_K_L"] == pytest.approx(lo, abs=1e-13 * scale)
    assert any("ill-conditioned" in w or "positive definite" in w for w in r.diagnostics["warnings"])
    # saving fills and stores the same dict; it loads back equal (a plain dict)
    r2 = nngp(_X(), depth=3, activation="erf", sigma_w2=1.5, sigma_b2=0.1, keep="last", on_explode="ignore")
    r2.save(tmp_path / "r")
    back = load_result(tmp_path / "r")
    assert back.equals(r2) and back.diagnostics["cond_K_L"] == r2.diagnostics["cond_K_L"]   # saved = loaded, bits
    # r2 is a second computation: eigvalsh of the same singular K^L (cond ~1e17) may differ in the last bit
    # with the arrays' memory alignment (LAPACK's SIMD paths) — seen once in CI-like runs: 1 ulp apart
    assert back.diagnostics["cond_K_L"] == pytest.approx(c, rel=1e-12)
    assert json.loads(json.dumps(dict(r2.diagnostics.items())))["cond_K_out"] == pytest.approx(c2)


def test_on_explode_ignore_stays_silent_when_filled():
    r = nngp(_X(), depth=2, activation="relu", sigma_w2=2.0, keep="last", on_explode="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert r.diagnostics["cond_K_L"] > D.COND_WARN
        assert sorted(r.diagnostics) == sorted(dict.keys(r.diagnostics))


def test_small_and_quadrature_kernels_stay_eager():
    with pytest.warns(KernelWarning):
        small = nngp(_X()[:50], depth=2, activation="erf", sigma_w2=1.5, keep="last")
    assert small.diagnostics._pending is None and dict.get(small.diagnostics, "cond_K_L") is not None
    with pytest.warns(KernelWarning):                 # tanh (no closed form): warned at call time
        q = nngp(_X(), depth=1, activation="tanh", sigma_w2=1.5, sigma_b2=0.1, keep="last")
    assert q.diagnostics._pending is None and dict.get(q.diagnostics, "cond_K_L") is not None
