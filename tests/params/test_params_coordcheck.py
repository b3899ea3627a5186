"""Empirical exponent checker: fitted log–log slopes of finite networks vs symbolic predictions."""
import numpy as np
import sympy as sp
import pytest

from limits.finite.coordcheck import CoordCheck, depth_check, width_check
from limits.params import alpha_analysis, named, two_layer_block, two_layer_block_correction


def test_width_quick_mup_vs_ntk_vs_sp():
    kw = dict(widths=[64, 128, 256, 512], seeds=4, quantities=("df", "dh:hidden"), seed=3)
    mup = width_check(named("muP"), **kw)
    ntk = width_check(named("NTK"), **kw)
    spp = width_check(named("SP"), **kw)
    assert mup.fit("dh:hidden").predicted == 0 and mup.fit("dh:hidden").consistent
    assert ntk.fit("dh:hidden").predicted == -0.5 and ntk.fit("dh:hidden").consistent
    assert spp.fit("df").predicted == 1 and spp.fit("df").consistent
    # the checker can fail: NTK features are not Θ(1), SP output is not Θ(1)
    assert not (ntk.fit("dh:hidden").ci_low <= 0 <= ntk.fit("dh:hidden").ci_high)
    assert not (spp.fit("df").ci_low <= 0 <= spp.fit("df").ci_high)
    assert "| df |" in mup.to_markdown()


def test_coordcheck_result_round_trip(tmp_path):
    c = width_check(named("MF"), widths=[32, 64, 128], seeds=3, quantities=("dh:h0",), seed=1)
    c.save(tmp_path / "cc")
    d = CoordCheck.load(tmp_path / "cc")
    assert d.equals(c)


def test_depth_quick():
    p = named("MF", convention="std")
    for alpha in (0.5, 1.0):
        pred = float(alpha_analysis(alpha)["init_log_growth_exponent"])
        c = depth_check(p, depths=[4, 8, 16, 32], N=64, alpha=alpha, seeds=4, quantities=("dh:last",),
                        predicted={"dh:last": pred}, seed=2)
        assert c.fit("dh:last").consistent, c.to_markdown()


def test_bad_inputs():
    with pytest.raises(ValueError, match="widths"):
        width_check(named("muP"), widths=[64, 128])
    with pytest.raises(ValueError, match="seeds"):
        width_check(named("muP"), widths=[32, 64, 128], seeds=1)


@pytest.mark.slow
def test_width_full_sweep_2_6_to_2_11():
    widths = [2 ** k for k in range(6, 12)]
    for name, q, pred in (("muP", "dh:hidden", 0.0), ("NTK", "dh:hidden", -0.5), ("SP", "df", 1.0)):
        c = width_check(named(name), widths=widths, seeds=6, quantities=(q,), seed=7)
        f = c.fit(q)
        assert f.predicted == pred and f.consistent, c.to_markdown()


@pytest.mark.slow
def test_depth_full_sweep_and_two_layer_block():
    p = named("MF", convention="std")
    depths = [2 ** k for k in range(2, 8)]
    for alpha in (0.5, 1.0):
        c = depth_check(p, depths=depths, N=256, alpha=alpha, seeds=6, quantities=("dh:last",),
                        predicted={"dh:last": 1 - 2 * alpha}, seed=5)
        assert c.fit("dh:last").consistent, c.to_markdown()
    x, y = two_layer_block_correction()
    for corr in (False, True):
        tb = two_layer_block(eta1_n=x, eta1_L=y if corr else 0)
        c = depth_check(p, depths=depths[:-1], N=64, block_layers=2, branch=lambda B: B ** -0.5, seeds=6,
                        quantities=("dWh:block1",), predicted={"dWh:block1": float(tb["delta_u"][1])},
                        lr_block={1: (lambda B: B ** float(y))} if corr else None, seed=4)
        assert c.fit("dWh:block1").consistent, c.to_markdown()


def test_local_rules_one_step_predictions_and_quick_check():
    from limits.params import Parameterisation

    tp = named("muP", convention="std", algorithm="tp")
    assert tp.one_step_exponents()["dh:hidden"] == 0
    bad = Parameterisation.make(a=0, b=[0, "1/2", 1], c=[-1, 0, 1], algorithm="dtp")
    assert bad.one_step_exponents()["dh:h0"] == sp.Rational(3, 2)
    gnt = named("muP", convention="std", algorithm="gnt")
    assert gnt.one_step_exponents()["gnt_damping_exponent"] == -1
    c = width_check(tp, widths=[32, 64, 128, 256], seeds=3, quantities=("dh:hidden",), seed=2)
    assert c.fit("dh:hidden").consistent
    with pytest.raises(ValueError, match="one_step_exponents covers"):
        named("muP", convention="std", algorithm="pc", gamma_bar_L=0).one_step_exponents()


def test_pc_single_shot_step_matches_seed003_first_order():
    """Seed 003 Eqs. S.26–S.28/S.42 (linear net): after one F-ini sequential sweep v_l − u_l = γ_L b_l with
    b_l = −P ∂ℓ/∂u_l (the BP signal), so e_1 = γ_L b_1 (read-in: exactly BP) and, for hidden layers,
    e_l = γ_L (b_l − W̃_l b_{l−1}) — not the BP signal. ΔW_l = lr_l m_l e_lᵀ h_{l−1} / P up to O(γ_L²)."""
    from limits.finite import concretise, init_weights, loss_and_grads
    from limits.finite.coordcheck import pc_single_shot_step

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 6)), rng.standard_normal((5, 1))
    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=0, gauge="a0")
    net = concretise(p, 32, 4, d_in=6, activation="linear", eta0=1.0)
    w = init_weights(net, 2, seed=1)
    g = 1e-6
    _, _, dW = pc_single_shot_step(net, w.W, X, Y, g, "linear", return_updates=True)
    _, grads, fwd = loss_and_grads(net, w, X, Y)
    layers = net.layers()
    names = net.layer_names()
    P = X.shape[0]
    b = {n: -P * grads.dpre[n] for n in names}
    for i, n in enumerate(names[:-1]):
        d = layers[n]
        if i == 0:
            e = g * b[n]
            inp = X[None]
        else:
            prev = names[i - 1]
            e = g * (b[n] - np.matmul(b[prev], np.swapaxes(d.mult * w.W[n], 1, 2)))
            inp = fwd.inp[n]
        expect = d.lr * d.mult * np.matmul(np.swapaxes(e, 1, 2), np.broadcast_to(inp, e.shape[:2] + inp.shape[-1:])) / P
        assert np.linalg.norm(dW[n] - expect) <= 1e-4 * np.linalg.norm(expect), n   # O(γ_L) relative
    # the read-in update is exactly γ_L × the BP (gradient-descent) update
    assert np.allclose(dW["in"] / g, -layers["in"].lr * grads.dW["in"], rtol=1e-4)


def test_pc_width_check_quick():
    from limits.finite.coordcheck import pc_width_check
    from limits.params import update_exponents

    p = named("muP", convention="std", algorithm="pc", gamma_bar_L=-1, gauge="a0")
    u = update_exponents(p)
    c = pc_width_check(p, widths=[32, 64, 128, 256], seeds=3, predicted={"dh:hidden": -u["r"]}, seed=1)
    assert c.fit("dh:hidden").consistent
    with pytest.raises(ValueError, match="gamma_bar_L"):
        pc_width_check(named("muP", convention="std"), widths=[32, 64, 128])
