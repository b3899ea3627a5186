"""The statistics of a μTransfer study (limits.torch.transfer_fit; numpy only): the local parabola, the bootstrap
drift and its interval, the verdict, diverged runs entering at their cap, and the verdict's calibration on
simulated studies whose true drift is known."""
import numpy as np
import pytest

from limits.torch import transfer_fit as F

X = np.arange(-12.0, -2.0)            # log2 learning rates
SIZES = np.array([64, 128, 256, 512])


def _study(drift, rng, S=4, noise=0.05, offset=0.1):
    """log loss = 0.3 (x − x*_k)² + per-seed offset + per-point noise, x*_k = −7 + drift · (log2 n_k − 7)."""
    opt = -7.0 + drift * (np.log2(SIZES) - 7.0)
    ly = (0.3 * (X[None, :, None] - opt[:, None, None]) ** 2 + rng.normal(0, offset, (len(SIZES), 1, S))
          + rng.normal(0, noise, (len(SIZES), len(X), S)) - 2.0)
    return np.exp(ly), opt


def test_parabola_vertex_is_exact_for_parabolas_and_flags_edges_and_missing_rows():
    truth = np.array([-6.3, -7.77, -2.9, -12.4])
    y = 2.0 * (X[None] - truth[:, None]) ** 2 + 1.0
    v, edge = F.parabola_vertex(X, y)
    assert np.allclose(v[:2], truth[:2], atol=1e-12)
    assert list(edge) == [False, False, True, True] and v[2] == -3.0 and v[3] == -12.0
    y[0, 7] = np.nan                                  # the minimum's neighbour missing: the grid minimum
    v, _ = F.parabola_vertex(X, np.vstack([y[0], np.full(X.size, np.nan)]))
    assert v[0] == -6.0 and np.isnan(v[1])
    irregular = np.array([-10.0, -9.0, -7.5, -7.0, -5.0])
    v, _ = F.parabola_vertex(irregular, (irregular + 7.3) ** 2)
    assert abs(v - (-7.3)) < 1e-12


def test_fit_recovers_a_known_drift_and_the_target_prediction():
    rng = np.random.default_rng(0)
    y, opt = _study(-1.0, rng)
    f = F.fit_drift(y, SIZES, X, rng, n_boot=500, target=2048)
    assert f.optimum.shape == (4,) and f.optimum_ci.shape == (4, 2) and f.drift_ci.shape == f.target_ci.shape == (2,)
    assert np.all(f.optimum_ci[:, 0] <= f.optimum) and np.all(f.optimum <= f.optimum_ci[:, 1])
    assert np.all(np.abs(f.optimum - opt) < 0.2)
    assert f.drift_ci[0] <= -1.0 <= f.drift_ci[1] and f.drift_ci[1] - f.drift_ci[0] < 0.3
    assert abs(f.target_optimum - (-7.0 - 4.0)) < 0.4 and f.target_ci[0] <= f.target_optimum <= f.target_ci[1]
    assert F.verdict(f.drift, f.drift_ci, 0.25)[0] == "drifts"


def test_verdict_rules():
    assert F.verdict(0.02, (-0.1, 0.12), 0.25)[0] == "transfers"
    assert F.verdict(0.1, (0.05, 0.2), 0.25)[0] == "transfers"        # significant but practically flat
    assert F.verdict(-0.8, (-1.0, -0.6), 0.25)[0] == "drifts"
    assert F.verdict(-0.2, (-0.5, 0.1), 0.25)[0] == "inconclusive"
    assert F.verdict(-0.8, (-1.0, -0.6), 0.25, at_edge=[False, True])[0] == "inconclusive"
    assert F.verdict(0.0, (np.nan, np.nan), 0.25)[0] == "inconclusive"


def test_diverged_runs_enter_at_their_cap_and_shape_the_fit():
    rng = np.random.default_rng(1)
    y, opt = _study(0.0, rng)
    div = np.zeros(y.shape, bool)
    div[:, -2:, :] = True                             # the two largest rates diverge everywhere
    cap = np.full(len(SIZES), 50.0)
    c = F.capped(np.where(div, np.inf, y), div, cap)
    assert np.all(c[div] == 50.0) and np.all(c[~div] == y[~div])
    f = F.fit_drift(c, SIZES, X, rng, n_boot=200)
    assert np.all(np.abs(f.optimum - opt) < 0.3)


def test_calibration_false_verdicts_on_a_flat_optimum_and_power_on_a_drift():
    """200 simulated studies per drift at a fixed seed (deterministic); the bounds hold with margin: the false
    'drifts' rate of a 95 % interval is ≈ 5 % at most, and a drift of −1 per doubling is seen every time."""
    rng = np.random.default_rng(2)
    y, _ = _study(0.0, rng)
    c = F.calibrate(y, SIZES, X, 0.25, rng, drifts=(0.0, -1.0), n_sim=200, n_boot=200)
    false_drift, se = c.rate(0.0, "drifts")
    assert false_drift <= 0.05 + 2 * max(se, 0.01)
    assert c.rate(0.0, "transfers")[0] >= 0.8
    assert c.rate(-1.0, "drifts")[0] >= 0.95
    assert np.allclose(c.rates.sum(1), 1.0)
    with pytest.raises(ValueError, match="2 seeds"):
        F.calibrate(y[:, :, :1], SIZES, X, 0.25, rng)


def test_small_sample_widening_and_the_coverage_it_buys():
    """The drift interval covers the true drift in ≥ 90 % of 200 simulated 4-seed studies (fixed seed; a 95 %
    interval: a 1-in-10⁴ chance of failing at true 95 % coverage); without the widening it covered far less."""
    assert [round(F.small_sample_factor(S), 1) for S in (3, 4, 5, 8)] == [3.1, 2.1, 1.7, 1.4]
    assert abs(F.small_sample_factor(10_000) - 1.0) < 1e-3
    rng = np.random.default_rng(3)
    hit = 0
    for _ in range(200):
        y, _ = _study(-0.3, rng, noise=0.15)
        f = F.fit_drift(y, SIZES, X, rng, n_boot=200)
        hit += f.drift_ci[0] <= -0.3 <= f.drift_ci[1]
    assert hit >= 180, hit
