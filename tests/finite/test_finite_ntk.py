"""Empirical NTK: equals the Gram of explicit per-sample parameter gradients; mean vs theory."""
import numpy as np

import limits.finite as F


def _explicit_ntk(net, w, X, lr_weighted=False):
    S, P = w.n_inits, X.shape[0]
    J = []
    for mu in range(P):
        fwd = F.forward(net, w, X)
        g = np.zeros_like(fwd.f)
        g[:, mu, 0] = 1.0
        gr = F.backward(net, w, fwd, g)
        layers = net.layers()
        parts = []
        for k in gr.dW:
            fac = np.sqrt(layers[k].lr) if lr_weighted else 1.0
            parts.append(fac * gr.dW[k].reshape(S, -1))
        for k in gr.db:
            fac = np.sqrt(layers[k].b_lr) if lr_weighted else 1.0
            parts.append(fac * gr.db[k].reshape(S, -1))
        J.append(np.concatenate(parts, axis=1))
    J = np.stack(J, axis=1)                       # (S, P, n_params)
    return np.matmul(J, J.transpose(0, 2, 1))


def test_empirical_ntk_equals_explicit_jacobian_gram():
    net = F.resnet(3, 5, 2, d_out=1, activation="tanh", rho=0.5, sigma_b2=0.2, block_layers=2)
    net = net.with_lr(1.0, **{"1.2": 0.3, "out": 2.0})
    X = np.random.default_rng(0).standard_normal((4, 3))
    w = F.init_weights(net, 2, seed=1)
    np.testing.assert_allclose(F.empirical_ntk(net, w, X), _explicit_ntk(net, w, X), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(F.empirical_ntk(net, w, X, lr_weighted=True),
                               _explicit_ntk(net, w, X, lr_weighted=True), rtol=1e-11, atol=1e-13)
    tot, parts = F.empirical_ntk(net, w, X, per_layer=True)
    np.testing.assert_allclose(sum(parts.values()), tot, rtol=1e-13)


def test_two_layer_ntk_mean_matches_kernels_theory():
    # 2-layer NTK-parameterised net: E[Θ̂] = Θ_out exactly at any N (z-test)
    import limits

    X = np.random.default_rng(0).standard_normal((3, 4))
    net = F.mlp(4, 64, 0, activation="erf", sigma_w2=1.3, sigma_b2=0.2, parameterisation="ntk")
    # Θ_out = K_out + σ² E[φ'φ'] ∘ Θ⁰, Θ⁰ = K⁰ (docs/theory/kernels.rst §2, NTK parameterisation, depth 0)
    K0 = 1.3 * X @ X.T / 4 + 0.2
    th = 1.3 * limits.gaussian.gram("erf", K0) + 0.2 + 1.3 * limits.gaussian.dgram("erf", K0) * K0
    w = F.init_weights(net, 600, seed=2)
    T = F.empirical_ntk(net, w, X)
    z = (T.mean(0) - th) / (T.std(0, ddof=1) / np.sqrt(600))
    assert np.max(np.abs(z)) < 4.5
