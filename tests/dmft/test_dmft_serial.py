"""DMFT of compositions (limits.dmft.serial, docs/theory/dmft.rst §6): operators, the γ0 → 0 limit, agreement with
the MLP DMFT, responses by reverse mode, refusals, cost and results."""
import numpy as np
import pytest

import limits
from limits.errors import ModelError
from limits.dmft.serial import spatial
from limits.dmft.serial.chain import build_chain
from limits.dmft.serial.factor import CausalFactor
from limits.layers.conv import patch

L = limits.layers


def _psd(n, rng, rank=None):
    A = rng.standard_normal((n, rank or n))
    return A @ A.T / A.shape[1]


@pytest.mark.parametrize("conv, shape", [
    (L.Conv((3, 3), "SAME"), (4, 5)), (L.Conv((3, 2), "VALID", strides=(2, 1)), (5, 4)),
    (L.Conv((3, 3), "CIRCULAR", strides=(2, 2)), (4, 4)), (L.Conv((3,), "SAME", strides=(2,)), (7,)),
    (L.Conv((2,), "CIRCULAR"), (5,))])
def test_patch_operator_is_the_conv_kernel_rule_and_its_adjoint(conv, shape):
    rng = np.random.default_rng(0)
    P, C = 2, 3
    X = rng.standard_normal((P,) + shape + (C,))
    ch = build_chain(limits.serial(conv, L.Activation("tanh"), L.Flatten(), L.Dense()), X)
    st = ch.stages[0]
    S = int(np.prod(shape))
    K = _psd(P * S, rng)
    ours = spatial.forward(st, K, 1.7)
    # the layer's rule on blocks (A, B, s1, s1', s2, s2', …)
    nsp = len(shape)
    K6 = K.reshape((P,) + shape + (P,) + shape)
    perm = [0, nsp + 1] + [a for d in range(nsp) for a in (1 + d, nsp + 2 + d)]
    out = patch(np.ascontiguousarray(K6.transpose(perm)), conv.axes(shape), True, 1.7)
    So = st.S_out
    osp = out.shape[2::2]
    back = out.transpose([0] + [2 + 2 * d for d in range(nsp)] + [1] + [3 + 2 * d for d in range(nsp)])
    assert np.max(np.abs(ours - back.reshape(P * So, P * So))) < 1e-13 and int(np.prod(osp)) == So
    G = _psd(P * So, rng)
    assert abs(np.sum(ours * G) - 1.7 * np.sum(K * spatial.adjoint(st, G))) < 1e-12 * np.sum(np.abs(ours * G))


def test_causal_factor_reproduces_rank_deficient_two_time_kernels():
    rng = np.random.default_rng(1)
    b, n_t = 4, 5
    for K in (_psd(b * n_t, rng), np.kron(np.ones((n_t, n_t)), _psd(b, rng)), _psd(b * n_t, rng, rank=7)):
        F = CausalFactor(n_t, b)
        for t in range(n_t):
            F.add_row(t, K[t * b:(t + 1) * b, :(t + 1) * b])
        assert np.max(np.abs(F.L @ F.L.T - K)) < 1e-9 * np.max(np.abs(K))
        assert np.all(np.triu(F.L, b + 1)[:b * (n_t - 1), b:] == 0)        # causal: no entry above the block diagonal


def _zscores(a, a_se, b):
    return np.abs(a - b) / np.maximum(a_se, 1e-12)


@pytest.mark.parametrize("kind", ["relu-gap", "deep-strided"])
def test_lazy_limit_is_the_ntk_prediction_of_the_composition(kind):
    rng = np.random.default_rng(2)
    if kind == "relu-gap":
        X = rng.standard_normal((3, 4, 4, 1))
        comp = limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.1), L.LayerNorm(), L.Activation("relu"),
                             L.GlobalAvgPool(), L.Dense())
    else:
        X = rng.standard_normal((2, 4, 3, 2))
        comp = limits.serial(L.Conv((2, 2), "VALID", strides=(2, 1), sigma_b2=0.2), L.Activation("tanh"),
                             L.AvgPool((1, 2), padding="SAME"), L.Conv((1, 2), "CIRCULAR", sigma_w2=1.5),
                             L.Activation("erf"), L.Flatten(), L.Dense())
    y = np.array([1.0, -1.0, 0.5])[:X.shape[0]]
    d = limits.dmft.solve(X, y, model=comp, gamma0=1e-4, dt=0.3, steps=3, M=800, replicas=8, seed=3)
    g = limits.predict.gradient_descent(comp, X, y, X, t=np.arange(4), learning_rate=0.3, flow=False)
    assert np.max(_zscores(d.f[1:], d.f_se[1:], g.mean_train[1:, :, 0])) < 5
    assert np.max(_zscores(d.ntk[0], d.ntk_se[0], d.ntk_lazy)) < 5
    assert np.max(d.f_se[1:] / np.abs(g.mean_train[1:, :, 0])) < 0.05           # the test has power
    assert np.array_equal(d.ntk_lazy, limits.kernels.kernel(comp, X).ntk)


@pytest.mark.parametrize("depth", [1, 2])
def test_dense_composition_is_the_mlp_dmft(depth):
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((3, 4)), np.array([1.0, -1.0, 1.0])
    comp = limits.serial(*([L.Dense(), L.Activation("tanh")] * depth), L.Dense())
    steps = 4 if depth == 1 else 3
    d = limits.dmft.solve(X, y, model=comp, gamma0=1.5, dt=0.25, steps=steps, M=1500, replicas=8, seed=0)
    runs = np.array([limits.dmft.solve(X, y, depth=depth, activation="tanh", gamma0=1.5, dt=0.25, steps=steps,
                                       M=1500 if depth == 1 else 400, seed=s).f for s in range(4)])
    m, se = runs.mean(0), runs.std(0, ddof=1) / 2
    z = np.abs(d.f[1:] - m[1:]) / np.sqrt(d.f_se[1:] ** 2 + se[1:] ** 2)
    assert np.max(z) < 5
    lazy = limits.dmft.solve(X, y, model=comp, gamma0=1e-4, dt=0.25, steps=steps, M=1500, replicas=8, seed=0)
    assert np.max(np.abs(d.f[-1] - lazy.f[-1]) / np.hypot(d.f_se[-1], lazy.f_se[-1])) > 4     # γ0 = 1.5 is not lazy


@pytest.mark.parametrize("layer, reason", [(L.LayerNorm(), "LayerNorm.*treated directly after a Dense/Conv"),
                                           (L.Attention(n_heads=2), "Attention: .*no such DMFT"),
                                           (L.Residual(L.Dense()), "Residual: .*not implemented")])
def test_untreated_layers_are_refused_by_name(layer, reason):
    X = np.random.default_rng(0).standard_normal((2, 4, 3))
    comp = limits.serial(L.Dense(), L.Activation("tanh"), layer, L.GlobalAvgPool(), L.Dense())
    with pytest.raises(ModelError, match=reason):
        limits.dmft.solve(X, np.ones(2), model=comp, dt=0.1, steps=2)


def test_bad_compositions_and_arguments_are_refused():
    X = np.random.default_rng(0).standard_normal((2, 4, 4, 1))
    y = np.ones(2)
    deep_relu = limits.serial(L.Conv((3, 3)), L.Activation("relu"), L.Conv((3, 3)), L.Activation("relu"),
                              L.GlobalAvgPool(), L.Dense())
    with pytest.raises(ModelError, match="'relu'.*not smooth"):
        limits.dmft.solve(X, y, model=deep_relu, dt=0.1, steps=2)
    cnn = limits.serial(L.Conv((3, 3)), L.Activation("relu"), L.GlobalAvgPool(), L.Dense(sigma_b2=0.1))
    with pytest.raises(ModelError, match="read-out bias"):
        limits.dmft.solve(X, y, model=cnn, dt=0.1, steps=2)
    cnn = limits.serial(L.Conv((3, 3)), L.Activation("relu"), L.GlobalAvgPool(), L.Dense())
    with pytest.raises(ValueError, match="dt"):
        limits.dmft.solve(X, y, model=cnn, T=1.0)
    with pytest.raises(ValueError, match="method"):
        limits.dmft.solve(X, y, model=cnn, dt=0.1, steps=2, method="flow")
    with pytest.raises(ValueError, match="do not apply to a composition"):
        limits.dmft.solve(X, y, model=cnn, dt=0.1, steps=2, depth=2)
    with pytest.raises(ValueError, match="needs ≈ .*max_memory"):
        limits.dmft.solve(X, y, model=cnn, dt=0.1, steps=2, max_memory=1e5)
    with pytest.raises(limits.dmft.StepTooLarge):
        limits.dmft.solve(X, y, model=cnn, dt=50.0, steps=2)
    with pytest.raises(ModelError, match="output has 16 positions"):
        limits.dmft.solve(X, y, model=limits.serial(L.Conv((3, 3)), L.Activation("relu"), L.Conv((3, 3))), dt=0.1,
                          steps=2)


def test_result_roundtrip_test_inputs_and_progress_line(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(4)
    X, Xs = rng.standard_normal((3, 3, 3, 1)), rng.standard_normal((2, 3, 3, 1))
    comp = limits.serial(L.Conv((2, 2), "SAME"), L.Activation("gelu"), L.Flatten(), L.Dense())
    monkeypatch.setenv("LIMITS_PROGRESS_INTERVAL", "0")
    d = limits.dmft.solve(X, np.array([1.0, -1.0, 0.0]), model=comp, gamma0=1.0, dt=0.2, steps=3, M=200, replicas=2,
                          seed=1, X_test=Xs, progress=True)
    assert "dmft (composition)" in capsys.readouterr().err
    assert d.f_test.shape == (4, 2) and d.ntk_test.shape == (4, 2, 3) and d.Phi[0].shape == (4, 45, 45)
    assert np.all(d.f_test[0] == 0) and np.all(d.f_test_se[1:] > 0)
    d.save(tmp_path / "r")
    back = limits.results.load_result(tmp_path / "r")
    assert np.array_equal(back.f, d.f) and np.array_equal(back.Phi[0], d.Phi[0]) and back.chain == d.chain
    assert d.alignment().shape == (1, 4)


def _remarch(st, u, r, n_t):
    """The stage's single-site march at fixed operators C, D (and LayerNorm statistics): (x, g) per path and time
    from sources (u, r)."""
    M, bh, bx = u.shape[0], st.bh, st.bx
    x, g = np.zeros((M, n_t, bx)), np.zeros((M, n_t, bh))
    for t in range(n_t):
        h = u[:, t] + g[:, :t].reshape(M, -1) @ st.C[t * bh:(t + 1) * bh, :t * bh].T
        a, x[:, t] = st.psi.forward(h, t, frozen=True)
        z = r[:, t] + x[:, :t + 1].reshape(M, -1) @ st.D[t * bx:(t + 1) * bx, :(t + 1) * bx].T
        g[:, t] = st.psi.backward(z, a, t, frozen=True)
    return x, g


@pytest.mark.parametrize("norm", [False, True])
def test_responses_by_reverse_mode_equal_finite_differences_of_the_march(norm):
    from limits.dmft.serial.march import Stage, backward_step, forward_step
    from limits.dmft.serial.responses import response_row

    rng = np.random.default_rng(5)
    X = rng.standard_normal((2, 3, 3, 1))
    ln = [L.LayerNorm()] if norm else []
    comp = limits.serial(L.Conv((2, 2), "SAME", sigma_b2=0.1), *ln, L.Activation("tanh"),
                         L.AvgPool((2, 1), strides=(1, 1)), L.Conv((2, 2), "VALID", sigma_w2=1.5), *ln,
                         L.Activation("erf"), L.GlobalAvgPool(), L.Dense())
    ch = build_chain(comp, X)
    n_t, M = 3, 6
    K0, Gt = spatial.input_kernel(ch), spatial.readout_kernel(ch)
    stages = [Stage(ch, 0, M, n_t, rng, static_u=K0), Stage(ch, 1, M, n_t, rng, static_r=Gt)]
    Delta, A = np.zeros((n_t, 2)), [None, None]
    for t in range(n_t):
        forward_step(ch, stages, t, Delta, 2.0 * 0.3, A, False)
        backward_step(ch, stages, t, Delta, 2.0 * 0.3, False)
        Delta[t] = [0.7, -1.1]
    for k, kind in ((0, "A"), (1, "B")):
        st = stages[k]
        u = st.h - np.einsum("ij,mj->mi", st.C, st.g.reshape(M, -1)).reshape(st.h.shape)
        r = st.z - np.einsum("ij,mj->mi", st.D, st.x.reshape(M, -1)).reshape(st.z.shape)
        x0, g0 = _remarch(st, u, r, n_t)
        assert np.max(np.abs(x0 - st.x)) < 1e-12 and np.max(np.abs(g0 - st.g)) < 1e-12
        t = n_t - 1
        row = response_row(st, t, kind)
        src, out = (r, lambda xg: xg[0][:, t]) if kind == "A" else (u, lambda xg: xg[1][:, t])
        fd = np.zeros_like(row)
        eps = 1e-6
        for c in range(row.shape[1]):
            s, j = divmod(c, src.shape[2])
            hi, lo = src.copy(), src.copy()
            hi[:, s, j] += eps
            lo[:, s, j] -= eps
            args = (u, hi) if kind == "A" else (hi, r)
            args_lo = (u, lo) if kind == "A" else (lo, r)
            fd[:, c] = np.mean(out(_remarch(st, *args, n_t)) - out(_remarch(st, *args_lo, n_t)), axis=0) / (2 * eps)
        assert np.max(np.abs(row - fd)) < 1e-7 * max(1.0, np.max(np.abs(row)))
        assert np.max(np.abs(row)) > 1e-3                     # responses are not trivially zero
