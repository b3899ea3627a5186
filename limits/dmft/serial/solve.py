"""``limits.dmft.solve(X, y, model=limits.serial(...), gamma0=..., T=..., dt=...)``: the DMFT of a composition
(docs/theory/dmft.rst §6) — replicas of the one-pass Monte Carlo march, combined into means and standard errors."""
from __future__ import annotations

import time

import numpy as np

from ...checks import finite_array, positive_float, positive_int
from ..grid import make_grid
from .._threads import blas_limited
from ..linear import StepTooLarge, check_stable
from . import cost as _cost
from .chain import build_chain, refuse_kinks
from .replica import run_deep, run_two_layer


LONG_SECONDS = 30.0         # estimated time from which a solve reports progress by default (progress=None)


def _inputs(X, y, X_test):
    from ...kernels.composed import composition_inputs

    X = composition_inputs(X, "X")
    y = finite_array(y, "y")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape (P,) = ({X.shape[0]},) matching X's rows, got {y.shape}")
    if X_test is None:
        return X, y, None
    Xs = composition_inputs(X_test, "X_test")
    if Xs.shape[1:] != X.shape[1:]:
        raise ValueError(f"X_test has shape {Xs.shape[1:]} per input but X has {X.shape[1:]}")
    return X, y, Xs


def _combine(runs, key):
    """Mean and standard error over replicas of one output (arrays, or tuples of arrays)."""
    vals = [r[key] for r in runs]
    if isinstance(vals[0], tuple):
        pairs = [_combine([{key: v[i]} for v in vals], key) for i in range(len(vals[0]))]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    a = np.stack(vals)
    se = a.std(axis=0, ddof=1) / np.sqrt(a.shape[0]) if a.shape[0] > 1 else np.zeros_like(a[0])
    return a.mean(axis=0), se


def _progress(on, total):
    if not on:
        return None, None
    from ...progress import progress as _bar

    bar = _bar(total=total, desc="dmft (composition) time steps × replicas")
    return bar, (lambda: bar.update(1))


@blas_limited
def solve_serial(X, y, comp, gamma0=1.0, T=None, dt=None, steps=None, method="gd", X_test=None, M=500,
                 replicas=16, seed=0, progress=None, keep_spatial="auto", max_memory=None,
                 max_seconds=None, ablate=None):
    """DMFT of composition ``comp`` (module docstring; the public entry is :func:`limits.dmft.solve`)."""
    t_start, c_start = time.perf_counter(), time.process_time()
    if method != "gd":
        raise ValueError(f"method: compositions are solved for exact discrete GD (method='gd'; a small dt approaches "
                         f"gradient flow), got {method!r}")
    if dt is None and (T is None or steps is None):
        raise ValueError("dt: a composition has no learning rate; give dt (the GD step) and T or steps")
    if ablate not in (None, "spatial"):
        raise ValueError(f"ablate must be None or 'spatial', got {ablate!r}")
    X, y, Xs = _inputs(X, y, X_test)
    gamma0 = positive_float(gamma0, "gamma0")
    M = positive_int(M, "M", minimum=2)
    replicas = positive_int(replicas, "replicas", minimum=1)
    grid = make_grid(T, dt, steps)
    P = X.shape[0]
    Xa = X if Xs is None else np.concatenate([X, Xs])
    chain = build_chain(comp, Xa)
    refuse_kinks(chain)
    est = _cost.estimate(chain, grid.n_t, M, replicas)
    keep = keep_spatial if keep_spatial != "auto" else est["kept_bytes"] <= _cost.KEEP_SPATIAL_BYTES
    _cost.check_cost({**est, "bytes": est["bytes"] + (est["kept_bytes"] if keep else 0.0)}, max_memory, max_seconds)
    lazy = _lazy_ntk(comp, Xa)
    lam0 = float(np.linalg.eigvalsh(lazy[:P, :P])[-1])
    if grid.dt * lam0 >= 2.0:
        raise StepTooLarge(f"dt too large for GD: dt*lambda_max(NTK(0)) = {grid.dt * lam0:.3g} >= 2")
    mask = np.concatenate([np.ones(P), np.zeros(Xa.shape[0] - P)])
    yy = np.concatenate([y, np.zeros(Xa.shape[0] - P)])
    run = run_two_layer if chain.L == 1 else run_deep
    if progress is None:                     # a line every LIMITS_PROGRESS_INTERVAL s once a solve is long
        progress = est["seconds"] > LONG_SECONDS
    bar, tick = _progress(progress, grid.n_t * replicas)
    runs, diags = [], []
    for child in np.random.SeedSequence(int(seed)).spawn(replicas):
        out, dg = run(chain, yy, mask, gamma0, grid.dt, grid.n_t, M, np.random.default_rng(child),
                      keep, ablate=ablate == "spatial", tick=tick)
        runs.append(out)
        diags.append(dg)
    if bar is not None:
        bar.close()
    return _result(X, y, Xs, comp, chain, grid, gamma0, M, replicas, runs, diags, lazy, est, keep,
                   time.perf_counter() - t_start, time.process_time() - c_start)


def _lazy_ntk(comp, Xa):
    from ...kernels.composed import kernel

    return kernel(comp, Xa, get=("ntk",)).ntk


def _result(X, y, Xs, comp, chain, grid, gamma0, M, replicas, runs, diags, lazy, est, keep, wall, cpu):
    from ..result import SerialDMFTResult

    P = X.shape[0]
    f_all, f_se_all = _combine(runs, "f")
    if not np.all(np.isfinite(f_all)):
        from ..nonlinear import DMFTNotConverged

        raise DMFTNotConverged("DMFT of the composition produced non-finite outputs (dt or gamma0 too large)")
    ntk, ntk_se = _combine(runs, "ntk")
    loss_r = np.stack([0.5 * np.sum((r["f"][:, :P] - y) ** 2, axis=1) for r in runs])
    loss_se = loss_r.std(axis=0, ddof=1) / np.sqrt(replicas) if replicas > 1 else np.zeros(grid.n_t)
    Phi_pool, Phi_pool_se = _combine(runs, "Phi_pool")
    _, change_se = _combine([{"d": r["Phi_pool"] - r["Phi_pool"][:, :1]} for r in runs], "d")
    G_pool, G_pool_se = _combine(runs, "G_pool")
    check_stable(ntk[-1][:P, :P], grid.dt, grid.n_t - 1)
    spatial = {}
    if keep:
        spatial["Phi"], spatial["Phi_se"] = _combine(runs, "Phi")
        spatial["G"], spatial["G_se"] = _combine(runs, "G")
    dropped = max(d["dropped"] for d in diags)
    test = {}
    if Xs is not None:
        test = dict(X_test=Xs, f_test=f_all[:, P:], f_test_se=f_se_all[:, P:], ntk_test=ntk[:, P:, :P],
                    ntk_test_se=ntk_se[:, P:, :P])
    reps = {"f": np.stack([r["f"][:, :P] for r in runs]), "loss": loss_r,
            "Phi_pool": np.stack([r["Phi_pool"][:, :, :P, :P] for r in runs])}
    if Xs is not None:
        reps["f_test"] = np.stack([r["f"][:, P:] for r in runs])
    msg = (f"one-pass causal march (no fixed-point iteration), {replicas} replicas × M = {M} paths; source factors "
           f"dropped eigenvalues ≤ {dropped:.1e} of the kernel scale; chain {chain.describe()}")
    cost = {"estimate_bytes": est["bytes"], "estimate_seconds": est["seconds"], "estimate_flops": est["flops"],
            "cpu_seconds": cpu, "kept_spatial": bool(keep)}
    return SerialDMFTResult(
        t=grid.t, f=f_all[:, :P], f_se=f_se_all[:, :P], loss=0.5 * np.sum((f_all[:, :P] - y) ** 2, axis=1),
        loss_se=loss_se, y=y, ntk=ntk[:, :P, :P], ntk_se=ntk_se[:, :P, :P], Phi_pool=Phi_pool[:, :, :P, :P],
        Phi_pool_se=Phi_pool_se[:, :, :P, :P], Phi_change_se=change_se[:, :, :P, :P],
        G_pool=G_pool[:, :, :P, :P], G_pool_se=G_pool_se[:, :, :P, :P],
        ntk_lazy=lazy[:P, :P], gamma0=gamma0, dt=grid.dt, replicas=replicas, mc_samples=M, composition=comp.to_dict(),
        chain=chain.describe(), positions=tuple((s.S_out, mp.S_x) for s, mp in zip(chain.stages, chain.maps)),
        residual=float(dropped), message=msg, wall_time_s=wall, cost=cost,
        inputs={"model": comp.to_dict(), "X": X}, replica_values=reps, **spatial, **test)
