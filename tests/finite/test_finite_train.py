"""Training loops and optimisers."""
import numpy as np
import pytest

import limits.finite as F
from limits.finite import data


def _toy_net(N=64, act="linear"):
    MF = {"convention": "variance", "input": {"a": 0, "b": 0, "c": 0}, "hidden": {"a": 0.5, "b": 0, "c": 0},
          "output": {"a": 0.5, "b": 0, "c": 0}, "d": 0.5}
    return F.concretise(MF, N, 4, d_in=40, activation=act, eta0=0.025)


def test_gd_reduces_loss_on_toy_task():
    X, Y = data.toy_task(seed=0)
    r = F.train(_toy_net(), X, Y, 150, n_inits=3, seed=1, record_every=50)
    assert r.loss.shape == (4, 3)
    assert np.all(r.loss[-1] < 0.5 * r.loss[0])
    assert np.all(np.diff(r.loss, axis=0) < 0)
    assert r.converged


def test_gd_step_equals_manual_update():
    net = F.resnet(3, 5, 2, d_out=1, activation="tanh", rho=0.5, sigma_b2=0.1, lr=0.3)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 1))
    w = F.init_weights(net, 2, seed=1)
    r = F.train(net, X, Y, 1, weights=w)
    _, g, _ = F.loss_and_grads(net, w, X, Y)
    w1 = r.final_weights()
    for k in w.W:
        np.testing.assert_allclose(w1.W[k], w.W[k] - 0.3 * g.dW[k], rtol=1e-13, atol=1e-15)
    for k in w.b:
        np.testing.assert_allclose(w1.b[k], w.b[k] - 0.3 * g.db[k], rtol=1e-13, atol=1e-15)


def test_gd_and_adam_on_a_quadratic():
    # ℓ(θ) = ½ Σ a_i θ_i²; GD: θ ← (1 − η a) θ; Adam first step: −η sign(g) (bias-corrected), then the recursion
    a = np.array([[1.0, 4.0, 0.25]])
    th = np.array([[1.0, -2.0, 3.0]])
    gd = F.GD({"x": 0.1})
    t1 = th.copy()
    for _ in range(5):
        t1 = t1 + gd.update({"x": a * t1})["x"]
    np.testing.assert_allclose(t1, (1 - 0.1 * a) ** 5 * th, rtol=1e-14)
    opt = F.Adam({"x": 0.01}, betas=(0.9, 0.999), eps=1e-8)
    t2 = th.copy()
    m = v = np.zeros_like(th)
    t_ref = th.copy()
    for t in range(1, 6):
        g = a * t2
        t2 = t2 + opt.update({"x": g})["x"]
        gr = a * t_ref
        m = 0.9 * m + 0.1 * gr
        v = 0.999 * v + 0.001 * gr**2
        t_ref = t_ref - 0.01 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        if t == 1:
            np.testing.assert_allclose(t2, th - 0.01 * np.sign(th), rtol=1e-6)
    np.testing.assert_allclose(t2, t_ref, rtol=1e-14)
    # Adam converges on the quadratic
    opt = F.Adam({"x": 0.05})
    t3 = th.copy()
    for _ in range(2000):
        t3 = t3 + opt.update({"x": a * t3})["x"]
    assert np.max(np.abs(t3)) < 1e-2


def test_sgd_minibatches_are_epoch_permutations():
    # minibatch order: a fresh permutation of the P samples per epoch from the given rng
    net = F.mlp(3, 5, 1, activation="tanh", lr=0.05)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal((6, 1))
    w = F.init_weights(net, 2, seed=1)
    r = F.train(net, X, Y, 5, weights=w, optimizer="sgd", batch_size=2, rng=np.random.default_rng(5))
    g = np.random.default_rng(5)
    g.integers(0, 2**63 - 1)                       # the init root (drawn first, even when weights are given)
    order_rng = np.random.default_rng(int(g.integers(0, 2**63 - 1)))
    wm = w.copy()
    batches = []
    for epoch in range(2):
        perm = order_rng.permutation(6)
        batches += [np.sort(perm[i:i + 2]) for i in (0, 2, 4)]
    for idx in batches[:5]:
        _, g, _ = F.loss_and_grads(net, wm, X[idx], Y[idx])
        for n in wm.W:
            wm.W[n] -= 0.05 * g.dW[n]
    for n in w.W:
        np.testing.assert_allclose(r.final_weights().W[n], wm.W[n], rtol=1e-12, atol=1e-15)
    assert sorted(np.concatenate(batches[:3]).tolist()) == list(range(6))


def test_online_uses_one_sample_per_step():
    net = F.mlp(3, 5, 1, activation="erf", lr=0.1)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 1))
    w = F.init_weights(net, 1, seed=1)
    r = F.train(net, X, Y, 2, weights=w, optimizer="online")
    w_manual = w.copy()
    for k in range(2):
        _, g, _ = F.loss_and_grads(net, w_manual, X[k:k + 1], Y[k:k + 1])
        for n in w_manual.W:
            w_manual.W[n] -= 0.1 * g.dW[n]
    for n in w.W:
        np.testing.assert_allclose(r.final_weights().W[n], w_manual.W[n], rtol=1e-13)


def test_gradient_flow_euler_converges_first_order():
    net = F.mlp(3, 6, 1, activation="tanh", lr=1.0)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 1))
    w = F.init_weights(net, 1, seed=2)
    T = 0.5
    f = {dt: F.train(net, X, Y, int(round(T / dt)), weights=w, optimizer="flow", dt=dt,
                     record_every=10**6).f[-1] for dt in (0.02, 0.01, 0.005)}
    e1 = np.abs(f[0.02] - f[0.01]).max()
    e2 = np.abs(f[0.01] - f[0.005]).max()
    assert 1.6 < e1 / e2 < 2.4       # Euler: error halves with dt
    assert F.train(net, X, Y, 5, weights=w, optimizer="flow", dt=0.01).t[-1] == pytest.approx(0.05)


def test_center_and_frozen_layers_and_records():
    X, Y = data.toy_task(seed=0)
    net = _toy_net(32).with_lr(1.0, **{"in": 0.0})
    r = F.train(net, X, Y, 10, n_inits=2, seed=0, center=True, X_test=X[:5], record_every=5)
    np.testing.assert_array_equal(r.f[0], 0.0)
    np.testing.assert_array_equal(r.f_test[0], 0.0)
    i_in = r.layer_names.index("in")
    np.testing.assert_array_equal(r.dW_fro[:, :, i_in], 0.0)
    assert np.all(r.dW_fro[-1, :, r.layer_names.index("out")] > 0)
    assert r.dh_rms.shape == (3, 2, len(r.rep_names))
    np.testing.assert_array_equal(r.dh_rms[:, :, r.rep_names.index("h0")], 0.0)   # read-in frozen
    assert np.all(r.dh_rms[-1, :, r.rep_names.index("h1")] > 0)


def test_decoupled_training_updates_both_copies_equally():
    net = F.resnet(3, 6, 2, d_out=1, activation="tanh", rho=0.5, lr=0.1)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 1))
    w = F.init_weights(net, 2, seed=1, decoupled=True)
    r = F.train(net, X, Y, 3, weights=w)
    w1 = r.final_weights()
    assert set(r.decoupled) == {"1.1", "2.1", "out"}
    for k in r.decoupled:
        np.testing.assert_allclose(w1.Wb[k] - w.Wb[k], w1.W[k] - w.W[k], rtol=1e-12, atol=1e-15)
    # and the result differs from coupled training
    r_c = F.train(net, X, Y, 3, weights=F.init_weights(net, 2, seed=1))
    assert not np.allclose(r_c.f[-1], r.f[-1])


def test_train_is_reproducible_and_saves(tmp_path):
    X, Y = data.toy_task(seed=0)
    net = _toy_net(16)
    a = F.train(net, X, Y, 5, n_inits=2, seed=3, optimizer="sgd", batch_size=5)
    b = F.train(net, X, Y, 5, n_inits=2, seed=3, optimizer="sgd", batch_size=5)
    np.testing.assert_array_equal(a.loss, b.loss)
    a.save(tmp_path / "tr")
    assert F.TrainResult.load(tmp_path / "tr").equals(a)


def test_divergence_is_reported_not_silent():
    X, Y = data.toy_task(seed=0)
    net = _toy_net(16).with_lr(1e4)
    with np.errstate(all="ignore"):
        r = F.train(net, X, Y, 50, n_inits=1, seed=0, X_test=X[:2])
    assert not r.converged
    assert np.isnan(r.loss[-1]).all() and np.isnan(r.f_test[-1]).all() and np.isnan(r.dh_rms[-1]).all()


def test_train_bad_input():
    X, Y = data.toy_task(seed=0)
    net = _toy_net(16)
    with pytest.raises(ValueError, match="optimizer"):
        F.train(net, X, Y, 1, seed=0, optimizer="lbfgs")
    with pytest.raises(ValueError, match="batch_size"):
        F.train(net, X, Y, 1, seed=0, optimizer="sgd")
    with pytest.raises(ValueError, match="Y"):
        F.train(net, X, Y[:5], 1, seed=0)
    with pytest.raises(ValueError, match="steps"):
        F.train(net, X, Y, -1, seed=0)
    with pytest.raises(ValueError, match="dt"):
        F.train(net, X, Y, 1, seed=0, dt=0.1)
    Xn = X.copy(); Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        F.train(net, Xn, Y, 1, seed=0)


@pytest.mark.parametrize("opt,kw", [("gd", {}), ("sgd", {"batch_size": 4})])
def test_chunked_training_equals_one_batch(opt, kw):
    X, Y = data.toy_task(seed=0)
    net = _toy_net(16, act="tanh")
    a = F.train(net, X, Y, 6, n_inits=5, seed=3, optimizer=opt, X_test=X[:3], **kw)
    b = F.train(net, X, Y, 6, n_inits=5, seed=3, optimizer=opt, X_test=X[:3], chunk=2, **kw)
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-12)
    np.testing.assert_allclose(a.f_test, b.f_test, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.dh_rms, b.dh_rms, rtol=1e-10, atol=1e-14)
    for k in a.final:
        np.testing.assert_allclose(a.final[k], b.final[k], rtol=1e-12, atol=1e-14)
