"""Kernel regression by preconditioned CG over stored tiles: ``limits.predict.kernel_regression(..., solver="cg")``.

With A = K_XX + σ²I (K the read-out NNGP, or the NTK Θ for ``kernel="ntk"``)::

    A [α, W] = [Y, K_X,S]          one block PCG run (Y's columns and the variance subset S's columns)
    mean_* = K_*X α                test rows in chunks, the cross kernel recomputed (P_test × P never stored)
    var_s = k_ss − K_sX W_s        NNGP latent variance of the subset's points
    log p(Y) = −½ Σ_o y_oᵀ α_o − (d_out/2) log det A − (P d_out/2) log 2π

The mean and the variances are exact up to the stated CG tolerance (‖b − A x‖ ≤ tol‖b‖ per column;
the recomputed true residual is reported); log det A = log det M + tr log(C⁻¹AC⁻ᵀ) is *estimated* by
stochastic Lanczos quadrature (:func:`limits.largep.pcg.lanczos_logdet`), so the log marginal likelihood
carries a standard error. For ``kernel="ntk"`` (infinite-time gradient flow, ridge σ²): mean Θ_*X α,
variance K_ss + a_s K_XX a_sᵀ − 2 a_s K_Xs with a_sᵀ = A⁻¹ Θ_Xs (needs the NNGP tiles too).

Matrix–vector products stream the stored tiles (reading a tile costs far less than recomputing it
through L layers of transcendental functions: at block 2048 a tile reads in ~20 ms and takes seconds
to compute). Driver memory: O(P·(k + r + probes·steps)) for rank k, r right-hand sides.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ..kernels.tilestore import checked_inputs, is_composition
from .pcg import Preconditioner, block_pcg, lanczos_logdet, pivoted_cholesky

__all__ = ["cg_regression"]


def auto_rank(P) -> int:
    """Default preconditioner rank, ⌈8√P⌉ capped at 2048: measured on erf MLP NNGPs (d = 8, depth 3) at
    σ² = 0.1 it keeps CG at 10–13 iterations from P = 500 to 4000, where a fixed rank 256 needs 8 → 15
    and no preconditioner 35 → 60 (tests/largep/test_pcg.py)."""
    return int(min(P, 2048, math.ceil(8 * math.sqrt(P))))


def _var_points(var, Pt):
    if isinstance(var, (bool, np.bool_)):
        return np.arange(Pt) if var else np.zeros(0, dtype=int)
    idx = np.asarray(var)
    if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0:
        raise ValueError("var must be True, False or a non-empty 1-D array of test-point indices")
    if idx.min() < 0 or idx.max() >= Pt or np.unique(idx).size != idx.size:
        raise ValueError(f"var: indices must be distinct and in [0, {Pt}), got {idx.min()}…{idx.max()}")
    return idx.astype(int)


TILE_SECONDS_PER_ENTRY_LAYER = 3e-8   # CPU per kernel entry and layer of a tile task, NNGP (erf/relu, measured
                                      # 96 s for NNGP+NTK at P = 20,000, depth 10: 4.8e-8; the NNGP alone ≈ 60 %)
TEST_CHUNK_FLOATS = 1 << 25           # test rows × P of the cross kernel held at once while predicting


def estimate(P, P_test, d, depth, n_kernels, rank, columns, probes, lanczos_steps, block) -> dict:
    """What a CG regression will need, before anything is allocated: ``driver_memory_bytes`` (the
    preconditioner's P×k factor and row batch, the CG/Lanczos vectors, the cross kernel of the variance points
    and a test chunk, the inputs, a tile being read and verified), ``disk_bytes`` (the upper-triangle tiles:
    8·(P² + Σ_a |I_a|²)/2 per kernel, diagonal tiles whole) and ``tile_cpu_seconds``
    (:data:`TILE_SECONDS_PER_ENTRY_LAYER` × (depth + 1) × P²/2 per kernel, NTK at 1.7× the NNGP). Measured
    (erf MLP, block 2048, 20 variance points): P = 4000 / 12,000 driver peak RSS 171 / 351 MiB against an
    estimate of 132 / 336 MiB plus 37 MiB of imports; disk exact."""
    block = min(int(block), int(P))
    sizes = [min(block, P - s) for s in range(0, int(P), block)]
    P, Pt = float(P), float(P_test)
    driver = 8.0 * P * (2 * rank + 32 + 6 * columns + probes * (lanczos_steps + 3) + d) + 8.0 * min(
        TEST_CHUNK_FLOATS, Pt * P) + 8.0 * Pt * d + 2 * 8.0 * block * block
    n = len(sizes)
    disk = n_kernels * (8.0 * (P * P + sum(float(s) ** 2 for s in sizes)) / 2 + 512.0 * n * (n + 1) / 2)
    cpu = TILE_SECONDS_PER_ENTRY_LAYER * (depth + 1) * P * (P + 1) / 2 * (1 + 0.7 * (n_kernels - 1))
    return {"driver_memory_bytes": driver, "disk_bytes": disk, "tile_cpu_seconds": cpu}


def _refuse_if_too_big(est, store, memory_limit, what):
    """``ValueError`` with the estimate and how to proceed when the driver would need more than ``memory_limit``
    bytes (default: half the available memory) or the tiles more disk than the store's file system has free."""
    import shutil

    from ..progress import format_seconds
    from ..readfile import human

    if memory_limit is None:
        from ..kernels.nngp import available_memory

        avail = available_memory()
        limit, src = (None, "") if avail is None else (0.5 * avail, f"half the available memory ({human(avail)})")
    else:
        limit, src = float(memory_limit), f"memory_limit = {human(memory_limit)}"
    cost = f"the tiles take ≈ {format_seconds(est['tile_cpu_seconds'])} of CPU"
    if limit is not None and est["driver_memory_bytes"] > limit:
        raise ValueError(f"{what}: the solver would hold ≈ {human(est['driver_memory_bytes'])} in this process "
                         f"(preconditioner, CG vectors, variance points), more than {src}, and {cost}; lower rank, "
                         "the variance points or probes, or raise memory_limit (CLI: --max-memory) if the memory is "
                         "there")
    probe = Path(store)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    have = sum(e.stat().st_size for k in ("nngp", "ntk") if (Path(store) / k).is_dir()
               for e in os.scandir(Path(store) / k) if e.is_file(follow_symlinks=False))
    free = shutil.disk_usage(probe).free
    if est["disk_bytes"] - have > free:
        raise ValueError(f"{what}: the kernel tiles need ≈ {human(est['disk_bytes'])} of disk in {store} "
                         f"({human(have)} already there), {human(free)} free on its file system, and {cost}; use "
                         "another store (CLI: --store) or fewer training points")


def cg_regression(model, X_train, Y, X_test, kernel, noise, *, var=True, store=None, block=2048, backend="serial",
                  scheduler=None, n_workers=None, memory_limit="2GiB", tol=1e-10, maxiter=1000, rank=None,
                  probes=16, lanczos_steps=60, seed=0, progress=None, max_memory=None):
    """(mean, var, lml, diagnostics) — see the module docstring; called by :func:`limits.predict.kernel_regression`.
    ``memory_limit`` is each dask worker's; ``max_memory`` this process's (:func:`estimate`, checked first)."""
    from ..kernels.tilestore import store_dir, store_lock

    what = "limits.predict.kernel_regression(solver='cg')"
    if not noise > 0:
        raise ValueError(f"{what}: needs noise > 0 (without it K_XX's condition number is beyond what CG "
                         "resolves in float64; solver='cholesky' handles noise = 0)")
    ntk = kernel == "ntk"
    kname = "ntk" if ntk else "nngp"
    idx = _var_points(var, X_test.shape[0])
    get = ("ntk", "nngp") if (ntk and idx.size) else (kname,)
    m, get, X = checked_inputs(model, get, X_train, what)
    P, Pt = X.shape[0], X_test.shape[0]
    rank = auto_rank(P) if rank is None else int(rank)
    d = int(np.prod(X.shape[1:]))
    est = estimate(P, Pt, d, getattr(m, "depth", 0), len(get), rank, Y.shape[1] + idx.size, probes, lanczos_steps,
                   block)
    if is_composition(m):                 # a composition: its tiles' time is the layer rules' lower bound
        from ..kernels.composed import estimate as composed_estimate

        est["tile_cpu_seconds"] = composed_estimate(m, X.shape[1:], P, P, "ntk" in get, True)["seconds"]
    tmp = tempfile.mkdtemp(prefix="limits-tiles-") if store is None else None
    try:
        _refuse_if_too_big(est, tmp or store, max_memory, what)
        with store_lock(store_dir(tmp or store)):
            return _solve(m, X, Y, X_test, ntk, kname, idx, get, noise, tmp, tmp or store, est, dict(
                block=block, backend=backend, scheduler=scheduler, n_workers=n_workers, memory_limit=memory_limit,
                progress=progress), tol, maxiter, rank, probes, lanczos_steps, seed, what)
    except ValueError as exc:            # the tile store's messages name its argument here: store
        if str(exc).startswith("out: "):
            raise ValueError("store: " + str(exc)[len("out: "):]) from None
        raise
    except KeyboardInterrupt as exc:
        if tmp is None or not str(exc):
            raise
        raise KeyboardInterrupt("the tiles were in a temporary store, now removed: give a store directory (CLI: "
                                "--store DIR) to make a run resumable") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _solve(m, X, Y, X_test, ntk, kname, idx, get, noise, tmp, store, est, fill, tol, maxiter, rank, probes,
           lanczos_steps, seed, what):
    """The tiles, the preconditioner, block PCG, the predictions and the log-determinant (module docstring)."""
    from ..kernels.blocked import kernel_blocked

    P = X.shape[0]
    sec = {}
    t0 = time.perf_counter()
    ts = kernel_blocked(m, X, get=get, out=Path(store), **fill)
    sec["tiles"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    rows = lambda idx: getattr(kernel_blocked(m, X[idx], get=(kname,), X2=X, progress=False), kname)  # noqa: E731
    Lk, dres, piv = pivoted_cholesky(ts.diagonal(kname), rows, rank)
    pre = Preconditioner(Lk, dres + noise)
    sec["preconditioner"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    Ks = kernel_blocked(m, X_test[idx], get=get, X2=X, progress=False) if idx.size else None
    rhs = Y if Ks is None else np.hstack([Y, getattr(Ks, kname).T])
    sol = block_pcg(lambda V: ts.matvec(V, kname, shift=noise), rhs, pre.solve, tol=tol, maxiter=maxiter)
    if not sol.converged.all():
        raise RuntimeError(f"{what}: CG did not reach tol = {tol:g} in {maxiter} iterations (largest relative "
                           f"residual {sol.history[-1]:.3g}); raise maxiter or rank, or use solver='cholesky'")
    alpha, W = sol.x[:, :Y.shape[1]], sol.x[:, Y.shape[1]:]
    sec["cg"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    mean, vs = _predict(m, X, X_test, ts, kname, ntk, idx, Ks, alpha, W)
    sec["predict"] = time.perf_counter() - t0

    lml = lml_se = ld = ld_se = float("nan")
    steps = 0
    if not ntk:
        t0 = time.perf_counter()
        B = lambda V: pre.inv_factor(ts.matvec(pre.inv_factor_t(V), "nngp", shift=noise))  # noqa: E731
        trlog, ld_se, _, steps = lanczos_logdet(B, P, probes=probes, steps=lanczos_steps, rng=seed)
        ld = pre.logdet + trlog
        d_out = Y.shape[1]
        lml = float(-0.5 * np.einsum("po,po->", Y, alpha) - 0.5 * d_out * ld - 0.5 * d_out * P * math.log(2 * math.pi))
        lml_se = 0.5 * d_out * ld_se
        sec["logdet"] = time.perf_counter() - t0
    r = rhs.shape[1]
    diag = {"solver": "cg", "tol": float(tol), "iterations": int(sol.iterations.max()),
            "iterations_per_column": sol.iterations.tolist(), "history": list(sol.history),
            "true_relative_residual": float(sol.true_residual.max()), "rank": int(Lk.shape[1]),
            "requested_rank": int(rank), "pivots": [int(i) for i in piv], "var_points": idx.tolist(),
            "logdet": float(ld), "logdet_se": float(ld_se), "lanczos_steps": int(steps), "probes": int(probes),
            "log_marginal_likelihood_se": float(lml_se), "estimated": [] if ntk else ["log_marginal_likelihood"],
            "exact_to_tolerance": ["mean", "var"], "tiles": dict(ts.diagnostics), "store": None if tmp else str(store),
            "block": int(ts.block), "seconds": sec, "estimate": est,
            "driver_memory_bytes": 8.0 * P * (2 * Lk.shape[1] + 6 * r + probes * (steps + 3) + X.shape[1])}
    return mean, vs, lml, diag


def _predict(m, X, X_test, ts, kname, ntk, idx, Ks, alpha, W):
    """Test means in chunks (the cross kernel recomputed, never P_test × P at once) and the variance points'
    latent variances (module docstring)."""
    from ..kernels.blocked import kernel_blocked, kernel_diag

    P, Pt = X.shape[0], X_test.shape[0]
    mean = np.empty((Pt, alpha.shape[1]))
    chunk = max(1, TEST_CHUNK_FLOATS // P)
    for s in range(0, Pt, chunk):
        S = slice(s, min(s + chunk, Pt))
        mean[S] = getattr(kernel_blocked(m, X_test[S], get=(kname,), X2=X, progress=False), kname) @ alpha
    if not idx.size:
        return mean, None
    kss = kernel_diag(m, X_test[idx], ("nngp",))["nngp"]
    if not ntk:
        return mean, kss - np.einsum("sp,ps->s", Ks.nngp, W)
    KW = ts.matvec(W, "nngp")
    return mean, kss + np.einsum("ps,ps->s", W, KW) - 2.0 * np.einsum("ps,sp->s", W, Ks.nngp)
