"""`limits dmft ...` command line: human-readable and --json output (in-process)."""
import json

from limits.cli import main


def test_cli_solve_json(capsys):
    rc = main(["dmft", "solve", "--depth", "2", "--dt", "0.05", "--steps", "6", "--P", "4", "--D", "6", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["converged"] and out["solver"] == "linear-march" and len(out["loss"]) == 7
    assert out["final_loss"] < out["initial_loss"]


def test_cli_seed000_text_and_bad_input(capsys, tmp_path):
    rc = main(["dmft", "seed000", "--steps", "5", "--P", "5", "--D", "8", "--save", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0 and "DMFT depth=4" in out and "dt per GD step = 0.005" in out
    assert (tmp_path / "r.npz").exists() and (tmp_path / "r.json").exists()
    rc = main(["dmft", "solve", "--gamma0", "-1", "--steps", "3", "--P", "3", "--D", "3"])
    assert rc == 2 and "gamma0" in capsys.readouterr().err
