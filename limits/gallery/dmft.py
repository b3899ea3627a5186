"""DMFT figures: seed 000 Fig. A.3 (learning regimes vs γ0, N = ∞ curves) and the finite-width
convergence of mean-field networks to the DMFT."""
from __future__ import annotations

import numpy as np

from . import register
from ..stats import signed
from ._util import log_ticks


def _toy(P, D, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, D)), rng.choice(np.array([-1.0, 1.0]), size=P)


# ---------------------------------------------------------------- seed 000 Fig. A.3
def compute_a3(params, rng):
    import limits.dmft as dm

    X, y = _toy(params["P"], params["D"], params["data_seed"])
    dt = dm.gd_time_step(params["eta0"], params["P"], loss="mean")
    H = params["steps"]
    out = {"steps": np.arange(H + 1), "gammas": np.asarray(params["gammas"], float), "dt": dt}
    losses, finite, stride = [], [], []
    cap = params["max_grid"]
    for g in params["gammas"]:
        # coarsest grid (m GD steps per point) that is stable; exact GD (m = 1) or extrapolation in
        # the step from grids m·s, m·s/2 to s. The horizon of a curve is limited to m·cap steps.
        curve = np.full(H + 1, np.nan)
        for m in params["strides"]:
            n = min(H, m * cap * (2 if m == 1 else 1)) // m   # the exact run costs like a fine grid
            try:
                kw = dict(gd_step=dt) if m > 1 else {}
                d = dm.solve(X, y, depth=params["L"] - 1, gamma0=g, dt=m * dt, steps=n, **kw)
            except dm.StepTooLarge:
                continue
            curve[: n * m + 1: m] = d.loss_mean
            stride.append(m)
            break
        else:
            stride.append(0)
        losses.append(curve)
    out["loss_dmft"] = np.array(losses)
    out["stride"] = np.array(stride)
    if params.get("finite_N"):
        from ..finite import concretise, train
        from ..validate.dmft import MF

        for g in params["gammas"]:
            net = concretise(MF, N=params["finite_N"], L=params["L"], d_in=X.shape[1], activation="linear",
                             eta0=params["eta0"], gamma0=g)
            tr = train(net, X, y, params["steps"], n_inits=params["finite_seeds"],
                       seed=int(rng.integers(2**31)), optimizer="gd", reduction="mean", center=False,
                       record_features=False, keep_weights=False)
            finite.append(tr.loss.mean(axis=1))
        out["loss_finite"] = np.array(finite)
    return out


def plot_a3(data, params):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, ax = plt.subplots()
    for i, g in enumerate(data["gammas"]):
        c = PALETTE[i % len(PALETTE)]
        ok = np.isfinite(data["loss_dmft"][i])
        ax.plot(data["steps"][ok], data["loss_dmft"][i][ok], color=c, label=f"γ0 = {g:g}")
        if "loss_finite" in data:
            ax.plot(data["steps"], data["loss_finite"][i], color=c, ls="--", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("GD step")
    ax.set_ylabel("MSE loss (1/2P) Σ (f − y)²")
    extra = f"; dashed: BP nets N = {params['finite_N']}" if params.get("finite_N") else ""
    ax.set_title(f"DMFT (N = ∞), linear MLP L = {params['L']}, P = {params['P']}{extra}", fontsize=8)
    ax.legend(ncol=2)
    log_ticks(fig)
    return fig


register("seed000_figA3_dmft", component="dmft", compute=compute_a3, plot=plot_a3,
         params=dict(P=20, D=40, L=5, eta0=0.025, gammas=[0.1, 0.5, 1.0, 2.0, 3.0, 4.0], steps=400,
                     strides=[8, 4, 2, 1], max_grid=50, data_seed=0, finite_N=512, finite_seeds=2),
         quick=dict(P=10, steps=160, max_grid=20, finite_N=0),
         caption="Seed 000 Fig. A.3 setting: deep linear mean-field MLP (L = 5 weight layers = DMFT depth 4), "
                 "toy task x ~ N(0, I_40), y = ±1, P examples (P = 20 in the seed; params give the value run), full-batch GD on the mean loss with η = η0 γ0² N, "
                 "η0 = 0.025 (one step = DMFT time η0/P), γ0 ∈ {0.1, 0.5, 1, 2, 3, 4}: infinite-width GD "
                 "trajectories from limits.dmft.solve on the coarsest stable grid of m ∈ {8, 4, 2, 1} GD steps "
                 "per point (m > 1: extrapolated in the step from grids m·s and m·s/2 to s; m = 1 exact), "
                 "each curve shown up to m·max_grid steps (2·max_grid for m = 1); larger γ0 learns faster. "
                 "Dashed: finite BP networks (uncentred, mean over seeds) when finite_N > 0.",
         seed_ref="seed 000 Fig. A.3")


# ---------------------------------------------------------------- finite-N convergence
def compute_conv(params, rng):
    from ..validate.dmft import convergence_study, finite_trajectories

    X, y = _toy(params["P"], params["D"], params["data_seed"])
    res = convergence_study(X, y, params["depth"], params["activation"], params["gamma0"], params["dt"],
                            params["steps"], params["widths"], params["seeds"], M=params["M"],
                            replicas=params["replicas"], seed=int(rng.integers(2**31)))
    fit = res.pop("fit")
    res.update(slope=fit.slope, slope_lo=fit.ci_low, slope_hi=fit.ci_high, intercept=fit.intercept)
    res["t"] = params["dt"] * np.arange(params["steps"] + 1)
    curves = []
    for N in params["widths"][::2]:
        f = finite_trajectories(X, y, params["depth"], params["activation"], params["gamma0"], params["dt"],
                                params["steps"], N, 1, int(rng.integers(2**31)))
        curves.append(0.5 * np.sum((f[:, 0, :] - y) ** 2, axis=1))
    res["curve_widths"] = np.asarray(params["widths"][::2])
    res["curve_loss"] = np.array(curves)
    res["loss_inf"] = 0.5 * np.sum((res["f_inf"] - y) ** 2, axis=1)
    return res


def plot_conv(data, params):
    from ..style import PALETTE, pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.2, 3.0))
    for i, N in enumerate(data["curve_widths"]):
        a.plot(data["t"], data["curve_loss"][i], color=PALETTE[(i + 1) % len(PALETTE)], lw=1, label=f"N = {N}")
    a.plot(data["t"], data["loss_inf"], color="k", lw=1.6, label="DMFT")
    a.set_xlabel("t (GD step × η0)")
    a.set_ylabel("½ Σ (f − y)²")
    a.legend()
    N = data["widths"].astype(float)
    b.errorbar(N, data["rms"], yerr=data["rms_se"], fmt="o", color=PALETTE[0], label="rms_t,μ |f_N − f_∞|")
    b.plot(N, np.exp(data["intercept"]) * N ** data["slope"], color=PALETTE[0], lw=1,
           label=f"slope {signed(data['slope'])} [{signed(data['slope_lo'])}, {signed(data['slope_hi'])}]")
    b.plot(N, data["gap_of_mean"], "s", color=PALETTE[1], ms=3, label="|mean_seeds f_N − f_∞|")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("width N")
    b.legend(fontsize=6.5)
    fig.suptitle(f"{params['activation']} depth {params['depth']}, γ0 = {params['gamma0']}, P = {params['P']}: "
                 f"centred mean-field nets → DMFT", fontsize=8)
    log_ticks(fig)
    return fig


register("dmft_finite_convergence", component="dmft", compute=compute_conv, plot=plot_conv,
         params=dict(P=4, D=6, depth=1, activation="tanh", gamma0=1.0, dt=0.1, steps=10,
                     widths=[256, 512, 1024, 2048, 4096], seeds=16, M=4000, replicas=8, data_seed=7),
         quick=dict(widths=[128, 256, 512, 1024], seeds=8, M=2000),
         caption="Two-layer tanh mean-field networks (centred outputs, GD step η0 = dt = 0.1 on ½Σ(f−y)², "
                 "γ0 = 1, P = 4, D = 6) vs the Monte Carlo DMFT (8 replicas × M paths): left, loss curves of one "
                 "network per width and the DMFT; right, per-network RMS deviation from the DMFT trajectory "
                 "(mean ± SE over seeds) with its log–log fit (expected slope −1/2) and the deviation of the "
                 "seed-averaged trajectory.",
         seed_ref="docs/theory/dmft.rst §4")
