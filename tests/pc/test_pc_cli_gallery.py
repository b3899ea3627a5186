"""CLI (`limits pc ...`) and gallery smoke tests for limits.pc."""
import json

import numpy as np
import pytest

from limits.cli import main


def test_cli_equilibrium_json(capsys):
    assert main(["pc", "equilibrium", "--width", "6", "--hidden", "3", "--d-out", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["energy"] > 0 and out["ratio_mse_over_energy"] >= 1.0 and len(out["S"]) == 2


def test_cli_equilibrium_from_files(tmp_path, capsys):
    np.savez(tmp_path / "W.npz", W1=np.array([[1.0]]), W2=np.array([[2.0]]), W3=np.array([[1.5]]))
    np.save(tmp_path / "X.npy", np.array([[1.0]]))
    np.save(tmp_path / "Y.npy", np.array([[1.0]]))
    assert main(["pc", "equilibrium", "--weights", str(tmp_path / "W.npz"), "--X", str(tmp_path / "X.npy"),
                 "--Y", str(tmp_path / "Y.npy"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["energy"] - 8 / 49) < 1e-14 and abs(out["S"][0][0] - 12.25) < 1e-13


def test_cli_spectrum_and_infer(capsys):
    assert main(["pc", "spectrum", "--width", "8", "--hidden", "4", "--param", "mupc", "--skips", "1-skip",
                 "--method", "lanczos", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["converged"] and out["kappa"] > 1
    assert main(["pc", "infer", "--width", "6", "--hidden", "2", "--beta", "100", "--steps", "50", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["diverged"] and any("stability bound" in w for w in out["warnings"])


def test_cli_bad_input(capsys):
    assert main(["pc", "equilibrium", "--width", "0"]) == 2
    assert "width" in capsys.readouterr().err


def test_gallery_registered_and_quick_figure(tmp_path):
    from limits import gallery

    figs = gallery.figures()
    for name in ["seed000_fig2", "seed000_figA17", "seed000_figA18", "seed000_fig3", "seed000_fig4",
                 "seed001_fig2", "seed001_fig4", "seed001_figA22", "seed001_fig6", "seed001_figA1_A7",
                 "seed003_fig2"]:
        assert name in figs and figs[name].component == "pc"
    assert "seed000_fig3" in gallery.default_names()
    made = gallery.make("seed000_fig3", quick=True, outdir=tmp_path)
    assert (tmp_path / "seed000_fig3.png").exists()
    d = gallery.load_data("seed000_fig3", tmp_path)["data"]
    # the Monte Carlo s−1 agrees with its exact initialisation mean within 5 SE everywhere
    assert np.all(np.abs(d["s_minus_1"] - d["theory"]) < 5 * d["se"] + 1e-12)
