"""Fuzz suite, issue 42 (a friend of tests/test_fuzz.py: its cases join ``test_fuzz.FUZZ_COUNT``; the count is
printed by ``test_zz_i42_report_count`` with ``-s``).

1. A file declares what to compute; the person running it decides where and how much: a sweep file naming a
   scheduler, worker counts, a store, a size confirmation or an output outside its store is refused (exit 2 naming
   the key and the option) before anything connects, starts or is written; stores are made only in new, empty or
   same-kind directories; outputs replace only results of the same kind and no larger size.
2. Locks and stores refuse hard links and symbolic links and are never written in place; a complete store on a
   read-only file system is read without a lock.
6. The smaller ones (non-torch): messages and checks at the edges of the inputs.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest

import limits
import limits.sweep as S
from test_fuzz import FUZZ_COUNT, _one_error, check, run_cli

ROOT = Path(__file__).resolve().parents[1]
GOOD = ('function = "limits.kernels.critical_line"\n[product]\nactivation = ["erf"]\nsigma_b2 = [0.0, 0.1]\n'
        '[run]\nbackend = "serial"\n')


def _listing(d: Path):
    return sorted((str(p.relative_to(d)), p.read_bytes() if p.is_file() else None) for p in d.rglob("*"))


# ------------------------------------------------------------------------ item 1: what a sweep file may not choose
CALLER_ONLY = [
    ("scheduler", '"tcp://127.0.0.1:{port}"', "--scheduler"),
    ("scheduler", '"inproc://x"', "--scheduler"),
    ("scheduler", "5", "--scheduler"),
    ("n_jobs", "12", "--n-jobs"),
    ("n_jobs", "1", "--n-jobs"),
    ("n_jobs", '"two"', "--n-jobs"),
    ("store", '"sweeps/s"', "--store"),
    ("store", '"{tmp}/elsewhere"', "--store"),
    ("store", "5", "--store"),
    ("max_points", "1e10", "--max-points"),
    ("max_points", "10000000000", "--max-points"),
    ("max_points", "100", "--max-points"),
    ("out", '"victim.txt"', "--out"),
    ("out", '"{tmp}/abs.nc"', "--out"),
    ("out", '"../up.nc"', "--out"),
    ("out", '"sweeps/s/../../escape.nc"', "--out"),
    ("out", '"sweeps/s/points/ab/x.nc"', "--out"),
    ("out", '"sweeps/s/sweep.json"', "--out"),
    ("out", '"sweeps/s"', "--out"),
    ("out", '"sweeps/other/x.nc"', "--out"),
]


@pytest.mark.parametrize("key,value,option", CALLER_ONLY, ids=[f"{k}={v}" for k, v, _ in CALLER_ONLY])
def test_a_sweep_file_may_not_choose_where_or_how_much(key, value, option, tmp_path, monkeypatch):
    """Each key is refused with exit 2 naming ``[run] KEY`` and the option, before anything connects, starts or is
    written: a listening socket given as the scheduler receives no connection, no store or output appears."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    (tmp_path / "victim.txt").write_text("the user's notes\n")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        v = value.format(port=listener.getsockname()[1], tmp=tmp_path)
        (tmp_path / "s.toml").write_text(GOOD + f"{key} = {v}\n")
        FUZZ_COUNT.add(("i42", "sweep file", key, value))
        for argv in (["sweep", "run", "s.toml", "--quiet"], ["sweep", "show", "s.toml"]):
            rc, out, err = run_cli(argv)
            assert check("sweep run", argv, rc, out, err, tmp=tmp_path) is None
            _one_error(rc, err, f"[run] {key}", option)
        with pytest.raises(BlockingIOError):
            listener.accept()                                   # nobody connected
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "elsewhere").exists()
    assert (tmp_path / "victim.txt").read_text() == "the user's notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml", "victim.txt"]
    with pytest.raises(ValueError, match=rf"\[run\] {key}.*{option}"):        # the Python route too
        S.sweepfile.run_file(tmp_path / "s.toml", progress=False)


def test_a_file_out_inside_its_store_and_the_callers_options(tmp_path, monkeypatch, capsys):
    """`[run] out` inside the store is kept (show/plot find it); everything the file may not say comes from the
    command line and works there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    (tmp_path / "s.toml").write_text(GOOD + 'out = "sweeps/s/alt.nc"\n')
    FUZZ_COUNT.add(("i42", "sweep file", "out", "inside the store"))
    rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet", "--json"])
    assert rc == 0, err
    assert json.loads(out)["path"] == "sweeps/s/alt.nc" and (tmp_path / "sweeps/s/alt.nc").is_file()
    rc, out, err = run_cli(["sweep", "show", "s.toml", "--json"])
    assert rc == 0 and json.loads(out)["path"] == "sweeps/s/alt.nc", err
    (tmp_path / "t.toml").write_text(GOOD)
    rc, out, err = run_cli(["sweep", "run", "t.toml", "--quiet", "--json", "--n-jobs", "1", "--store", "st",
                            "--out", "t.nc", "--max-points", "2"])
    assert rc == 0 and json.loads(out)["n_points"] == 2, err
    rc, out, err = run_cli(["sweep", "run", "t.toml", "--quiet", "--store", "st2", "--max-points", "1"])
    _one_error(rc, err, "max_points", "--max-points 2")


@pytest.mark.parametrize("value", ["1e12", "1000000000000", "0", "-1", '"big"', "true", "2.5", "1000001"])
def test_chunk_is_validated_naming_the_key(value, tmp_path, monkeypatch):
    """`chunk = 1e12` used to end in xarray's paragraph about datetime encodings (the int attribute did not fit
    netCDF-3): now the key is checked with the file, and the option on the command line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(GOOD + f"chunk = {value}\n")
    FUZZ_COUNT.add(("i42", "sweep file", "chunk", value))
    rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet"])
    _one_error(rc, err, "[run] chunk", "1 to 1,000,000")
    assert not (tmp_path / "sweeps").exists()
    if value.lstrip("-").isdigit():
        (tmp_path / "s.toml").write_text(GOOD)
        FUZZ_COUNT.add(("i42", "--chunk", value))
        rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet", "--chunk", value])
        _one_error(rc, err, "--chunk")
    with pytest.raises(ValueError, match="chunk"):
        S.run(limits.kernels.critical_line, {"activation": ["erf"]}, chunk=10 ** 12, progress=False)


def test_outputs_replace_only_sweep_datasets_of_no_more_points(tmp_path, monkeypatch):
    """A text file given as --out stays a text file (it became netCDF bytes, exit 0); a dataset computed over a
    larger grid is never replaced by a smaller one; the same size is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    big = GOOD.replace("sigma_b2 = [0.0, 0.1]", "sigma_b2 = [0.0, 0.1, 0.2]")
    (tmp_path / "big.toml").write_text(big)
    (tmp_path / "s.toml").write_text(GOOD)
    assert run_cli(["sweep", "run", "big.toml", "--quiet", "--out", "big.nc"])[0] == 0
    (tmp_path / "notes.txt").write_text("keep me\n")
    (tmp_path / "data.npy").write_bytes(b"\x93NUMPY not really")
    (tmp_path / "fake.nc").write_bytes(b"CDF\x01" + b"\x00" * 40)
    for target, words in (("notes.txt", "not a sweep dataset"), ("data.npy", "not a sweep dataset"),
                          ("fake.nc", "not a sweep dataset"), ("big.nc", "3 points")):
        before = (tmp_path / target).read_bytes()
        FUZZ_COUNT.add(("i42", "--out", target))
        rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet", "--out", target])
        _one_error(rc, err, "out", target, words)
        assert (tmp_path / target).read_bytes() == before
        assert not (tmp_path / "sweeps" / "s").exists()          # refused before the store was made
    assert run_cli(["sweep", "run", "big.toml", "--quiet", "--out", "big.nc", "--store", "b2"])[0] == 0   # same size
    # the store's own dataset: a smaller grid in the same store keeps the larger dataset
    assert run_cli(["sweep", "run", "big.toml", "--quiet", "--store", "st"])[0] == 0
    rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet", "--store", "st"])
    _one_error(rc, err, "store", "sweep.nc", "3 points", "more than this run's 2")
    FUZZ_COUNT.add(("i42", "--store", "smaller grid over the store's dataset"))
    assert S.load(tmp_path / "st" / "sweep.nc").attrs["n_points"] == 3
    with pytest.raises(ValueError, match="not a sweep dataset"):
        S.run(limits.kernels.critical_line, {"activation": ["erf"]}, out=tmp_path / "notes.txt", progress=False)


def _tile_task():
    m = limits.mlp(4, 2)
    X = np.random.default_rng(42).standard_normal((12, 4))
    return m, X


def test_stores_are_made_only_in_new_empty_or_same_kind_directories(tmp_path, monkeypatch):
    """A sweep store, limits transfer's store (a sweep store: limits.sweep.run), a tile store and the CG
    regression's store named after a foreign non-empty directory: refused before a file is written into it."""
    from limits.largep import kernel_tiles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    m, X = _tile_task()
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("\\documentclass{article}\n")
    (home / ".bashrc").write_text("alias ll='ls -l'\n")
    tiles = kernel_tiles(m, X, tmp_path / "K", block=6, progress=False).path
    (tmp_path / "s.toml").write_text(GOOD)
    assert run_cli(["sweep", "run", "s.toml", "--quiet", "--store", "sw"])[0] == 0
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", X[:, 0])
    m.save(tmp_path / "m.toml")
    foreign = {"home": home, "tiles as a sweep store": tiles, "sweep store as tiles": tmp_path / "sw"}
    for name, d in foreign.items():
        before = _listing(d)
        routes = [
            ("sweep run --store", lambda d=d: run_cli(["sweep", "run", "s.toml", "--quiet", "--store", str(d)])),
            ("sweep.run(store=)", lambda d=d: S.run(limits.kernels.critical_line, {"activation": ["erf"]}, store=d,
                                                    progress=False)),
            ("kernel_tiles(out=)", lambda d=d: kernel_tiles(m, X, d, block=6, progress=False)),
            ("regress --store", lambda d=d: run_cli(
                ["regress", "--model", "m.toml", "--x-train", "X.npy", "--y-train", "Y.npy", "--x-test", "X.npy",
                 "--noise", "0.1", "--solver", "cg", "--store", str(d)]))]
        for route, call in routes:
            if (name, route) in (("tiles as a sweep store", "kernel_tiles(out=)"),
                                 ("tiles as a sweep store", "regress --store"),
                                 ("sweep store as tiles", "sweep run --store"),
                                 ("sweep store as tiles", "sweep.run(store=)")):
                continue                                        # the same kind: accepted (tested below)
            FUZZ_COUNT.add(("i42", "store", name, route))
            try:
                got = call()
            except ValueError as exc:
                got = (2, "", f"limits: error: {exc}")
            _one_error(*got[0:1], got[2], "non-empty directory that is not a")
            assert _listing(d) == before, (name, route)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert S.run(limits.kernels.critical_line, {"activation": ["erf"]}, store=empty, progress=False).attrs["n_points"]
    assert kernel_tiles(m, X, tmp_path / "empty2", block=6, progress=False).diagnostics["computed"] == 3
    assert kernel_tiles(m, X, tiles, block=6, progress=False).diagnostics["reused"] == 3


# ------------------------------------------------------------------------ item 2: locks never written, links refused
def test_lock_files_refuse_hard_and_symbolic_links_and_are_never_written(tmp_path, monkeypatch):
    """A hard link placed as a tile store's `lock` (or a sweep store's `sweep.lock`) used to be truncated and
    overwritten with "PID HOST"; a dangling symlink as `sweep.lock` was followed (the file created). Now both are
    refused by name, the linked file is untouched, and a regular lock file is never written."""
    from limits.largep import kernel_tiles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    m, X = _tile_task()
    K = kernel_tiles(m, X, tmp_path / "K", block=6, progress=False).path
    (tmp_path / "s.toml").write_text(GOOD)
    assert run_cli(["sweep", "run", "s.toml", "--quiet", "--store", "sw"])[0] == 0
    victim = tmp_path / "victim.txt"
    for store, lock, run in ((K, "lock", lambda: kernel_tiles(m, X, K, block=6, progress=False)),
                             (tmp_path / "sw", "sweep.lock",
                              lambda: S.run(limits.kernels.critical_line, {"activation": ["erf"], "sigma_b2": [0.0, 0.1]},
                                            store=tmp_path / "sw", progress=False))):
        for kind, make, words in (("hard link", lambda p: os.link(victim, p), "hard link"),
                                  ("symlink", lambda p: p.symlink_to(victim), "symbolic link"),
                                  ("dangling symlink", lambda p: p.symlink_to(tmp_path / "nowhere"), "symbolic link"),
                                  ("fifo", lambda p: os.mkfifo(p), "FIFO")):
            victim.write_text("another program's lock or data\n")
            (store / lock).unlink()
            make(store / lock)
            FUZZ_COUNT.add(("i42", "lock", lock, kind))
            with pytest.raises(ValueError, match=words):
                run()
            assert victim.read_text() == "another program's lock or data\n" and not (tmp_path / "nowhere").exists()
        (store / lock).unlink()
        (store / lock).write_text("kept\n")             # a regular lock file: locked, never truncated or written
        st = (store / lock).stat()
        run()
        assert (store / lock).read_text() == "kept\n" and (store / lock).stat().st_mtime_ns == st.st_mtime_ns
    os.link(K / "store.json", tmp_path / "store-copy.json")       # a store's own file shared with another
    FUZZ_COUNT.add(("i42", "tile store", "store.json hard link"))
    with pytest.raises(ValueError, match="store.json is a hard link"):
        kernel_tiles(m, X, K, block=6, progress=False)


@contextlib.contextmanager
def read_only(d: Path, monkeypatch, mode):
    """Make the directory ``d`` read-only once the caller has filled it: ``mode="mount"`` a read-only tmpfs
    remount (root on Linux where ``mount`` works; skipped elsewhere), ``mode="simulated"`` ``os.open`` (with
    write access, or creating), ``unlink``, ``replace`` and ``mkdir`` under ``d`` raising EROFS. Yields
    ``(how, freeze)``: call ``freeze()`` once ``d`` holds what it should."""
    d.mkdir()
    mounted = mode == "mount" and os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "none", str(d)], capture_output=True).returncode == 0
    if mode == "mount" and not mounted:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount permission): the simulated case covers it")
    try:
        if mounted:
            yield "read-only tmpfs", lambda: subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
            return
        root = str(d) + os.sep

        def under(p):
            return os.path.abspath(os.fsdecode(p)).startswith(root)

        def erofs(p):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(p))

        def freeze():
            real_open, real_unlink, real_replace, real_mkdir = os.open, os.unlink, os.replace, os.mkdir

            def fake_open(p, flags, *a, **kw):
                writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC)
                if under(p) and (writes or flags & os.O_CREAT and not os.path.lexists(p)):
                    erofs(p)
                return real_open(p, flags, *a, **kw)

            monkeypatch.setattr(os, "open", fake_open)
            monkeypatch.setattr(os, "unlink", lambda p, *a, **k: erofs(p) if under(p) else real_unlink(p, *a, **k))
            monkeypatch.setattr(os, "replace", lambda s, t, *a, **k: erofs(t) if under(t) else real_replace(s, t))
            monkeypatch.setattr(os, "mkdir", lambda p, *a, **k: erofs(p) if under(p) and not os.path.isdir(p)
                                else real_mkdir(p, *a, **k))
        yield "simulated (EROFS from os.open/unlink/replace/mkdir)", freeze
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.mark.parametrize("mode", ["mount", "simulated"])
@pytest.mark.parametrize("with_lock_file", [True, False])
def test_a_complete_store_on_a_read_only_file_system_is_read_without_a_lock(with_lock_file, mode, tmp_path,
                                                                            monkeypatch):
    """Tile store (kernel_tiles, regress --solver cg) and sweep store: complete → read (nothing written), with or
    without a lock file left in it; incomplete → refused with the count of what is missing."""
    from limits.largep import kernel_tiles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    m, X = _tile_task()
    (tmp_path / "s.toml").write_text(GOOD)
    big = GOOD.replace("sigma_b2 = [0.0, 0.1]", "sigma_b2 = [0.0, 0.1, 0.2]")
    (tmp_path / "big.toml").write_text(big)
    with read_only(tmp_path / "ro", monkeypatch, mode) as (how, freeze):
        ref = kernel_tiles(m, X, tmp_path / "ro" / "K", block=6, progress=False).to_array()
        part = kernel_tiles(m, X, tmp_path / "ro" / "part", block=6, progress=False)
        os.unlink(part.tile_path("nngp", 0, 1))
        assert run_cli(["sweep", "run", "s.toml", "--quiet", "--store", "ro/sw"])[0] == 0
        if not with_lock_file:
            os.unlink(tmp_path / "ro" / "K" / "lock")
            os.unlink(tmp_path / "ro" / "part" / "lock")
            os.unlink(tmp_path / "ro" / "sw" / "sweep.lock")
        before = _listing(tmp_path / "ro")
        freeze()
        FUZZ_COUNT.add(("i42", "read-only store", how, with_lock_file))
        t = kernel_tiles(m, X, tmp_path / "ro" / "K", block=6, progress=False)
        assert t.diagnostics["read_only"] and t.diagnostics["computed"] == 0
        np.testing.assert_array_equal(t.to_array(), ref)
        r = limits.predict.kernel_regression(m, X, X[:, :1], X[:3], noise=0.1, solver="cg",
                                             store=tmp_path / "ro" / "K", block=6)
        ref_r = limits.predict.kernel_regression(m, X, X[:, :1], X[:3], noise=0.1)
        np.testing.assert_allclose(r.mean, ref_r.mean, rtol=1e-8, atol=1e-12)
        with pytest.raises(ValueError, match=r"read-only .* 1 of 3 tiles are missing"):
            kernel_tiles(m, X, tmp_path / "ro" / "part", block=6, progress=False)
        with pytest.raises(ValueError, match=r"different kernel .* read-only"):
            kernel_tiles(m, X[::-1].copy(), tmp_path / "ro" / "K", block=6, progress=False)
        rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet", "--store", "ro/sw", "--out", "copy.nc",
                                "--json"])
        assert rc == 0 and json.loads(out)["reused"] == 2, err
        assert run_cli(["sweep", "show", "ro/sw"])[0] == 0
        rc, out, err = run_cli(["sweep", "run", "big.toml", "--quiet", "--store", "ro/sw", "--out", "b.nc"])
        _one_error(rc, err, "store", "read-only", "1 of 3 points are missing")
        rc, out, err = run_cli(["sweep", "run", "s.toml", "--quiet", "--store", "ro/sw"])
        _one_error(rc, err, "store", "read-only", "--out")
        assert _listing(tmp_path / "ro") == before                  # nothing written into the read-only store


# ------------------------------------------------------------------------ item 6: the smaller ones (non-torch)
def _layer_table():
    from limits.layers import Activation, Dense
    from limits.params.layer_table import layer_table

    return layer_table(limits.serial(Dense(), Activation("relu"), Dense()), "muP")


LAYER_TABLE_DAMAGE = [("rows", 5), ("rows", []), ("rows", [5]), ("notes", 5), ("logits", {"__dict__": {"0": "x"}}),
                      ("name", 7), ("parameterisation", [1])]


@pytest.mark.parametrize("field,value", LAYER_TABLE_DAMAGE, ids=[f"{f}={v!r}" for f, v in LAYER_TABLE_DAMAGE])
def test_load_result_refuses_a_layer_table_with_wrong_fields(field, value, tmp_path):
    """`rows = 5` used to load (and fail later, in to_markdown); every field is now checked on load."""
    from limits.results import load_result

    t = _layer_table()
    t.save(tmp_path / "t")
    assert load_result(tmp_path / "t").equals(t)
    d = json.loads((tmp_path / "t.json").read_text())
    d["fields"][field] = value
    (tmp_path / "t.json").write_text(json.dumps(d))
    FUZZ_COUNT.add(("i42", "LayerTable", field, repr(value)))
    with pytest.raises(ValueError, match=rf"does not describe a .*LayerTable .*{field}"):
        load_result(tmp_path / "t")


def _attention(tmp_path, T=64, P=6):
    from limits.layers import Activation, Attention, Dense, GlobalAvgPool

    net = limits.serial(Dense(), Attention(n_heads=2), Activation("relu"), GlobalAvgPool(), Dense())
    net.save(tmp_path / "attn.json")
    np.save(tmp_path / "XT.npy", np.random.default_rng(0).standard_normal((P, T, 4)))
    return net


def test_check_of_a_composition_estimates_the_finite_networks_memory_first(tmp_path, monkeypatch):
    """`limits check` on a large attention composition had no up-front estimate (`limits kernel` had): now one
    finite network that does not fit in half the available memory is refused by name before anything is
    allocated, and the chunk of inits shrinks to what fits."""
    import time

    import limits.memory
    from limits.finite import serial as fs

    net = _attention(tmp_path)
    per, layer, why = fs.init_bytes(net, (64, 4), 6, 512)
    assert layer == "1 (Attention)" and "64² attention weights" in why
    monkeypatch.setattr(limits.memory, "available_memory", lambda: int(2.5 * per))
    assert fs.check_memory(net, (64, 4), 6, (64, 128, 512)) == 1          # half of it holds one init at once
    monkeypatch.setattr(limits.memory, "available_memory", lambda: int(100 * per))
    assert fs.check_memory(net, (64, 4), 6, (64, 128, 512)) == 8          # at most the default chunk
    monkeypatch.setattr(limits.memory, "available_memory", lambda: int(per))
    FUZZ_COUNT.add(("i42", "check", "attention composition memory"))
    t0 = time.process_time()
    rc, out, err = run_cli(["check", "--model", tmp_path / "attn.json", "--x", tmp_path / "XT.npy"])
    _one_error(rc, err, "one finite network of this composition at width 512", "Attention", "--widths")
    assert time.process_time() - t0 < 5


def test_the_finite_memory_estimate_is_calibrated():
    """benchmarks/finite_memory.py: the estimate is never below the measured peak (18 compositions, widths 64 and
    256) and at most 2× it; one small case recomputed here."""
    import tracemalloc

    from limits.finite.serial import SerialNetwork, init_bytes
    from limits.layers import Activation, Attention, Dense, GlobalAvgPool

    data = json.loads((ROOT / "benchmarks" / "results" / "memory" / "finite_memory.json").read_text())
    ratios = [r["ratio"] for r in data["rows"]]
    assert len(ratios) >= 18 and 1.0 <= min(ratios) and max(ratios) <= 2.0
    net = limits.serial(Dense(), Attention(n_heads=2), Activation("relu"), GlobalAvgPool(), Dense())
    X = np.random.default_rng(0).standard_normal((6, 32, 4))
    SerialNetwork(net, 64).kernels(X, 1, seed=0, chunk=1)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    SerialNetwork(net, 64).kernels(X, 1, seed=1, chunk=1)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert 1.0 <= init_bytes(net, (32, 4), 6, 64)[0] / peak <= 2.0


def test_plot_paths_are_checked_before_any_computation(tmp_path):
    """Every command's --plot (limits check, limits coord-check) is checked — suffix and a writable place — right
    after parsing: coord-check reaches it before torch is imported, so this runs without torch."""
    import time

    for argv in (["coord-check", "--factory", "limits.torch.demos:mlp", "--param", "muP"],
                 ["check", "--model", tmp_path / "m.toml", "--x", tmp_path / "X.npy"]):
        limits.mlp(4, 2).save(tmp_path / "m.toml")
        np.save(tmp_path / "X.npy", np.ones((3, 4)))
        for plot, words in (("/proc/no/x.png", "cannot write"), ("/sys/x.png", "cannot write"),
                            (str(tmp_path / "x.bogus"), "suffix"), (str(tmp_path), "suffix")):
            FUZZ_COUNT.add(("i42", "--plot", argv[0], plot[-10:]))
            t0 = time.process_time()
            rc, out, err = run_cli([*argv, "--plot", plot])
            _one_error(rc, err, "--plot", words)
            assert time.process_time() - t0 < 2


SEEDS = ["18446744073709551616", "4294967296", "-1", str(10 ** 40)]


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_is_checked_at_parse_time(seed, tmp_path):
    """`--seed 2^64` ended in an overflow naming no option after 14.6 s; every command checks it first."""
    import time

    limits.mlp(4, 2).save(tmp_path / "m.toml")
    np.save(tmp_path / "X.npy", np.ones((3, 4)))
    for argv in (["check", "--model", tmp_path / "m.toml", "--x", tmp_path / "X.npy"],
                 ["nngp", "--depth", "2", "--random", "3", "4"], ["finite", "train", "--width", "8"],
                 ["coord-check", "--factory", "limits.torch.demos:mlp", "--param", "muP"],
                 ["transfer", "--factory", "limits.torch.demos:mlp", "--param", "muP", "--lrs", "0.1", "0.2"]):
        FUZZ_COUNT.add(("i42", "--seed", argv[0], seed))
        t0 = time.process_time()
        rc, out, err = run_cli([*argv, "--seed", seed])
        line = _one_error(rc, err, "--seed", "2^32")
        assert len(line) < 200 and time.process_time() - t0 < 2
    assert run_cli(["nngp", "--depth", "2", "--random", "3", "4", "--seed", str(2 ** 32 - 1)])[0] == 0


def test_a_large_sweep_dataset_is_estimated_before_it_is_read(tmp_path, monkeypatch):
    """A 3 GB dataset used to be read to half the memory before "not enough memory": its size is now weighed
    against the available memory first (and reading it maps the file once instead of copying it three times)."""
    import limits.memory
    from limits.sweep import dataset as D

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(GOOD)
    assert run_cli(["sweep", "run", "s.toml", "--quiet"])[0] == 0
    size = (tmp_path / "sweeps/s/sweep.nc").stat().st_size
    monkeypatch.setattr(limits.memory, "available_memory", lambda: int(1.5 * size))
    FUZZ_COUNT.add(("i42", "sweep dataset", "larger than the available memory"))
    for argv in (["sweep", "show", "sweeps/s"], ["sweep", "plot", "sweeps/s", "--x", "sigma_b2", "--y", "sigma_w2"]):
        rc, out, err = run_cli(argv)
        _one_error(rc, err, "loading it takes", "available", "xarray.open_dataset")
    monkeypatch.setattr(limits.memory, "available_memory", lambda: int(3 * size))
    assert D.load(tmp_path / "sweeps/s/sweep.nc").attrs["n_points"] == 2


@pytest.mark.parametrize("which", ["y", "x"])
def test_all_zero_training_data_is_refused_up_front(which, tmp_path):
    """`limits check --what dmft` with all-zero targets (or inputs) ran the DMFT solve and the finite networks for
    tens of seconds before failing; it is refused first, naming the file."""
    import time

    limits.mlp(4, 2, parameterisation="MF").save(tmp_path / "mf.toml")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", np.zeros((3, 4)) if which == "x" else rng.standard_normal((3, 4)))
    np.save(tmp_path / "y.npy", np.zeros(3) if which == "y" else rng.standard_normal(3))
    FUZZ_COUNT.add(("i42", "check dmft", f"all-zero {which}"))
    t0 = time.process_time()
    rc, out, err = run_cli(["check", "--model", tmp_path / "mf.toml", "--x", tmp_path / "X.npy", "--what", "dmft",
                            "--y", tmp_path / "y.npy"])
    _one_error(rc, err, f"--{which}", f"{which.upper() if which == 'x' else which}.npy", "only zeros")
    assert time.process_time() - t0 < 3


def test_a_degenerate_deep_composition_says_what_is_wrong(tmp_path):
    """A 16 000-layer relu composition ended in "K is not a valid covariance matrix": the message now names the
    layer, how far the kernel decayed and why (depth: a constant factor per layer), and what to do."""
    from limits.layers import Activation, Dense

    X = np.random.default_rng(0).standard_normal((3, 4))
    net = limits.serial(*([Dense(), Activation("relu")] * 1100), Dense())
    net.save(tmp_path / "deep.json")
    np.save(tmp_path / "X.npy", X)
    FUZZ_COUNT.add(("i42", "composition", "1100 relu layers"))
    with pytest.raises(ValueError, match=r"layer 10\d\d \(Activation.*decayed to .* after 10\d\d of 2201 layers.*"
                                         r"critical line"):
        limits.kernels.kernel(net, X)
    rc, out, err = run_cli(["kernel", "--model", tmp_path / "deep.json", "--x1", tmp_path / "X.npy"])
    _one_error(rc, err, "decayed", "fewer layers")


EXTRA_KEYS = [{"model": {"serial": [{"layer": "Dense"}]}, "depth": 7},
              {"model": {"serial": [{"layer": "Dense"}]}, "activation": "relu", "comment": "x"},
              {"serial": [{"layer": "Dense"}], "depth": 7}]


@pytest.mark.parametrize("i", range(len(EXTRA_KEYS)))
def test_keys_beside_the_model_of_a_composition_file_are_refused(i, tmp_path):
    """Extra keys beside {"model": …} in a composition file were ignored; they are refused by name (as a model
    file's already were)."""
    from limits.layers import Serial, as_serial

    d = EXTRA_KEYS[i]
    extra = sorted(k for k in d if k not in ("model", "serial"))
    (tmp_path / "c.json").write_text(json.dumps(d))
    np.save(tmp_path / "X.npy", np.ones((2, 3)))
    FUZZ_COUNT.add(("i42", "composition file keys", json.dumps(d)))
    for call in (lambda: Serial.load(tmp_path / "c.json"), lambda: as_serial(d), lambda: Serial.from_dict(d)):
        with pytest.raises(ValueError, match=repr(extra[0])):
            call()
    rc, out, err = run_cli(["kernel", "--model", tmp_path / "c.json", "--x1", tmp_path / "X.npy"])
    _one_error(rc, err, repr(extra[0]))


@pytest.mark.parametrize("what", ["text json", "npz data", "json of another tool", "both foreign"])
def test_save_never_overwrites_another_kind_of_file(what, tmp_path, monkeypatch):
    """`--save PATH` writes PATH.npz + PATH.json: a file already there that is not a saved limits result (someone's
    data or notes) is refused before anything runs, and left as it was; a saved result is replaced."""
    monkeypatch.chdir(tmp_path)
    limits.mlp(4, 2).save("m.toml")
    np.save("X.npy", np.ones((3, 4)))
    files = {"text json": {"k.json": b"my notes\n"}, "npz data": {"k.npz": b"PK\x03\x04 not really"},
             "json of another tool": {"k.json": b'{"type": 5}', "k.npz": b"PK"},
             "both foreign": {"k.json": b"[]", "k.npz": b"x"}}[what]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    FUZZ_COUNT.add(("i42", "--save", what))
    rc, out, err = run_cli(["kernel", "--model", "m.toml", "--x1", "X.npy", "--save", "k"])
    _one_error(rc, err, "--save", "not a saved limits result")
    assert all((tmp_path / n).read_bytes() == d for n, d in files.items())
    for name in files:
        (tmp_path / name).unlink()
    assert run_cli(["kernel", "--model", "m.toml", "--x1", "X.npy", "--save", "k"])[0] == 0
    assert run_cli(["kernel", "--model", "m.toml", "--x1", "X.npy", "--save", "k"])[0] == 0      # a result: replaced


def test_zz_i42_report_count(capsys):
    """Prints how many distinct bad inputs the fuzz suite tried, this file's included (run with -s)."""
    mine = sum(1 for k in FUZZ_COUNT if k and k[0] == "i42")
    with capsys.disabled():
        print(f"\nfuzz: {len(FUZZ_COUNT)} distinct bad inputs tried ({mine} of them issue 42's)")
    assert mine > 0
