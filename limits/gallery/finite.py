"""Finite-network figures: how finite networks approach the infinite-width theory.

``finite_width_rates``: (left) the entrywise RMS deviation of ONE network's hidden-layer kernel from
the Gaussian theory, averaged over inits, against N for erf/relu/tanh — slope −1/2; (right) the
bias of the MEAN two-layer kernel, K²_theory − E[K²], against N — slope −1 (the one-layer mean is
unbiased). Synthetic inputs; theory from ``limits.gaussian``.

``finite_bp_vs_dtp``: training loss of BP and DTP (ridge-fixed-point linear feedback, seed 003 §C)
on the seed 000 toy task with teacher labels, mean ± SE over inits, at several widths.
"""
from __future__ import annotations

import numpy as np

from . import register
from ..stats import signed
from ._util import log_ticks


def _rates_compute(params, rng):
    from .. import finite as F
    from .. import gaussian
    from ..stats import loglog_fit

    sw2, sb2 = params["sigma_w2"], params["sigma_b2"]
    X = rng.standard_normal((params["P"], params["d"]))
    X *= np.sqrt(params["d"]) / np.linalg.norm(X, axis=1, keepdims=True)
    K0 = sw2 * X @ X.T / params["d"] + sb2
    Ns = np.array(params["widths"])
    out = {"widths": Ns, "activations": list(params["activations"])}
    for act in params["activations"]:
        K1 = sw2 * gaussian.gram(act, K0) + sb2
        rms, se = [], []
        for N in Ns:
            net = F.mlp(params["d"], int(N), 1, activation=act, sigma_w2=sw2, sigma_b2=sb2)
            ek = F.empirical_kernels(net, X, params["inits"], rng=rng)
            msq = np.mean((ek.K[:, 1] - K1) ** 2, axis=(1, 2))
            rms.append(np.sqrt(msq.mean()))
            se.append(msq.std(ddof=1) / np.sqrt(len(msq)) / (2 * rms[-1]))
        fit = loglog_fit(Ns, rms, se)
        out[f"rms_{act}"] = np.array(rms)
        out[f"rms_se_{act}"] = np.array(se)
        out[f"slope_{act}"] = np.array([fit.slope, fit.ci_low, fit.ci_high])
    # two-layer bias, one input, tanh
    act2, sw2b = params["bias_activation"], params["bias_sigma_w2"]
    x = np.array([[1.0, 0.3]])
    k0 = sw2b * x @ x.T / 2
    k2 = sw2b * gaussian.gram(act2, sw2b * gaussian.gram(act2, k0))
    Nb = np.array(params["bias_widths"])
    bias, bse = [], []
    for N in Nb:
        net = F.mlp(2, int(N), 2, activation=act2, sigma_w2=sw2b)
        ek = F.empirical_kernels(net, x, params["bias_inits"] * int(N) // 4, rng=rng, keep_samples=False)
        bias.append(float(k2[0, 0] - ek.mean[2][0, 0]))
        bse.append(float(ek.se[2][0, 0]))
    out["bias_widths"], out["bias"], out["bias_se"] = Nb, np.array(bias), np.array(bse)
    if np.all(np.array(bias) > 0):
        fb = loglog_fit(Nb, bias, bse)
        out["bias_slope"] = np.array([fb.slope, fb.ci_low, fb.ci_high])
    else:
        out["bias_slope"] = np.array([np.nan, np.nan, np.nan])
    return out


def _rates_plot(data, params):
    from ..style import pyplot

    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.5, 3.4))
    Ns = np.asarray(data["widths"], float)
    for act in data["activations"]:
        r, s, sl = data[f"rms_{act}"], data[f"rms_se_{act}"], data[f"slope_{act}"]
        a1.errorbar(Ns, r, yerr=s, fmt="o", mfc="none",
                    label=f"{act}: slope {signed(sl[0], 3)} [{signed(sl[1], 3)}, {signed(sl[2], 3)}]")
    ref = data[f"rms_{data['activations'][0]}"][0] * (Ns / Ns[0]) ** -0.5
    a1.plot(Ns, ref, "k--", lw=1, label=r"$\propto N^{-1/2}$")
    a1.set(xscale="log", yscale="log", xlabel="width N", ylabel=r"rms$(K^1_{\rm one\ net} - K^1_\infty)$",
           title="single-network kernel fluctuation")
    a1.legend(fontsize=7)
    Nb = np.asarray(data["bias_widths"], float)
    b, bs, sl = data["bias"], data["bias_se"], data["bias_slope"]
    ok = b > 0
    a2.errorbar(Nb[ok], b[ok], yerr=bs[ok], fmt="s", mfc="none", color="C1",
                label=f"{params['bias_activation']}: slope {signed(sl[0], 3)} [{signed(sl[1], 3)}, {signed(sl[2], 3)}]")
    if np.any(ok):
        i = int(np.argmax(ok))
        a2.plot(Nb, b[i] * Nb[i] / Nb, "k--", lw=1, label=r"$\propto 1/N$")
    a2.set(xscale="log", yscale="log", xlabel="width N", ylabel=r"$K^2_\infty - \mathbb{E}[K^2]$",
           title="two-layer mean-kernel bias")
    a2.legend(fontsize=7)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("finite_width_rates", component="finite", compute=_rates_compute, plot=_rates_plot,
         params={"activations": ["erf", "relu", "tanh"], "widths": [16, 32, 64, 128, 256, 512, 1024],
                 "inits": 400, "P": 3, "d": 4, "sigma_w2": 1.5, "sigma_b2": 0.1,
                 "bias_activation": "tanh", "bias_sigma_w2": 2.0, "bias_widths": [4, 8, 16, 32, 64],
                 "bias_inits": 10000},
         quick={"widths": [16, 32, 64, 128, 256], "inits": 150, "bias_widths": [4, 8, 16, 32],
                "bias_inits": 3000},
         caption="Finite networks approach the Gaussian (NNGP) theory: one hidden layer, σ_w²=1.5, σ_b²=0.1, "
                 "P=3 inputs on the sphere of radius √d (d=4); left: rms entrywise deviation of a single "
                 "network's kernel from E_{N(0,K⁰)}[φφ], mean over inits, slope −1/2; right: bias of the "
                 "mean two-layer kernel (tanh, σ_w²=2, x=(1,0.3)), slope −1. Error bars: ±1 SE; "
                 "slopes with 95% CIs.",
         seed_ref="docs/theory/finite.rst §4 (finite-size rates)", default=True)


def _bp_dtp_compute(params, rng):
    from .. import finite as F
    from ..finite import data as D

    X, Y = D.toy_task(params["P"], params["D"], rng=rng, labels="teacher")
    X = X / np.sqrt(params["D"])
    out = {"widths": np.array(params["widths"])}
    for N in params["widths"]:
        net = F.mlp(params["D"], int(N), params["blocks"], activation=params["activation"], lr=params["lr"])
        w = F.init_weights(net, params["inits"], rng=rng)
        for alg in ("bp", "dtp"):
            r = F.train(net, X, Y, params["steps"], weights=w, algorithm=alg, tp_beta=params["beta"],
                        tp_mu=params["mu"], record_every=params["record_every"], record_features=False,
                        keep_weights=False)
            out[f"steps"] = r.steps
            out[f"loss_{alg}_{N}"] = r.loss
    return out


def _bp_dtp_plot(data, params):
    from ..style import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for i, N in enumerate(np.asarray(data["widths"])):
        for alg, ls in (("bp", "-"), ("dtp", "--")):
            L = data[f"loss_{alg}_{N}"]
            m = L.mean(1)
            se = L.std(1, ddof=1) / np.sqrt(L.shape[1])
            ax.plot(data["steps"], m, ls, color=f"C{i}", label=f"{alg.upper()} N={N}")
            ax.fill_between(data["steps"], m - se, m + se, color=f"C{i}", alpha=0.2)
    ax.set(yscale="log", xlabel="GD step", ylabel="train loss (1/2P)Σ(f−y)²", title="BP vs DTP (linear feedback)")
    ax.legend(fontsize=7, ncol=2)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("finite_bp_vs_dtp", component="finite", compute=_bp_dtp_compute, plot=_bp_dtp_plot,
         params={"P": 20, "D": 40, "widths": [64, 256, 1024], "blocks": 2, "activation": "tanh", "lr": 0.2,
                 "beta": 0.5, "mu": 1e-3, "steps": 300, "record_every": 10, "inits": 4},
         quick={"widths": [64, 256], "steps": 100, "inits": 3},
         caption="Full-batch GD on the seed 000 toy task (P=20, D=40, x~N(0,I)/√D, teacher labels ±1), "
                 "tanh MLP with 2 hidden N×N layers, standard parameterisation W~N(0,1/fan_in), lr 0.2; "
                 "BP (solid) vs DTP with linear feedback at the ridge fixed point (dashed, β=0.5, μ=1e-3, "
                 "seed 003 App. C.1); mean ± SE over inits.",
         seed_ref="seed 003 §3.1.2, App. C.1", default=False)


def _cos_compute(params, rng):
    from .. import finite as F
    from ..finite.compare import cosines, update_directions

    out = {"widths": np.array(params["widths"]), "d_outs": np.array(params["d_outs"])}
    X = rng.standard_normal((params["P"], params["D"]))
    for d_out in params["d_outs"]:
        Y = rng.standard_normal((params["P"], d_out))
        m, se = [], []
        for N in params["widths"]:
            net = F.mlp(params["D"], int(N), params["blocks"], d_out=int(d_out), activation=params["activation"])
            w = F.init_weights(net, params["inits"], rng=rng)
            d = update_directions(net, w, X, Y, algorithms=("bp", "gnt"), gnt_damping=params["damping"])
            c = cosines(d["bp"], d["gnt"])["all"]
            m.append(c.mean())
            se.append(c.std(ddof=1) / np.sqrt(len(c)))
        out[f"cos_{d_out}"], out[f"cos_se_{d_out}"] = np.array(m), np.array(se)
    return out


def _cos_plot(data, params):
    from ..style import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for d_out in np.asarray(data["d_outs"]):
        ax.errorbar(data["widths"], data[f"cos_{d_out}"], yerr=data[f"cos_se_{d_out}"], fmt="o-", mfc="none",
                    label=f"output dim {d_out}")
    ax.set(xscale="log", xlabel="width N", ylabel="cos(BP, GNT) of the full update",
           title="Gauss–Newton targets approach BP with width")
    ax.legend(fontsize=8)
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("finite_gnt_bp_cosine", component="finite", compute=_cos_compute, plot=_cos_plot,
         params={"widths": [16, 32, 64, 128, 256, 512, 1024], "d_outs": [1, 10], "P": 16, "D": 20, "blocks": 2,
                 "activation": "tanh", "damping": 1.0, "inits": 16},
         quick={"widths": [16, 64, 256], "inits": 6},
         caption="Cosine similarity between the BP update and the damped Gauss–Newton-target update "
                 "(e_B = 1, ρ = 1; seed 003 Prop. 3.3) of all weights, tanh MLP with 2 hidden N×N layers, "
                 "standard parameterisation, random Gaussian inputs (P = 16, D = 20) and targets, at "
                 "initialisation; mean ± SE over inits. Synthetic stand-in for seed 003 Fig. 2 (which also "
                 "shows PC).", seed_ref="seed 003 Fig. 2 (BP vs GNT part)", default=False)
