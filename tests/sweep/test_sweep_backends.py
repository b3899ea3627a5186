"""limits.sweep on real engines: joblib/loky and an in-process dask LocalCluster (no mocks)."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import limits.sweep as S

import sweep_points as P

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


GRID = S.Grid(product={"width": [3, 6, 12], "depth": [1, 2, 4]}, seeds=3, root=11)


def test_serial_loky_dask_identical(client, tmp_path):
    ref = S.run(P.noisy, GRID, backend="serial", progress=False)
    loky = S.run(P.noisy, GRID, backend="loky", n_jobs=2, progress=False, store=tmp_path / "loky")
    dask = S.run(P.noisy, GRID, backend="dask", scheduler=client, progress=False, store=tmp_path / "dask")
    dask_addr = S.run(P.noisy, GRID, backend="dask", scheduler=client.scheduler.address, chunk=5, progress=False)
    for ds in (loky, dask, dask_addr):
        for v in ("trace", "eig", "theory", "failed"):
            np.testing.assert_array_equal(ds[v].values, ref[v].values)
        assert ds.attrs["n_failed"] == 0
    assert dask_addr.attrs["chunk"] == 5
    # the point files of the two stores are the same points (same keys)
    names = lambda d: sorted(p.name for p in S.Store(d).point_files())  # noqa: E731
    assert names(tmp_path / "loky") == names(tmp_path / "dask")


@pytest.mark.parametrize("fn,grid", [
    ("limits.kernels.critical_line", {"activation": ["tanh", "erf"], "sigma_b2": [0.0, 0.25]}),
    ("sweep_points.dmft_loss", {"gamma0": [0.1, 1.0]}),
])
def test_library_computations_bit_identical_on_every_backend(client, fn, grid):
    """The computations of the example sweep files (docs/sweeps/): serial, loky and dask agree bit for bit."""
    import importlib

    mod, name = fn.rsplit(".", 1)
    f = getattr(importlib.import_module(mod), name)
    ref = S.run(f, grid, backend="serial", progress=False)
    for kw in ({"backend": "loky", "n_jobs": 2, "chunk": 1}, {"backend": "dask", "scheduler": client}):
        ds = S.run(f, grid, progress=False, **kw)
        for v in ref.data_vars:
            if ref[v].dtype.kind == "f" and not v.endswith(("seconds", "wall_time_s")):
                np.testing.assert_array_equal(ds[v].values, ref[v].values, err_msg=f"{kw['backend']} {v}")


def test_auto_chunking_batches_cheap_points(client):
    g = S.Grid(product={"x": list(range(40))}, seeds=2, fixed={"delay": 0.002})
    ds = S.run(P.sleepy_nopid, g, backend="dask", scheduler=client, progress=False)
    # ~2 ms points: 0.2 s wants ~100 per task, capped at 4 tasks per worker → ceil(78/8) = 10
    assert 5 <= ds.attrs["chunk"] <= 10
    ref = S.run(P.sleepy_nopid, g, backend="serial", progress=False)
    np.testing.assert_array_equal(ds["y"].values, ref["y"].values)


def test_failures_on_workers(client, tmp_path):
    g = S.Grid(product={"x": [0.0, 1.0, 2.0]}, seeds=2, fixed={"delay": 0.0, "fail_at": 1.0})
    for kw in ({"backend": "loky", "n_jobs": 2}, {"backend": "dask", "scheduler": client}):
        ds = S.run(P.sleepy, g, progress=False, **kw)
        assert ds.attrs["n_failed"] == 2 and ds["failed"].sel(x=1.0).all()
        assert "ArithmeticError" in json.loads(ds.attrs["error"])[0]["error"]
        with pytest.raises(S.PointFailed):
            S.run(P.sleepy, g, progress=False, fail_fast=True, chunk=1, **kw)


def test_dask_worker_killed_mid_sweep(client, tmp_path):
    """SIGKILL one worker process while its point runs: dask reruns its tasks elsewhere, the sweep
    completes with every point correct. The points wait until the worker is killed (a gate file), so the kill
    lands mid-sweep at any machine load."""
    marker = tmp_path / "markers"
    marker.mkdir()
    g = S.Grid(product={"x": list(range(16))}, fixed={"marker_dir": str(marker)})
    pids = set(client.run(os.getpid).values())
    killed = []

    def killer():
        try:
            deadline = time.monotonic() + 900
            while not killed and time.monotonic() < deadline:
                running = {int(p.name.rsplit("-", 1)[1]) for p in marker.glob("start-*")} & pids
                if running:                          # a worker is inside a point: kill it there
                    victim = min(running)
                    os.kill(victim, signal.SIGKILL)
                    killed.append(victim)
                time.sleep(0.02)
        finally:
            (marker / "open").touch()                # the other points may finish now

    th = threading.Thread(target=killer)
    th.start()
    ds = S.run(P.touch_then_wait, g, backend="dask", scheduler=client, chunk=1, store=tmp_path / "st",
               progress=False)
    th.join()
    assert killed, "no worker was killed (the test did not exercise anything)"
    assert ds.attrs["n_failed"] == 0 and ds.attrs["computed"] == 16
    np.testing.assert_array_equal(ds["value"].values, np.arange(16) ** 2)
    assert killed[0] not in set(client.run(os.getpid).values())


DRIVER = """
import signal, sys
# as a program started from a terminal: Python's Ctrl-C handler, whatever this test process's SIGINT disposition
# (an ignored SIGINT is inherited across exec — a pytest-xdist worker that ignores it made the driver deaf to it)
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [{tests!r}, {root!r}]
import limits.sweep as S, sweep_points as P
g = S.Grid(product={{"x": list(range(30))}}, seeds=1, fixed={{"gate_dir": {gate!r}, "free": {free}}})
S.run(P.gated, g, backend="serial", store={store!r}, progress=False)
"""


def _driver(tmp_path, free, **popen):
    """The driver script as a process: points x < ``free`` are stored at once, point ``free`` then waits in flight
    (for tmp_path/open, which these tests create only to resume)."""
    store, script = tmp_path / "st", tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(HERE), root=str(ROOT), store=str(store), gate=str(tmp_path), free=free))
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "LIMITS_PROGRESS": "0"}, **popen)
    return proc, store


def _stored(store):
    return len(list((store / "points").rglob("*.json"))) if (store / "points").exists() else 0


def test_resume_after_sigkill_of_driver(tmp_path, wait_until):
    proc, store = _driver(tmp_path, 6)
    wait_until(lambda: _stored(store) >= 6, "6 stored points", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    n_stored = _stored(store)
    assert n_stored == 6                                  # the 7th was in flight
    # nothing partial: every point file loads; leftovers can only be hidden temporary files
    st = S.Store(store)
    for js in (store / "points").rglob("*.json"):
        meta, arrays = st.load(js.stem)
        assert meta["status"] == "ok" and list(arrays) == ["y"]
    assert all(p.suffix in (".npz", ".json") or (p.name.startswith(".") and p.suffix == ".tmp")
               for p in (store / "points").rglob("*") if p.is_file())
    (tmp_path / "open").touch()
    g = S.Grid(product={"x": list(range(30))}, seeds=1, fixed={"gate_dir": str(tmp_path), "free": 6})
    resumed = S.run(P.gated, g, backend="loky", n_jobs=2, store=store, progress=False)
    assert resumed.attrs["reused"] == n_stored and resumed.attrs["computed"] == 30 - n_stored
    clean = S.run(P.sleepy_nopid, S.Grid(product={"x": list(range(30))}, seeds=1, fixed={"delay": 0.0}),
                  progress=False)
    np.testing.assert_array_equal(resumed["y"].values, clean["y"].values)


def test_loky_worker_dying_resubmits_the_rest(tmp_path):
    g = S.Grid(product={"x": list(range(12))}, fixed={"marker_dir": str(tmp_path)})
    ds = S.run(P.die_once, g, backend="loky", n_jobs=2, chunk=1, store=tmp_path / "st", progress=False)
    assert (tmp_path / "died").exists()
    assert ds.attrs["n_failed"] == 0
    np.testing.assert_array_equal(ds["value"].values, np.arange(12) + 0.5)


def test_sigint_of_driver_keeps_the_store(tmp_path, wait_until):
    proc, store = _driver(tmp_path, 3, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: _stored(store) >= 3, "3 stored points", proc)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=600)[1]               # an exception's unwinding: well under a CPU-second
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    st = S.Store(store)
    jsons = list((store / "points").rglob("*.json"))
    assert len(jsons) == 3                                # the 4th was in flight
    for js in jsons:
        meta, arrays = st.load(js.stem)
        assert meta["status"] == "ok" and list(arrays) == ["y"]
    assert not [p for p in (store / "points").rglob(".*.tmp")]     # Python cleans up on SIGINT


def test_a_function_the_workers_cannot_import_is_a_prompt_clear_error(client, tmp_path, monkeypatch):
    """Issue 41: a point function whose module only the driver can import (here: a folder put on the driver's
    sys.path after the workers started) stops the sweep with a ValueError naming the function and the workers'
    ImportError — dask used to log the failure to read the task and wait for ever."""
    (tmp_path / "driver_only_theory.py").write_text("def f(x):\n    return {'y': 2.0 * x}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import driver_only_theory

    def hung(*_):
        raise TimeoutError("the sweep hung: no error after 600 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(600)                 # a few seconds of work; a hang (the bug) fails here instead of blocking
    try:
        with pytest.raises(ValueError, match=r"function driver_only_theory\.f: the dask workers cannot load it "
                                             r"\(ModuleNotFoundError: No module named 'driver_only_theory'\)"):
            S.run(driver_only_theory.f, {"x": [0.0, 1.0, 2.0]}, backend="dask", scheduler=client, progress=False,
                  store=tmp_path / "st", name="driver_only_theory.f")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert json.loads((tmp_path / "st" / "sweep.json").read_text())["status"] == "interrupted"
