"""CNN-GP / CNTK learning curves on the 8×8 digits bundled with scikit-learn: the infinite-width predictions
of a convolutional composition (``limits.serial``; NNGP posterior mean and the NTK gradient-descent
ensemble) against GD-trained finite CNNs of the same composition (``limits.finite.serial``) at three widths,
mean ± 2 SE over initialisations."""
from __future__ import annotations

import numpy as np

from . import register


def _digits(P, P_test, seed):
    """Images (P, 8, 8, 1): pixels centred, images scaled to norm 8; targets one-hot − 1/10 (10 outputs)."""
    from .predict import digits_task as flat

    X, Y, Xs, Ys = flat(P, P_test, seed)
    return X.reshape(-1, 8, 8, 1), Y, Xs.reshape(-1, 8, 8, 1), Ys


def _model(params):
    import limits

    L = limits.layers
    return limits.serial(L.Conv((3, 3), "SAME", sigma_w2=params["sigma_w2"], sigma_b2=params["sigma_b2"]),
                         L.Activation(params["activation"]), L.Flatten(),
                         L.Dense(sigma_w2=1.0, sigma_b2=params["sigma_b2"]))


def _loss(f, Ys):
    r = f - Ys[None]
    return 0.5 * np.einsum("spo,spo->s", r, r) / Ys.shape[0]


def compute(params, rng):
    import limits
    from ..finite.serial import SerialNetwork

    m = _model(params)
    steps, lr = int(params["steps"]), float(params["lr"])
    Ps = np.asarray(params["Ps"], int)
    nngp, ntk = [], []
    for p in Ps:
        X, Y, Xs, Ys = _digits(int(p), params["P_test"], params["data_seed"])
        post = limits.predict.nngp_posterior(m, X, Y, Xs, noise=params["noise"])
        nngp.append(0.5 * np.sum((post.mean - Ys) ** 2) / Ys.shape[0])
        g = limits.predict.gradient_descent(m, X, Y, Xs, t=[steps], flow=False, learning_rate=lr, reduction="mean",
                                            cov=False)
        ntk.append(g.test_loss(Ys)[0])
    out = {"Ps": Ps.astype(float), "nngp_P": np.array(nngp), "ntk_P": np.array(ntk),
           "widths": np.asarray(params["widths"], float)}
    Pp = np.asarray(params["P_points"], int)
    mean, se = [], []
    for N in params["widths"]:
        row, row_se = [], []
        for p in Pp:
            X, Y, Xs, Ys = _digits(int(p), params["P_test"], params["data_seed"])
            _, _, fs = SerialNetwork(m, int(N)).train_gd(X, Y, [steps], lr, params["inits"],
                                                         seed=int(rng.integers(2**31)), X_test=Xs, reduction="mean")
            if not np.all(np.isfinite(fs)):
                raise ValueError(f"finite CNNs of width {N} diverged; lower lr")
            L_ = _loss(fs[0], Ys)
            row.append(L_.mean())
            row_se.append(L_.std(ddof=1) / np.sqrt(L_.size))
        mean.append(row)
        se.append(row_se)
    out.update(P_points=Pp.astype(float), finite_P=np.array(mean), finite_P_se=np.array(se), model_text=m.describe())
    return out


def plot(data, params):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 3.2), constrained_layout=True)
    ax.plot(data["Ps"], data["ntk_P"], color="k", lw=1.5, label=f"CNTK: GD ensemble, {params['steps']} steps")
    ax.plot(data["Ps"], data["nngp_P"], color="k", lw=1.0, ls="--", label="CNN-GP posterior mean")
    for i, N in enumerate(data["widths"]):
        ax.errorbar(data["P_points"] * (1 + 0.03 * (i - 1)), data["finite_P"][i], yerr=2 * data["finite_P_se"][i],
                    fmt="o", ms=3, color=PALETTE[i % len(PALETTE)], label=f"finite CNN, N = {int(N)} (±2 SE)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training-set size P")
    ax.set_ylabel("test loss ½ Σ_o (f − y)² / P_test")
    ax.set_title("digits 8×8: Conv 3×3 → ReLU → Flatten → Dense", fontsize=8)
    ax.legend(fontsize=6)
    return fig


register("layers_cnn_digits_learning_curves", component="predict", compute=compute, plot=plot,
         params=dict(activation="relu", sigma_w2=2.0, sigma_b2=0.05, noise=1e-3, steps=1000, lr=2.0, P_test=300,
                     Ps=[25, 50, 100, 200, 400, 800], P_points=[50, 100, 200], widths=[64, 256, 1024], inits=8,
                     data_seed=0),
         quick=dict(steps=100, P_test=100, Ps=[20, 40, 80, 160], P_points=[20, 80], widths=[32, 64, 128], inits=4),
         caption="CNN-GP / CNTK learning curves on the 8×8 digits bundled with scikit-learn (pixels centred, "
                 "images scaled to norm 8; one-hot targets − 0.1, 10 outputs) for the composition "
                 "Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.05) → ReLU → Flatten → Dense (limits.serial): test loss of "
                 "the infinite-width NTK gradient-descent ensemble (discrete GD, mean reduction, initial-function "
                 "variance included) and of the NNGP posterior mean, against GD-trained finite CNNs of the same "
                 "composition (limits.finite.serial; mean ± 2 SE over initialisations) at three widths.")
