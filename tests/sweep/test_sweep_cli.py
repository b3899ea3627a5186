"""`limits sweep run/show/plot` and the example sweep files in docs/sweeps/."""
import json
from pathlib import Path

import numpy as np
import pytest

import limits
import limits.sweep as S
from limits.cli import main
from limits.sweep.sweepfile import read

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sweeps"


def test_example_files_parse():
    files = sorted(DOCS.glob("*.toml"))
    assert {f.stem for f in files} >= {"critical_line", "dmft_gamma0", "response_width_depth"}
    for f in files:
        sf = read(f)
        assert sf.function.startswith("limits.") and sf.grid.n_points >= 1
    sf = read(DOCS / "dmft_gamma0.toml")
    # the declared computation, without the model= entry point wrapped around it (a model file is a path)
    assert sf.fn is limits.dmft.solve.__wrapped__.__wrapped__ and sf.grid.fixed["X"].shape == (10, 20)
    assert sf.grid.product["gamma0"][0] == 0.1 and np.isclose(sf.grid.product["gamma0"][-1], 1.0)


def test_cli_run_show_plot(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    f = DOCS / "critical_line.toml"
    assert main(["sweep", "run", str(f), "--backend", "serial", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_points"] == 22 and out["computed"] == 22 and out["n_failed"] == 0
    assert main(["sweep", "run", str(f), "--backend", "serial", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reused"] == 22
    ds = S.load(tmp_path / "sweeps" / "critical_line" / "sweep.nc")
    c = limits.kernels.critical_line("erf", 0.2)
    assert ds["sigma_w2"].sel(activation="erf", sigma_b2=0.2).item() == c.sigma_w2
    assert main(["sweep", "show", "sweeps/critical_line", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dims"] == {"activation": 2, "sigma_b2": 11}
    args = ["sweep", "plot", str(f), "--x", "sigma_b2", "--y", "sigma_w2", "--hue", "activation", "--out", "a"]
    assert main(args) == 0
    first = {e: (tmp_path / f"a.{e}").read_bytes() for e in ("png", "pdf")}
    assert main(args) == 0
    assert first == {e: (tmp_path / f"a.{e}").read_bytes() for e in ("png", "pdf")}     # deterministic
    assert b"CreationDate" not in first["pdf"]
    capsys.readouterr()
    assert main(["sweep", "plot", "sweeps/critical_line", "--x", "sigma_b2", "--y", "sigma_w2"]) == 2
    assert "--sel" in capsys.readouterr().err


def test_cli_bands_failures_and_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    (tmp_path / "s.toml").write_text(
        'function = "sweep_points.sleepy"\nallow = ["sweep_points"]\n[fixed]\ndelay = 0.0\nfail_at = 2\n'
        '[product]\nx = [0, 1, 2, 3]\n[seeds]\nn = 3\n[run]\nbackend = "serial"\n')
    assert main(["sweep", "run", "s.toml"]) == 2                   # the file cannot allow code by itself
    assert "confirm with --allow sweep_points" in capsys.readouterr().err
    assert main(["sweep", "run", "s.toml", "--allow", "sweep_points"]) == 3   # finished, with failed points
    out = capsys.readouterr().out
    assert "3 failed" in out and "ArithmeticError" in out
    assert main(["sweep", "run", "s.toml", "--allow", "sweep_points", "--fail-fast"]) == 2   # one line, naming it
    err = capsys.readouterr().err
    assert err.count("limits: error:") == 1 and "sweep_points.sleepy" in err and "ArithmeticError" in err, err
    assert main(["sweep", "plot", "s.toml", "--x", "x", "--y", "y", "--out", "b", "--format", "png"]) == 0
    assert (tmp_path / "b.png").stat().st_size > 1000
    (tmp_path / "bad.toml").write_text('function = "os.system"\n[product]\ncommand = ["ls"]\n')
    assert main(["sweep", "run", "bad.toml"]) == 2
    assert "outside limits" in capsys.readouterr().err
    (tmp_path / "bad2.toml").write_text('function = "limits.kernels.critical_line"\n[prodcut]\nx = [1]\n')
    assert main(["sweep", "run", "bad2.toml"]) == 2
    assert "unknown keys" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no dataset"):
        from limits.cli.sweep import _dataset_path
        (tmp_path / "empty").mkdir()
        _dataset_path(tmp_path / "empty")


@pytest.mark.slow
def test_dmft_example_matches_a_direct_solve(tmp_path):
    from limits.sweep.sweepfile import run_file

    ds = run_file(DOCS / "dmft_gamma0.toml", backend="serial", store=str(tmp_path / "st"), progress=False)
    assert ds.attrs["n_failed"] == 0 and ds.sizes["gamma0"] == 6
    X, y = limits.dmft.toy_task(P=10, D=20, seed=0)
    g = float(ds["gamma0"].values[2])
    d = limits.dmft.solve(X, y, depth=2, activation="linear", gamma0=g, T=5.0, dt=0.05)
    np.testing.assert_array_equal(ds["loss"].sel(gamma0=g).values, d.loss)
    np.testing.assert_array_equal(ds["f"].sel(gamma0=g).values, d.f)


def test_documented_sweep_files_name_nothing_only_the_caller_chooses(tmp_path):
    """Every sweep file the docs show (docs/sweeps/*.toml and the toml blocks of docs/sweep.rst) parses: none sets
    a scheduler, worker count, store, size confirmation or an output outside its store (issue 42) — those appear
    on the documented command lines instead."""
    import doc_examples as D
    from limits.sweep.sweepfile import CALLER_ONLY, parse

    text = (DOCS.parents[1] / "docs/sweep.rst").read_text()
    blocks = [b.code for b in D.blocks("docs/sweep.rst") if b.lang == "toml" and "function =" in b.code]
    assert len(blocks) >= 2
    files = sorted(DOCS.glob("*.toml"))
    for i, b in enumerate(blocks):
        (tmp_path / f"doc{i}.toml").write_text(b)
        files.append(tmp_path / f"doc{i}.toml")
    for f in files:
        run = parse(f).get("run", {})
        assert not set(run) & set(CALLER_ONLY), f
    assert "--n-jobs 2" in text and "--scheduler tcp://127.0.0.1:38786" in text
