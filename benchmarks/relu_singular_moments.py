"""relu / step moments in 3–4 Gaussian variables on singular and nearly singular covariances from real first layers,
against Monte Carlo (and, where the covariance has rank ≤ 2, an mpmath reference). A validation report, not a timing::

    nice python benchmarks/relu_singular_moments.py --draws 10000000       # ≈ 3 CPU-min; writes the JSON below
    python benchmarks/relu_singular_moments.py --write                     # the table of docs/theory/finite_width.rst §9

writes ``benchmarks/results/calibration/relu_singular_moments.json``. Per case and function list: the value of
``limits.kernels.fourpoint.expect4`` (the production path; :mod:`limits.kernels.relu_lowrank` for these
covariances), the previous rule (the 20⁴ tensor Gauss–Hermite rule ``expect4`` fell back to when the conditional rule
refused a singular covariance), Monte Carlo over ``--draws`` draws x = A z (A the covariance's factor: exact for a
singular covariance) with its standard error, both z-scores, and the smallest relative error the Monte Carlo
resolves at 5 SE (5·SE/|mean|).

Cases (K⁰ = σ²_w,in XXᵀ/d_in + σ²_b,in of a relu MLP's read-in, or the patch covariance of a first convolution):
rank 3 from d_in = 2 with a bias (any 4 inputs), rank 2 from d_in = 1 with a bias (any 3 or 4 inputs), a 1-D
convolution on 1 channel (filter 3: 4 positions of one image, rank 3), and nearly singular ones — the d_in = 2 read-in
with a third feature of scale 1e-3 and 1e-5 (λ₄/λ₁ ≈ 1e-7 and 1e-11: inside the band where the conditional rule's
inner covariance is nearly singular).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "calibration" / "relu_singular_moments.json"
LISTS = {"relu⁴": [1, 1, 1, 1], "relu² step²": [1, 1, 0, 0], "step⁴": [0, 0, 0, 0]}


def cases():
    """{name: 4×4 covariance}."""
    rng = np.random.default_rng(7)
    out = {}
    X2 = rng.standard_normal((4, 2))
    out["MLP read-in, d_in = 2, σ²_b = 0.1 (rank 3)"] = X2 @ X2.T / 2 + 0.1
    X1 = rng.standard_normal((4, 1))
    out["MLP read-in, d_in = 1, σ²_b = 0.1 (rank 2)"] = X1 @ X1.T + 0.1
    img = rng.standard_normal(7)
    P = np.stack([img[p:p + 3] for p in (0, 1, 3, 4)])            # 4 positions, filter 3, 1 channel
    out["1-D conv, 1 channel, filter 3: 4 positions (rank 3)"] = 2.0 * P @ P.T / 3
    for eps in (1e-3, 1e-5):
        X3 = np.hstack([X2, eps * rng.standard_normal((4, 1))])
        out[f"d_in = 2 read-in + a third feature of scale {eps:g} (nearly singular)"] = X3 @ X3.T / 2 + 0.1
    return out


def previous_rule(S, powers):
    """The tensor Gauss–Hermite rule (order 20 per dimension) on the eigen-square-root: what expect4 used when the
    conditional rule refused the covariance."""
    from limits.kernels.fourpoint import ORDERS, rule

    Z, W = rule(4, ORDERS[4])
    lam, V = np.linalg.eigh(S)
    x = (V * np.sqrt(np.clip(lam, 0.0, None))) @ Z.T
    f = np.ones(x.shape[1])
    for v, p in enumerate(powers):
        f = f * np.where(x[v] > 0, x[v] ** p, 0.0)
    return float(f @ W)


def monte_carlo(S, powers, draws, seed):
    lam, V = np.linalg.eigh(S)
    A = V * np.sqrt(np.clip(lam, 0.0, None))
    rng = np.random.default_rng(seed)
    tot = tot2 = 0.0
    n = 0
    while n < draws:
        k = min(1_000_000, draws - n)
        x = rng.standard_normal((k, 4)) @ A.T
        f = np.ones(k)
        for v, p in enumerate(powers):
            f *= np.where(x[:, v] > 0, x[:, v] ** p, 0.0)
        tot += f.sum()
        tot2 += (f * f).sum()
        n += k
    mean = tot / n
    return mean, float(np.sqrt(max(tot2 / n - mean * mean, 0.0) / n))


def mp_rank2(S, powers, dps=30):
    """mpmath reference for a rank-2 covariance: x = A (ρ cos ϑ, ρ sin ϑ), the radial integral in closed form
    (∫ρ^{k+1} e^{−ρ²/2} = 2^{k/2} Γ(k/2 + 1)), the angular one by mpmath.quad split where a coordinate vanishes."""
    import mpmath as mp

    lam, V = np.linalg.eigh(S)
    A = (V * np.sqrt(np.clip(lam, 0.0, None)))[:, -2:]
    with mp.workdps(dps):
        Am = [[mp.mpf(float(a)) for a in row] for row in A]
        k = sum(powers)
        radial = mp.mpf(2) ** (mp.mpf(k) / 2) * mp.gamma(mp.mpf(k) / 2 + 1)
        cuts = sorted({float(mp.atan2(-r[0], r[1]) % mp.pi) for r in Am if r[0] or r[1]})
        ends = sorted(set([0.0, 2 * np.pi] + cuts + [c + np.pi for c in cuts]))

        def g(th):
            c, s = mp.cos(th), mp.sin(th)
            out = mp.mpf(1)
            for r, p in zip(Am, powers):
                u = r[0] * c + r[1] * s
                if u <= 0:
                    return mp.mpf(0)
                out *= u ** p
            return out

        tot = sum(mp.quad(g, [a, b]) for a, b in zip(ends[:-1], ends[1:]))
        return float(tot * radial / (2 * mp.pi))


def run(draws, seed=0):
    from limits.activations import BUILTIN
    from limits.kernels.fourpoint import expect4

    relu = BUILTIN["relu"]
    fn = {1: relu.phi, 0: relu.dphi}
    out = {"draws": draws, "command": "python benchmarks/relu_singular_moments.py " + " ".join(sys.argv[1:]), "rows": []}
    t0 = time.process_time()
    for ci, (name, S) in enumerate(cases().items()):
        lam = np.linalg.eigvalsh(S)[::-1]
        for li, (lname, powers) in enumerate(LISTS.items()):
            new = float(expect4(relu, [fn[p] for p in powers], S[None])[0])
            prev = previous_rule(S, powers)
            mc, se = monte_carlo(S, powers, draws, seed + 100 * ci + li)
            ref = mp_rank2(S, powers) if lam[2] <= 1e-15 * lam[0] else None
            out["rows"].append({"case": name, "moment": lname, "lambda_ratio": float(max(lam[3], 0.0) / lam[0]),
                                "new": new, "previous": prev, "mc": mc, "se": se, "z_new": (new - mc) / se,
                                "z_previous": (prev - mc) / se, "detectable": 5 * se / abs(mc) if mc else None,
                                "mpmath": ref, "rel_vs_mpmath": None if ref is None else abs(new - ref) / abs(ref)})
    out["cpu_seconds"] = round(time.process_time() - t0, 1)
    return out


def table(data) -> list:
    lines = [f"| covariance (λ₄/λ₁) | moment | now | previous rule (error) | Monte Carlo ({data['draws']:.0e} draws) ± SE | "
             "z now / previous | resolves (5 SE) |", "|---|---|---:|---:|---:|---|---:|"]
    for r in data["rows"]:
        err = (r["previous"] - r["mc"]) / r["mc"] if r["mc"] else float("nan")
        ref = f"; mpmath {r['rel_vs_mpmath']:.1e}" if r["mpmath"] is not None else ""
        lines.append(f"| {r['case']} ({r['lambda_ratio']:.1e}) | {r['moment']} | {r['new']:.6g}{ref} | "
                     f"{r['previous']:.6g} ({100 * err:+.1f} %) | {r['mc']:.6g} ± {r['se']:.1e} | "
                     f"{r['z_new']:+.2f} / {r['z_previous']:+.1f} | {100 * r['detectable']:.2f} % |")
    return lines


BEGIN = ".. relu-singular-moments:begin (python benchmarks/relu_singular_moments.py --write)"
END = ".. relu-singular-moments:end"
DOC = ROOT / "docs/theory/finite_width.rst"


def rst_table(data) -> list:
    """The table as an RST literal block (docs/theory/finite_width.rst §9, between its markers)."""
    return ["", "::", ""] + ["    " + line for line in table(data)] + [""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=10_000_000)
    from _tables import add_table_options, show_or_write

    add_table_options(ap, show_help="print the docs table from the committed data",
                      write_help="write it into docs/theory/finite_width.rst §9")
    a = ap.parse_args(argv)
    if show_or_write(a, OUT, DOC, (BEGIN, END), table, rst_table):
        return 0
    from limits.results import atomic_write_text

    data = run(a.draws)
    atomic_write_text(OUT, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print("\n".join(table(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
