"""limits.parallel: the one ``n_jobs`` resolver, and every parallel path against its one-thread numbers — bit for bit
(the blocks write their own entries and BLAS keeps one thread), except the predictions' dense factorisation of
P ≥ 256 training points, which runs on multi-threaded BLAS (to rounding)."""
import threading

import numpy as np
import pytest

import limits
from limits import parallel

L = limits.layers


# ------------------------------------------------------------------------------------------------ the resolver
def test_resolve_defaults_env_and_bad_input(monkeypatch):
    cores = parallel.available_cores()
    monkeypatch.delenv(parallel.ENV, raising=False)
    assert parallel.resolve(None) == cores == parallel.resolve(-1)
    assert parallel.resolve(3) == 3 and parallel.resolve(np.int64(2)) == 2
    monkeypatch.setenv(parallel.ENV, "5")
    assert parallel.resolve(None) == 5 and parallel.resolve(2) == 2       # an explicit n_jobs wins
    monkeypatch.setenv(parallel.ENV, "-1")
    assert parallel.resolve(None) == cores
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(parallel.ENV, bad)
        with pytest.raises(ValueError, match=parallel.ENV):
            parallel.resolve(None)
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match="n_jobs"):
            parallel.resolve(bad)
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="n_jobs"):
        limits.kernels.kernel(limits.mlp(2, 1), X, n_jobs=0)


def test_the_suite_runs_one_thread_and_using_nests(monkeypatch):
    assert parallel.threads() == 1                    # tests/conftest.py: LIMITS_NUM_THREADS=1 under xdist
    with parallel.using(2):
        assert parallel.threads() == 2
        with parallel.using(None):                     # keeps the enclosing value
            assert parallel.threads() == 2
        with parallel.using(1):
            assert parallel.threads() == 1
        assert parallel.threads() == 2
    assert parallel.threads() == 1


def test_two_threads_really_run_and_stay_serial_inside():
    """Two items that wait for each other finish only if two threads run them at once; inside a worker every
    nested call is serial and BLAS keeps one thread."""
    barrier = threading.Barrier(2, timeout=60)
    seen = []

    def item(k):
        barrier.wait()
        seen.append((threading.get_ident(), parallel.threads(), parallel.inside_worker()))
        return k * k

    assert parallel.map_blocks(item, [3, 4], n_jobs=2) == [9, 16]
    assert len({s[0] for s in seen}) == 2 and all(s[1] == 1 and s[2] for s in seen)
    assert list(parallel.imap_blocks(lambda k: k + 1, range(7), n_jobs=2)) == list(range(1, 8))
    assert not parallel.inside_worker()


def test_blas_keeps_one_thread_in_the_workers():
    from limits import blas

    libs = blas._libs(load_scipy=False)
    if not libs:
        pytest.skip("no OpenBLAS found to ask")
    getter = libs[0][1]
    with blas.blas_threads(2):
        outside = int(getter())
        inside = parallel.map_blocks(lambda _: int(getter()), range(4), n_jobs=2)
        with blas.blas_threads(3):                    # a no-op when nested in a worker; here it applies
            assert int(getter()) == 3
    assert outside == 2 and inside == [1] * 4


def test_split_is_contiguous_and_balanced():
    g = parallel.split([5, 1, 1, 1, 1, 1, 5, 1], 3)
    assert [k for r in g for k in r] == list(range(8)) and len(g) <= 3
    assert parallel.split([1, 2], 1) == [range(2)]


# ------------------------------------------------------------------------------ the parallel paths, bit for bit
@pytest.fixture(autouse=True)
def _small_tasks(monkeypatch):
    """Every loop parallel even at these small sizes (the task-size floors keep small inputs in one thread)."""
    monkeypatch.setattr(parallel, "MIN_ENTRIES", 1)
    monkeypatch.setattr(parallel, "MIN_COPIES", 1)
    monkeypatch.setattr("limits.kernels.blocked.PATCH_PAIRS", 8)


def test_small_inputs_stay_in_one_thread(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_ENTRIES", 1 << 16)
    assert parallel.split([100] * 50, 2, parallel.MIN_ENTRIES) == [range(50)]
    assert len(parallel.split([1 << 16] * 4, 2, parallel.MIN_ENTRIES)) == 2


def _inputs(P, d=6, seed=0):
    X = np.random.default_rng(seed).standard_normal((P, d))
    X[1] = X[0]                                       # identical inputs (snapped) and a nearly collinear one
    X[2] = X[0] * (1 + 1e-9)                          # (the half-angle patch)
    return X


def _same(a, b):
    for x, y in zip(a, b):
        assert (x is None and y is None) or np.array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("act", ["relu", "erf", "gelu"])
def test_mlp_kernels_bit_for_bit(act, monkeypatch):
    X = _inputs(300)                                  # P ≥ 256: the Gram of the inputs in row blocks too
    calls = []
    share = parallel._share
    monkeypatch.setattr(parallel, "_share", lambda pool, fn, items, n: (calls.append(n), share(pool, fn, items, n))[1])
    limits.kernels.kernel(limits.mlp(6, 1, activation=act), X, n_jobs=2)
    assert len(calls) >= 4 and set(calls) == {2}     # Gram, layer, read-out, unpack: each on two threads
    for m in (limits.mlp(6, 3, activation=act, sigma_w2=1.8, sigma_b2=0.1),
              limits.resnet(6, 3, activation=act, sigma_w2=1.2, sigma_b2=0.1)):
        one, two = (limits.kernels.kernel(m, X, n_jobs=n) for n in (1, 2))
        _same((one.nngp, one.ntk), (two.nngp, two.ntk))
        r1, r2 = (limits.kernels.nngp(X, model=m, keep="all", n_jobs=n) for n in (1, 2))
        _same((r1.K, r1.Theta, r1.K_out), (r2.K, r2.Theta, r2.K_out))
        c1, c2 = (limits.kernels.kernel(m, X, X[:90] * 1.1, layers=True, n_jobs=n) for n in (1, 2))
        _same((c1.nngp, c1.ntk, c1.K, c1.Theta), (c2.nngp, c2.ntk, c2.K, c2.Theta))


def test_kernel_blocked_bit_for_bit():
    X = _inputs(150)
    for act in ("relu", "tanh"):                      # the fused tiles, and the general path on tiles
        m = limits.mlp(6, 2, activation=act, sigma_w2=1.8, sigma_b2=0.1)
        for X2, fill, block in ((None, "both", 48), (None, "upper", 48), (X[:40], "both", 48), (None, "both", 100)):
            a, b = (limits.kernels.kernel_blocked(m, X, block=block, X2=X2, fill=fill, n_jobs=n, progress=False)
                    for n in (1, 2))                  # block 100: 3 tiles, each on the threads by rows
            keep = (lambda A: np.triu(A)) if fill == "upper" else (lambda A: A)     # the other triangle: unset
            _same((keep(a.nngp), keep(a.ntk)), (keep(b.nngp), keep(b.ntk)))


def test_compositions_bit_for_bit():
    rng = np.random.default_rng(1)
    cnn = limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                        L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0), L.Activation("relu"),
                        L.GlobalAvgPool(), L.Dense())
    X = rng.standard_normal((24, 4, 4, 2))
    X[3] = X[2]
    for X2 in (None, X[:5]):
        a, b = (limits.kernels.kernel(cnn, X, X2, n_jobs=n) for n in (1, 2))
        _same((a.nngp, a.ntk), (b.nngp, b.ntk))
        assert a.diagnostics["structure"] == b.diagnostics["structure"]
    a, b = (limits.kernels.kernel_blocked(cnn, X, block=8, n_jobs=n, progress=False) for n in (1, 2))
    _same((a.nngp, a.ntk), (b.nngp, b.ntk))
    mlp = limits.serial(L.Dense(sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"), L.Dense())   # tiles of pairs
    from limits.kernels.composed import kernel as composed

    Z = rng.standard_normal((40, 5))
    a = composed(mlp, Z, block=16)
    with parallel.using(2):
        b = composed(mlp, Z, block=16)
    _same((a.nngp, a.ntk), (b.nngp, b.ntk))


def test_finite_monte_carlo_bit_for_bit():
    import limits.finite as F
    from limits.finite.serial import SerialNetwork

    net = F.resnet(4, 32, 2, activation="tanh", sigma_b2=0.1, rho=0.5)
    X = _inputs(12, d=4)
    a = F.empirical_kernels(net, X, 12, seed=5, chunk=12, n_jobs=1)
    b = F.empirical_kernels(net, X, 12, seed=5, n_jobs=2)              # other chunks too: same sums
    c = F.empirical_kernels(net, X, 12, seed=5, chunk=5, workers=2, keep_samples=False)
    _same((a.K, a.mean, a.se, a.out_mean, a.out_se), (b.K, b.mean, b.se, b.out_mean, b.out_se))
    _same((a.mean, a.se, a.out_se), (c.mean, c.se, c.out_se))
    cnn = limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME"), L.Activation("relu"), L.GlobalAvgPool(),
                        L.Dense())
    Xi = np.random.default_rng(2).standard_normal((4, 4, 4, 2))
    s1 = SerialNetwork(cnn, 8).kernels(Xi, 6, seed=3, chunk=6, n_jobs=1)
    s2 = SerialNetwork(cnn, 8).kernels(Xi, 6, seed=3, chunk=2, n_jobs=2)
    _same(s1, s2)


def test_predictions_bit_for_bit_and_to_rounding():
    """The kernels are the same bits; the Cholesky and solves of P ≥ 256 points run on multi-threaded BLAS
    (limits.parallel.dense_blas): equal to rounding only."""
    m = limits.mlp(6, 2, activation="relu", sigma_w2=2.0, sigma_b2=0.1)
    for P, exact in ((120, True), (300, False)):
        X = _inputs(P)
        Y = np.sin(X[:, :2])
        Xs = _inputs(40, seed=4)
        a, b = (limits.predict.nngp_posterior(m, X, Y, Xs, noise=1e-2, n_jobs=n) for n in (1, 2))
        if exact:
            _same((a.mean, a.cov), (b.mean, b.cov))
        else:
            np.testing.assert_allclose(b.mean, a.mean, rtol=1e-12, atol=1e-12 * np.abs(a.mean).max())
            np.testing.assert_allclose(b.cov, a.cov, rtol=1e-10, atol=1e-12 * np.abs(a.cov).max())
        g1, g2 = (limits.predict.gradient_descent(m, X, Y, Xs, t=[1.0, np.inf], n_jobs=n) for n in (1, 2))
        np.testing.assert_allclose(g2.mean, g1.mean, rtol=1e-10, atol=1e-12 * np.abs(g1.mean).max())
