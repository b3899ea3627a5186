"""Benchmarks for limits.pc (performance.md):

* linear PC equilibrium (F*, z*, S), N = 1024, L = 64, batch 64: target < 1 s;
* the same at N = 256, H = 64 against the dense-Hessian route (assemble H_z, dense Cholesky
  solve): target ratio ≥ 100×;
* κ(H_z) at N = H = 512 (SP, μPC, 1-skip): target < 5 min and < 8 GB, against dense eigvalsh
  at a size the dense route can still handle.

``run(quick=True)`` uses smaller sizes (N = 256, L = 16; dense route at N = 128, H = 32; κ at 128).
"""
from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np

from _timing import timed
import scipy.linalg as sla




def _net(N, H, d_in, d_out, seed):
    from limits import pc

    return pc.init_weights(N, H, "sp", d_in=d_in, d_out=d_out, seed=seed)


def bench_equilibrium(N, L, B, d_out=10, d_in=32):
    from limits import pc

    W, a = _net(N, L - 1, d_in, d_out, 0)
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((B, d_in)), rng.standard_normal((B, d_out))
    c0 = time.process_time()
    t, e = timed(lambda: pc.equilibrium(W, X, Y, a), repeat=2)
    cpu = (time.process_time() - c0) / 2
    return {"name": f"pc equilibrium N={N} L={L} B={B} d_out={d_out}", "seconds": t, "baseline_seconds": None,
            "ratio": None, "target": "< 1 s",
            "note": f"F* = {e.energy:.6g}; CPU {cpu:.2f} s per call (1 BLAS thread); cost O(L N² (B + d_out))"}


def bench_vs_dense(N, H, B=16, d_out=10, d_in=32):
    from limits import pc

    W, a = _net(N, H, d_in, d_out, 2)
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((B, d_in)), rng.standard_normal((B, d_out))
    t_fast, e = timed(lambda: pc.equilibrium(W, X, Y, a), repeat=3)

    def dense():
        net = pc.make_net(W, a)
        lay = pc.layout(net)
        Hd = pc.activity_hessian(W, a).toarray()
        b = pc.rhs(net, lay, X, Y)
        return sla.cho_solve(sla.cho_factor(Hd, lower=True, overwrite_a=True, check_finite=False), b)

    t_dense, zd = timed(dense)
    zf = np.concatenate([z.T for z in e.z])
    err = float(np.max(np.abs(zf - zd)) / np.max(np.abs(zd)))
    return {"name": f"pc equilibrium vs dense H_z solve, N={N} H={H} B={B}", "seconds": t_fast,
            "baseline_seconds": t_dense, "ratio": t_dense / t_fast, "target": "ratio >= 100",
            "note": f"dense n = {N * H}; max rel. difference of z* = {err:.1e}"}


def bench_kappa(N, H, param="sp", skips=None, dense_N=None, dense_H=None):
    from limits import pc

    W, a = pc.init_weights(N, H, param, seed=4)
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    s = pc.extreme_eigenvalues(W, a, skips, method="lanczos", tol=1e-6)
    t, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    base = ratio = None
    note = ""
    if dense_N:
        W2, a2 = pc.init_weights(dense_N, dense_H, param, seed=5)
        tb, sd = timed(lambda: pc.extreme_eigenvalues(W2, a2, skips, method="dense"))
        tl, sl = timed(lambda: pc.extreme_eigenvalues(W2, a2, skips, method="lanczos", tol=1e-6))
        base, ratio = tb, tb / tl
        note = (f"ratio measured at N={dense_N}, H={dense_H} (dense eigvalsh vs Lanczos, κ rel. diff "
                f"{abs(sd.kappa - sl.kappa) / sd.kappa:.1e}); ")
    weights_gb = sum(w.nbytes for w in W) / 1e9
    return {"name": f"kappa(H_z) {param}{' ' + str(skips) if skips else ''} N={N} H={H}", "seconds": t,
            "baseline_seconds": base, "ratio": ratio, "target": "< 300 s, < 8 GB",
            "note": note + f"CPU {cpu:.1f} s (wall/CPU shows machine load); Lanczos tol 1e-6 ⇒ eigenvalues to "
                           f"≤ 1e-6 relative; κ = {s.kappa:.4g}, λ_min = {s.lambda_min:.3g}, λ_max = {s.lambda_max:.4g}, "
                           f"peak traced memory {peak / 1e9:.2f} GB (weights {weights_gb:.2f} GB), "
                           f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB, "
                           f"converged={s.converged}"}


def run(quick: bool) -> list[dict]:
    if quick:
        return [bench_equilibrium(256, 16, 64), bench_vs_dense(128, 32),
                bench_kappa(128, 128, "sp", None, 32, 32), bench_kappa(128, 128, "mupc", "1-skip")]
    return [bench_equilibrium(1024, 64, 64), bench_vs_dense(256, 64),
            bench_kappa(512, 512, "sp", None, 64, 64), bench_kappa(512, 512, "mupc", "1-skip")]


if __name__ == "__main__":
    import sys

    if "--only-kappa-mupc" in sys.argv:
        print(bench_kappa(512, 512, "mupc", "1-skip"), flush=True)
    else:
        for r in run("--full" not in sys.argv):
            print(r, flush=True)
