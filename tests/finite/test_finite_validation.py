"""The registered finite self-checks (limits/validate/finite.py) pass (fixed seeds, deterministic)."""
import pytest

from limits import validate


def _run(quick):
    rep = validate.run(["finite"], quick=quick, seed=0, progress_bar=False)
    bad = [f"{c.name}: {c.verdict} z={c.z} rate={c.rate} {c.detail}" for c in rep.cases if c.verdict != "pass"]
    assert not bad, "\n".join(bad)
    assert len(rep.cases) >= 7


def test_finite_validation_quick():
    _run(True)


@pytest.mark.slow
def test_finite_validation_full():
    _run(False)
