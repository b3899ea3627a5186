"""The first-order GIA gap (limits.nfd.gia_first_order) as a prediction that limits.check tests against
finite ResNets trained coupled and decoupled (limits.checking.nfd)."""
from dataclasses import replace

import numpy as np
import pytest

import limits
from limits.checking.nfd import analyse_gap, gap_samples
from limits.finite.gia import gia_task, online_sgd, online_sgd_modes


def _task(K=1, L=2, **kw):
    Xtr, ytr, Xte = gia_task(K=K)
    return limits.nfd.gia_first_order(Xtr, ytr, Xte, L, **kw)


@pytest.mark.parametrize("train_in", [True, False])
def test_linear_closed_form(train_in):
    # φ(u) = u: Σ_l = (1+dt)^l Σ_0, Γ_l = (1+dt)^(L−l), Γ_L = 1, so per unit η̄
    # gap = −Σ_k χ_k Σ_0(x, x_k) [Σ_l dt (1+dt)^l ((1+dt)^(L−l−1) − 1) + [U] ((1+dt)^L − 1)],
    # and L → ∞: −Σ_k χ_k Σ_0 (T e^T − e^T + 1 + [U](e^T − 1)).
    Xtr, ytr, Xte = gia_task(K=3)
    T, L = 0.7, 6
    dt = T / L
    r = limits.nfd.gia_first_order(Xtr, ytr, Xte, L, T=T, activation="linear", train_input_layer=train_in,
                                   limit=True, limit_depths=(256, 512))
    S0 = Xte @ Xtr.T / Xtr.shape[1]
    c = sum(dt * (1 + dt) ** l * ((1 + dt) ** (L - l - 1) - 1) for l in range(L)) + train_in * ((1 + dt) ** L - 1)
    np.testing.assert_allclose(r.gap, -(S0 @ -ytr) * c, rtol=1e-12, atol=1e-14)
    cinf = T * np.exp(T) - np.exp(T) + 1 + train_in * (np.exp(T) - 1)
    np.testing.assert_allclose(r.gap_limit, -(S0 @ -ytr) * cinf, rtol=1e-4)


def test_prediction_input_errors():
    Xtr, ytr, Xte = gia_task(K=2)
    with pytest.raises(ValueError, match="L"):
        limits.nfd.gia_first_order(Xtr, ytr, Xte, 0)
    with pytest.raises(ValueError, match="X_test"):
        limits.nfd.gia_first_order(Xtr, ytr, Xte[:, :3], 2)
    with pytest.raises(ValueError, match="chi"):
        limits.nfd.gia_first_order(Xtr, ytr, Xte, 2, chi=[1.0])
    r = limits.nfd.gia_first_order(Xtr, ytr, Xte, 2, chi=[0.1, 0.2])
    with pytest.raises(ValueError, match="chi"):
        limits.check(r, widths=(8, 16), inits=2)
    with pytest.raises(ValueError, match="eta_bar"):
        gap_samples(_task(), (8, 16), 2, 0, eta_bar=0.5)


def test_modes_share_one_initialisation():
    Xtr, ytr, Xte = gia_task(K=2)
    out = online_sgd_modes(Xtr, ytr, Xte, 24, 3, eta_bars=(0.01, 0.3), seed=4)
    for i, mode in enumerate(("coupled", "decoupled")):
        for j, eta in enumerate((0.01, 0.3)):
            ref = online_sgd(Xtr, ytr, Xte, 24, 3, eta_bar=eta, mode=mode, seed=4).f_test[-1]
            np.testing.assert_allclose(out[i, j], ref, rtol=1e-12, atol=1e-14)
    anti = online_sgd_modes(Xtr, ytr, Xte, 24, 3, eta_bars=(0.01,), seed=4, antithetic=True)
    np.testing.assert_allclose(anti[0, 0], out[0, 0], rtol=1e-12, atol=1e-14)   # coupled unchanged
    assert np.all(np.abs(anti[1, 0] - out[1, 0]) > 0)


def test_check_dispatch_equals_samples_and_analysis():
    r = _task()
    c = limits.check(r, widths=(16, 32, 64), inits=6, seed=3)
    smp, lin = gap_samples(r, (16, 32, 64), 6, 3)
    d = analyse_gap(r, (16, 32, 64), smp, seed=3, lin_terms=lin)
    np.testing.assert_array_equal(c.extrapolated, d.extrapolated)
    assert c.what.startswith("GIA first-order") and c.inits == 6
    assert max(c.details["removed_linear_term"]) < 1e-3 * np.max(np.abs(r.gap)) * 10


def test_first_order_gap_matches_finite_resnets_and_a_10pct_error_fails():
    # L = 2, one online-SGD step, widths 32–256 × 300 inits (power ≈ 6 %); samples drawn once, analysed three times
    r = _task(K=1, L=2)
    widths = (32, 64, 128, 256)
    smp, lin = gap_samples(r, widths, 300, 0)
    good = analyse_gap(r, widths, smp, lin_terms=lin)
    assert good.passed, good.to_markdown()
    assert good.power < 0.08
    for f in (0.9, 1.1):
        bad = analyse_gap(replace(r, gap=f * r.gap), widths, smp)
        assert not bad.passed, (f, bad.to_markdown())


@pytest.mark.slow
def test_first_order_gap_check_has_3pct_power_and_a_5pct_error_fails():
    # 1200 inits per width (≈ 30 s): power ≈ 3 %, the fitted rate of one network's deviation contains −1/2
    r = _task(K=1, L=2)
    widths = (32, 64, 128, 256)
    smp, lin = gap_samples(r, widths, 1200, 1)
    good = analyse_gap(r, widths, smp, lin_terms=lin)
    assert good.passed and good.power < 0.04, good.to_markdown()
    for f in (0.95, 1.05):
        assert not analyse_gap(replace(r, gap=f * r.gap), widths, smp).passed, f


@pytest.mark.exhaustive          # 30 s; the figure nfd_gia_first_order runs the same check at L = 4 and 16
def test_first_order_gap_check_at_figure_depth():
    # the figure's setting (K = 2 steps, L = 4) through the public limits.check; a 10 % error fails
    r = _task(K=2, L=4)
    c = limits.check(r, widths=(32, 64, 128, 256), inits=300, seed=0)
    assert c.passed, c.to_markdown()
    bad = limits.check(replace(r, gap=1.1 * r.gap), widths=(32, 64, 128, 256), inits=300, seed=0)
    assert not bad.passed
