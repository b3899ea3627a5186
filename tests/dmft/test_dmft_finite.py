"""Finite mean-field networks (limits.finite) trained with the same GD step converge to the DMFT."""
import numpy as np
import pytest

import limits.validate.dmft as vd


def _run(name, quick=True, seed=0):
    return vd._make(name)(np.random.default_rng(seed), quick)


def test_two_layer_tanh_finite_nets_converge_to_dmft():
    c = _run("two-layer tanh, γ0 = 1")
    assert c.verdict == "pass", c.detail
    assert abs(c.z) < 4 and c.rate_ci[0] <= -0.5 <= c.rate_ci[1]
    assert c.rate < -0.2          # the gap does shrink


def test_finite_trajectories_match_dmft_time_unit():
    """One GD step of the finite net (sum loss, η = η0 γ0² N) is one DMFT step of size η0: a wide
    linear two-layer net tracks the exact solution step by step, while a net whose DMFT is
    solved with the wrong step (η0/P, the mean-loss convention) does not."""
    X, y = vd._toy(3, 5, 1)
    fN = vd.finite_trajectories(X, y, 1, "linear", 1.0, 0.1, 6, 1024, 8, 0)
    import limits.dmft as dm

    good = dm.solve(X, y, depth=1, gamma0=1.0, dt=0.1, steps=6).f
    bad = dm.solve(X, y, depth=1, gamma0=1.0, dt=0.1 / 3, steps=6).f
    m = fN.mean(axis=1)
    se = fN.std(axis=1, ddof=1) / np.sqrt(8)
    assert np.max(np.abs(m - good)[1:] / se[1:]) < 4
    assert np.max(np.abs(m - bad)[1:] / se[1:]) > 10


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deep linear, seed-000 L = 5 weight layers (depth 4), γ0 = 1",
                                  # 45 s: also the validation case `limits validate dmft` runs (report rows)
                                  pytest.param("three-layer tanh (depth 2), γ0 = 1", marks=pytest.mark.exhaustive)])
def test_deep_cases_finite_nets_converge_to_dmft(name):
    c = _run(name)
    assert c.verdict == "pass", c.detail
