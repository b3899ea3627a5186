"""limits.check of limits.predict results: correct predictions pass, a 5 % error is flagged."""
from dataclasses import replace

import numpy as np
import pytest

import limits

W = (64, 128, 256)


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(0)
    m = limits.mlp(3, 1, activation="erf", sigma_w2=1.5, sigma_b2=0.1, lr=0.5)
    X = rng.standard_normal((8, 3))
    return m, X, np.sin(X[:, 0]), rng.standard_normal((3, 3))


def test_posterior_check_passes_and_flags_5_percent(task):
    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=0.05)
    c = limits.check(p, widths=W, inits=128, seed=0)
    assert c.passed, c.to_markdown()
    assert c.power < 0.05 and c.details["blocks"]["posterior mean"]["power"] < 0.05
    assert c.rate_ci[0] <= -0.5 <= c.rate_ci[1]
    assert not limits.check(replace(p, mean=1.05 * p.mean), widths=W, inits=128, seed=0).passed
    assert not limits.check(replace(p, cov=1.05 * p.cov, var=1.05 * p.var), widths=W, inits=128, seed=0).passed


def test_gd_check_passes_and_flags_5_percent(task):
    m, X, Y, Xs = task
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[1, 5, 20], flow=False, learning_rate=0.2)
    c = limits.check(g, widths=W, inits=96, seed=0)
    assert c.passed, c.to_markdown()
    b = c.details["blocks"]
    assert b["gd mean"]["power"] < 0.05, b
    bad = limits.check(replace(g, mean=1.05 * g.mean, mean_train=1.05 * g.mean_train), widths=W, inits=96, seed=0)
    assert not bad.passed


@pytest.mark.slow
def test_gd_check_flags_covariance_error(task):
    m, X, Y, Xs = task
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[1, 5, 20], flow=False, learning_rate=0.2)
    # the covariance block is less precise than the mean: a 25 % covariance error is flagged
    bad = limits.check(replace(g, cov=1.25 * g.cov, var=1.25 * g.var), widths=W, inits=96, seed=0)
    assert not bad.passed


@pytest.mark.slow
def test_gd_flow_check_mean_reduction(task):
    m, X, Y, Xs = task
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[2.0, 4.0], reduction="mean", learning_rate=2.0)
    c = limits.check(g, widths=W, inits=96, seed=1)
    assert c.passed, c.to_markdown()
    assert c.details["optimizer"] == "flow" and c.details["euler_gap"] < 1e-3
    assert c.details["blocks"]["gd mean"]["power"] < 0.05


def test_check_refuses_inputs_and_offgrid_flow(task):
    m, X, Y, Xs = task
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[1.0, 2.5])
    with pytest.raises(ValueError, match="multiples"):
        limits.check(g, widths=W, inits=4, seed=0)
    with pytest.raises(ValueError, match="X="):
        limits.check(g, widths=W, inits=4, seed=0, X=X)


def test_flow_step_richardson_is_second_order(task):
    """2·GD(dt) − GD(2dt) approaches the flow like dt² (one Euler run: like dt)."""
    from limits.checking.predict import _core, _flow_step
    from limits.predict import flow_filter

    m, X, Y, Xs = task
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[2.0, 4.0], reduction="mean", learning_rate=2.0)
    core, eta = _core(g, m)
    ts = np.array([2.0, 4.0])
    dt, ks, gap = _flow_step(g, core, eta, ts)
    assert gap < 1e-3 and np.all(ks % 2 == 0) and np.allclose(ks * dt, ts)
    flow = core.g(ts)
    errs = []
    for h in (dt, dt / 2, dt / 4):
        k = np.round(ts / h)
        rich = 2 * flow_filter(core.lam, k, eta * h, False) - flow_filter(core.lam, k / 2, 2 * eta * h, False)
        errs.append(np.max(np.abs(rich - flow)))
    order = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(order - 2) < 0.1), order
