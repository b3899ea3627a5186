"""The committed validation of the DMFT of compositions (benchmarks/dmft_serial_validation.py →
benchmarks/results/dmft/dmft_serial_validation.json; docs/theory/dmft.rst §6.5): every recorded case passes limits.check
at five widths 64–1024, every wrong variant fails it, the false alarms over the repetitions are compatible with the
nominal 1 % and every wrong variant is rejected in every repetition, the γ0 → 0 limit agrees with GD on the NTK; the
docs' tables are the record's; one piece (case A's loss) is recomputed here (≈ 2 CPU-s).

What the record does not hold (docs §6.5): case C (its width-1024 finite networks did not finish on the shared
machine) and case B's repetitions; the pooled repetitions (14) are far fewer than the 40+ the benchmark plans."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "results" / "dmft" / "dmft_serial_validation.json"
INC = ROOT / "docs" / "theory" / "dmft_serial_validation.inc"


@pytest.fixture(scope="module")
def record():
    return json.loads(DATA.read_text())


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import dmft_serial_validation
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return dmft_serial_validation


def test_every_case_passes_and_the_wrong_variants_are_rejected(record):
    cases = record["cases"]
    assert set(cases) >= {"A", "B", "D"}          # C: not finished in the recorded session (module docstring)
    for name, c in cases.items():
        assert c["widths"] == [64, 128, 256, 512, 1024], name
        assert c["main"]["verdict"] == "pass", (name, c["main"]["reasons"])
        assert c["main"]["rate_ci"][0] <= -0.5 <= c["main"]["rate_ci"][1], name
        # the smallest relative bias the check detects: < 10 %, but 14 % in case B, whose DMFT (two conv stages:
        # responses cost ∝ n_t³ b_o b²) is solved with 32 × 150 paths and whose own Monte Carlo error dominates
        assert c["main"]["power"] < (0.15 if name == "B" else 0.1), (name, c["main"]["power"])
        assert set(c["wrong"]) >= {"gamma0 x 1.1", "no spatial index"}
        if any(layer["layer"] == "LayerNorm" for layer in c["composition"]["serial"]):
            assert "LayerNorm without projection" in c["wrong"], name
        for k, w in c["wrong"].items():
            assert w["verdict"] == "fail", (name, k)
        assert {r["quantity"] for r in c["rows"]} >= {"f", "loss", "ΔΦ̄0"}, name


def test_calibration_false_alarms_and_power(record):
    """Pooled over the cases the false alarms are not significantly above the check's nominal α = 1 % (one-sided
    binomial p > 0.01), and every wrong variant is rejected in every repetition of every case (A 8, D 6)."""
    cases = record["cases"].values()
    runs = sum(c["calibration"]["repeats"] for c in cases)
    alarms = sum(c["calibration"]["false_alarms"] for c in cases)
    assert runs >= 14
    assert binom.sf(alarms - 1, runs, 0.01) > 0.01, (alarms, runs)
    for c in cases:
        cal = c["calibration"]
        assert cal["repeats"] == len(cal["runs"])
        assert cal["false_alarms"] == sum(r["correct"]["verdict"] == "fail" for r in cal["runs"])
        for k, rejected in cal["rejected"].items():
            assert rejected == sum(r["wrong"][k]["verdict"] == "fail" for r in cal["runs"])
            assert rejected == cal["repeats"], (k, rejected, cal["repeats"])


def test_lazy_limit_agrees_with_the_ntk_prediction(record):
    for name, c in record["cases"].items():
        assert c["lazy"]["max_z_f"] < 5 and c["lazy"]["max_z_ntk0"] < 5, name
        assert c["lazy"]["rel_se_f"] < 0.05, name


def test_docs_tables_are_the_record(record, bench):
    regenerate = "python benchmarks/dmft_serial_validation.py --table --write"
    assert INC.read_text() == bench.table(record), regenerate
    assert "dmft_serial_validation.inc" in (ROOT / "docs" / "theory" / "dmft.rst").read_text()


def test_case_A_loss_recomputed(record, bench):
    c = bench.cases()["A"]
    rows = [r for r in record["cases"]["A"]["rows"] if r["quantity"] == "loss"]
    assert rows
    from limits.dmft.serial import solve_serial

    d = solve_serial(c["X"], c["y"], comp=c["comp"], gamma0=c["gamma0"], dt=c["dt"], steps=c["steps"], M=400,
                     replicas=8, seed=7, X_test=c["X_test"])
    for r in rows:
        k = int(round(r["t"] / c["dt"]))
        z = (d.loss[k] - r["theory"]) / np.hypot(d.loss_se[k], r["theory_se"])
        assert abs(z) < 5, (r["t"], d.loss[k], r["theory"])
