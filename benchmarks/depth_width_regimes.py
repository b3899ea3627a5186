"""The kernel-like / proportional threshold D* of ``limits.nfd.depth_width_report``, from the committed validation
data (benchmarks/results/depth_width/validation.json; no new simulation; docs/theory/depth_width.rst §6).

    PYTHONPATH=. python benchmarks/depth_width_regimes.py        # ≈ 2 CPU-s; writes regimes.json and the docs tables

At every validation point (shaped leaky relu, N ∈ {64, 256}, T ≈ 0.1, 0.3, 1) the first order of the 1/N expansion
(:func:`limits.nfd.first_order`, the network's κ_N) predicts the mean and sd of the output correlation ρ. Its error
D = max(|Δmean|, |Δsd|)/sd against the SDE, and the z-scores of the 10⁴ finite networks against the first order
(SE of the finite sd by the normal approximation sd/√(2(M−1))), are written out; D* is the largest D at which the
finite networks do not resolve the first order (|z| < 3 for mean and sd), and the smallest D they resolve is kept
beside it (the threshold lies between the two).

Also the leaky relu's K1 (which limits.kernels.finite_width cannot give: φ'' is a δ at the kink): the first order's
mean correction m₁₂ (= K1/N in the smooth case, tests/nfd/test_depth_width.py), with the exact NNGP K (the noise-free
recursion with κ_N), against the SDE mean and the finite networks' mean of V₁₂ (control variates, in the data).
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


def leaky_k1(row, K0, c_plus, c_minus):
    """K, K + K1/N (first order) and the SDE and finite means of V₁₂ at one validation point, with z-scores."""
    from limits.nfd.covariance_sde import covariance_sde, drift, drift_coefficient
    from limits.nfd.linear_noise import first_order

    N, L = row["N"], row["L"]
    kap = drift_coefficient(c_plus, c_minus, N)
    K = covariance_sde(K0, L / N, kappa=kap, dt=1.0 / N, paths=2, noise=0.0, halving=False, seed=0,
                       progress=False).V[-1, 0, 0, 1]
    m = first_order(K0, L / N, lambda V: drift(V, kap)).m[0, 1]
    (sde, sde_se), (fin, fin_se) = row["V12_sde_cv"], row["V12_finite_cv"]
    return {"N": N, "L": L, "T": L / N, "K": float(K), "K1_over_N": float(m), "sde_mean": sde, "sde_se": sde_se,
            "finite_mean": fin, "finite_se": fin_se, "z_sde_vs_K_plus_K1": float((sde - K - m) / sde_se),
            "z_finite_vs_K_plus_K1": float((fin - K - m) / fin_se), "z_finite_vs_K": float((fin - K) / fin_se)}


def derive(data) -> dict:
    K0 = np.array(data["K0"])
    rows = [point(r, K0, data["c_plus"], data["c_minus"], data["nets"]) for r in data["shaped"]]
    ok = [r["D"] for r in rows if not r["resolved"]]
    bad = [r["D"] for r in rows if r["resolved"]]
    return {"source": "benchmarks/results/depth_width/validation.json", "z_resolved": Z_RESOLVED, "rows": rows,
            "D_star": round(max(ok), 3), "D_smallest_resolved": round(min(bad), 3),
            "leaky_k1": [leaky_k1(r, K0, data["c_plus"], data["c_minus"]) for r in data["shaped"]]}


DOC = ROOT / "docs/theory/depth_width.rst"
BEGIN, END = ".. depth-width-regimes-begin", ".. depth-width-regimes-end"
K1_BEGIN, K1_END = ".. depth-width-leaky-k1-begin", ".. depth-width-leaky-k1-end"


def regimes_table(out) -> list[str]:
    lines = [".. list-table:: the first order of the 1/N expansion vs the SDE and 10⁴ finite networks: D = its error "
             "in units of the sd of ρ; z of the finite networks against it (``benchmarks/depth_width_regimes.py``)",
             "   :header-rows: 1", "", "   * - N", "     - L", "     - T", "     - E ρ 1st order / SDE / finite",
             "     - sd ρ 1st order / SDE / finite", "     - D", "     - z mean", "     - z sd"]
    for r in out["rows"]:
        lines += [f"   * - {r['N']}", f"     - {r['L']}", f"     - {r['T']:.3f}",
                  f"     - {r['first_order_mean']:.4f} / {r['sde_mean']:.4f} / {r['finite_mean']:.4f}",
                  f"     - {r['first_order_sd']:.4f} / {r['sde_sd']:.4f} / {r['finite_sd']:.4f}", f"     - {r['D']:.3f}",
                  f"     - {r['z_finite_vs_first_order_mean']:+.2f}", f"     - {r['z_finite_vs_first_order_sd']:+.2f}"]
    return lines


def leaky_table(out) -> list[str]:
    lines = [".. list-table:: shaped leaky relu (c± = ±1): E V₁₂ — the NNGP K, the first order's K1/N, the SDE and "
             "finite networks (``benchmarks/depth_width_regimes.py``)", "   :header-rows: 1", "",
             "   * - N", "     - L", "     - NNGP K", "     - K1/N (first order)", "     - SDE", "     - finite",
             "     - z (SDE vs K + K1/N)", "     - z (finite vs K + K1/N)", "     - z (finite vs K)"]
    for r in out["leaky_k1"]:
        lines += [f"   * - {r['N']}", f"     - {r['L']}", f"     - {r['K']:.4f}", f"     - {r['K1_over_N']:+.1e}",
                  f"     - {r['sde_mean']:.4f} ± {r['sde_se']:.4f}", f"     - {r['finite_mean']:.4f} ± {r['finite_se']:.4f}",
                  f"     - {r['z_sde_vs_K_plus_K1']:+.2f}", f"     - {r['z_finite_vs_K_plus_K1']:+.2f}",
                  f"     - {r['z_finite_vs_K']:+.2f}"]
    return lines


def write_docs(out):
    from limits.results import replace_marked_block

    replace_marked_block(DOC, BEGIN, END, [""] + regimes_table(out) + [""])
    replace_marked_block(DOC, K1_BEGIN, K1_END, [""] + leaky_table(out) + [""])


def main():
    from limits.results import atomic_write_text

    out = derive(json.loads(DATA.read_text()))
    for r in out["rows"]:
        print(f"N={r['N']:4d} L={r['L']:4d} T={r['T']:.3f}: D={r['D']:.3f}  z(mean)={r['z_finite_vs_first_order_mean']:+.2f}"
              f"  z(sd)={r['z_finite_vs_first_order_sd']:+.2f}", file=sys.stderr)
    print(f"D* = {out['D_star']} (smallest resolved {out['D_smallest_resolved']})", file=sys.stderr)
    for r in out["leaky_k1"]:
        print(f"leaky K1: N={r['N']} L={r['L']}: K={r['K']:.4f} K1/N={r['K1_over_N']:+.4f} SDE={r['sde_mean']:.4f}"
              f"±{r['sde_se']:.4f} finite={r['finite_mean']:.4f}±{r['finite_se']:.4f} z(fin vs K+K1/N)="
              f"{r['z_finite_vs_K_plus_K1']:+.2f} z(fin vs K)={r['z_finite_vs_K']:+.2f}", file=sys.stderr)
    atomic_write_text(OUT, json.dumps(out, indent=1))
    write_docs(out)


if __name__ == "__main__":
    main()
