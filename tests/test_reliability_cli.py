"""Reliability of the command line and of written files (issue 14): one error boundary, Ctrl-C
at any time, output paths checked before computing, no lost / clobbered / partial files,
user umask, byte-reproducible outputs."""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import limits.cli as cli
from limits import cliutil, gallery, results, validate
from limits.cli import main

ROOT = Path(__file__).resolve().parents[1]
NAME = "_test_reliability_fig"


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def one_error_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("limits: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def demo_figure():
    calls = []

    def compute(params, rng):
        calls.append(params["n"])
        x = np.linspace(0.0, 1.0, params["n"])
        return {"x": x, "y": x ** 2 + 0.01 * rng.standard_normal(x.size)}

    def plot(data, params):
        from limits.style import pyplot

        fig, ax = pyplot().subplots()
        ax.plot(data["x"], data["y"], "o-", label=f"n = {params['n']}")
        ax.legend()
        return fig

    gallery._FIGURES.pop(NAME, None)
    gallery.register(NAME, component="core", compute=compute, plot=plot, params={"n": 40}, quick={"n": 6},
                     caption="reliability demo")
    yield calls
    gallery._FIGURES.pop(NAME, None)


@pytest.fixture
def umask():
    old = os.umask(0o022)
    os.umask(old)

    def set_(mask):
        os.umask(mask)
    yield set_
    os.umask(old)


def _readonly_dir(tmp_path):
    if os.geteuid() == 0:                 # root ignores mode bits; /sys refuses new files even to root
        return Path("/sys/limits-test/out")
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    return d / "out"


# ------------------------------------------------------------------------ the error boundary
def test_user_errors_are_one_line_exit_2(tmp_path):
    rc, _, err = run(["pc", "equilibrium", "--weights", tmp_path / "doesnotexist.npz"])
    assert rc == 2 and "--weights" in one_error_line(err) and "does not exist" in err
    rc, _, err = run(["nngp", "--depth", "x"])
    assert rc == 2 and "--depth" in one_error_line(err) and "limits nngp --help" in err
    rc, _, err = run(["no-such-command"])
    assert rc == 2 and one_error_line(err).startswith("limits: error: ")
    rc, _, err = run(["figure"])
    assert rc == 2 and "NAME" in one_error_line(err)
    rc, _, err = run(["nngp", "--seed", "-1"])
    assert rc == 2 and "--seed" in one_error_line(err)


def test_internal_error_saves_traceback(monkeypatch, umask):
    umask(0o022)

    def boom(args):
        return 1 / 0

    monkeypatch.setattr(cli, "cmd_activations", boom)
    rc, _, err = run(["activations"])
    line = one_error_line(err)
    assert rc == cli.EXIT_INTERNAL == 70 and "internal error" in line and "ZeroDivisionError" in line
    path = Path(line.split("full traceback in ")[1])
    try:
        text = path.read_text()
        assert "Traceback" in text and "boom" in text and "command: limits activations" in text
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        path.unlink()


def test_keyboard_interrupt_in_process(monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_activations", interrupted)
    rc, _, err = run(["activations"])
    assert rc == 130 and "interrupted" in one_error_line(err)


def test_oserror_from_a_command_is_a_user_error(monkeypatch):
    def denied(args):
        raise PermissionError(13, "Permission denied", "/some/where")

    monkeypatch.setattr(cli, "cmd_activations", denied)
    rc, _, err = run(["activations"])
    assert rc == 2 and "/some/where" in one_error_line(err)


# the console script `limits` is `from limits.cli import main; sys.exit(main())`; the marker is
# written as soon as main() has installed its Ctrl-C handler (before that, in the few bytecodes between
# the console script's import and main(), Python's default handler applies) — then the delay counts
# from the start of main's work: heavy imports, parser, parsing, computation
_CONSOLE = ("import sys\nimport limits.cli as c\n_install = c._note_interrupts\n"
            "def _announce():\n    _install()\n    sys.stderr.write('go\\n'); sys.stderr.flush()\n"
            "c._note_interrupts = _announce\nsys.exit(c.main())")


def _interrupt_at(delay):
    """The console script interrupted ``delay`` seconds into main() — during the heavy imports,
    the parser construction, the parsing or the computation."""
    proc = subprocess.Popen([sys.executable, "-c", _CONSOLE, "finite", "kernels", "--width", "300", "--depth", "40",
                             "--inits", "100000"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "LIMITS_PROGRESS": "0"})
    assert proc.stderr.readline() == "go\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=600)     # unwinding and exit: a fraction of a CPU-second
    return proc.returncode, err


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.3, 1.0])
def test_ctrl_c_during_startup_and_run(delay):
    rc, err = _interrupt_at(delay)
    assert "Traceback" not in err and rc == 130, (rc, err[-2000:])
    assert err.strip().splitlines()[-1] == "limits: interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.001, 0.01, 0.02, 0.1, 0.2, 0.5, 0.8, 1.5, 2.0, 3.0, 5.0])
def test_ctrl_c_many_delays(delay):
    rc, err = _interrupt_at(delay)
    assert "Traceback" not in err and rc == 130, (rc, err[-2000:])


def test_ctrl_c_swallowed_in_a_weakref_callback_still_stops_the_work():
    """A KeyboardInterrupt raised inside a weakref callback is ignored by Python ("Exception ignored");
    seen in CI when Ctrl-C landed in the import system's module-lock callback, after which the command
    ran on. Now it is raised again once the callback has returned: exit 130, one line."""
    code = ("import os, signal, sys, time, weakref\nimport limits.cli as c\n"
            "from limits.progress import progress\n"
            "class O: pass\n"
            "def cmd(args):\n"
            "    o = O()\n"
            "    def cb(ref):\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "        for _ in range(1000): pass\n"
            "    r = weakref.ref(o, cb)\n"
            "    del o\n"
            "    sys.stderr.write('ran on\\n'); sys.stderr.flush()\n"
            "    for _ in progress(range(10**6)): time.sleep(0.01)\n"
            "    return 0\n"
            "c.cmd_activations = cmd\nsys.exit(c.main())")
    proc = subprocess.run([sys.executable, "-c", code, "activations"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "LIMITS_PROGRESS": "0"})
    # raised again shortly after the callback: no "Exception ignored" traceback, the command stops within
    # its first steps (each sleeps 10 ms) instead of running on for hours
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "limits: interrupted"


def test_progress_steps_are_interruption_points(monkeypatch):
    from limits import interrupts
    from limits.progress import progress

    for env in ("0", "1", None):
        if env is None:
            monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
        else:
            monkeypatch.setenv("LIMITS_PROGRESS", env)
        assert list(progress(range(3))) == [0, 1, 2]
        monkeypatch.setattr(interrupts, "_SEEN", [2])
        with pytest.raises(KeyboardInterrupt):
            list(progress(range(3)))
        bar = progress(total=3)
        with pytest.raises(KeyboardInterrupt):
            bar.update(1)
        bar.close()
        monkeypatch.setattr(interrupts, "_SEEN", [])


def test_python_dash_m_limits():
    proc = subprocess.run([sys.executable, "-m", "limits", "expect", "erf", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["f"] == "erf"
    proc = subprocess.run([sys.executable, "-m", "limits", "expect", "nope"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 2 and one_error_line(proc.stderr).startswith("limits: error: ")


# ------------------------------------------------------------------------ files in and out
def test_load_array_errors_name_the_argument(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04" + b"\0" * 30)
    (tmp_path / "text.npy").write_text("1,2")
    np.save(tmp_path / "str.npy", np.array(["a"]))
    np.save(tmp_path / "nan.npy", np.array([[np.nan]]))
    np.save(tmp_path / "empty.npy", np.zeros((0, 2)))
    np.save(tmp_path / "vec.npy", np.ones(3))
    np.savez(tmp_path / "none.npz")
    cases = {"missing.npy": "does not exist", "obj.npy": "pickle", "corrupt.npz": "corrupt",
             "text.npy": "not an .npy/.npz", "str.npy": "numeric", "nan.npy": "NaN", "empty.npy": "empty",
             "vec.npy": "2-dimensional", "none.npz": "no arrays", ".": "directory"}
    for name, msg in cases.items():
        with pytest.raises(ValueError, match=msg) as exc:
            cliutil.load_array(tmp_path / name, "--X", ndim=2)
        assert str(exc.value).startswith("--X"), exc.value
    np.save(tmp_path / "ok.npy", np.eye(2))
    assert cliutil.load_array(tmp_path / "ok.npy", "--X", ndim=2).dtype == np.float64


def test_replot_without_data_is_a_clear_error(tmp_path):
    rc, _, err = run(["figure", "seed000_fig3", "--quick", "--replot", "--outdir", tmp_path])
    line = one_error_line(err)
    assert rc == 2 and str(tmp_path / "seed000_fig3.json") in line and "drop --replot" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [
    ["figure", "seed000_fig3", "--quick", "--outdir", "{ro}"],
    ["run", "--outdir", "{ro}"],
    ["validate", "pc", "--out", "{ro}/v.md"],
    ["nngp", "--depth", "2", "--save", "{ro}/k"],
    ["pc", "equilibrium", "--save", "{ro}/e"],
    ["nfd", "gia", "--out", "{ro}/g.json"],
])
def test_unwritable_outputs_fail_before_computing(argv, tmp_path, monkeypatch):
    ro = _readonly_dir(tmp_path)
    monkeypatch.setattr(gallery, "make", lambda *a, **k: pytest.fail("computed before checking the output"))
    monkeypatch.setattr(validate, "run", lambda *a, **k: pytest.fail("computed before checking the output"))
    t0 = time.process_time()          # nothing computed first: CPU time, which a loaded machine does not inflate
    rc, out, err = run([a.replace("{ro}", str(ro)) for a in argv])
    line = one_error_line(err)
    assert rc == 2 and ("--out" in line or "--save" in line), line
    assert time.process_time() - t0 < 20


def test_output_path_that_is_a_directory_or_under_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    rc, _, err = run(["validate", "pc", "--out", tmp_path])
    assert rc == 2 and "is a directory" in one_error_line(err)
    rc, _, err = run(["figure", "seed000_fig3", "--quick", "--outdir", tmp_path / "f" / "sub"])
    assert rc == 2 and "--outdir" in one_error_line(err)


def test_write_failure_after_computing_rescues_the_result(demo_figure, tmp_path, monkeypatch):
    real = gallery.atomic_write_bytes

    def failing(path, data):
        if Path(path).parent == tmp_path:
            raise OSError(28, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(gallery, "atomic_write_bytes", failing)
    rc, _, err = run(["figure", NAME, "--quick", "--outdir", tmp_path])
    line = one_error_line(err)
    assert rc == 2 and "No space left" in line and demo_figure == [6]
    rescued = Path(line.split("saved to ")[1].split(f"/{NAME}.npz")[0])
    try:
        assert gallery.load_data(NAME, rescued)["data"]["x"].shape == (6,)
    finally:
        for p in rescued.iterdir():
            p.unlink()
        rescued.rmdir()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_validate_report_is_rescued(tmp_path, monkeypatch):
    case = validate.Case.exact("core", "demo", 1.0, 1.0)
    monkeypatch.setattr(validate, "run", lambda *a, **k: validate.Report((case,)))
    real = validate.write_report

    def failing(report, path, *a, **k):
        if Path(path).parent == tmp_path:
            raise PermissionError(13, "Permission denied", str(path))
        return real(report, path, *a, **k)

    monkeypatch.setattr(validate, "write_report", failing)
    rc, out, err = run(["validate", "pc", "--out", tmp_path / "v.md"])
    line = one_error_line(err)
    assert rc == 2 and "saved to" in line and "1 of 1 cases pass" in out
    rescued = Path(line.split("saved to ")[1].split(" instead")[0])
    assert "1 of 1 cases pass" in rescued.read_text()
    rescued.unlink()
    rescued.parent.rmdir()


# ------------------------------------------------------------------------ quick vs paper-size
def test_quick_and_full_results_are_kept_apart(demo_figure, tmp_path):
    assert run(["figure", NAME, "--outdir", tmp_path])[0] == 0                 # paper size → OUTDIR/full
    assert run(["figure", NAME, "--quick", "--outdir", tmp_path])[0] == 0      # quick → OUTDIR
    assert demo_figure == [40, 6]
    assert gallery.load_data(NAME, tmp_path / "full")["params"] == {"n": 40}
    assert gallery.load_data(NAME, tmp_path)["params"] == {"n": 6}
    assert run(["figure", NAME, "--replot", "--outdir", tmp_path])[0] == 0
    assert gallery.load_data(NAME, tmp_path / "full")["params"] == {"n": 40}
    rc, _, err = run(["figure", NAME, "--quick", "--outdir", tmp_path / "full"])   # never over a full result
    assert rc == 2 and "paper-size" in one_error_line(err) and demo_figure == [40, 6]
    assert gallery.load_data(NAME, tmp_path / "full")["params"] == {"n": 40}
    rc, _, err = run(["figure", NAME, "--quick", "--force", "--outdir", tmp_path / "full"])
    assert rc == 2 and gallery.load_data(NAME, tmp_path / "full")["params"] == {"n": 40}


def test_main_job_writes_quick_figures_to_outdir(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(cli, "_component_clis", lambda: [])
    monkeypatch.setattr(gallery, "default_names", lambda: ["x"])
    monkeypatch.setattr(gallery, "reuse", lambda name, quick, source, outdir: None)   # no committed data to copy
    monkeypatch.setattr(gallery, "make", lambda name, quick, outdir: made.append((quick, Path(outdir))) or
                        gallery.MadeFigure(name, {"png": "p"}, 0.0, True))
    assert run(["run", "--outdir", tmp_path])[0] == 0
    assert run(["run", "--full", "--outdir", tmp_path])[0] == 0
    assert made == [(True, tmp_path), (False, tmp_path / "full")]


# ------------------------------------------------------------------------ reproducible bytes, umask
def test_figure_bytes_are_reproducible(demo_figure, tmp_path):
    assert run(["figure", NAME, "--quick", "--outdir", tmp_path])[0] == 0
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    time.sleep(1.1)                                  # a different second for any embedded date
    assert run(["figure", NAME, "--quick", "--force", "--outdir", tmp_path])[0] == 0
    second = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert demo_figure == [6, 6] and first.keys() == second.keys()
    for name in first:
        if name.endswith(".json"):                   # only the measured wall time may differ
            a, b = json.loads(first[name]), json.loads(second[name])
            a.pop("wall_time_s"), b.pop("wall_time_s")
            assert a == b
        else:
            assert first[name] == second[name], name
    assert b"CreationDate" not in second[f"{NAME}.pdf"]
    time.sleep(1.1)
    assert run(["figure", NAME, "--quick", "--outdir", tmp_path])[0] == 0      # cached: JSON untouched too
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == second


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_respect_the_umask(mask, mode, demo_figure, tmp_path, umask):
    umask(mask)
    assert run(["figure", NAME, "--quick", "--outdir", tmp_path])[0] == 0
    assert run(["nngp", "--depth", "2", "--save", tmp_path / "k"])[0] == 0
    files = sorted(tmp_path.iterdir())
    assert len(files) == 6
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == mode, p
    assert stat.S_IMODE(results.atomic_write_text(tmp_path / "t.txt", "x").stat().st_mode) == mode


def test_umask_read_does_not_change_it(umask):
    umask(0o027)
    assert results.current_umask() == 0o027
    assert results.current_umask() == 0o027


def test_validation_report_has_no_wall_times():
    a = validate.Case.exact("core", "demo", 1.0, 1.0)
    b = validate.Case(**{**a.__dict__, "wall_time_s": 123.4})
    assert validate.Report((a,)).to_markdown() == validate.Report((b,)).to_markdown()
    assert "123.4" not in validate.Report((b,)).to_markdown()


def test_json_output_is_strict():
    rc, out, _ = run(["expect", "erf", "--json"])
    assert rc == 0
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    buf = io.StringIO()
    import argparse

    with contextlib.redirect_stdout(buf):
        cliutil.emit({"a": float("nan"), "b": [1.0, float("inf")]}, argparse.Namespace(json=True), "")
    assert json.loads(buf.getvalue()) == {"a": None, "b": [1.0, None]}
