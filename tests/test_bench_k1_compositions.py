"""The committed record of benchmarks/bench_k1_compositions.py (K1 of compositions, old route against new): the new
route agrees with the old code where both ran, is faster there, integrates fewer four-point functions than the
general route on 8×8 digits, the count recomputed for one image, and docs/theory/finite_width.rst carries its table."""
import json

import numpy as np

from benchmark_scripts import ROOT, load

bench = load("bench_k1_compositions")


def _data():
    return json.loads(bench.OUT.read_text())


def test_record_agrees_and_is_faster_where_both_ran():
    data = _data()
    assert "CPU" in data["machine"]["note"] and data["old_ref"]
    both = [r for r in data["cases"].values() if "old" in r]
    assert both
    for rec in both:
        new, old = np.asarray(rec["new"]["K1"]), np.asarray(rec["old"]["K1"])
        assert np.max(np.abs(new - old)) <= 1e-12 * np.max(np.abs(old))
        assert rec["new"]["cpu"] < rec["old"]["cpu"]
    for rec in data["cases"].values():
        assert rec["new"]["peak_mb"] > 0 and np.all(np.isfinite(rec["new"]["K1"]))


def test_counts_and_one_recomputed():
    from limits.kernels.finite_width_local import four_point_count

    counts = _data()["counts_8x8"]
    assert all(v["local"] < v["general"] for v in counts.values())
    s, X, _ = bench.build("cnn8_P1")
    assert four_point_count(s, X) == (counts["1"]["local"], counts["1"]["v_entries"])


def test_docs_table_is_the_record():
    doc = (ROOT / "docs" / "theory" / "finite_width.rst").read_text()
    block = doc.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    want = bench.table(_data()).splitlines()
    assert [x.strip() for x in block.splitlines() if x.strip()] == [x.strip() for x in want if x.strip()], \
        "python benchmarks/bench_k1_compositions.py --write"
