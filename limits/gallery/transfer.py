"""μTransfer figures: ``limits.torch.transfer`` on the demo networks of :mod:`limits.torch.transfer_demos` — loss
against log2 learning rate, one curve per width (or depth), as Tensor Programs V Fig. 1, and the fitted optimum
per size with its drift against the drift the parameterisation's table predicts (:func:`limits.params.lr_drift`).

* ``torch_transfer_digits`` — the digits MLP under SP (the optimum falls with width) and μP (flat);
* ``torch_transfer_text`` — the byte-level causal transformer on the shipped essay, SP and μP;
* ``torch_transfer_depth`` — the residual MLP across depth under width-only μP (drifts) and Depth-μP (flat), with
  the coordinate check across depth.

Besides the simulated calibration each study carries (false-verdict rate of a flat optimum, power at −2δ and at
the predicted drift), the data hold an *empirical* one: the verdict of every 3-seed subset of the study's seeds
(μP: how often a flat optimum is called a drift; SP: how often the drift is seen). Computing needs the optional
extra torch; the committed data replot without it.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import register
from ._util import with_caption
from ..torch.depth_result import DepthCoordCheck  # noqa: F401 — registers the result types for decoding
from ..torch.transfer_result import TransferResult  # noqa: F401

VERDICTS = ("transfers", "drifts", "inconclusive")


def _needs_torch(name):
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"figure {name}: computing it needs the optional extra torch (python -m pip install -e "
                         f"\".[torch]\"); its committed data replot without torch (limits figure {name} --replot)") from None


def subset_verdicts(r, k=3, n_boot=300, seed=0):
    """Verdict counts (transfers, drifts, inconclusive) over every ``k``-seed subset of a study's seeds (the
    study's own analysis on fewer seeds: an empirical false-verdict rate or power)."""
    from ..torch.transfer_fit import capped, fit_drift, verdict

    y = capped(r.test_loss if r.criterion == "test" else r.train_loss, r.diverged, r.cap)
    rng = np.random.default_rng(seed)
    counts = np.zeros(3, int)
    for sub in itertools.combinations(range(y.shape[-1]), k):
        f = fit_drift(y[..., list(sub)], r.sizes, r.log2_lrs, rng, n_boot=n_boot, level=r.level)
        counts[VERDICTS.index(verdict(f.drift, f.drift_ci, r.margin, f.at_edge)[0])] += 1
    return counts


def _study(factory, param, params, data, seed, **kw):
    from ..torch import transfer

    lo, hi, step = params["log2_lr"]
    lrs = 2.0 ** np.arange(lo, hi + 1e-9, step)
    return transfer(factory, param, lrs=lrs, data=data["train"], held_out=data["test"], steps=params["steps"],
                    seeds=params["seeds"], batch_size=params["batch"], seed=seed, n_sim=params.get("n_sim", 200),
                    **kw)


def _width_compute(name, factory_name, data_name, cases):
    def compute(params, rng):
        _needs_torch(name)
        from ..torch import transfer_demos as demos

        data = getattr(demos, data_name)()
        factory = getattr(demos, factory_name)
        seed = int(rng.integers(2 ** 31))
        out = {}
        for case in cases:
            r = _study(factory, case, params, data, seed, widths=params["widths"])
            out[case] = r
            out[f"{case}|subsets"] = subset_verdicts(r, seed=seed)
        return out
    return compute


def _depth_compute(params, rng):
    _needs_torch("torch_transfer_depth")
    from ..torch import depth_coord_check, parameterise, transfer_demos as demos

    data = demos.digits_data()
    seed = int(rng.integers(2 ** 31))
    out = {}
    w = int(params["width"])
    for case in ("muP", "depth-muP"):
        r = _study(demos.residual_mlp, case, params, data, seed, widths=[w], depths=params["depths"])
        out[case] = r
        out[f"{case}|subsets"] = subset_verdicts(r, seed=seed)
        P = parameterise(demos.residual_mlp, case, widths=(w, 2 * w), depths=params["depths"])
        X, Y = data["train"]
        out[f"{case}|coord"] = depth_coord_check(P, params["depths"], (X[:256], Y[:256]), lr=params["coord_lr"],
                                                 steps=1, seeds=params["seeds"], seed=seed)
    return out


# ---------------------------------------------------------------------- plots
def _optima(ax, results, axis):
    for i, r in enumerate(results):
        u = np.log2(r.sizes)
        o, ci = r.optimum, r.optimum_ci
        col = f"C{i}"
        ax.errorbar(u + 0.04 * (i - 0.5), o, yerr=[o - ci[:, 0], ci[:, 1] - o], fmt="o", color=col, capsize=2,
                    ms=4, label=f"{r.parameterisation}: {r.drift:+.2f} [{r.drift_ci[0]:+.2f}, {r.drift_ci[1]:+.2f}]"
                                f" → {r.verdict}")
        uu = np.linspace(u.min(), u.max(), 20)
        ax.plot(uu, r.intercept + r.drift * uu, "-", color=col, lw=1)
        if r.prediction_kind in ("exact", "bound"):
            c = float(np.nanmean(o) - r.predicted_drift * u.mean())
            ax.plot(uu, c + r.predicted_drift * uu, ":", color=col, lw=1.2,
                    label=f"{r.parameterisation} theory {'≤ ' if r.prediction_kind == 'bound' else ''}"
                          f"{r.predicted_drift:+.2f}")
    ax.set_xlabel(f"log2 {axis}")
    ax.set_ylabel("optimal log2 learning rate (95 % CI)")
    ax.set_title(f"drift per doubling of {axis}", fontsize=8)
    ax.legend(fontsize=5.5)


def _plot_pair(data, cases, coord=False):
    from ..style import paper_style, pyplot

    with paper_style():
        plt = pyplot()
        n = 3 + int(coord)
        fig, axes = plt.subplots(1, n, figsize=(4.0 * n, 3.6))
        results = [data[c] for c in cases]
        for ax, r in zip(axes, results):
            r.plot_curves(ax)
            ax.set_title(f"{r.parameterisation} ({r.optimizer}): {r.verdict}", fontsize=8)
        _optima(axes[2], results, results[0].axis)
        if coord:
            ax = axes[3]
            for i, c in enumerate(cases):
                cc = data[f"{c}|coord"]
                y = cc.samples[:, :, -1, 1]
                m, se = y.mean(1), y.std(1, ddof=1) / np.sqrt(y.shape[1])
                ax.errorbar(cc.depths, m, yerr=se, fmt="o-", ms=3, color=f"C{i}", capsize=2,
                            label=f"{c}: L^{cc.slope[1]:+.2f} [{cc.ci_low[1]:+.2f}, {cc.ci_high[1]:+.2f}] "
                                  f"(pred. {cc.predicted[1]:+.0f})")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("depth L")
            ax.set_ylabel("rms change of the stream after 1 step")
            ax.set_title("coordinate check across depth", fontsize=8)
            ax.legend(fontsize=5.5)
        fig.tight_layout()
    return fig


def _caption(kind):
    def caption(p):
        what = {"digits": "the digits MLP (sklearn's 8×8 digits, Linear–ReLU–Linear–ReLU–Linear, cross-entropy)",
                "text": "the byte-level causal transformer (2 pre-LN blocks, 4 heads) on the shipped essay",
                "depth": f"the residual MLP (width {p.get('width')}, blocks h + W₂ relu(W₁ h)) on the digits"}[kind]
        sizes = p.get("depths") if kind == "depth" else p.get("widths")
        return (f"limits.torch.transfer of {what}: {'depths' if kind == 'depth' else 'widths'} "
                f"{', '.join(str(s) for s in sizes)}, Adam, {p['steps']} steps of {p['batch']} rows, {p['seeds']} seeds; "
                "training loss (mean ± SE, × = a diverged run) against log2 learning rate, ◆ = fitted optimum with its "
                "95 % CI; right: optimum per size, fitted drift (solid) and the table's prediction (dotted).")
    return caption


DIGITS = {"widths": [64, 128, 256, 512, 1024], "log2_lr": [-13, -3, 1], "steps": 100, "batch": 64, "seeds": 5}
DIGITS_QUICK = {"widths": [64, 128, 256, 512], "log2_lr": [-12, -3, 1], "steps": 60, "seeds": 5}
TEXT = {"widths": [64, 128, 256, 512], "log2_lr": [-12, -3, 1], "steps": 100, "batch": 16, "seeds": 4}
TEXT_QUICK = {"widths": [64, 128, 256], "steps": 60, "seeds": 6}
DEPTH = {"width": 128, "depths": [4, 8, 16, 32], "log2_lr": [-13, -3, 1], "steps": 100, "batch": 128, "seeds": 10,
         "coord_lr": 1e-2}
DEPTH_QUICK = {"width": 64, "steps": 50}

register("torch_transfer_digits", component="torch",
         compute=with_caption(_width_compute("torch_transfer_digits", "digits_mlp", "digits_data", ("SP", "muP")),
                              _caption("digits")),
         plot=lambda d, p: _plot_pair(d, ("SP", "muP")), params=DIGITS, quick=DIGITS_QUICK,
         caption="μTransfer as a tested prediction (limits.torch.transfer; needs torch to compute, not to replot): the "
                 "digits MLP's optimal learning rate falls with width under SP and stays put under μP, each with a "
                 "bootstrap CI and a calibrated verdict.",
         seed_ref="issue 34; TP5 Fig. 1", default=False)
register("torch_transfer_text", component="torch",
         compute=with_caption(_width_compute("torch_transfer_text", "byte_transformer", "text_data", ("SP", "muP")),
                              _caption("text")),
         plot=lambda d, p: _plot_pair(d, ("SP", "muP")), params=TEXT, quick=TEXT_QUICK,
         caption="μTransfer of a byte-level causal transformer (limits.torch.transfer): SP's optimal learning rate "
                 "drifts with width, μP's does not.",
         seed_ref="issue 34; TP5 Fig. 1", default=False)
register("torch_transfer_depth", component="torch", compute=with_caption(_depth_compute, _caption("depth")),
         plot=lambda d, p: _plot_pair(d, ("muP", "depth-muP"), coord=True), params=DEPTH, quick=DEPTH_QUICK,
         caption="Depth transfer (limits.torch.transfer with depths=): the residual MLP's optimal learning rate drifts "
                 "with depth under width-only μP and stays put under Depth-μP (branch multiplier L^-1/2, Adam rates "
                 "L^-1/2); right: the coordinate check across depth.",
         seed_ref="issue 34; TP6", default=False)
