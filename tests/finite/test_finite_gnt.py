"""Gauss–Newton targets (seed 003 Prop. 3.3)."""
import numpy as np
import pytest

import limits.finite as F
from limits.finite.gnt import gnt_gradients


def _setup(d_out=2):
    net = F.resnet(3, 6, 2, d_out=d_out, activation="tanh", rho=0.5, sigma_b2=0.1, block_layers=2)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, d_out))
    w = F.init_weights(net, 2, seed=1)
    fwd = F.forward(net, w, X)
    _, g = F.mse_loss(fwd.f, Y)
    return net, w, fwd, g


def test_power_zero_is_backprop():
    net, w, fwd, g = _setup()
    a = gnt_gradients(net, w, fwd, g, damping=0.5, power=0.0)
    b = F.backward(net, w, fwd, g)
    for k in b.dW:
        np.testing.assert_allclose(a.dW[k], b.dW[k], rtol=1e-12, atol=1e-14)


def test_gnt_signal_matches_explicit_formula():
    # s = (J Jᵀ + ρI)^{-1} J e, computed densely per sample (width × width solve), e_B = 1 and e_B = 0.5
    net, w, fwd, g = _setup(d_out=2)
    rho = 0.3
    for power in (1.0, 0.5):
        gr = gnt_gradients(net, w, fwd, g, damping=rho, power=power)
        for name in ("in", "1.2", "out"):
            J = np.stack([F.backward(net, w, fwd, np.eye(2)[o] * np.ones_like(fwd.f)).dpre[name]
                          for o in range(2)], axis=-1)
            for s in range(2):
                for mu in range(4):
                    Jm = J[s, mu]
                    A = Jm @ Jm.T + rho * np.eye(Jm.shape[0])
                    lam, V = np.linalg.eigh(A)
                    expected = (V * lam**-power) @ V.T @ Jm @ g[s, mu]
                    np.testing.assert_allclose(gr.dpre[name][s, mu], expected, rtol=1e-9, atol=1e-12)


def test_gnt_training_reduces_loss():
    from limits.finite import data

    X, Y = data.toy_task(seed=0, labels="teacher")
    net = F.mlp(40, 32, 1, activation="tanh", lr=0.5)
    r = F.train(net, X / np.sqrt(40), Y, 30, n_inits=2, seed=0, algorithm="gnt", gnt_damping=0.1,
                record_every=10)
    assert np.all(r.loss[-1] < 0.5 * r.loss[0])
    with pytest.raises(ValueError, match="gnt_damping"):
        F.train(net, X / np.sqrt(40), Y, 1, seed=0, algorithm="gnt", gnt_damping=0.0)


def test_update_directions_and_cosines():
    from limits.finite.compare import cosines, update_directions

    net, w, fwd, g = _setup(d_out=2)
    X = fwd.X
    Y = fwd.f[0] - g[0] * X.shape[0]          # targets consistent with g for init 0 (any Y works)
    d = update_directions(net, w, X, Y, algorithms=("bp", "gnt"), gnt_power=0.0)
    c = cosines(d["bp"], d["gnt"])
    np.testing.assert_allclose(c["all"], 1.0, rtol=1e-12)     # e_B = 0: identical directions
    d = update_directions(net, w, X, Y, algorithms=("bp", "gnt"), gnt_damping=0.1)
    c = cosines(d["bp"], d["gnt"])
    assert np.all(np.abs(c["all"]) <= 1 + 1e-12) and np.all(c["all"] < 1 - 1e-6)
    with pytest.raises(ValueError, match="algorithms"):
        update_directions(net, w, X, Y, algorithms=("pc",))
