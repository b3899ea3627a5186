"""Kernels and kernel regression beyond one machine's memory.

    store = limits.largep.kernel_tiles(m, X, out="K.tiles", backend="dask", scheduler="tcp://host:8786")
    r = limits.predict.kernel_regression(m, X, Y, X_test, noise=0.1, solver="cg", backend="dask",
                                         store="K.tiles")

* :mod:`limits.largep.tiles` — the P×P training kernel as a directory of ``.npy`` tiles (upper triangle),
  each written atomically by the task that computed it (one task = one tile through all layers), so a
  killed run recomputes only the missing tiles; tiles run serially or as dask.distributed tasks.
* :mod:`limits.largep.pcg` — the matrix-free solver: a pivoted-Cholesky preconditioner of rank k, block
  preconditioned conjugate gradients whose matrix–vector products stream the stored tiles, and the
  stochastic Lanczos quadrature estimate of log det with its standard error.
* :mod:`limits.largep.regression` — the NNGP posterior (mean, variance of a test subset, log marginal
  likelihood) on top of both; called by :func:`limits.predict.kernel_regression` with ``solver="cg"``.

No function here holds a P×P array: the driver keeps O(P·(k + columns)) numbers, a worker one tile.
"""
from __future__ import annotations

from .pcg import PCGResult, block_pcg, lanczos_logdet, pivoted_cholesky
from .tiles import TileStore, kernel_tiles

__all__ = ["TileStore", "kernel_tiles", "block_pcg", "pivoted_cholesky", "lanczos_logdet", "PCGResult"]
