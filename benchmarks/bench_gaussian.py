"""expect2 throughput (docs/performance.rst: ≥ 10⁶ triples/s at 1e-10 for smooth φ by quadrature).

Generic (unrelated) triples of smooth φ go through limits.gaussian.mehler.series_generic (Mehler series with
Chebyshev-in-s coefficient interpolants and a certified tail), Gram matrices through gram_series.
Baseline: a naive per-element loop calling the same engine one triple at a time (what a user
would write around a scalar integrator), measured on a subset and extrapolated per triple.
"""
import time

import numpy as np

from limits import gaussian as G


def _triples(n, rng):
    k11 = rng.uniform(0.2, 2.0, n)
    k22 = rng.uniform(0.2, 2.0, n)
    c = rng.uniform(-0.99, 0.99, n)
    return k11, c * np.sqrt(k11 * k22), k22


def _time(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _cpu(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def run(quick: bool):
    from limits.finite._blas import blas_threads

    with blas_threads():          # one BLAS thread: the shared 2-core machine (as in bench_kernels)
        return _run(quick)


def _run(quick: bool):
    rng = np.random.default_rng(0)
    rows = []
    n = 20_000 if quick else 200_000
    n_loop = 200 if quick else 1000
    for label, f, kw in [("erf closed form", "erf", {}), ("relu closed form", "relu", {}),
                         ("tanh quadrature", "tanh", {}), ("gelu closed form", "gelu", {}),
                         ("sigmoid quadrature", "sigmoid", {})]:
        k11, k12, k22 = _triples(n, rng)
        t = _time(lambda: G.expect2(f, f, k11, k12, k22, **kw), repeat=3)
        cpu = _cpu(lambda: G.expect2(f, f, k11, k12, k22, **kw), repeat=3)
        sub = slice(0, n_loop)
        tl = _time(lambda: [G.expect2(f, f, a, b, c) for a, b, c in zip(k11[sub], k12[sub], k22[sub])], 1)
        base = tl / n_loop * n
        note = f"{n / t:,.0f} triples/s wall, {n / cpu:,.0f}/s CPU (baseline loop on {n_loop} triples, extrapolated)"
        if "quad" in label:
            # accuracy against the converged tensor trapezoid (n = 609 nodes per axis) on a subset,
            # and the vectorised tensor trapezoid (the pre-Mehler route for unrelated triples)
            j = np.arange(0, n, n // 100)
            ref = G.expect2(f, f, k11[j], k12[j], k22[j], n=609)
            err = float(np.max(np.abs(G.expect2(f, f, k11, k12, k22)[j] - ref)))
            m = 2000
            tq = _time(lambda: G.expect2(f, f, k11[:m], k12[:m], k22[:m], method="trapezoid"), 1)
            note += (f"; max |error| on {j.size} triples vs converged trapezoid {err:.1e}; "
                     f"vectorised tensor trapezoid: {m / tq:,.0f} triples/s")
        rows.append(dict(name=f"expect2 {label}, {n} triples", seconds=t, baseline_seconds=base,
                         ratio=base / t, target=">= 1e6 triples/s", note=note))
    # Gram matrices (the workload of every kernel recursion): Mehler series with certified tail
    P = 300 if quick else 1000
    X = rng.standard_normal((P, 5))
    K = X @ X.T / 5
    d = np.diag(K)
    iu = np.triu_indices(P)
    n_tri = iu[0].size
    for f in ("tanh", "gelu"):
        t = _time(lambda: G.gram(f, K), repeat=1)
        sub = np.arange(0, n_tri, max(1, n_tri // n_loop))
        tl = _time(lambda: [G.expect2(f, f, d[i], K[i, j], d[j]) for i, j in zip(iu[0][sub], iu[1][sub])], 1)
        base = tl / sub.size * n_tri
        tq = _time(lambda: G.expect2(f, f, d[iu[0][sub]], K[iu][sub], d[iu[1][sub]], method="trapezoid"), 1)
        rows.append(dict(name=f"gram {f} P={P} ({n_tri} triples)", seconds=t, baseline_seconds=base,
                         ratio=base / t, target=">= 1e6 triples/s",
                         note=f"{n_tri / t:,.0f} triples/s; vectorised tensor trapezoid on the same "
                              f"entries: {sub.size / tq:,.0f} triples/s (baseline loop on {sub.size} "
                              f"entries, extrapolated)"))
    return rows
