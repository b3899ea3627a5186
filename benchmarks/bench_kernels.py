"""Kernel benchmarks (docs/performance.rst): residual NNGP + response, erf, P = 1000, L = 100 (< 5 s) and
tanh by quadrature, P = 200, L = 100 (< 10 s), each against a straightforward per-entry baseline
measured in the same run.

Baseline = the textbook loop: for every layer and every entry α ≤ β, scalar calls of
``limits.gaussian.kernel`` / ``dkernel`` (closed form for erf, quadrature for tanh) and of the
diagonal Price term. It is timed on a subset of P_sub inputs and extrapolated by the number of
entries, P(P+1)/2 ÷ P_sub(P_sub+1)/2 (and, for tanh, by the number of layers) — stated in ``note``.
The vectorised run is the public ``limits.kernels.response`` (which also computes K^l). The erf
workload is reported both ways: ``keep="last"`` (only layers 0 and L stored, O(P²) memory — the row the
< 5 s target measures) and ``keep="all"`` (every layer returned, 3(L+1)P² float64), against the same
baseline measurement.
"""
from __future__ import annotations

import resource
import time

import numpy as np


def _inputs(P, d, seed=0):
    X = np.random.default_rng(seed).standard_normal((P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(d)


def _baseline_per_entry(X, L, act_name, sw2, sb2, rho, N):
    """Per-entry residual NNGP + elementwise response (the naive reference implementation)."""
    import limits
    from limits.kernels.expectations import diag_price

    act = limits.activation(act_name)
    g = limits.gaussian
    P, d = X.shape
    K = sw2 * X @ X.T / d + sb2
    chi = np.full((P, P), N / d)
    r2 = rho * rho
    for _ in range(L):
        Kn = np.empty_like(K)
        eta = np.empty_like(K)
        for a in range(P):
            for b in range(a, P):
                E = float(g.kernel(act, K[a, a], K[a, b], K[b, b]))
                R = (float(diag_price(act, np.array(K[a, a]))) if a == b
                     else float(g.dkernel(act, K[a, a], K[a, b], K[b, b])))
                Kn[a, b] = Kn[b, a] = K[a, b] + r2 * (sw2 * E + sb2)
                eta[a, b] = eta[b, a] = r2 * sw2 * R * chi[a, b]
        K = Kn
        chi = chi + eta
    return K, chi


def _case(name, act, P, L, P_sub, L_sub, rho, target, quick, keeps=("all",)):
    """One row per entry of ``keeps`` (order kept), all sharing one baseline measurement."""
    from limits.kernels import response

    sw2, sb2, N, d = 1.2, 0.2, 500, 100
    X = _inputs(P, d)
    timed = []
    for keep in keeps:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0, c0 = time.perf_counter(), time.process_time()
        s = response(X, depth=L, activation=act, sigma_w2=sw2, sigma_b2=sb2, residual=True, rho=rho, width=N,
                     on_explode="ignore", keep=keep)
        fast, cpu = time.perf_counter() - t0, time.process_time() - c0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        timed.append((keep, fast, cpu, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime))
        del s
    t0 = time.perf_counter()
    Kb, chib = _baseline_per_entry(X[:P_sub], L_sub, act, sw2, sb2, rho, N)
    base_sub = time.perf_counter() - t0
    # correctness of the fast path on the subset (same recursion, same entries), for every keep
    err = 0.0
    for keep in keeps:
        s_sub = response(X[:P_sub], depth=L_sub, activation=act, sigma_w2=sw2, sigma_b2=sb2, residual=True,
                         rho=rho, width=N, on_explode="ignore", keep=keep)
        err = max(err, float(np.max(np.abs(s_sub.K[-1] - Kb))),
                  float(np.max(np.abs(s_sub.chi[-1] - chib) / np.maximum(1.0, np.abs(chib)))))
    scale = (P * (P + 1) / 2) / (P_sub * (P_sub + 1) / 2) * (L / L_sub)
    base = base_sub * scale
    rows = []
    for keep, fast, cpu, user, sys_ in timed:
        slots = 3 * (L + 1) if keep == "all" else 3 * min(L + 1, 3)
        out_gb = slots * P * P * 8 / 1e9
        mem = (f"the kernel zeroing/faulting in the {out_gb:.1f} GB of per-layer K, η, χ the result returns; "
               f"it varies with the VM's memory state, not with the code" if keep == "all" else
               f"keep='last': {slots} P×P slots, {out_gb:.3f} GB, reused every layer")
        rows.append({"name": f"{name} [keep={keep!r}]" if len(keeps) > 1 else name, "seconds": fast,
                     "baseline_seconds": base, "ratio": base / fast, "target": target if keep == "last" or len(keeps) == 1
                     else "(reference; the target is the keep='last' row)",
                     "note": f"CPU time of the fast run {cpu:.2f}s = user {user:.2f}s + system {sys_:.2f}s "
                             f"(system time: {mem}); "
                             f"baseline: per-entry scalar loop on P_sub={P_sub}, L_sub={L_sub} ({base_sub:.2f}s), "
                             f"extrapolated ×{scale:.0f} by entries×layers; max |fast − baseline| on the subset "
                             f"{err:.1e}; ρ={rho:g}, σ_w²={sw2}, σ_b²={sb2}, N={N}{' (quick sizes)' if quick else ''}"})
    return rows


def run(quick: bool) -> list[dict]:
    """Both the vectorised run and the baseline run with one OpenBLAS thread (``LIMITS_BLAS_THREADS``,
    default 1): on this shared 2-core machine spinning BLAS threads (used only for XXᵀ and the final
    Cholesky condition estimate) doubled the CPU time of the elementwise recursion."""
    from limits.finite._blas import blas_threads

    with blas_threads():
        return _run(quick)


def _run(quick: bool) -> list[dict]:
    rows = []
    if quick:
        rows += _case("residual erf NNGP + response, P=300, L=30", "erf", 300, 30, 20, 30, 1.0,
                      "(full: P=1000, L=100 < 5 s)", quick, keeps=("last", "all"))
        rows += _case("residual tanh (quadrature) NNGP + response, P=40, L=10", "tanh", 40, 10, 6, 2,
                      0.1, "(full: P=200, L=100 < 10 s)", quick)
    else:
        rows += _case("residual erf NNGP + response, P=1000, L=100", "erf", 1000, 100, 30, 100, 1.0,
                      "< 5 s", quick, keeps=("last", "all"))
        rows += _case("residual tanh (quadrature) NNGP + response, P=200, L=100", "tanh", 200, 100, 8, 4,
                      0.1, "< 10 s", quick)
    return rows


if __name__ == "__main__":
    import sys

    for r in run("--quick" in sys.argv):
        print(r)
