"""`limits predict` (limits/cli/predict.py)."""
import argparse
import json

import numpy as np
import pytest

import limits
from limits.cli.predict import register


def _run(argv, capsys):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    register(sub)
    args = p.parse_args(argv)
    rc = args.func(args)
    return rc, capsys.readouterr().out


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    X, Xs = rng.standard_normal((10, 3)), rng.standard_normal((4, 3))
    Y = np.sin(X[:, 0])
    for name, a in (("X", X), ("Y", Y), ("Xs", Xs)):
        np.save(tmp_path / f"{name}.npy", a)
    m = limits.mlp(3, 2, activation="erf", sigma_w2=1.5, sigma_b2=0.1, lr=0.2)
    m.save(tmp_path / "m.toml")
    base = ["predict", "--model", str(tmp_path / "m.toml"), "--x-train", str(tmp_path / "X.npy"),
            "--y-train", str(tmp_path / "Y.npy"), "--x-test", str(tmp_path / "Xs.npy")]
    return m, X, Y, Xs, base, tmp_path


def test_cli_posterior_and_gd_match_the_api(files, capsys):
    m, X, Y, Xs, base, tmp = files
    rc, out = _run(base + ["--method", "posterior", "--noise", "0.01", "--json"], capsys)
    d = json.loads(out)
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=0.01)
    assert rc == 0 and np.allclose(np.array(d["mean"]), p.mean, rtol=0, atol=1e-12)
    rc, out = _run(base + ["--method", "gd", "--t", "3", "30", "--reduction", "mean", "--save", str(tmp / "g")],
                   capsys)
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[3, 30], flow=False, reduction="mean")
    assert rc == 0 and "discrete GD" in out
    r = limits.results.load_result(tmp / "g")
    assert np.array_equal(r.mean, g.mean) and np.array_equal(r.cov, g.cov)


def test_cli_bad_arguments(files, capsys):
    m, X, Y, Xs, base, tmp = files
    with pytest.raises(ValueError, match="--t: for the NTK ensemble.*not the NNGP posterior"):
        _run(base + ["--method", "posterior", "--t", "1"], capsys)
    with pytest.raises(ValueError, match="--lr/--reduction: for the NTK ensemble"):
        _run(base + ["--method", "posterior", "--lr", "0.1", "--reduction", "mean"], capsys)
    with pytest.raises(ValueError, match="--noise"):
        _run(base + ["--method", "flow", "--t", "1", "--noise", "0.1"], capsys)
    np.save(tmp / "Yb.npy", np.ones(7))
    bad = list(base)
    bad[bad.index(str(tmp / "Y.npy"))] = str(tmp / "Yb.npy")
    with pytest.raises(ValueError, match="--y-train"):
        _run(bad + ["--method", "posterior", "--noise", "0.1"], capsys)


def test_defaults_need_no_other_option(files, capsys):
    """No --method: the NNGP posterior with noise 'auto'; --method flow without --t: t → ∞."""
    m, X, Y, Xs, base, tmp = files
    rc, out = _run(base + ["--json"], capsys)
    d = json.loads(out)
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto")
    assert rc == 0 and d["noise"] == p.noise and np.allclose(d["mean"], p.mean, rtol=0, atol=1e-12)
    rc, out = _run(base + ["--noise", "0.01"], capsys)
    assert rc == 0 and "NNGP posterior, noise σ² = 0.01" in out
    rc, out = _run(base + ["--method", "flow", "--json"], capsys)
    d = json.loads(out)
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=np.inf)
    assert rc == 0 and d["t"] == ["inf"] and np.allclose(d["mean"], g.mean, rtol=0, atol=1e-12)
    rc, out = _run(base + ["--method", "gd", "--t", "5", "inf", "--lr", "0.1"], capsys)
    assert rc == 0 and "\n∞ | " in out and "\n5 | " in out
    rc, out = _run(base + ["--t", "2", "--json"], capsys)            # times without --method: gradient flow
    assert rc == 0 and json.loads(out)["flow"] is True and json.loads(out)["t"] == [2.0]


def test_cli_kernel_is_computed_once_then_reused(files, capsys, monkeypatch):
    """--kernel K: computed and saved the first time, read (and verified) afterwards — by every method, and from
    `limits kernel --save`; a kernel of other inputs or another model is refused naming the option."""
    from limits.cli import main

    m, X, Y, Xs, base, tmp = files
    K = str(tmp / "K")
    rc, out = _run(base + ["--noise", "0.01", "--kernel", K], capsys)
    assert rc == 0 and "kernel: computed on the 10 training and 4 test inputs" in out
    assert (tmp / "K.npz").exists() and (tmp / "K.json").exists()
    first = limits.results.load_result(K)
    assert first.ntk is not None and np.array_equal(first.X1, np.vstack([X, Xs]))

    def boom(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr(limits.predict, "_kernels", boom)
    monkeypatch.setattr(limits.kernels, "kernel", boom)
    rc, out = _run(base + ["--noise", "0.01", "--kernel", K, "--json"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["kernel"]["reused"] and np.array_equal(d["mean"], json.loads(
        _run(base + ["--noise", "0.01", "--kernel", K, "--json"], capsys)[1])["mean"])
    rc, out = _run(base + ["--method", "flow", "--t", "1", "inf", "--kernel", K], capsys)
    assert rc == 0 and "kernel: read from" in out
    monkeypatch.undo()
    p = limits.predict.nngp_posterior(m, X, Y, Xs, noise=0.01)
    assert np.allclose(d["mean"], p.mean, rtol=0, atol=1e-12)
    # a kernel saved by `limits kernel` on a pool of inputs
    np.save(tmp / "pool.npy", np.vstack([Xs, X, X[:2] + 1]))
    assert main(["kernel", "--model", str(tmp / "m.toml"), "--x1", str(tmp / "pool.npy"), "--save",
                 str(tmp / "P")]) == 0
    capsys.readouterr()
    rc, out = _run(base + ["--noise", "0.01", "--kernel", str(tmp / "P"), "--json"], capsys)
    assert rc == 0 and np.allclose(json.loads(out)["mean"], p.mean, rtol=0, atol=1e-12)
    # other inputs / another model: refused (exit 2) with the option and what to do
    np.save(tmp / "Xs2.npy", Xs + 0.5)
    other = [a if a != str(tmp / "Xs.npy") else str(tmp / "Xs2.npy") for a in base]
    assert main(other + ["--kernel", K]) == 2
    err = capsys.readouterr().err
    assert "--kernel" in err and "row 0 of --x-test is not among the 14 inputs" in err and "another --kernel" in err
    m.with_(sigma_w2=2.0).save(tmp / "m2.toml")
    assert main([a if a != str(tmp / "m.toml") else str(tmp / "m2.toml") for a in base] + ["--kernel", K]) == 2
    assert "another model (differing: sigma_w2)" in capsys.readouterr().err
    assert main(base + ["--kernel", str(tmp / "X.npy" / "K")]) == 2        # checked before anything is computed
    assert "--kernel" in capsys.readouterr().err
