"""limits.check of the DMFT of a composition against finite mean-field compositions (limits.finite.serial_meanfield):
a correct DMFT passes, a wrong γ0 scaling and a dropped spatial index fail (the ≥ 4-width study is
benchmarks/dmft_serial_validation.py; its committed record is read by test_dmft_serial_validation_record)."""
import dataclasses

import numpy as np
import pytest

import limits
from limits.dmft.serial import solve_serial
from limits.finite.serial_meanfield import meanfield_factors, train_meanfield

L = limits.layers


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((3, 3, 3, 1)), np.array([1.0, -1.0, 1.0])
    comp = limits.serial(L.Conv((2, 2), "SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"), L.GlobalAvgPool(),
                         L.Dense())
    kw = dict(gamma0=1.0, dt=0.5, steps=4, M=800, replicas=16, seed=0)
    return X, y, comp, kw, limits.dmft.solve(X, y, model=comp, **kw)


def test_meanfield_compositions_use_the_mf_table_and_gamma0():
    comp = limits.serial(L.Conv((3, 3)), L.Activation("tanh"), L.Conv((3, 3)), L.Activation("tanh"), L.Flatten(),
                         L.Dense())
    fac = meanfield_factors(limits.params.layer_table(comp, "MF", convention="std"), 256, 2.0)
    assert fac[("0", "W")] == (1.0, 1.0, 256.0) and fac[("2", "W")] == (1.0, 1.0, 256.0)
    assert fac[("5", "W")] == (1.0, 1.0 / 16 / 2.0, 256.0) and fac[("2", "b")] == (1.0, 1.0, 256.0)


def test_check_passes_the_dmft_and_rejects_wrong_variants(case):
    X, y, comp, kw, d = case
    c = limits.check(d, widths=(64, 128, 256), inits=48, seed=1)
    assert c.passed, c.reasons
    assert c.power < 0.08 and c.theory.size == 4 * 3 + 4 + 3 * 6
    wrong_gamma = dataclasses.replace(limits.dmft.solve(X, y, model=comp, **{**kw, "gamma0": 1.4}), gamma0=1.0)
    assert not limits.check(wrong_gamma, widths=(64, 128, 256), inits=48, seed=1).passed
    no_space = solve_serial(X, y, comp=comp, ablate="spatial", **kw)
    assert not limits.check(no_space, widths=(64, 128, 256), inits=48, seed=1).passed


def test_finite_meanfield_training_is_centred_and_reproducible(case):
    X, y, comp, kw, _ = case
    a = train_meanfield(comp, 32, X, y, 3, 0.5, 1.0, 4, seed=7, X_test=X[:1], kernel_steps=[0, 3])
    b = train_meanfield(comp, 32, X, y, 3, 0.5, 1.0, 4, seed=7, X_test=X[:1], kernel_steps=[0, 3])
    assert np.array_equal(a["f"], b["f"]) and np.all(a["f"][0] == 0) and np.allclose(a["f_test"][:, :, 0], a["f"][:, :, 0])
    assert a["Phi"].shape == (2, 1, 4, 3, 3)
