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


# both processes find no store before either creates it (the race of two runs started together, made certain
# by a delay before the first directory of the store is made: 3 s in the first process, 1 s in the second)
_DELAYED_CREATE = """
import os, pathlib, sys, time
orig, store = pathlib.Path.mkdir, os.environ["STORE"]
def slow(self, *a, **k):
    if str(self).startswith(store) and os.environ.pop("DELAY", None):
        time.sleep(float(os.environ["WAIT"]))
    return orig(self, *a, **k)
pathlib.Path.mkdir = slow
from limits.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_two_processes_on_one_new_store_never_interleave(task):
    d, ref = task
    procs = []
    for m, delay in (("A.toml", "3"), ("B.toml", "1")):
        env = dict(os.environ, PYTHONPATH=str(ROOT), LIMITS_PROGRESS="0", STORE=str(d / "S"), DELAY="1",
                   WAIT=delay)
        procs.append((m, subprocess.Popen([sys.executable, "-c", _DELAYED_CREATE, *_argv(d, m, d / "S")],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))
    results = {m: (p.wait(timeout=300), *p.communicate()) for m, p in procs}
    assert any(rc == 0 for rc, _, _ in results.values()), results
    for m, (rc, out, err) in results.items():
        if rc == 0:                                    # an answer is this model's answer, never the other's
            assert _close(_mean(out), ref[m]), (m, np.abs(_mean(out) - ref[m]).max())
        else:                                          # the second writer: one line naming the store
            assert rc == 2 and str(d / "S") in err and err.count("\n") == 1, err
