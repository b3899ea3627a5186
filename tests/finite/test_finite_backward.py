"""Backward pass vs central finite differences (float64), hidden-state gradients, decoupled mode."""
import numpy as np
import pytest

import limits.finite as F


def _nets():
    return {
        "mlp_tanh_bias": F.mlp(5, 7, 3, d_out=2, activation="tanh", sigma_b2=0.3),
        "resnet_erf_2layer": F.resnet(5, 7, 3, d_out=2, activation="erf", sigma_b2=0.3, rho=0.7,
                                      block_layers=2),
        "resnet_3skip_gelu": F.resnet(4, 6, 2, d_out=1, activation="gelu", rho=0.5, block_layers=3),
        "postact_tanh": F.resnet(5, 7, 3, d_out=2, activation="tanh", sigma_b2=0.3, rho=0.7,
                                 post_activation=True),
        "postact_readin_phi": F.Network(F.Dense(4, 6, mult=0.5, std=1.0, bias=True, bias_std=0.2),
                                        (F.Block((F.Dense(6, 6, std=0.4),), residual=True, branch=0.3),),
                                        F.Dense(6, 2, std=0.4), activation="sigmoid", out_scale=0.7,
                                        post_activation=True, readin_phi=True, readout_phi=True),
        "ntk_relu": F.mlp(5, 8, 2, d_out=1, activation="relu", parameterisation="ntk"),
    }


def _fd_check(net, n_entries=6, decoupled=False, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((3, net.d_in))
    Y = rng.standard_normal((3, net.d_out))
    w = F.init_weights(net, 2, seed=seed + 1, decoupled=decoupled)
    loss, g, _ = F.loss_and_grads(net, w, X, Y)
    errs = []
    for name in net.layer_names():
        for kind in ("W", "b"):
            arrs = w.W if kind == "W" else w.b
            if name not in arrs:
                continue
            A = arrs[name]
            G = (g.dW if kind == "W" else g.db)[name]
            for _ in range(n_entries):
                idx = tuple(int(rng.integers(0, n)) for n in A.shape)
                eps = 1e-5
                old = A[idx]
                A[idx] = old + eps
                lp = F.loss_and_grads(net, w, X, Y)[0][idx[0]]
                A[idx] = old - eps
                lm = F.loss_and_grads(net, w, X, Y)[0][idx[0]]
                A[idx] = old
                fd = (lp - lm) / (2 * eps)
                # relative error, floored at 1e-3 of the tensor's RMS gradient (tiny entries)
                scale = max(abs(G[idx]), 1e-3 * float(np.sqrt(np.mean(G[idx[0]] ** 2))), 1e-12)
                errs.append(abs(fd - G[idx]) / scale)
    return max(errs)


@pytest.mark.parametrize("key", list(_nets()))
def test_backward_matches_central_differences(key):
    net = _nets()[key]
    assert _fd_check(net) < 1e-6


def test_hidden_state_gradients_match_bias_gradients():
    # pre-act residual: h^l = h^{l-1} + β(m W φ + b)  ⇒  ∂ℓ/∂b_l = β Σ_μ ∂ℓ/∂h^l ; read-in: ∂ℓ/∂b_in = Σ_μ ∂ℓ/∂h^0
    net = F.resnet(4, 6, 3, d_out=2, activation="tanh", sigma_b2=0.5, rho=0.4)
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    w = F.init_weights(net, 3, seed=4)
    _, g, _ = F.loss_and_grads(net, w, X, Y)
    np.testing.assert_allclose(g.db["in"], g.dh[0].sum(axis=1), rtol=1e-12, atol=1e-14)
    for l in range(1, 4):
        np.testing.assert_allclose(g.db[f"{l}.1"], 0.4 * g.dh[l].sum(axis=1), rtol=1e-12, atol=1e-14)


def test_hidden_state_gradient_by_perturbing_input_of_readin():
    # ∂ℓ/∂x = m_in W_inᵀ ∂ℓ/∂h⁰ — finite differences in x check dh[0] independently
    net = F.mlp(3, 5, 2, d_out=1, activation="erf")
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    w = F.init_weights(net, 1, seed=6)
    _, g, _ = F.loss_and_grads(net, w, X, Y)
    gx = (g.dh[0] @ w.W["in"])[0] * net.readin.mult
    eps = 1e-6
    for i in range(2):
        for j in range(3):
            Xp, Xm = X.copy(), X.copy()
            Xp[i, j] += eps
            Xm[i, j] -= eps
            fd = (F.loss_and_grads(net, w, Xp, Y)[0][0] - F.loss_and_grads(net, w, Xm, Y)[0][0]) / (2 * eps)
            assert abs(fd - gx[i, j]) <= 1e-7 * max(1.0, abs(fd))


def test_decoupled_backward_uses_the_copy():
    # linear 1-block MLP, hand-written: g_h1 = s m2 W̃2ᵀ g_f, g_h0 = m1 W̃1ᵀ g_h1, dW0 = m0 g_h0 xᵀ
    net = F.Network(F.Dense(3, 4, mult=0.7), (F.Block((F.Dense(4, 4, mult=0.5),), residual=False),),
                    F.Dense(4, 1, mult=0.3), activation="linear", out_scale=2.0)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    w = F.init_weights(net, 1, seed=1, decoupled=True)
    assert set(w.decoupled) == {"1.1", "out"}
    assert not np.allclose(w.Wb["1.1"], w.W["1.1"])
    loss, g, fwd = F.loss_and_grads(net, w, X, Y, reduction="sum")
    W0, W1, W2 = (w.W[k][0] for k in ("in", "1.1", "out"))
    V1, V2 = w.Wb["1.1"][0], w.Wb["out"][0]
    h0 = 0.7 * X @ W0.T
    h1 = 0.5 * h0 @ W1.T
    f = 2.0 * 0.3 * h1 @ W2.T
    gf = f - Y
    gh1 = 2.0 * 0.3 * gf @ V2
    gh0 = 0.5 * gh1 @ V1
    np.testing.assert_allclose(g.dW["out"][0], 2.0 * 0.3 * gf.T @ h1, rtol=1e-12)
    np.testing.assert_allclose(g.dW["1.1"][0], 0.5 * gh1.T @ h0, rtol=1e-12)
    np.testing.assert_allclose(g.dW["in"][0], 0.7 * gh0.T @ X, rtol=1e-12)
    np.testing.assert_allclose(g.dh[0][0], gh0, rtol=1e-12)


def test_decoupled_with_identical_copy_equals_coupled():
    net = F.resnet(4, 6, 2, d_out=1, activation="tanh", rho=0.5, block_layers=2)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, 1))
    w = F.init_weights(net, 2, seed=3)
    w2 = w.copy()
    w2.Wb = {k: v.copy() for k, v in w2.W.items()}   # distinct arrays, same values
    _, g1, _ = F.loss_and_grads(net, w, X, Y)
    _, g2, _ = F.loss_and_grads(net, w2, X, Y)
    for k in g1.dW:
        np.testing.assert_array_equal(g1.dW[k], g2.dW[k])


def test_batched_inits_equal_single_init_runs():
    net = F.resnet(4, 6, 2, d_out=2, activation="erf", sigma_b2=0.1, rho=0.5)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    w = F.init_weights(net, 3, seed=3)
    loss, g, _ = F.loss_and_grads(net, w, X, Y)
    for s in range(3):
        ls, gs, _ = F.loss_and_grads(net, w.select(slice(s, s + 1)), X, Y)
        np.testing.assert_allclose(ls[0], loss[s], rtol=1e-13)
        for k in g.dW:
            np.testing.assert_allclose(gs.dW[k][0], g.dW[k][s], rtol=1e-12, atol=1e-15)


from hypothesis import given, settings, strategies as st


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), act=st.sampled_from(["tanh", "erf", "relu", "gelu"]),
       post=st.booleans(), layers=st.integers(1, 2))
def test_backward_is_linear_in_output_gradient(seed, act, post, layers):
    net = F.resnet(3, 5, 2, d_out=2, activation=act, rho=0.6, sigma_b2=0.1, post_activation=post,
                   block_layers=1 if post else layers)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((3, 3))
    w = F.init_weights(net, 2, seed=seed)
    fwd = F.forward(net, w, X)
    g1, g2 = rng.standard_normal((2, 2, 3, 2))
    a, b, c = (F.backward(net, w, fwd, g) for g in (g1, g2, 2.0 * g1 - 3.0 * g2))
    for k in a.dW:
        np.testing.assert_allclose(c.dW[k], 2.0 * a.dW[k] - 3.0 * b.dW[k], rtol=1e-10, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), act=st.sampled_from(["tanh", "erf", "relu"]))
def test_hidden_unit_permutation_invariance(seed, act):
    # permuting the hidden units of a plain MLP (rows of W_l, b_l; columns of W_{l+1}) leaves f unchanged
    net = F.mlp(3, 6, 1, d_out=2, activation=act, sigma_b2=0.2)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((4, 3))
    w = F.init_weights(net, 1, seed=seed)
    perm = rng.permutation(6)
    w2 = w.copy()
    w2.W["in"] = w.W["in"][:, perm]
    w2.b["in"] = w.b["in"][:, perm]
    w2.W["1.1"] = w.W["1.1"][:, :, perm]
    w2.Wb = dict(w2.W)
    np.testing.assert_allclose(F.forward(net, w2, X).f, F.forward(net, w, X).f, rtol=1e-12, atol=1e-14)


def test_user_callable_activation():
    import limits

    act = limits.activation(np.sin, dphi=np.cos, d2phi=lambda x: -np.sin(x), name="sin")
    net = F.resnet(3, 5, 2, d_out=1, activation=act, rho=0.5, sigma_b2=0.1)
    assert _fd_check(net) < 1e-6
    X = np.random.default_rng(0).standard_normal((2, 3))
    w = F.init_weights(net, 1, seed=0)
    W = {k: v[0] for k, v in w.W.items()}
    b = {k: v[0] for k, v in w.b.items()}
    h = X @ W["in"].T + b["in"]
    for l in (1, 2):
        h = h + 0.5 * (np.sin(h) @ W[f"{l}.1"].T + b[f"{l}.1"])
    np.testing.assert_allclose(F.forward(net, w, X).f[0], np.sin(h) @ W["out"].T + b["out"], rtol=1e-13)
