"""Matrix-free pieces of the large-P path against dense linear algebra."""
import numpy as np
import pytest

from limits.blas import blas_threads
from limits.largep.pcg import Preconditioner, block_pcg, lanczos_logdet, pivoted_cholesky


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with blas_threads(1):          # many small products: OpenBLAS threads only spin on a shared machine
        yield


def _kernel(P, seed=0, ell=1.0):
    """A smooth (squared-exponential) Gram: fast spectral decay, as NNGP Grams of smooth activations."""
    x = np.random.default_rng(seed).standard_normal((P, 3))
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * d2 / ell ** 2)


def test_pivoted_cholesky_full_rank_is_exact():
    K = _kernel(60) + 1e-3 * np.eye(60)
    L, d, piv = pivoted_cholesky(np.diag(K), lambda i: K[i], rank=60, rel_tol=0.0, batch=1)
    assert np.abs(L @ L.T - K).max() < 1e-10
    assert np.abs(d).max() < 1e-10 and len(set(piv)) == len(piv) == 60


def test_pivoted_cholesky_residual_diagonal_is_exact():
    K = _kernel(200)
    L, d, _ = pivoted_cholesky(np.diag(K), lambda i: K[i], rank=20)
    assert L.shape == (200, 20)
    np.testing.assert_allclose(d, np.diag(K - L @ L.T), atol=1e-12)
    L1, d1, _ = pivoted_cholesky(np.diag(K), lambda i: K[i], rank=20, batch=1)
    L2, d2, _ = pivoted_cholesky(np.diag(K), lambda i: K[i], rank=40, batch=1)
    assert d2.sum() < d1.sum() < np.trace(K)                    # the residual trace falls with the rank
    np.testing.assert_allclose(L2[:, :20], L1, atol=1e-12)     # greedy: the first 20 columns are the same
    assert d.sum() <= 1.2 * d1.sum()                            # batched pivots ≈ as good as one at a time
    _, dt, pt = pivoted_cholesky(np.diag(K), lambda i: K[i], rank=40, batch=1, rel_tol=0.5 / 200)
    assert 0 < len(pt) < 40 and dt.max() <= 0.5 < np.diag(K).max()  # stops once max d ≤ 0.5


def test_preconditioner_identities():
    K = _kernel(80)
    L, d, _ = pivoted_cholesky(np.diag(K), lambda i: K[i], rank=10)
    D = d + 0.05
    M = L @ L.T + np.diag(D)
    pre = Preconditioner(L, D)
    V = np.random.default_rng(1).standard_normal((80, 3))
    np.testing.assert_allclose(pre.solve(V), np.linalg.solve(M, V), rtol=0, atol=1e-10 * np.abs(np.linalg.solve(M, V)).max())
    assert abs(pre.logdet - np.linalg.slogdet(M)[1]) < 1e-10 * abs(pre.logdet)
    C = np.linalg.inv(pre.inv_factor(np.eye(80)))             # the factor itself, for the identity only
    np.testing.assert_allclose(C @ C.T, M, atol=1e-10)
    np.testing.assert_allclose(pre.inv_factor_t(np.eye(80)), pre.inv_factor(np.eye(80)).T, atol=1e-12)
    with pytest.raises(ValueError, match="positive"):
        Preconditioner(L, np.zeros(80))


def _nngp(P, d=8, seed=0):
    import limits

    X = np.random.default_rng(seed).standard_normal((P, d))
    return limits.kernels.kernel(limits.mlp(d, depth=3, activation="erf"), X).nngp


def test_block_pcg_solves_every_column_to_tolerance():
    A = _nngp(300) + 0.01 * np.eye(300)
    B = np.random.default_rng(2).standard_normal((300, 4))
    B[:, 2] = 0.0                                               # a zero column converges at once
    L, d, _ = pivoted_cholesky(np.diag(A) - 0.01, lambda i: A[i] - 0.01 * (np.arange(300) == i[:, None]), rank=40)
    pre = Preconditioner(L, d + 0.01)
    r = block_pcg(lambda V: A @ V, B, pre.solve, tol=1e-12)
    assert r.converged.all() and r.true_residual.max() < 1e-10
    np.testing.assert_allclose(r.x, np.linalg.solve(A, B), atol=1e-8 * np.abs(np.linalg.solve(A, B)).max())
    assert r.iterations[2] == 0
    plain = block_pcg(lambda V: A @ V, B, None, tol=1e-12, maxiter=5000)
    assert plain.iterations.max() > 1.5 * r.iterations.max()   # rank 40 of 300 at σ² = 0.01: 47 vs 96 iterations


def test_pcg_iterations_do_not_grow_with_P():
    """erf MLP NNGP + σ²I (σ² = 0.1) with the default rank 8√P (limits.largep.regression.auto_rank): CG
    iterations stay flat from P = 400 to 1600 (measured to P = 4000: 13), while plain CG grows."""
    from limits.largep.regression import auto_rank

    its, plain = [], []
    for P in (400, 800, 1600):
        A = _nngp(P, seed=P)
        b = np.random.default_rng(P).standard_normal(P)
        L, d, _ = pivoted_cholesky(np.diag(A), lambda i: A[i], rank=auto_rank(P))
        pre = Preconditioner(L, d + 0.1)
        M = lambda V: A @ V + 0.1 * V
        its.append(block_pcg(M, b, pre.solve, tol=1e-10).iterations.max())
        plain.append(block_pcg(M, b, None, tol=1e-10, maxiter=20000).iterations.max())
    assert max(its) - min(its) <= 3, its
    assert plain[-1] >= 1.25 * plain[0] and min(plain) > 2 * max(its), plain


def test_lanczos_logdet_within_its_standard_error():
    """SLQ estimate vs the exact log det over independent seeds: |z| small on average and the SE honest
    (the z-scores of 12 seeds have rms ≈ 1: a 2× overstated SE would give rms 0.5, understated 2)."""
    A = _kernel(400, ell=2.0) + 0.05 * np.eye(400)
    L, d, _ = pivoted_cholesky(np.diag(A) - 0.05, lambda i: A[i] - 0.05 * (np.arange(400) == i[:, None]), rank=15)
    pre = Preconditioner(L, d + 0.05)
    B = lambda V: pre.inv_factor(A @ pre.inv_factor_t(V))
    exact = np.linalg.slogdet(A)[1] - pre.logdet
    z = []
    for s in range(12):
        est, se, per, steps = lanczos_logdet(B, 400, probes=8, steps=60, rng=s)
        assert steps < 60 and per.shape == (8,)
        z.append((est - exact) / se)
    z = np.array(z)
    assert abs(z.mean()) < 4 / np.sqrt(12) and 0.5 < np.sqrt(np.mean(z ** 2)) < 2.0, z
    with pytest.raises(ValueError, match="probes"):
        lanczos_logdet(B, 400, probes=1)
