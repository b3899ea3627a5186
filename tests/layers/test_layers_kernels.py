"""Kernel rules of limits.layers against independent formulas (no finite networks here)."""
import numpy as np
import pytest

import limits
from limits.model import ModelError

L = limits.layers


def _X(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def test_contract_example_shapes_and_structure():
    m = limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                      L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0))
    X = _X((4, 5, 5, 2))
    k = limits.kernels.kernel(m, X)
    assert k.nngp.shape == k.ntk.shape == (4, 4)
    assert np.allclose(k.nngp, k.nngp.T, rtol=0, atol=1e-15) and np.all(np.linalg.eigvalsh(k.ntk) > 0)
    assert k.diagnostics["input_representation"] == "full"
    # packed pairs: the 6 pairs x < y of one chunk, NNGP and NTK blocks of every pair of the 25 positions
    assert k.diagnostics["engine"] == "packed pairs" and k.diagnostics["pairs"] == 4 * 5 // 2
    assert k.diagnostics["peak_bytes"] >= 8 * 2 * 6 * 25 * 25
    # read out through Flatten: only equal positions are kept (the CNN-GP shortcut)
    f = limits.kernels.kernel(limits.serial(*m.layers[:2], L.Flatten(), L.Dense()), X)
    assert f.diagnostics["input_representation"] == "diagonal"
    assert f.diagnostics["peak_bytes"] < k.diagnostics["peak_bytes"] / 10


def test_linear_circular_conv_then_pooling_is_the_mean_input_kernel():
    """Linear CNN, circular padding, global pooling: shifts average out, K = σ²_d σ²_c ⟨x̄, ȳ⟩/C + σ²_b (exact)."""
    X = _X((5, 4, 6, 3), 1)
    for fs in ((3, 3), (2, 3)):
        m = limits.serial(L.Conv(fs, "CIRCULAR", sigma_w2=1.7, sigma_b2=0.0), L.GlobalAvgPool(), L.Dense(0.6, 0.3))
        k = limits.kernels.kernel(m, X)
        xbar = X.mean(axis=(1, 2))
        K = 0.6 * 1.7 * xbar @ xbar.T / 3 + 0.3
        assert np.max(np.abs(k.nngp - K)) < 1e-13
        # Θ: both weight layers contribute K minus bias, the bias once
        assert np.max(np.abs(k.ntk - (2 * (K - 0.3) + 0.3))) < 1e-13


def test_same_padding_conv_matches_explicit_linear_operator():
    """1-D SAME conv without nonlinearity: the output is an explicit linear map of x; its covariance
    σ²/(kC) Σ_f x_{i+f−o}·y_{j+f−o} (zero outside) read out through Flatten."""
    X = _X((3, 7, 2), 2)
    k, o = 4, 1
    m = limits.serial(L.Conv((k,), "SAME", sigma_w2=2.0), L.Flatten(), L.Dense())
    r = limits.kernels.kernel(m, X)
    T, C = X.shape[1:]
    Xp = np.zeros((3, T + k - 1, C))
    Xp[:, o:o + T] = X
    K = np.zeros((3, 3))
    for i in range(T):
        patch = Xp[:, i:i + k].reshape(3, -1)
        K += 2.0 * patch @ patch.T / (k * C)
    assert np.max(np.abs(r.nngp - K / T)) < 1e-13


def test_diagonal_and_full_representations_agree():
    from limits.layers.state import initial, spatial_diagonal

    X = _X((3, 4, 5, 2), 3)
    body = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("erf"), L.Conv((2, 3), "CIRCULAR", 1.5, 0.2),
                         L.LayerNorm(), L.Activation("relu"), L.Dense(1.3, 0.1))
    kf = body.kernel(initial(X, None, True, True), True)
    kd = body.kernel(initial(X, None, False, True), False)
    for a, b in ((kf.nngp, kd.nngp), (kf.ntk, kd.ntk)):
        assert np.max(np.abs(spatial_diagonal(a, True, 2) - b)) < 1e-14


def test_pooling_is_an_average_of_covariance_blocks():
    X = _X((3, 4, 4, 2), 4)
    head = [L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu")]
    gap = limits.kernels.kernel(limits.serial(*head, L.GlobalAvgPool(), L.Dense()), X)
    whole = limits.kernels.kernel(limits.serial(*head, L.AvgPool((4, 4)), L.Flatten(), L.Dense()), X)
    two = limits.kernels.kernel(limits.serial(*head, L.AvgPool((2, 2)), L.GlobalAvgPool(), L.Dense()), X)
    for r in (whole, two):
        assert np.max(np.abs(r.nngp - gap.nngp)) < 1e-14 and np.max(np.abs(r.ntk - gap.ntk)) < 1e-14
    # explicit block average of the full covariance after the nonlinearity
    from limits.layers.state import initial

    k = limits.serial(*head).kernel(initial(X, None, True, False), True)
    assert np.max(np.abs(gap.nngp - k.nngp.mean(axis=(2, 3, 4, 5)))) < 1e-14
    # strided, overlapping windows: K' = M K Mᵀ per axis
    r = limits.kernels.kernel(limits.serial(*head, L.AvgPool((3, 2), strides=(1, 2)), L.Flatten(), L.Dense()), X)
    M = lambda n, w, s: np.array([[1.0 / w if o * s <= i < o * s + w else 0 for i in range(n)]  # noqa: E731
                                  for o in range((n - w) // s + 1)])
    Mh, Mw = M(4, 3, 1), M(4, 2, 2)
    pooled = np.einsum("ai,bj,ck,dl,pqijkl->pqabcd", Mh, Mh, Mw, Mw, k.nngp)
    ref = np.einsum("pqaacc->pq", pooled) / (Mh.shape[0] * Mw.shape[0])
    assert np.max(np.abs(r.nngp - ref)) < 1e-14


@pytest.mark.parametrize("normalize_edges", [False, True])
def test_same_padding_pooling_is_the_explicit_padded_window_average(normalize_edges):
    """AvgPool "SAME" (neural-tangents / jax.lax geometry): ⌈n/s⌉ outputs, ⌊pad/2⌋ zeros before; the mean
    divides by the window (padded zeros count) or, with normalize_edges, by the positions inside it —
    K' = M K Mᵀ per axis with M built here from that description, independently of the layer's code."""
    X = _X((3, 5, 4, 2), 5)
    head = [L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu")]
    from limits.layers.state import initial

    k = limits.serial(*head).kernel(initial(X, None, True, False), True)

    def M(n, w, s):
        o = -(-n // s)
        lo = max((o - 1) * s + w - n, 0) // 2
        rows = []
        for a in range(o):
            inside = [i for i in range(a * s - lo, a * s - lo + w) if 0 <= i < n]
            rows.append([(1.0 / (len(inside) if normalize_edges else w)) if i in inside else 0.0 for i in range(n)])
        return np.array(rows)

    pool = L.AvgPool((3, 2), strides=(2, 1), padding="SAME", normalize_edges=normalize_edges)
    r = limits.kernels.kernel(limits.serial(*head, pool, L.Flatten(), L.Dense()), X)
    Mh, Mw = M(5, 3, 2), M(4, 2, 1)
    assert Mh.shape == (3, 5) and Mw.shape == (4, 4)
    assert pool.out_shape((5, 4, 7), 1) == (3, 4, 7)
    pooled = np.einsum("ai,bj,ck,dl,pqijkl->pqabcd", Mh, Mh, Mw, Mw, k.nngp)
    ref = np.einsum("pqaacc->pq", pooled) / (Mh.shape[0] * Mw.shape[0])
    assert np.max(np.abs(r.nngp - ref)) < 1e-14 * np.max(np.abs(ref))
    # the finite layer is the same map: apply = M x per axis, backward = Mᵀ g
    x = _X((1, 2, 5, 4, 3), 6)
    y, shape = pool.apply({}, x)
    assert np.allclose(y, np.einsum("ai,bk,spikc->spabc", Mh, Mw, x), rtol=0, atol=1e-14)
    g = _X(y.shape, 7)
    gx, _ = pool.backward({}, shape, g)
    assert np.allclose(gx, np.einsum("ai,bk,spabc->spikc", Mh, Mw, g), rtol=0, atol=1e-14)
    if normalize_edges:                                   # a constant input stays constant
        assert np.allclose(pool.apply({}, np.ones((1, 1, 5, 4, 1)))[0], 1.0, rtol=0, atol=1e-15)
    else:                                                 # … or loses the padded share at the edges
        assert pool.apply({}, np.ones((1, 1, 5, 4, 1)))[0].min() < 1.0


def test_layernorm_of_a_gaussian_is_the_cosine_kernel_and_matches_monte_carlo():
    X = _X((4, 6), 5)
    r = limits.kernels.kernel(limits.serial(L.Dense(1.7, 0.0), L.LayerNorm(eps=0.0), L.Dense()), X)
    n = np.linalg.norm(X, axis=1)
    assert np.max(np.abs(r.nngp - X @ X.T / np.outer(n, n))) < 1e-14
    # through a nonlinearity: E[φ(u/√q_u) φ(v/√q_v)] by Monte Carlo over Gaussian channels
    m = limits.serial(L.Dense(2.0, 0.5), L.LayerNorm(), L.Activation("tanh"), L.Dense())
    k = limits.kernels.kernel(m, X[:2]).nngp
    K0 = 2.0 * X[:2] @ X[:2].T / 6 + 0.5
    Z = np.random.default_rng(0).standard_normal((400_000, 2)) @ np.linalg.cholesky(K0).T
    Z /= np.sqrt(np.diag(K0))
    est = np.tanh(Z).T @ np.tanh(Z) / len(Z)
    assert np.max(np.abs(est - k)) < 4e-3


def test_attention_without_logit_scale_is_uniform_averaging():
    X = _X((3, 5, 4), 6)
    att = limits.kernels.kernel(limits.serial(L.Dense(1.2, 0.1), L.Attention(n_heads=3, qk_scale=0.0, sigma_w2=1.5),
                                              L.Flatten(), L.Dense()), X)
    gap = limits.kernels.kernel(limits.serial(L.Dense(1.2, 0.1), L.GlobalAvgPool(), L.Dense()), X)
    K = 1.5 * gap.nngp
    assert np.max(np.abs(att.nngp - K)) < 1e-14
    # Θ' = σ² A(Θ + 2K)Aᵀ with Θ = K (first Dense) → 3σ²·pooled K
    assert np.max(np.abs(att.ntk - (1.5 * gap.ntk + 2 * K))) < 1e-13


def test_attention_rule_against_explicit_softmax():
    X = _X((2, 3, 2), 7)
    s, w, b = 0.7, 1.3, 0.2
    r = limits.kernels.kernel(limits.serial(L.Attention(2, s, w, b), L.Flatten(), L.Dense()), X)
    G = np.einsum("pic,qjc->pqij", X, X) / 2
    A = [np.exp(s * G[p, p]) / np.exp(s * G[p, p]).sum(1, keepdims=True) for p in range(2)]
    K = np.array([[np.trace(w * A[p] @ G[p, q] @ A[q].T + b) / 3 for q in range(2)] for p in range(2)])
    assert np.max(np.abs(r.nngp - K)) < 1e-14


@pytest.mark.parametrize("act", ["relu", "erf", "tanh", "gelu"])
def test_model_composition_equals_model_kernels(act):
    X1, X2 = _X((6, 5), 8), _X((3, 5), 9)
    for m in (limits.mlp(5, 3, activation=act, sigma_w2=1.6, sigma_b2=0.1, sigma_w2_in=1.2, sigma_b2_out=0.05),
              limits.resnet(5, 4, activation=act, sigma_w2=1.2, sigma_b2=0.1, rho=0.8, depth_scaling="sqrt")):
        s = m.composition
        assert s == m.to_serial()                  # the Model builds the composition it names
        for a, b in ((X1, None), (X1, X2)):
            ref, got = limits.kernels.kernel(m, a, b), limits.kernels.kernel(s, a, b)
            for x, y in ((ref.nngp, got.nngp), (ref.ntk, got.ntk)):
                assert np.max(np.abs(x - y)) <= 1e-12 * np.max(np.abs(x))


def test_cross_kernel_is_the_block_of_the_joint_kernel():
    X = _X((5, 4, 4, 2), 10)
    m = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.LayerNorm(),
                      L.Residual(limits.serial(L.Activation("erf"), L.Conv((3, 3), "CIRCULAR", 1.0)), rho=0.5),
                      L.Activation("relu"), L.Attention(1, 0.5), L.GlobalAvgPool(), L.Dense())
    joint = limits.kernels.kernel(m, X)
    cross = limits.kernels.kernel(m, X[:2], X[2:])
    assert np.max(np.abs(cross.nngp - joint.nngp[:2, 2:])) < 1e-14
    assert np.max(np.abs(cross.ntk - joint.ntk[:2, 2:])) < 1e-14


def test_serialisation_round_trips(tmp_path):
    m = limits.serial(L.Conv((3,), "CIRCULAR", 2.0, 0.1),
                      L.Residual(limits.serial(L.LayerNorm(eps=1e-6), L.Attention(2, 0.5, 1.1, 0.0)), rho=0.3),
                      L.Activation("gelu"),
                      L.AvgPool((2,), strides=(1,)), L.Identity(),
                      L.AvgPool((3,), strides=(2,), padding="same", normalize_edges=True), L.Flatten(), L.Dense(1.0, 0.2))
    assert m.layers[5].padding == "SAME" and m.layers[5].to_dict()["normalize_edges"] is True
    assert "normalize_edges" not in m.layers[3].to_dict()         # default: files without the key read the same
    assert L.Serial.from_json(m.to_json()) == m
    for ext in ("json", "toml"):
        p = m.save(tmp_path / f"m.{ext}")
        assert L.load(p) == m
    X = _X((3, 6, 2), 11)
    k = limits.kernels.kernel(m, X)
    k.save(tmp_path / "k")
    k2 = type(k).load(tmp_path / "k")
    assert np.array_equal(k2.ntk, k.ntk) and L.Serial.from_dict(k2.model) == m


def test_errors_name_the_layer():
    X = _X((3, 4, 4, 2))
    with pytest.raises(ModelError, match="layer 2 .*Activation\\('erf'\\).*Gaussian"):
        limits.kernels.kernel(limits.serial(L.Dense(), L.Activation("relu"), L.Activation("erf"), L.Flatten(),
                                            L.Dense()), X)
    with pytest.raises(ValueError, match="ends with spatial axes"):
        limits.kernels.kernel(limits.serial(L.Conv((3, 3)), L.Activation("relu")), X)
    with pytest.raises(ValueError, match="GlobalAvgPool needs inputs with spatial axes"):
        limits.kernels.kernel(limits.serial(L.Dense(), L.GlobalAvgPool()), X[:, 0, 0])
    with pytest.raises(ValueError, match="2 spatial axes"):
        limits.kernels.kernel(limits.serial(L.Conv((3, 3)), L.Flatten(), L.Dense()), X[:, 0])
    with pytest.raises(ValueError, match="padding"):
        L.Conv((3, 3), padding="REFLECT")
    with pytest.raises(ValueError, match="VALID window of size 5 does not fit an input axis of size 4"):
        limits.kernels.kernel(limits.serial(L.Conv((3, 5), padding="VALID"), L.Flatten(), L.Dense()), X)
    with pytest.raises(ValueError, match="strides"):
        L.Conv((3, 3), strides=(2,))
    with pytest.raises(ValueError, match="must end with a Dense, Conv or Attention"):
        L.Residual(limits.serial(L.Dense(), L.Activation("relu")))
    with pytest.raises(ValueError, match="unknown activation|not registered|unknown"):
        L.Activation("nope")


def test_tiles_give_the_same_kernel():
    from limits.kernels.composed import kernel

    X = _X((7, 4, 4, 2), 12)
    m = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu"), L.GlobalAvgPool(), L.Dense())
    whole = kernel(m, X)
    tiled = kernel(m, X, block=3)
    cross = kernel(m, X[:5], X[2:], block=2)
    assert tiled.diagnostics["block"] == 3
    assert np.max(np.abs(tiled.ntk - whole.ntk)) < 1e-15 and np.max(np.abs(tiled.nngp - whole.nngp)) < 1e-15
    assert np.max(np.abs(cross.ntk - whole.ntk[:5, 2:])) < 1e-15


def test_model_files_and_compositions_are_told_apart(tmp_path):
    m = limits.serial(L.Dense(), L.Activation("erf"), L.Dense())
    p = m.save(tmp_path / "c.toml")
    with pytest.raises(ModelError, match="composition of layers"):
        limits.Model.load(p)
    X = _X((3, 4), 13)
    assert np.array_equal(limits.kernels.kernel(p, X).ntk, limits.kernels.kernel(m, X).ntk)
    mlp = limits.mlp(4, 2, activation="erf")
    assert limits.serial(mlp) == mlp.to_serial()


def _explicit_patches(X, fs, st, padding):
    """(P, *out, |F|·C) windows of a strided convolution, built by explicit index arithmetic (jax.lax geometry:
    VALID ⌊(n − k)/s⌋ + 1 outputs; SAME / CIRCULAR ⌈n/s⌉ outputs, ⌊pad/2⌋ before, zeros or wrap-around)."""
    sp = X.shape[1:-1]
    geo = []
    for n, k, s in zip(sp, fs, st):
        if padding == "VALID":
            geo.append(((n - k) // s + 1, 0))
        else:
            o = -(-n // s)
            geo.append((o, max((o - 1) * s + k - n, 0) // 2))
    outs = [g[0] for g in geo]
    pt = np.zeros((X.shape[0],) + tuple(outs) + (int(np.prod(fs)) * X.shape[-1],))
    for i in np.ndindex(*outs):
        cols = []
        for f in np.ndindex(*fs):
            src = [a * s + b - lo for a, s, b, (_, lo) in zip(i, st, f, geo)]
            if padding == "CIRCULAR":
                src = [q % n for q, n in zip(src, sp)]
            inside = all(0 <= q < n for q, n in zip(src, sp))
            cols.append(X[(slice(None),) + tuple(src)] if inside else np.zeros((X.shape[0], X.shape[-1])))
        pt[(slice(None),) + i] = np.concatenate(cols, axis=-1)
    return pt


@pytest.mark.parametrize("padding", ["VALID", "SAME", "CIRCULAR"])
@pytest.mark.parametrize("fs,st,shape", [((3, 3), (2, 2), (3, 7, 8, 2)), ((2, 4), (3, 1), (3, 8, 9, 2)),
                                         ((5, 3), (2, 3), (3, 5, 10, 2)), ((4,), (3,), (3, 11, 2)), ((3,), (2,), (3, 12, 3))])
def test_strided_conv_matches_explicit_linear_operator(padding, fs, st, shape):
    """A linear strided convolution read out by Flatten (equal positions) and by GlobalAvgPool (every pair): the
    covariance σ_w²⟨patch_p(i), patch_q(j)⟩/(|F|C) + σ_b² from explicitly built windows (independent of
    limits.layers.conv), and the finite layer's output is the same windows times its weights."""
    X = _X(shape, 21)
    conv = L.Conv(fs, padding, 1.7, 0.2, strides=st)
    pt = _explicit_patches(X, fs, st, padding)
    P, outs, FC = X.shape[0], pt.shape[1:-1], pt.shape[-1]
    flat = pt.reshape(P, -1, FC)
    G = np.einsum("pia,qja->pqij", flat, flat) * 1.7 / FC + 0.2              # every pair of output positions
    r_flat = limits.kernels.kernel(limits.serial(conv, L.Flatten(), L.Dense()), X)
    r_gap = limits.kernels.kernel(limits.serial(conv, L.GlobalAvgPool(), L.Dense()), X)
    ref_flat = np.einsum("pqii->pq", G) / G.shape[-1]
    ref_gap = G.mean(axis=(2, 3))
    assert np.max(np.abs(r_flat.nngp - ref_flat)) < 1e-13 and np.max(np.abs(r_gap.nngp - ref_gap)) < 1e-13
    assert np.max(np.abs(r_gap.ntk - 2 * ref_gap)) < 1e-13           # Θ: the convolution's K, then the read-out's
    # computed at the output resolution: the layer after the convolution sees the strided shape
    assert r_gap.diagnostics["structure"][1]["spatial"] == list(outs) == list(conv.out_shape(shape[1:], 5)[:-1])
    # the finite layer is the same map
    W = _X((1,) + tuple(fs) + (shape[-1], 4), 22)
    y, _ = conv.apply({"W": W, "b": np.zeros((1, 4))}, X[None])
    ref_y = np.sqrt(1.7 / FC) * np.einsum("pia,ao->pio", flat, W.reshape(FC, 4)).reshape((P,) + outs + (4,))
    assert np.allclose(y[0], ref_y, rtol=0, atol=1e-13)


def test_strided_diagonal_and_full_representations_agree():
    from limits.layers.state import initial, spatial_diagonal

    X = _X((3, 9, 7, 2), 23)
    body = limits.serial(L.Conv((3, 3), "VALID", 2.0, 0.1, strides=(2, 1)), L.Activation("erf"),
                         L.Conv((2, 3), "CIRCULAR", 1.5, 0.2, strides=(1, 3)), L.Activation("relu"),
                         L.Conv((4, 2), "SAME", 1.3, 0.1, strides=(3, 2)), L.Dense(1.3, 0.1))
    kf = body.kernel(initial(X, None, True, True), True)
    kd = body.kernel(initial(X, None, False, True), False)
    assert kf.spatial == kd.spatial == (2, 1)                     # 9×7 → 4×5 → 4×2 → 2×1
    for a, b in ((kf.nngp, kd.nngp), (kf.ntk, kd.ntk)):
        assert np.max(np.abs(spatial_diagonal(a, True, 2) - b)) < 1e-14


def test_patch_operator_is_linear_and_shared_by_every_block():
    """Conv.patch (the operator finite-width rules reuse): linear, equal to the kernel rule without σ's, and the
    same on the small-matrix and the slice path (an axis above DENSE_MAX)."""
    from limits.layers import conv as C

    rng = np.random.default_rng(24)
    c = L.Conv((3, 2), "CIRCULAR", 1.0, 0.0, strides=(2, 3))
    for sp in ((6, 7), (11, 10)):
        A, B = rng.standard_normal((2, 3, 2) + (sp[0], sp[0], sp[1], sp[1]))
        PA, PB = c.patch(A, sp, True), c.patch(B, sp, True)
        assert np.max(np.abs(c.patch(2 * A - B, sp, True) - (2 * PA - PB))) < 1e-13
        old = C.DENSE_MAX
        try:
            C.DENSE_MAX = 0                                    # force the slice path
            assert np.max(np.abs(c.patch(A, sp, True) - PA)) < 1e-13
        finally:
            C.DENSE_MAX = old


@pytest.mark.parametrize("values", [False, True])
def test_attention_positional_embedding_against_explicit_softmax(values):
    """Embedding added (keys; and values): logits s(K_pp + σ_e² I), values K_pq (+ σ_e² I, for every pair of inputs:
    the embedding is shared), Θ' = σ_w² A (Θ + 2K (+ 3σ_e² I)) Aᵀ + σ_b² — written out here."""
    X = _X((3, 4, 2), 25)
    s, w, b, e = 0.7, 1.3, 0.2, 0.6
    m = limits.serial(L.Dense(1.5, 0.1), L.Attention(1, s, w, b, pos_emb="SUM", sigma_pe2=e, pos_emb_values=values),
                      L.Flatten(), L.Dense())
    r = limits.kernels.kernel(m, X)
    G = 1.5 * np.einsum("pic,qjc->pqij", X, X) / 2 + 0.1                  # after the Dense layer; Θ = G
    I = np.eye(4)
    A = [np.exp(s * (G[p, p] + e * I)) / np.exp(s * (G[p, p] + e * I)).sum(1, keepdims=True) for p in range(3)]
    add = e * I if values else 0.0
    K = np.array([[np.trace(w * A[p] @ (G[p, q] + add) @ A[q].T + b) / 4 for q in range(3)] for p in range(3)])
    T = np.array([[np.trace(w * A[p] @ (3 * G[p, q] + 3 * add) @ A[q].T + b) / 4 for q in range(3)] for p in range(3)])
    assert np.max(np.abs(r.nngp - K)) < 1e-14 and np.max(np.abs(r.ntk - (T + K))) < 1e-13
    with pytest.raises(ModelError, match="positional embedding needs an input with infinitely many channels"):
        limits.kernels.kernel(limits.serial(L.Attention(pos_emb="SUM"), L.Flatten(), L.Dense()), X)
    with pytest.raises(ValueError, match="pos_emb must be one of"):
        L.Attention(pos_emb="CONCAT")
