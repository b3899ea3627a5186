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


def test_a_composition_file_goes_wherever_its_theory_applies(tmp_path, capsys):
    """`limits.serial(...).save(FILE)` is a --model FILE for kernel, predict, regress and check (the same numbers
    as the API); DMFT and the MLP-only commands refuse it with the reason (exit 2), and a damaged layer is named."""
    L = limits.layers
    net = limits.serial(L.Conv((3,), "SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"), L.GlobalAvgPool(),
                        L.Dense())
    rng = np.random.default_rng(0)
    X, Y, Xs = rng.standard_normal((6, 5, 2)), rng.standard_normal(6), rng.standard_normal((3, 5, 2))
    for name, a in (("x", X), ("y", Y), ("xs", Xs)):
        np.save(tmp_path / f"{name}.npy", a)
    f = [str(tmp_path / n) for n in ("x.npy", "y.npy", "xs.npy")]
    for suffix in ("json", "toml"):
        path = str(net.save(tmp_path / f"net.{suffix}"))
        capsys.readouterr()
        assert main(["kernel", "--model", path, "--x1", f[0], "--json"]) == 0
        k = limits.kernels.kernel(net, X)
        out = json.loads(capsys.readouterr().out)
        np.testing.assert_array_equal(np.array(out["nngp"]), k.nngp)
        np.testing.assert_array_equal(np.array(out["ntk"]), k.ntk)
    p = limits.predict.nngp_posterior(net, X, Y, Xs, noise=0.1)
    for cmd in (["predict", "--method", "posterior"], ["regress"]):
        assert main(cmd + ["--model", path, "--x-train", f[0], "--y-train", f[1], "--x-test", f[2], "--noise", "0.1",
                           "--json"]) == 0
        np.testing.assert_allclose(np.array(json.loads(capsys.readouterr().out)["mean"]), p.mean, rtol=1e-10)
    assert main(["check", "--model", path, "--x", f[0], "--what", "dmft", "--y", f[1]]) == 2
    assert "cannot treat a composition" in capsys.readouterr().err
    assert main(["nngp", "--model", path, "--random", "4", "3"]) == 2
    assert "composition of layers" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"serial": [{"layer": "Conv", "filter_shape": [3], "stride": 2}]}')
    assert main(["kernel", "--model", str(tmp_path / "bad.json"), "--x1", f[0]]) == 2
    assert "serial[0]" in capsys.readouterr().err
