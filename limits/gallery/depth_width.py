"""``depth_width_correlation``: the output correlation of shaped MLPs at depth-to-width ratio T = L/N — the neural
covariance SDE against finite networks and against the first order of the 1/N expansion (docs/theory/depth_width.rst).

Drawn from the committed validation data (``benchmarks/results/depth_width/validation.json`` and ``k1.json``, made by
``benchmarks/depth_width_validation.py`` and ``depth_width_k1.py``; their SHA-256 digests are stored with the figure);
only the first-order curves (:func:`limits.nfd.first_order`, a few seconds) are computed here. Top: density of ρ at
T ≈ 0.1, 0.3, 1 — finite networks (N = 64, 256), the SDE, the first-order Gaussian. Bottom: mean and sd of ρ across
T (first order as curves), and the mean Gram's correction E V₁₂ − K of the smooth shaped activation: the project's
K1/N, the SDE and finite networks.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from . import register

DATA_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "depth_width"
SOURCES = ("validation.json", "k1.json")


def source_digests() -> dict:
    """SHA-256 of each committed source file ("absent" when missing): part of the figure's parameters, so changed
    data change the cache key and are recomputed, never drawn from stale data."""
    return {n: hashlib.sha256((DATA_DIR / n).read_bytes()).hexdigest() if (DATA_DIR / n).is_file() else "absent"
            for n in SOURCES}


def _read_sources(expected):
    """The committed validation data, verified against the digests in the parameters (ValueError when the
    repository's data are absent or differ)."""
    out, digests = {}, {}
    for name in SOURCES:
        p = DATA_DIR / name
        if not p.is_file():
            raise ValueError(f"figure depth_width_correlation draws the committed data {p}, which is not there "
                             "(an installed package has no benchmarks/): run it from the repository")
        raw = p.read_bytes()
        out[name], digests[name] = json.loads(raw), hashlib.sha256(raw).hexdigest()
        if digests[name] != expected.get(name):
            raise ValueError(f"figure depth_width_correlation: {p} changed while it was being drawn (digest "
                             f"{digests[name][:12]} ≠ {str(expected.get(name))[:12]}); run it again")
    return out, digests


def _first_order_curves(v, Ts):
    from ..nfd.covariance_sde import drift, drift_coefficient
    from ..nfd.linear_noise import first_order

    K0 = np.array(v["K0"])
    out = {}
    for N in sorted({r["N"] for r in v["shaped"]}):
        kap = drift_coefficient(v["c_plus"], v["c_minus"], N)
        mean_sd = np.array([first_order(K0, T, lambda V: drift(V, kap)).correlation() for T in Ts])
        out[f"first_order_N{N}"] = mean_sd
    return out


def compute(params, rng):
    src, digests = _read_sources(params["sources"])
    v, k1 = src["validation.json"], src["k1.json"]
    Ts = np.geomspace(params["T_min"], 1.0, params["n_T"])
    rows = v["shaped"]
    data = {"digests": digests, "Ts": Ts, "rho0": float(v["K0"][0][1]), "c_plus": v["c_plus"], "c_minus": v["c_minus"],
            "nets": v["nets"], "sde_paths": v["sde_paths"], "edges": np.array(rows[0]["hist_rho"]["edges"]),
            "N": np.array([r["N"] for r in rows]), "L": np.array([r["L"] for r in rows]),
            "T": np.array([r["T"] for r in rows])}
    for key in ("finite", "sde"):
        data[f"hist_{key}"] = np.array([r["hist_rho"][key] for r in rows])
        data[f"{key}_mean"] = np.array([r["rho"][f"{key}_mean"] for r in rows])
        data[f"{key}_sd"] = np.sqrt([r["rho"][f"{key}_var"] for r in rows])
    data.update(_first_order_curves(v, Ts))
    from ..nfd.covariance_sde import drift, drift_coefficient
    from ..nfd.linear_noise import first_order

    K0 = np.array(v["K0"])
    data["first_order_at_rows"] = np.array([first_order(K0, r["T"], lambda V, N=r["N"]: drift(
        V, drift_coefficient(v["c_plus"], v["c_minus"], N))).correlation() for r in rows])
    k = [r for r in k1["rows"] if r["entry"] == "01"]
    data.update(k1_N=k1["N"], k1_a=k1["a"], k1_b=k1["b"], k1_T=np.array([r["T"] for r in k]),
                k1_K1_over_N=np.array([r["K1_over_N"] for r in k]),
                k1_sde=np.array([[r["sde_mean"] - r["skeleton"], r["sde_se"]] for r in k]),
                k1_finite=np.array([[r["finite_mean"] - r["K"], r["finite_se"]] for r in k]))
    return data


def _density_panels(axes, data):
    from scipy.stats import norm

    e = np.asarray(data["edges"])
    mid = 0.5 * (e[1:] + e[:-1])
    N, T = np.asarray(data["N"]), np.asarray(data["T"])
    fo = np.asarray(data["first_order_at_rows"])
    for ax, t in zip(axes, sorted({round(float(x), 1) for x in T})):
        idx = [i for i in range(len(T)) if round(float(T[i]), 1) == t]
        for k, i in enumerate(idx):
            ax.step(mid, data["hist_finite"][i], where="mid", color=f"C{k}", lw=1,
                    label=f"finite, N={int(N[i])}, L={int(data['L'][i])}")
        i = idx[-1]
        ax.plot(mid, data["hist_sde"][i], "k-", lw=1.3, label="covariance SDE")
        x = np.linspace(-1, 1, 400)
        ax.plot(x, norm.pdf(x, fo[i, 0], fo[i, 1]), "C3--", lw=1.1, label="1/N expansion (1st order)")
        ax.set_title(f"T = L/N ≈ {t:g}", fontsize=9)
        ax.set_xlabel("output correlation ρ")
    axes[0].set_ylabel("density")
    axes[0].legend(fontsize=6, loc="upper left")


def _moment_panels(ax_mean, ax_sd, data):
    Ts, N = np.asarray(data["Ts"]), np.asarray(data["N"])
    se = {"mean": lambda i: data["finite_sd"][i] / np.sqrt(data["nets"]),
          "sd": lambda i: data["finite_sd"][i] / np.sqrt(2 * (data["nets"] - 1))}
    for j, (ax, what) in enumerate(((ax_mean, "mean"), (ax_sd, "sd"))):
        for k, n in enumerate(sorted(set(int(x) for x in N))):
            ax.plot(Ts, np.asarray(data[f"first_order_N{n}"])[:, j], color=f"C{k}", ls="--", lw=1,
                    label=f"1/N expansion, N={n}")
            i = np.flatnonzero(N == n)
            ax.errorbar(data["T"][i] * (1 + 0.04 * k), data[f"finite_{what}"][i], yerr=[2 * se[what](m) for m in i],
                        fmt="o", ms=3.5, color=f"C{k}", capsize=2, label=f"finite, N={n} (±2 SE)")
            ax.plot(data["T"][i], data[f"sde_{what}"][i], "ks", ms=4, mfc="none", label="SDE" if k == 0 else None)
        ax.set_xscale("log")
        ax.set_xlabel("T = L/N")
        ax.set_title(f"{what} of ρ", fontsize=9)
    ax_mean.legend(fontsize=6)


def _k1_panel(ax, data):
    T = np.asarray(data["k1_T"])
    ax.axhline(0, color="0.6", lw=0.6)
    ax.plot(T, data["k1_K1_over_N"], "C0o-", ms=4, label="K1/N (limits.kernels.finite_width)")
    s, f = np.asarray(data["k1_sde"]), np.asarray(data["k1_finite"])
    ax.errorbar(T, s[:, 0], yerr=2 * s[:, 1], fmt="ks", mfc="none", ms=4, capsize=2, label="SDE (±2 SE)")
    ax.errorbar(T * 1.04, f[:, 0], yerr=2 * f[:, 1], fmt="C2^", ms=4, capsize=2,
                label=f"finite, N={int(data['k1_N'])} (±2 SE)")
    ax.set_xscale("log")
    ax.set_xlabel("T = L/N")
    ax.set_title(f"E V₁₂ − K, φ = x + {data['k1_a']:g}x²/√N {data['k1_b']:+g}x³/N", fontsize=8)
    ax.legend(fontsize=6)


def plot(data, params):
    from ..style import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(10.5, 6.4))
    _density_panels(axes[0], data)
    _moment_panels(axes[1, 0], axes[1, 1], data)
    _k1_panel(axes[1, 2], data)
    fig.suptitle(f"shaped leaky relu c± = {data['c_plus']:g}/{data['c_minus']:g}, ρ₀ = {data['rho0']:g}: "
                 f"{data['nets']} finite nets vs {data['sde_paths']} SDE paths vs the 1/N expansion", fontsize=9)
    fig.tight_layout()
    return fig


register("depth_width_correlation", component="nfd", compute=compute, plot=plot,
         params={"T_min": 0.01, "n_T": 25, "sources": source_digests()}, quick={"T_min": 0.01, "n_T": 25},
         caption="Output correlation ρ of shaped leaky-relu MLPs (c± = ±1, input correlation 0.3) at depth-to-width "
                 "ratio T = L/N, drawn from the committed validation data: densities at T ≈ 0.1, 0.3, 1 of 10⁴ finite "
                 "networks (N = 64, 256), of the neural covariance SDE and of the first order of the 1/N expansion "
                 "(a Gaussian); below, the mean and sd of ρ across T (the expansion's sd departs visibly by T ≈ 0.3) "
                 "and, for a smooth shaped activation, E V₁₂ − K: the project's K1/N against the SDE and finite nets.",
         seed_ref="Li, Nica & Roy (2022), the neural covariance SDE; docs/theory/depth_width.rst")
