"""NFD benchmarks (docs/performance.rst): particle solver K = 20 SGD steps, L = 64, M = 10⁴ (< 60 s,
< 4 GB), the O(K² L M) cost law (fitted exponents), and the adaptive kernel ODE."""
from __future__ import annotations

import resource
import time

import numpy as np

from _timing import timed




def _task(K, d=10, P=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((K + P, d))
    X *= np.sqrt(d) / np.linalg.norm(X, axis=1, keepdims=True)
    y = np.sin(X[:K, 0])
    return X[:K], y, X[K:]


def run(quick: bool) -> list[dict]:
    try:
        from limits.finite._blas import blas_threads
    except ImportError:                      # pragma: no cover
        import contextlib

        blas_threads = contextlib.nullcontext
    with blas_threads():                     # one BLAS thread: spinning threads distort CPU times
        return _run(quick)


def _run(quick: bool) -> list[dict]:
    from limits.finite.gia import online_sgd
    from limits.nfd import kernel_ode, residual_recursion
    from limits.nfd.training import memory_estimate, train_particles
    from limits.stats import loglog_fit

    rows = []
    # 1. headline workload ---------------------------------------------------------------
    K, L, M = (20, 64, 10_000) if not quick else (10, 32, 4000)
    Xtr, ytr, Xte = _task(K)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0 = time.process_time()
    t_part, tp = timed(lambda: train_particles(Xtr, ytr, Xte, L=L, M=M, seed=0))
    cpu_part = time.process_time() - c0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n_base = 1024 if not quick else 512
    t_fin, _ = timed(lambda: online_sgd(Xtr, ytr, Xte, n=n_base, L=L, mode="decoupled", seed=0, store_gb=1.5))
    rows.append({"name": f"NFD particles K={K}, L={L}, M={M}", "seconds": t_part, "baseline_seconds": t_fin,
                 "ratio": t_part / t_fin, "target": "< 60 s, < 4 GB",
                 "note": f"baseline: decoupled finite ResNet width {n_base} (same K, L; the particle run has the law "
                         f"of width {M}); solver memory {tp.memory_bytes / 2**30:.2f} GB (estimate), "
                         f"peak RSS growth {(rss1 - rss0) / 2**20:.2f} GB; process CPU time {cpu_part:.1f} s "
                         f"(wall time includes waiting on a shared machine)"})
    # 2. cost law O(K² L M) ----------------------------------------------------------------
    base = dict(K=16, L=16, M=4000) if not quick else dict(K=8, L=8, M=1000)
    grids = {"K": [8, 16, 32, 64] if not quick else [4, 8, 16],
             "L": [8, 16, 32, 64] if not quick else [4, 8, 16],
             "M": [2000, 4000, 8000, 16000] if not quick else [500, 1000, 2000]}
    expected = {"K": 2.0, "L": 1.0, "M": 1.0}
    for var, vals in grids.items():
        ts = []
        for v in vals:
            p = dict(base, **{var: v})
            Xk, yk, Xt = _task(p["K"])
            best = np.inf
            for _ in range(2):                        # min CPU time of 2 runs (robust to a shared machine)
                c0 = time.process_time()
                train_particles(Xk, yk, Xt, L=p["L"], M=p["M"], seed=1, joint_eval=False)
                best = min(best, time.process_time() - c0)
            ts.append(best)
        f = loglog_fit(vals, ts)
        extra = ""
        if var == "K":                                # two-term model t = a K + b K² (per-pass + pairwise work)
            Kv = np.asarray(vals, float)
            coef, *_ = np.linalg.lstsq(np.stack([Kv, Kv ** 2], 1), np.asarray(ts), rcond=None)
            extra = f"; fit t = a K + b K²: a = {coef[0]:.2e} s, b = {coef[1]:.2e} s (K² term dominates for K > {coef[0] / max(coef[1], 1e-300):.0f})"
        rows.append({"name": f"NFD cost exponent in {var}", "seconds": float(ts[-1]), "baseline_seconds": float(ts[0]),
                     "ratio": float(ts[-1] / ts[0]), "target": f"exponent ≈ {expected[var]:g} (O(K² L M))",
                     "note": f"CPU-time exponent {f.slope:.2f} [{f.ci_low:.2f}, {f.ci_high:.2f}] over {var} = {vals}; "
                             f"others {base}; seconds/baseline = CPU time at the largest/smallest {var}{extra}"})
    # 3. kernel ODE ----------------------------------------------------------------------
    P = 200 if not quick else 60
    rng = np.random.default_rng(0)
    X = rng.standard_normal((P, 5))
    t_ode, k = timed(lambda: kernel_ode(X, T=1.0, activation="erf", error_estimate=False))
    t_eul, r = timed(lambda: residual_recursion(X, 100, 1.0, "erf"))
    rows.append({"name": f"kernel ODE erf P={P} (rtol 1e-10, with backward kernel)", "seconds": t_ode,
                 "baseline_seconds": t_eul, "ratio": t_ode / t_eul, "target": "seconds",
                 "note": f"baseline: Euler recursion L=100 (error {np.abs(r.Sigma[-1] - k.Sigma).max():.1e}); "
                         f"ODE nfev {k.nfev}"})
    return rows


if __name__ == "__main__":
    import sys

    for row in run("--quick" in sys.argv):
        print(f"{row['name']:55s} {row['seconds']:8.2f}s  base {row['baseline_seconds']:8.2f}s  "
              f"ratio {row['ratio']:7.2f}  [{row['target']}]  {row['note']}")
