"""`limits model`, `limits kernel`, `limits check` on the command line."""
import json

import numpy as np

import limits
from limits.cli import main


def test_model_kernel_check_workflow(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.standard_normal((3, 6)))
    np.save(tmp_path / "b.npy", rng.standard_normal((4, 6)))
    m = tmp_path / "m.toml"
    assert main(["model", "--resnet", "--d-in", "6", "--depth", "3", "--rho", "0.5", "--out", str(m)]) == 0
    assert limits.Model.load(m) == limits.resnet(6, 3, rho=0.5)
    capsys.readouterr()
    assert main(["kernel", "--model", str(m), "--x1", str(tmp_path / "a.npy"), "--x2", str(tmp_path / "b.npy"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    k = limits.kernels.kernel(limits.Model.load(m), np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    np.testing.assert_allclose(np.array(out["nngp"]), k.nngp, rtol=1e-15)
    rc = main(["check", "--model", str(m), "--x", str(tmp_path / "a.npy"), "--widths", "32", "64", "128",
               "--inits", "24", "--plot", str(tmp_path / "c.png"), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == (0 if res["passed"] else 1) and (tmp_path / "c.png").exists()


def test_bad_model_file_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text("[model]\nd_in = 3\ndepht = 2\n")
    np.save(tmp_path / "a.npy", np.ones((2, 3)))
    assert main(["kernel", "--model", str(tmp_path / "bad.toml"), "--x1", str(tmp_path / "a.npy")]) == 2
    assert "unknown model field" in capsys.readouterr().err
    assert main(["kernel", "--model", str(tmp_path / "none.toml"), "--x1", str(tmp_path / "a.npy")]) == 2
