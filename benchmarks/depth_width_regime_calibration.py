"""Calibration of the kernel-like / proportional decision of ``limits.nfd.depth_width_report`` where it rests on
the Monte Carlo estimate of D (the correlation's first-order error; docs/theory/depth_width.rst §6).

    PYTHONPATH=. nice -n 10 python benchmarks/depth_width_regime_calibration.py      # ≈ 5 CPU-min
    PYTHONPATH=. python benchmarks/depth_width_regime_calibration.py --docs           # the docs table only

Shaped leaky relu, c± = ±1, N = 256. For each case the true D_ρ is estimated once with 2·10⁵ paths (its SE beside
it); then the report is run with its defaults (10⁴ paths) under ``SEEDS`` seeds and the rate at which it says
"proportional" is recorded: on cases whose true D is below D* = 0.040 that rate is the false-alarm rate, on cases
above it the power. Cases where the exact squared-norm term decides (D_norm > D*) are not included: that part of
the decision is exact. Results: benchmarks/results/depth_width/regime_calibration.json.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "depth_width" / "regime_calibration.json"
DATA = OUT
N = 256
CASES = ((0.3, 13), (0.9, 4), (0.9, 8), (0.9, 12), (0.9, 16))        # (ρ₀, L)
SEEDS = 100
TRUTH_PATHS = 200_000


def case(rho, L, log):
    from limits.nfd.depth_width import KERNEL_LIKE_MAX_ERROR, depth_width_report

    t0 = time.process_time()
    big = depth_width_report(L, N, rho=rho, paths=TRUTH_PATHS, seed=12345, progress=False).diagnostics
    regimes, D = [], []
    for s in range(SEEDS):
        r = depth_width_report(L, N, rho=rho, seed=s, progress=False)
        regimes.append(r.regime)
        D.append(r.diagnostics["D_rho"])
    row = {"rho0": rho, "L": L, "N": N, "T": L / N, "D_rho_true": big["D_rho"], "D_rho_true_se": big["D_rho_se"],
           "D_norm": big["D_norm"], "truth": "proportional" if big["D_rho"] > KERNEL_LIKE_MAX_ERROR else "kernel-like",
           "seeds": SEEDS, "rate_proportional": regimes.count("proportional") / SEEDS,
           "D_rho_mean": float(np.mean(D)), "D_rho_sd": float(np.std(D, ddof=1)), "cpu_s": time.process_time() - t0}
    log(f"ρ₀={rho} L={L}: true D_ρ {row['D_rho_true']:.4f} ± {row['D_rho_true_se']:.4f} (D_norm {row['D_norm']:.4f}); "
        f"'proportional' in {row['rate_proportional']:.2f} of {SEEDS} runs; {row['cpu_s']:.0f} CPU-s")
    return row


DOC = ROOT / "docs/theory/depth_width.rst"
BEGIN, END = ".. depth-width-calibration-begin", ".. depth-width-calibration-end"


def docs_table(data) -> list[str]:
    lines = [f".. list-table:: the kernel-like / proportional decision on the SDE's Monte Carlo D (shaped leaky relu, "
             f"c± = ±1, N = {data['N']}, default 10⁴ paths, {data['seeds']} seeds per row; "
             "``benchmarks/depth_width_regime_calibration.py``)", "   :header-rows: 1", "",
             "   * - ρ₀", "     - L", "     - T", "     - true D_ρ (2·10⁵ paths)", "     - D_norm (exact)",
             "     - truth", "     - rate 'proportional'", "     - reads as"]
    for r in data["rows"]:
        what = "false-alarm rate" if r["truth"] == "kernel-like" else "power"
        lines += [f"   * - {r['rho0']:g}", f"     - {r['L']}", f"     - {r['T']:.4f}",
                  f"     - {r['D_rho_true']:.4f} ± {r['D_rho_true_se']:.4f}", f"     - {r['D_norm']:.4f}",
                  f"     - {r['truth']}", f"     - {r['rate_proportional']:.2f}", f"     - {what}"]
    return lines


def main():
    from limits.results import atomic_write_text

    os.environ.setdefault("LIMITS_PROGRESS", "0")
    log = lambda s: print(s, file=sys.stderr, flush=True)                   # noqa: E731
    rows = [case(rho, L, log) for rho, L in CASES]
    data = {"N": N, "seeds": SEEDS, "truth_paths": TRUTH_PATHS, "rows": rows}
    atomic_write_text(OUT, json.dumps(data, indent=1))
    write_docs(data)


def write_docs(data):
    from limits.results import replace_marked_block

    replace_marked_block(DOC, BEGIN, END, [""] + docs_table(data) + [""])


if __name__ == "__main__":
    if sys.argv[1:] == ["--docs"]:
        write_docs(json.loads(OUT.read_text()))
    else:
        main()
