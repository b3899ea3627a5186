"""Test accuracy of NNGP posteriors on the 8×8 digits bundled with scikit-learn against the observation noise:
fixed σ² (output scale 1), the noise fitted alone by maximum marginal likelihood (``noise="auto"`` before the
output scale was fitted: ``nngp_posterior(..., noise="auto", output_scale=1)``) and the output scale and noise
fitted together (``noise="auto"``, :mod:`limits.likelihood`), for a depth-3 MLP NNGP and CNN-GPs with 1 and 3
convolutional layers read out by Flatten or by global average pooling.

    python -m limits.gallery.hyperparameters      # the accuracy table (docs/theory/predict.rst §3) from the data

One kernel per network (train × train and test × train, one call each); every noise setting reuses it.
"""
from __future__ import annotations

import numpy as np

from . import register

KERNELS = ("mlp", "cnn1_flat", "cnn3_flat", "cnn1_gap", "cnn3_gap")
LABELS = {"mlp": "MLP NNGP (depth 3)", "cnn1_flat": "CNN-GP, 1 conv, Flatten", "cnn3_flat": "CNN-GP, 3 conv, Flatten",
          "cnn1_gap": "CNN-GP, 1 conv, global avg pool", "cnn3_gap": "CNN-GP, 3 conv, global avg pool"}


def network(name, params):
    """The network behind ``name`` ("mlp", "cnn<n>_flat", "cnn<n>_gap"): relu, σ_w² / σ_b² from ``params``."""
    import limits

    sw, sb, act = params["sigma_w2"], params["sigma_b2"], params["activation"]
    if name == "mlp":
        return limits.mlp(64, 3, d_out=10, activation=act, sigma_w2=sw, sigma_b2=sb)
    L = limits.layers
    n, pool = int(name[3]), name.split("_")[1]
    body = []
    for _ in range(n):
        body += [L.Conv((3, 3), "SAME", sigma_w2=sw, sigma_b2=sb), L.Activation(act)]
    return limits.serial(*body, L.GlobalAvgPool() if pool == "gap" else L.Flatten(),
                         L.Dense(sigma_w2=1.0, sigma_b2=sb))


def _accuracy(K, Ksx, Y, labels, ratio):
    """Test accuracy of the posterior mean K_*X (K + λI)⁻¹ Y (argmax over the 10 outputs)."""
    from scipy.linalg import cho_factor, cho_solve

    c = cho_factor(K + ratio * np.eye(K.shape[0]), lower=True, check_finite=False)
    return float(np.mean(np.argmax(Ksx @ cho_solve(c, Y, check_finite=False), 1) == labels))


def compute(params, rng):
    import limits
    from ..likelihood import ml_noise, ml_scale_noise
    from ..progress import progress
    from .predict import digits_task

    X, Y, Xs, Ys = digits_task(params["P"], params["P_test"], params["data_seed"])
    labels = np.argmax(Ys, 1)
    grid = np.asarray(params["noise_grid"], float)
    out = {"noise_grid": grid, "kernels": list(params["kernels"])}
    for name in progress(params["kernels"], desc="noise auto: kernels"):
        m = network(name, params)
        a, b = (X, Xs) if name == "mlp" else (X.reshape(-1, 8, 8, 1), Xs.reshape(-1, 8, 8, 1))
        K = limits.kernels.kernel(m, a, get=("nngp",)).nngp
        Ksx = limits.kernels.kernel(m, b, a, get=("nngp",)).nngp
        d = np.sqrt(np.diag(K))
        old = ml_noise(K, Y)
        s2, noise = ml_scale_noise(K, Y)
        out[f"{name}_fixed"] = np.array([_accuracy(K, Ksx, Y, labels, g) for g in grid])
        out[f"{name}_old"] = np.array([old, _accuracy(K, Ksx, Y, labels, old)])
        out[f"{name}_new"] = np.array([s2, noise, _accuracy(K, Ksx, Y, labels, noise / s2)])
        out[f"{name}_corr"] = np.array([float(np.min(K / np.outer(d, d))), float(np.mean(d * d))])
    return out


def plot(data, params):
    from ..style import PALETTE, paper_style, pyplot

    with paper_style():
        fig, ax = pyplot().subplots(figsize=(6.4, 3.6), constrained_layout=True)
        g = np.asarray(data["noise_grid"])
        for i, name in enumerate(data["kernels"]):
            c = PALETTE[i % len(PALETTE)]
            ax.plot(g, 100 * data[f"{name}_fixed"], "-", color=c, lw=1.2, label=LABELS.get(name, name))
            old, new = data[f"{name}_old"], data[f"{name}_new"]
            ax.plot(old[0], 100 * old[1], "o", mfc="none", color=c, ms=7)
            ax.plot(new[1] / new[0], 100 * new[2], "*", color=c, ms=10)
        ax.plot([], [], "o", mfc="none", color="0.3", label="noise alone fitted (σ² at s² = 1)")
        ax.plot([], [], "*", color="0.3", label="scale and noise fitted (at λ = σ²/s²)")
        ax.set_xscale("log")
        ax.set_xlabel("fixed noise σ² (output scale 1) — or the fitted ratio σ²/s²")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"digits 8×8: P = {params['P']} train, {params['P_test']} test; noise=\"auto\"", fontsize=8)
        ax.legend(fontsize=6, loc="lower left")
    return fig


def table(data) -> str:
    """Markdown: per kernel, the best fixed noise, σ² = 1e-4, the noise fitted alone and scale + noise fitted."""
    g = np.asarray(data["noise_grid"])
    rows = ["| kernel (min correlation) | best fixed σ² | fixed σ² = 1e-4 | noise alone fitted | scale and noise fitted |",
            "|---|---|---|---|---|"]
    j = int(np.argmin(np.abs(np.log10(g) + 4)))
    for name in data["kernels"]:
        acc = np.asarray(data[f"{name}_fixed"])
        i = int(np.argmax(acc))
        old, new, corr = data[f"{name}_old"], data[f"{name}_new"], data[f"{name}_corr"]
        rows.append(f"| {LABELS.get(name, name)} ({corr[0]:.3f}) | {100 * acc[i]:.1f} % (σ² = {g[i]:.0e}) | "
                    f"{100 * acc[j]:.1f} % | {100 * old[1]:.1f} % (σ² = {old[0]:.3g}) | {100 * new[2]:.1f} % "
                    f"(s² = {new[0]:.3g}, σ² = {new[1]:.3g}) |")
    return "\n".join(rows)


register("predict_noise_auto_digits", component="predict", compute=compute, plot=plot,
         params=dict(P=500, P_test=500, data_seed=0, activation="relu", sigma_w2=2.0, sigma_b2=0.05,
                     kernels=list(KERNELS), noise_grid=[float(10.0 ** e) for e in np.arange(-10.0, 0.01, 0.5)]),
         quick=dict(P=300, P_test=300),
         caption="Test accuracy of the NNGP posterior mean on the 8×8 digits bundled with scikit-learn (pixels "
                 "centred, images scaled to norm 8; one-hot targets − 0.1, 10 outputs) against a fixed noise σ² at "
                 "output scale 1 (lines), with the noise fitted alone by maximum marginal likelihood (circles, the "
                 "former noise=\"auto\") and the output scale and noise fitted together (stars, noise=\"auto\", at "
                 "the fitted ratio σ²/s², the only number the posterior mean depends on), for a depth-3 relu MLP "
                 "NNGP and CNN-GPs with 1 and 3 Conv 3×3 SAME + ReLU layers (σ_w² = 2, σ_b² = 0.05) read out by "
                 "Flatten or global average pooling (limits.serial). The accuracy table: "
                 "python -m limits.gallery.hyperparameters.",
         seed_ref="docs/theory/predict.rst §3")


def main(argv=None) -> int:
    """Print :func:`table` from the stored data (figures/full/ when present, else the quick data in figures/)."""
    import argparse
    from pathlib import Path

    from . import load_data

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--figures", default="figures", help="the gallery folder (default figures/)")
    args = ap.parse_args(argv)
    name = "predict_noise_auto_digits"
    root = Path(args.figures)
    for where in (root / "full", root):
        if (where / f"{name}.npz").exists():
            payload = load_data(name, where)
            data, params = payload["data"], payload["params"]
            print(f"{name} ({where}): P = {params['P']} train, {params['P_test']} test")
            print(table(data))
            return 0
    print(f"no data: run `limits figure {name}` (or --quick) first")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
