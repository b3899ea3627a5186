"""The long core commands say that they are working while their first long step runs (limits.progress): each
slow step below is held until a progress line has been printed — by the heartbeat, not by the step finishing
— then let go; the line names the step. (How soon the first line comes on a real run, measured:
benchmarks/progress_first_line.py.)"""
import numpy as np
import pytest

import limits
from limits.cli import main
from limits.progress import HEARTBEAT


def _held_until_a_line(monkeypatch, owner, name):
    """Replace ``owner.name`` by a wrapper that waits (≤ 60 s) until the innermost open report has printed."""
    import time

    original = getattr(owner, name)

    def held(*a, **k):
        end = time.monotonic() + 60
        while time.monotonic() < end:
            top = HEARTBEAT.innermost()
            if top is not None and getattr(top, "printed", False):
                break
            time.sleep(0.02)
        return original(*a, **k)

    monkeypatch.setattr(owner, name, held)


@pytest.fixture()
def quick_lines(monkeypatch):
    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    monkeypatch.setenv("LIMITS_PROGRESS_FIRST", "0.1")


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    m = limits.mlp(3, 2, activation="erf", sigma_w2=1.5, sigma_b2=0.1)
    m.save(tmp_path / "m.toml")
    X, Xs = rng.standard_normal((6, 3)), rng.standard_normal((3, 3))
    for name, a in (("X", X), ("Y", np.sin(X[:, 0])), ("Xs", Xs)):
        np.save(tmp_path / f"{name}.npy", a)
    return tmp_path


def test_check_says_it_computes_the_theory_then_checks(quick_lines, files, monkeypatch, capsys):
    _held_until_a_line(monkeypatch, limits.kernels, "kernel")
    rc = main(["check", "--model", str(files / "m.toml"), "--what", "nngp", "--x", str(files / "X.npy"),
               "--widths", "16", "32", "64", "--inits", "8"])
    err = capsys.readouterr().err
    assert rc in (0, 1), err
    assert "check: theory (NNGP of 6 inputs): 0s elapsed" in err and "check: theory (NNGP of 6 inputs): done in" in err


def test_check_of_a_prediction_says_it_computes_kernels(quick_lines, files, monkeypatch, capsys):
    import limits.checking.predict as cp

    p = limits.predict.nngp_posterior(limits.mlp(3, 2), np.load(files / "X.npy"), np.load(files / "Y.npy"),
                                      np.load(files / "Xs.npy"), noise=0.1)
    _held_until_a_line(monkeypatch, cp, "effective_dimension")
    limits.check(p, widths=(64, 128), inits=4)
    assert "check: kernels of the 6 + 3 inputs (the problem's effective dimension): 0s elapsed" in \
        capsys.readouterr().err


def test_kernel_and_predict_say_what_they_compute(quick_lines, files, monkeypatch, capsys):
    import limits.predict as P

    _held_until_a_line(monkeypatch, limits.kernels, "kernel")
    assert main(["kernel", "--model", str(files / "m.toml"), "--x1", str(files / "X.npy")]) == 0
    assert "kernel: NNGP and NTK of 6×6 inputs: 0s elapsed" in capsys.readouterr().err
    _held_until_a_line(monkeypatch, P, "_kernels")
    base = ["predict", "--model", str(files / "m.toml"), "--x-train", str(files / "X.npy"), "--y-train",
            str(files / "Y.npy"), "--x-test", str(files / "Xs.npy")]
    assert main(base) == 0
    assert "predict: NNGP posterior of 6 training and 3 test inputs: 0s elapsed" in capsys.readouterr().err


def test_every_command_says_it_is_working(quick_lines, files, monkeypatch, capsys):
    """The command-level stage (limits.cli._dispatch) speaks for a command whose long step has no report."""
    import limits.cli.params as params_cli

    _held_until_a_line(monkeypatch, params_cli, "cmd_depth")        # registered by name when the parser is built
    assert main(["depth", "--alpha", "0.5", "--gamma", "0"]) == 0
    err = capsys.readouterr().err
    assert "limits depth: 0s elapsed" in err and "limits depth: done in" in err


def test_a_sweep_says_what_it_waits_for_before_its_first_point(quick_lines, capsys):
    import time

    def f(x):
        end = time.monotonic() + 60
        while time.monotonic() < end and not getattr(HEARTBEAT.innermost(), "printed", False):
            time.sleep(0.02)
        return {"y": 2.0 * x}

    ds = limits.sweep.run(f, {"x": [1.0, 2.0]}, backend="serial", name="f")
    assert np.array_equal(ds["y"].values, [2.0, 4.0])
    err = capsys.readouterr().err
    assert "sweep f: 0/2 points (0 reused, 0 failed), 0s elapsed; running the first point" in err, err
