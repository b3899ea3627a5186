"""keep="last" in nngp/response: the kept layers equal the last layer of keep="all"; bad keep rejected."""
import numpy as np
import pytest

from limits.kernels import nngp, response

TOL = 1e-13


def _X(P=7, d=5, seed=3):
    return np.random.default_rng(seed).standard_normal((P, d))


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("act", ["erf", "tanh"])
@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("L", [1, 2, 5])
def test_response_keep_last_equals_last_layer_of_all(act, residual, L):
    kw = dict(depth=L, activation=act, sigma_w2=1.3, sigma_b2=0.1, residual=residual,
              rho=0.5 if residual else 1.0, width=40)
    X = _X()
    a = response(X, **kw)
    b = response(X, keep="last", **kw)
    assert a.layers is None
    assert b.layers == (0, L)
    assert b.eta.shape == b.chi.shape == b.K.shape == (2, 7, 7)
    for f in ("eta", "chi", "K"):
        _close(getattr(b, f)[0], getattr(a, f)[0])
        _close(getattr(b, f)[1], getattr(a, f)[L])
    _close(b.chi_out, a.chi_out)
    _close(b.K_out, a.K_out)
    # the response really varies with depth here, so a wrong layer would be caught
    assert np.max(np.abs(a.eta[L] - a.eta[L - 1])) > 1e-6


@pytest.mark.parametrize("act", ["erf", "tanh"])
@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("ntk", [True, False])
def test_nngp_keep_last_equals_last_layer_of_all(act, residual, ntk):
    L = 4
    kw = dict(depth=L, activation=act, sigma_w2=1.3, sigma_b2=0.1, residual=residual,
              rho=0.5 if residual else 1.0, ntk=ntk)
    X = _X()
    a = nngp(X, **kw)
    b = nngp(X, keep="last", **kw)
    assert b.layers == (0, L) and b.depth == a.depth == L
    assert b.K.shape == b.C.shape == (2, 7, 7)
    for f in ("K", "C") + (("Theta",) if ntk else ()):
        _close(getattr(b, f)[0], getattr(a, f)[0])
        _close(getattr(b, f)[1], getattr(a, f)[L])
    _close(b.K_out, a.K_out)
    if ntk:
        _close(b.Theta_out, a.Theta_out)
    else:
        assert b.Theta is None and b.Theta_out is None
    _close(b.correlations(), a.correlations())
    _close(b.correlations(L), a.correlations(L))
    _close(b.correlations(0), a.correlations(0))
    with pytest.raises(ValueError, match="layer"):
        b.correlations(2)
    assert b.diagnostics["max_abs_K"] == pytest.approx(a.diagnostics["max_abs_K"], rel=0, abs=0)


def test_keep_last_explosion_matches_all():
    kw = dict(depth=6, activation="linear", sigma_w2=50.0, residual=True, rho=1.0, width=10,
              on_explode="ignore", K0=np.eye(3) * 1e95, d_in=3)
    a = response(**kw)
    b = response(keep="last", **kw)
    assert a.diagnostics["exploded_at"] == b.diagnostics["exploded_at"] >= 1
    assert np.all(np.isinf(b.K[1])) and np.all(np.isinf(b.chi[1]))


def test_keep_last_save_load_roundtrip(tmp_path):
    b = nngp(_X(), depth=3, keep="last")
    b.save(tmp_path / "r")
    c = type(b).load(tmp_path / "r")
    assert c.equals(b) and c.layers == (0, 3)


@pytest.mark.parametrize("bad", ["first", "ALL", None, 1, ""])
def test_bad_keep_raises_naming_keep(bad):
    with pytest.raises(ValueError, match="keep"):
        nngp(_X(), depth=2, keep=bad)
    with pytest.raises(ValueError, match="keep"):
        response(_X(), depth=2, width=10, keep=bad)
