"""``finite_width_depth``: the O(1/N) correction of the mean kernel against depth (docs/theory/finite_width.rst).

Top row: K1^l/K^l (theory, :func:`limits.kernels.finite_width`) of the stream Gram h^l h^lᵀ/N against
the layer l of deep MLPs — relu, tanh, erf, at criticality (solid) and away from it (dashed) — with
finite networks beside it: N·(E[K^l_N] − K^l)/K^l at three widths, ±2 SE (Monte Carlo over inits
with the exactly mean-zero control variates of :mod:`limits.checking.finite_width`). Bottom row: the
measured relative correction divided by the predicted one, against l/N: the 1/N expansion holds
while the ratio is 1 and breaks down where it leaves 1; the dotted line marks l/N at which the
predicted relative correction abs(K1^l/K^l)/N reaches 10 % (with abs(K1/K) ∝ l).
"""
from __future__ import annotations

import numpy as np

from . import register
from ._util import data_ticks, log_ticks


def _settings(params):
    from ..kernels import critical_line

    sb2 = params["sigma_b2"]
    out = []
    for act in params["activations"]:
        if act == "relu":      # critical: (2, 0); relu without bias is scale-free, so "off" adds a bias
            out.append((act, "critical", 2.0, 0.0))
            out.append((act, "off", 2.0, params["relu_off_sigma_b2"]))
            continue
        crit = float(critical_line(act, sb2).sigma_w2)
        out.append((act, "critical", crit, sb2))
        out.append((act, "off", crit * params["off_factor"], sb2))
    return out


def _compute(params, rng):
    from .. import mlp
    from ..checking.finite_width import measure
    from ..kernels import finite_width

    X = np.array(params["X"], dtype=float)
    L = int(params["depth"])
    e = tuple(params["entry"])
    Ns = [int(n) for n in params["widths"]]
    out = {"widths": np.array(Ns), "layers": np.arange(1, L + 1), "names": []}
    for act, kind, sw2, sb2 in _settings(params):
        m = mlp(X.shape[1], depth=L, activation=act, sigma_w2=sw2, sigma_b2=sb2)
        r = finite_width(m, X, ntk=False)
        key = f"{act}_{kind}"
        out["names"].append(key)
        K = r.K_layers[1:, e[0], e[1]]
        out[f"{key}_theory"] = r.K1_layers[1:, e[0], e[1]] / K
        out[f"{key}_sigma_w2"] = sw2
        out[f"{key}_sigma_b2"] = sb2
        est, se = [], []
        seed = int(rng.integers(2**31))
        labels, samples = measure(m, X, Ns, int(params["inits"]), seed, layers=True, ntk=False)
        want = [labels.index(f"K^{l}[{e[0]},{e[1]}]") for l in range(1, L + 1)]
        for N, S in zip(Ns, samples):
            y = S[:, want]
            est.append(N * (y.mean(axis=0) - K) / K)
            se.append(N * y.std(axis=0, ddof=1) / np.sqrt(y.shape[0]) / np.abs(K))
        out[f"{key}_mc"] = np.array(est)
        out[f"{key}_mc_se"] = np.array(se)
    return out


def _plot(data, params):
    from ..style import pyplot

    plt = pyplot()
    acts = list(params["activations"])
    fig, axes = plt.subplots(2, len(acts), figsize=(3.3 * len(acts), 5.6), squeeze=False)
    Ns = np.asarray(data["widths"], int)
    ls = np.asarray(data["layers"], float)
    marks = ["o", "s", "^", "D"]
    for c, act in enumerate(acts):
        top, bot = axes[0, c], axes[1, c]
        for kind, style, col in (("critical", "-", "C0"), ("off", "--", "C3")):
            key = f"{act}_{kind}"
            th = np.asarray(data[f"{key}_theory"])
            top.plot(ls, th, style, color=col, lw=1.4,
                     label=f"{kind}: σ_w²={float(data[f'{key}_sigma_w2']):.3g}, "
                           f"σ_b²={float(data[f'{key}_sigma_b2']):.3g}")
            mc, se = np.asarray(data[f"{key}_mc"]), np.asarray(data[f"{key}_mc_se"])
            for i, N in enumerate(Ns):
                dx = (i - (len(Ns) - 1) / 2) * 0.12
                top.errorbar(ls + dx, mc[i], yerr=2 * se[i], fmt=marks[i % 4], ms=3, mfc="none", color=col,
                             alpha=0.55 + 0.15 * i, lw=0.8, label=f"N = {N} (±2 SE)" if kind == "critical" else None)
                ok = np.abs(th) > params["ratio_min"]          # ratios of tiny corrections are noise
                bot.errorbar(ls[ok] / N, mc[i][ok] / th[ok], yerr=2 * se[i][ok] / np.abs(th[ok]),
                             fmt=marks[i % 4], ms=3, mfc="none", color=col, lw=0.8, alpha=0.55 + 0.15 * i)
            x_star = 0.1 * ls[-1] / abs(th[-1]) if abs(th[-1]) > params["ratio_min"] else np.inf
            if x_star <= ls[-1] / Ns.min():          # only inside the measured range of l/N
                # the l/N at which the predicted relative correction |K1/K|/N reaches 10 %, taking
                # |K1/K| ∝ l (its growth at the deepest layer): l/N = 0.1 · l_max / |K1/K|(l_max)
                bot.axvline(x_star, color=col, ls=":", lw=1)
        top.axhline(0, color="0.7", lw=0.6)
        top.set_title(act, fontsize=9)
        top.set_xlabel("layer l")
        top.set_ylabel(r"$K^{(1)l}/K^l$  (measured: $N(\mathbb{E}K_N-K)/K$)", fontsize=7)
        data_ticks(top, ls[::max(1, len(ls) // 8)])
        bot.axhline(1, color="0.5", lw=0.8)
        bot.set_ylim(-1.0, 3.0)
        bot.set_xscale("log")
        bot.set_xlabel("l / N")
        bot.set_ylabel("measured / predicted correction", fontsize=7)
        top.legend(fontsize=5.5, loc="best")
    log_ticks(fig)
    fig.tight_layout()
    return fig


register("finite_width_depth", component="kernels", compute=_compute, plot=_plot,
         params={"activations": ["relu", "tanh", "erf"], "depth": 24, "widths": [16, 32, 64], "inits": 4000,
                 "X": [[1.0, 0.0], [0.6, 0.8]], "entry": [0, 1], "sigma_b2": 0.05, "off_factor": 1.6,
                 "relu_off_sigma_b2": 0.5, "ratio_min": 0.15},
         quick={"depth": 10, "inits": 800},
         caption="O(1/N) correction of the mean kernel vs depth (cross entry of two unit inputs at 53°): "
                 "theory K1/K (lines; solid critical, dashed σ_w² × 1.6, relu: σ_b² = 0.5) and finite MLPs N(E[K_N]−K)/K at "
                 "three widths (±2 SE). Bottom: measured/predicted against l/N; dotted: predicted |K1/K|/N = 10 %; "
                 "ratios shown where |K1/K| > 0.15.",
         seed_ref="docs/theory/finite_width.rst", default=False)
