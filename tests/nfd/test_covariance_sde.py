"""The neural covariance SDE (limits.nfd.covariance_sde): exact identities, its NNGP skeleton, the O(T) term of its
mean, step halving, results I/O, refusals, and the unshaped relu log-normal norm."""
import numpy as np
import pytest

from limits.activations import relu_kernel
from limits.nfd.covariance_sde import (CovarianceSDE, abs_gram, covariance_sde, drift, drift_coefficient,
                                       relu_log_norm, shaped_slopes)

K0 = np.array([[1.0, 0.3], [0.3, 1.0]])


def test_abs_gram_is_four_relu_kernels_minus_V_also_at_extremes():
    # E|x||y| = 4 E[relu(x)relu(y)] − E[xy] (x = x⁺ + x⁻, symmetry of the centred Gaussian)
    for k11, k22 in ((1.0, 1.0), (1e-8, 3e5), (2.0, 0.5)):
        for r in (-1.0, -0.999999, -0.3, 0.0, 0.7, 0.9999999, 1.0):
            k12 = r * np.sqrt(k11 * k22)
            V = np.array([[k11, k12], [k12, k22]])
            want = 4 * relu_kernel(k11, k12, k22) - k12
            got = abs_gram(V)[0, 1]
            assert abs(got - want) <= 1e-10 * np.sqrt(k11 * k22)
            assert abs_gram(V)[0, 0] == k11 and drift(V, 1.0)[1, 1] == 0.0


def test_noise_free_scheme_is_the_shaped_nngp_recursion():
    # dt = 1/N, κ = κ_N, noise 0: L steps of the scheme = L layers of c·E[φφ] for φ = s₋x + (s₊−s₋)relu(x)
    N, L, cp, cm = 64, 40, 0.7, -1.3
    sp, sm, c = shaped_slopes(cp, cm, N)
    K = K0 * np.array([[2.0, 1.0], [1.0, 0.5]])
    r = covariance_sde(K, L / N, kappa=drift_coefficient(cp, cm, N), dt=1 / N, paths=2, noise=0.0, seed=0,
                       halving=False, progress=False)
    for _ in range(L):
        R = np.array([[relu_kernel(K[a, a], K[a, b], K[b, b]) for b in range(2)] for a in range(2)])
        K = c * (sm * sm * K + sm * (sp - sm) * K + (sp - sm) ** 2 * R)      # E[x relu(y)] = K_xy/2 (twice)
    np.testing.assert_allclose(r.V[-1, 0], K, rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.V[-1, 1], K, rtol=0, atol=1e-10)


def test_drift_coefficient_limit():
    assert drift_coefficient(1.0, -1.0) == 1.0
    assert abs(drift_coefficient(1.0, -1.0, 10**8) - 1.0) < 1e-7
    assert drift_coefficient(0.5, 0.5, 100) == 0.0            # equal slopes: a linear network, no drift


def test_mean_first_order_in_T_is_the_nngp_drift():
    # E[V_T] = K₀ + T b(K₀) + O(T²): the O(T) term is the NNGP's (the skeleton); fluctuations enter at O(T²)
    # (the finite network's K1/N). At T = 0.05 the SDE mean (control variate, SE σ) must equal the noise-free
    # skeleton within 4σ; the skeleton itself moved by T·b ≈ 180σ.
    N = 1024
    kw = dict(kappa=drift_coefficient(1.0, -1.0, N), dt=1 / N, seed=3, halving=False, progress=False)
    s = covariance_sde(K0, 51 / N, paths=20000, **kw)
    sk = covariance_sde(K0, 51 / N, paths=2, noise=0.0, **kw)
    se = s.mean_se[-1, 0, 1]
    assert abs(s.mean[-1, 0, 1] - sk.V[-1, 0, 0, 1]) < 4 * se
    assert sk.V[-1, 0, 0, 1] - K0[0, 1] > 100 * se
    np.testing.assert_allclose((sk.V[-1, 0, 0, 1] - K0[0, 1]) / (51 / N), drift(K0, kw["kappa"])[0, 1], rtol=0.02)


def test_halving_report_save_load_and_psd(tmp_path):
    r = covariance_sde(K0, 0.25, dt=1 / 64, paths=500, times=[0.1, 0.25], seed=5, progress=False)
    np.testing.assert_allclose(r.times, [6 / 64, 16 / 64])
    assert set(r.diagnostics["halving"]) == {f"{t:g}" for t in r.times}
    assert r.diagnostics["psd_repairs"] == 0
    assert np.all(np.linalg.eigvalsh(r.V) > 0)
    r.save(tmp_path / "cov")
    assert CovarianceSDE.load(tmp_path / "cov").equals(r)
    r2 = covariance_sde(K0, 0.25, dt=1 / 64, paths=500, times=[0.1, 0.25], seed=5, progress=False)
    assert np.array_equal(r2.V, r.V) and np.array_equal(r2.mean, r.mean)   # same seed, same paths


@pytest.mark.parametrize("kw, match", [
    (dict(K0=np.array([[1.0, 2.0], [2.0, 1.0]])), "positive semi-definite"),
    (dict(dt=0.3), "whole number"),
    (dict(times=[2.0]), r"\[0, T"),
    (dict(kappa=-1.0), "kappa"),
    (dict(K0=np.zeros((2, 2))), "positive diagonal"),
])
def test_refusals(kw, match):
    args = dict(K0=K0, T=1.0, paths=10, seed=0, progress=False)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        covariance_sde(args.pop("K0"), args.pop("T"), **args)
    with pytest.raises(ValueError, match="seed"):
        covariance_sde(K0, 1.0, paths=10)


def test_relu_log_norm_exact_moments_approach_the_limit():
    m, v = relu_log_norm(1.0)
    assert (m, v) == (-2.5, 5.0)
    errs = [abs(np.array(relu_log_norm(1.0, N)) - (m, v)).max() for N in (64, 256, 1024)]
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.02
    # one layer at width N: log(χ²_N/N) + log R by direct simulation (30 000 draws, 5σ)
    N = 16
    rng = np.random.default_rng(0)
    h = rng.standard_normal((30000, N))
    x = np.log(2 * (np.maximum(h, 0) ** 2).sum(1) / (h * h).sum(1)) + np.log(rng.chisquare(N, 30000) / N)
    m1, v1 = relu_log_norm(1 / N, N)
    assert abs(x.mean() - m1) < 5 * x.std() / np.sqrt(x.size)
    assert abs(x.var() - v1) < 5 * v1 * np.sqrt(2 / x.size) * 1.5


def _poly(N, a, b):
    import limits

    u, w = a / np.sqrt(N), b / N
    return limits.activation(lambda x: x + u * x**2 + w * x**3, dphi=lambda x: 1 + 2 * u * x + 3 * w * x**2,
                             d2phi=lambda x: 2 * u + 6 * w * x, d3phi=lambda x: 6 * w + 0 * x, name="shaped_poly")


def test_smooth_drift_is_the_projects_one_layer_nngp_step():
    # N(E[φφ] − V) = smooth_drift(V) + (b²/N)(9 V_aa V_bb V_ab + 6 V_ab³) exactly (φ = x + a x²/√N + b x³/N)
    import limits
    from limits.nfd.covariance_sde import smooth_drift

    N, a, b = 100, 0.7, -0.4
    X = np.linalg.cholesky(K0 * [[1.0, 1.0], [1.0, 1.0]]) * np.sqrt(2)
    K1l = limits.kernels.nngp(X, model=limits.mlp(2, depth=0, activation=_poly(N, a, b), sigma_w2=1.0)).K_out   # read-in, φ, read-out
    V = X @ X.T / 2
    extra = (b * b / N) * (9 * np.outer(np.diag(V), np.diag(V)) * V + 6 * V**3)
    np.testing.assert_allclose(N * (K1l - V), smooth_drift(V, a, b) + extra, rtol=0, atol=1e-10 * N)


def test_fluctuation_part_of_the_mean_is_the_projects_K1_over_N():
    # E_SDE[V_T] − skeleton_T (the O(T²) fluctuation-induced term) vs K1/N of limits.kernels.finite_width for the
    # width-N, depth-L network (T = L/N): agreement within 4 standard errors of the SDE mean (−3.6e-3 ≈ 6σ from 0).
    import limits
    from limits.kernels.finite_width import finite_width

    N, L, a, b = 1024, 102, 0.5, -0.5
    X = np.linalg.cholesky(K0) * np.sqrt(2)
    r = finite_width(limits.mlp(2, depth=L, activation=_poly(N, a, b), sigma_w2=1.0), X, ntk=False)
    kw = dict(smooth=(a, b), dt=1 / N, seed=11, halving=False, progress=False)
    s = covariance_sde(K0, L / N, paths=20000, **kw)
    sk = covariance_sde(K0, L / N, paths=2, noise=0.0, **kw)
    fluct, se, k1n = s.mean[-1] - sk.V[-1, 0], s.mean_se[-1], r.K1_layers[L] / N
    assert np.all(np.abs(fluct - k1n) < 4 * se)
    assert abs(k1n[0, 1]) > 5 * se[0, 1]
