"""Kernel figures: seed 004 Fig. 2–5 (residual NNGP, response, optimal ρ*) and the signal-propagation
phase diagram (Poole et al. 2016 / Schoenholz et al. 2017). Synthetic inputs (unit-variance Gaussian
vectors rescaled to |x|² = d_in); the seed's CIFAR-10 data in Fig. 5 are replaced by a synthetic 2×2
read-in kernel with the same scale K⁰ = 0.05, as the captions state."""
from __future__ import annotations

import numpy as np

from . import register
from ._util import log_ticks, with_caption

COMP = "kernels"


def _inputs(rng, P, d):
    X = rng.standard_normal((P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(d)


# ============================================================================ seed 004 Fig. 2
def _fig2_compute(p, rng):
    from .. import finite as F
    from ..finite.residual_response import fd_response
    from ..kernels import nngp, response

    L, N, d = p["L"], p["N"], p["d"]
    X = _inputs(rng, 2, d)
    kw = dict(activation="erf", sigma_w2=p["sigma_w2"], sigma_b2=p["sigma_b2"], rho=p["rho"])
    out = {"layers": np.arange(L + 1)}
    for tag, residual in (("res", True), ("ff", False)):
        r = nngp(X, depth=L, residual=residual, ntk=False, **kw)
        s = response(X, depth=L, residual=residual, width=N, **kw)
        net = F.resnet(d, N, L, **kw) if residual else F.mlp(d, N, L, activation="erf",
                                                              sigma_w2=p["sigma_w2"], sigma_b2=p["sigma_b2"])
        ek = F.empirical_kernels(net, X, p["inits"], rng=rng, phi_kernels=True)
        C = p["rho"] ** 2 * (p["sigma_w2"] * ek.K_phi[:, :-1] + p["sigma_b2"])       # (S, L, P, P), l=1..L
        fd = fd_response(X, L, N, p["fd_inits"], entry=(0, 1), rng=rng, residual=residual, eps=1e-5, **kw)
        m, se = fd.mean_se("eta")
        out[f"C_{tag}"] = r.C[:, 0, 1]
        out[f"Cdiag_{tag}"] = r.C[:, 0, 0]
        out[f"C_mc_{tag}"] = np.concatenate([[r.C[0, 0, 1]], C[:, :, 0, 1].mean(0)])
        out[f"C_se_{tag}"] = np.concatenate([[0.0], C[:, :, 0, 1].std(0, ddof=1) / np.sqrt(C.shape[0])])
        out[f"eta_{tag}"] = s.eta[:, 0, 1]
        out[f"eta_fd_{tag}"] = m
        out[f"eta_fd_se_{tag}"] = se
    return out


def _fig2_plot(data, p):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0))
    l = data["layers"]
    for tag, col, lab in (("res", PALETTE[0], "ResNet"), ("ff", PALETTE[2], "FFNet")):
        axes[0].plot(l, data[f"C_{tag}"], "-", color=col, label=f"{lab} theory (Eq. 29)")
        axes[0].errorbar(l[1:], data[f"C_mc_{tag}"][1:], yerr=data[f"C_se_{tag}"][1:], fmt="o", mfc="none",
                         color=col, label=f"{lab} N={p['N']}, {p['inits']} inits")
        axes[1].semilogy(l[1:], data[f"eta_{tag}"][1:], "-", color=col, label=f"{lab} theory (Eq. 45)")
        axes[1].errorbar(l[1:], data[f"eta_fd_{tag}"][1:], yerr=data[f"eta_fd_se_{tag}"][1:], fmt="o",
                         mfc="none", color=col, label=f"{lab} finite differences")
    axes[0].set_xlabel("layer l")
    axes[0].set_ylabel(r"$C^{(l)}_{\alpha\beta}$")
    axes[1].set_xlabel("layer l")
    axes[1].set_ylabel(r"$\eta^{(l)}_{\alpha\beta}$")
    axes[0].legend()
    axes[1].legend()
    fig.suptitle(f"seed 004 Fig. 2: erf, σ²={p['sigma_w2']}, σ_b²={p['sigma_b2']}, d_in={p['d']}, ρ={p['rho']}",
                 fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("seed004_fig2", component=COMP, default=True,
         compute=with_caption(_fig2_compute, "Residual kernels C^l and response η^l, ResNet vs FFNet, erf, "
                              "σ_w² = {sigma_w2}, σ_b² = {sigma_b2}, d_in = {d}, width N = {N}, ρ = {rho}, depth "
                              "L = {L}; finite networks: {inits} inits (kernels), {fd_inits} inits (finite "
                              "differences)."),
         plot=_fig2_plot,
         params=dict(L=20, N=500, d=100, sigma_w2=1.2, sigma_b2=0.2, rho=1.0, inits=1000, fd_inits=200),
         quick=dict(L=8, N=200, inits=200, fd_inits=40),
         caption="Residual kernels C^l (off-diagonal entry of a 2-sample Gram) and response η^l, ResNet vs "
                 "FFNet; lines: theory (seed 004 Eq. 29, 45), points: finite networks (Monte Carlo over "
                 "inits; η by central finite differences with common random numbers). All weight variances "
                 "1.2 (read-in, hidden, read-out), bias variances 0.2, d_in=100, ρ=1, φ=erf, synthetic "
                 "inputs; width N, depth L and init counts in params (data['caption'] states them).",
         seed_ref="seed 004 Fig. 2")


# ============================================================================ seed 004 Fig. 3
def _fig3_compute(p, rng):
    from ..kernels import response

    K0 = np.array([[p["K0"]]])
    out = {"rhos": np.array(p["rhos"]), "layers": np.arange(p["L"] + 1)}
    K, chi = [], []
    for rho in p["rhos"]:
        s = response(K0=K0, d_in=p["d"], depth=p["L"], residual=True, rho=rho, width=p["N"],
                     activation="erf", sigma_w2=p["sigma_w2"], sigma_b2=p["sigma_b2"])
        K.append(s.K[:, 0, 0])
        chi.append(s.chi[:, 0, 0])
    out["K"] = np.array(K)
    out["chi"] = np.array(chi)
    return out


def _fig3_plot(data, p):
    from ..style import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0))
    cmap = plt.get_cmap("Blues")
    n = len(data["rhos"])
    for i, rho in enumerate(data["rhos"]):
        c = cmap(0.9 - 0.55 * i / max(n - 1, 1))
        axes[0].plot(data["layers"], data["K"][i], color=c, label=f"ρ = {rho:g}")
        axes[1].plot(data["layers"], data["chi"][i], color=c, label=f"ρ = {rho:g}")
    axes[0].set_ylabel(r"$K^{(l)}$")
    axes[1].set_ylabel(r"$\chi^{(l)}$")
    for ax in axes:
        ax.set_xlabel("layer l")
        ax.legend()
    fig.suptitle(f"seed 004 Fig. 3: erf ResNet, σ_w²={p['sigma_w2']}, σ_b²={p['sigma_b2']}, K⁰={p['K0']}, "
                 f"N={p['N']}, d_in={p['d']}", fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("seed004_fig3", component=COMP, compute=_fig3_compute, plot=_fig3_plot,
         params=dict(L=100, N=500, d=100, sigma_w2=1.2, sigma_b2=0.2, K0=1.2, rhos=[1.0, 0.3, 0.1]),
         quick=dict(L=50), default=True,
         caption="Kernel K^l and response χ^l (diagonal) of an erf ResNet for ρ ∈ {1, 0.3, 0.1} (seed 004 "
                 "Eq. 30, 47): ρ² sets the rate of growth. σ_w²=1.2, σ_b²=0.2, read-in variance K⁰=1.2 "
                 "(σ²_in|x|²/d_in with |x|²=d_in), N=500, d_in=100 (η⁰ = N/d_in = 5).",
         seed_ref="seed 004 Fig. 3")


# ============================================================================ seed 004 Fig. 4
def _rho_star_grid(act, K0, L, sw2, sb2, rhos):
    """χ_out on a ρ grid (for every σ_w² in ``sw2`` if an array) and the refined argmax in log ρ."""
    from ..kernels.optimal import chi_out_entries

    sw2 = np.atleast_1d(np.asarray(sw2, float))
    sb2 = np.atleast_1d(np.asarray(sb2, float))
    R, S_w, S_b = np.meshgrid(rhos, sw2, sb2, indexing="ij")
    cd, co = chi_out_entries(act, K0[0, 0], K0[0, 1], K0[1, 1], R, L, S_w, S_b, S_w)
    out = []
    for vals in (cd, co):
        i = np.argmax(vals, axis=0)
        i = np.clip(i, 1, len(rhos) - 2)
        x = np.log(rhos)
        idx = np.indices(i.shape)
        y0, y1, y2 = (vals[(i + k,) + tuple(idx)] for k in (-1, 0, 1))
        h = x[1] - x[0]
        den = y0 - 2 * y1 + y2
        shift = np.where(den < 0, 0.5 * h * (y0 - y2) / den, 0.0)
        raw = np.argmax(vals, axis=0)
        edge = (raw == 0) | (raw == len(rhos) - 1)       # maximum on the grid boundary: not a ρ*
        out.append(np.where(edge, np.nan, np.exp(x[i] + shift)))
    return cd, co, out[0], out[1]


def _fig4_compute(p, rng):
    from .. import activation
    from ..kernels.optimal import optimal_rho, rho_star_estimate

    act = activation("erf")
    K0 = np.array(p["K0"])
    rhos = np.logspace(np.log10(p["rho_min"]), np.log10(p["rho_max"]), p["n_rho"])
    out = {"rhos": rhos, "Ls": np.array(p["Ls"])}
    cds, cos = [], []
    for L in p["Ls"]:
        cd, co, _, _ = _rho_star_grid(act, K0, L, p["sigma_w2"], p["sigma_b2"], rhos)
        scale = p["N"] / p["d"]
        cds.append(cd[:, 0, 0] * scale)
        cos.append(co[:, 0, 0] * scale)
    out["chi_diag"], out["chi_off"] = np.array(cds), np.array(cos)
    Lstar = np.unique(np.round(np.logspace(np.log10(p["L_min"]), np.log10(p["L_max"]), p["n_L"])).astype(int))
    rd, ro = [], []
    for L in Lstar:
        o = optimal_rho(K0=K0, d_in=p["d"], depth=int(L), sigma_w2=p["sigma_w2"], sigma_b2=p["sigma_b2"],
                        bounds=(1e-3, 5.0), n_grid=41)
        rd.append(o.rho_star[0, 0])
        ro.append(o.rho_star[0, 1])
    out["L_star"] = Lstar
    out["rho_star_diag"], out["rho_star_off"] = np.array(rd), np.array(ro)
    out["eq61"] = np.array([rho_star_estimate(K0[0, 0], int(L), "erf", p["sigma_w2"], p["sigma_b2"]) for L in Lstar])
    out["eq62"] = np.array([rho_star_estimate(K0[0, 0], int(L), "erf", p["sigma_w2"], p["sigma_b2"], large_L=True)
                            for L in Lstar])
    return out


def _fig4_plot(data, p):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.0))
    cmap = plt.get_cmap("Blues")
    n = len(data["Ls"])
    for i, L in enumerate(data["Ls"]):
        c = cmap(0.35 + 0.6 * i / max(n - 1, 1))
        axes[0].semilogx(data["rhos"], data["chi_diag"][i], color=c, label=f"L = {L}")
        axes[1].semilogx(data["rhos"], data["chi_off"][i], color=c, label=f"L = {L}")
    axes[0].set_title(r"(a) $\chi^{\rm out}_{\alpha\alpha}$")
    axes[1].set_title(r"(b) $\chi^{\rm out}_{\alpha\beta}$")
    for ax in axes[:2]:
        ax.set_xlabel("ρ")
        ax.legend()
    x = 1 / np.sqrt(data["L_star"])
    axes[2].plot(x, data["rho_star_diag"], "o", color=PALETTE[0], mfc="none", label=r"$\rho^*_{\alpha\alpha}$")
    axes[2].plot(x, data["rho_star_off"], "s", color=PALETTE[2], mfc="none", label=r"$\rho^*_{\alpha\beta}$")
    axes[2].plot(x, data["eq61"], "-", color="0.4", label="Eq. 61")
    axes[2].plot(x, data["eq62"], "--", color="0.6", label="Eq. 62")
    axes[2].set_xlabel(r"$1/\sqrt{L}$")
    axes[2].set_ylabel(r"$\rho^*$")
    axes[2].set_title("(c) optimal scaling")
    axes[2].legend()
    fig.suptitle(f"seed 004 Fig. 4: erf, K⁰={np.array(p['K0']).tolist()}, σ_w²={p['sigma_w2']}, "
                 f"σ_b²={p['sigma_b2']}, N={p['N']}, d_in={p['d']}", fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("seed004_fig4", component=COMP,
         compute=with_caption(_fig4_compute, "χ_out vs ρ for L ∈ {Ls} ({n_rho} values of ρ in [{rho_min}, "
                              "{rho_max}]); ρ* against 1/√L at {n_L} depths in [{L_min}, {L_max}]."),
         plot=_fig4_plot,
         params=dict(K0=[[0.05, 0.03], [0.03, 0.05]], sigma_w2=1.25, sigma_b2=0.05, N=500, d=100,
                     Ls=[10, 50, 100, 200], rho_min=0.01, rho_max=3.0, n_rho=200, L_min=5, L_max=400, n_L=12),
         quick=dict(Ls=[10, 50], n_rho=80, L_max=100, n_L=5),
         caption="Output response χ_out vs residual scaling ρ for several depths L (diagonal and "
                 "off-diagonal entry; seed 004 Eq. 48) and ρ* = argmax χ_out against 1/√L with the closed-form "
                 "estimates Eq. 61 (finite L) and Eq. 62 (large L), V = 1. K⁰ = [[0.05, 0.03], [0.03, 0.05]], "
                 "σ_w² = 1.25, σ_b² = 0.05, N = 500, d_in = 100, erf; depths in params (data['caption']).",
         seed_ref="seed 004 Fig. 4")


# ============================================================================ seed 004 Fig. 5
def _fig5_compute(p, rng):
    from .. import activation

    act = activation("erf")
    K0 = np.array(p["K0"])
    rhos = np.logspace(-2.5, np.log10(3.0), p["n_rho"])
    sw = np.linspace(*p["sigma_w2_range"], p["n_sigma"])
    sb = np.linspace(*p["sigma_b2_range"], p["n_sigma"])
    out = {"Ls": np.array(p["Ls"]), "sigma_w2": sw, "sigma_b2": sb}
    for tag, grid_w, grid_b in (("w", sw, np.array([p["sigma_b2"]])), ("b", np.array([p["sigma_w2"]]), sb)):
        dd, oo = [], []
        for L in p["Ls"]:
            _, _, rd, ro = _rho_star_grid(act, K0, L, grid_w, grid_b, rhos)
            dd.append(rd.ravel())
            oo.append(ro.ravel())
        out[f"diag_{tag}"], out[f"off_{tag}"] = np.array(dd), np.array(oo)
    return out


def fig5_variation(data) -> dict:
    """Largest max/min ratio of ρ* across the σ_w² (keys ``*_w``) or σ_b² (``*_b``) range, over the
    depths, for the diagonal and off-diagonal entries (NaN entries, maxima on the search boundary,
    are ignored)."""
    out = {}
    for key in ("diag_w", "off_w", "diag_b", "off_b"):
        v = np.asarray(data[key], float)
        out[key] = float(np.nanmax(np.nanmax(v, axis=1) / np.nanmin(v, axis=1)))
    return out


def _fig5_caption(p):
    lo_w, hi_w = p["sigma_w2_range"]
    lo_b, hi_b = p["sigma_b2_range"]
    k0 = np.array(p["K0"], float)
    return (f"Optimal residual scaling ρ* (argmax of χ_out; diagonal solid, off-diagonal dashed) vs σ_w² ∈ "
            f"[{lo_w:g}, {hi_w:g}] (σ_b² = {p['sigma_b2']:g}) and vs σ_b² ∈ [{lo_b:g}, {hi_b:g}] "
            f"(σ_w² = {p['sigma_w2']:g}), L ∈ {list(p['Ls'])}, {p['n_sigma']} grid values per range, "
            f"{p['n_rho']} values of ρ; maxima on the search boundary are omitted. Synthetic read-in kernel "
            f"K⁰ = {k0.tolist()} (the seed's input scale) replaces the CIFAR-10 samples; erf. The dependence on "
            "σ_b² is strong for the diagonal ρ* (the title gives the max/min ratio over each range): σ_b² "
            f"reaches {hi_b / k0[0, 0]:.0f}× the input variance K⁰_αα here. Whether ρ* depends 'weakly' on "
            "σ_w², σ_b² (seed 004 Fig. 5) therefore depends on the σ_b² range relative to the input scale.")


def _fig5_plot(data, p):
    from ..style import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0))
    cmap = plt.get_cmap("Blues")
    n = len(data["Ls"])
    for i, L in enumerate(data["Ls"]):
        c = cmap(0.35 + 0.6 * i / max(n - 1, 1))
        axes[0].plot(data["sigma_w2"], data["diag_w"][i], "-", color=c, label=f"L={L} (αα)")
        axes[0].plot(data["sigma_w2"], data["off_w"][i], "--", color=c, label=f"L={L} (αβ)")
        axes[1].plot(data["sigma_b2"], data["diag_b"][i], "-", color=c)
        axes[1].plot(data["sigma_b2"], data["off_b"][i], "--", color=c)
    axes[0].set_xlabel(r"$\sigma_w^2$")
    axes[1].set_xlabel(r"$\sigma_b^2$")
    for ax in axes:
        ax.set_ylabel(r"$\rho^*$")
        ax.set_yscale("log")
    axes[0].legend(ncol=2, fontsize=6)
    r = fig5_variation(data)
    fig.suptitle(f"seed 004 Fig. 5 (synthetic K⁰={np.array(p['K0']).tolist()} instead of CIFAR-10): diagonal ρ* varies "
                 f"×{r['diag_w']:.1f} over σ_w² ∈ [{data['sigma_w2'][0]:g}, {data['sigma_w2'][-1]:g}], "
                 f"×{r['diag_b']:.1f} over σ_b² ∈ [{data['sigma_b2'][0]:g}, {data['sigma_b2'][-1]:g}]", fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("seed004_fig5", component=COMP, compute=with_caption(_fig5_compute, _fig5_caption), plot=_fig5_plot,
         params=dict(K0=[[0.05, 0.03], [0.03, 0.05]], sigma_w2=1.25, sigma_b2=0.05, Ls=[10, 50, 100, 200],
                     sigma_w2_range=(0.5, 2.5), sigma_b2_range=(0.0, 0.25), n_sigma=12, n_rho=240),
         quick=dict(Ls=[10, 50], n_sigma=6, n_rho=120),
         caption="Optimal residual scaling ρ* (argmax of χ_out; diagonal solid, off-diagonal dashed) vs σ_w² "
                 "∈ [0.5, 2.5] (σ_b² = 0.05) and vs σ_b² ∈ [0, 0.25] (σ_w² = 1.25) for several depths; maxima on "
                 "the search boundary are omitted. Synthetic read-in kernel with the seed's input scale K⁰ = 0.05 "
                 "replaces the CIFAR-10 samples; erf. The diagonal ρ* depends strongly on σ_b² (σ_b² reaches 5× "
                 "the input variance): the seed's 'weak dependence on σ_w², σ_b²' holds only for σ_b² small "
                 "against the input scale. data['caption'] gives the depths and grid sizes actually run.",
         seed_ref="seed 004 Fig. 5")


# ============================================================================ phase diagram
def _phase_compute(p, rng):
    """χ_1, ξ_c on an n_w × n_b grid, and the order-to-chaos line χ_1 = 1 by root finding
    (:func:`limits.kernels.critical_line`) at ``n_line`` values of σ_b² — not read off the grid."""
    from ..kernels import critical_line, phase_diagram

    sw = np.linspace(*p["sigma_w2_range"], p["n_w"])
    sb = np.linspace(*p["sigma_b2_range"], p["n_b"])
    pdg = phase_diagram(p["activation"], sw, sb)
    lo, hi = p["sigma_b2_range"]
    u = np.linspace(0.0, 1.0, p["n_line"])
    # quadratic spacing: the line leaves (σ_w², σ_b²) = (1, 0) with infinite slope dσ_w²/dσ_b²
    sb_line = lo + (hi - lo) * (u ** 2 if p.get("line_spacing") == "quadratic" else u)
    sw_line = np.array([critical_line(p["activation"], float(b)).sigma_w2 for b in sb_line])
    return {"sigma_w2": sw, "sigma_b2": sb, "chi1": pdg.chi1, "xi_c": pdg.xi_c, "qstar": pdg.qstar,
            "critical_sigma_w2": pdg.critical_sigma_w2, "line_sigma_b2": sb_line, "line_sigma_w2": sw_line}


def _phase_plot(data, p):
    """χ_1 on a diverging scale centred at 1 spanning the data's own range, log10 ξ_c over its data
    range, and the root-found χ_1 = 1 line on both panels."""
    import matplotlib.colors as mcolors

    from ..style import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.6, 3.0))
    W, B = np.meshgrid(data["sigma_w2"], data["sigma_b2"])
    chi1 = np.asarray(data["chi1"], float)
    lo, hi = float(np.nanmin(chi1)), float(np.nanmax(chi1))
    norm = mcolors.TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 1 - 1e-6), vmax=max(hi, 1 + 1e-6))
    m0 = axes[0].pcolormesh(W, B, chi1, shading="nearest", cmap="RdBu_r", norm=norm, rasterized=True)
    fig.colorbar(m0, ax=axes[0], label=r"$\chi_1$")
    xi = np.where(np.isfinite(data["xi_c"]), data["xi_c"], np.nan)
    lxi = np.log10(np.clip(xi, 1e-2, None))
    m1 = axes[1].pcolormesh(W, B, lxi, shading="nearest", cmap="viridis", vmin=float(np.nanmin(lxi)),
                            vmax=float(np.nanmax(lxi)), rasterized=True)
    fig.colorbar(m1, ax=axes[1], label=r"$\log_{10}\xi_c$")
    line_w = data.get("line_sigma_w2", data["critical_sigma_w2"])
    line_b = data.get("line_sigma_b2", data["sigma_b2"])
    for ax in axes:
        ax.plot(line_w, line_b, "k-", lw=1.2, label=r"$\chi_1 = 1$ (root finding)")
        ax.set_xlabel(r"$\sigma_w^2$")
        ax.set_ylabel(r"$\sigma_b^2$")
        ax.set_xlim(data["sigma_w2"][0], data["sigma_w2"][-1])
        ax.set_ylim(data["sigma_b2"][0], data["sigma_b2"][-1])
        ax.grid(False)
    axes[0].legend(loc="upper left", fontsize=7)
    axes[0].text(0.97, 0.05, "chaotic", transform=axes[0].transAxes, ha="right", fontsize=7)
    axes[0].text(0.03, 0.05, "ordered", transform=axes[0].transAxes, ha="left", fontsize=7, color="w")
    fig.suptitle(f"order-to-chaos phase diagram, φ = {p['activation']} (Schoenholz et al. 2017)", fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("signal_phase_diagram", component=COMP, compute=_phase_compute, plot=_phase_plot,
         params=dict(activation="tanh", sigma_w2_range=(0.5, 4.0), sigma_b2_range=(0.0, 0.3), n_w=120, n_b=80,
                     n_line=151, line_spacing="quadratic"),
         quick=dict(n_w=48, n_b=32, n_line=61),
         caption="Signal propagation in deep tanh networks: χ_1 = σ_w² E[φ'(√q* z)²] (diverging colour scale "
                 "centred at 1 over the data's range) and the correlation depth scale ξ_c over σ_w², σ_b², with "
                 "the order-to-chaos line χ_1 = 1 found by root finding at each of n_line values of σ_b² (quadratically "
                 "spaced: the line leaves σ_w² = 1 at σ_b² = 0 with infinite slope) "
                 "(critical_line; σ_b² = 0.05 → σ_w² = 1.760955).",
         seed_ref="Schoenholz et al. 2017 Fig. 1")


# ============================================================================ finite-size fluctuations (App. C)
def _fluct_compute(p, rng):
    from .. import finite as F
    from ..kernels import kernel_fluctuations

    L, N, S, d = p["L"], p["N"], p["inits"], p["d"]
    X = _inputs(rng, 2, d)
    kw = dict(activation="erf", sigma_w2=p["sigma_w2"], sigma_b2=p["sigma_b2"], rho=p["rho"])
    fl = kernel_fluctuations(X, depth=L, width=N, residual=True, **kw)
    fe = kernel_fluctuations(X, depth=L, width=N, residual=True, elementwise_jacobian=True, **kw)
    ek = F.empirical_kernels(F.resnet(d, N, L, **kw), X, S, rng=rng, phi_kernels=True)
    r2 = p["rho"] ** 2
    C = np.stack([r2 * (p["sigma_w2"] * ek.K_phi[:, l - 1] + p["sigma_b2"]) for l in range(1, L + 1)], 1)
    out = {"layers": np.arange(L + 1)}
    for tag, emp, th, th_e in (("C", C, fl.var_C[1:L + 1], fe.var_C[1:L + 1]),
                               ("G", ek.K, fl.var_gram, fe.var_gram)):
        dd = emp - emp.mean(0)
        v = (dd ** 2).sum(0) / (S - 1)
        se = np.sqrt(((dd ** 2 - v) ** 2).mean(0) / S)
        for (a, b), name in (((0, 0), "diag"), ((0, 1), "off")):
            out[f"{tag}_{name}_theory"] = N * th[:, a, b]
            out[f"{tag}_{name}_elementwise"] = N * th_e[:, a, b]
            out[f"{tag}_{name}_mc"] = N * v[:, a, b]
            out[f"{tag}_{name}_se"] = N * se[:, a, b]
    out["K_seed_diag"] = N * fl.var_K_seed[1:L + 1, 0, 0]
    out["K_full_diag"] = N * fl.var_K[1:L + 1, 0, 0]
    return out


def _fluct_plot(data, p):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0))
    l = data["layers"]
    for ax, tag, lab in ((axes[0], "C", r"$N\,\mathrm{Var}(C^{(l)})$"), (axes[1], "G", r"$N\,\mathrm{Var}(h^l\!\cdot h^l/N)$")):
        xs = l[1:] if tag == "C" else l
        for name, col in (("diag", PALETTE[0]), ("off", PALETTE[2])):
            ax.plot(xs, data[f"{tag}_{name}_theory"], "-", color=col, label=f"{name}: M⁻¹ΣM⁻ᵀ")
            ax.plot(xs, data[f"{tag}_{name}_elementwise"], ":", color=col, label=f"{name}: elementwise C6")
            ax.errorbar(xs, data[f"{tag}_{name}_mc"], yerr=data[f"{tag}_{name}_se"], fmt="o", mfc="none",
                        color=col, label=f"{name}: finite N={p['N']}")
        ax.set_xlabel("layer l")
        ax.set_ylabel(lab)
    axes[0].legend(fontsize=6)
    fig.suptitle(f"O(1/N) kernel fluctuations (seed 004 App. C), erf ResNet, σ_w²={p['sigma_w2']}, "
                 f"σ_b²={p['sigma_b2']}, ρ={p['rho']}, {p['inits']} inits", fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("seed004_fluctuations", component=COMP, compute=_fluct_compute, plot=_fluct_plot,
         params=dict(L=10, N=200, d=50, sigma_w2=1.2, sigma_b2=0.2, rho=1.0, inits=4000),
         quick=dict(L=4, inits=1000),
         caption="Variance across initialisations of the residual kernels C^l (seed 004 Eq. 17) and of the "
                 "layer Grams h^l·h^l/N, times N, for a diagonal and an off-diagonal entry: theory "
                 "⟨δCδC⟩ = M⁻¹ΣM⁻ᵀ/N with the full Price Jacobian (solid), with the seed's elementwise C6 "
                 "Jacobian (dotted), finite ResNets (points ± SE of the variance). erf, N=200, d_in=50.",
         seed_ref="seed 004 App. C (Eq. C18–C20)")
