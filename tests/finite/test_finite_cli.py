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


def test_cli_kernels_rho_default_is_the_models(capsys):
    """One default ρ: `limits finite kernels` without --rho is --rho 1, limits.Model's default (and --help
    says so); 1/√L is no longer silently applied to ResNets."""
    import limits
    from limits.cli import build_parser

    args = ["finite", "kernels", "--width", "16", "--depth", "4", "--inits", "6", "--json"]
    outs = []
    for extra in ([], ["--rho", "1"], ["--rho", str(1 / np.sqrt(4))]):
        assert main(args + extra) == 0
        outs.append(np.array(json.loads(capsys.readouterr().out)["mean"]))
    assert np.array_equal(outs[0], outs[1]) and not np.allclose(outs[0], outs[2])
    assert limits.Model(10).rho == 1.0
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    fin = next(a for a in sub.choices["finite"]._actions if a.__class__.__name__ == "_SubParsersAction")
    for cmd in ("kernels", "ntk"):
        rho = next(a for a in fin.choices[cmd]._actions if "--rho" in a.option_strings)
        assert rho.default == limits.Model(10).rho and "default 1" in rho.help
