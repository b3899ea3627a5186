"""Sweep overhead per point: serial vs loky vs dask (LocalCluster), wall and CPU time, in one run.

Workloads: a cheap point (``limits.kernels.critical_line``, a few ms) and a medium one
(``limits.kernels.response``, residual erf net, P = 32, L = 400, ``keep="last"``, ~0.1 s). Each backend runs the
same grid with ``chunk="auto"`` and no store (xarray imported beforehand); the dask LocalCluster
and the loky pool are started before the timed run (start-up is reported separately).
Baseline = a plain Python loop calling the function; ratio = backend wall / loop wall (on a 2-core machine the ideal for 2 workers is 0.5;
values above 1 are pure overhead). Every time is the best of 2 runs. CPU time is this process's (driver) user+sys time — the
workers' CPU is not included, so it measures what the driver spends on scheduling and collecting.
"""
from __future__ import annotations

import resource
import time

import numpy as np


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _measure(fn, *args, repeat=2, **kw):
    """Best wall time of ``repeat`` runs (the machine is shared), with that run's driver CPU time."""
    best = None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), _cpu()
        out = fn(*args, **kw)
        w, c = time.perf_counter() - t0, _cpu() - c0
        if best is None or w < best[0]:
            best = (w, c, out)
    return best


def run(quick: bool):
    import xarray  # noqa: F401 — imported before timing (its import is not per-point overhead)

    import limits
    import limits.sweep as S

    X = np.random.default_rng(0).standard_normal((32, 10))
    cases = [
        ("critical_line", limits.kernels.critical_line,
         S.Grid(product={"activation": ["tanh", "erf"], "sigma_b2": np.linspace(0.0, 0.5, 20 if quick else 100)})),
        ("response", limits.kernels.response,
         S.Grid(product={"width": [64, 128, 256, 512], "rho": np.linspace(0.1, 1.0, 4 if quick else 10)},
                fixed={"X": X, "depth": 400, "keep": "last", "activation": "erf", "sigma_w2": 1.2, "sigma_b2": 0.2,
                       "residual": True})),
    ]
    rows = []
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster)
    t_dask = time.perf_counter() - t0
    try:
        client.run(lambda: __import__("limits.kernels"))         # warm the workers' imports
        t0 = time.perf_counter()
        S.run(limits.kernels.critical_line, {"activation": ["tanh"], "sigma_b2": [0.0, 0.1]}, backend="loky",
              n_jobs=2, progress=False)
        t_loky = time.perf_counter() - t0
        rows.append({"name": "start-up: LocalCluster(2) / first loky call", "seconds": t_dask,
                     "baseline_seconds": t_loky, "ratio": t_dask / t_loky,
                     "note": f"dask LocalCluster start {t_dask:.2f} s; "
                             f"first loky sweep (pool start + imports) {t_loky:.2f} s"})
        for name, fn, grid in cases:
            pts = list(grid.points())
            fn(**grid.kwargs(pts[0]))                             # warm caches for the loop baseline
            w0, c0, _ = _measure(lambda: [fn(**grid.kwargs(p)) for p in pts])
            n = len(pts)
            for backend, kw in (("serial", {}), ("loky", {"n_jobs": 2}), ("dask", {"scheduler": client})):
                w, c, ds = _measure(S.run, fn, grid, backend=backend, progress=False, **kw)
                assert ds.attrs["n_failed"] == 0
                rows.append({"name": f"{name} × {n} points, {backend}", "seconds": w, "baseline_seconds": w0,
                             "ratio": w / w0,
                             "note": f"per point {1e3 * w / n:.2f} ms (loop {1e3 * w0 / n:.2f} ms, overhead "
                                     f"{1e3 * (w - w0) / n:+.2f} ms); driver CPU {c:.2f} s (loop {c0:.2f} s); "
                                     f"chunk {ds.attrs['chunk']}"})
    finally:
        client.close()
        cluster.close()
    return rows


if __name__ == "__main__":
    import sys

    for r in run("--quick" in sys.argv):
        print(f"{r['name']}: {r['seconds']:.3f} s | baseline {r['baseline_seconds']:.3f} s | ratio {r['ratio']:.2f}x"
              f"\n    {r['note']}")
