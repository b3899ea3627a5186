"""The coord-check calibration tables of docs/torch.rst are generated from benchmarks/results/calibration/coordcheck.json
(``python benchmarks/coordcheck_calibration.py --write``), and say what the data say: the false-alarm rate on
every correct module is not significantly above the nominal level (one-sided binomial test at 1 %: a correct
calibration fails it with probability ≤ 1 % per module), every injected bug is flagged."""
from scipy.stats import binom

from benchmark_scripts import data as load_data, load, marked_block


def _module():
    return load("coordcheck_calibration")


def test_readme_rows_are_generated_from_the_data():
    m = _module()
    assert marked_block(m, m.PAGE) == m.rows(load_data(m)), \
        "docs/torch.rst is stale: python benchmarks/coordcheck_calibration.py --write"


def test_the_data_meet_the_stated_levels():
    m = _module()
    data = load_data(m)
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
