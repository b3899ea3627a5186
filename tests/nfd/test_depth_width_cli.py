"""`limits depth-width`: the short report, --json, --out (saved and loaded identically), bad input exits 2."""
import json
import subprocess
import sys

import numpy as np
import pytest

from limits.cli import main

ARGS = ["depth-width", "--depth", "20", "--width", "64", "--paths", "400", "--steps", "16"]


def test_report_json_and_out(tmp_path, capsys):
    assert main(ARGS) == 0
    text = capsys.readouterr().out
    assert "regime: proportional" in text and "T = L/N = 0.3125" in text and "step halving" in text
    out = tmp_path / "r"
    assert main(ARGS + ["--out", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    from limits.nfd import DepthWidthReport

    back = DepthWidthReport.load(out)
    assert d["regime"] == back.regime == "proportional" and d["depth"] == 20 and back.paths == 400
    assert main(ARGS[:-4] + ["--paths", "200", "--steps", "16", "--out", str(out)]) == 2     # never a smaller run
    assert "400 SDE paths" in capsys.readouterr().err


def test_inputs_file_and_relu(tmp_path, capsys):
    X = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
    np.save(tmp_path / "X.npy", X)
    assert main(["depth-width", "--depth", "2", "--width", "512", "--activation", "relu", "--inputs",
                 str(tmp_path / "X.npy")]) == 0
    text = capsys.readouterr().out
    assert "ρ₀ = 0.6" in text and "regime: kernel-like" in text and "Hanin–Nica" in text
    np.save(tmp_path / "X3.npy", np.ones((3, 2)))
    assert main(["depth-width", "--depth", "2", "--width", "8", "--inputs", str(tmp_path / "X3.npy")]) == 2
    assert "exactly 2 inputs" in capsys.readouterr().err


@pytest.mark.parametrize("bad, msg", [(["--activation", "tanh"], "invalid choice"), (["--rho", "1.5"], "rho"),
                                      (["--paths", "10"], "paths")])
def test_bad_input_exits_2(bad, msg, capsys):
    assert main(["depth-width", "--depth", "4", "--width", "64"] + bad) == 2
    assert msg in capsys.readouterr().err


def test_help_runs_as_a_subprocess():
    p = subprocess.run([sys.executable, "-m", "limits", "depth-width", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--c-plus" in p.stdout
