"""limits.predict.kernel_regression: the large-P predictor equals nngp_posterior / gradient_descent (t → ∞)."""
import numpy as np
import pytest

import limits
from limits.predict import (SingularKernelError, gradient_descent, kernel_regression, nngp_posterior,
                            regression_memory)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    return rng.standard_normal((60, 10)), rng.standard_normal((60, 2)), rng.standard_normal((13, 10))


def _models():
    return [limits.mlp(10, depth=10, activation="erf", sigma_w2=1.5, sigma_b2=0.1, d_out=2),
            limits.mlp(10, depth=10, activation="relu", sigma_w2=2.0, sigma_b2=0.05, d_out=2),
            limits.resnet(10, depth=3, activation="tanh", sigma_w2=1.2, sigma_b2=0.1, rho=0.5, d_out=2)]


@pytest.mark.parametrize("mi", range(3))
@pytest.mark.parametrize("noise", [0.0, 1e-3])
def test_nngp_matches_posterior(data, mi, noise):
    X, Y, Xs = data
    m = _models()[mi]
    p = nngp_posterior(m, X, Y, Xs, noise=noise)
    r = kernel_regression(m, X, Y, Xs, "nngp", noise=noise, block=7, progress=False)
    assert np.max(np.abs(r.mean - p.mean)) <= 1e-10 * np.max(np.abs(p.mean))
    assert np.max(np.abs(r.var - p.var)) <= 1e-10 * np.max(p.var)
    assert abs(r.log_marginal_likelihood - p.log_marginal_likelihood) <= 1e-10 * abs(p.log_marginal_likelihood)
    r2 = kernel_regression(m, X, Y, Xs, "nngp", noise=noise, var=False, progress=False)
    assert r2.var is None and np.max(np.abs(r2.mean - r.mean)) <= 1e-12 * np.max(np.abs(p.mean))


@pytest.mark.parametrize("mi", range(2))
def test_ntk_matches_gradient_flow_limit(data, mi):
    """Flow time t = 60/(η λ_min(Θ)): e^{−ηλt} ≤ e^{−60} on every mode, the t → ∞ limit to rounding."""
    X, Y, Xs = data
    m = _models()[mi]
    lam_min = np.linalg.eigvalsh(limits.kernels.kernel(m, X).ntk)[0]
    assert lam_min > 0
    g = gradient_descent(m, X, Y, Xs, t=[60.0 / (m.lr * lam_min)])
    r = kernel_regression(m, X, Y, Xs, "ntk", block=16, progress=False)
    assert np.max(np.abs(r.mean - g.mean[0])) <= 1e-10 * np.max(np.abs(g.mean[0]))
    assert np.max(np.abs(r.var - g.var[0])) <= 1e-10 * np.max(g.var[0])
    assert np.isnan(r.log_marginal_likelihood)


def test_memory_limit_refusal(data):
    X, Y, Xs = data
    m = _models()[0]
    need = regression_memory(60, 13, "ntk", True, 256, 2)
    assert need > 2 * 8 * 60 * 60
    with pytest.raises(ValueError, match=r"P = 60 training points need about .* GiB"):
        kernel_regression(m, X, Y, Xs, "ntk", memory_limit=need / 2, progress=False)
    r = kernel_regression(m, X, Y, Xs, "ntk", memory_limit=need * 1.01, progress=False)
    assert r.memory_bytes == pytest.approx(need)
    # the P = 20,000 case of the benchmark: 2 × 3.2 GB kernels do not fit in 4 GB
    with pytest.raises(ValueError, match="P = 20000"):
        kernel_regression(m, np.zeros((20000, 10)), np.zeros((20000, 2)), Xs, "ntk", memory_limit=4e9)


def test_errors(data):
    X, Y, Xs = data
    m = _models()[0]
    with pytest.raises(ValueError, match="kernel"):
        kernel_regression(m, X, Y, Xs, "gp")
    with pytest.raises(ValueError, match="noise"):
        kernel_regression(m, X, Y, Xs, noise=-1.0)
    with pytest.raises(ValueError, match="memory_limit"):
        kernel_regression(m, X, Y, Xs, memory_limit=0)
    Xd = np.vstack([X, X[:1]])                          # a repeated input: K_XX singular without noise
    with pytest.raises(SingularKernelError) as e:
        kernel_regression(m, Xd, np.vstack([Y, Y[:1]]), Xs, "nngp", progress=False)
    r = kernel_regression(m, Xd, np.vstack([Y, Y[:1]]), Xs, "nngp", noise=e.value.suggested_noise, progress=False)
    assert np.all(np.isfinite(r.mean))
    with pytest.raises(limits.ModelError):
        kernel_regression(m.with_(parameterisation="SP"), X, Y, Xs, "ntk")


def test_result_round_trip(data, tmp_path):
    X, Y, Xs = data
    r = kernel_regression(_models()[1], X, Y, Xs, progress=False)
    r.save(tmp_path / "r")
    q = type(r).load(tmp_path / "r")
    assert np.array_equal(q.mean, r.mean) and np.array_equal(q.var, r.var) and q.kernel == "nngp"
