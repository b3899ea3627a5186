"""The kernel-like / proportional threshold D* of ``limits.nfd.depth_width_report``, from the committed validation
data (benchmarks/results/depth_width/validation.json; no new simulation; docs/theory/depth_width.rst §6).

    PYTHONPATH=. python benchmarks/depth_width_regimes.py        # ≈ 2 CPU-s; writes regimes.json

At every validation point (shaped leaky relu, N ∈ {64, 256}, T ≈ 0.1, 0.3, 1) the first order of the 1/N expansion
(:func:`limits.nfd.first_order`, the network's κ_N) predicts the mean and sd of the output correlation ρ. Its error
D = max(|Δmean|, |Δsd|)/sd against the SDE, and the z-scores of the 10⁴ finite networks against the first order
(SE of the finite sd by the normal approximation sd/√(2(M−1))), are written out; D* is the largest D at which the
finite networks do not resolve the first order (|z| < 3 for mean and sd), and the smallest D they resolve is kept
beside it (the threshold lies between the two).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "depth_width" / "validation.json"
OUT = ROOT / "benchmarks" / "results" / "depth_width" / "regimes.json"
Z_RESOLVED = 3.0


def point(row, K0, c_plus, c_minus, nets):
    from limits.nfd.covariance_sde import drift, drift_coefficient
    from limits.nfd.linear_noise import first_order

    kap = drift_coefficient(c_plus, c_minus, row["N"])
    fo_m, fo_s = first_order(K0, row["T"], lambda V: drift(V, kap)).correlation()
    R = row["rho"]
    s_sde, s_fin = np.sqrt(R["sde_var"]), np.sqrt(R["finite_var"])
    D = max(abs(fo_m - R["sde_mean"]), abs(fo_s - s_sde)) / s_sde
    z_mean = (R["finite_mean"] - fo_m) / (s_fin / np.sqrt(nets))
    z_sd = (s_fin - fo_s) / (s_fin / np.sqrt(2 * (nets - 1)))
    return {"N": row["N"], "L": row["L"], "T": row["T"], "first_order_mean": fo_m, "first_order_sd": fo_s,
            "sde_mean": R["sde_mean"], "sde_sd": float(s_sde), "finite_mean": R["finite_mean"],
            "finite_sd": float(s_fin), "D": float(D), "z_finite_vs_first_order_mean": float(z_mean),
            "z_finite_vs_first_order_sd": float(z_sd),
            "resolved": bool(max(abs(z_mean), abs(z_sd)) >= Z_RESOLVED)}


def derive(data) -> dict:
    K0 = np.array(data["K0"])
    rows = [point(r, K0, data["c_plus"], data["c_minus"], data["nets"]) for r in data["shaped"]]
    ok = [r["D"] for r in rows if not r["resolved"]]
    bad = [r["D"] for r in rows if r["resolved"]]
    return {"source": "benchmarks/results/depth_width/validation.json", "z_resolved": Z_RESOLVED, "rows": rows,
            "D_star": round(max(ok), 3), "D_smallest_resolved": round(min(bad), 3)}


def main():
    from limits.results import atomic_write_text

    out = derive(json.loads(DATA.read_text()))
    for r in out["rows"]:
        print(f"N={r['N']:4d} L={r['L']:4d} T={r['T']:.3f}: D={r['D']:.3f}  z(mean)={r['z_finite_vs_first_order_mean']:+.2f}"
              f"  z(sd)={r['z_finite_vs_first_order_sd']:+.2f}", file=sys.stderr)
    print(f"D* = {out['D_star']} (smallest resolved {out['D_smallest_resolved']})", file=sys.stderr)
    atomic_write_text(OUT, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
