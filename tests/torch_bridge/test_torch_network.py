"""Model.to_torch: the same network as model.finite(N) — forward, init laws, one SGD / Adam step."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import limits  # noqa: E402
from limits.finite import init_weights, train  # noqa: E402
from limits.finite.forward import forward  # noqa: E402
from limits.torch.network import mse_loss  # noqa: E402

MODELS = [
    limits.mlp(5, 2, d_out=2, activation="tanh", parameterisation="NTK", sigma_b2=0.1),
    limits.mlp(5, 1, activation="relu", parameterisation="SP", sigma_w2=2.0),
    limits.mlp(5, 2, d_out=3, activation="erf", parameterisation="muP", gamma0=0.7),
    limits.resnet(5, 3, activation="gelu", parameterisation="depth-muP", depth_scaling="sqrt", block_layers=2),
    limits.resnet(5, 2, activation="tanh", parameterisation="MF", post_activation=True, sigma_b2=0.2),
    limits.resnet(5, 2, activation="sigmoid", parameterisation="NTK", rho=0.5, sigma_b2=0.3),
]


def _data(m, P=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, m.d_in)), rng.standard_normal((P, m.d_out))


@pytest.mark.parametrize("m", MODELS, ids=lambda m: f"{m.param_name}-{m.activation}")
def test_forward_equals_finite(m):
    net = m.finite(48)
    w = init_weights(net, 2, seed=3)
    X, _ = _data(m)
    ref = forward(net, w, X)
    t = m.to_torch(48, weights=w, index=1)
    f, hs = t(torch.tensor(X), return_hidden=True)
    np.testing.assert_allclose(f.detach().numpy(), ref.f[1], rtol=1e-12, atol=1e-12)
    for h_t, h_n in zip(hs, ref.h):
        np.testing.assert_allclose(h_t.detach().numpy(), h_n[1], rtol=1e-12, atol=1e-12)


def test_init_laws_match_the_network():
    """Every layer's entries are N(0, std²): mean, variance and kurtosis within 5 SE (false alarm
    ≈ 6e-7 per moment). With M ≥ 64·5 entries the variance test has SE ≤ √(2/M) ≈ 0.08, so a 50 %
    error of std² (z ≥ 6) is detected with probability > 0.9; at the hidden layer (M = 4096, SE
    0.022) a 15 % error is; the kurtosis test (SE √(24/M) = 0.077 at M = 4096) rejects a uniform law (1.8)."""
    m = limits.mlp(5, 1, activation="tanh", parameterisation="muP", sigma_w2=1.7, sigma_b2=0.4)
    net = m.finite(64)
    t = m.to_torch(64, seed=11)
    for name, d in net.layers().items():
        for kind, std in (("W", d.std), ("b", d.bias_std if d.bias else None)):
            if std is None:
                continue
            x = getattr(t, f"{kind}_{name.replace('.', '_')}").detach().numpy().ravel() / std
            M = x.size
            assert abs(x.mean()) < 5 / np.sqrt(M), (name, kind)
            assert abs(x.var() - 1) < 5 * np.sqrt(2 / M), (name, kind, x.var())
            if M >= 4096:
                kurt = np.mean(x ** 4) / x.var() ** 2
                assert abs(kurt - 3) < 5 * np.sqrt(24 / M), (name, kurt)


def _torch_steps(m, w, X, Y, opt, steps, lr_scale):
    t = m.to_torch(32, weights=w, index=0)
    o = t.optimizer(opt, lr_scale=lr_scale)
    Xt, Yt = torch.tensor(X), torch.tensor(Y)
    for _ in range(steps):
        o.zero_grad()
        mse_loss(t(Xt), Yt).backward()
        o.step()
    return t.to_weights()


@pytest.mark.parametrize("opt,steps", [("gd", 1), ("adam", 1), ("adam", 3)])
@pytest.mark.parametrize("m", [MODELS[0], MODELS[2], MODELS[3], MODELS[4]], ids=lambda m: m.param_name)
def test_training_steps_equal_the_simulator(m, opt, steps):
    net = m.finite(32)
    w = init_weights(net, 1, seed=5)
    X, Y = _data(m)
    lr_scale = 0.3 if opt == "gd" else 0.01
    ref = train(net, X, Y, steps, weights=w, optimizer=opt, lr_scale=lr_scale, record_features=False)
    want = ref.final_weights()
    got = _torch_steps(m, w, X, Y, "sgd" if opt == "gd" else "adam", steps, lr_scale)
    for name in net.layer_names():
        moved = np.abs(want.W[name] - w.W[name]).max()
        assert moved > 0, name
        np.testing.assert_allclose(got.W[name], want.W[name], rtol=0, atol=1e-12 * max(1.0, np.abs(want.W[name]).max()))
        if name in want.b:
            np.testing.assert_allclose(got.b[name], want.b[name], rtol=0, atol=1e-12)


def test_unknown_activation_is_refused():
    m = limits.mlp(3, 1, activation=lambda x: np.sin(x))
    with pytest.raises(limits.ModelError, match="no torch counterpart"):
        m.to_torch(8)
