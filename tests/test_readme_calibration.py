"""The README's coord-check calibration tables are generated from benchmarks/results/calibration/coordcheck.json
(``python benchmarks/coordcheck_calibration.py --write``), and say what the data say: the false-alarm rate on
every correct module is not significantly above the nominal level (one-sided binomial test at 1 %: a correct
calibration fails it with probability ≤ 1 % per module), every injected bug is flagged."""
import importlib.util
import json
from pathlib import Path

from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("coordcheck_calibration",
                                                  ROOT / "benchmarks" / "coordcheck_calibration.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_readme_rows_are_generated_from_the_data():
    m = _module()
    data = json.loads(m.DATA.read_text())
    readme = (ROOT / "README.md").read_text()
    block = readme.split(m.BEGIN, 1)[1].split(m.END, 1)[0]
    assert block.strip().splitlines() == m.rows(data), "README is stale: python benchmarks/coordcheck_calibration.py --write"


def test_the_data_meet_the_stated_levels():
    m = _module()
    data = json.loads(m.DATA.read_text())
    assert len(data["correct"]) >= 3 and all(len(r) >= 1 for r in data["correct"].values())
    for name, runs in data["correct"].items():       # not significantly above the nominal level (one-sided, 1 %)
        k = sum(not r["passed"] for r in runs)
        assert binom.sf(k - 1, len(runs), data["alpha"]) > 0.01, (name, k, len(runs))
    for bug, b in data["bugs"].items():
        assert all(not r["passed"] for r in b["runs"]), bug
    eq = data.get("equivalence", {"modules": {}})
    for name, runs in eq["modules"].items():
        k = sum(r["refused"] for r in runs)
        assert binom.sf(k - 1, len(runs), eq["alpha"]) > 0.01, (name, k, len(runs))
