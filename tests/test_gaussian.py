"""Activation registry and Gaussian expectation engine (docs/theory/kernels.rst §1)."""
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import limits
from limits import gaussian as G
from limits.gaussian import grams
from limits.activations import registered

MPF = {
    "tanh": mp.tanh,
    "sigmoid": lambda x: 1 / (1 + mp.exp(-x)),
    "gelu": lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2,
    "erf": mp.erf,
}


def mp_expect2(name, k11, k12, k22, dps=30):
    """Reference by mpmath tanh-sinh quadrature at high precision on the Cholesky substitution."""
    phi = MPF[name]
    with mp.workdps(dps):
        k11, k12, k22 = mp.mpf(k11), mp.mpf(k12), mp.mpf(k22)
        a = k12 / mp.sqrt(k11)
        b = mp.sqrt(k22 - k12**2 / k11)
        f = lambda z1, z2: (phi(mp.sqrt(k11) * z1) * phi(a * z1 + b * z2)
                            * mp.exp(-(z1**2 + z2**2) / 2) / (2 * mp.pi))
        cut = [-mp.inf, -3, 0, 3, mp.inf]
        return float(mp.quad(f, cut, cut))


def mp_expect1(name, q, dps=30):
    phi = MPF[name]
    with mp.workdps(dps):
        q = mp.mpf(q)
        f = lambda z: phi(mp.sqrt(q) * z) * mp.exp(-z**2 / 2) / mp.sqrt(2 * mp.pi)
        return float(mp.quad(f, [-mp.inf, -3, 0, 3, mp.inf]))


# ------------------------------------------------------------ registry
def test_registry_names_and_derivatives():
    for name in ("linear", "relu", "erf", "tanh", "gelu", "sigmoid"):
        a = limits.activation(name)
        assert a.name == name
    x = np.linspace(-3, 3, 41)
    h = 1e-5
    for name in ("erf", "tanh", "gelu", "sigmoid", "linear"):
        a = limits.activation(name)
        np.testing.assert_allclose(a.dphi(x), (a.phi(x + h) - a.phi(x - h)) / (2 * h), atol=1e-9)
        np.testing.assert_allclose(a.d2phi(x), (a.dphi(x + h) - a.dphi(x - h)) / (2 * h), atol=1e-9)
    r = limits.activation("relu")
    np.testing.assert_array_equal(r.dphi(np.array([-1.0, 0.0, 2.0])), [0, 0, 1])


def test_unknown_activation_and_user_callable():
    with pytest.raises(ValueError, match="unknown activation"):
        limits.activation("swishy")
    with pytest.raises(ValueError):
        limits.activation(3.0)
    a = limits.activation(np.sin, dphi=np.cos, d2phi=lambda x: -np.sin(x), name="sin")
    # E[sin(u) sin(v)] = e^{-(k11+k22)/2} sinh(k12)
    k11, k12, k22 = 0.7, 0.3, 1.1
    ref = math.exp(-(k11 + k22) / 2) * math.sinh(k12)
    assert abs(G.expect2(a, a, k11, k12, k22) - ref) < 1e-12
    b = limits.activation(np.sin, name="sin_fd")           # numerical derivatives
    assert not b.exact_derivatives
    np.testing.assert_allclose(b.dphi(np.linspace(-2, 2, 9)), np.cos(np.linspace(-2, 2, 9)), atol=1e-7)


# ------------------------------------------------------------ closed-form reference values
def test_reference_values_from_spec():
    np.testing.assert_allclose(G.expect2("relu", "relu", 1, [0.0, 0.5, 1.0], 1),
                               [0.1591549, 0.3044989, 0.5], atol=5e-8)
    assert abs(G.expect2("erf", "erf", 1, 0.5, 1) - 0.2163469) < 5e-8
    assert abs(G.expect2("erf'", "erf'", 1, 0.5, 1) - 0.4501582) < 5e-8
    assert G.expect2("linear", "linear", 2.0, 0.3, 1.0) == pytest.approx(0.3, abs=1e-15)


COVS = [(1.0, 0.5, 1.0), (0.3, -0.2, 2.0), (2.5, 2.4, 2.5), (4.0, 1.0, 9.0), (0.05, 0.01, 0.2),
        (1.0, 0.999999, 1.0), (6.0, -5.9, 6.0)]


@pytest.mark.parametrize("name", ["erf", "relu"])
def test_closed_forms_vs_quadrature(name):
    for k11, k12, k22 in COVS:
        closed = G.expect2(name, name, k11, k12, k22)
        quad = G.expect2(name, name, k11, k12, k22, closed_form=False,
                         n=None if name == "erf" else 1217)
        tol = 1e-10 if name == "erf" else 1e-4   # relu: kink => algebraic convergence (documented)
        assert abs(closed - quad) <= tol, (k11, k12, k22, closed, quad)
    for k11, k12, k22 in COVS:
        closed = G.dkernel("erf", k11, k12, k22)
        quad = G.expect2("erf'", "erf'", k11, k12, k22, closed_form=False)
        assert abs(closed - quad) <= 1e-10


def test_relu_closed_form_near_c_equal_one():
    """atan2 formulation keeps relu kernels accurate as |c| -> 1 (arccos loses half the digits)."""
    with mp.workdps(40):
        for eps in (1e-4, 1e-8, 1e-12):
            c = 1 - eps
            k12 = c
            theta = mp.acos(mp.mpf(c))
            ref = float((mp.sin(theta) + (mp.pi - theta) * mp.cos(theta)) / (2 * mp.pi))
            dref = float((mp.pi - theta) / (2 * mp.pi))
            assert abs(G.expect2("relu", "relu", 1.0, k12, 1.0) - ref) < 1e-15
            assert abs(G.dkernel("relu", 1.0, k12, 1.0) - dref) < 1e-15


# mpmath references (tanh-sinh, 20 significant digits, on [-12, 12]² split at 0) computed with
# mp_expect2 above; the slow test below recomputes one of them live.
MP_REFS = {
    "tanh": {(1.0, 0.5, 1.0): 0.18632441320344809, (3.0, 2.5, 4.0): 0.40092158520969835,
             (10.0, -5.0, 12.0): -0.27950765177787531},
    "sigmoid": {(1.0, 0.5, 1.0): 0.27142832563170528, (3.0, 2.5, 4.0): 0.31412243045082684,
                (10.0, -5.0, 12.0): 0.19209429145380936},
    "gelu": {(1.0, 0.5, 1.0): 0.22729491502199154, (3.0, 2.5, 4.0): 1.2285368660824838},
}


@pytest.mark.parametrize("name", sorted(MP_REFS))
def test_quadrature_vs_mpmath(name):
    for (k11, k12, k22), ref in MP_REFS[name].items():
        val = G.expect2(name, name, k11, k12, k22, closed_form=False)
        assert abs(val - ref) <= 1e-12, (name, k11, k12, k22, val - ref)


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu", "erf"])
def test_quadrature_1d_vs_mpmath_live(name):
    for q in (0.01, 1.0, 7.0):
        assert abs(G.expect(name, q) - mp_expect1(name, q)) <= 1e-12


@pytest.mark.slow
def test_mpmath_reference_recomputed_live():
    """The stored references are what mpmath gives (guards against a typo in MP_REFS)."""
    cov = (1.0, 0.5, 1.0)
    with mp.workdps(20):
        k11, k12, k22 = map(mp.mpf, cov)
        a, b = k12 / mp.sqrt(k11), mp.sqrt(k22 - k12**2 / k11)
        f = lambda z1, z2: (mp.tanh(mp.sqrt(k11) * z1) * mp.tanh(a * z1 + b * z2)
                            * mp.exp(-(z1**2 + z2**2) / 2) / (2 * mp.pi))
        ref = float(mp.quad(f, [-12, 0, 12], [-12, 0, 12]))
    assert abs(ref - MP_REFS["tanh"][cov]) < 1e-15


def test_degenerate_covariances_exact():
    # k11 = 0: u = 0
    assert G.expect2("sigmoid", "tanh", 0.0, 0.0, 2.0) == pytest.approx(0.5 * G.expect("tanh", 2.0), abs=1e-15)
    assert G.expect2("tanh", "gelu", 1.5, 0.0, 0.0) == pytest.approx(G.expect("tanh", 1.5) * 0.0, abs=1e-15)
    # |c| = 1: v = u (and v = -u)
    assert abs(G.expect2("tanh", "tanh", 2.0, 2.0, 2.0) - G.expect(lambda x: np.tanh(x) ** 2, 2.0)) < 1e-14
    assert abs(G.expect2("tanh", "tanh", 2.0, -2.0, 2.0) + G.expect(lambda x: np.tanh(x) ** 2, 2.0)) < 1e-14
    # (different node counts on the two sides: agreement at the quadrature's ~1e-13 level)
    assert abs(G.expect2("tanh", "tanh", 1.0, 2.0, 4.0)
               - G.expect(lambda x: np.tanh(x) * np.tanh(2 * x), 1.0)) < 1e-12
    assert G.expect("tanh", 0.0) == 0.0
    assert G.expect2("erf", "erf", 0.0, 0.0, 0.0) == 0.0


def test_vectorised_broadcasting_matches_scalar():
    rng = np.random.default_rng(0)
    k11 = rng.uniform(0.1, 3, size=(4, 5))
    k22 = rng.uniform(0.1, 3, size=(4, 5))
    c = rng.uniform(-1, 1, size=(4, 5))
    k12 = c * np.sqrt(k11 * k22)
    vec = G.expect2("tanh", "gelu", k11, k12, k22)
    assert vec.shape == (4, 5)
    for i in range(4):
        for j in range(5):
            assert vec[i, j] == pytest.approx(G.expect2("tanh", "gelu", k11[i, j], k12[i, j], k22[i, j]),
                                              abs=1e-15)
    assert G.expect2("tanh", "tanh", 1.0, np.array([0.1, 0.2]), 1.0).shape == (2,)


@pytest.mark.parametrize("arg,kw", [("k11", dict(k11=-1.0)), ("k22", dict(k22=-0.5)),
                                    ("k12", dict(k12=1.5)), ("k11", dict(k11=np.nan)),
                                    ("k12", dict(k12=np.inf))])
def test_bad_input_names_argument(arg, kw):
    args = dict(k11=1.0, k12=0.2, k22=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=arg):
        G.expect2("tanh", "tanh", **args)


def test_bad_input_1d_and_gram():
    with pytest.raises(ValueError, match="q"):
        G.expect("tanh", -1.0)
    with pytest.raises(ValueError, match="q"):
        G.expect("tanh", np.nan)
    with pytest.raises(ValueError, match="K"):
        G.gram("tanh", np.array([[1.0, 2.0], [2.0, 1.0]]))   # non-PSD
    with pytest.raises(ValueError, match="symmetric"):
        G.gram("tanh", np.array([[1.0, 0.2], [0.3, 1.0]]))
    with pytest.raises(ValueError, match="derivative order"):
        G.expect("tanh'''", 1.0)


def test_price_theorem_derivatives():
    h = 1e-4
    for name in ("tanh", "gelu", "erf", "sigmoid"):
        for q in (0.3, 1.7):
            fd = (G.expect(name, q + h) - G.expect(name, q - h)) / (2 * h)
            assert abs(G.dq_expect(name, q) - fd) < 1e-8
            sq = lambda x, a=limits.activation(name): a.phi(x) ** 2
            fd2 = (G.expect(sq, q + h) - G.expect(sq, q - h)) / (2 * h)
            assert abs(G.dq_expect_square(name, q) - fd2) < 1e-8
        # ∂/∂k12 E[φφ] = E[φ'φ']
        k11, k12, k22 = 1.2, 0.4, 0.8
        fd = (G.kernel(name, k11, k12 + h, k22) - G.kernel(name, k11, k12 - h, k22)) / (2 * h)
        assert abs(G.dkernel(name, k11, k12, k22) - fd) < 1e-8


def test_gram_matches_elementwise():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((5, 3))
    K = X @ X.T / 3
    for name in ("tanh", "erf", "relu"):
        M = G.gram(name, K)
        assert np.array_equal(M, M.T)
        for a in range(5):
            for b in range(5):
                assert M[a, b] == pytest.approx(G.kernel(name, K[a, a], K[a, b], K[b, b]), abs=1e-14)
        D = G.dgram(name, K)
        assert D[0, 1] == pytest.approx(G.dkernel(name, K[0, 0], K[0, 1], K[1, 1]), abs=1e-15)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=6, max_size=6), st.sampled_from(["tanh", "erf", "relu", "gelu"]))
def test_gram_is_symmetric_psd(entries, name):
    A = np.array(entries).reshape(3, 2)
    K = A @ A.T + 1e-3 * np.eye(3)
    M = G.gram(name, K)
    assert np.allclose(M, M.T)
    assert np.linalg.eigvalsh(M).min() > -1e-10


def test_cli_expect_and_activations(capsys):
    from limits.cli import main

    assert main(["expect", "erf", "--k11", "1", "--k12", "0.5", "--k22", "1", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert abs(out["value"] - 0.2163469) < 5e-8
    assert main(["activations"]) == 0
    assert "tanh" in capsys.readouterr().out
    assert main(["expect", "nope"]) == 2


def test_mehler_paths_agree_with_trapezoid():
    """The Mehler series (certified tail, used for shared-variance batches and Gram matrices)
    agrees with the tensor trapezoid; uncertified entries (|c| -> 1) fall back exactly."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 4))
    K = X @ X.T / 4
    K[1] = K[0]
    K[:, 1] = K[:, 0]          # two identical inputs: |c| = 1 off the diagonal
    d = np.diag(K)
    iu = np.triu_indices(40)
    for f, g in (("tanh", "tanh"), ("gelu", "sigmoid"), ("tanh'", "tanh'")):
        ref = G.expect2(f, g, d[iu[0]], K[iu], d[iu[1]], method="trapezoid")
        ser = G.expect2(f, g, d[iu[0]], K[iu], d[iu[1]], method="mehler")
        assert np.max(np.abs(ser - ref)) < 1e-10
        gr = grams._gram(f, g, K)
        assert np.max(np.abs(gr[iu] - ref)) < 1e-10
    with pytest.raises(ValueError, match="method"):
        G.expect2("tanh", "tanh", 1.0, 0.2, 1.0, method="simpson")


@pytest.mark.parametrize("act", ["tanh", "erf", "relu", "gelu", "sigmoid"])
def test_checked_covariances_skip_only_the_checks(act):
    """expect2(..., checked=True) (a recursion's own Gram entries) gives the validated call's values bit for
    bit — the projection onto the PSD cone is kept, including |k12| one ulp beyond √(k11 k22)."""
    from limits import gaussian

    rng = np.random.default_rng(5)
    q1, q2 = rng.uniform(0.2, 3.0, (70, 1)), rng.uniform(0.2, 3.0, (1, 30))
    k = rng.uniform(-1.0, 1.0, (70, 30)) * np.sqrt(q1 * q2)
    k[0, 0] = np.nextafter(np.sqrt(q1[0, 0] * q2[0, 0]), np.inf)         # beyond the bound by rounding
    for fn in (gaussian.kernel, gaussian.dkernel):
        a = fn(act, q1, k, q2)
        b = fn(act, q1, k, q2, checked=True)
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="non-PSD"):
        gaussian.kernel(act, q1, 2.0 * k, q2)                             # the public call still checks
