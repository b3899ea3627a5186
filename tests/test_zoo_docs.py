"""docs/zoo.rst's coverage tables are the ones the stored zoo results give (benchmarks/results/zoo/, written by
benchmarks/zoo_study.py; no torch or transformers needed to read them), every family is measured — it passes, is
refused with the reason, or its check fails naming a tensor — and the rate bounds the table quotes are right."""
import math
from pathlib import Path

import pytest

from limits.torch.zoo import coverage
from limits.torch.zoo.families import FAMILIES

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "zoo"
DOCS = ROOT / "docs/zoo.rst"


def _block(name):
    begin = f".. generated: {name} (python benchmarks/zoo_study.py table --write)"
    end = f".. end generated: {name}"
    return DOCS.read_text().split(begin, 1)[1].split(end, 1)[0].strip()


@pytest.mark.parametrize("name", ["coverage", "layouts", "scaling", "depth", "eps"])
def test_docs_tables_are_generated_from_the_stored_results(name):
    assert _block(name) == coverage.tables(RESULTS, coverage.SURVEY_LABEL)[name].strip(), (
        "python benchmarks/zoo_study.py table --write")


def test_every_family_is_measured_and_passes_or_says_why_not():
    """Every family has a verdict — from its calibrated study, else from the survey (4 seeds) — and a refusal or a
    failing check says why; a study that passes rests on ≥ 10 independent checks with its rate bound quoted."""
    rows = {r["key"]: r for r in coverage.rows(RESULTS)}
    assert set(rows) == {f.key for f in FAMILIES}
    verdicts = ("passes", "refused: ", "refused by name: ", "check fails")
    for key, r in rows.items():
        s = r["status"].removeprefix("survey only: ")
        assert s.startswith(verdicts), (key, r["status"])
        if s.startswith("refused"):
            assert len(s.split(": ", 1)[1]) > 20, (key, s)
        if r["status"].startswith("passes"):
            k, n = r["false_alarm"].split()[0].split("/")
            assert int(n) >= 10 and "≤" in r["false_alarm"], (key, r["false_alarm"])


def _named(label):
    """The families the page names in its bullet ``label`` (their titles, up to the first full stop; a title's
    condition after " —" dropped), or None when the page has no such bullet."""
    text = " ".join(DOCS.read_text().split("Which families pass, which do not, and why", 1)[1].split("\n\n")[1:6])
    if f"**{label}:**" not in text:
        return None
    line = text.split(f"**{label}:**", 1)[1].split(".", 1)[0]
    return {t.strip().split(" — ")[0] for t in line.replace("\n", " ").split(",")}


def test_the_pass_refused_fail_summary_is_the_data_s():
    titles = {r["family"]: r["status"].removeprefix("survey only: ") for r in coverage.rows(RESULTS)}
    groups = {"Pass": "passes", "Refused, with the reason": "refused", "Check fails": "check fails"}
    for label, prefix in groups.items():
        want = {t for t, s in titles.items() if s.startswith(prefix)}
        got = _named(label)
        assert (got or set()) == want, (label, got, want)


def test_the_short_table_has_every_family_once_with_the_data_s_numbers():
    """``zoo_study.py table --short`` (the README's form): a markdown row per measured family, the refused ones in
    one row, each number the coverage row's."""
    lines = coverage.short_table(RESULTS).splitlines()
    assert 6 <= len(lines) <= 12 and lines[1].startswith("|---")
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
    seen = [t.strip() for c in cells for t in c[0].split(",")]
    rows = coverage.rows(RESULTS)
    assert sorted(seen) == sorted(r["family"] for r in rows)
    by = {r["family"]: r for r in rows}
    for c in cells:
        r = by.get(c[0])
        if r is None:                                     # the refused families' row
            assert all(by[t.strip()]["status"].startswith("refused") for t in c[0].split(","))
            continue
        status = r["status"].removeprefix("survey only: ")
        assert status.startswith(c[1].split(" with ")[0]) and r["false_alarm"].startswith(c[2]), (c, r)
        for drift, cell in zip(c[4].split(" / "), (r["sp"], r["mup"])):
            assert drift == "—" if cell == "—" else cell.startswith(drift.split()[0]), (drift, cell)


def test_the_eps_threshold_is_the_largest_scanned_eps_below_which_every_check_passes():
    runs = lambda k: [{"passed": i >= k, "failing": []} for i in range(5)]      # noqa: E731 — k of 5 flagged
    d = {"variants": {f"e{e}": {"eps": e, "eps_exponent": 0, "layer_scale": 1e-6, "runs": runs(k)}
                      for e, k in ((1e-8, 5), (1e-10, 3), (1e-12, 0), (1e-14, 1), (1e-16, 0))}}
    assert coverage.eps_threshold(d) == 1e-12          # 1/5 at 1e-14 is within α = 0.05's binomial spread
    d["variants"]["e1e-14"]["runs"] = runs(3)
    assert coverage.eps_threshold(d) == 1e-16
    d["variants"]["e1e-16"]["runs"] = runs(3)
    assert coverage.eps_threshold(d) is None


def test_rate_bounds():
    for n in (5, 20, 37):
        assert math.isclose(coverage.upper95(0, n), 1 - 0.05 ** (1 / n), rel_tol=1e-10)
    assert coverage.upper95(4, 4) == 1.0
    k, n, p = 3, 20, 0.05
    assert math.isclose(coverage.binom_tail(k, n, p), 1 - sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i)
                                                              for i in range(k)), rel_tol=1e-12)
    # the bound at k failures: P(X ≤ k | upper) = 5 %
    u = coverage.upper95(2, 20)
    assert math.isclose(1 - coverage.binom_tail(3, 20, u), 0.05, rel_tol=1e-8)
