"""Iterative inference vs closed form; spectra (dense vs Lanczos vs LOBPCG), RMT references."""
import warnings

import numpy as np
import pytest
import scipy.optimize as so

from limits import pc


def small(rng, N=8, H=4, d_in=3, d_out=2, param="sp"):
    W, a = pc.init_weights(N, H, param, d_in=d_in, d_out=d_out, rng=rng)
    return W, a, rng.standard_normal((3, d_in)), rng.standard_normal((3, d_out))


@pytest.mark.parametrize("update", ["simultaneous", "sequential"])
@pytest.mark.parametrize("skips", [None, "1-skip"])
def test_gd_inference_converges_to_closed_form(update, skips):
    rng = np.random.default_rng(0)
    W, a, X, Y = small(rng)
    lm = pc.lambda_max(W, a, skips)
    r = pc.infer(W, X, Y, beta=1.5 / lm, steps=200_000, multipliers=a, skips=skips, update=update, tol=1e-11)
    assert r.converged and not r.diverged
    e = pc.equilibrium(W, X, Y, a, skips)
    for z1, z2 in zip(r.z, e.z):
        np.testing.assert_allclose(z1, z2, atol=1e-9)
    assert abs(r.energy[-1] - e.energy) < 1e-12 * max(1, e.energy)
    assert np.all(np.diff(r.energy) <= 1e-14)              # GD with β < 2/λ_max is monotone


def test_small_gradient_is_not_closeness():
    """Ill-conditioned ResNet: the gradient norm drops by orders of magnitude while the distance to
    z* barely moves (seed 001 §3.1)."""
    rng = np.random.default_rng(1)
    W, a, X, Y = small(rng, N=6, H=12, param="sp")
    lm = pc.lambda_max(W, a, "1-skip")
    r = pc.infer(W, X, Y, beta=1.0 / lm, steps=300, multipliers=a, skips="1-skip", warn=False)
    assert not r.converged and "not converged" in r.message
    assert r.grad_norm[-1] < 0.05 * r.grad_norm[0]
    assert r.distance[-1] > 0.3 * r.distance[0]


def test_beta_above_bound_warns_and_diverges():
    rng = np.random.default_rng(2)
    W, a, X, Y = small(rng)
    lm = pc.lambda_max(W, a)
    with pytest.warns(RuntimeWarning, match="stability bound"):
        r = pc.infer(W, X, Y, beta=2.5 / lm, steps=3000, multipliers=a)
    assert r.diverged and not r.converged and "diverged" in r.message
    assert np.all(np.isfinite(r.energy))


def test_fpa_forward_init_one_sequential_sweep_gives_bp_errors():
    """F-ini + FPA + one sequential sweep with β = 1 (λ = 1): the errors are the BP errors G_lᵀ r
    (seed 003 §3.1, Rosenbaum 2022)."""
    rng = np.random.default_rng(3)
    W, a, X, Y = small(rng)
    r = pc.infer(W, X, Y, beta=1.0, steps=1, multipliers=a, update="sequential", fpa=True, warn=False)
    net = pc.make_net(W, a)
    G = pc.output_jacobians(net)
    R = Y - pc.forward(net, X)[-1]
    h = pc.forward(net, X)
    for l in range(1, net.L):
        np.testing.assert_allclose(r.z[l - 1] - h[l], R @ G[l], atol=1e-12)


def test_adam_and_nudged_inference():
    rng = np.random.default_rng(4)
    W, a, X, Y = small(rng, N=5, H=2)
    r = pc.infer(W, X, Y, beta=0.02, steps=20000, multipliers=a, optimizer="adam", tol=1e-6, warn=False)
    assert r.distance[-1] < 1e-3
    lm = pc.lambda_max(W, a, nudge=0.5)
    r = pc.infer(W, X, Y, beta=1.0 / lm, steps=100_000, multipliers=a, nudge=0.5, tol=1e-10)
    e = pc.equilibrium(W, X, Y, a, nudge=0.5)
    np.testing.assert_allclose(r.z_out, e.z_out, atol=1e-8)


def test_nonlinear_inference_reaches_stationary_point():
    pytest.importorskip("limits.activations")
    import limits

    rng = np.random.default_rng(5)
    W, a, X, Y = small(rng, N=6, H=3)
    X, Y = X[:1], Y[:1]
    act = limits.activation("tanh")
    r = pc.infer(W, X, Y, beta=0.1, steps=50_000, multipliers=a, activation="tanh", tol=1e-11)
    assert r.converged and r.grad_norm[-1] < 1e-11
    # independent minimiser (BFGS on the energy) finds the same activities
    shapes = [z.shape for z in r.z]
    sizes = [int(np.prod(s)) for s in shapes]

    def split(v):
        return [c.reshape(s) for c, s in zip(np.split(v, np.cumsum(sizes)[:-1]), shapes)]

    f = lambda v: pc.energy(W, X, Y, split(v), multipliers=a, activation=act)
    x0 = np.concatenate([z.ravel() for z in pc.forward(pc.make_net(W, a), X, act.phi)[1:-1]])
    opt = so.minimize(f, x0, method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(np.concatenate([z.ravel() for z in r.z]), opt.x, atol=1e-5)
    # relu runs through the same code
    r2 = pc.infer(W, X, Y, beta=0.1, steps=5000, multipliers=a, activation="relu", warn=False)
    assert np.isfinite(r2.energy[-1]) and r2.energy[-1] <= r2.energy[0]


@pytest.mark.parametrize("param,skips", [("sp", None), ("mupc", "1-skip"), ("orthogonal", None), ("sp", 2)])
def test_extreme_eigenvalues_methods_agree(param, skips):
    rng = np.random.default_rng(6)
    W, a = pc.init_weights(12, 6, param, d_in=4, d_out=3, rng=rng)
    d = pc.extreme_eigenvalues(W, a, skips, method="dense")
    l = pc.extreme_eigenvalues(W, a, skips, method="lanczos")
    assert l.converged
    assert abs(d.lambda_max - l.lambda_max) < 1e-9 * d.lambda_max
    assert abs(d.lambda_min - l.lambda_min) < 1e-9 * d.lambda_max
    assert d.lambda_min > 0                                  # PD for every DLN (Thm A.1)


def test_lobpcg_lambda_min():
    rng = np.random.default_rng(7)
    W, a = pc.init_weights(10, 5, "sp", rng=rng)
    d = pc.extreme_eigenvalues(W, a, method="dense")
    g = pc.extreme_eigenvalues(W, a, method="lobpcg")
    assert abs(d.lambda_min - g.lambda_min) < 1e-7 * d.lambda_max


def test_rmt_references():
    assert pc.mp_edges(1.0) == (1.0, 5.0)
    assert pc.WEYL_LAMBDA_MAX == 7.0 and pc.WEYL_LAMBDA_MIN == -1.0
    x = np.linspace(0, 8, 200001)
    assert abs(np.trapezoid(pc.mp_density(x, 0.5), x) - 1) < 1e-3
    assert abs(np.trapezoid(pc.semicircle_density(x - 4), x) - 1) < 1e-3
    # SP diagonal blocks I + WᵀW → [1, 5]; λ_max ≤ λ_max(D) + λ_max(O) (Weyl)
    rng = np.random.default_rng(8)
    W, a = pc.init_weights(200, 2, "sp", d_in=200, d_out=200, rng=rng)
    D, O, H = pc.hessian_parts(W, a)
    ev = np.linalg.eigvalsh(D)
    assert 0.99 < ev[0] and 4.6 < ev[-1] < 5.3
    eo = np.linalg.eigvalsh(O)
    assert 1.85 < eo[-1] < 2.1 and abs(eo[0] + eo[-1]) < 1e-10    # H = 2: O edge = σ_max(W) ≈ 2
    eh = np.linalg.eigvalsh(H)
    assert eh[-1] <= ev[-1] + eo[-1] + 1e-9 and eh[0] >= ev[0] + eo[0] - 1e-9


@pytest.mark.slow
def test_rmt_deep_offdiagonal_edge():
    rng = np.random.default_rng(9)
    # deep chains: the off-diagonal band has row variance 2, so its edge tends to 2√2, not the
    # dense-Wigner ±2 assumed in seed 001 §A.2.3, so "λ_max ≤ 7" is not a valid Weyl bound (the
    # valid one is ≈ 5 + 2√2; finite-N draws above 7 do occur)
    W, a = pc.init_weights(40, 40, "sp", d_in=40, d_out=40, rng=rng)
    D, O, H = pc.hessian_parts(W, a)
    eo = np.linalg.eigvalsh(O)
    assert abs(eo[-1] - pc.OFFDIAG_EDGE_DEEP) < 0.15 and eo[-1] > 2.5
    eh = np.linalg.eigvalsh(H)
    assert 6.0 < eh[-1] <= np.linalg.eigvalsh(D)[-1] + eo[-1] and eh[0] > 0


def test_bad_spectrum_inputs():
    with pytest.raises(ValueError, match="param"):
        pc.init_weights(4, 2, "xavier", seed=0)
    with pytest.raises(ValueError, match="width"):
        pc.init_weights(0, 2, "sp", seed=0)
    with pytest.raises(ValueError, match="beta"):
        pc.infer([np.eye(2), np.eye(2)], np.ones((1, 2)), np.ones((1, 2)), beta=-1)


@pytest.mark.slow
@pytest.mark.parametrize("param,skips", [("sp", None), ("mupc", "1-skip"), ("orthogonal", None)])
def test_lanczos_matches_dense_at_moderate_size(param, skips):
    rng = np.random.default_rng(11)
    W, a = pc.init_weights(40, 40, param, rng=rng)
    d = pc.extreme_eigenvalues(W, a, skips, method="dense")
    l = pc.extreme_eigenvalues(W, a, skips, method="lanczos")
    assert abs(l.lambda_max - d.lambda_max) < 1e-9 * d.lambda_max
    assert abs(l.lambda_min - d.lambda_min) < 1e-9 * d.lambda_max
    assert abs(l.kappa / d.kappa - 1) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("skips", [None, "1-skip", 3])
def test_block_cholesky_equals_telescoped_larger(skips):
    rng = np.random.default_rng(12)
    W, a = pc.init_weights(96, 24, "mupc" if skips else "sp", d_in=10, d_out=4, rng=rng)
    X, Y = rng.standard_normal((8, 10)), rng.standard_normal((8, 4))
    e1 = pc.equilibrium(W, X, Y, a, skips)
    e2 = pc.equilibrium(W, X, Y, a, skips, method="block")
    scale = max(np.max(np.abs(z)) for z in e1.z)
    assert max(np.max(np.abs(u - v)) for u, v in zip(e1.z, e2.z)) < 1e-10 * max(1, scale)


@pytest.mark.parametrize("act", ["tanh", "erf", "linear"])
@pytest.mark.parametrize("skips", [None, "1-skip"])
def test_nonlinear_activity_hessian_matches_finite_differences(act, skips):
    import limits

    rng = np.random.default_rng(13)
    W, a = pc.init_weights(4, 3, "sp", d_in=3, d_out=2, rng=rng)
    W = [1.5 * w for w in W]
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    z = [rng.standard_normal((1, 4)) for _ in range(3)]
    Hn = pc.nonlinear_activity_hessian(W, x, y, act, z=z, multipliers=a, skips=skips, dense=True)
    n = 12
    flat = np.concatenate([v.ravel() for v in z])

    def F(v):
        zz = [c.reshape(1, 4) for c in np.split(v, 3)]
        return pc.energy(W, x[None], y[None], zz, multipliers=a, skips=skips, activation=act)

    h = 1e-4
    Hfd = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            Hfd[i, j] = (F(flat + ei + ej) - F(flat + ei - ej) - F(flat - ei + ej) + F(flat - ei - ej)) / (4 * h * h)
    np.testing.assert_allclose(Hn, Hfd, atol=2e-6)


def test_numerically_singular_hessian_reports_infinite_kappa():
    """SP 1-skip ResNets are PD in exact arithmetic but κ(H_z) exceeds 1/ε: report κ = ∞ with a
    note instead of a misleading 'not positive definite' error (found by the seed-001 notebook)."""
    import limits

    W, a = limits.pc.init_weights(32, 128, "sp", d_in=10, d_out=10, rng=np.random.default_rng(1))
    sp = limits.pc.extreme_eigenvalues(W, a, "1-skip", method="lanczos")
    assert sp.kappa == float("inf") and "numerically singular" in sp.note
    assert np.isfinite(sp.lambda_max) and sp.lambda_max > 0
