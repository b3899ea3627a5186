"""limits.check: no verdict without a measurement (limits/checking/core.py, docs/theory/finite.rst §5). A criterion
too wide to decide is 'not tested' with the inits/widths that would test it and never counted as met; the entry and
bias tests are required (undecided → verdict 'inconclusive', passed None, `limits check` exit 4); an undecided rate is
reported and not counted; a decided failure fails whatever else is undecided."""
from dataclasses import replace

import numpy as np
import pytest

import limits
from limits.checking.core import DECIDE_BIAS, DECIDE_RATE


@pytest.fixture(scope="module")
def kern():
    X = np.random.default_rng(0).standard_normal((3, 3))
    return limits.kernels.kernel(limits.mlp(3, 1, activation="erf"), X, get=("nngp",))


def test_three_widths_leave_the_rate_untested_and_uncounted(kern):
    """Three widths: the log–log fit has one degree of freedom and a CI like [−50, +48] — reported as not tested,
    with the widths and inits that would test it; the verdict rests on the decided entry and bias tests."""
    c = limits.check(kern, widths=(16, 32, 64), inits=64, seed=0, progress=False)
    assert "rate" in c.not_tested and c.details["criterion_power"]["rate"] > DECIDE_RATE
    assert c.details["criterion_power"]["bias"] <= DECIDE_BIAS and "bias" not in c.not_tested
    assert c.verdict == "pass" and c.passed is True
    md = c.to_markdown()
    assert "**not tested**" in md and "contains -0.5" not in md and "would be tested with widths 16, 32, 64, 128" in md
    assert "not tested: rate" in c.verdict_text()


def test_undecided_bias_is_inconclusive_not_pass(kern):
    """Two inits at two widths: the bias test detects only an 8600 % bias — inconclusive (passed None), with the inits
    that would decide it; a prediction off by a factor 2 is then inconclusive too, never passed."""
    c = limits.check(kern, widths=(8, 16), inits=2, seed=0, progress=False)
    assert c.verdict == "inconclusive" and c.passed is None and not c.passed
    assert {"bias", "entries", "rate"} <= set(c.not_tested) and "inits per width" in c.not_tested["bias"]["would"]
    assert "INCONCLUSIVE" in c.verdict_text() and "Not tested" in c.to_markdown()
    wrong = limits.check(replace(kern, nngp=2 * kern.nngp), widths=(8, 16), inits=2, seed=0, progress=False)
    assert wrong.passed is not True


def test_a_decided_failure_fails_whatever_is_undecided(kern):
    c = limits.check(replace(kern, nngp=2 * kern.nngp), widths=(16, 32, 64), inits=64, seed=0, progress=False)
    assert c.verdict == "fail" and c.passed is False and "rate" in c.not_tested


def test_suggested_inits_decide_the_bias(kern):
    """The inits the report suggests (power ∝ 1/√inits) do decide the bias test."""
    c = limits.check(kern, widths=(16, 32), inits=3, seed=1, progress=False)
    assert "bias" in c.not_tested
    n = int(c.not_tested["bias"]["would"].split("≈ ")[1].split(" ")[0])
    c2 = limits.check(kern, widths=(16, 32), inits=n, seed=1, progress=False)
    assert "bias" not in c2.not_tested and c2.passed in (True, False)


def test_cli_exit_status_4_for_inconclusive(tmp_path, capsys):
    from limits.cli import EXIT_INCONCLUSIVE, main

    limits.mlp(3, 1, activation="erf").save(tmp_path / "m.toml")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((3, 3)))
    args = ["check", "--model", str(tmp_path / "m.toml"), "--what", "nngp", "--x", str(tmp_path / "x.npy"),
            "--widths", "8", "16", "--inits", "2"]
    assert main(args) == EXIT_INCONCLUSIVE == 4
    out = capsys.readouterr().out
    assert "INCONCLUSIVE" in out and "would be tested with" in out
