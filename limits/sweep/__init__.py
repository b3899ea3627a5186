"""Sweeps for theory curves: resumable parameter grids run serially, on joblib (loky) or on a
dask.distributed cluster, collected into one labelled ``xarray.Dataset`` (docs/sweep.rst)::

    import limits
    ds = limits.sweep.run(limits.kernels.critical_line,
                          {"activation": ["tanh", "erf"], "sigma_b2": [0.0, 0.05, 0.1]},
                          backend="loky", n_jobs=2, store="sweeps/critical")
    ds.sigma_w2.sel(activation="tanh")

A point's seed comes from ``SeedSequence(root).spawn`` by grid index (:mod:`limits.sweep.grid`),
finished points are stored atomically and reused (:mod:`limits.sweep.store`), backends are
existing engines only (:mod:`limits.sweep.backends`).
"""
from .dataset import load, reduce_seeds, save
from .driver import PointFailed, run, summary
from .grid import Grid
from .resolve import resolve
from .store import Store, point_key

__all__ = ["run", "Grid", "load", "save", "reduce_seeds", "summary", "PointFailed", "resolve", "Store", "point_key"]
