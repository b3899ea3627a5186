"""The README's "Architectures and your own network" example as a figure: a CNN-GP (``limits.serial``: Conv 3×3
SAME → ReLU → GlobalAvgPool → Dense) on the 8×8 digits bundled with scikit-learn — its NNGP posterior with the
output scale and noise fitted (``noise="auto"``), the test accuracy, and ``limits.check`` of a posterior on fewer
images at the fitted hyper-parameters against finite CNNs of the same composition (the figure is that check's
``plot()``)."""
from __future__ import annotations

import numpy as np

from . import register


def digits():
    """The README's data: images (1797, 8, 8, 1) with pixels /16 − 0.3, one-hot targets − 0.1, labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0 - 0.3)[..., None], np.eye(10)[d.target] - 0.1, d.target


def cnn():
    import limits

    L = limits.layers
    return limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"),
                         L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.05))


def compute(params, rng):
    import limits

    X, Y, labels = digits()
    net = cnn()
    P, t0, Pt = params["P"], params["test_start"], params["P_test"]
    test = slice(t0, t0 + Pt)
    p = limits.predict.nngp_posterior(net, X[:P], Y[:P], X[test], noise="auto")
    alone = limits.predict.nngp_posterior(net, X[:P], Y[:P], X[test], noise="auto", output_scale=1.0)
    small = limits.predict.nngp_posterior(net, X[:params["P_check"]], Y[:params["P_check"]],
                                          X[t0:t0 + params["P_test_check"]], noise=p.noise, output_scale=p.output_scale)
    c = limits.check(small, seed=params["check_seed"])
    return {"accuracy": float(np.mean(p.mean.argmax(1) == labels[test])),
            "accuracy_noise_alone": float(np.mean(alone.mean.argmax(1) == labels[test])),
            "output_scale": p.output_scale, "noise": p.noise, "noise_alone": alone.noise,
            "summary": str(p), "check": c}


def plot(data, params):
    c = data["check"]
    fig = c.plot()
    fig.suptitle(f"CNN-GP on digits, noise=\"auto\": test accuracy {data['accuracy']:.0%} "
                 f"({params['P']} training images; the noise fitted alone: {data['accuracy_noise_alone']:.0%})\n"
                 f"check of the posterior on {params['P_check']} images at the fitted s², σ²: {c.verdict_text()}", fontsize=8)
    return fig


PARAMS = dict(P=200, test_start=1000, P_test=100, P_check=30, P_test_check=3, check_seed=0)
register("layers_cnn_digits_check", component="predict", compute=compute, plot=plot, params=PARAMS, quick=PARAMS,
         caption="The README's CNN example: limits.serial(Conv 3×3 SAME, ReLU, GlobalAvgPool, Dense) on the 8×8 "
                 "digits bundled with scikit-learn (pixels / 16 − 0.3, one-hot targets − 0.1); the NNGP posterior "
                 "with output scale and noise fitted by maximum marginal likelihood (noise=\"auto\") on 200 "
                 "images, its test accuracy on 100 others (and that of the noise fitted alone at output scale 1); "
                 "the panels are limits.check of the posterior on 30 images and 3 test points at the fitted output scale and "
                 "noise against the exact "
                 "Bayesian read-out posteriors of finite CNNs of the same composition (left: N → ∞ extrapolation "
                 "of every mean and covariance entry against the theory, ±2 SE; right: one network's relative "
                 "RMS deviation against N with the expected N^-1/2).",
         seed_ref="docs/theory/predict.rst §4")
