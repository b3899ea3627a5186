"""Finite compositions (limits.finite.serial): hand-written backward passes against finite differences,
and limits.check of every layer type — passes on the kernel, flags a 5 % error in it."""
from dataclasses import replace

import numpy as np
import pytest

import limits
from limits.finite.serial import SerialNetwork

L = limits.layers


def _leaves(params):
    for p in params:
        if isinstance(p, dict):
            yield from p.values()
        else:
            yield from _leaves(p)


@pytest.mark.parametrize("case", ["conv2d-attention-layernorm", "conv1d-circular-flatten", "dense-residual",
                                  "conv2d-strided-valid-circular", "conv1d-strided-same-circular-wrap",
                                  "attention-positional-embedding"])
def test_backward_ntk_equals_finite_difference_jacobian(case):
    m, shape = {
        "conv2d-attention-layernorm": (limits.serial(
            L.Conv((2, 2), "SAME", 1.5, 0.1), L.Activation("tanh"),
            L.Residual(limits.serial(L.LayerNorm(eps=1e-3), L.Attention(2, 0.7, 1.2, 0.1)), rho=0.6),
            L.Activation("erf"), L.AvgPool((2, 1), strides=(1, 1)), L.Identity(),
            L.AvgPool((2, 2), strides=(2, 1), padding="SAME"), L.GlobalAvgPool(), L.Dense(1.0, 0.2)),
            (2, 3, 3, 2)),
        "conv1d-circular-flatten": (limits.serial(L.Conv((3,), "CIRCULAR", 1.3, 0.2), L.Activation("gelu"),
                                                  L.Conv((2,), "CIRCULAR", 1.1, 0.0), L.Flatten(), L.Dense(1.1, 0.1)),
                                    (2, 4, 2)),
        "dense-residual": (limits.serial(L.Dense(1.2, 0.3), L.Residual(limits.serial(L.Activation("tanh"), L.Dense(1.5, 0.2)),
                                                                        rho=0.8), L.Activation("erf"), L.Dense(0.9, 0.1)),
                           (3, 4)),
        "conv2d-strided-valid-circular": (limits.serial(
            L.Conv((3, 3), "VALID", 1.5, 0.1, strides=(2, 1)), L.Activation("tanh"),
            L.Conv((2, 2), "CIRCULAR", 1.2, 0.1, strides=(2, 2)), L.GlobalAvgPool(), L.Dense(1.0, 0.2)), (2, 7, 6, 2)),
        "conv1d-strided-same-circular-wrap": (limits.serial(
            L.Conv((4,), "SAME", 1.5, 0.1, strides=(3,)), L.Activation("erf"),
            L.Conv((5,), "CIRCULAR", 1.2, 0.0, strides=(2,)), L.Flatten(), L.Dense(1.0, 0.2)), (2, 8, 2)),
        "attention-positional-embedding": (limits.serial(
            L.Dense(1.2, 0.1), L.Attention(2, 0.7, 1.2, 0.1, pos_emb="SUM", sigma_pe2=0.6, pos_emb_values=True),
            L.Activation("erf"), L.GlobalAvgPool(), L.Dense()), (2, 3, 2)),
    }[case]
    X = np.random.default_rng(0).standard_normal(shape)
    net = SerialNetwork(m, 3)
    params = net.init_weights(X.shape[1:], 1, seed=1)
    f, caches = net.forward(params, X)
    g = np.zeros_like(f)
    g[..., 0] = 1.0
    _, theta = m.backward(params, caches, g)
    J = []
    h = 1e-6
    for a in _leaves(params):
        flat = a.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + h
            fp = net.forward(params, X)[0][0, :, 0]
            flat[i] = old - h
            fm = net.forward(params, X)[0][0, :, 0]
            flat[i] = old
            J.append((fp - fm) / (2 * h))
    J = np.array(J)                                   # (n_params, P)
    assert np.max(np.abs(theta[0] - J.T @ J)) < 1e-7 * np.max(np.abs(theta[0]))


def test_forward_is_chunk_invariant_and_seeded():
    m = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu"), L.GlobalAvgPool(), L.Dense())
    X = np.random.default_rng(0).standard_normal((3, 4, 4, 2))
    K1, T1 = SerialNetwork(m, 16).kernels(X, 6, seed=3, chunk=6)
    K2, T2 = SerialNetwork(m, 16).kernels(X, 6, seed=3, chunk=4)
    assert np.array_equal(K1, K2) and np.array_equal(T1, T2)


CASES = {
    # layer types covered: Conv (2-D SAME), Activation, GlobalAvgPool, Dense
    "conv-gap": (limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.1)),
                 (3, 4, 4, 2), (32, 64, 128)),
    # Conv (1-D CIRCULAR), Flatten
    "conv1d-flatten": (limits.serial(L.Conv((3,), "CIRCULAR", 1.5, 0.1), L.Activation("erf"), L.Flatten(), L.Dense(1.0, 0.0)),
                       (3, 5, 2), (64, 128, 256)),
    # AvgPool
    "avgpool": (limits.serial(L.Conv((2, 2), "SAME", 2.0, 0.0), L.Activation("relu"), L.AvgPool((2, 2)), L.Flatten(), L.Dense()),
                (3, 4, 4, 2), (32, 64, 128)),
    # AvgPool "SAME" (stride 2, edges normalised as neural-tangents' normalize_edges=True)
    "avgpool-same": (limits.serial(L.Conv((2, 2), "SAME", 2.0, 0.1), L.Activation("relu"),
                                   L.AvgPool((3, 3), strides=(2, 2), padding="SAME", normalize_edges=True), L.Flatten(), L.Dense()),
                     (3, 5, 4, 2), (32, 64, 128)),
    # LayerNorm
    "layernorm": (limits.serial(L.Dense(1.0, 0.1), L.LayerNorm(), L.Activation("erf"), L.Dense(1.2, 0.1)), (3, 5),
                  (64, 128, 256)),
    # Attention
    "attention": (limits.serial(L.Attention(4, 1.0, 1.3, 0.05), L.Flatten(), L.Dense()), (3, 3, 4), (32, 64, 128)),
    # Conv strided: 2-D VALID stride 2, then SAME stride (2, 1), global pooling of the 2×3 output
    "conv-strided-gap": (limits.serial(L.Conv((3, 3), "VALID", 2.0, 0.1, strides=(2, 2)), L.Activation("erf"),
                                       L.Conv((2, 2), "SAME", 2.0, 0.1, strides=(2, 1)), L.Activation("relu"),
                                       L.GlobalAvgPool(), L.Dense(1.0, 0.1)), (3, 7, 6, 2), (32, 64, 128)),
    # Conv strided 1-D CIRCULAR (filter 4 > stride 3 … wraps), Flatten
    "conv1d-strided-flatten": (limits.serial(L.Conv((4,), "CIRCULAR", 1.5, 0.1, strides=(3,)), L.Activation("erf"), L.Flatten(),
                                             L.Dense()), (3, 8, 2), (64, 128, 256)),
    # pooling after a strided convolution
    "conv-strided-avgpool": (limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1, strides=(2, 2)), L.Activation("relu"),
                                           L.AvgPool((2, 2), (1, 1), "VALID"), L.Flatten(), L.Dense()), (3, 6, 5, 2), (32, 64, 128)),
    # Attention with a positional embedding in keys and values (widths from 64: at 32 the O(1/N²) term still shows)
    "attention-positional-embedding": (limits.serial(L.Dense(1.0, 0.1), L.Attention(2, 0.8, 1.3, 0.05, pos_emb="SUM", sigma_pe2=0.7,
                                                                                     pos_emb_values=True),
                                                     L.Flatten(), L.Dense()), (3, 3, 4), (64, 128, 256)),
    # Residual, Identity
    "residual": (limits.serial(L.Dense(1.0, 0.1), L.Residual(limits.serial(L.Activation("relu"), L.Dense(2.0, 0.1)), rho=0.7),
                               L.Identity(), L.Activation("relu"), L.Dense()), (3, 4), (128, 256, 512)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_passes_and_flags_a_five_percent_error(name):
    m, shape, widths = CASES[name]
    X = np.random.default_rng(1).standard_normal(shape)
    k = limits.kernels.kernel(m, X)
    c = limits.check(k, widths=widths, inits=128, seed=0)
    assert c.passed, c.reasons
    assert c.power < 0.05           # a 5 % error is detected with ≥ 80 % probability (calibrated verdict, family-wise α)
    wrong = replace(k, nngp=1.05 * k.nngp, ntk=1.05 * k.ntk)
    bad = limits.check(wrong, widths=widths, inits=128, seed=0)
    assert not bad.passed
    assert any("relative bias" in r for r in bad.reasons)


@pytest.mark.parametrize("strided", [False, True])
def test_parameter_gradients_equal_finite_differences(strided):
    m = limits.serial(L.Conv((2, 2), "CIRCULAR", 1.5, 0.1), L.Activation("tanh"),
                      L.Residual(limits.serial(L.LayerNorm(eps=1e-3), L.Attention(2, 0.7, 1.2, 0.1)), rho=0.6),
                      L.Activation("erf"), L.AvgPool((2, 2), strides=(1, 1)), L.Flatten(), L.Dense(1.0, 0.2))
    shape = (3, 3, 3, 2)
    if strided:             # strided VALID / SAME convolutions, attention with a positional embedding (keys + values)
        m = limits.serial(L.Conv((3, 2), "VALID", 1.5, 0.1, strides=(2, 1)), L.Activation("tanh"),
                          L.Residual(limits.serial(L.LayerNorm(eps=1e-3),
                                                   L.Attention(2, 0.7, 1.2, 0.1, pos_emb="SUM", sigma_pe2=0.5,
                                                               pos_emb_values=True)), rho=0.6),
                          L.Conv((2, 2), "SAME", 1.3, 0.1, strides=(2, 2)), L.Activation("erf"), L.Flatten(), L.Dense(1.0, 0.2))
        shape = (3, 5, 4, 2)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal(shape), rng.standard_normal((3, 2))
    net = SerialNetwork(m, 3, 2)
    params = net.init_weights(X.shape[1:], 1, seed=1)

    def loss():
        return 0.5 * np.sum((net.forward(params, X)[0] - Y[None]) ** 2)

    f, caches = net.forward(params, X)
    _, grads = m.vjp(params, caches, f - Y[None])

    def pairs(p, g):
        for a, b in zip(p, g):
            if isinstance(a, dict):
                for k in a:
                    yield a[k], b[k]
            else:
                yield from pairs(a, b)

    worst, scale = 0.0, 0.0
    for a, g in pairs(params, grads):
        fa, fg = a.reshape(-1), g.reshape(-1)
        for i in range(fa.size):
            old = fa[i]
            fa[i] = old + 1e-6
            lp = loss()
            fa[i] = old - 1e-6
            lm = loss()
            fa[i] = old
            worst = max(worst, abs((lp - lm) / 2e-6 - fg[i]))
            scale = max(scale, abs(fg[i]))
    assert worst < 1e-7 * scale


def test_gradient_descent_prediction_of_a_composition_passes_check_and_flags_an_error():
    rng = np.random.default_rng(0)
    m = limits.serial(L.Conv((3,), "SAME", 2.0, 0.1), L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.1))
    X, Y, Xs = rng.standard_normal((4, 5, 2)), rng.standard_normal(4), rng.standard_normal((2, 5, 2))
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[0, 5, 20], flow=False, learning_rate=0.3)
    c = limits.check(g, widths=(64, 128, 256), inits=64, seed=0)
    assert c.passed, c.reasons
    bad = limits.check(replace(g, mean=1.1 * g.mean), widths=(64, 128, 256), inits=64, seed=0)
    assert not bad.passed


def test_gradient_flow_prediction_of_a_composition_passes_check_and_flags_an_error():
    """Continuous time: finite compositions follow the flow by Euler steps at dt and 2·dt (Richardson)."""
    rng = np.random.default_rng(0)
    m = limits.serial(L.Conv((3,), "SAME", 2.0, 0.1), L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.1))
    X, Y, Xs = rng.standard_normal((4, 5, 2)), rng.standard_normal(4), rng.standard_normal((2, 5, 2))
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[0.0, 1.0, 3.0], flow=True, learning_rate=0.5)
    c = limits.check(g, widths=(64, 128, 256), inits=64, seed=0)
    assert c.passed, c.reasons
    assert c.details["richardson_gap"] < 1e-3 and c.details["euler_steps"] >= 2
    bad = limits.check(replace(g, mean=1.1 * g.mean), widths=(64, 128, 256), inits=64, seed=0)
    assert not bad.passed
    with pytest.raises(ValueError, match="integer multiples"):
        limits.check(limits.predict.gradient_descent(m, X, Y, Xs, t=[1.0, 1.5], flow=True), widths=(32, 64), inits=4)
