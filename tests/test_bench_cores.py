"""The committed "Cores" benchmark (benchmarks/bench_cores.py → benchmarks/results/cores.json): complete, consistent
with Amdahl's law as stated, the one-thread numbers reproduced, and the docs section generated from it."""
import numpy as np

from benchmark_scripts import data, load, marked_block


def _mod():
    return load("bench_cores")


def test_rows_are_complete_and_consistent():
    m = _mod()
    rows = [r for r in data(m) if "speedup" in r]
    assert {(r["workload"], r["P"]) for r in rows} == {(w, P) for w in m.workloads(2) for P in (500, 1000, 2000)}
    for r in rows:
        assert r["repeat"] >= 5 and r["wall_1"] > 0 and r["wall_2"] > 0 and r["cpu_1"] > 0 and r["cpu_2"] > 0
        assert abs(r["speedup"] - r["wall_1"] / r["wall_2"]) < 1e-12
        s, s16, s64 = m.amdahl(r["speedup"])
        assert (s, s16, s64) == (r["serial_fraction"], r["predicted_16"], r["predicted_64"])
        assert r["met"] == (r["speedup"] >= m.TARGET)
        assert "load_before" in r["machine"] and "load_after" in r["machine"]
        # bit for bit, except the posterior's multi-threaded Cholesky (to rounding)
        assert r["agree"] == 0.0 or (r["workload"] == "posterior" and r["agree"] < 1e-10), r["name"]


def test_amdahl():
    m = _mod()
    assert m.amdahl(2.0) == (0.0, 16.0, 64.0)
    s, s16, _ = m.amdahl(1.6)
    assert abs(s - 0.25) < 1e-15 and abs(s16 - 1 / (0.25 + 0.75 / 16)) < 1e-12
    assert m.amdahl(0.5)[0] == 1.0 and m.amdahl(2.5)[0] == 0.0          # clipped to [0, 1]


def test_docs_section_is_the_data():
    m = _mod()
    assert marked_block(m, m.PAGE) == [ln for ln in "\n".join(m.docs_lines()).strip().splitlines()], \
        "docs/performance.rst is stale: python benchmarks/bench_cores.py --docs"


def test_a_row_recomputes():
    """A small row measured now: the n_jobs = 2 result equals the n_jobs = 1 result bit for bit."""
    row = _mod().measure("MLP kernel", 40, 1)
    assert row["agree"] == 0.0 and row["speedup"] > 0 and np.isfinite(row["serial_fraction"])
