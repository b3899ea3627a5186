"""Envelope-theorem gradients of F*, BP / Gauss–Newton gradients, limits and training (docs/theory/pc.rst §2)."""
import numpy as np
import pytest

from limits import pc
from limits.stats import loglog_fit


def rand_net(rng, dims, scale=1.0):
    return [scale * rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i]) for i in range(len(dims) - 1)]


@pytest.mark.parametrize("cfg", [dict(), dict(skips="1-skip", multipliers=[1, .5, .5, .7]),
                                 dict(layer_weights=[0.5, 2.0, 1.0, 3.0]), dict(nudge=0.8)])
def test_envelope_gradient_finite_differences(cfg):
    rng = np.random.default_rng(0)
    W = rand_net(rng, [3, 4, 4, 4, 2], 1.2)
    X, Y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    g = pc.pc_gradients(W, X, Y, **cfg)
    h = 1e-5
    for l in range(4):
        D = rng.standard_normal(W[l].shape)
        Wp = [w.copy() for w in W]; Wm = [w.copy() for w in W]
        Wp[l] += h * D; Wm[l] -= h * D
        fd = (pc.equilibrium(Wp, X, Y, **cfg).energy - pc.equilibrium(Wm, X, Y, **cfg).energy) / (2 * h)
        assert abs(fd - np.sum(g[l] * D)) < 1e-8 * max(1, abs(fd))


def test_bp_gradient_finite_differences():
    rng = np.random.default_rng(1)
    W = rand_net(rng, [3, 4, 4, 2])
    X, Y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    g = pc.bp_gradients(W, X, Y)
    h = 1e-6
    for l in range(3):
        D = rng.standard_normal(W[l].shape)
        Wp = [w.copy() for w in W]; Wm = [w.copy() for w in W]
        Wp[l] += h * D; Wm[l] -= h * D
        fd = (pc.equilibrium(Wp, X, Y).mse - pc.equilibrium(Wm, X, Y).mse) / (2 * h)
        assert abs(fd - np.sum(g[l] * D)) < 1e-8 * max(1, abs(fd))


def test_S_to_identity_limit_gives_bp_at_rate_c2():
    """Output weights scaled by c → 0: S → I, ε*_l → BP errors, F* → MSE, cos → 1, all O(c²)."""
    rng = np.random.default_rng(2)
    W0 = rand_net(rng, [4, 8, 8, 8, 3], 1.0)
    X, Y = rng.standard_normal((6, 4)), rng.standard_normal((6, 3))
    cs = np.array([0.1, 0.05, 0.025, 0.0125, 0.00625])
    dev_cos, dev_F = [], []
    for c in cs:
        W = W0[:-1] + [c * W0[-1]]
        e = pc.equilibrium(W, X, Y)
        dev_F.append(e.mse / e.energy - 1)
        dev_cos.append(1 - pc.total_cosine(pc.pc_gradients(W, X, Y), pc.bp_gradients(W, X, Y)))
        G = pc.output_jacobians(pc.make_net(W))
        np.testing.assert_allclose(e.errors[1], np.linalg.solve(e.S, e.residual.T).T @ G[2], atol=1e-12)
    assert abs(loglog_fit(cs, dev_F).slope - 2.0) < 0.03      # deterministic: next order is O(c⁴)
    assert abs(loglog_fit(cs, dev_cos).slope - 2.0) < 0.06
    # exact limit: with S = I the errors are the BP errors G_lᵀ r
    W = W0[:-1] + [1e-7 * W0[-1]]
    e = pc.equilibrium(W, X, Y)
    G = pc.output_jacobians(pc.make_net(W))
    np.testing.assert_allclose(e.errors[0], e.residual @ G[1], rtol=1e-10, atol=1e-20)
    assert abs(e.energy / e.mse - 1) < 1e-12


def test_hidden_layer_weights_to_zero_give_minimum_norm_gn_targets():
    rng = np.random.default_rng(3)
    W = rand_net(rng, [3, 5, 5, 5, 2], 1.3)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    G = pc.output_jacobians(pc.make_net(W))
    J = np.concatenate([G[l] for l in (1, 2, 3)], axis=1)               # hidden error → output map
    prev = None
    for lam in [1e-2, 1e-4, 1e-6]:
        e = pc.equilibrium(W, X, Y, layer_weights=[lam, lam, lam, 1.0])
        eps = np.concatenate([e.errors[l] for l in (0, 1, 2)], axis=1)
        target = e.residual @ np.linalg.pinv(J).T                       # min-norm solution of J ε = r
        dev = np.max(np.abs(eps - target))
        if prev is not None:
            assert dev < 0.02 * prev                                    # O(λ) convergence
        prev = dev
    assert prev < 1e-5
    # single hidden layer → its own GN target G_l⁺ r (the ρ → 0 GNT of seed 003 Prop. 3.3)
    e = pc.equilibrium(W, X, Y, layer_weights=[1.0, 1e-9, 1.0, 1.0])
    np.testing.assert_allclose(e.errors[1], e.residual @ np.linalg.pinv(G[2]).T, atol=1e-6)
    gn = pc.gn_gradients(W, X, Y, damping=0.0)
    gp = pc.pc_gradients(W, X, Y, layer_weights=[1.0, 1e-9, 1.0, 1.0])
    assert pc.cosine(gn[1] * 1e-9, gp[1]) > 0.99       # same direction up to z* vs forward inputs


def test_gamma_bar_switch_first_order_vs_gn_like():
    """μP init (output std 1/M): γ̄_L = 0 (γ_L = 1) → PC → BP as M grows; γ̄_L = −1 (γ_L = M) keeps
    C_γ = O(1), so the PC gradient stays away from BP (seed 003 Cor. 4.3)."""
    rng = np.random.default_rng(4)

    def dev(M, gbar, reps=4):
        out = []
        for _ in range(reps):
            W = [rng.standard_normal((M, 6)) / np.sqrt(6), rng.standard_normal((M, M)) / np.sqrt(M),
                 rng.standard_normal((3, M)) / M]
            X, Y = rng.standard_normal((1, 6)), rng.standard_normal((1, 3))
            gp = pc.pc_gradients(W, X, Y, layer_weights=[1, 1, float(M) ** (-gbar)])
            out.append(1 - pc.cosine(gp[-1], pc.bp_gradients(W, X, Y)[-1]))
        return np.mean(out)

    d0 = [dev(M, 0) for M in (32, 128, 512)]
    d1 = [dev(M, -1) for M in (32, 128, 512)]
    assert d0[2] < d0[0] / 5 and d0[2] < 0.01
    assert min(d1) > 0.05


def test_training_pc_and_bp_gd_and_adam():
    rng = np.random.default_rng(5)
    W = rand_net(rng, [4, 8, 8, 1], 1.0)
    X, Y = rng.standard_normal((10, 4)), np.sign(rng.standard_normal((10, 1)))
    for obj in ("pc", "bp"):
        for opt, lr in (("gd", 0.05), ("adam", 0.01)):
            tr = pc.train(W, X, Y, objective=obj, optimizer=opt, lr=lr, steps=60)
            assert tr.mse[-1] < 0.5 * tr.mse[0]
            assert np.all(tr.s >= 1.0)
            assert np.all(tr.energy <= tr.mse + 1e-15)             # F* = MSE/s ≤ MSE
    with pytest.raises(ValueError, match="diverged"):
        pc.train(W, X, Y, objective="bp", lr=1e4, steps=50)


def test_gradient_flow_is_the_small_step_limit_of_gd():
    rng = np.random.default_rng(6)
    W = rand_net(rng, [3, 5, 5, 1], 1.0)
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal((6, 1))
    T = 0.5
    fl = pc.train(W, X, Y, objective="pc", optimizer="flow", lr=T / 4, steps=4, record_every=4)
    errs = []
    for n in (50, 100, 200):
        gd = pc.train(W, X, Y, objective="pc", optimizer="gd", lr=T / n, steps=n, record_every=n)
        errs.append(abs(gd.energy[-1] - fl.energy[-1]))
    assert errs[1] < 0.6 * errs[0] and errs[2] < 0.6 * errs[1]        # Euler error O(dt)
    assert errs[2] < 1e-3 * fl.energy[0]
