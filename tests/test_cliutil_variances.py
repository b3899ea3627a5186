"""limits.cliutil.add_variance_options: the hidden, read-in and read-out layer variances of `limits nngp`,
`limits response` and `limits model` are one set of options (names, defaults, help) and reach the network."""
import argparse

import pytest

from limits.cli import build_parser, main
from limits.cliutil import add_variance_options

NAMES = ["sigma_w2", "sigma_b2", "sigma_w2_in", "sigma_b2_in", "sigma_w2_out", "sigma_b2_out"]


def _variance_actions(parser):
    return [(a.option_strings, a.default, a.type, a.help) for a in parser._actions if a.dest in NAMES]


def test_options_and_defaults():
    p = argparse.ArgumentParser()
    add_variance_options(p)
    a = p.parse_args([])
    assert [getattr(a, n) for n in NAMES] == [1.0, 0.0, None, None, None, None]
    a = p.parse_args(["--sigma-w2-out", "2.5", "--sigma-b2-in", "0.1", "--sigma-w2", "1.5"])
    assert (a.sigma_w2, a.sigma_w2_out, a.sigma_b2_in, a.sigma_w2_in) == (1.5, 2.5, 0.1, None)
    helps = {a.dest: a.help for a in p._actions}
    assert helps["sigma_b2_out"] == "bias variance of the read-out layer (default: --sigma-b2)"


def test_the_commands_share_them():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    p = argparse.ArgumentParser()
    add_variance_options(p)
    want = _variance_actions(p)
    assert len(want) == 6
    for cmd in ("nngp", "response", "model"):
        assert _variance_actions(sub.choices[cmd]) == want, cmd


@pytest.mark.parametrize("argv, want", [(["--sigma-w2-out", "2.0", "--sigma-b2-in", "0.3"], (1.5, 0.3, 2.0, 0.0)),
                                        ([], (1.5, 0.0, 1.5, 0.0))])
def test_the_variances_reach_the_model(tmp_path, argv, want):
    """Given, the read-in/read-out values are the model's; left out, the hidden ones are."""
    from limits.model import Model

    out = tmp_path / "m.json"
    assert main(["model", "--d-in", "3", "--depth", "2", "--sigma-w2", "1.5", *argv, "--out", str(out)]) == 0
    v = Model.load(out).variances()
    assert (v["sigma_w2_in"], v["sigma_b2_in"], v["sigma_w2_out"], v["sigma_b2_out"]) == want
