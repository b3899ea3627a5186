"""``limits finite ...`` command line."""
import json

import numpy as np

from limits.cli import main


def test_cli_kernels_json(capsys):
    assert main(["finite", "kernels", "--activation", "tanh", "--width", "16", "--depth", "3", "--inits", "8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    mean, se = np.array(out["mean"]), np.array(out["se"])
    assert mean.shape == (4, 3, 3) and se.shape == (4, 3, 3)
    assert np.all(se >= 0) and out["n_inits"] == 8


def test_cli_kernels_text_and_user_inputs(tmp_path, capsys):
    np.save(tmp_path / "X.npy", np.eye(2, 5))
    assert main(["finite", "kernels", "--mlp", "--width", "8", "--depth", "2", "--inits", "4",
                 "--X", str(tmp_path / "X.npy")]) == 0
    text = capsys.readouterr().out
    assert "mlp erf" in text and "out" in text


def test_cli_train(capsys):
    assert main(["finite", "train", "--param", "MF", "--width", "16", "--steps", "10", "--inits", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    loss = np.array(out["loss"])
    assert loss.shape[1] == 2 and np.all(loss[-1] < loss[0])


def test_cli_bad_depth_is_an_error(capsys):
    assert main(["finite", "kernels", "--depth", "0", "--width", "8", "--inits", "2"]) != 0


def test_cli_ntk_json(capsys):
    assert main(["finite", "ntk", "--mlp", "--width", "16", "--depth", "1", "--inits", "6", "--chunk", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = np.array(out["mean"])
    assert m.shape == (3, 3) and out["n_inits"] == 6
    np.testing.assert_allclose(m, m.T, rtol=1e-12)
