"""noise="auto": output scale and noise fitted together by type-II maximum likelihood (limits.likelihood), both
reported; the posterior they give; its check against finite networks whose output is scaled by s."""
from dataclasses import replace

import numpy as np
import pytest

import limits
from limits.likelihood import ml_noise, ml_scale_noise


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(5)
    m = limits.mlp(3, 2, d_out=2, activation="erf", sigma_w2=1.5, sigma_b2=0.3)
    X = rng.standard_normal((25, 3))
    Y = np.stack([np.sin(2 * X[:, 0]), np.cos(X[:, 1])], 1) * 0.3 + 0.05 * rng.standard_normal((25, 2))
    return m, X, Y, rng.standard_normal((4, 3))


def _lml(m, X, Y, Xs, s2, noise):
    return limits.predict.nngp_posterior(m, X, Y, Xs, noise=noise, output_scale=s2).log_marginal_likelihood


def test_auto_fits_scale_and_noise_jointly(task):
    """The profile-likelihood optimum is the joint maximum of the posterior's own (Cholesky) log marginal
    likelihood: stationary in both log s² and log σ², below it in every direction, and equal to an
    independent 2-D Nelder–Mead search."""
    from scipy.optimize import minimize

    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto")
    assert p.fitted == ("output_scale", "noise") and p.output_scale != 1.0
    assert (p.output_scale, p.noise) == pytest.approx(limits.predict.max_likelihood(m, X, Y), rel=1e-8)
    best = p.log_marginal_likelihood
    assert best == pytest.approx(_lml(m, X, Y, Xs, p.output_scale, p.noise), rel=1e-13)
    for a in (0.8, 1.0, 1.25):
        for b in (0.8, 1.0, 1.25):
            if (a, b) != (1.0, 1.0):
                assert _lml(m, X, Y, Xs, a * p.output_scale, b * p.noise) < best
    h = 1e-5
    for da, db in ((h, 0), (0, h)):
        up = _lml(m, X, Y, Xs, p.output_scale * np.exp(da), p.noise * np.exp(db))
        dn = _lml(m, X, Y, Xs, p.output_scale * np.exp(-da), p.noise * np.exp(-db))
        assert abs(up - dn) / (2 * h) < 1e-4
    f = lambda u: -_lml(m, X, Y, Xs, np.exp(u[0]), np.exp(u[1]))  # noqa: E731
    grid = [(a, b) for a in np.linspace(-5, 3, 9) for b in np.linspace(-12, 1, 14)]   # a 2-D grid, then simplex
    x0 = min(grid, key=f)
    res = minimize(f, x0=x0, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
    assert np.exp(res.x) == pytest.approx([p.output_scale, p.noise], rel=1e-4)
    assert -res.fun <= best + 1e-9


def test_scale_equivariance_and_posterior_form(task):
    """Targets c·Y give s² c², σ² c² and the same ratio; the mean depends on λ = σ²/s² only and the
    covariance is s² times the one at scale 1 with noise λ."""
    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto")
    q = limits.predict.nngp_posterior(m, X, 7.0 * Y, Xs, noise="auto")
    assert q.output_scale == pytest.approx(49 * p.output_scale, rel=1e-7)
    assert q.noise == pytest.approx(49 * p.noise, rel=1e-7)
    r = limits.predict.nngp_posterior(m, X, Y, Xs, noise=p.noise / p.output_scale)
    assert np.max(np.abs(p.mean - r.mean)) < 1e-12 * np.max(np.abs(r.mean))
    assert np.max(np.abs(p.cov - p.output_scale * r.cov)) < 1e-12 * p.output_scale * np.max(np.abs(r.cov))
    # a given noise keeps s² = 1 and nothing fitted; noise="auto" with a fixed scale fits the noise alone
    g = limits.predict.nngp_posterior(m, X, Y, Xs, noise=0.01)
    assert g.output_scale == 1.0 and g.fitted == ()
    n = limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto", output_scale=1.0)
    assert n.fitted == ("noise",) and n.noise == pytest.approx(limits.predict.max_likelihood_noise(m, X, Y), rel=1e-9)
    assert n.log_marginal_likelihood < p.log_marginal_likelihood
    with pytest.raises(ValueError, match="output_scale"):
        limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto", output_scale=-1.0)


def test_profile_likelihood_closed_form():
    """ml_scale_noise on a kernel with a known optimum: targets drawn from s²K + σ²I recover (s², σ²)
    within their sampling error (many outputs), and a kernel that explains nothing gives s²K ≪ σ²."""
    rng = np.random.default_rng(0)
    P, d = 60, 400
    A = rng.standard_normal((P, 8))
    K = A @ A.T / 8 + 0.5
    s2, n2 = 0.3, 0.02
    L = np.linalg.cholesky(s2 * K + n2 * np.eye(P))
    Y = L @ rng.standard_normal((P, d))
    fs2, fn2 = ml_scale_noise(K, Y)
    assert fs2 == pytest.approx(s2, rel=0.1) and fn2 == pytest.approx(n2, rel=0.1)
    assert ml_noise(K, Y, output_scale=s2) == pytest.approx(n2, rel=0.1)      # the noise alone at the true scale
    Y0 = rng.standard_normal((P, d))               # white targets: the kernel explains nothing
    fs2, fn2 = ml_scale_noise(K, Y0)
    assert fs2 * np.mean(np.diag(K)) < 0.05 * fn2 and fn2 == pytest.approx(1.0, rel=0.05)


def test_check_of_a_fitted_posterior(task):
    """limits.check compares at the fitted hyper-parameters (finite networks with read-out variances × s²):
    the fitted posterior passes, the same posterior relabelled with a scale 1.3× off fails."""
    m, X, Y, Xs = task
    p = limits.predict.nngp_posterior(m, X[:12], Y[:12], Xs[:2], noise="auto")
    c = limits.check(p, widths=(256, 512, 1024), inits=48, seed=1)
    assert c.passed, c.to_markdown()
    assert c.details["output_scale"] == p.output_scale and "× s²" in c.details["observable"]
    # the same problem at scale 1 (noise λ = σ²/s², covariance / s²) gives the same statistics: the scale is exact
    q = limits.predict.nngp_posterior(m, X[:12], Y[:12], Xs[:2], noise=p.noise / p.output_scale)
    c1 = limits.check(q, widths=(256, 512, 1024), inits=48, seed=1)
    assert np.allclose(c1.z_inf, c.z_inf, rtol=1e-6, atol=1e-6) and c1.verdict == c.verdict
    wrong = replace(p, cov=1.3 * p.cov, var=1.3 * p.var)
    w = limits.check(wrong, widths=(256, 512, 1024), inits=48, seed=1)
    assert not w.passed and w.details["blocks"]["posterior cov"]["verdict"] == "fail"


def test_auto_on_a_composition():
    L = limits.layers
    rng = np.random.default_rng(2)
    X = rng.standard_normal((15, 4, 4, 1))
    Y = np.tanh(X.mean(axis=(1, 2, 3)))[:, None] * 3.0
    cnn = limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"), L.GlobalAvgPool(),
                        L.Dense(sigma_w2=1.0, sigma_b2=0.05))
    p = limits.predict.nngp_posterior(cnn, X[:12], Y[:12], X[12:], noise="auto")
    assert p.fitted == ("output_scale", "noise") and p.output_scale > 1.0
    assert "Conv → relu → GlobalAvgPool → Dense" in str(p)
    c = limits.check(p, widths=(128, 256, 512), inits=32, seed=0)
    assert c.passed, c.to_markdown()
