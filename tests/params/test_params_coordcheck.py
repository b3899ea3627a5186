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
