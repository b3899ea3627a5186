"""Kernels and kernel regression beyond one machine's memory::

    store = limits.kernels.kernel_blocked(m, X, out="K.tiles", backend="dask", scheduler="tcp://host:8786")
    r = limits.predict.kernel_regression(m, X, Y, X_test, noise=0.1, solver="cg", backend="dask",
                                         store="K.tiles")

* :mod:`limits.kernels.tilestore` (reached through :func:`limits.kernels.kernel_blocked` with a directory
  ``out``, or :func:`kernel_tiles` here) — the P×P training kernel as a directory of ``.npy`` tiles (upper triangle),
  each written atomically by the task that computed it (one task = one tile through all layers), so a
  killed run recomputes only the missing tiles; tiles run serially or as dask.distributed tasks.
* :mod:`limits.largep.pcg` — the matrix-free solver: a pivoted-Cholesky preconditioner of rank k, block
  preconditioned conjugate gradients whose matrix–vector products stream the stored tiles, and the
  stochastic Lanczos quadrature estimate of log det with its standard error.
* :mod:`limits.largep.regression` — the NNGP posterior (mean, variance of a test subset, log marginal
  likelihood) on top of both; called by :func:`limits.predict.kernel_regression` with ``solver="cg"``.

``model`` may be a composition (``limits.serial``; inputs (P, d), (P, T, C) or (P, H, W, C)): its tiles are the
packed cross kernels of row blocks (default tiles of 256 inputs), the preconditioner's rows and the test rows its
cross kernels, the variances' diagonal its self pass.

No function here holds a P×P array: the driver keeps O(P·(k + columns)) numbers, a worker one tile.
"""
from __future__ import annotations

from ..kernels.tilestore import TileStore
from .pcg import PCGResult, block_pcg, lanczos_logdet, pivoted_cholesky


def kernel_tiles(model, X, out, *, block=2048, get=("nngp",), backend="serial", scheduler=None, n_workers=None,
                 memory_limit="2GiB", progress=None) -> TileStore:
    """Fill (or complete, after an interruption) the tile store ``out`` with the read-out kernels ``get`` of
    ``model`` on ``X``: :func:`limits.kernels.kernel_blocked` with a directory ``out`` (``backend`` "serial"
    or "dask"; ``scheduler`` None → a LocalCluster of ``n_workers`` workers with ``memory_limit`` each, an
    address or a ``distributed.Client``). Returns the :class:`TileStore`; its ``diagnostics`` hold ``tiles``,
    ``computed``, ``reused``, ``seconds``, ``task_cpu_seconds`` and ``worker_memory_bytes``."""
    from pathlib import Path

    from ..kernels.blocked import kernel_blocked

    out = Path(out)
    if out.suffix not in ("", ".tiles") and not out.is_dir():
        raise ValueError(f"out: a tile store is a directory without a suffix or ending in .tiles, got {out}")
    return kernel_blocked(model, X, block=block, get=get, out=out, backend=backend, scheduler=scheduler,
                          n_workers=n_workers, memory_limit=memory_limit, progress=progress)

__all__ = ["TileStore", "kernel_tiles", "block_pcg", "pivoted_cholesky", "lanczos_logdet", "PCGResult"]
