"""Residual-network DMFT (docs/theory/dmft.rst §5): t = 0 kernels meet the nfd kernel ODE as B → ∞, the
β0 → 0 limit is the two-layer DMFT, and finite residual mean-field nets converge to it."""
import numpy as np
import pytest

import limits
import limits.stats
import limits.dmft as dm
from limits.dmft.residual import init_kernels


def test_init_kernels_meet_nfd_kernel_ode_at_rate_one_over_B():
    X = np.random.default_rng(0).standard_normal((3, 4))
    Kx = X @ X.T / 4
    k = limits.nfd.kernel_ode(X, T=1.5 ** 2, activation="erf")
    errs = []
    for B in (16, 32, 64):
        S, Ph = init_kernels(limits.activation("erf"), Kx, B + 1, 1.5)
        errs.append(max(np.max(np.abs(S[-1] - k.Sigma)), np.max(np.abs(Ph[-1] - k.K))))
    rate = np.polyfit(np.log([16, 32, 64]), np.log(errs), 1)[0]
    assert -1.15 < rate < -0.85 and errs[-1] < 0.01


def test_small_branch_reduces_to_two_layer():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 4))
    y = np.array([1.0, -0.5])
    ref = dm.solve(X, y, depth=1, gamma0=1.0, dt=0.1, steps=4)
    runs = [dm.solve(X, y, depth=3, gamma0=1.0, beta0=1e-4, dt=0.1, steps=4, M=800, seed=s).f for s in range(3)]
    m, se = limits.stats.mean_se(np.array(runs))
    assert np.max(np.abs(m - ref.f)[1:] / se[1:]) < 4.5
    assert np.max(np.abs(m - ref.f)) < 0.03


def test_residual_solver_diagnostics_and_bad_input():
    X = np.random.default_rng(2).standard_normal((2, 3))
    d = dm.solve(X, [1.0, -1.0], depth=3, activation="tanh", gamma0=1.0, beta0=1.0, dt=0.1, steps=3, M=300,
                 seed=0)
    assert d.converged and d.solver == "mc-residual" and d.loss[-1] < d.loss[0]
    with pytest.raises(ValueError, match="depth"):
        dm.solve(X, [1.0, -1.0], depth=1, beta0=1.0, dt=0.1, steps=3)
    with pytest.raises(ValueError, match="beta0"):
        dm.solve(X, [1.0, -1.0], depth=3, beta0=-1.0, dt=0.1, steps=3)
    with pytest.raises(dm.DMFTNotConverged):
        dm.solve(X, [1.0, -1.0], depth=3, activation="tanh", beta0=1.0, dt=0.1, steps=3, M=300, seed=0,
                 max_iter=2)


@pytest.mark.slow
def test_finite_resnets_converge_to_residual_dmft():
    from limits.finite import concretise, train
    from limits.validate.dmft import MF

    rng = np.random.default_rng(0)
    P, D, L, dt, steps = 2, 4, 3, 0.1, 5
    X = rng.standard_normal((P, D))
    y = np.array([1.0, -1.0])
    runs = [dm.solve(X, y, depth=L, activation="tanh", gamma0=1.0, beta0=1.0, dt=dt, steps=steps, M=1500,
                     seed=s).f for s in range(3)]
    f_inf, se_inf = limits.stats.mean_se(np.array(runs))
    rms = []
    for N in (256, 1024):
        net = concretise(MF, N=N, L=L + 1, d_in=D, activation="tanh", eta0=dt, gamma0=1.0, residual=True,
                         branch=1.0 / np.sqrt(L - 1))
        tr = train(net, X, y, steps, n_inits=8, seed=N, optimizer="gd", reduction="sum", center=True,
                   record_features=False, keep_weights=False)
        f = tr.f[:, :, :, 0]
        rms.append(np.sqrt(np.mean((f - f_inf[:, None, :]) ** 2)))
    m, se = f.mean(axis=1), f.std(axis=1, ddof=1) / np.sqrt(8)
    z = np.abs(m - f_inf)[1:] / np.sqrt(se ** 2 + se_inf ** 2)[1:]
    assert np.max(z) < 4
    assert rms[1] < rms[0]
