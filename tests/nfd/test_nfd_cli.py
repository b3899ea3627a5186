"""`limits nfd ...` commands: JSON output, bad input exits with a message."""
import json

import numpy as np

from limits.cli import main


def test_kernel_ode_json(capsys, tmp_path):
    assert main(["nfd", "kernel-ode", "--P", "3", "--d", "2", "--L", "16", "--json", "--save", str(tmp_path / "k")]) == 0
    out = json.loads(capsys.readouterr().out)
    S = np.array(out["Sigma"])
    assert S.shape == (3, 3) and np.allclose(S, S.T)
    assert 0 < out["euler_error"] < 0.05
    assert (tmp_path / "k.npz").exists() and (tmp_path / "k.json").exists()


def test_kernel_ode_from_file(capsys, tmp_path):
    X = np.random.default_rng(0).standard_normal((4, 3))
    np.save(tmp_path / "X.npy", X)
    assert main(["nfd", "kernel-ode", "--X", str(tmp_path / "X.npy"), "--activation", "linear", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(out["Sigma"], np.e * X @ X.T / 3, rtol=1e-9)


def test_particles_and_train(capsys):
    assert main(["nfd", "particles", "--L", "4", "--M", "500", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_abs_err_vs_ode"] < 10 * out["mc_scale"] + 0.05
    assert main(["nfd", "train", "--K", "2", "--L", "3", "--M", "300", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["f_test"]) == 3


def test_bad_input_exit_code(capsys):
    assert main(["nfd", "kernel-ode", "--T", "0"]) == 2
    assert "T" in capsys.readouterr().err
    assert main(["nfd", "particles", "--L", "0", "--M", "10"]) == 2
