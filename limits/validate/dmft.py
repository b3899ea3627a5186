"""DMFT vs finite mean-field networks trained identically (docs/theory/dmft.rst §4, docs/theory/finite.rst §4).

Finite nets: ``limits.finite.concretise`` at the mean-field point of seed 000 Table 2
(a_1 = 0, a_l = ½, b = c = 0, d = ½, η = η0 γ0² N), full-batch GD on the *sum* loss ½Σ_μΔ_μ²
(``reduction="sum"``) with η0 = dt, so one GD step is one DMFT step exactly. Initial-output
fluctuations f_0 = O(1/(γ0√N)) are handled by **centring** (``center=True``: the net trains
f − f_0, which leaves the N → ∞ limit unchanged), and the remaining O(N^{-1/2}) fluctuations by
averaging over S seeds (standard errors over seeds).

Statistics: per network the RMS deviation from the DMFT trajectory, e(N) = rms_{t,μ}(f_N − f_∞)
(with the DMFT's Monte Carlo variance, estimated from R replicas, subtracted), is averaged over seeds and fitted on a log–log scale against N (expected slope −½, the
fluctuation scale); the seed-mean outputs at the final time and the largest N are z-tested against the DMFT (the
Monte Carlo error of the nonlinear DMFT, from R = 8 independent replicas, added in quadrature).
"""
from __future__ import annotations

import numpy as np

from ..stats import loglog_fit, mean_se, signed
from . import Case, register_case

MF = {"convention": "variance", "input": {"a": 0, "b": 0, "c": 0}, "hidden": {"a": 0.5, "b": 0, "c": 0},
      "output": {"a": 0.5, "b": 0, "c": 0}, "d": 0.5}


def finite_trajectories(X, y, depth, activation, gamma0, dt, steps, N, n_inits, seed):
    """(steps+1, S, P) outputs of centred mean-field nets with DMFT depth ``depth`` trained by GD."""
    from ..checking.dmft import trained_outputs
    from ..model import mlp

    # the DMFT's ``depth`` hidden layers = depth − 1 hidden N×N blocks of a mean-field Model
    model = mlp(X.shape[1], depth - 1, activation=activation, parameterisation="MF", gamma0=gamma0, lr=dt)
    return trained_outputs(model, X, y, steps, N, n_inits, seed)


def dmft_reference(X, y, depth, activation, gamma0, dt, steps, M, replicas, seed):
    """DMFT trajectory and its MC standard error (zeros for the exact linear solver)."""
    from .. import dmft

    if activation == "linear":
        d = dmft.solve(X, y, depth=depth, gamma0=gamma0, dt=dt, steps=steps)
        return d.f, np.zeros_like(d.f)
    runs = np.array([dmft.solve(X, y, depth=depth, activation=activation, gamma0=gamma0, dt=dt, steps=steps,
                                M=M, seed=seed + r).f for r in range(replicas)])
    return mean_se(runs)


def convergence_study(X, y, depth, activation, gamma0, dt, steps, widths, n_inits, M=4000, replicas=4,
                      seed=0):
    """Gap between finite nets and the DMFT as N grows; returns a dict of arrays and the rate fit."""
    f_inf, f_inf_se = dmft_reference(X, y, depth, activation, gamma0, dt, steps, M, replicas, seed)
    rms_mean, rms_se, gap_mean, last = [], [], [], None
    for i, N in enumerate(widths):
        fN = finite_trajectories(X, y, depth, activation, gamma0, dt, steps, N, n_inits, seed + 100 + i)
        dev = fN - f_inf[:, None, :]
        # per-network RMS deviation; the DMFT's own MC error adds |f̂_∞ − f_∞|² ≈ se² on average,
        # which is subtracted so that it does not masquerade as a finite-width floor
        ms = np.mean(dev ** 2, axis=(0, 2)) - np.mean(f_inf_se ** 2)
        rms = np.sqrt(np.maximum(ms, 1e-30))
        m, s = mean_se(rms)
        rms_mean.append(m)
        rms_se.append(s)
        gap_mean.append(float(np.sqrt(np.mean((fN.mean(axis=1) - f_inf) ** 2))))
        last = fN
    fit = loglog_fit(np.asarray(widths, float), np.asarray(rms_mean), yerr=np.asarray(rms_se))
    fm, fs = mean_se(last, axis=1)
    return dict(widths=np.asarray(widths), rms=np.asarray(rms_mean), rms_se=np.asarray(rms_se),
                gap_of_mean=np.asarray(gap_mean), f_inf=f_inf, f_inf_se=f_inf_se, f_last_mean=fm,
                f_last_se=fs, fit=fit)


def _toy(P, D, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    y = rng.choice(np.array([-1.0, 1.0]), size=P)
    return X, y


def _case(name, res, detail):
    se = np.sqrt(res["f_last_se"] ** 2 + res["f_inf_se"] ** 2)
    fit = res["fit"]
    # z-test on the final-time outputs (P entries: few comparisons, so |z| ≤ 4 is a real test)
    c = Case.statistical("dmft", name, res["f_inf"][-1], res["f_last_mean"][-1], se[-1], rate=fit,
                         rate_expected=-0.5,
                         detail=detail + f"; rms gap per net {np.array2string(res['rms'], precision=4)} at N = "
                                         f"{list(res['widths'])}; slope {signed(fit.slope, 3)} "
                                         f"[{signed(fit.ci_low, 3)}, {signed(fit.ci_high, 3)}] (expected −1/2)")
    return c


CASES = {
    # name: (depth, activation, P, D, gamma0, dt, steps, widths_full, widths_quick, S_full, S_quick)
    "deep linear, seed-000 L = 5 weight layers (depth 4), γ0 = 1": (4, "linear", 6, 10, 1.0, 0.02, 20,
                                                                    [128, 256, 512, 1024, 2048],
                                                                    [128, 256, 512, 1024], 8, 6),
    "two-layer tanh, γ0 = 1": (1, "tanh", 4, 6, 1.0, 0.1, 10, [256, 512, 1024, 2048, 4096],
                               [128, 256, 512, 1024, 2048], 16, 16),
    "three-layer tanh (depth 2), γ0 = 1": (2, "tanh", 3, 5, 1.0, 0.1, 8, [128, 256, 512, 1024, 2048],
                                           [128, 256, 512, 1024], 24, 16),     # full: 16 inits gave 2.07 %
}


def _make(name):
    depth, act, P, D, g0, dt, steps, wf, wq, Sf, Sq = CASES[name]

    def run(rng, quick):
        X, y = _toy(P, D, 7)
        res = convergence_study(X, y, depth, act, g0, dt, steps, wq if quick else wf, Sq if quick else Sf,
                                M=(4000 if depth == 1 else 3000) if quick else 8000, replicas=8,
                                seed=int(rng.integers(2**31)))
        return _case(name, res, f"P={P}, D={D}, dt=η0={dt}, {steps} GD steps, centred outputs")

    return run


for _name in CASES:
    register_case("dmft", f"finite nets → DMFT: {_name}")(_make(_name))
