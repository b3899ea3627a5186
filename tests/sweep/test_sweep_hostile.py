"""Issue 21, the sweep part: hostile point functions, damaged stores, concurrent sweeps, full disks,
outputs checked before computing, huge grids and Ctrl-C under dask."""
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import limits.sweep as S
import sweep_points as P
from limits.cli import main
from limits.sweep.store import Store

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _grid(xs):
    return S.Grid(product={"x": list(xs)}, seeds=1, fixed={"delay": 0.0})


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]), "LIMITS_PROGRESS": "0"}


@pytest.mark.parametrize("backend", ["serial", "loky"])
def test_sys_exit_in_a_point_is_a_failed_point(tmp_path, backend):
    """Item 10: sys.exit inside a point is recorded like an exception; the dataset is written and the
    store's manifest says done (it was: the sweep ended silently, sweep.json left 'running')."""
    ds = S.run(P.exits_at, {"x": [0, 1, 2]}, backend=backend, n_jobs=2, store=tmp_path / "st", progress=False)
    assert ds.attrs["n_failed"] == 1 and ds["failed"].values.tolist() == [False, True, False]
    assert "SystemExit: 3" in json.loads(ds.attrs["error"])[0]["error"]
    assert ds["value"].values[0] == 0.0 and ds["value"].values[2] == 2.0
    assert (tmp_path / "st" / "sweep.nc").is_file()
    assert json.loads((tmp_path / "st" / "sweep.json").read_text())["status"] == "done"


def test_sys_exit_cli_exit_status(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    (tmp_path / "s.toml").write_text('function = "sweep_points.exits_at"\n[product]\nx = [0, 1]\n'
                                     '[run]\nbackend = "serial"\n')
    assert main(["sweep", "run", "s.toml", "--allow", "sweep_points"]) == 3
    assert "SystemExit" in capsys.readouterr().out
    assert json.loads((tmp_path / "sweeps" / "s" / "sweep.json").read_text())["status"] == "done"


def _damage(js: Path, how: str, key: str):
    if how == "fifo":
        js.unlink()
        os.mkfifo(js)
    elif how == "dev_zero":
        js.unlink()
        js.symlink_to("/dev/zero")
    elif how == "directory":
        js.unlink()
        js.mkdir()
    elif how == "huge":
        meta = json.loads(js.read_text())
        meta["pad"] = "x" * 2_000_000
        js.write_text(json.dumps(meta))
    else:
        meta = json.loads(js.read_text())
        value = {"null": None, "list": [meta], "number": 5, "outputs_null": {**meta, "outputs": None},
                 "outputs_str": {**meta, "outputs": "y"}, "status_list": {**meta, "status": ["ok"]},
                 "deep": json.loads("[" * 50 + "]" * 50)}[how]
        js.write_text(json.dumps(value))


DAMAGE = ["null", "list", "number", "outputs_null", "outputs_str", "status_list", "deep", "fifo", "dev_zero",
          "directory", "huge"]


def test_damaged_point_files_are_recomputed(tmp_path, monkeypatch):
    """Item 12 and 14: point .json files that are not point records, FIFOs, links to /dev/zero,
    directories or oversized files are damaged points: recomputed (the docs' promise), never a crash or
    a hang, and the results equal the undamaged run."""
    import limits.sweep.store as store_mod

    monkeypatch.setattr(store_mod, "MAX_JSON_BYTES", 1_000_000)
    grid = {"x": list(range(len(DAMAGE)))}
    st = tmp_path / "st"
    first = S.run(P.sleepy_nopid, S.Grid(product=grid, seeds=1), store=st, progress=False,
                  name="sleepy", version="1")
    js = sorted(p for p in (st / "points").rglob("*.json"))
    assert len(js) == len(DAMAGE)
    for p, how in zip(js, DAMAGE):
        _damage(p, how, p.stem)
    t0 = time.process_time()          # CPU time: reading /dev/zero would burn it; a loaded machine does not
    again = S.run(P.sleepy_nopid, S.Grid(product=grid, seeds=1), store=st, progress=False,
                  name="sleepy", version="1")
    assert time.process_time() - t0 < 30
    assert again.attrs["reused"] == 0 and again.attrs["computed"] == len(DAMAGE) and again.attrs["n_failed"] == 0
    assert np.array_equal(again["y"].values, first["y"].values)
    third = S.run(P.sleepy_nopid, S.Grid(product=grid, seeds=1), store=st, progress=False, name="sleepy", version="1")
    assert third.attrs["reused"] == len(DAMAGE)                    # rewritten as regular point files
    assert all(p.is_file() and not p.is_symlink() for p in js)


def test_damaged_manifest_and_dataset(tmp_path, capsys):
    """Item 12: sweep show/plot on a store whose sweep.json names no path, or on a non-netCDF file."""
    st = tmp_path / "st"
    S.run(P.sleepy_nopid, _grid([0, 1]), store=st, progress=False, name="s", version="1")
    for bad in (5, ["a"], {"a": 1}, "", None):
        (st / "sweep.json").write_text(json.dumps({"dataset": bad}))
        rc = main(["sweep", "show", str(st)])
        err = capsys.readouterr().err
        if bad is None:                                         # no dataset recorded: the default path
            assert rc == 0, err
        else:
            assert rc == 2 and "sweep.json" in err and len(err.strip().splitlines()) == 1, err
    (tmp_path / "x.nc").write_bytes(b"\x89PNG\r\n" + b"\x00" * 100)
    for cmd in (["show"], ["plot", "--x", "x", "--y", "y"]):
        assert main(["sweep", *cmd, str(tmp_path / "x.nc")]) == 2
        err = capsys.readouterr().err
        assert "x.nc" in err and "netCDF" in err and len(err.strip().splitlines()) == 1, err
    nc = (st / "sweep.nc").read_bytes()
    (tmp_path / "t.nc").write_bytes(nc[:len(nc) - 40])
    assert main(["sweep", "show", str(tmp_path / "t.nc")]) == 2
    err = capsys.readouterr().err
    assert "t.nc" in err and "damaged or truncated" in err, err


@pytest.mark.parametrize("name", ["failed", "n_seeds", "K_dim_0"])
def test_reserved_output_names_are_refused(tmp_path, name):
    """Item 3: an output named like the dataset's bookkeeping is refused (it was silently replaced by
    the `failed` flags), and nothing is stored."""
    with pytest.raises(ValueError, match=f"output '{name}'.*rename"):
        S.run(P.returns, {"x": [0, 1], "fixed": {"name": name}}, store=tmp_path / "st", progress=False)
    assert not list((tmp_path / "st").rglob("*.npz"))


@pytest.mark.parametrize("grid", [{"failed": [1, 2]}, {"n_seeds": [1]}, {"y_dim_0": [0, 1]},
                                  {"zipped": {"failed": {"a": [1]}}}, {"zipped": {"pt": {"failed": [1]}}}])
def test_reserved_names_as_axes_are_refused(grid):
    """Item 3, the other way round: an axis named `failed` became a coordinate that plots and
    reduce_seeds read as the failure flags."""
    with pytest.raises(ValueError, match="rename it"):
        S.run(lambda **kw: {"y": np.zeros(2)}, grid, progress=False)


def test_output_named_like_a_parameter_result_collision():
    """An output `x` (≠ the input x, so kept as `x_result`) next to an output `x_result`: an error, not
    one silently overwriting the other."""
    def f(x):
        return {"x": 2.0 * x + 1, "x_result": 7.0}

    with pytest.raises(ValueError, match="x_result"):
        S.run(f, {"x": [0.0, 1.0]}, progress=False)
    ds = S.run(P.returns, {"x": [0, 1], "fixed": {"name": "z"}}, progress=False)
    assert ds["z"].values.tolist() == [0.5, 1.5] and ds["failed"].values.tolist() == [False, False]


def test_store_lock_second_process_is_refused(tmp_path, capsys, monkeypatch, wait_until):
    """Item 17: a second sweep process on a store in use gets one clear error (fcntl lock), not a
    silent duplicate of the work; the lock goes with the process. The first sweep's points wait for a gate
    file, so it holds the store for as long as the test needs, at any machine load."""
    st, marks = tmp_path / "st", tmp_path / "marks"
    marks.mkdir()
    code = ("import limits.sweep as S, sweep_points as P\n"
            f"S.run(P.touch_then_wait, {{'x': [0, 1, 2], 'fixed': {{'marker_dir': {str(marks)!r}}}}}, "
            f"store={str(st)!r}, progress=False)\n")
    grid = {"x": [0, 1, 2], "fixed": {"marker_dir": str(marks)}}
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env(), cwd=tmp_path)
    try:
        wait_until(lambda: list(marks.glob("start-*")), "the first sweep's first point", proc)
        with pytest.raises(ValueError, match="in use by another sweep process"):
            S.run(P.touch_then_wait, grid, store=st, progress=False)
        monkeypatch.chdir(tmp_path)
        (tmp_path / "s.toml").write_text(f'function = "sweep_points.touch_then_wait"\n[fixed]\nmarker_dir = '
                                         f'{json.dumps(str(marks))}\n[product]\nx = [0, 1, 2]\n')
        assert main(["sweep", "run", "s.toml", "--allow", "sweep_points", "--store", str(st), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "in use by another sweep process" in err and "--store" in err and len(err.strip().splitlines()) == 1
        assert len(list(marks.glob("start-*"))) == 1            # the refused runs started no point
    finally:
        (marks / "open").touch()
        assert proc.wait(timeout=900) == 0
    ds = S.run(P.touch_then_wait, grid, store=st, progress=False)
    assert ds.attrs["reused"] == 3 and len(list(marks.glob("start-*"))) == 3


def test_full_disk_messages_name_the_store_and_out(tmp_path, monkeypatch, capsys):
    """Item 18: ENOSPC while storing a point names the store (and --store); EFBIG while writing the
    dataset names out; the manifest is not left 'running'."""
    import limits.sweep.dataset as dataset_mod
    import limits.sweep.store as store_mod

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store_mod, "atomic_write_bytes", full)
    with pytest.raises(ValueError, match=r"store: cannot write .*No space left on device.*--store"):
        S.run(P.sleepy_nopid, _grid([0, 1]), store=tmp_path / "st", progress=False,
              name="s", version="1")
    monkeypatch.undo()

    def too_big(path, data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(dataset_mod, "atomic_write_bytes", too_big)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    (tmp_path / "s.toml").write_text('function = "limits.kernels.critical_line"\n[fixed]\nactivation = "erf"\n'
                                     '[product]\nsigma_b2 = [0.0, 0.1]\n[run]\nbackend = "serial"\n')
    assert main(["sweep", "run", "s.toml", "--out", "big.nc"]) == 2
    err = capsys.readouterr().err
    assert "out: cannot write the dataset big.nc (File too large)" in err and len(err.strip().splitlines()) == 1
    assert json.loads((tmp_path / "sweeps" / "s" / "sweep.json").read_text())["status"] == "interrupted"


def test_outputs_are_checked_before_any_point_runs(tmp_path, monkeypatch, capsys):
    """Item 15: `--out`/`--store` that cannot be written are refused before computing (a sweep file may not name
    them: issue 42, tests/sweep/test_sweep_caller_only.py)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo.nc")
    ro = Path("/sys/limits-sweep-test") if os.geteuid() == 0 else None
    if ro is None:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    head = ('function = "sweep_points.touch_then_sleep"\n[fixed]\nmarker_dir = ' + json.dumps(str(marks))
            + '\ndelay = 0.0\n[product]\nx = [0, 1]\n[run]\nbackend = "serial"\n')
    (tmp_path / "s.toml").write_text(head)
    for run_line, key in ((("--out", f"{ro}/y.nc"), "out"), (("--out", "afile/y.nc"), "out"),
                          (("--store", f"{ro}/st"), "store"), (("--store", "afile"), "store"),
                          (("--out", "marks"), "out"), (("--out", "fifo.nc"), "out"), (("--out", "/dev/null"), "out")):
        assert main(["sweep", "run", "s.toml", "--allow", "sweep_points", *run_line]) == 2, run_line
        err = capsys.readouterr().err
        assert re.match(f"limits: error: (--)?{key}: ", err) and len(err.strip().splitlines()) == 1, err
        assert not list(marks.glob("start-*")), f"{run_line}: points ran before the output was checked"
        assert ".limits-write" not in err


def test_huge_grid_is_refused_with_an_estimate(tmp_path):
    """Item 13: 3 axes × 500 values is refused at once with a cost estimate, unless confirmed."""
    g = S.Grid(product={"a": np.arange(500), "b": np.arange(500), "c": np.arange(500)})
    t0 = time.process_time()          # refused before enumerating the grid: CPU time, whatever the load
    with pytest.raises(ValueError, match=r"max_points: the grid has 125,000,000 points .*--max-points 125000000"):
        S.run(P.sleepy_nopid, g, store=tmp_path / "st", progress=False, name="s")
    assert time.process_time() - t0 < 2 and not (tmp_path / "st").exists()
    small = _grid([0, 1, 2])
    with pytest.raises(ValueError, match="max_points=3"):
        S.run(P.sleepy_nopid, small, progress=False, max_points=2)
    assert S.run(P.sleepy_nopid, small, progress=False, max_points=3).attrs["n_points"] == 3
    for bad in (0, -1, 2.5, True, "many"):
        with pytest.raises(ValueError, match="max_points"):
            S.run(P.sleepy_nopid, small, progress=False, max_points=bad)


def test_run_options_are_checked(tmp_path):
    """Item 18: n_jobs 'two', non-bool flags, non-path store/out: ValueErrors naming the option."""
    small = _grid([0])
    for kw, name in (({"n_jobs": "two", "backend": "loky"}, "n_jobs"), ({"n_jobs": 2.5, "backend": "loky"}, "n_jobs"),
                     ({"n_jobs": True}, "n_jobs"), ({"n_jobs": 10 ** 9, "backend": "loky"}, "n_jobs"),
                     ({"target_seconds": float("inf"), "backend": "loky"}, "target_seconds"),
                     ({"fail_fast": "yes"}, "fail_fast"),
                     ({"retry_failed": 1}, "retry_failed"), ({"store": 5}, "store"), ({"out": ""}, "out"),
                     ({"backend": 5}, "backend"), ({"version": 1}, "version")):
        with pytest.raises(ValueError, match=name):
            S.run(P.sleepy_nopid, small, progress=False, **kw)


@pytest.mark.slow
def test_ctrl_c_under_dask_prints_one_line(tmp_path, wait_until):
    """Item 16: Ctrl-C (SIGINT to the process group, as a terminal sends it) under --backend dask
    exits 130 with one line (the workers used to print ~67 lines of tracebacks); the manifest says
    'interrupted'. The points wait for a gate file that never comes: the Ctrl-C lands while they run."""
    pytest.importorskip("distributed")
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "s.toml").write_text(
        'function = "sweep_points.touch_then_wait"\n[fixed]\nmarker_dir = ' + json.dumps(str(marks))
        + '\n[product]\nx = [0, 1, 2, 3, 4, 5]\n[run]\nbackend = "dask"\n')
    proc = subprocess.Popen([sys.executable, "-m", "limits", "sweep", "run", "s.toml", "--allow", "sweep_points",
                             "--n-jobs", "2", "--quiet"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        wait_until(lambda: list(marks.glob("start-*")), "a point running on a dask worker", proc)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=600)          # closing a LocalCluster: seconds, more under load
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["limits: interrupted"], err
    assert json.loads((tmp_path / "sweeps" / "s" / "sweep.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize("backend", ["serial", "loky", "dask"])
def test_a_module_of_the_current_folder_sweeps_without_pythonpath(tmp_path, backend):
    """Issue 31 item 2: `--allow mytheory` finds ./mytheory.py with PYTHONPATH naming only limits (run as the
    `limits` console script is: the current folder is not on sys.path), loads nothing else from the folder, and
    the loky and dask workers — which could not import it by name — receive its code with each task (issue 41:
    dask sent it by reference, its workers failed to read the task and the sweep hung at 0 points)."""
    if backend == "dask":
        pytest.importorskip("distributed")
    work, bin_ = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_.mkdir()
    (work / "mytheory.py").write_text("import os\n\n\ndef f(x):\n    return {'y': 2.0 * x, 'pid': os.getpid()}\n")
    (work / "sibling.py").write_text(f"open({str(tmp_path / 'MARKER')!r}, 'w')\n")
    (work / "s.toml").write_text(f'function = "mytheory.f"\n[product]\nx = [0, 1, 2, 3]\n[run]\nbackend = "{backend}"\n')
    (bin_ / "limits_cmd.py").write_text("import os, sys\nfrom limits.cli import main\nif __name__ == '__main__':\n"
                                        "    print('PID', os.getpid(), file=sys.stderr)\n"
                                        "    sys.exit(main(sys.argv[1:]))\n")     # guarded, as a console script is
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", ""), "LIMITS_PROGRESS": "0"}
    p = subprocess.run([sys.executable, str(bin_ / "limits_cmd.py"), "sweep", "run", "s.toml", "--allow", "mytheory",
                        "--n-jobs", "2", "--json"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["n_points"] == 4 and info["n_failed"] == 0, info
    ds = S.load(work / "sweeps" / "s" / "sweep.nc")
    assert ds["y"].values.tolist() == [0.0, 2.0, 4.0, 6.0]
    driver = int(p.stderr.split("PID ")[1].split()[0])
    assert (driver in ds["pid"].values) == (backend == "serial")          # loky: computed in worker processes
    assert not (tmp_path / "MARKER").exists()
