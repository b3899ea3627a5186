"""params figures: coordinate checks that report exponents (docs/theory/params.rst §5).

* ``params_coordcheck_width`` — one GD step at widths 2^6…2^11: hidden feature update |Δh| and
  output update |Δf| vs N for SP, NTK, MF and μP (variance convention, tanh, L = 3 weight layers),
  fitted slopes (legend) against the symbolic predictions (dashed, ``p.one_step_exponents()``).
* ``params_coordcheck_depth`` — residual MLP (mean-field width, read-in frozen) at depths 2^2…2^7:
  residual-stream feature update vs L for α = 1/2 (Depth-μP, flat) and α = 1 (L^{1−2α} = L^{-1}).
* ``params_two_layer_block`` — two-layer residual blocks, branch L^{-1/2}, η = η̄n: first-layer
  update ΔW¹·φ(h) vs L without (L^{-1/2}, collapse) and with the depth-aware rate η_1 = η̄n√L (Θ(1)).
Synthetic data: P = 8 Gaussian inputs in d = 16, ±1 labels.
"""
from __future__ import annotations

import numpy as np

from . import register
from ..stats import signed
from ._util import data_ticks, log_ticks, with_caption


def _curves(check, quantity):
    f = check.fit(quantity)
    return {"x": f.x, "mean": f.mean, "se": f.se, "slope": f.tail_slope, "ci": np.array([f.tail_ci_low, f.tail_ci_high]),
            "predicted": np.nan if f.predicted is None else f.predicted}


def _width_compute(params, rng):
    from ..finite.coordcheck import width_check
    from ..params import named

    widths = [2 ** k for k in range(params["kmin"], params["kmax"] + 1)]
    out = {}
    seed = int(rng.integers(2**31))
    for name in params["names"]:
        c = width_check(named(name), widths=widths, seeds=params["seeds"], quantities=("dh:hidden", "df"),
                        eta0=params["eta0"], seed=seed)
        for q in ("dh:hidden", "df"):
            for k, v in _curves(c, q).items():
                out[f"{name}|{q}|{k}"] = np.asarray(v, float)
    return out


def _plot_panels(data, params, groups, xlabel, titles):
    from ..style import PALETTE, paper_style, pyplot

    with paper_style():
        plt = pyplot()
        longest = max(len(n) for _, names in groups for n in names)
        ncol = 2 if longest <= 12 else 1
        fig, axes = plt.subplots(1, len(groups), figsize=((4.0 if ncol == 2 else 5.0) * len(groups), 3.3))
        axes = np.atleast_1d(axes)
        markers = "osD^vP"
        for ax, (q, names), title in zip(axes, groups, titles):
            for i, name in enumerate(names):
                key = f"{name}|{q}|"
                x, m, se = data[key + "x"], data[key + "mean"], data[key + "se"]
                col = PALETTE[i % len(PALETTE)]
                ci = data[key + "ci"]
                # small horizontal offsets and distinct open markers keep coinciding series (MF/μP) visible
                dx = 2.0 ** (0.06 * (i - (len(names) - 1) / 2))
                ax.errorbar(x * dx, m, yerr=se, fmt=markers[i % len(markers)], color=col, mfc="none",
                            ms=4 + 1.2 * (len(names) - 1 - i),
                            label=f"{name}: slope {signed(float(data[key + 'slope']))} "
                                  f"[{signed(ci[0])}, {signed(ci[1])}]")
                pred = float(data[key + "predicted"])
                if np.isfinite(pred):
                    ax.plot(x, m[-1] * (x / x[-1]) ** pred, "--", color=col, lw=1,
                            label=f"{name}: theory {signed(pred)}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            data_ticks(ax, x)
            ax.set_xlabel(xlabel)
            ax.set_title(title)
            # legend below the panel, never over the data
            ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=ncol, frameon=False)
        log_ticks(fig)
        # no tight_layout: it would squash the axes to fit the legends; savefig's tight bbox keeps them
        fig.subplots_adjust(wspace=0.25)
    return fig


def _width_plot(data, params):
    names = params["names"]
    return _plot_panels(data, params, [("dh:hidden", names), ("df", names)], "width N",
                        ["hidden feature update |Δh|_rms (one step)", "output update |Δf|_rms (one step)"])


def _width_caption(p):
    return (f"One GD step (η0 = {p['eta0']}, tanh, L = 3 weight layers, P = 8 inputs of dimension d_in = 16) at "
            f"widths 2^{p['kmin']}…2^{p['kmax']}, {p['seeds']} seeds: fitted log–log slopes (largest 4 widths, "
            "95% CI) vs the symbolic exponents of limits.params (μP/MF Θ(1), NTK N^{-1/2} features; SP output "
            "N^{1}).")


register("params_coordcheck_width", component="params", compute=with_caption(_width_compute, _width_caption),
         plot=_width_plot,
         params={"names": ["SP", "NTK", "MF", "muP"], "kmin": 6, "kmax": 11, "seeds": 8, "eta0": 0.05},
         quick={"kmax": 9, "seeds": 4},
         caption="One GD step (tanh, L = 3 weight layers, P = 8 inputs of dimension d_in = 16) over a width "
                 "sweep (sizes and seeds: params; data['caption'] states them): fitted log–log slopes (largest 4 "
                 "widths, 95% CI) vs the symbolic exponents of limits.params (μP/MF Θ(1), NTK N^{-1/2} features; "
                 "SP output N^{1}).",
         seed_ref="docs/theory/params.rst §5; seed 000 Table 2; TP4 Table 1", default=True)


def _depth_compute(params, rng):
    from ..finite.coordcheck import depth_check
    from ..params import alpha_analysis, named

    depths = [2 ** k for k in range(params["kmin"], params["kmax"] + 1)]
    out = {}
    seed = int(rng.integers(2**31))
    for alpha in params["alphas"]:
        pred = float(alpha_analysis(alpha)["init_log_growth_exponent"])
        c = depth_check(named("MF", convention="std"), depths=depths, N=params["N"], alpha=alpha,
                        seeds=params["seeds"], quantities=("dh:last",), predicted={"dh:last": pred}, seed=seed)
        for k, v in _curves(c, "dh:last").items():
            out[f"α={alpha}|dh:last|{k}"] = np.asarray(v, float)
    return out


def _depth_plot(data, params):
    return _plot_panels(data, params, [("dh:last", [f"α={a}" for a in params["alphas"]])], "depth L (blocks)",
                        ["residual-stream feature update (read-in frozen)"])


register("params_coordcheck_depth", component="params",
         compute=with_caption(_depth_compute, "Residual MLP, mean-field width N = {N}, depths 2^{kmin}…2^{kmax} "
                              "blocks, {seeds} seeds, branch L^(-α), α ∈ {alphas}, one GD step with the read-in "
                              "frozen: feature update ∝ L^(1−2α) (seed 000 Eq. 123)."),
         plot=_depth_plot,
         params={"alphas": [0.5, 1.0], "kmin": 2, "kmax": 7, "N": 128, "seeds": 8},
         quick={"kmax": 5, "N": 64, "seeds": 4},
         caption="Residual MLP, mean-field width (N in params), branch L^{-α}, depth-independent SGD rate, one "
                 "GD step with the read-in frozen: feature update ∝ L^{1−2α} (seed 000 Eq. 123) — flat "
                 "for Depth-μP (α = 1/2), L^{-1} for α = 1.",
         seed_ref="seed 000 §A.5; TP6", default=False)


def _block_compute(params, rng):
    from ..finite.coordcheck import depth_check
    from ..params import named, two_layer_block, two_layer_block_correction

    depths = [2 ** k for k in range(params["kmin"], params["kmax"] + 1)]
    x, y = two_layer_block_correction()
    out = {}
    seed = int(rng.integers(2**31))
    for corr in (False, True):
        tb = two_layer_block(eta1_n=x, eta1_L=y if corr else 0)
        c = depth_check(named("MF", convention="std"), depths=depths, N=params["N"], block_layers=2,
                        branch=lambda B: B ** -0.5, seeds=params["seeds"], quantities=("dWh:block1", "incr:block2"),
                        lr_block={1: (lambda B: B ** float(y))} if corr else None,
                        predicted={"dWh:block1": float(tb["delta_u"][1]),
                                   "incr:block2": float(tb["delta_increment"][1])}, seed=seed)
        lab = "η₁ = η̄n√L" if corr else "η₁ = η̄n"
        for q in ("dWh:block1", "incr:block2"):
            for k, v in _curves(c, q).items():
                out[f"{lab}|{q}|{k}"] = np.asarray(v, float)
    return out


def _block_plot(data, params):
    labs = ["η₁ = η̄n", "η₁ = η̄n√L"]
    return _plot_panels(data, params, [("dWh:block1", labs), ("incr:block2", labs)], "depth L (blocks)",
                        ["first-layer update |ΔW¹φ(h)|", "residual increment update |√(1/L)ΔW²φ(u)|"])


register("params_two_layer_block", component="params",
         compute=with_caption(_block_compute, "Two-layer residual blocks, mean-field width N = {N}, depths "
                              "2^{kmin}…2^{kmax} blocks, {seeds} seeds, η = η̄n, with and without the depth-aware "
                              "first-layer rate η₁ = η̄n√L."),
         plot=_block_plot,
         params={"kmin": 2, "kmax": 7, "N": 128, "seeds": 8},
         quick={"kmax": 5, "N": 64, "seeds": 4},
         caption="Two-layer residual blocks (docs/theory/nfd.rst §6), mean-field width (N in params), η = η̄n: the first internal "
                 "layer's update collapses as L^{-1/2}; the depth-aware rate η₁ = η̄n√L (derived in "
                 "limits.params.two_layer_block_correction) restores Θ(1). Per-block increment updates Θ(L^{-1}).",
         seed_ref="seed 002 §5, App. H", default=False)


def _pc_compute(params, rng):
    import sympy as sp

    from ..finite.coordcheck import pc_width_check
    from ..params import Parameterisation, named, update_exponents

    widths = [2 ** k for k in range(params["kmin"], params["kmax"] + 1)]
    seed = int(rng.integers(2**31))
    h = sp.Rational(1, 2)
    cases = [(f"μP, γ̄_L = {g}", named("muP", convention="std", algorithm="pc", gamma_bar_L=g, gauge="a0"))
             for g in (0, -h, -1)]
    cases.append(("NTK-type literal (c_L = 1), γ̄_L = -1/2",
                  Parameterisation.make(a=0, b=[0, h, h], c=[h, 1 + h, 1], algorithm="pc", gamma_bar_L=-h)))
    cases.append(("NTK-type derived (c_L = 3/2), γ̄_L = -1/2",
                  named("NTK", convention="std", algorithm="pc", gamma_bar_L=-h, gauge="a0")))
    out = {}
    for lab, p in cases:
        u = update_exponents(p)
        pred = {"dWh:out": -u["r_output"], "dh:hidden": -u["r"]}
        c = pc_width_check(p, widths=widths, seeds=params["seeds"], predicted=pred, seed=seed)
        for q in ("dh:hidden", "dWh:out"):
            for k, v in _curves(c, q).items():
                out[f"{lab}|{q}|{k}"] = np.asarray(v, float)
    return out


def _pc_plot(data, params):
    labs = sorted({k.split("|")[0] for k in data if "|" in k}, key=lambda s: (not s.startswith("μP"), s))
    return _plot_panels(data, params, [("dh:hidden", labs), ("dWh:out", labs)], "width N",
                        ["hidden feature update (one PC step)", "read-out update |ΔW_L h|"])


register("params_pc_single_shot", component="params",
         compute=with_caption(_pc_compute, "PC single shot (tanh, L = 3) at widths 2^{kmin}…2^{kmax}, {seeds} seeds."),
         plot=_pc_plot,
         params={"kmin": 6, "kmax": 10, "seeds": 8}, quick={"kmax": 9, "seeds": 4},
         caption="Predictive coding with one forward-initialised sequential inference sweep and one weight step "
                 "(seed 003 §4.1; γ_{l<L} = 1, γ_L = N^{-γ̄_L}, tanh, L = 3): the solver's μP (seed 003 Table 1) "
                 "keeps updates Θ(1) for γ̄_L ∈ {0, −1/2, −1}; the NTK-type exponents of seed 003 Eq. S.73 taken "
                 "literally (c_L = 1) blow the read-out update up as N^{1/2} at γ̄_L = −1/2, the solver's "
                 "c_L = 1 − γ̄_L does not.",
         seed_ref="seed 003 Thm 4.1, Table 1, Eqs. S.62, S.71–S.74", default=False)
