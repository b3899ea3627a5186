"""Gram matrices of tanh/sigmoid by interpolation in the correlation (limits.corrinterp).

Measured (this file; ``python -m pytest tests/test_corrinterp.py -q``): against the engine's per-entry
rules (``expect2(method="trapezoid")``) ≤ 1e-12 relative (floor 1e-2 √(E f² E g²)) for tanh/sigmoid and
their derivatives at variances 1.5 … 1e6 (random correlations); against mpmath ≤ 1e-12 relative, including
|c| within 1e-12 of 1 (there the engine's own trapezoid is off by up to ~1e-12 … 2e-11 at variance ≲ 2,
the interpolant by ~1e-14);
the number of engine evaluations per interpolant grows like log q (one graded panel per octave of
1 − |c| down to ~1/q), not like q, and does not depend on P.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from limits.gaussian import corrinterp as CI
from limits import gaussian as G
from limits.kernels.expectations import moments

_REL = 1e-12          # the interpolant's certificate is 1e-12 relative (floor 1e-2 of the CS scale)


def _unit_gram(P, rng, d=12):
    X = rng.standard_normal((P, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    C = X @ X.T
    np.fill_diagonal(C, 1.0)
    return C


def _scale(f, q1, q2):
    return math.sqrt(float(G.expect2(f, f, q1, q1, q1)) * float(G.expect2(f, f, q2, q2, q2)))


def _engine_entries(f, K, idx):
    d = np.diag(K)
    i, j = idx
    return G.expect2(f, f, d[i], K[i, j], d[j], method="trapezoid")


def _assert_close(val, ref, scale, rel=_REL):
    err = np.abs(val - ref) / np.maximum(np.abs(ref), 1e-2 * scale)
    assert float(err.max()) <= rel, float(err.max())
    return float(err.max())


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
@pytest.mark.parametrize("q", [1.5, 1e2, 1e4, 1e6])
def test_gram_vs_engine(name, q):
    rng = np.random.default_rng(3)
    P = 64
    K = q * _unit_gram(P, rng)
    K[1, 2] = K[2, 1] = q * (1.0 - 1e-12)                 # near-duplicate inputs (vs mpmath below: the
    K[3, 4] = K[4, 3] = -q * (1.0 - 1e-9)                 # engine's trapezoid is off by ~1e-12 there)
    res = G.gram_pairs([(name, name), (f"{name}'", f"{name}'")], K)
    assert res is not None
    iu = np.triu_indices(P)
    pick = rng.choice(iu[0].size, 120, replace=False)
    idx = (np.concatenate([iu[0][pick], [5]]), np.concatenate([iu[1][pick], [5]]))
    for f, E in zip((name, f"{name}'"), res):
        ref = _engine_entries(f, K, idx)
        _assert_close(E[idx], ref, _scale(f, q, q))
        assert np.array_equal(E, E.T)


def test_moments_uses_the_interpolant_and_matches_gram():
    rng = np.random.default_rng(4)
    K = 2.0 * _unit_gram(160, rng)
    assert G.interp_pays(K)
    E, Gm = moments(G.activation("tanh"), K)
    E1, G1 = G.gram_pairs([("tanh", "tanh"), ("tanh'", "tanh'")], K)
    np.testing.assert_array_equal(E, E1)
    np.testing.assert_array_equal(Gm, G1)


@pytest.mark.parametrize("name,kind,q,c", [("tanh", 0, 1.5, 1 - 1e-12), ("tanh", 1, 1.5, -(1 - 1e-12)),
                                           ("tanh", 0, 1e4, 0.3), ("tanh", 1, 1e4, 1 - 1e-12),
                                           ("sigmoid", 0, 1e2, -0.7), ("sigmoid", 1, 1.5, 0.999),
                                           ("sigmoid", 0, 1.5, 1 - 1e-12), ("sigmoid", 0, 1.5, -(1 - 1e-9)),
                                           ("tanh", 0, 1e6, 1 - 1e-12), ("tanh", 1, 1e8, 0.5)])
def test_interpolant_vs_mpmath(name, kind, q, c):
    ref_mod = pytest.importorskip("test_reliability_numerics")
    f = name + "'" * kind
    itp = CI.build([(f, f)], q, q)
    val = float(itp(np.array([c]))[0][0])
    ref, scale = ref_mod.reference(name, kind, q, c)
    assert abs(val - ref) <= _REL * max(abs(ref), 1e-2 * scale), (val, ref, (val - ref) / ref)


def test_engine_evaluations_grow_like_log_q_not_q():
    """Per interpolant: nodes on one graded panel per octave of 1 − |c| (≤ log2 q + 3 panels on [0, 1]
    by the reflection symmetry), 20 engine values per panel and function, plus bisections."""
    counts = {}
    for q in (1e2, 1e4, 1e6, 1e8):
        CI._CACHE.clear()
        before = CI.stats["engine_evaluations"]
        assert CI.build([("tanh", "tanh"), ("tanh'", "tanh'")], q, q) is not None
        counts[q] = CI.stats["engine_evaluations"] - before
    for q, n in counts.items():       # measured 484, 1324, 1564, 1924 (two functions)
        assert n <= 120 * (math.log2(q) + 4), counts


def test_evaluations_do_not_depend_on_P():
    rng = np.random.default_rng(5)
    n = []
    for P in (64, 256):
        CI._CACHE.clear()
        before = CI.stats["engine_evaluations"]
        G.gram_pairs([("tanh", "tanh")], 3.0 * _unit_gram(P, rng))
        n.append(CI.stats["engine_evaluations"] - before)
    assert n[0] == n[1]


def test_two_groups_of_variances():
    """Inputs with two distinct norms: two groups, interpolants for (1,1), (1,2), (2,2) (and (2,1) by
    symmetry) — every block against the engine."""
    rng = np.random.default_rng(6)
    P = 70
    C = _unit_gram(P, rng)
    s = np.where(np.arange(P) < 30, 1.0, math.sqrt(40.0))
    K = C * np.outer(s, s)
    lab, rep = CI.groups(np.diag(K))
    assert rep.size == 2
    res = G.gram_pairs([("tanh", "tanh"), ("tanh'", "tanh'")], K)
    assert res is not None
    idx = (np.array([0, 0, 35, 40, 5, 31]), np.array([1, 50, 36, 2, 29, 69]))
    for f, E in zip(("tanh", "tanh'"), res):
        ref = _engine_entries(f, K, idx)
        d = np.diag(K)
        scale = np.sqrt(np.array([_scale(f, d[i], d[j]) for i, j in zip(*idx)]))
        err = np.abs(E[idx] - ref) / np.maximum(np.abs(ref), 1e-2 * scale)
        assert err.max() <= _REL, err
        np.testing.assert_allclose(np.diag(E), G.expect2(f, f, d, d, d, method="trapezoid"), rtol=1e-15)  # (ulps: batching)


def test_rounding_level_spread_is_one_group():
    rng = np.random.default_rng(7)
    K = 2.0 * _unit_gram(64, rng)
    d = np.diag(K).copy()
    d[::3] = np.nextafter(d[::3], 3.0)           # a few ulps apart, as rounded input norms are
    np.fill_diagonal(K, d)
    lab, rep = CI.groups(np.diag(K))
    assert rep.size == 1
    (E,) = G.gram_pairs([("tanh", "tanh")], K)
    idx = (np.arange(0, 60, 3), np.arange(1, 61, 3))
    _assert_close(E[idx], _engine_entries("tanh", K, idx), _scale("tanh", 2.0, 2.0))


def test_all_distinct_norms_fall_back_unchanged(monkeypatch):
    rng = np.random.default_rng(8)
    P = 64
    s = np.sqrt(np.linspace(0.5, 3.0, P))
    K = _unit_gram(P, rng) * np.outer(s, s)
    assert CI.gram([("tanh", "tanh")], K) is None           # 64 groups > max_groups
    E = G.gram("tanh", K)
    D = G.dgram("tanh", K)
    monkeypatch.setattr(CI, "gram", lambda *a, **k: None)   # the path as before this module
    np.testing.assert_array_equal(E, G.gram("tanh", K))
    np.testing.assert_array_equal(D, G.dgram("tanh", K))


def test_gating():
    rng = np.random.default_rng(11)
    C = _unit_gram(200, rng)
    assert G.interp_pays(2.0 * C) and not G.interp_pays(2.0 * C[:100, :100])
    assert not G.interp_pays(1e3 * C) and G.interp_pays(1e6 * C[:64, :64])


def test_small_P_and_invalid_input_keep_their_paths():
    rng = np.random.default_rng(9)
    assert CI.gram([("tanh", "tanh")], _unit_gram(8, rng)) is None
    K = 1e6 * _unit_gram(64, rng)
    K[0, 1] = K[1, 0] = 1.5e6                                 # not PSD
    with pytest.raises(ValueError, match="not a valid covariance"):
        G.gram("tanh", K)
    with pytest.raises(ValueError, match="symmetric"):
        K2 = 1e6 * _unit_gram(64, rng)
        K2[0, 1] += 1e5
        G.gram("tanh", K2)


def test_nngp_tanh_matches_the_previous_path(monkeypatch):
    """A 160-input tanh network, 6 layers, NNGP + NTK: interpolant path vs the path before it ≤ 1e-12."""
    from limits.kernels import nngp

    rng = np.random.default_rng(10)
    X = rng.standard_normal((160, 10))
    X *= math.sqrt(10) / np.linalg.norm(X, axis=1, keepdims=True)
    new = nngp(X, depth=6, activation="tanh", sigma_w2=1.5, sigma_b2=0.05, keep="last")
    monkeypatch.setattr(CI, "gram", lambda *a, **k: None)
    old = nngp(X, depth=6, activation="tanh", sigma_w2=1.5, sigma_b2=0.05, keep="last")
    for a, b in ((new.K_out, old.K_out), (new.Theta_out, old.Theta_out)):
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b))
