"""CLI smoke tests: `limits nngp`, `limits response`, `limits critical-line` (human and --json)."""
import json

import numpy as np
import pytest

from limits.cli import main


def test_critical_line_json(capsys):
    assert main(["critical-line", "tanh", "--sigma-b2", "0.05", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert abs(rows[0]["sigma_w2"] - 1.760955) < 5e-7


def test_nngp_and_response_commands(tmp_path, capsys):
    X = np.random.default_rng(0).standard_normal((3, 5))
    np.save(tmp_path / "X.npy", X)
    assert main(["nngp", "--X", str(tmp_path / "X.npy"), "-L", "3", "--residual", "--sigma-w2", "1.2",
                 "--sigma-b2", "0.2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    import limits

    r = limits.kernels.nngp(X, depth=3, residual=True, sigma_w2=1.2, sigma_b2=0.2)
    np.testing.assert_allclose(np.array(out["K"]), r.K, rtol=1e-15)
    assert main(["response", "--X", str(tmp_path / "X.npy"), "-L", "2", "-N", "50"]) == 0
    assert "η⁰ = N/d_in = 10" in capsys.readouterr().out


def test_cli_bad_input_is_an_error_message(capsys):
    assert main(["nngp", "--depth", "-1"]) == 2
    assert "depth" in capsys.readouterr().err
    assert main(["response", "-N", "10", "--K0", "/nonexistent.npy"]) == 2


@pytest.mark.parametrize("args", [["--random", "2", "4", "--activation", "tanh", "-L", "2"]])
def test_nngp_human_output(args, capsys):
    assert main(["nngp", *args]) == 0
    assert "K_out" in capsys.readouterr().out
