"""The mean Gram of shaped MLPs across L/N: the NNGP K, the project's K + K1/N (limits.kernels.finite_width), the
neural covariance SDE's mean and finite networks (docs/theory/depth_width.rst §3).

    PYTHONPATH=. nice -n 10 python benchmarks/depth_width_k1.py          # ≈ 2 CPU-min; writes the JSON and figure
    PYTHONPATH=. python benchmarks/depth_width_k1.py --figure            # redraw the figure from the JSON

then ``python benchmarks/depth_width_validation.py --docs`` puts its table into the docs.

Smooth shaped activation φ(x) = x + a x²/√N + b x³/N (a = 0.5, b = −0.5), weight variance 1, P = 2 inputs with
K₀ = [[1, .3], [.3, 1]], Gaussian read-in (as limits.mlp). SDE: dt = 1/N, 2·10⁴ paths; its mean by the driftless
control variate; finite networks: 10⁴ nets sampled exactly in law (rows of h^{l+1} iid N(0, Φ̂^l)), mean by the linear
network on the same normals (mean K₀ exactly) as control variate.
Results: benchmarks/results/depth_width/k1.json, figure docs/_static/depth_width_k1.png.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "depth_width" / "k1.json"
FIG = ROOT / "docs" / "_static" / "depth_width_k1.png"
K0 = np.array([[1.0, 0.3], [0.3, 1.0]])
A, B = 0.5, -0.5
N = 256
TS = (0.1, 0.3, 1.0)
NETS, PATHS = 10_000, 20_000


def poly(N):
    import limits

    u, w = A / np.sqrt(N), B / N
    return limits.activation(lambda x: x + u * x**2 + w * x**3, dphi=lambda x: 1 + 2 * u * x + 3 * w * x**2,
                             d2phi=lambda x: 2 * u + 6 * w * x, d3phi=lambda x: 6 * w + 0 * x, name="shaped_poly")


def finite_means(rng, Ls, act):
    """E[V^L] of the finite nets (control variate: the linear net on the same normals), with SEs."""
    C = np.linalg.cholesky(K0)
    Z = rng.standard_normal((NETS, N, 2))
    h = Z @ C.T
    g = h.copy()
    out = {}
    for l in range(1, max(Ls) + 1):
        Z = rng.standard_normal((NETS, N, 2))
        f = act.phi(h)
        Ch = np.linalg.cholesky(np.swapaxes(f, 1, 2) @ f / N)
        Cg = np.linalg.cholesky(np.swapaxes(g, 1, 2) @ g / N)
        h, g = Z @ np.swapaxes(Ch, 1, 2), Z @ np.swapaxes(Cg, 1, 2)
        if l in Ls:
            d = np.swapaxes(h, 1, 2) @ h / N - np.swapaxes(g, 1, 2) @ g / N
            out[l] = (K0 + d.mean(0), d.std(0, ddof=1) / np.sqrt(NETS))
    return out


def main():
    import limits
    from limits.kernels.finite_width import finite_width
    from limits.nfd.covariance_sde import covariance_sde

    os.environ.setdefault("LIMITS_PROGRESS", "0")
    rng = np.random.default_rng(20261208)
    act = poly(N)
    Ls = [int(round(T * N)) for T in TS]
    t0 = time.process_time()
    fw = finite_width(limits.mlp(2, depth=max(Ls), activation=act, sigma_w2=1.0), np.linalg.cholesky(K0) * np.sqrt(2),
                      ntk=False)
    t_fw = time.process_time() - t0
    kw = dict(smooth=(A, B), dt=1 / N, times=[L / N for L in Ls], halving=False)
    t0 = time.process_time()
    sde = covariance_sde(K0, max(Ls) / N, paths=PATHS, rng=rng, **kw)
    t_sde = time.process_time() - t0
    skel = covariance_sde(K0, max(Ls) / N, paths=2, noise=0.0, rng=rng, **kw)
    t0 = time.process_time()
    fin = finite_means(rng, set(Ls), act)
    t_fin = time.process_time() - t0
    rows = []
    for i, L in enumerate(Ls):
        for (a, b) in ((0, 1), (0, 0)):
            r = {"L": L, "T": L / N, "entry": f"{a}{b}", "K": float(fw.K_layers[L][a, b]),
                 "K1_over_N": float(fw.K1_layers[L][a, b] / N), "skeleton": float(skel.V[i, 0, a, b]),
                 "sde_mean": float(sde.mean[i, a, b]), "sde_se": float(sde.mean_se[i, a, b]),
                 "finite_mean": float(fin[L][0][a, b]), "finite_se": float(fin[L][1][a, b])}
            r["z_sde_vs_K_plus_K1"] = (r["sde_mean"] - r["skeleton"] - r["K1_over_N"]) / r["sde_se"]
            r["z_finite_vs_K_plus_K1"] = (r["finite_mean"] - r["K"] - r["K1_over_N"]) / r["finite_se"]
            r["z_finite_vs_K"] = (r["finite_mean"] - r["K"]) / r["finite_se"]
            rows.append(r)
            print(f"L={L} V{a}{b}: K={r['K']:.5f} K1/N={r['K1_over_N']:+.2e} SDE−skel={r['sde_mean'] - r['skeleton']:+.2e}"
                  f"±{r['sde_se']:.1e} finite−K={r['finite_mean'] - r['K']:+.2e}±{r['finite_se']:.1e}", file=sys.stderr)
    data = {"N": N, "a": A, "b": B, "K0": K0.tolist(), "nets": NETS, "paths": PATHS, "rows": rows,
            "cpu_s": {"finite_width": t_fw, "sde": t_sde, "finite_nets": t_fin}}
    from limits.results import atomic_write_text

    atomic_write_text(OUT, json.dumps(data, indent=1))
    figure(data)


def figure(data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, entry, name in zip(axes, ("01", "00"), ("V₁₂ (off-diagonal)", "V₁₁ (squared norm)")):
        rs = [r for r in data["rows"] if r["entry"] == entry]
        T = np.array([r["T"] for r in rs])
        K = np.array([r["K"] for r in rs])
        ax.plot(T, np.zeros_like(T), "k:", label="NNGP K (reference)")
        ax.plot(T, [r["K1_over_N"] for r in rs], "C0o-", label="K1/N (limits.kernels.finite_width)")
        ax.errorbar(T, [r["sde_mean"] - r["skeleton"] for r in rs], yerr=[2 * r["sde_se"] for r in rs], fmt="C1s",
                    capsize=3, label="SDE mean − skeleton (±2 SE)")
        ax.errorbar(T * 1.03, [r["finite_mean"] for r in rs] - K, yerr=[2 * r["finite_se"] for r in rs], fmt="C2^",
                    capsize=3, label=f"finite nets, N={data['N']} (±2 SE)")
        ax.set_xscale("log")
        ax.set_xlabel("T = L/N")
        ax.set_title(f"E[{name}] − NNGP")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"shaped x + {data['a']}x²/√N + ({data['b']})x³/N: the project's K1/N against the SDE's fluctuation part "
                 "and finite networks", fontsize=9)
    fig.tight_layout()
    FIG.parent.mkdir(exist_ok=True)
    fig.savefig(FIG, dpi=110)


if __name__ == "__main__":
    if sys.argv[1:] == ["--figure"]:          # redraw from the committed JSON
        figure(json.loads(OUT.read_text()))
    else:
        main()
