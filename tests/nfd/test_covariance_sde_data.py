"""The committed validation of the neural covariance SDE (benchmarks/depth_width_validation.py, depth_width_k1.py):
the docs tables are generated from the data, and the data say what docs/theory/depth_width.rst claims."""
import json

import numpy as np
import pytest

from tests import benchmark_scripts as bs

V = bs.load("depth_width_validation")
DATA = bs.data(V)
K1 = json.loads(V.K1_DATA.read_text())


@pytest.mark.parametrize("which", ["finite", "relu", "k1"])
def test_docs_tables_are_generated_from_the_data(which):
    begin, end, lines = {"finite": (V.BEGIN, V.END, V.docs_table(DATA)), "relu": (V.RELU_BEGIN, V.RELU_END, V.relu_table(DATA)),
                         "k1": (V.K1_BEGIN, V.K1_END, V.k1_table(K1))}[which]
    text = V.DOC.read_text()
    assert text.split(begin, 1)[1].split(end, 1)[0].strip().splitlines() == lines


def test_power_and_false_alarms_of_the_distribution_check():
    for r in DATA["shaped"]:
        assert r["rho"]["ks_p_half_diffusion"] < 1e-6 and r["rho"]["ks_p_no_drift"] < 1e-6   # wrong SDEs rejected
        assert r["ks_null_rate_rho"] <= 0.03                                                 # nominal 0.01, 200 splits
        assert r["halving"]["rho_01"][0] ** 2 < (4 * r["halving"]["rho_01"][1]) ** 2 + 1e-6  # dt converged
    x = DATA["explicit_crosscheck"]
    assert x["ks_p_rho"] > 1e-3 and x["ks_p_log_norm"] > 1e-3


def test_the_sde_matches_finite_networks_up_to_the_predicted_order_1_over_N():
    from limits.nfd.covariance_sde import drift_coefficient

    for r in DATA["shaped"]:
        assert r["rho"]["ks_p"] > 1e-3                    # Bonferroni over the 6 cases at 1 %: none rejected
        if r["T"] < 0.5:
            assert abs(r["rho"]["z_mean"]) < 4
        # log-norm: the fluctuation of the positive fraction adds E log R = −6κ/N² per layer (docs §4)
        kap = drift_coefficient(DATA["c_plus"], DATA["c_minus"], r["N"])
        ln = r["log_norm"]
        se = ln["mde_mean"] / 2.80
        assert abs(ln["finite_mean"] - ln["sde_mean"] + 6 * kap * r["T"] / r["N"]) < 4 * se


def test_unshaped_relu_log_norm_exact_moments():
    from limits.nfd.covariance_sde import relu_log_norm

    for r in DATA["relu"]:
        m, v = relu_log_norm(r["T"], r["N"])
        assert abs(m - r["exact_mean"]) < 1e-12 and abs(v - r["exact_var"]) < 1e-12
        assert abs(r["z_exact_mean"]) < 4 and r["ks_p_exact_moments"] > 1e-3
        assert r["ks_p_half_variance"] < 1e-6


def test_k1_agreement():
    for r in K1["rows"]:
        if r["T"] < 0.5:
            assert abs(r["z_sde_vs_K_plus_K1"]) < 4
