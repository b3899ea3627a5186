"""Feature learning of a small CNN on digits, from lazy to rich: the DMFT of a composition (``limits.dmft.solve(X, y,
model=limits.serial(...))``, docs/theory/dmft.rst §6) at several γ0, the γ0 → 0 limit (``limits.predict
.gradient_descent`` on the composition's NTK), and finite mean-field CNNs trained by the same GD as points.

Data: scikit-learn's bundled 8×8 digits, 3 (y = +1) against 8 (y = −1), each image standardised (zero mean, unit
variance over its pixels); the first ``P`` images of the two classes train, the next ``P_test`` test. Network: AvgPool
2×2 → Conv 3×3 SAME (σ_w² = 2) → tanh → GlobalAvgPool → Dense (σ_w² = 1.5) → tanh → Dense, no biases: two hidden
stages, the pooled conv features and the dense features, whose feature-kernel alignment with y yᵀ is the right
panel.
"""
from __future__ import annotations

import time

import numpy as np

from . import register

NAME = "dmft_cnn_digits"


def data(P, P_test, a=3, b=8):
    from sklearn.datasets import load_digits

    d = load_digits()
    idx = np.flatnonzero(np.isin(d.target, [a, b]))[:P + P_test]
    X = d.images[idx]
    X = ((X - X.mean(axis=(1, 2), keepdims=True)) / X.std(axis=(1, 2), keepdims=True))[..., None]
    y = np.where(d.target[idx] == a, 1.0, -1.0)
    return X[:P], y[:P], X[P:], y[P:]


def cnn():
    import limits

    L = limits.layers
    return limits.serial(L.AvgPool((2, 2)), L.Conv((3, 3), "SAME", sigma_w2=2.0), L.Activation("tanh"),
                         L.GlobalAvgPool(), L.Dense(sigma_w2=1.5), L.Activation("tanh"), L.Dense())


def _test_loss(f, y):
    """(1/2P_test) Σ (f − y)² along the last axis."""
    return 0.5 * np.mean((f - y) ** 2, axis=-1)


def _alignment(K, y):
    """Kernel–target alignment ⟨K, yyᵀ⟩/(‖K‖‖yyᵀ‖) over the last two axes."""
    Y = np.outer(y, y)
    return np.einsum("...ab,ab->...", K, Y) / (np.linalg.norm(K, axis=(-2, -1)) * np.linalg.norm(Y))


def _theory(comp, X, y, Xs, ys, g, params):
    import limits

    d = limits.dmft.solve(X, y, model=comp, gamma0=g, dt=params["dt"], steps=params["steps"], X_test=Xs,
                          M=params["M"], replicas=params["replicas"], seed=params["seed"], progress=True)
    loss = _test_loss(d.f_test, ys)
    # delta method: Var(loss) ≈ Σ_μ ((f_μ − y_μ)/P_test)² se_μ²
    loss_se = np.sqrt(np.sum(((d.f_test - ys) / ys.size * d.f_test_se) ** 2, axis=1))
    return d, loss, loss_se


def _finite(comp, X, y, Xs, ys, g, N, params, seed):
    from ..finite.serial_meanfield import train_meanfield

    steps = params["steps"]
    o = train_meanfield(comp, N, X, y, steps, params["dt"], g, params["inits"], seed=seed, X_test=Xs,
                        kernel_steps=range(steps + 1))
    loss = _test_loss(np.transpose(o["f_test"], (1, 0, 2)), ys)           # (S, n_t)
    align = _alignment(o["Phi"], y)                                        # (n_t, stages, S)
    S = loss.shape[0]
    return (loss.mean(0), loss.std(0, ddof=1) / np.sqrt(S), align.mean(2).T, align.std(2, ddof=1).T / np.sqrt(S))


def compute(params, rng):
    import limits

    c0 = time.process_time()
    X, y, Xs, ys = data(params["P"], params["P_test"])
    comp = cnn()
    t = params["dt"] * np.arange(params["steps"] + 1)
    lazy = limits.predict.gradient_descent(comp, X, y, Xs, t=np.arange(params["steps"] + 1),
                                           learning_rate=params["dt"], flow=False, cov=False)
    out = {"t": t, "gammas": np.asarray(params["gammas"], float), "widths": np.asarray(params["widths"]),
           "lazy_loss": _test_loss(lazy.mean[..., 0], ys)}
    keys = ("loss", "loss_se", "align", "align_se", "fin_loss", "fin_loss_se", "fin_align", "fin_align_se")
    acc = {k: [] for k in keys}
    for i, g in enumerate(params["gammas"]):
        d, loss, loss_se = _theory(comp, X, y, Xs, ys, g, params)
        acc["loss"].append(loss)
        acc["loss_se"].append(loss_se)
        acc["align"].append(d.alignment())
        acc["align_se"].append(_align_se(d, y))
        fins = [_finite(comp, X, y, Xs, ys, g, N, params, seed=1000 * i + j) for j, N in enumerate(params["widths"])]
        for k, j in (("fin_loss", 0), ("fin_loss_se", 1), ("fin_align", 2), ("fin_align_se", 3)):
            acc[k].append(np.stack([f[j] for f in fins]))
    out.update({k: np.array(v) for k, v in acc.items()})
    out["cpu_seconds"] = time.process_time() - c0
    return out


def _align_se(d, y):
    """Alignment SE by the delta method from the position-averaged kernels' standard errors (per entry, independent)."""
    K, se = d.Phi_pool, d.Phi_pool_se
    eps = 1e-6
    base = _alignment(K, y)
    grad2 = np.zeros_like(base)
    P = K.shape[-1]
    for a in range(P):
        for b in range(P):
            Kp = K.copy()
            Kp[..., a, b] += eps
            grad2 += ((_alignment(Kp, y) - base) / eps * se[..., a, b]) ** 2
    return np.sqrt(grad2)


def plot(data, params):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.6, 3.2))
    t = data["t"]
    a.plot(t, data["lazy_loss"], color="k", lw=1.4, ls="--", label="γ0 → 0 (NTK)")
    marks = ("o", "s", "^")
    for i, g in enumerate(data["gammas"]):
        c = PALETTE[i % len(PALETTE)]
        a.plot(t, data["loss"][i], color=c, lw=1.4, label=f"γ0 = {g:g}")
        a.fill_between(t, data["loss"][i] - 2 * data["loss_se"][i], data["loss"][i] + 2 * data["loss_se"][i], color=c,
                       alpha=0.2, lw=0)
        for j, N in enumerate(data["widths"]):
            a.errorbar(t, data["fin_loss"][i, j], yerr=2 * data["fin_loss_se"][i, j], fmt=marks[j % 3], ms=3,
                       color=c, mfc="none" if j == 0 else c, lw=0.8, label=f"N = {N}" if i == 0 else None)
            for k, ls in ((0, "-"), (1, ":")):
                b.errorbar(t, data["fin_align"][i, j, k], yerr=2 * data["fin_align_se"][i, j, k], fmt=marks[j % 3],
                           ms=2.5, color=c, mfc="none" if j == 0 else c, lw=0.6)
        for k, ls in ((0, "-"), (1, ":")):
            b.plot(t, data["align"][i, k], color=c, ls=ls, lw=1.3,
                   label=(f"γ0 = {g:g}" if k == 0 else None))
    a.set_xlabel("training time t (GD steps × dt)")
    a.set_ylabel("test loss (1/2P*) Σ (f − y)²")
    a.legend(fontsize=6.5, ncol=2)
    b.set_xlabel("training time t")
    b.set_ylabel("alignment ⟨Φ̄, yyᵀ⟩ / ‖Φ̄‖‖yyᵀ‖")
    b.plot([], [], color="0.3", ls="-", label="conv features (pooled)")
    b.plot([], [], color="0.3", ls=":", label="dense features")
    b.legend(fontsize=6.5)
    from ..progress import format_seconds

    fig.suptitle(f"CNN on digits 3 vs 8 ({params['P']} train / {params['P_test']} test): DMFT lines (±2 MC SE), "
                 f"finite μP CNNs as points (±2 SE, {params['inits']} inits); {format_seconds(data['cpu_seconds'])} CPU",
                 fontsize=8)
    fig.tight_layout()
    return fig


PARAMS = dict(P=6, P_test=6, gammas=[0.5, 1.0, 1.5], dt=0.25, steps=12, M=250, replicas=16, seed=0,
              widths=[128, 1024], inits=32)
register(NAME, component="dmft", compute=compute, plot=plot, params=PARAMS,
         quick=dict(P=4, P_test=4, gammas=[0.5, 1.5], steps=6, M=40, replicas=4, widths=[64, 256], inits=8),
         caption="A CNN learning features on digits (scikit-learn's 8×8 digits, 3 vs 8, standardised images): "
                 "AvgPool 2×2 → Conv 3×3 SAME → tanh → GlobalAvgPool → Dense → tanh → Dense (no biases) in the "
                 "mean-field (μP) parameterisation, full-batch GD with step dt on ½Σ(f − y)². Left: test loss against training time — the γ0 → 0 limit (dashed: GD on "
                 "the composition's NTK, limits.predict.gradient_descent) and the DMFT of the composition "
                 "(limits.dmft.solve(X, y, model=...), docs/theory/dmft.rst §6) at γ0 = 0.5, 1, 1.5 with ±2 Monte Carlo "
                 "SE bands; points: finite μP CNNs of two widths trained identically (mean ± 2 SE over inits). Right: "
                 "kernel–target alignment of the position-averaged feature kernels of both hidden stages over time "
                 "(lines DMFT, points finite CNNs). Regenerate: limits figure dmft_cnn_digits (CPU time in the title).",
         seed_ref="docs/theory/dmft.rst §6")
