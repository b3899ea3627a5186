"""The README's calibration table of ``limits.check`` is generated from benchmarks/results/calibration/check.json
(``python benchmarks/check_calibration.py --write``) and says what the data say: on every correct prediction the
false-alarm rate is not significantly above the nominal family-wise level (one-sided binomial test at 1 %: a
calibrated check fails it with probability ≤ 1 % per case), the posterior case has ≥ 200 checks, and every grossly
wrong posterior (covariance × 1.1, × 1.3, mean × 1.05) is flagged in most checks."""
from pathlib import Path

from scipy.stats import binom

from benchmark_scripts import data as load_data, load, marked_block

ROOT = Path(__file__).resolve().parents[1]


def _module():
    return load("check_calibration")


def test_readme_rows_are_generated_from_the_data():
    """The table lives in docs/workflow.rst ("How far to trust a verdict"), rendered by docs/_ext."""
    m = _module()
    assert marked_block(m, m.PAGE) == m.rows(load_data(m)), \
        "docs/workflow.rst is stale: python benchmarks/check_calibration.py --write"


def test_the_data_meet_the_stated_level():
    m = _module()
    data = load_data(m)
    assert len(data["cases"]) >= 4
    assert any(k.startswith("posterior") and len(c["runs"]) >= 200 for k, c in data["cases"].items())
    for name, case in data["cases"].items():
        runs = case["runs"]
        k = sum(r["verdict"] == "fail" for r in runs)
        assert binom.sf(k - 1, len(runs), data["alpha"]) > 0.01, (name, k, len(runs))
    assert set(data["wrong"]) == set(m.WRONG)
    for name, w in data["wrong"].items():      # the gross errors flagged in most checks; near-threshold ones measured
        runs = w["runs"]
        assert len(runs) >= 100 and (name in m.MARGINAL or sum(r["verdict"] == "fail" for r in runs) >= 0.8 * len(runs)), name


def test_previous_rule_is_recomputed_from_each_check():
    """The recorded previous verdict follows from the recorded previous tests (the rows compare like with like)."""
    m = _module()
    data = load_data(m)
    for case in data["cases"].values():
        for r in case["runs"]:
            assert (r["previous"] == "fail") <= bool(r["previous_fired"])


def test_the_data_are_this_code_s():
    """The first recorded check of every case (and of every wrong posterior) is recomputed by this code with its
    recorded seed and gives the recorded verdicts and statistics (rounded as stored): the data describe the check
    as it is, not an older one. Deterministic (fixed seeds); a few CPU-seconds."""
    import limits

    m = _module()
    data = load_data(m)
    cases = m.cases()
    first = [(name, cases[name][0](), c["runs"][0]) for name, c in data["cases"].items()]
    post = cases[m.POSTERIOR][0]()
    first += [(m.POSTERIOR, m.WRONG[name](post), w["runs"][0]) for name, w in data["wrong"].items()]
    for name, result, rec in first:
        new = m._record(limits.check(result, seed=rec["seed"], progress=False, **cases[name][1]), rec["seed"], 0.0)
        assert {k: v for k, v in new.items() if k != "cpu"} == {k: v for k, v in rec.items() if k != "cpu"}, name


def test_the_theory_docs_quote_the_data():
    """docs/theory/predict.rst §4 and finite.rst §5 quote the 48-init posterior's counts from the data file (false
    alarms now and by the previous rule, per test that fired, power against the wrong posteriors)."""
    m = _module()
    data = load_data(m)
    runs = data["cases"][m.POSTERIOR]["runs"]
    n, k, ko = len(runs), sum(r["verdict"] == "fail" for r in runs), sum(r["previous"] == "fail" for r in runs)
    ko200 = sum(r["previous"] == "fail" for r in runs[:200])
    predict = (ROOT / "docs" / "theory" / "predict.rst").read_text()
    finite = (ROOT / "docs" / "theory" / "finite.rst").read_text().split("5. The verdict of")[1]
    flat = lambda s: " ".join(s.split())       # noqa: E731  (line breaks)
    predict, finite = flat(predict), flat(finite)
    assert all(f"{ko200} of the first 200" in doc for doc in (predict, finite))
    assert f"fails {k} of {n} checks" in predict and f"fails {ko} of the same {n}" in predict
    assert f"raised {ko} false alarms in {n} checks" in finite and f"{k} false alarms in {n}" in finite
    wrong = {name: sum(r["verdict"] == "fail" for r in w["runs"]) for name, w in data["wrong"].items()}
    before = {name: sum(r["previous"] == "fail" for r in w["runs"]) for name, w in data["wrong"].items()}
    assert f"a covariance × 1.03 fails {wrong['cov × 1.03']} of 200 and a mean × 1.02 {wrong['mean × 1.02']} of 200" \
        f" (the rule before: {before['cov × 1.03']} and {before['mean × 1.02']}" in predict
    fired = {}
    for r in runs:
        for t in r["previous_fired"]:
            fired[t] = fired.get(t, 0) + 1
    assert (f"entries {fired['posterior mean: entries']}, {fired['posterior cov: entries']} and {fired['all: entries']} "
            f"of {n}") in finite
    assert f"bias {fired['posterior mean: bias']}, {fired['posterior cov: bias']} and {fired['all: bias']}" in finite
    # every case records its untested criteria; the read-out kernels' untested rates are quoted in finite.rst §5
    assert all("not_tested" in r for c in data["cases"].values() for r in c["runs"])
    untested = {name: (sum("all: rate" in r["not_tested"] for r in data["cases"][name]["runs"]),
                       len(data["cases"][name]["runs"])) for name in ("kernel: erf MLP, NNGP + NTK",
                                                                       "kernel: relu ResNet, NNGP + NTK")}
    (k1, n1), (k2, n2) = untested.values()
    assert f"in {k1} of {n1} erf-MLP and {k2} of {n2} relu-ResNet kernel checks" in finite


def test_merge_replaces_cases_of_a_merged_file_and_keeps_its_parts():
    """Re-running some cases of the committed (merged) data: the new runs replace those cases in place, the merged
    file's other parts stay recorded, the replaced ones go, and the CPU total is that of the parts kept."""
    m = _module()
    run = lambda seed: [{"seed": seed}]      # noqa: E731
    part = lambda only, cpu: {"command": f"python benchmarks/check_calibration.py --only {only} --runs 1",  # noqa: E731
                              "limits_commit": "abc", "cpu_seconds": cpu}
    merged = {"alpha": 0.01, "cases": {"A (4 inits)": {"runs": run(1)}, "B (24 inits)": {"runs": run(2)}},
              "wrong": {"w": {"runs": run(3)}}, "parts": [part("(4 inits)", 10.0), part("24 inits", 20.0)],
              "cpu_seconds": 30.0}
    new = dict(part("24 inits", 5.0), alpha=0.01, cases={"B (24 inits)": {"runs": run(9)}}, wrong={})
    out = m.merge([merged, new])
    assert list(out["cases"]) == ["A (4 inits)", "B (24 inits)"] and out["cases"]["B (24 inits)"]["runs"] == run(9)
    assert out["wrong"] == merged["wrong"] and out["cpu_seconds"] == 15.0
    assert [q["cpu_seconds"] for q in out["parts"]] == [10.0, 5.0]
    assert m.merge([dict(part("x", 1.0), alpha=0.01, cases={}, wrong={}), new])["cpu_seconds"] == 6.0   # plain parts
