"""The neural covariance SDE (limits.nfd.covariance_sde) against finite shaped MLPs, and the unshaped relu
log-normal norm against finite relu MLPs (docs/theory/depth_width.rst).

    PYTHONPATH=. nice -n 10 python benchmarks/depth_width_validation.py            # full (≈ 4 CPU-min)
    PYTHONPATH=. python benchmarks/depth_width_validation.py --docs                # rewrite the docs tables only
    PYTHONPATH=. python benchmarks/depth_width_validation.py --figure              # redraw docs/_static/depth_width_rho.png

Finite networks (width N, depth L = T·N, P = 2 inputs, K₀ = [[1, .3], [.3, 1]], read-in with Gram exactly K₀):
given layer l the rows of h^{l+1} = √(c/N) W φ(h^l) are iid N(0, c Φ̂^l) — sampled exactly in law from that
Gaussian (N×P normals per layer); a subset is cross-checked against explicit N×N weight matrices. The mean of
the Gram uses the linear network on the same normals as a control variate (its mean is K₀ exactly).
Results: benchmarks/results/depth_width/validation.json (tests/nfd/test_covariance_sde_data.py reads it).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "depth_width" / "validation.json"
DATA = OUT
K1_DATA = ROOT / "benchmarks" / "results" / "depth_width" / "k1.json"
DOC = ROOT / "docs/theory/depth_width.rst"
K0 = np.array([[1.0, 0.3], [0.3, 1.0]])
C_PLUS, C_MINUS = 1.0, -1.0
WIDTHS = (64, 256)
TS = (0.1, 0.3, 1.0)
NETS = 10_000
SDE_PATHS = 20_000
DT = 1.0 / 512
QS = (0.05, 0.25, 0.5, 0.75, 0.95)
EDGES = np.linspace(-1.0, 1.0, 51)
FIG = ROOT / "docs" / "_static" / "depth_width_rho.png"


def exact_read_in(rng, M, N, K0):
    """h⁰ (M, N, P) with Gram exactly K₀: √N × orthonormal columns × chol(K₀)ᵀ."""
    Q, _ = np.linalg.qr(rng.standard_normal((M, N, K0.shape[0])))
    return np.sqrt(N) * Q @ np.linalg.cholesky(K0).T


def finite_grams(rng, N, layers, phi, c, M, P_K0=K0, explicit=False):
    """Grams V^l (M, P, P) of the shaped net and of the linear net on the same normals at the requested
    layers. ``explicit``: multiply by N×N weight matrices (slow; cross-check)."""
    h = exact_read_in(rng, M, N, P_K0)
    g = h.copy()
    out, lin = {}, {}
    for l in range(1, max(layers) + 1):
        if explicit:
            W = rng.standard_normal((M, N, N)) / np.sqrt(N)
            h = np.sqrt(c) * W @ phi(h)
            g = W @ g
        else:
            Z = rng.standard_normal((M, N, P_K0.shape[0]))
            f = phi(h)
            Ch = np.linalg.cholesky(c * np.swapaxes(f, 1, 2) @ f / N)
            Cg = np.linalg.cholesky(np.swapaxes(g, 1, 2) @ g / N)
            h = Z @ np.swapaxes(Ch, 1, 2)
            g = Z @ np.swapaxes(Cg, 1, 2)
        if l in layers:
            out[l] = np.swapaxes(h, 1, 2) @ h / N
            lin[l] = np.swapaxes(g, 1, 2) @ g / N
    return out, lin


def compare(x_fin, x_sde, x_wrong):
    """Mean, variance, quantiles, KS against the SDE and against wrong SDEs; the smallest mean shift detected
    (two-sided 5 %, power 80 %: 2.80 × the SE of the difference)."""
    se_d = np.sqrt(x_fin.var(ddof=1) / x_fin.size + x_sde.var(ddof=1) / x_sde.size)
    row = {"finite_mean": float(x_fin.mean()), "sde_mean": float(x_sde.mean()),
           "z_mean": float((x_fin.mean() - x_sde.mean()) / se_d), "mde_mean": float(2.80 * se_d),
           "finite_var": float(x_fin.var(ddof=1)), "sde_var": float(x_sde.var(ddof=1)),
           "finite_q": np.quantile(x_fin, QS).tolist(), "sde_q": np.quantile(x_sde, QS).tolist()}
    ks = stats.ks_2samp(x_fin, x_sde)
    row["ks"], row["ks_p"] = float(ks.statistic), float(ks.pvalue)
    for name, xw in x_wrong.items():
        row[f"ks_p_{name}"] = float(stats.ks_2samp(x_fin, xw).pvalue)
    return row


def null_rate(x, rng, splits=200, alpha=0.01):
    """False-alarm rate of the KS check on correct inputs: random halves of one SDE sample."""
    hits = 0
    for _ in range(splits):
        perm = rng.permutation(x.size)
        hits += stats.ks_2samp(x[perm[: x.size // 2]], x[perm[x.size // 2:]]).pvalue < alpha
    return hits / splits


def shaped_case(N, rng, log):
    from limits.nfd.covariance_sde import covariance_sde, drift_coefficient, shaped_slopes

    sp, sm, c = shaped_slopes(C_PLUS, C_MINUS, N)
    phi = lambda x: sp * np.maximum(x, 0) + sm * np.minimum(x, 0)          # noqa: E731
    kap = drift_coefficient(C_PLUS, C_MINUS, N)
    Ls = [int(round(T * N)) for T in TS]
    times = [L / N for L in Ls]
    t0 = time.process_time()
    sde = covariance_sde(K0, 1.0, kappa=kap, dt=DT, paths=SDE_PATHS, times=times, rng=rng)
    wrong = {"half_diffusion": covariance_sde(K0, 1.0, kappa=kap, dt=DT, paths=SDE_PATHS, times=times, rng=rng,
                                              noise=0.5, halving=False),
             "no_drift": covariance_sde(K0, 1.0, kappa=0.0, dt=DT, paths=SDE_PATHS, times=times, rng=rng,
                                        halving=False)}
    t_sde = time.process_time() - t0
    t0 = time.process_time()
    fin, lin = finite_grams(rng, N, set(Ls), phi, c, NETS)
    t_fin = time.process_time() - t0
    rows = []
    for i, (L, T) in enumerate(zip(Ls, times)):
        V = fin[L]
        rho_f, rho_s = V[:, 0, 1] / np.sqrt(V[:, 0, 0] * V[:, 1, 1]), sde.correlation()[i]
        ln_f, ln_s = np.log(V[:, 0, 0] / K0[0, 0]), sde.log_norm()[i]
        d = V[:, 0, 1] - lin[L][:, 0, 1]
        row = {"N": N, "L": L, "T": T,
               "rho": compare(rho_f, rho_s, {k: w.correlation()[i] for k, w in wrong.items()}),
               "log_norm": compare(ln_f, ln_s, {k: w.log_norm()[i] for k, w in wrong.items()}),
               "V12_finite_cv": [float(K0[0, 1] + d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))],
               "V12_sde_cv": [float(sde.mean[i, 0, 1]), float(sde.mean_se[i, 0, 1])],
               "halving": sde.diagnostics["halving"][f"{sde.times[i]:g}"],
               "hist_rho": {"edges": EDGES.tolist(), "finite": np.histogram(rho_f, EDGES, density=True)[0].tolist(),
                            "sde": np.histogram(rho_s, EDGES, density=True)[0].tolist(),
                            "half_diffusion": np.histogram(wrong["half_diffusion"].correlation()[i], EDGES,
                                                           density=True)[0].tolist()},
               "ks_null_rate_rho": null_rate(rho_s, rng)}
        rows.append(row)
        log(f"shaped N={N} L={L} T={T:.3f}: rho mean {row['rho']['finite_mean']:.4f} vs {row['rho']['sde_mean']:.4f} "
            f"(z {row['rho']['z_mean']:+.2f}), KS p {row['rho']['ks_p']:.3f}, half-diffusion KS p "
            f"{row['rho']['ks_p_half_diffusion']:.2e}")
    return rows, {"sde_cpu_s": t_sde, "finite_cpu_s": t_fin, "psd_repairs": sde.diagnostics["psd_repairs"]}


def explicit_crosscheck(rng, N=64, T=1.0, M=2000):
    """KS between the exact-in-law sampler and explicit-weight networks (ρ and log-norm at depth T·N)."""
    from limits.nfd.covariance_sde import shaped_slopes

    sp, sm, c = shaped_slopes(C_PLUS, C_MINUS, N)
    phi = lambda x: sp * np.maximum(x, 0) + sm * np.minimum(x, 0)          # noqa: E731
    L = int(round(T * N))
    t0 = time.process_time()
    a, _ = finite_grams(rng, N, {L}, phi, c, M, explicit=True)
    t_exp = time.process_time() - t0
    b, _ = finite_grams(rng, N, {L}, phi, c, 4 * M)
    r = lambda V: V[L][:, 0, 1] / np.sqrt(V[L][:, 0, 0] * V[L][:, 1, 1])     # noqa: E731
    return {"N": N, "L": L, "nets_explicit": M, "nets_sampler": 4 * M, "cpu_s_explicit": t_exp,
            "ks_p_rho": float(stats.ks_2samp(r(a), r(b)).pvalue),
            "ks_p_log_norm": float(stats.ks_2samp(np.log(a[L][:, 0, 0]), np.log(b[L][:, 0, 0])).pvalue)}


def relu_case(N, rng):
    """Unshaped He relu, one input: log(V^L/V⁰) of finite nets vs the limit N(−5T/2, 5T) and the exact moments."""
    from limits.nfd.covariance_sde import relu_log_norm

    Ls = [int(round(T * N)) for T in TS]
    h = np.sqrt(N) * exact_read_in(rng, NETS, N, np.ones((1, 1)))[..., 0] / np.sqrt(N)
    rows = []
    q0 = (h * h).mean(axis=1)
    for l in range(1, max(Ls) + 1):
        q = 2.0 * (np.maximum(h, 0) ** 2).mean(axis=1)
        h = np.sqrt(q)[:, None] * rng.standard_normal((NETS, N))
        if l in Ls:
            x = np.log((h * h).mean(axis=1) / q0)
            T = l / N
            m_lim, v_lim = relu_log_norm(T)
            m_ex, v_ex = relu_log_norm(T, N)
            se = x.std(ddof=1) / np.sqrt(x.size)
            rows.append({"N": N, "L": l, "T": T, "finite_mean": float(x.mean()), "finite_mean_se": float(se),
                         "finite_var": float(x.var(ddof=1)), "limit_mean": m_lim, "limit_var": v_lim,
                         "exact_mean": m_ex, "exact_var": v_ex,
                         "z_exact_mean": float((x.mean() - m_ex) / se),
                         "ks_p_limit": float(stats.kstest(x, "norm", args=(m_lim, np.sqrt(v_lim))).pvalue),
                         "ks_p_exact_moments": float(stats.kstest(x, "norm", args=(m_ex, np.sqrt(v_ex))).pvalue),
                         "ks_p_half_variance": float(stats.kstest(x, "norm", args=(m_lim, np.sqrt(v_lim / 2)))
                                                     .pvalue)})
    return rows


def docs_table(data) -> list[str]:
    lines = [".. list-table:: shaped leaky relu (c± = ±1), P = 2, K₀ correlation 0.3; 10⁴ finite nets vs 2·10⁴ "
             "SDE paths (``benchmarks/depth_width_validation.py``)", "   :header-rows: 1", "",
             "   * - N", "     - L", "     - E ρ finite", "     - E ρ SDE", "     - z", "     - Var ρ finite / SDE",
             "     - KS p", "     - KS p, half diffusion", "     - KS p, no drift", "     - E log V₁₁ finite / SDE"]
    for r in data["shaped"]:
        a, b = r["rho"], r["log_norm"]
        lines += [f"   * - {r['N']}", f"     - {r['L']}", f"     - {a['finite_mean']:.4f}", f"     - {a['sde_mean']:.4f}",
                  f"     - {a['z_mean']:+.2f}", f"     - {a['finite_var']:.4f} / {a['sde_var']:.4f}",
                  f"     - {a['ks_p']:.3f}", f"     - {a['ks_p_half_diffusion']:.1e}", f"     - {a['ks_p_no_drift']:.1e}",
                  f"     - {b['finite_mean']:.3f} / {b['sde_mean']:.3f}"]
    return lines


def k1_table(k1) -> list[str]:
    lines = [f".. list-table:: smooth shaped φ = x + {k1['a']}x²/√N + ({k1['b']})x³/N, N = {k1['N']}: the fluctuation "
             "part of the mean (``benchmarks/depth_width_k1.py``; z in units of the SE of the SDE / finite mean)",
             "   :header-rows: 1", "",
             "   * - L", "     - T", "     - entry", "     - NNGP K", "     - K1/N (finite_width)",
             "     - SDE mean − skeleton", "     - z (SDE vs K1/N)", "     - finite − K", "     - z (finite vs K + K1/N)",
             "     - z (finite vs K)"]
    for r in k1["rows"]:
        lines += [f"   * - {r['L']}", f"     - {r['T']:.3f}", f"     - V{r['entry']}", f"     - {r['K']:.5f}",
                  f"     - {r['K1_over_N']:+.2e}", f"     - {r['sde_mean'] - r['skeleton']:+.2e} ± {r['sde_se']:.1e}",
                  f"     - {r['z_sde_vs_K_plus_K1']:+.2f}", f"     - {r['finite_mean'] - r['K']:+.2e} ± {r['finite_se']:.1e}",
                  f"     - {r['z_finite_vs_K_plus_K1']:+.2f}", f"     - {r['z_finite_vs_K']:+.2f}"]
    return lines


def relu_table(data) -> list[str]:
    lines = [".. list-table:: unshaped He relu, one input: log(V^L/V⁰) of 10⁴ finite nets vs the exact finite-N moments "
             "and the limit N(−5T/2, 5T)", "   :header-rows: 1", "",
             "   * - N", "     - L", "     - mean finite", "     - mean exact / limit", "     - z (exact mean)",
             "     - var finite", "     - var exact / limit", "     - KS p (limit)", "     - KS p (limit, half variance)"]
    for r in data["relu"]:
        lines += [f"   * - {r['N']}", f"     - {r['L']}", f"     - {r['finite_mean']:.4f}",
                  f"     - {r['exact_mean']:.4f} / {r['limit_mean']:.4f}", f"     - {r['z_exact_mean']:+.2f}",
                  f"     - {r['finite_var']:.4f}", f"     - {r['exact_var']:.4f} / {r['limit_var']:.4f}",
                  f"     - {r['ks_p_limit']:.3f}", f"     - {r['ks_p_half_variance']:.1e}"]
    return lines


BEGIN, END = ".. depth-width-table-begin", ".. depth-width-table-end"
K1_BEGIN, K1_END = ".. depth-width-k1-begin", ".. depth-width-k1-end"
RELU_BEGIN, RELU_END = ".. depth-width-relu-begin", ".. depth-width-relu-end"


def write_docs(data):
    from limits.results import replace_marked_block

    replace_marked_block(DOC, BEGIN, END, [""] + docs_table(data) + [""])
    replace_marked_block(DOC, RELU_BEGIN, RELU_END, [""] + relu_table(data) + [""])
    if K1_DATA.is_file():
        replace_marked_block(DOC, K1_BEGIN, K1_END, [""] + k1_table(json.loads(K1_DATA.read_text())) + [""])


def figure(data):
    """Density of the output correlation at each T: finite nets (both widths), the SDE, the half-diffusion SDE."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Ts = sorted({round(r["T"], 1) for r in data["shaped"]})
    fig, axes = plt.subplots(1, len(Ts), figsize=(3.3 * len(Ts), 3.2), sharey=False)
    for ax, T in zip(np.atleast_1d(axes), Ts):
        rows = [r for r in data["shaped"] if round(r["T"], 1) == T and "hist_rho" in r]
        for k, r in enumerate(rows):
            h = r["hist_rho"]
            mid = 0.5 * (np.array(h["edges"][1:]) + np.array(h["edges"][:-1]))
            ax.step(mid, h["finite"], where="mid", color=f"C{k}", label=f"finite, N={r['N']} (L={r['L']})")
            if k == len(rows) - 1:
                ax.plot(mid, h["sde"], "k-", lw=1.2, label="SDE")
                ax.plot(mid, h["half_diffusion"], "k:", lw=1, label="SDE, diffusion halved")
        ax.set_title(f"T = L/N ≈ {T:g}")
        ax.set_xlabel("output correlation ρ")
    np.atleast_1d(axes)[0].set_ylabel("density")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.suptitle(f"shaped leaky relu c± = ±1, ρ₀ = 0.3: {data['nets']} finite nets vs {data['sde_paths']} SDE paths",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(FIG, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", action="store_true", help="only rewrite the docs table from the committed JSON")
    ap.add_argument("--figure", action="store_true", help="only redraw the figure from the committed JSON")
    ap.add_argument("--seed", type=int, default=20261207)
    a = ap.parse_args(argv)
    if a.docs or a.figure:
        data = json.loads(OUT.read_text())
        write_docs(data) if a.docs else figure(data)
        return 0
    os.environ.setdefault("LIMITS_PROGRESS", "0")
    rng = np.random.default_rng(a.seed)
    log = lambda s: print(s, file=sys.stderr, flush=True)                   # noqa: E731
    data = {"seed": a.seed, "K0": K0.tolist(), "c_plus": C_PLUS, "c_minus": C_MINUS, "nets": NETS,
            "sde_paths": SDE_PATHS, "dt": DT, "quantiles": list(QS), "shaped": [], "cost": {}, "relu": []}
    for N in WIDTHS:
        rows, cost = shaped_case(N, rng, log)
        data["shaped"] += rows
        data["cost"][str(N)] = cost
    data["explicit_crosscheck"] = explicit_crosscheck(rng)
    log(f"explicit weights vs sampler: {data['explicit_crosscheck']}")
    for N in WIDTHS:
        data["relu"] += relu_case(N, rng)
    from limits.results import atomic_write_text

    atomic_write_text(OUT, json.dumps(data, indent=1))
    write_docs(data)
    figure(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
