"""Learning curves from :mod:`limits.predict`: infinite-width NTK gradient-descent ensembles (theory lines)
against GD-trained finite networks of the same Model (points ± 2 SE over initialisations, three widths),
as test loss vs training time and vs training-set size P, on the 8×8 digits shipped with scikit-learn
and on a synthetic teacher task."""
from __future__ import annotations

import numpy as np

from . import register


def _digits(P, P_test, seed):
    """8×8 digits (scikit-learn's bundled copy, no download): pixels centred, rows scaled to norm √64;
    targets one-hot minus 1/10 (10 outputs). Train/test split by a seeded permutation."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:       # pragma: no cover
        raise ValueError("the digits figure needs scikit-learn (pip install scikit-learn)") from None
    d = load_digits()
    X = d.data.astype(float)
    X = X - X.mean(0)
    X = X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(X.shape[1])
    Y = np.eye(10)[d.target] - 0.1
    idx = np.random.default_rng(seed).permutation(X.shape[0])
    tr, te = idx[:P], idx[P:P + P_test]
    return X[tr], Y[tr], X[te], Y[te]


digits_task = _digits          # public within the package


def _teacher(P, P_test, seed, d=8):
    """x ~ N(0, I_d); y = tanh(2 v·x/√d) + 0.3 sin(u·x), v, u ~ N(0, I_d) fixed by ``seed``."""
    rng = np.random.default_rng(seed)
    v, u = rng.standard_normal(d), rng.standard_normal(d)
    X = rng.standard_normal((P + P_test, d))
    y = np.tanh(2 * X @ v / np.sqrt(d)) + 0.3 * np.sin(X @ u / np.sqrt(d))
    return X[:P], y[:P, None], X[P:], y[P:, None]


def _data(params, P):
    if params["task"] == "digits":
        return _digits(P, params["P_test"], params["data_seed"])
    return _teacher(P, params["P_test"], params["data_seed"])


def _model(params, d_in, d_out):
    import limits

    return limits.mlp(d_in, params["depth"], d_out=d_out, activation=params["activation"],
                      sigma_w2=params["sigma_w2"], sigma_b2=params["sigma_b2"], lr=params["lr"])


def _finite_losses(m, X, Y, Xs, Ys, steps, N, inits, seed, record):
    """(len(record), inits) test losses ½Σ_o(f − y)²/P_test of GD-trained width-N networks (center=False)."""
    from ..finite import train

    tr = train(m.finite(N), X, Y, int(max(record)), n_inits=inits, seed=seed, optimizer="gd", reduction="mean",
               center=False, X_test=Xs, record_features=False, keep_weights=False)
    if not tr.converged:
        raise ValueError(f"finite networks of width {N} diverged; lower lr")
    r = tr.f_test[np.asarray(record, int)] - Ys[None, None]
    return 0.5 * np.einsum("tspo,tspo->ts", r, r) / Ys.shape[0]


def compute(params, rng):
    import limits

    P = params["P"]
    X, Y, Xs, Ys = _data(params, P)
    m = _model(params, X.shape[1], Y.shape[1])
    steps = params["steps"]
    ts = np.unique(np.round(np.geomspace(1, steps, params["n_times"]))).astype(int)
    ts = np.concatenate([[0], ts])
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=ts, flow=False, reduction="mean")
    out = {"t": ts.astype(float), "theory_t": g.test_loss(Ys), "widths": np.asarray(params["widths"])}
    rec_t = ts[np.unique(np.linspace(0, ts.size - 1, params["n_points"]).astype(int))]
    out["t_points"] = rec_t.astype(float)
    mt, st = [], []
    for N in params["widths"]:
        L = _finite_losses(m, X, Y, Xs, Ys, steps, int(N), params["inits"], int(rng.integers(2**31)), rec_t)
        mt.append(L.mean(1))
        st.append(L.std(1, ddof=1) / np.sqrt(L.shape[1]))
    out["finite_t"], out["finite_t_se"] = np.array(mt), np.array(st)
    # vs P at the final time
    Ps = np.asarray(params["Ps"], int)
    th_P = []
    for p in Ps:
        Xp, Yp, Xsp, Ysp = _data(params, int(p))
        gp = limits.predict.gradient_descent(m, Xp, Yp, Xsp, t=[steps], flow=False, reduction="mean", cov=False)
        th_P.append(gp.test_loss(Ysp)[0])
    out["Ps"] = Ps.astype(float)
    out["theory_P"] = np.array(th_P)
    Pp = np.asarray(params["P_points"], int)
    mp, sp = [], []
    for N in params["widths"]:
        row, row_se = [], []
        for p in Pp:
            Xp, Yp, Xsp, Ysp = _data(params, int(p))
            L = _finite_losses(m, Xp, Yp, Xsp, Ysp, steps, int(N), params["inits"], int(rng.integers(2**31)),
                               [steps])[0]
            row.append(L.mean())
            row_se.append(L.std(ddof=1) / np.sqrt(L.size))
        mp.append(row)
        sp.append(row_se)
    out["P_points"] = Pp.astype(float)
    out["finite_P"], out["finite_P_se"] = np.array(mp), np.array(sp)
    out["model_text"] = m.describe()
    return out


def plot(data, params):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.4, 3.0), constrained_layout=True)
    t = data["t"]
    a.plot(np.maximum(t, 0.5), data["theory_t"], color="k", lw=1.5, label="N = ∞ (NTK ensemble)")
    for i, N in enumerate(data["widths"]):
        c = PALETTE[i % len(PALETTE)]
        a.errorbar(np.maximum(data["t_points"], 0.5) * (1 + 0.04 * (i - 1)), data["finite_t"][i],
                   yerr=2 * data["finite_t_se"][i], fmt="o", ms=3, color=c, label=f"N = {int(N)}")
        b.errorbar(data["P_points"] * (1 + 0.03 * (i - 1)), data["finite_P"][i], yerr=2 * data["finite_P_se"][i],
                   fmt="o", ms=3, color=c, label=f"N = {int(N)}")
    a.set_xscale("log")
    a.set_xlabel("GD step (t = 0 drawn at 0.5)")
    a.set_ylabel("test loss ½ Σ_o (f − y)² / P_test")
    a.set_title(f"{params['task']}: P = {params['P']}", fontsize=8)
    a.legend(fontsize=7)
    b.plot(data["Ps"], data["theory_P"], color="k", lw=1.5, label="N = ∞")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("training-set size P")
    b.set_title(f"after {params['steps']} GD steps", fontsize=8)
    b.legend(fontsize=7)
    return fig


_COMMON = dict(depth=1, activation="erf", sigma_w2=2.0, sigma_b2=0.05, widths=[64, 256, 1024], inits=16,
               n_times=25, n_points=6, data_seed=0)
_QUICK = dict(widths=[32, 64, 128], inits=6, n_times=12, n_points=4)

register("predict_digits_learning_curves", component="predict", compute=compute, plot=plot,
         params=dict(task="digits", P=200, P_test=300, steps=300, lr=0.5, Ps=[25, 50, 100, 200, 400, 800],
                     P_points=[50, 100, 200], **_COMMON),
         quick={**_QUICK, "P": 60, "P_test": 100, "steps": 40, "Ps": [20, 40, 80], "P_points": [20, 60]},
         caption="Learning curves on the 8×8 digits bundled with scikit-learn (pixels centred, rows scaled to "
                 "norm 8; one-hot targets − 0.1, 10 outputs): expected test loss of the infinite-width "
                 "NTK gradient-descent ensemble (limits.predict.gradient_descent, discrete GD, mean reduction, "
                 "initial-function variance included) against GD-trained finite networks of the same Model "
                 "(limits.finite.train, center=False; mean ± 2 SE over initialisations) at three widths; left: "
                 "vs GD step, right: vs training-set size after a fixed number of steps. Finite networks "
                 "approach the line as N grows (the O(1/N) bias of the mean test loss).")

register("predict_teacher_learning_curves", component="predict", compute=compute, plot=plot,
         params=dict(task="teacher", P=100, P_test=200, steps=300, lr=1.0, Ps=[10, 20, 40, 80, 160, 320],
                     P_points=[20, 80, 160], **_COMMON),
         quick={**_QUICK, "P": 40, "P_test": 60, "steps": 40, "Ps": [10, 20, 40], "P_points": [10, 40]},
         caption="Synthetic teacher y = tanh(2v·x/√8) + 0.3 sin(u·x/√8), x ~ N(0, I_8): test loss of the "
                 "infinite-width NTK gradient-descent ensemble vs GD step and vs training-set size P, against "
                 "GD-trained finite networks of the same Model at three widths (mean ± 2 SE over inits).")
