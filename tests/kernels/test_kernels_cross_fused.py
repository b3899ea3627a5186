"""The fused cross-kernel path (limits.kernels._fused.cross via limits.kernels.kernel(m, X1, X2)) against the
general per-layer path it replaces (cross.FUSED = False: limits.gaussian closed forms with validation) and
against the joint kernel of the union of the inputs; depth = 0 (the two-layer net) everywhere."""
import warnings

import numpy as np
import pytest

import limits
from limits.activations import BUILTIN
from limits.kernels import cross


def _inputs(P, d=6, seed=0):
    X = np.random.default_rng(seed).standard_normal((P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(d)


def _model(act, residual, depth, d=6):
    build = limits.resnet if residual else limits.mlp
    kw = {"rho": 0.8} if residual else {}
    sw2 = {"relu": 2.0, "erf": 1.5, "gelu": 2.0, "linear": 1.0}[act]
    return build(d, depth, activation=act, sigma_w2=sw2, sigma_b2=0.1, **kw)


def _general(m, X1, X2, **kw):
    old = cross.FUSED
    cross.FUSED = False
    try:
        return limits.kernels.kernel(m, X1, X2, **kw)
    finally:
        cross.FUSED = old


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("act", ["erf", "relu", "gelu", "linear"])
@pytest.mark.parametrize("residual", [False, True])
def test_fused_equals_general_path(act, residual):
    """Every layer and the read-out agree with the validated per-layer path to 1e-13 (relative to the block's
    largest entry); a row block smaller than a row and several row blocks are both exercised."""
    m = _model(act, residual, 9)
    X1, X2 = _inputs(37), _inputs(23, seed=1)
    old = cross._fused.CROSS_BLOCK
    for block in (5, 64, old):
        cross._fused.CROSS_BLOCK = block
        try:
            f = limits.kernels.kernel(m, X1, X2, layers=True)
        finally:
            cross._fused.CROSS_BLOCK = old
        g = _general(m, X1, X2, layers=True)
        for a, b in ((f.nngp, g.nngp), (f.ntk, g.ntk), (f.K, g.K), (f.Theta, g.Theta)):
            assert a.shape == b.shape
            assert _rel(a, b) <= 1e-13
        assert f.diagnostics["nngp_exploded_at"] == g.diagnostics["nngp_exploded_at"] == -1
        assert f.diagnostics["ntk_exploded_at"] == g.diagnostics["ntk_exploded_at"] == -1


@pytest.mark.parametrize("act", ["erf", "relu", "gelu"])
def test_cross_equals_joint_blocks_with_identical_inputs(act):
    """kernel(m, X1, X2) is the X1×X2 block of the joint kernel of X1 ∪ X2; inputs present in both sets give
    exactly their joint diagonal entries (K(x, x), Θ(x, x)) — residual erf at L = 20, where the off-diagonal
    closed form at correlation one loses ~1e-12 to the cancellation in 1 − s."""
    m = _model(act, True, 20)
    X1 = _inputs(30)
    X2 = np.vstack([_inputs(12, seed=1), X1[[3, 7, 7]]])          # one row twice
    f = limits.kernels.kernel(m, X1, X2, layers=True)
    U = np.vstack([X1, X2[:12]])                                   # the union without duplicates
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        j = limits.kernels.nngp(U, model=m, keep="all")
    cols = np.r_[30:42, 3, 7, 7]
    for got, full in [(f.nngp, j.K_out), (f.ntk, j.Theta_out)] + [(f.K[l], j.K[l]) for l in range(21)] + \
            [(f.Theta[l], j.Theta[l]) for l in range(21)]:
        ref = full[:30][:, cols]
        assert _rel(got, ref) <= 1e-13
    for c, r in ((12, 3), (13, 7), (14, 7)):
        assert abs(f.ntk[r, c] - j.Theta_out[r, r]) <= 1e-15 * j.Theta_out[r, r]
        assert f.nngp[r, c] == f.nngp[r, 13 if r == 7 else 12]


def test_get_variants_and_nngp_only():
    m = _model("relu", False, 4)
    X1, X2 = _inputs(11), _inputs(8, seed=2)
    both = limits.kernels.kernel(m, X1, X2)
    k = limits.kernels.kernel(m, X1, X2, get="nngp")
    t = limits.kernels.kernel(m, X1, X2, get=("ntk",))
    assert k.ntk is None and t.nngp is None
    np.testing.assert_array_equal(k.nngp, both.nngp)
    np.testing.assert_array_equal(t.ntk, both.ntk)


@pytest.mark.parametrize("sb2", [1e155, 1e98])
def test_large_variances_take_the_general_path(sb2):
    """Variances beyond the fused range (≥ 1e150) or growing past 1e100 (an overflow to report layer by layer)
    give exactly what the general path gives, diagnostics included."""
    m = limits.mlp(6, 3, activation="relu", sigma_w2=2.0, sigma_b2=sb2)
    X1, X2 = _inputs(5), _inputs(4, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = limits.kernels.kernel(m, X1, X2)
        g = _general(m, X1, X2)
    assert f.diagnostics["nngp_exploded_at"] == g.diagnostics["nngp_exploded_at"]
    assert f.diagnostics["ntk_exploded_at"] == g.diagnostics["ntk_exploded_at"]
    np.testing.assert_array_equal(f.nngp, g.nngp)
    np.testing.assert_array_equal(f.ntk, g.ntk)


def test_ntk_overflow_is_reported_as_before():
    """An NTK growing past 1e100 (chaotic erf, deep): the fused path steps aside, the layer of the overflow
    is the general path's."""
    m = limits.mlp(6, 600, activation="erf", sigma_w2=4.0, sigma_b2=0.0)
    X1 = _inputs(4)
    X2 = np.vstack([_inputs(3, seed=4), X1[:1]])     # an identical pair: its Θ grows like χ₁^L
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = limits.kernels.kernel(m, X1, X2)
        g = _general(m, X1, X2)
    assert f.diagnostics["ntk_exploded_at"] == g.diagnostics["ntk_exploded_at"] > 0
    assert f.diagnostics["nngp_exploded_at"] == -1
    np.testing.assert_array_equal(f.nngp, g.nngp)


@pytest.mark.parametrize("act", ["relu", "erf", "gelu", "tanh"])
def test_depth_zero_is_the_two_layer_formula(act):
    """depth = 0 (Model accepts it): K_out = σ²_w E[φφ](K⁰) + σ²_b and Θ_out = K_out + σ²_w E[φ'φ'](K⁰)∘K⁰
    (docs/theory/kernels.rst §2), from nngp, the cross kernel and the blocked kernel alike."""
    m = limits.mlp(6, 0, activation=act, sigma_w2=1.7, sigma_b2=0.2)
    X = _inputs(9)
    K0 = 1.7 * X @ X.T / 6 + 0.2
    q = np.diag(K0)
    a = BUILTIN[act]
    from limits import gaussian

    E = gaussian.kernel(a, q[:, None], K0, q[None, :])
    G = gaussian.dkernel(a, q[:, None], K0, q[None, :])
    K_out = 1.7 * E + 0.2
    T_out = K_out + 1.7 * G * K0
    for keep in ("all", "last", "checkpoint", "auto"):
        with warnings.catch_warnings():           # 9 inputs in 6 dimensions: K⁰ is singular (the spectrum warns)
            warnings.simplefilter("ignore", limits.kernels.KernelWarning)
            r = limits.kernels.nngp(X, model=m, keep=keep)
        assert r.depth == 0 and np.shape(r.K) == (1, 9, 9)
        assert _rel(r.K_out, K_out) <= 1e-13 and _rel(r.Theta_out, T_out) <= 1e-13
    c = limits.kernels.kernel(m, X[:4], X[4:], layers=True)
    assert c.K.shape == (1, 4, 5)
    assert _rel(c.nngp, K_out[:4, 4:]) <= 1e-13 and _rel(c.ntk, T_out[:4, 4:]) <= 1e-13
    s = limits.kernels.kernel(m, X)
    assert _rel(s.ntk, T_out) <= 1e-13
    if act != "tanh":
        b = limits.kernels.kernel_blocked(m, X, block=4, progress=False)
        assert _rel(b.ntk, T_out) <= 1e-13


def test_depth_zero_keyword_api():
    r = limits.kernels.nngp(_inputs(5), depth=0, activation="erf", depth_scaling="sqrt")
    assert r.depth == 0
    with pytest.raises(ValueError, match="depth"):
        limits.kernels.nngp(_inputs(5), depth=-1, activation="erf")


CASES = [dict(activation="erf", sigma_w2=1.5, sigma_b2=0.1, depth=7),
         dict(activation="relu", sigma_w2=2.0, sigma_b2=0.1, depth=9, residual=True),
         dict(activation="gelu", sigma_w2=1e-30, sigma_b2=0.0, depth=8),             # leaves the packed path
         dict(activation="erf", sigma_w2=8.0, sigma_b2=0.3, depth=200, ntk_scale="log"),   # Θ̃ rescaled
         dict(activation="erf", sigma_w2=8.0, sigma_b2=0.3, depth=200),              # NTK overflow (+inf)
         dict(activation="relu", sigma_w2=2.0, sigma_b2=0.3, depth=200, residual=True),   # NNGP explodes
         dict(activation="linear", sigma_w2=1.0, sigma_b2=0.2, depth=3, ntk=False)]


@pytest.mark.parametrize("kw", CASES)
def test_packed_layers_are_bit_identical_to_keep_all(kw):
    """keep="auto" on the closed forms keeps the layers packed and unpacks them when read: every layer of K,
    C, Θ (log scales, explosions, a switch to the general path mid-recursion included), the read-outs and
    the diagnostics equal keep="all" exactly."""
    X = np.random.default_rng(1).standard_normal((19, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = limits.kernels.nngp(X, keep="auto", on_explode="ignore", **kw)
        b = limits.kernels.nngp(X, keep="all", on_explode="ignore", **kw)
    assert "packed" in repr(a.K) and isinstance(b.K, np.ndarray)
    for f in ("K", "C", "Theta", "K_out", "Theta_out", "Theta_log_scale", "Theta_out_log_scale"):
        x, y = getattr(a, f), getattr(b, f)
        if y is None:
            assert x is None
            continue
        np.testing.assert_array_equal(np.asarray(x), y)
    assert a.layers == b.layers is None
    for k in ("exploded_at", "ntk_exploded_at", "ntk_overflow_at", "status", "max_abs_K"):
        assert a.diagnostics[k] == b.diagnostics[k], k


def test_packed_layers_read_like_arrays():
    X = np.random.default_rng(2).standard_normal((30, 4))
    a = limits.kernels.nngp(X, depth=5, activation="relu", sigma_w2=2.0, residual=True)
    b = limits.kernels.nngp(X, depth=5, activation="relu", sigma_w2=2.0, residual=True, keep="all")
    np.testing.assert_array_equal(a.K[3], b.K[3])
    np.testing.assert_array_equal(a.K[:, 2, 7], b.K[:, 2, 7])
    np.testing.assert_array_equal(a.C[-1], b.C[-1])
    np.testing.assert_array_equal(a.K + 1.0, b.K + 1.0)
    np.testing.assert_array_equal(2.0 * a.Theta, 2.0 * b.Theta)
    assert a.K.max() == b.K.max() and a.K.tolist() == b.K.tolist() and a.K.shape == b.K.shape
    assert not a.K[2].flags.writeable                   # the stored layers cannot be changed through a view
    np.testing.assert_array_equal(a.correlations(2), b.correlations(2))


def test_empty_input_set_is_an_error_naming_it():
    m = _model("relu", False, 2)
    with pytest.raises(ValueError, match="X2 must be a P×d_in array with P ≥ 1"):
        limits.kernels.kernel(m, _inputs(3), _inputs(3)[:0])
