"""No wrong or silent-NaN numbers (issue 14, numerical half).

Gaussian kernels E[φ(u)φ(v)] and E[φ'(u)φ'(v)] against mpmath at variances 1e-6…1e8 for every registered
activation, on the scalar (kernel/dkernel/expect2) and the Gram (gram/dgram, P ≥ 8: Mehler route) paths;
overflow is an error; the NNGP survives an overflowing NTK; memory is checked before allocating.

Reference values (computed here, never stored): ``mpmath.quad`` (tanh–sinh) on the Cholesky
substitution u = s x, v = s(c x + √(1 − c²) y), nested (inner over y, outer over x), every interval split
at the activation's feature (x = 0, resp. the line c x + √(1 − c²) y = 0) and at geometrically spaced
points around it (width 1/s, ratio 4), truncated at |x|, |y| ≤ 12 (Gaussian mass < 1e-32). The default
run uses mpmath's double-precision context (``mpmath.fp``, ≈1e-14 relative — checked against the
20-digit ``mpmath.mp`` context in the slow test); the dense grid is ``@pytest.mark.exhaustive`` (python -m pytest -m exhaustive).

Tolerance: |value − reference| ≤ 1e-10 |reference| + 1e-14 √(E[f²] E[g²]) (the absolute floor only
matters where the value vanishes by symmetry, e.g. odd φ at c = 0).

``python tests/test_reliability_numerics.py`` prints the activation × variance table of the maximal
relative error (over c ∈ {0, ±0.5, 0.999, 1} and both kernels) of whichever ``limits`` is imported.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

mpmath = pytest.importorskip("mpmath")

from limits import gaussian as G  # noqa: E402

ACTS = ("linear", "relu", "erf", "tanh", "gelu", "sigmoid")
QS = (1e-6, 1e-3, 1.0, 1e2, 1e4, 1e6, 1e8)
CS = (0.0, 0.5, -0.5, 0.999, 1.0)
_SQ2 = math.sqrt(2.0)
_SQ2PI = math.sqrt(2.0 * math.pi)


def _fp_funs(name):
    """(φ, φ') as float functions (mpmath.fp context)."""
    def sech2(x):
        return 0.0 if abs(x) > 350 else 1.0 / math.cosh(x) ** 2

    def sig(x):
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))

    def dsig(x):
        e = math.exp(-abs(x))
        return e / (1.0 + e) ** 2

    return {
        "linear": (lambda x: x, lambda x: 1.0),
        "relu": (lambda x: x if x > 0 else 0.0, lambda x: 1.0 if x > 0 else 0.0),
        "erf": (math.erf, lambda x: 2.0 / math.sqrt(math.pi) * math.exp(-x * x)),
        "tanh": (math.tanh, sech2),
        "gelu": (lambda x: 0.5 * x * math.erfc(-x / _SQ2),
                 lambda x: 0.5 * math.erfc(-x / _SQ2) + x * math.exp(-0.5 * x * x) / _SQ2PI),
        "sigmoid": (sig, dsig),
    }[name]


def _mp_funs(name):
    """(φ, φ') as mpmath functions (mpmath.mp context)."""
    mp = mpmath.mp
    return {
        "linear": (lambda x: x, lambda x: mp.mpf(1)),
        "relu": (lambda x: x if x > 0 else mp.mpf(0), lambda x: mp.mpf(1) if x > 0 else mp.mpf(0)),
        "erf": (mp.erf, lambda x: 2 / mp.sqrt(mp.pi) * mp.exp(-x * x)),
        "tanh": (mp.tanh, lambda x: mp.sech(x) ** 2),
        "gelu": (lambda x: x * mp.ncdf(x), lambda x: mp.ncdf(x) + x * mp.npdf(x)),
        "sigmoid": (lambda x: 1 / (1 + mp.exp(-x)), lambda x: mp.exp(-abs(x)) / (1 + mp.exp(-abs(x))) ** 2),
    }[name]


def _points(center, w, lo=-12.0, hi=12.0, ratio=4.0):
    p = {lo, hi}
    if lo < center < hi:
        p.add(center)
    k = w
    while k < hi - lo:
        for t in (center - k, center + k):
            if lo < t < hi:
                p.add(t)
        k *= ratio
    return sorted(p)


@functools.lru_cache(maxsize=None)
def reference(name, kind, q, c, ctx="fp", q2=None):
    """E[f(u) f(v)], f = φ (kind 0) or φ' (kind 1); (u, v) ~ N(0, [[q, c√(q q2)], [·, q2]]).
    Returns (value, √(E f(u)² E f(v)²))."""
    C = mpmath.fp if ctx == "fp" else mpmath.mp
    f = (_fp_funs if ctx == "fp" else _mp_funs)(name)[kind]
    q2 = q if q2 is None else q2
    s1, s2 = C.sqrt(C.mpf(q)), C.sqrt(C.mpf(q2))
    c = C.mpf(c)

    def npdf(x):
        return C.exp(-x * x / 2) / C.sqrt(2 * C.pi)

    def one(fun, w):
        return C.quad(lambda x: npdf(x) * fun(x), _points(0.0, w))

    m1 = one(lambda x: f(s1 * x) ** 2, 1 / s1)
    m2 = one(lambda x: f(s2 * x) ** 2, 1 / s2)
    scale = float(C.sqrt(m1 * m2))
    if abs(c) == 1:
        return float(one(lambda x: f(s1 * x) * f(c * s2 * x), 1 / max(s1, s2))), scale
    if c == 0:
        return float(one(lambda x: f(s1 * x), 1 / s1) * one(lambda x: f(s2 * x), 1 / s2)), scale
    b = C.sqrt(1 - c * c)

    def inner(x):
        return C.quad(lambda y: npdf(y) * f(s2 * (c * x + b * y)), _points(float(-c * x / b), float(1 / (s2 * b))))

    outer = C.quad(lambda x: npdf(x) * f(s1 * x) * inner(x), _points(0.0, float(min(1 / s1, 1 / (s2 * abs(c))))))
    return float(outer), scale


def _covariance(q, c, q2=None):
    """(k12, c_used): the covariance entry the engine is given for correlation ``c`` and the correlation
    that rounded entry really has. k12 = c·q for equal variances (so c = ±1 stays exact), else
    c·√q·√q2; c_used = k12/√(q q2) evaluated exactly (40 digits) and rounded once. The reference is
    taken at c_used: near |c| = 1 relu's E[φ'φ'] = (π − arccos c)/2π has an infinite c-derivative,
    and k12 = √q·√q (q = 1e-3) is c = 1 − 2e-16, which moves it by 3e-9 — the engine is exact for the
    covariance it receives, so only the reference at that covariance tests it."""
    q2 = q if q2 is None else q2
    k12 = c * q if q2 == q else c * math.sqrt(q) * math.sqrt(q2)
    with mpmath.workdps(40):
        c_used = float(mpmath.mpf(k12) / mpmath.sqrt(mpmath.mpf(q) * mpmath.mpf(q2)))
    assert abs(c_used) == 1.0 or 1.0 - c_used * c_used > 1e-10, \
        f"test point c = {c} rounds to the ill-conditioned correlation {c_used!r}"
    return k12, c_used


def _engine(name, kind, q, c, q2=None):
    q2 = q if q2 is None else q2
    k12, _ = _covariance(q, c, q2)
    fn = G.kernel if kind == 0 else G.dkernel
    return float(fn(name, q, k12, q2))


def _reference_used(name, kind, q, c, q2=None):
    """:func:`reference` at the correlation the engine's rounded covariance has (:func:`_covariance`)."""
    return reference(name, kind, q, _covariance(q, c, q2)[1], "fp", q2)


def _ok(val, ref, scale, rtol=1e-10):
    return abs(val - ref) <= rtol * abs(ref) + 1e-14 * scale


def _gram_matrix(q):
    """8×8 covariance q·C whose row 0 meets correlations 1, 0, 0.5, −0.5, 0.999 (columns 1..5)."""
    e = np.eye(8)
    v = [e[0], e[0], e[1], 0.5 * e[0] + math.sqrt(0.75) * e[1], -0.5 * e[0] - math.sqrt(0.75) * e[1],
         0.999 * e[0] + math.sqrt(1 - 0.999 ** 2) * e[2], e[3], (e[4] + e[5]) / _SQ2]
    V = np.array(v)
    C = V @ V.T
    np.fill_diagonal(C, 1.0)
    C[0, 1] = C[1, 0] = 1.0
    return q * C, {1: 1.0, 2: 0.0, 3: 0.5, 4: -0.5, 5: 0.999}


# ------------------------------------------------------------------ scalar path
_DEFAULT_SCALAR = ([(a, k, q, c) for a in ACTS for k in (0, 1) for q in (1e-6, 1.0, 1e4, 1e8) for c in (0.0, 1.0)]
                   + [("tanh", 1, 1e4, 0.5), ("tanh", 0, 1e8, 0.999), ("sigmoid", 0, 1e8, 0.999),
                      ("sigmoid", 1, 1e4, 0.5), ("gelu", 1, 1e8, 0.5), ("gelu", 0, 1e4, 0.999)])
_SLOW_SCALAR = [(a, k, q, c) for a in ACTS for k in (0, 1) for q in QS for c in CS
                if (a, k, q, c) not in set(_DEFAULT_SCALAR)]


@pytest.mark.parametrize("name,kind,q,c", _DEFAULT_SCALAR)
def test_scalar_kernel_vs_mpmath(name, kind, q, c):
    ref, scale = _reference_used(name, kind, q, c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # no accuracy warning for registered activations
        val = _engine(name, kind, q, c)
    assert _ok(val, ref, scale), (val, ref, (val - ref) / (ref or 1.0))


@pytest.mark.exhaustive
@pytest.mark.parametrize("name,kind,q,c", _SLOW_SCALAR)
def test_scalar_kernel_vs_mpmath_dense(name, kind, q, c):
    ref, scale = _reference_used(name, kind, q, c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        val = _engine(name, kind, q, c)
    assert _ok(val, ref, scale), (val, ref, (val - ref) / (ref or 1.0))


def test_expect2_quadrature_path_vs_mpmath():
    """closed_form=False / explicit derivative names: the quadrature route itself (gelu has a closed
    form since issue 14; its quadrature must still be right)."""
    for name, kind, q, c in (("tanh", 1, 1e4, 0.5), ("gelu", 1, 1e8, 0.5), ("gelu", 0, 1e4, 0.999)):
        ref, scale = reference(name, kind, q, c)
        f = name if kind == 0 else f"{name}'"
        val = float(G.expect2(f, f, q, c * q, q, closed_form=False))
        assert _ok(val, ref, scale), (name, kind, q, c, val, ref)


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu", "erf", "relu"])
def test_expect_1d_vs_mpmath(name):
    for q in (1e-6, 1.0, 1e2, 1e4, 1e8):
        for kind in (0, 1):
            f = _fp_funs(name)[kind]
            s = math.sqrt(q)
            ref = mpmath.fp.quad(lambda x: math.exp(-x * x / 2) / _SQ2PI * f(s * x), _points(0.0, 1 / s))
            m2 = mpmath.fp.quad(lambda x: math.exp(-x * x / 2) / _SQ2PI * f(s * x) ** 2, _points(0.0, 1 / s))
            val = float(G.expect(name if kind == 0 else f"{name}'", q))
            assert _ok(val, ref, math.sqrt(m2)), (name, kind, q, val, ref)


def test_issue_examples():
    assert G.dkernel("tanh", 1e4, 1e4, 1e4) == pytest.approx(0.0053191446440146, rel=1e-10)
    assert G.dkernel("gelu", 1e5, 1e5, 1e5) == pytest.approx(0.500177933370019, rel=1e-10)
    ref, _ = reference("tanh", 1, 1e4, 1.0)
    assert G.dkernel("tanh", 1e4, 1e4, 1e4) == pytest.approx(ref, rel=1e-10)


_ASYM = (("tanh", 1, 1e6, 1.0, 0.5), ("sigmoid", 0, 1e-2, 1e6, 0.9), ("tanh", 0, 1e8, 1e2, -0.7))


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.exhaustive) if i else c for i, c in enumerate(_ASYM)])
def test_asymmetric_variances_vs_mpmath(case):
    for name, kind, q1, q2, c in (case,):
        ref, scale = _reference_used(name, kind, q1, c, q2)
        val = _engine(name, kind, q1, c, q2)
        assert _ok(val, ref, scale), (name, kind, q1, q2, c, val, ref)


# ------------------------------------------------------------------ Gram path (Mehler, P = 8)
@pytest.mark.parametrize("name,kind,q", [("tanh", 1, 1e4), ("sigmoid", 1, 1e4), ("tanh", 0, 1.0),
                                         ("sigmoid", 0, 1e8), ("gelu", 1, 1e8)])
def test_gram_vs_mpmath(name, kind, q):
    """Entries with c ∈ {1, 0, one of 0.5/0.999} and the diagonal (the others are in the slow grid)."""
    K, cols = _gram_matrix(q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        E = (G.gram if kind == 0 else G.dgram)(name, K)
    nested = {c for (a, k, qq, c) in _DEFAULT_SCALAR if (a, k, qq) == (name, kind, q) and c not in (0.0, 1.0)}
    for j, c in cols.items():
        if c in (0.0, 1.0) or c in nested:
            ref, scale = reference(name, kind, q, c)
            assert _ok(E[0, j], ref, scale), (name, kind, q, c, E[0, j], ref)
    ref, scale = reference(name, kind, q, 1.0)
    assert _ok(E[0, 0], ref, scale)


@pytest.mark.exhaustive
@pytest.mark.parametrize("name,kind,q", [(a, k, q) for a in ACTS for k in (0, 1) for q in QS])
def test_gram_vs_mpmath_dense(name, kind, q):
    K, cols = _gram_matrix(q)
    E = (G.gram if kind == 0 else G.dgram)(name, K)
    for j, c in cols.items():
        ref, scale = reference(name, kind, q, c)
        assert _ok(E[0, j], ref, scale), (name, kind, q, c, E[0, j], ref)


@pytest.mark.exhaustive
def test_fp_reference_agrees_with_20_digit_mpmath():
    mpmath.mp.dps = 20
    for name, kind, q, c in (("tanh", 1, 1e8, 0.5), ("sigmoid", 0, 1e4, 0.999), ("gelu", 1, 1e2, -0.5)):
        a, _ = reference(name, kind, q, c, "fp")
        b, _ = reference(name, kind, q, c, "mp")
        assert abs(a - b) <= 1e-13 * abs(b)


# ------------------------------------------------------------------ overflow
def test_homogeneous_closed_forms_scale_free():
    big = 1e300
    assert G.kernel("relu", big, 0.0, big) == pytest.approx(big / (2 * math.pi), rel=1e-14)
    assert G.expect2("relu", "relu", big, 0.5 * big, big) == pytest.approx(
        big * float(G.kernel("relu", 1.0, 0.5, 1.0)), rel=1e-14)
    assert G.kernel("linear", big, -big, big) == pytest.approx(-big, rel=1e-15)
    assert G.dkernel("relu", big, big, big) == 0.5
    assert G.kernel("erf", big, 0.5 * big, big) == pytest.approx(1 / 3, rel=1e-14)
    assert G.kernel("tanh", big, 0.5 * big, big) == pytest.approx(1 / 3, rel=1e-12)
    K = np.array([[big, 0.2 * big], [0.2 * big, big]])
    np.testing.assert_allclose(G.gram("relu", K), big * G.gram("relu", K / big), rtol=1e-14)
    from limits.kernels.expectations import dgram as kdgram, gram as kgram
    np.testing.assert_allclose(kgram(G.activation("relu"), K), big * G.gram("relu", K / big), rtol=1e-14)
    np.testing.assert_allclose(kdgram(G.activation("relu"), K), G.dgram("relu", K / big), rtol=1e-14)


def test_overflow_is_an_error_not_inf():
    with pytest.raises(ValueError, match="overflow"):
        G.kernel("gelu", 1e300, 0.0, 1e300)
    with pytest.raises(ValueError, match="overflow"):
        G.expect(np.exp, 1e6)
    with pytest.raises(ValueError, match="overflow"):
        G.expect2(np.exp, np.exp, 1e6, 0.0, 1e6, n=39)


def test_cli_expect_relu_huge_variance(capsys):
    from limits.cli import main

    assert main(["expect", "relu", "--k11", "1e300", "--k22", "1e300", "--k12", "0"]) == 0
    out = capsys.readouterr().out
    assert "1.59154943" in out and "inf" not in out


def test_user_function_at_huge_variance_warns():
    with pytest.warns(G.AccuracyWarning):
        G.expect(lambda x: np.sin(x) ** 2, 1e8)


# ------------------------------------------------------------------ table (python tests/test_reliability_numerics.py)
def error_table(acts=ACTS, qs=QS, cs=CS):
    """{(path, activation, q): max over both kernels and c ∈ cs of |value − ref| / max(|ref|, 1e-4 √(E f² E g²))}
    for path "scalar" (kernel/dkernel) and "gram" (gram/dgram on :func:`_gram_matrix`)."""
    col = {1.0: 1, 0.0: 2, 0.5: 3, -0.5: 4, 0.999: 5}
    rows = {}
    for a in acts:
        for q in qs:
            worst = {"scalar": 0.0, "gram": 0.0}
            for kind in (0, 1):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        E = (G.gram if kind == 0 else G.dgram)(a, _gram_matrix(q)[0])
                    except Exception:               # noqa: BLE001 — report, do not stop the table
                        E = np.full((8, 8), np.nan)
                for c in cs:
                    ref, scale = _reference_used(a, kind, q, c)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            val = _engine(a, kind, q, c)
                        except Exception:           # noqa: BLE001
                            val = float("nan")
                    for path, v in (("scalar", val), ("gram", float(E[0, col[c]]))):
                        err = abs(v - ref) / max(abs(ref), 1e-4 * scale) if np.isfinite(v) else float("inf")
                        worst[path] = max(worst[path], err)
            for path in worst:
                rows[(path, a, q)] = worst[path]
    return rows


if __name__ == "__main__":
    import limits

    print(f"limits from {limits.__file__}")
    rows = error_table()
    for path, title in (("scalar", "scalar path (kernel/dkernel)"), ("gram", "Gram path (gram/dgram, P = 8)")):
        print(f"\n{title}\n| activation | " + " | ".join(f"q={q:g}" for q in QS) + " |")
        print("|---|" + "---|" * len(QS))
        for a in ACTS:
            print(f"| {a} | " + " | ".join(f"{rows[(path, a, q)]:.1e}" for q in QS) + " |")


# ------------------------------------------------------------------ kernel recursions (items 1, 2, 4)
def test_ntk_overflow_does_not_corrupt_nngp():
    from limits.kernels import KernelWarning, nngp

    X = np.random.default_rng(2).standard_normal((2, 10))
    ref = nngp(X, depth=520, activation="erf", sigma_w2=4.0)
    assert ref.diagnostics["ntk_exploded_at"] == -1 and np.all(np.isfinite(ref.Theta_out))
    with pytest.warns(KernelWarning, match="NTK exploded"):
        r = nngp(X, depth=600, activation="erf", sigma_w2=4.0)
    d = r.diagnostics
    assert d["exploded_at"] == -1 and d["status"] == {"nngp": "ok", "ntk": "exploded"}
    assert 520 < d["ntk_exploded_at"] <= 600
    np.testing.assert_allclose(r.K[-1], ref.K[-1], rtol=1e-12, atol=1e-30)   # the q* fixed point
    assert r.K_out[0, 0] == pytest.approx(2.511498, abs=1e-6) and np.all(np.isfinite(r.K))
    assert np.all(np.isinf(r.Theta_out)) and np.all(np.isinf(r.Theta[d["ntk_exploded_at"]:]))
    assert np.all(np.isfinite(r.Theta[: d["ntk_exploded_at"]]))
    # log scale: Θ = exp(s) Θ̃ representable, and equal to the plain NTK where that is finite
    lg = nngp(X, depth=600, activation="erf", sigma_w2=4.0, ntk_scale="log")
    assert lg.diagnostics["status"]["ntk"] == "rescaled" and lg.diagnostics["warnings"] == []
    T, s = lg.theta(log=True)
    assert np.all(np.isfinite(T)) and s > math.log(1e100)
    l0 = 520
    np.testing.assert_allclose(lg.Theta[l0] * np.exp(lg.Theta_log_scale[l0]), r.Theta[l0], rtol=1e-10)
    np.testing.assert_allclose(lg.theta(l0), r.theta(l0), rtol=1e-10)
    # growth rate of the log scale = log χ₁ per layer (chaotic phase: χ₁ > 1)
    slope = (lg.Theta_log_scale[600] + math.log(lg.Theta[600][0, 0])
             - lg.Theta_log_scale[560] - math.log(lg.Theta[560][0, 0])) / 40
    q = lg.K[-1][0, 0]
    chi1 = 4.0 * float(G.dkernel("erf", q, q, q))
    assert slope == pytest.approx(math.log(chi1), rel=1e-8)


def test_ntk_overflow_keep_last_and_default_params():
    from limits.kernels import nngp

    X = np.random.default_rng(0).standard_normal((3, 10))
    with pytest.warns(Warning, match="NTK exploded"):
        a = nngp(X, depth=14000, keep="last")
    assert a.diagnostics["exploded_at"] == -1 and a.diagnostics["ntk_exploded_at"] > 0
    assert np.all(np.isfinite(a.K)) and np.all(np.isfinite(a.K_out))


@pytest.mark.exhaustive
def test_ntk_default_params_log_scale():
    from limits.kernels import nngp

    X = np.random.default_rng(0).standard_normal((3, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = nngp(X, depth=14000, keep="last")
    b = nngp(X, depth=14000, keep="last", ntk_scale="log")
    np.testing.assert_array_equal(a.K, b.K)
    assert np.all(np.isfinite(b.Theta_out)) and b.Theta_out_log_scale > 0


def test_memory_is_checked_before_allocating():
    from limits.kernels import nngp, response

    X = np.random.default_rng(0).standard_normal((50, 4))
    with pytest.raises(ValueError, match='keep="last"'):
        nngp(X, depth=10 ** 6)
    with pytest.raises(ValueError, match="max_memory"):
        nngp(X, depth=10, max_memory=1000)
    with pytest.raises(ValueError, match="GiB"):
        response(X, depth=10 ** 6, width=10)
    r = nngp(X[:3], depth=10 ** 4, keep="last", ntk=False)
    assert r.K.shape == (2, 3, 3) and np.all(np.isfinite(r.K))


@pytest.mark.exhaustive
def test_depth_million_keep_last_works():
    from limits.kernels import nngp

    X = np.random.default_rng(0).standard_normal((3, 10))
    r = nngp(X, depth=10 ** 6, keep="last", ntk_scale="log")
    assert np.all(np.isfinite(r.K)) and np.all(np.isfinite(r.Theta_out))


def test_cli_nngp_says_which_kernel_overflowed(capsys):
    from limits.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["nngp", "--activation", "erf", "--sigma-w2", "4", "--depth", "600", "--random", "2", "10"]) == 0
    out = capsys.readouterr().out
    assert "NTK OVERFLOWED at layer" in out and "2.511498" in out
    assert "NNGP kernel OVERFLOWED" not in out


def test_cli_nngp_refuses_huge_depth(capsys):
    from limits.cli import main

    try:
        rc = main(["nngp", "--depth", "1000000000"])
    except ValueError as exc:             # the CLI error boundary may re-raise or print
        assert "keep" in str(exc)
        return
    assert rc != 0
    assert "keep" in capsys.readouterr().err


def test_raw_pixel_scale_inputs_tanh_ntk():
    """Issue example: inputs at raw-pixel scale (variance 1e4) — Θ_out against mpmath, no warning."""
    from limits.kernels import nngp

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = nngp(np.full((1, 10), 100.0), depth=1, activation="tanh")
    q = 1e4
    K1 = reference("tanh", 0, q, 1.0)[0]                         # E[tanh(u)²], u ~ N(0, 1e4)
    G1 = reference("tanh", 1, q, 1.0)[0]
    K2 = reference("tanh", 0, K1, 1.0)[0]
    G2 = reference("tanh", 1, K1, 1.0)[0]
    theta1 = K1 + G1 * q
    assert r.K[1][0, 0] == pytest.approx(K1, rel=1e-10)
    assert r.Theta_out[0, 0] == pytest.approx(K2 + G2 * theta1, rel=1e-10)
    assert r.Theta_out[0, 0] == pytest.approx(25.633, abs=1e-3)


def test_response_chi_overflow_keeps_kernel():
    from limits.kernels import KernelWarning, response

    X = np.random.default_rng(1).standard_normal((2, 10))
    # χ⁰ = N/d_in = 1e14, χ^l = 2^l χ⁰ passes 1e100 at l = 286 (K^l = 2^l K⁰ stays below it); widths are
    # capped at 2**53 (exact integers), so depth, not an astronomic N, drives the overflow
    kw = dict(depth=290, activation="linear", sigma_w2=2.0, width=10 ** 15)
    ref = response(X, **{**kw, "width": 10})
    for keep in ("all", "last"):
        with pytest.warns(KernelWarning, match="response χ exploded"):
            s = response(X, keep=keep, **kw)
        d = s.diagnostics
        assert d["exploded_at"] == -1 and d["chi_exploded_at"] == 286
        assert d["status"] == {"kernel": "ok", "response": "exploded"}
        np.testing.assert_array_equal(s.K[-1], ref.K[-1])
        np.testing.assert_array_equal(s.K_out, ref.K_out)
        assert np.all(np.isinf(s.chi_out)) and np.all(np.isinf(s.chi[-1]))
        if keep == "all":
            assert np.all(np.isfinite(s.chi[:286])) and np.all(np.isinf(s.chi[286:]))


def test_kernel_layer_gram_overflow_is_an_error():
    from limits.activations import activation
    from limits.kernels.expectations import gram as kgram, pair_kernel

    K = np.array([[1e300, 0.0], [0.0, 1e300]])
    with pytest.raises(ValueError, match="overflow"):
        kgram(activation("gelu"), K)
    with pytest.raises(ValueError, match="overflow"):
        pair_kernel(activation("gelu"), 1e300, 0.0, 1e300)
    assert np.all(np.isfinite(kgram(activation("relu"), K)))


def test_log_scale_ntk_save_load_roundtrip(tmp_path):
    from limits.kernels import NNGPResult, nngp
    from limits.results import results_equal

    X = np.random.default_rng(2).standard_normal((2, 10))
    r = nngp(X, depth=600, activation="erf", sigma_w2=4.0, ntk_scale="log", keep="last")
    r.save(tmp_path / "r")
    s = NNGPResult.load(tmp_path / "r")
    assert results_equal(r, s) and s.Theta_out_log_scale == r.Theta_out_log_scale > 0
    with pytest.raises(ValueError, match="ntk_scale"):
        nngp(X, depth=2, ntk_scale="exp")
