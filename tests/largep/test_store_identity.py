"""A tile store is tied to its kernel (issue 31 item 3): tiles of another kernel, damaged tiles, a second
writer and non-regular files never give `limits regress --solver cg` a silently different answer.

The three failures of the issue, reproduced through the command line: tiles copied from another model's store,
one flipped exponent bit in a tile, and two processes on one new store. Before the fix each exited 0 with a mean
0.3 / 6e-4 off the Cholesky answer; now each tile is recomputed (and counted) or the run is refused with exit 2.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import limits
from limits.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def task(tmp_path):
    """Two models of the same input dimension, data files, and the Cholesky answers of both."""
    r = np.random.default_rng(0)
    X, Xs = r.standard_normal((120, 4)), r.standard_normal((7, 4))
    Y = np.sin(X[:, :1]) + 0.1 * r.standard_normal((120, 1))
    for name, a in (("X", X), ("Y", Y), ("Xs", Xs)):
        np.save(tmp_path / f"{name}.npy", a)
    limits.mlp(4, depth=2, activation="erf").save(tmp_path / "A.toml")
    limits.mlp(4, depth=6, activation="relu", sigma_w2=2.0).save(tmp_path / "B.toml")
    ref = {m: limits.predict.kernel_regression(limits.Model.load(tmp_path / m), X, Y, Xs, noise=0.1).mean
           for m in ("A.toml", "B.toml")}
    return tmp_path, ref


def _argv(d, model, store, *extra):
    return ["regress", "--model", str(d / model), "--x-train", str(d / "X.npy"), "--y-train", str(d / "Y.npy"),
            "--x-test", str(d / "Xs.npy"), "--noise", "0.1", "--solver", "cg", "--store", str(store),
            "--var-points", "0", "--json", *extra]


def _run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _mean(out):
    return np.array(json.loads(out)["mean"])


def _close(mean, ref):
    return np.abs(mean - ref).max() <= 1e-8 * np.abs(ref).max()


def _tiles(store):
    return sorted(p for p in (Path(store) / "nngp").iterdir() if not p.name.startswith("."))


def test_tiles_copied_from_another_models_store_are_recomputed(task, capsys):
    d, ref = task
    for m, s in (("A.toml", "SA"), ("B.toml", "SB")):
        rc, out, err = _run(_argv(d, m, d / s), capsys)
        assert rc == 0 and _close(_mean(out), ref[m]), err
    for src, dst in zip(_tiles(d / "SB"), _tiles(d / "SA"), strict=True):
        shutil.copyfile(src, dst)                                   # the other model's tiles, under the same names
    rc, out, err = _run(_argv(d, "A.toml", d / "SA"), capsys)
    assert rc == 0, err
    assert _close(_mean(out), ref["A.toml"]), np.abs(_mean(out) - ref["A.toml"]).max()
    tiles = json.loads(out)["diagnostics"]["tiles"]
    assert tiles["recomputed"] == {"foreign": 1} and tiles["reused"] == 0, tiles


def test_a_flipped_exponent_bit_is_recomputed(task, capsys):
    d, ref = task
    rc, out, err = _run(_argv(d, "A.toml", d / "S"), capsys)
    assert rc == 0, err
    victim, = _tiles(d / "S")
    data = bytearray(victim.read_bytes())
    data[-10] ^= 0x10                                                # K[P-1, P-2]'s lowest exponent bit: ×2 or ×½
    victim.write_bytes(bytes(data))
    rc, out, err = _run(_argv(d, "A.toml", d / "S"), capsys)
    assert rc == 0, err
    assert _close(_mean(out), ref["A.toml"]), np.abs(_mean(out) - ref["A.toml"]).max()
    tiles = json.loads(out)["diagnostics"]["tiles"]
    assert tiles["recomputed"] == {"damaged": 1} and tiles["reused"] == 0, tiles


# both processes find no store before either creates it (the race of two runs started together), made certain by
# a rendezvous before the first directory of the store is made: each process announces itself in READY and waits
# for the other; then B creates the store while A waits until it exists and goes on — states, not delays, so the
# race is the same on a loaded machine
_DELAYED_CREATE = """
import os, pathlib, sys, time
orig, store, ready = pathlib.Path.mkdir, os.environ["STORE"], pathlib.Path(os.environ["READY"])
def wait(cond):
    deadline = time.monotonic() + 900
    while not cond():
        if time.monotonic() > deadline:
            sys.exit("rendezvous: the other process never came")
        time.sleep(0.01)
def slow(self, *a, **k):
    if str(self).startswith(store) and os.environ.pop("DELAY", None):
        (ready / os.environ["WHO"]).touch()
        wait(lambda: len(list(ready.iterdir())) == 2)
        if os.environ["WHO"] == "A":
            wait(lambda: os.path.exists(store))
    return orig(self, *a, **k)
pathlib.Path.mkdir = slow
from limits.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_two_processes_on_one_new_store_never_interleave(task):
    d, ref = task
    (d / "ready").mkdir()
    procs = []
    for m, who in (("A.toml", "A"), ("B.toml", "B")):
        env = dict(os.environ, PYTHONPATH=str(ROOT), LIMITS_PROGRESS="0", STORE=str(d / "S"), DELAY="1",
                   WHO=who, READY=str(d / "ready"))
        procs.append((m, subprocess.Popen([sys.executable, "-c", _DELAYED_CREATE, *_argv(d, m, d / "S")],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))
    results = {m: (*p.communicate(timeout=900), p.returncode) for m, p in procs}
    results = {m: (rc, out, err) for m, (out, err, rc) in results.items()}
    assert any(rc == 0 for rc, _, _ in results.values()), results
    for m, (rc, out, err) in results.items():
        if rc == 0:                                    # an answer is this model's answer, never the other's
            assert _close(_mean(out), ref[m]), (m, np.abs(_mean(out) - ref[m]).max())
        else:                                          # the second writer: one line naming the option and the store
            assert rc == 2 and f"--store: {d / 'S'}" in err and err.count("\n") == 1, err


def test_regress_reports_recomputed_tiles_in_its_output(task, capsys):
    d, ref = task
    assert _run(_argv(d, "A.toml", d / "S"), capsys)[0] == 0
    victim, = _tiles(d / "S")
    data = bytearray(victim.read_bytes())
    data[-10] ^= 0x10
    victim.write_bytes(bytes(data))
    rc, out, err = _run(_argv(d, "A.toml", d / "S")[:-1], capsys)            # human-readable output
    assert rc == 0 and err == "", err
    assert "tiles recomputed: 1 whose bytes did not match their digest" in out, out


# ------------------------------------------------------------------------------------------------ the API
from limits.largep import TileStore, kernel_tiles          # noqa: E402
from limits.kernels.tilestore import store_lock            # noqa: E402


def _store(tmp_path, name="K", depth=2, P=120, block=30):
    X = np.random.default_rng(1).standard_normal((P, 4))
    m = limits.mlp(4, depth=depth, activation="erf")
    return m, X, kernel_tiles(m, X, tmp_path / name, block=block, progress=False)


def test_every_single_bit_flip_is_detected_and_correct_tiles_never_are(tmp_path):
    """The check's power and false-alarm rate: 400 random single-bit flips anywhere in a tile file (magic, header,
    data) are all refused (flagged "damaged" or "foreign"); the 10 untouched tiles of 20 resumed stores are all
    reused (0 false alarms in 200 verifications)."""
    m, X, st = _store(tmp_path)
    rng = np.random.default_rng(0)
    path = st.tile_path("nngp", 0, 1)
    good = path.read_bytes()
    for bit in rng.integers(0, 8 * len(good), 400):
        bad = bytearray(good)
        bad[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(bad))
        fresh = TileStore.open(st.path)
        with pytest.raises(Exception) as e:
            fresh._read("nngp", 0, 1)
        assert getattr(e.value, "reason", None) in ("damaged", "foreign"), (bit, e.value)
    path.write_bytes(good)
    for i in range(20):
        again = kernel_tiles(m, X, st.path, block=30, progress=False)
        assert again.diagnostics["reused"] == 10 and again.diagnostics["recomputed"] == {}


def test_a_tile_moved_to_another_position_is_foreign(tmp_path):
    m, X, st = _store(tmp_path)
    ref = st.to_array()
    shutil.copyfile(st.tile_path("nngp", 0, 1), st.tile_path("nngp", 0, 2))      # same shape, wrong place
    with pytest.warns(RuntimeWarning, match="1 foreign tile"):
        again = kernel_tiles(m, X, st.path, block=30, progress=False)
    assert again.diagnostics["recomputed"] == {"foreign": 1}
    np.testing.assert_array_equal(again.to_array(), ref)


def test_a_tile_changed_while_in_use_is_recomputed_or_refused(tmp_path):
    m, X, st = _store(tmp_path)
    V = np.random.default_rng(2).standard_normal(120)
    before = st.matvec(V)
    p = st.tile_path("nngp", 1, 3)
    data = bytearray(p.read_bytes())
    data[-10] ^= 0x10
    p.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="changed while it was being used"):
        np.testing.assert_array_equal(st.matvec(V), before)          # the store filled here repairs it
    assert st.diagnostics["recomputed_while_reading"] == 1
    p.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match=r"tile nngp \(1, 3\)"):
        TileStore.open(st.path).matvec(V)                            # opened elsewhere: refused, never used


def test_non_regular_files_in_a_store_are_refused(tmp_path):
    import time

    m, X, st = _store(tmp_path)
    cases = []
    t = st.tile_path("nngp", 0, 0)
    for kind, make in (("a symbolic link", lambda p: p.symlink_to(st.tile_path("nngp", 1, 1))),
                       ("a FIFO", lambda p: os.mkfifo(p)),
                       ("a symbolic link", lambda p: p.symlink_to("/dev/zero"))):
        os.unlink(t)
        make(t)
        cases.append(kind)
        t0 = time.process_time()      # refused from its metadata (reading /dev/zero would burn CPU time)
        with pytest.raises(ValueError, match=kind):
            kernel_tiles(m, X, st.path, block=30, progress=False)
        assert time.process_time() - t0 < 10
    os.unlink(t)
    (st.path / "nngp").rename(tmp_path / "elsewhere")
    (st.path / "nngp").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="not a directory of tiles"):
        kernel_tiles(m, X, st.path, block=30, progress=False)
    os.unlink(st.path / "nngp")
    (tmp_path / "elsewhere").rename(st.path / "nngp")
    os.unlink(st.path / "lock")
    (st.path / "lock").symlink_to(tmp_path / "target")
    with pytest.raises(ValueError, match="lock is a symbolic link"):
        kernel_tiles(m, X, st.path, block=30, progress=False)
    assert not (tmp_path / "target").exists()                      # the link was not followed


def test_orphan_temporary_tiles_are_removed_on_resume(tmp_path):
    m, X, st = _store(tmp_path)
    for i in range(3):
        (st.path / "nngp" / f".000000_00000{i}.tile.x{i}.tmp").write_bytes(b"partial")
    again = kernel_tiles(m, X, st.path, block=30, progress=False)
    assert again.diagnostics["orphans_removed"] == 3 and again.diagnostics["reused"] == 10
    assert not list((st.path / "nngp").glob(".*"))


def test_old_or_edited_store_descriptions_are_refused(tmp_path):
    m, X, st = _store(tmp_path)
    meta = json.loads((st.path / "store.json").read_text())
    (st.path / "store.json").write_text(json.dumps({**meta, "version": 1}))
    with pytest.raises(ValueError, match="another version of limits"):
        kernel_tiles(m, X, st.path, block=30, progress=False)
    (st.path / "store.json").write_text(json.dumps({**meta, "block": 40}))
    with pytest.raises(ValueError, match="does not match its own description"):
        kernel_tiles(m, X, st.path, block=30, progress=False)


_HOLD = """
import sys
from limits.kernels.tilestore import store_lock
with store_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()          # held until the test closes stdin or kills this process (no fixed time to outlast)
"""


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path):
    m, X, st = _store(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(st.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"{st.path} is in use by process {holder.pid} on .*one writer per tile"):
            kernel_tiles(m, X, st.path, block=30, progress=False)
        with pytest.raises(ValueError, match=f"in use by process {holder.pid}"):
            limits.predict.kernel_regression(m, X, X[:, :1], X[:3], noise=0.1, solver="cg", store=st.path, block=30)
    finally:
        holder.kill()
        holder.wait()
    again = kernel_tiles(m, X, st.path, block=30, progress=False)     # killed: its lock went with it
    assert again.diagnostics["stale_lock_pid"] == holder.pid and again.diagnostics["reused"] == 10
    with store_lock(st.path):                                         # re-entrant in one process
        assert kernel_tiles(m, X, st.path, block=30, progress=False).diagnostics["reused"] == 10


@pytest.mark.slow
def test_ctrl_c_during_the_dask_tile_phase_prints_one_line_and_a_rerun_resumes(tmp_path, wait_until):
    """Issue 31 item 7: SIGINT to the process group (what a terminal's Ctrl-C sends) while dask workers compute
    tiles: exit 130 with one line saying how many tiles are kept and that a rerun resumes — no worker tracebacks,
    no "leaked semaphore" warning — and the rerun reuses those tiles."""
    import signal

    pytest.importorskip("distributed")
    r = np.random.default_rng(0)
    X = r.standard_normal((1500, 6))
    for name, a in (("X", X), ("Y", np.sin(X[:, :1])), ("Xs", X[:5])):
        np.save(tmp_path / f"{name}.npy", a)
    limits.mlp(6, depth=200, activation="erf").save(tmp_path / "m.toml")
    argv = [sys.executable, "-m", "limits", "regress", "--model", "m.toml", "--x-train", "X.npy", "--y-train", "Y.npy",
            "--x-test", "Xs.npy", "--noise", "0.1", "--solver", "cg", "--backend", "dask", "--workers", "2",
            "--store", "S", "--var-points", "0", "--block", "100"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), LIMITS_PROGRESS="0")
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_until(lambda: len(list((tmp_path / "S" / "nngp").glob("*.tile"))) >= 3, "3 tiles", proc)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=600)          # closing a LocalCluster: seconds, more under load
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, err
    kept = int(lines[0].split("interrupted; ")[1].split(" of ")[0])
    assert kept >= 3 and lines[0].endswith("tiles are kept in S; run the same command again to resume"), err
    again = subprocess.run(argv + ["--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["diagnostics"]["tiles"]["reused"] >= kept
