"""Forward pass, weights, empirical kernels: exact identities, chunking, reproducibility, bad input."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import limits.finite as F
from limits.stats import mean_se


def test_shapes_and_preactivation_names():
    net = F.resnet(6, 9, 3, d_out=2, activation="erf", block_layers=2, sigma_b2=0.1)
    X = np.random.default_rng(0).standard_normal((4, 6))
    fwd = F.forward(net, F.init_weights(net, 5, seed=1), X)
    assert fwd.f.shape == (5, 4, 2)
    assert len(fwd.h) == 4 and all(h.shape == (5, 4, 9) for h in fwd.h)
    assert set(fwd.preactivations()) == {"h0", "h1", "h2", "h3", "u1.1", "u2.1", "u3.1"}
    assert net.layer_names() == ["in", "1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "out"]


def test_forward_matches_handwritten_resnet():
    net = F.resnet(3, 5, 2, d_out=1, activation="tanh", rho=0.3, sigma_b2=0.2)
    X = np.random.default_rng(0).standard_normal((2, 3))
    w = F.init_weights(net, 1, seed=2)
    W = {k: v[0] for k, v in w.W.items()}
    b = {k: v[0] for k, v in w.b.items()}
    h = X @ W["in"].T + b["in"]
    for l in (1, 2):
        h = h + 0.3 * (np.tanh(h) @ W[f"{l}.1"].T + b[f"{l}.1"])
    f = np.tanh(h) @ W["out"].T + b["out"]
    np.testing.assert_allclose(F.forward(net, w, X).f[0], f, rtol=1e-13, atol=1e-15)


def test_post_activation_forward_handwritten():
    net = F.resnet(3, 5, 2, d_out=1, activation="relu", rho=0.5, post_activation=True)
    X = np.random.default_rng(0).standard_normal((2, 3))
    w = F.init_weights(net, 1, seed=2)
    W = {k: v[0] for k, v in w.W.items()}
    x = X @ W["in"].T
    for l in (1, 2):
        x = np.maximum(x + 0.5 * x @ W[f"{l}.1"].T, 0)
    np.testing.assert_allclose(F.forward(net, w, X).f[0], x @ W["out"].T, rtol=1e-13)


def test_init_is_chunk_invariant_and_reproducible():
    net = F.mlp(3, 4, 2, activation="erf", sigma_b2=0.1)
    w = F.init_weights(net, 6, seed=11)
    w2 = F.init_weights(net, 6, seed=11)
    streams = F.init_streams(6, seed=11)
    w3 = F.init_weights(net, streams=streams[2:5])
    for k in w.W:
        np.testing.assert_array_equal(w.W[k], w2.W[k])
        np.testing.assert_array_equal(w.W[k][2:5], w3.W[k])
    assert not np.array_equal(F.init_weights(net, 6, seed=12).W["in"], w.W["in"])


@pytest.mark.parametrize("method", ["conditional", "dense"])
def test_empirical_kernels_chunking_and_seed(method):
    net = F.resnet(4, 16, 3, activation="tanh", sigma_b2=0.1, rho=0.5, block_layers=2)
    X = np.random.default_rng(0).standard_normal((3, 4))
    a = F.empirical_kernels(net, X, 10, seed=5, method=method, chunk=10)
    b = F.empirical_kernels(net, X, 10, seed=5, method=method, chunk=3)
    c = F.empirical_kernels(net, X, 10, rng=np.random.default_rng(5), method=method, chunk=1)
    d = F.empirical_kernels(net, X, 10, seed=5, method=method, chunk=3, workers=2)
    np.testing.assert_array_equal(b.K, d.K)
    np.testing.assert_array_equal(b.mean, d.mean)
    np.testing.assert_allclose(a.K, b.K, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.K, c.K, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-14)
    m, se = mean_se(a.K)
    np.testing.assert_allclose(a.mean, m, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(a.se, se, rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(a.out_mean, a.K_out.mean(0), rtol=1e-10, atol=1e-14)
    assert a.K.shape == (10, 4, 3, 3) and a.K_out.shape == (10, 3, 3)


def test_dense_kernels_equal_forward_grams():
    # the dense sampler draws exactly the weights init_weights draws (same per-init streams)
    net = F.resnet(4, 12, 2, activation="erf", sigma_b2=0.1, rho=0.5)
    X = np.random.default_rng(0).standard_normal((3, 4))
    ek = F.empirical_kernels(net, X, 4, seed=9, method="dense", chunk=2, phi_kernels=True)
    root = F.weights.root_seed(seed=9)
    from limits.finite.weights import streams_from_root
    w = F.init_weights(net, streams=streams_from_root(root, range(4)))
    fwd = F.forward(net, w, X)
    np.testing.assert_allclose(ek.K, F.kernels_of(fwd), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ek.K_out, np.einsum("spo,sqo->spq", fwd.f, fwd.f), rtol=1e-12, atol=1e-14)
    phi = net.act().phi
    np.testing.assert_allclose(ek.K_phi[:, 1], np.einsum("spi,sqi->spq", phi(fwd.h[1]), phi(fwd.h[1])) / 12,
                               rtol=1e-12)


def test_conditional_and_dense_samplers_agree_in_distribution():
    # same law: mean and variance of the per-init Grams agree within Monte Carlo error
    net = F.resnet(3, 8, 2, activation="tanh", sigma_w2=1.5, sigma_b2=0.2, rho=0.7)
    X = np.random.default_rng(0).standard_normal((2, 3))
    a = F.empirical_kernels(net, X, 3000, seed=1, method="conditional")
    b = F.empirical_kernels(net, X, 3000, seed=2, method="dense")
    z = (a.mean - b.mean) / np.sqrt(a.se**2 + b.se**2)
    assert np.max(np.abs(z)) < 4.5
    va, vb = a.K.var(0, ddof=1), b.K.var(0, ddof=1)
    # SE of a variance ≈ var·sqrt(2/(n-1)) (roughly; heavier tails → use 5σ)
    zv = (va - vb) / np.sqrt(2 / 2999 * (va**2 + vb**2) * 2)
    assert np.max(np.abs(zv)) < 5


def test_conditional_handles_more_samples_than_width():
    net = F.mlp(3, 4, 2, activation="erf")
    X = np.random.default_rng(0).standard_normal((7, 3))   # P = 7 > N = 4: rank-deficient Grams
    ek = F.empirical_kernels(net, X, 5, seed=0, method="conditional")
    assert np.all(np.isfinite(ek.K)) and ek.method == "conditional"
    assert np.all(np.linalg.matrix_rank(ek.K[:, 2]) <= 4)


def test_auto_sampler_follows_the_cost_model():
    """method="auto" runs the cheaper sampler of the cost model (flops, normals, factorisations): conditional
    for P ≪ N, dense when the P×P Grams are rank-deficient (P > N) or P is comparable to N; the override
    stays; the choice is a function of the sizes, so a seed stays reproducible."""
    X = np.random.default_rng(0).standard_normal((8, 3))
    wide, narrow = F.mlp(3, 256, 2, activation="erf"), F.mlp(3, 4, 2, activation="erf")
    assert F.choose_method(wide, 8, 64) == "conditional" and F.choose_method(narrow, 8, 64) == "dense"
    c = F.sampler_costs(wide, 8, 64)
    assert c["conditional"] < 0.2 * c["dense"]
    # hidden layer N × N, P inputs: conditional draws P·N normals and does O(P²N) flops, dense N² and O(PN²)
    n = F.sampler_costs(F.mlp(3, 512, 1), 16, 1)["dense"] - F.sampler_costs(F.mlp(3, 512, 0), 16, 1)["dense"]
    assert abs(n - (14.0 * 512 * 512 + 0.03 * 2 * 16 * 512 * 512) * 1e-9) < 1e-12
    assert F.empirical_kernels(wide, X, 3, seed=0).method == "conditional"
    a = F.empirical_kernels(narrow, X, 3, seed=0)
    b = F.empirical_kernels(narrow, X, 3, seed=0, method="dense")
    assert a.method == "dense" and np.array_equal(a.K, b.K)
    assert F.empirical_kernels(narrow, X, 3, seed=0, method="conditional").method == "conditional"


def test_one_layer_kernel_mean_linear_exact_expectation():
    # linear read-in: E[h hᵀ/N] = σ² X Xᵀ/d + σ_b²; z-test over inits
    net = F.mlp(5, 50, 0, activation="linear", sigma_w2=1.7, sigma_b2=0.3)
    X = np.random.default_rng(0).standard_normal((3, 5))
    ek = F.empirical_kernels(net, X, 400, seed=0)
    theory = 1.7 * X @ X.T / 5 + 0.3
    z = (ek.mean[0] - theory) / ek.se[0]
    assert np.max(np.abs(z)) < 4.5


def test_keep_samples_false_gives_same_mean():
    net = F.resnet(3, 8, 2, activation="erf", rho=0.5)
    X = np.random.default_rng(0).standard_normal((2, 3))
    a = F.empirical_kernels(net, X, 20, seed=1, chunk=6)
    b = F.empirical_kernels(net, X, 20, seed=1, chunk=6, keep_samples=False)
    assert b.K is None
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12)
    np.testing.assert_allclose(a.se, b.se, rtol=1e-8)


def test_empirical_kernels_result_roundtrip(tmp_path):
    net = F.mlp(3, 6, 1, activation="erf")
    ek = F.empirical_kernels(net, np.eye(3), 4, seed=0)
    ek.save(tmp_path / "ek")
    assert F.EmpiricalKernels.load(tmp_path / "ek").equals(ek)


@settings(max_examples=15, deadline=None)
@given(P=st.integers(1, 5), seed=st.integers(0, 2**31 - 1),
       act=st.sampled_from(["erf", "relu", "tanh", "linear"]))
def test_kernels_symmetric_psd(P, seed, act):
    net = F.resnet(3, 6, 2, activation=act, rho=0.6, sigma_b2=0.1)
    X = np.random.default_rng(seed).standard_normal((P, 3))
    ek = F.empirical_kernels(net, X, 3, seed=seed)
    np.testing.assert_allclose(ek.K, ek.K.transpose(0, 1, 3, 2), atol=1e-12)
    lam = np.linalg.eigvalsh(ek.K)
    assert lam.min() >= -1e-10 * max(1.0, np.abs(lam).max())


# -- bad input ---------------------------------------------------------------------------------
def test_bad_inputs_raise_valueerror():
    net = F.mlp(3, 4, 1, activation="erf")
    w = F.init_weights(net, 2, seed=0)
    with pytest.raises(ValueError, match="X"):
        F.forward(net, w, np.ones((2, 5)))
    with pytest.raises(ValueError, match="X"):
        F.forward(net, w, np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        F.forward(net, w, np.array([[1.0, np.nan, 0.0]]))
    with pytest.raises(ValueError, match="width"):
        F.mlp(3, 0, 1)
    with pytest.raises(ValueError, match="width"):
        F.resnet(3, -2, 1)
    with pytest.raises(ValueError, match="blocks"):
        F.resnet(3, 4, -1)
    with pytest.raises(ValueError, match="activation"):
        F.mlp(3, 4, 1, activation="no-such-activation")
    with pytest.raises(ValueError, match="n_inits"):
        F.empirical_kernels(net, np.ones((2, 3)), 0, seed=0)
    with pytest.raises(ValueError, match="method"):
        F.empirical_kernels(net, np.ones((2, 3)), 2, seed=0, method="magic")
    with pytest.raises(ValueError, match="rng"):
        F.init_weights(net, 2)
    with pytest.raises(ValueError, match="std"):
        F.Dense(3, 4, std=-1.0)
    with pytest.raises(ValueError, match="fan_in"):
        F.Network(F.Dense(3, 4), (F.Block((F.Dense(5, 5),)),), F.Dense(5, 1))
    with pytest.raises(ValueError, match="decoupled"):
        F.init_weights(net, 1, seed=0, decoupled=["nope"])


def test_per_init_streams_are_uncorrelated():
    # neighbouring inits and neighbouring layers of one init must give independent normals
    st = F.init_streams(400, seed=3)
    Z = np.array([st.gen(k, 0).standard_normal(500) for k in range(400)])
    Zl = np.array([st.gen(k, 1).standard_normal(500) for k in range(400)])
    n = Z[:-1].size
    z_init = np.sum(Z[:-1] * Z[1:]) / np.sqrt(n)      # ~ N(0, 1) under independence
    z_layer = np.sum(Z * Zl) / np.sqrt(Z.size)
    z_far = np.sum(Z[:200] * Z[200:]) / np.sqrt(Z[:200].size)
    assert max(abs(z_init), abs(z_layer), abs(z_far)) < 4.5
    assert abs(Z.mean() * np.sqrt(Z.size)) < 4.5 and abs(Z.var() - 1) < 0.02
    # reproducible, and slicing selects the same streams
    np.testing.assert_array_equal(st[5:7].gen(1, 0).standard_normal(500), Z[6])


def test_exploding_network_is_flagged_not_silent():
    net = F.mlp(3, 8, 60, activation="relu", sigma_w2=1e6)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning, match="overflow"):
        ek = F.empirical_kernels(net, np.ones((2, 3)), 3, seed=0)
    assert ek.overflow
    assert not F.empirical_kernels(F.mlp(3, 8, 1), np.ones((2, 3)), 3, seed=0).overflow
