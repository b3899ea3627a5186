"""limits.nfd.depth_width_report and the first order of the 1/N expansion (limits.nfd.linear_noise)."""
import json

import numpy as np
import pytest

from tests import benchmark_scripts as bs

import limits
from limits.nfd import depth_width as dw
from limits.nfd.covariance_sde import drift, drift_coefficient, smooth_drift
from limits.nfd.linear_noise import first_order

QUICK = dict(paths=400, steps=16, seed=3, progress=False)


@pytest.mark.parametrize("kw, msg", [
    (dict(depth=0, width=64), "depth"), (dict(depth=3, width=2.5), "width"), (dict(depth=True, width=8), "depth"),
    (dict(depth=4, width=64, activation="tanh"), "unknown activation"),
    (dict(depth=4, width=64, activation="os.system"), "unknown activation"),
    (dict(depth=4, width=64, rho=1.0), "rho"), (dict(depth=4, width=64, rho=float("nan")), "rho"),
    (dict(depth=4, width=4, c_minus=-3.0), "slope"), (dict(depth=4, width=64, paths=50), "paths"),
    (dict(depth=4, width=64, activation="shaped-tanh", shape=0.0), "shape"),
])
def test_bad_input_is_refused_by_name(kw, msg):
    with pytest.raises(ValueError, match=msg):
        dw.depth_width_report(**kw)


def test_exported_lazily_and_saved_and_loaded_identically(tmp_path):
    assert limits.nfd.depth_width_report is dw.depth_width_report and "depth_width_report" in limits.nfd.__all__
    r = dw.depth_width_report(8, 64, **QUICK)
    r.save(tmp_path / "r")
    back = dw.DepthWidthReport.load(tmp_path / "r")
    assert back.equals(r) and back.regime == r.regime and back.halving == r.halving


def test_small_T_gives_the_nngp_correlation():
    r = dw.depth_width_report(1, 100_000, **QUICK)
    assert r.regime == "kernel-like" and r.rho_sd < 0.01
    assert abs(r.rho_mean - r.nngp_rho) < 4 * r.rho_mean_se and abs(r.nngp_rho - 0.3) < 1e-4
    relu = dw.depth_width_report(3, 100_000, activation="relu")
    expected = 0.3
    for _ in range(3):           # the arc-cosine map of the relu NNGP correlation
        expected = (np.sqrt(1 - expected ** 2) + expected * (np.pi - np.arccos(expected))) / np.pi
    assert abs(relu.nngp_rho - expected) < 1e-10 and abs(relu.first_order_rho_mean - expected) < 1e-4
    assert relu.regime == "kernel-like"
    tanh = dw.depth_width_report(1, 100_000, "shaped-tanh", **QUICK)      # cubic shaping keeps ρ in the skeleton
    assert abs(tanh.nngp_rho - 0.3) < 1e-10 and abs(tanh.rho_mean - 0.3) < 4 * tanh.rho_mean_se
    assert tanh.regime == "kernel-like" and tanh.rho_sd < 0.01


@pytest.mark.parametrize("activation, depths, regimes", [
    ("shaped-relu", (1, 20, 400), ("kernel-like", "proportional", "degenerate")),
    ("relu", (1, 20, 400), ("kernel-like", "proportional", "degenerate")),
    ("shaped-tanh", (1, 20), ("kernel-like", "proportional")),
])
def test_the_regime_changes_as_L_over_N_grows(activation, depths, regimes):
    got = [dw.depth_width_report(L, 64, activation, **QUICK).regime for L in depths]
    assert got == list(regimes)


def test_regime_rule_thresholds():
    assert dw.regime_rule(1.0, 0.1, 0.0)[0] == "kernel-like"
    assert dw.regime_rule(1.0, 0.1, dw.KERNEL_LIKE_MAX_ERROR + 1e-3)[0] == "proportional"
    assert dw.regime_rule(dw.COLLAPSE_RATIO / 2, 0.1, 0.0)[0] == "degenerate"
    assert dw.regime_rule(1.0, 1.01 * dw.LOG_NORM_SD_MAX ** 2, 0.0)[0] == "degenerate"


def test_kernel_like_threshold_is_the_committed_datas():
    R = bs.load("depth_width_regimes")
    data = json.loads(R.OUT.read_text())
    assert dw.KERNEL_LIKE_MAX_ERROR == data["D_star"] < data["D_smallest_resolved"]
    again = R.derive(json.loads(R.DATA.read_text()))        # recomputed from the validation data (≈ 1 s)
    assert again["D_star"] == data["D_star"] and again["D_smallest_resolved"] == data["D_smallest_resolved"]


def test_docs_tables_are_generated_from_the_data():
    R = bs.load("depth_width_regimes")
    data, text = json.loads(R.OUT.read_text()), R.DOC.read_text()
    for begin, end, lines in ((R.BEGIN, R.END, R.regimes_table(data)), (R.K1_BEGIN, R.K1_END, R.leaky_table(data))):
        assert text.split(begin, 1)[1].split(end, 1)[0].strip().splitlines() == lines


def test_first_order_mean_is_the_projects_K1_over_N():
    """The linear-noise mean correction against limits.kernels.finite_width's K1/N (committed k1.json, smooth
    shaped activation, N = 256): within 3 % (the O(1/N) of the discrete layers)."""
    k1 = json.loads(bs.load("depth_width_validation").K1_DATA.read_text())
    K0 = np.array(k1["K0"])
    for r in k1["rows"][:4]:
        fo = first_order(K0, r["T"], lambda V: smooth_drift(V, k1["a"], k1["b"]))
        a, b = int(r["entry"][0]), int(r["entry"][1])
        assert abs(fo.m[a, b] - r["K1_over_N"]) < 0.03 * abs(r["K1_over_N"])
        assert fo.rk4_error < 1e-6 * abs(r["K1_over_N"]) * 100


def test_first_order_limits_exact():
    """Shaped relu: the log-norm's first order is the SDE's exact N(−T, 2T); Var ρ ≈ T(1 − ρ₀²)² as T → 0; a
    wrong diffusion (first order of a different SDE) is told apart."""
    K0 = np.array([[2.0, 0.6], [0.6, 2.0]])
    fo = first_order(K0, 0.5, lambda V: drift(V, drift_coefficient(1, -1)))
    m, v = fo.log_norm()
    assert abs(m + 0.5) < 1e-6 and abs(v - 1.0) < 1e-6
    T = 1e-4
    _, sd = first_order(K0, T, lambda V: drift(V, 1.0)).correlation()
    assert abs(sd ** 2 / (T * (1 - 0.09) ** 2) - 1) < 1e-3


def test_relu_norm_moments_exact():
    """Var(V_L/V₀) of He relu nets: the exact formula against a direct Monte Carlo of the layer factors
    R = 2 Σ relu(z)²/Σ z² (z ~ N(0, I_N)) and χ²_N/N, given no dead layer."""
    L, N, M = 5, 16, 100_000
    exact, first = dw.relu_norm_moments(L, N)
    rng = np.random.default_rng(0)
    z = rng.standard_normal((M, L, N))
    R = 2 * (np.maximum(z, 0) ** 2).sum(-1) / (z * z).sum(-1)
    x = np.prod(R * rng.chisquare(N, size=(M, L)) / N, axis=1)
    x = x[np.all(R > 0, axis=1)]
    se = np.sqrt(np.var((x - x.mean()) ** 2) / x.size)
    assert abs(x.var() - exact) < 4 * se and 0.5 * exact < first < exact
    assert abs(x.var() - 1.5 * exact) > 4 * se           # power: a 50 % wrong variance is rejected


def test_regime_decision_calibration_data():
    """Committed calibration (benchmarks/depth_width_regime_calibration.py): no false alarms beyond 5 % where the true
    D is below D*, power ≥ 80 % where it is ≥ 1.5 D*; the docs table is generated from the data."""
    C = bs.load("depth_width_regime_calibration")
    data = bs.data(C)
    for r in data["rows"]:
        if r["D_rho_true"] + 2 * r["D_rho_true_se"] < dw.KERNEL_LIKE_MAX_ERROR:
            assert r["rate_proportional"] <= 0.05, r
        if r["D_rho_true"] - 2 * r["D_rho_true_se"] >= 1.5 * dw.KERNEL_LIKE_MAX_ERROR:
            assert r["rate_proportional"] >= 0.8, r
    assert any(r["truth"] == "proportional" for r in data["rows"]) and any(r["truth"] == "kernel-like"
                                                                          for r in data["rows"])
    text = C.DOC.read_text()
    assert text.split(C.BEGIN, 1)[1].split(C.END, 1)[0].strip().splitlines() == C.docs_table(data)


def test_gallery_figure_is_drawn_from_the_committed_data():
    """figures/depth_width_correlation.json was computed from the committed validation data as they are now (their
    digests are its parameters), and `limits figure` reuses it (same cache key)."""
    import limits.gallery as gallery
    from limits.gallery.depth_width import source_digests

    stored = json.loads((bs.ROOT / "figures" / "depth_width_correlation.json").read_text())
    spec = gallery.get("depth_width_correlation")
    assert "absent" not in source_digests().values()
    assert stored["key"] == gallery._key(spec, spec.resolved_params(True)) and stored["quick"] is True
    assert gallery.load_data("depth_width_correlation", bs.ROOT / "figures")["data"]["digests"] == source_digests()
