"""limits.check: correct predictions pass, a 5 % error is flagged, statistics are honest."""
from dataclasses import replace

import numpy as np
import pytest

import limits


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(1)
    X1, X2 = rng.standard_normal((3, 8)), rng.standard_normal((4, 8))
    m = limits.mlp(8, 2, activation="erf", sigma_w2=1.5, sigma_b2=0.1)
    return m, X1, X2


def test_correct_kernel_prediction_passes_and_wrong_one_is_flagged(setup):
    m, X1, X2 = setup
    k = limits.kernels.kernel(m, X1, X2)
    c = limits.check(k, seed=0)
    assert c.passed, c.to_markdown()
    assert -0.6 < c.rate < -0.4 and c.rate_ci[0] <= -0.5 <= c.rate_ci[1]
    assert c.power < 0.05                      # the default sizes detect a 5 % error
    bad = limits.check(replace(k, nngp=1.05 * k.nngp, ntk=1.05 * k.ntk), seed=0)
    assert not bad.passed and abs(bad.scale_bias + 0.05 / 1.05) < 4 * bad.scale_bias_se
    for get in ("nngp", "ntk"):
        kk = limits.kernels.kernel(m, X1, X2, get=get)
        arr = getattr(kk, get)
        assert not limits.check(replace(kk, **{get: 1.05 * arr}), seed=1).passed


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_residual_nngp_with_layers(act):
    X = np.random.default_rng(4).standard_normal((3, 6))
    m = limits.resnet(6, 3, activation=act, sigma_w2=1.1, sigma_b2=0.05, rho=0.8)
    r = limits.kernels.nngp(X, model=m)
    c = limits.check(r, widths=(64, 128, 256), inits=128, seed=2, layers=True)
    assert c.passed, c.to_markdown()
    assert len(c.labels) == c.theory.size == 4 * 6 + 6 + 6   # K^0..K^3, K_out, Θ_out upper triangles


def test_check_outputs(setup, tmp_path):
    m, X1, X2 = setup
    c = limits.check(limits.kernels.kernel(m, X1, get="nngp"), widths=(32, 64, 128), inits=32, seed=0)
    md = c.to_markdown()
    assert "power" in md and "rate" in md
    fig = c.plot(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000
    import matplotlib.pyplot as plt

    plt.close(fig)
    c.save(tmp_path / "c")
    c2 = type(c).load(tmp_path / "c")
    np.testing.assert_array_equal(c2.z_inf, c.z_inf)
    assert c2.passed == c.passed
    # identical seeds → identical checks
    c3 = limits.check(limits.kernels.kernel(m, X1, get="nngp"), widths=(32, 64, 128), inits=32, seed=0)
    np.testing.assert_array_equal(c3.estimate, c.estimate)


def test_check_bad_input(setup):
    m, X1, _ = setup
    k = limits.kernels.kernel(m, X1, get="nngp")
    with pytest.raises(ValueError, match="inits"):
        limits.check(k, inits=1)
    with pytest.raises(ValueError, match="widths"):
        limits.check(k, widths=(64,))
    with pytest.raises(ValueError, match="no finite-network observable"):
        limits.check(object())
    with pytest.raises(ValueError, match="model"):
        limits.check(limits.kernels.nngp(X1, depth=2))


def test_dmft_prediction_checked_against_trained_networks():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 6))
    y = np.sign(X[:, 0])
    m = limits.mlp(6, 1, activation="linear", parameterisation="MF", gamma0=1.0, lr=0.1)
    d = limits.dmft.solve(X, y, model=m, steps=6)
    assert limits.Model.from_dict(d.inputs["model"]) == m
    c = limits.check(d, widths=(64, 128, 256), inits=48, seed=0)
    assert c.passed, c.to_markdown()
    bad = limits.check(replace(d, f=1.05 * d.f), widths=(64, 128, 256), inits=48, seed=0)
    assert not bad.passed
    with pytest.raises(ValueError, match="record"):
        limits.check(limits.dmft.solve(X, y, depth=2, activation="linear", gamma0=1.0, dt=0.1, steps=2))


def test_response_prediction_checked_by_finite_differences():
    X = np.random.default_rng(5).standard_normal((2, 20))
    m = limits.resnet(20, 3, activation="erf", sigma_w2=1.2, sigma_b2=0.2, rho=0.8)
    s = limits.kernels.response(X, model=m, width=100)
    c = limits.check(s, widths=(64, 128, 256), inits=48, seed=0)
    assert c.passed, c.to_markdown()
    bad = limits.check(replace(s, eta=1.05 * s.eta, chi=1.05 * s.chi, chi_out=1.05 * s.chi_out),
                       widths=(64, 128, 256), inits=48, seed=0)
    assert not bad.passed


def test_fluctuation_prediction_checked_by_across_init_variance():
    X = np.random.default_rng(5).standard_normal((2, 10))
    m = limits.resnet(10, 2, activation="erf", sigma_w2=1.2, sigma_b2=0.2)
    f = limits.kernels.kernel_fluctuations(X, model=m, width=100)
    c = limits.check(f, widths=(64, 128, 256), inits=1500, seed=0)
    assert c.passed, c.to_markdown()
    assert c.rate_expected == 0.0 and 0 < c.power < 0.2
    bad = limits.check(replace(f, var_C=1.3 * f.var_C, var_gram=1.3 * f.var_gram), widths=(64, 128, 256),
                       inits=1500, seed=0)
    assert not bad.passed
