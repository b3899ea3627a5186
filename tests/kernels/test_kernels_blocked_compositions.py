"""kernel_blocked of compositions (issue 36 goal 5): tiles equal kernel(net, X), in memory and in the tile store,
serially and on dask bit for bit, tied to their composition, resumable after an interrupt."""
import multiprocessing
import os
import time

import numpy as np
import pytest

import limits
from limits.kernels import kernel_blocked
from limits.kernels.blocked import compute_tile
from limits.kernels.tilestore import TileStore, fill_tiles, kernel_digest, store_lock

L = limits.layers


def _cnn(sw2=2.0):
    return limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=sw2, sigma_b2=0.1), L.Activation("relu"),
                         L.AvgPool((2, 2)), L.Conv(filter_shape=(2, 2), padding="SAME"), L.Activation("relu"),
                         L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.05))


def _strided():
    return limits.serial(L.Conv(filter_shape=(3, 3), padding="VALID", strides=(2, 2), sigma_w2=2.0, sigma_b2=0.1),
                         L.Activation("relu"), L.Conv(filter_shape=(2, 2), padding="VALID"), L.Activation("erf"),
                         L.Flatten(), L.Dense())


def _attention():
    return limits.serial(L.Dense(1.5, 0.1), L.LayerNorm(), L.Attention(n_heads=2, qk_scale=0.5), L.Activation("relu"),
                         L.GlobalAvgPool(), L.Dense(1.2, 0.0))


def _images(P=21, shape=(6, 6, 2), seed=0):
    X = np.random.default_rng(seed).standard_normal((P, *shape))
    X[17] = X[2]                       # identical inputs in different tiles (relu's infinite slope at correlation 1)
    return X


CASES = {"cnn": (_cnn, (6, 6, 2)), "strided-valid": (_strided, (7, 7, 1)), "layernorm-attention": (_attention, (5, 3))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tiles_equal_the_kernel(case, tmp_path):
    make, shape = CASES[case]
    net, X = make(), _images(shape=shape)
    ref = limits.kernels.kernel(net, X)
    mem = kernel_blocked(net, X, block=8, progress=False)
    st = kernel_blocked(net, X, block=8, out=tmp_path / "K", progress=False)
    assert isinstance(st, TileStore) and st.diagnostics["tiles"] == 6 and st.diagnostics["computed"] == 6
    for g in ("nngp", "ntk"):
        scale = np.abs(getattr(ref, g)).max()
        assert np.abs(getattr(mem, g) - getattr(ref, g)).max() <= 1e-12 * scale
        np.testing.assert_array_equal(st.to_array(g), getattr(mem, g))       # the same tiles, bit for bit
        np.testing.assert_array_equal(st.diagonal(g), kernel_blocked_diag(net, X)[g])
    cross = kernel_blocked(net, X[:5], X2=X[5:], block=4, progress=False)
    assert np.abs(cross.ntk - ref.ntk[:5, 5:]).max() <= 1e-12 * np.abs(ref.ntk).max()


def kernel_blocked_diag(net, X):
    return limits.kernels.blocked.kernel_diag(net, X)


def test_in_memory_outputs_and_triangles(tmp_path):
    net, X = _cnn(), _images()
    full = kernel_blocked(net, X, block=8, get=("nngp",), progress=False).nngp
    up = kernel_blocked(net, X, block=8, get=("nngp",), fill="upper", progress=False).nngp
    iu = np.triu_indices(X.shape[0])
    np.testing.assert_array_equal(up[iu], full[iu])
    r = kernel_blocked(net, X, block=8, get=("nngp",), out=tmp_path / "K.npy", dtype=np.float32, progress=False)
    np.testing.assert_array_equal(np.load(tmp_path / "K.npy"), full.astype(np.float32))
    assert r.diagnostics["path"] == "packed" and r.diagnostics["tiles"] == 6


def test_digest_identifies_the_composition_and_the_inputs(tmp_path):
    X = _images()
    base = kernel_digest(_cnn(), X, 8)
    assert kernel_digest(_cnn(np.nextafter(2.0, 3.0)), X, 8) != base        # one ulp of one hyperparameter
    assert kernel_digest(_cnn(), X.astype(np.float32).astype(np.float64) + 0.0, 8) != base
    assert kernel_digest(_cnn(), X.reshape(21, 6, 12, 1)[:, :6, :6], 8) != base
    assert kernel_digest(_cnn(), X, 16) != base
    assert kernel_digest(_cnn(), X.copy(), 8) == base
    kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "K", progress=False)
    with pytest.raises(ValueError, match="different kernel"):
        kernel_blocked(_cnn(2.5), X, block=8, get=("nngp",), out=tmp_path / "K", progress=False)
    with pytest.raises(ValueError, match="spatial"):       # refused before a store is made
        kernel_blocked(limits.serial(L.Conv(filter_shape=(3, 3)), L.Dense()), X, out=tmp_path / "N", progress=False)
    assert not (tmp_path / "N" / "store.json").exists()


def test_foreign_damaged_and_non_regular_tiles(tmp_path):
    X = _images()
    a = kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "A", progress=False)
    b = kernel_blocked(_cnn(3.0), X, block=8, get=("nngp",), out=tmp_path / "B", progress=False)
    ref = a.to_array()
    for ab in ((0, 1), (1, 2)):                                  # tiles of another composition, same names
        a.tile_path("nngp", *ab).write_bytes(b.tile_path("nngp", *ab).read_bytes())
    p = a.tile_path("nngp", 2, 2)
    data = bytearray(p.read_bytes())
    data[-10] ^= 0x10                                             # one flipped exponent bit
    p.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="2 foreign tiles, 1 damaged tile"):
        st = kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "A", progress=False)
    assert st.diagnostics["computed"] == 3 and st.diagnostics["recomputed"] == {"foreign": 2, "damaged": 1}
    np.testing.assert_array_equal(st.to_array(), ref)
    os.unlink(p)
    os.symlink(b.tile_path("nngp", 2, 2), p)
    with pytest.raises(ValueError, match="regular files only"):
        kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "A", progress=False)


def _hold(path, ready, release):
    with store_lock(path):
        ready.set()
        release.wait(20)


def test_a_second_writer_is_refused(tmp_path):
    X = _images()
    kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "K", progress=False)
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(tmp_path / "K", ready, release))
    proc.start()
    try:
        assert ready.wait(20)
        with pytest.raises(ValueError, match=f"in use by process {proc.pid}"):
            kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "K", progress=False)
    finally:
        release.set()
        proc.join(20)
    st = kernel_blocked(_cnn(), X, block=8, get=("nngp",), out=tmp_path / "K", progress=False)
    assert st.diagnostics["computed"] == 0


def test_interrupted_run_resumes_with_only_the_missing_tiles(tmp_path):
    """A Ctrl-C after 4 of 10 tiles; the rerun computes exactly the other 6, and the store equals a one-shot run
    bit for bit."""
    net, X = _cnn(), _images(P=30)
    one = kernel_blocked(net, X, block=8, out=tmp_path / "one", progress=False)
    done = []

    def interrupted(m, X_, a, b, *rest):
        if len(done) == 4:
            raise KeyboardInterrupt
        done.append((a, b))
        return compute_tile(m, X_, a, b, *rest)

    with pytest.raises(KeyboardInterrupt, match="4 of 10 tiles are kept"):
        fill_tiles(net, X, tmp_path / "two", interrupted, block=8, get=("nngp", "ntk"), progress=False)
    again = []

    def counted(m, X_, a, b, *rest):
        again.append((a, b))
        return compute_tile(m, X_, a, b, *rest)

    st = fill_tiles(net, X, tmp_path / "two", counted, block=8, get=("nngp", "ntk"), progress=False)
    assert sorted(again) == sorted(set(st.pairs()) - set(done)) and st.diagnostics["reused"] == 4
    for g in ("nngp", "ntk"):
        for a, b in st.pairs():
            assert st.tile_path(g, a, b).read_bytes() == one.tile_path(g, a, b).read_bytes()


def test_a_swallowed_ctrl_c_stops_the_tiles_at_the_next_step(tmp_path):
    """Library use: a Ctrl-C that lands in a callback which swallows it (as dask's do) still stops the run at the
    next tile (limits.interrupts.recorded); Python's handler and an empty record are restored afterwards."""
    import signal

    from limits import interrupts

    net, X = _cnn(), _images(P=30)
    calls = []

    def swallowing(m, X_, a, b, *rest):
        calls.append((a, b))
        if len(calls) == 2:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)                      # the handler runs here, in the main thread …
            except KeyboardInterrupt:
                pass                                 # … and the exception is swallowed
        return compute_tile(m, X_, a, b, *rest)

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt, match="[12] of 10 tiles are kept"):   # tile 2 stops inside or after
            fill_tiles(net, X, tmp_path / "K", swallowing, block=8, get=("nngp",), progress=False)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and not interrupts.seen()
    finally:
        signal.signal(signal.SIGINT, old)
    assert len(calls) == 2


def test_estimates_refuse_before_computing(tmp_path):
    net, X = _cnn(), _images()
    with pytest.raises(ValueError, match="one tile task .* needs"):
        kernel_blocked(net, X, block=8, out=tmp_path / "K", backend="dask", memory_limit="1KiB", progress=False)
    assert not any((tmp_path / "K" / "nngp").iterdir())
    st = kernel_blocked(net, X, block=8, get=("nngp",), out=tmp_path / "K2", progress=False)
    on_disk = sum(f.stat().st_size for f in (tmp_path / "K2" / "nngp").iterdir())
    assert st.diagnostics["disk_bytes_estimate"] == on_disk
    assert 8 * 8 * 8 < st.diagnostics["worker_memory_bytes"] < 64 * 2**20


def test_regression_cg_accepts_a_composition(tmp_path):
    net = limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                        L.Flatten(), L.Dense())
    r = np.random.default_rng(0)
    X, Xs = r.standard_normal((40, 4, 4, 1)), r.standard_normal((6, 4, 4, 1))
    Y = np.sin(X[:, 0, 0, :])
    for k in ("nngp", "ntk"):
        a = limits.predict.kernel_regression(net, X, Y, Xs, k, noise=0.1)
        b = limits.predict.kernel_regression(net, X, Y, Xs, k, noise=0.1, solver="cg", store=tmp_path / k, block=16,
                                             progress=False)
        assert np.abs(a.mean - b.mean).max() <= 1e-8 * np.abs(a.mean).max()
        assert np.abs(a.var - b.var).max() <= 1e-8 * np.abs(a.var).max()
        assert b.diagnostics["tiles"]["tiles"] == 6


def test_dask_tiles_are_the_serial_tiles_bit_for_bit(tmp_path):
    distributed = pytest.importorskip("distributed")
    net, X = _strided(), _images(shape=(7, 7, 1))
    ser = kernel_blocked(net, X, block=8, out=tmp_path / "S", progress=False)
    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GiB", dashboard_address=":0",
                                  processes=True) as cluster, distributed.Client(cluster) as client:
        st = kernel_blocked(net, X, block=8, out=tmp_path / "D", backend="dask", scheduler=client, progress=False)
    assert st.diagnostics["backend"] == "dask" and st.diagnostics["computed"] == 6, time.perf_counter() - t0
    for g in ("nngp", "ntk"):
        for a, b in st.pairs():
            assert st.tile_path(g, a, b).read_bytes() == ser.tile_path(g, a, b).read_bytes()
