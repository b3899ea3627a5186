"""Correctness of the fused erf response step (limits.kernels.response._erf_step) against the generic
moments/diag_price formulas it replaces (no timing here)."""
import importlib

import numpy as np
import pytest

import limits
from limits.kernels._args import resolve
from limits.kernels.expectations import diag_price, moments

R = importlib.import_module("limits.kernels.response")


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_erf_step_matches_generic(residual, seed):
    rng = np.random.default_rng(seed)
    P, d = 23, 7
    X = rng.standard_normal((P, d)) * rng.uniform(0.2, 3.0, size=(P, 1))
    K0, arch = resolve(X, None, depth=3, activation="erf", sigma_w2=1.3, sigma_b2=0.1, residual=residual,
                       rho=0.7, sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None,
                       depth_scaling="none", d_in=None)
    chi_prev = rng.uniform(1.0, 3.0, (P, P))
    chi_prev = chi_prev + chi_prev.T
    eta_prev = rng.uniform(0.5, 1.0, (P, P))
    eta_prev = eta_prev + eta_prev.T
    K_new, eta_new, chi_new = (np.empty((P, P)) for _ in range(3))
    R._erf_step(K0, chi_prev, eta_prev, K_new, eta_new, chi_new, arch, np.empty((P, P)))

    act = limits.activation("erf")
    E, G = moments(act, K0)
    np.fill_diagonal(G, diag_price(act, np.diag(K0)))
    r2 = arch.rho ** 2
    K_ref = r2 * (arch.sigma_w2 * E + arch.sigma_b2) + (K0 if residual else 0.0)
    eta_ref = r2 * arch.sigma_w2 * G * (chi_prev if residual else eta_prev)
    chi_ref = chi_prev + eta_ref if residual else eta_ref
    for got, ref in ((K_new, K_ref), (eta_new, eta_ref), (chi_new, chi_ref)):
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(K_new, K_new.T)


@pytest.mark.parametrize("act", ["erf", "tanh", "relu"])
@pytest.mark.parametrize("residual", [True, False])
def test_inplace_nngp_matches_textbook_recursion(act, residual):
    """limits.kernels.nngp (in-place layer loop with reused scratch) vs the recursion written out
    with limits.gaussian.gram/dgram (seed 004 Eq. 29–30)."""
    from limits import gaussian
    from limits.kernels import nngp

    rng = np.random.default_rng(7)
    X = rng.standard_normal((17, 5))
    sw2, sb2, rho, L = 1.3, 0.1, 0.8, 4
    r = nngp(X, depth=L, activation=act, sigma_w2=sw2, sigma_b2=sb2, residual=residual, rho=rho)
    K = sw2 * X @ X.T / 5 + sb2
    Th = K.copy()
    for l in range(1, L + 1):
        C = rho ** 2 * (sw2 * gaussian.gram(act, K) + sb2)
        branch = C + rho ** 2 * sw2 * gaussian.dgram(act, K) * Th
        K = K + C if residual else C
        Th = Th + branch if residual else branch
        np.testing.assert_allclose(r.K[l], K, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(r.Theta[l], Th, rtol=1e-11, atol=1e-12)
