"""The sweep driver: points → backend → store → dataset (:func:`run`)."""
from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

from . import backends as _backends
from . import dataset as _dataset
from .grid import as_grid
from .progress import SweepProgress
from .resolve import name_of, resolve
from .store import Store, point_key

DATASET_NAME = "sweep.nc"


class PointFailed(RuntimeError):
    """Raised by ``run(..., fail_fast=True)`` at the first failing point."""


def _chunk_size(seconds, n_rest, n_workers, target):
    """Points per task: enough for ≳ ``target`` seconds of work, but ≥ 4 tasks per worker."""
    t = max(statistics.median(seconds), 1e-6)
    want = max(1, math.ceil(target / t))
    balance = max(1, math.ceil(n_rest / (4 * n_workers)))
    return min(want, balance)


def _batches(flats, size, kwargs_of):
    return [[(f, kwargs_of(f)) for f in flats[i:i + size]] for i in range(0, len(flats), size)]


def run(fn, grid, backend="serial", n_jobs=None, scheduler=None, store=None, chunk="auto", *,
        fail_fast=False, reduce_seeds=False, out=None, name=None, version=None, allow=(), progress=None, label=None,
        target_seconds=0.2, retry_failed=True):
    """Run ``fn(**point)`` at every point of ``grid``; return an ``xarray.Dataset`` over the grid.

    ``fn``: any callable of keyword arguments returning a :class:`limits.results.Result`, a dict,
    an array or a number (or a dotted name, resolved by :func:`limits.sweep.resolve.resolve` with
    ``allow``). ``grid``: a :class:`limits.sweep.Grid` or a ``{param: values}`` dict.
    ``backend``: ``"serial"``, ``"loky"`` (joblib process pool, ``n_jobs`` workers) or ``"dask"``
    (``scheduler=None`` → a LocalCluster of ``n_jobs`` workers; ``"tcp://…"`` or a
    ``distributed.Client`` → that cluster). ``chunk``: ``"auto"`` times the first point on each
    worker and batches the rest into tasks of ≳ ``target_seconds`` (at least 4 per worker), in
    waves of 4 tasks per worker with the size re-estimated after each; an int fixes the batch size.
    ``store``: directory of finished points (resume: only missing points run; failed ones are
    retried unless ``retry_failed=False``); the dataset is also saved to ``out`` (default
    ``store/sweep.nc``). A failing point is recorded and the sweep goes on (``fail_fast=True``
    raises :class:`PointFailed`). Point keys hash (``name`` or ``module.qualname``, ``version``
    (default ``limits.__version__``; pass your own code's version for your functions), parameters,
    seed). ``progress``: None (bar on a terminal, else a line every 10 s), False, True; ``label``
    names the sweep in it. ``reduce_seeds=True`` returns ``<var>_mean``/``<var>_se`` over
    the seeds (saved beside the full dataset as ``<name>_reduced.nc``). The run summary is in ``ds.attrs``: ``n_points``, ``reused``, ``computed``,
    ``n_failed``, ``chunk`` (the largest batch size used), ``wall_time_s``.
    """
    t_start = time.perf_counter()
    if isinstance(fn, str):
        fn = resolve(fn, allow)
        fn_name = name or name_of(fn)
    elif callable(fn):
        fn_name = name or name_of(fn)
    else:
        raise ValueError(f"fn must be a callable or a dotted name, got {type(fn).__name__}")
    if chunk != "auto" and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk must be 'auto' or a positive integer, got {chunk!r}")
    if not (isinstance(target_seconds, (int, float)) and target_seconds > 0):
        raise ValueError(f"target_seconds must be positive, got {target_seconds!r}")
    if store is not None and "<" in fn_name:
        raise ValueError(f"name: {fn_name!r} is a lambda or local function; give name='…' so stored points "
                         "of different functions cannot collide")
    grid = as_grid(grid)
    if reduce_seeds and grid.seeds is None:
        raise ValueError("reduce_seeds=True needs a grid with seeds=n")
    if version is None:
        from .. import __version__ as version
    points = list(grid.points())
    keys = [point_key(fn_name, version, p.params, p.seed) for p in points]
    st = Store(store) if store is not None else None
    arrays, errors = {}, {}
    reused = 0
    if st is not None:
        st.clean_temporary()
        for p, k in zip(points, keys):
            got = st.load(k)
            if got is None:
                continue
            meta, arr = got
            if arr is not None:
                arrays[p.flat] = arr
                reused += 1
            elif not retry_failed:
                errors[p.flat] = meta.get("error", "failed")
                reused += 1
        st.write_manifest({"function": fn_name, "version": version, "grid": grid.to_dict(),
                           "dataset": str(Path(out) if out else Path(store) / DATASET_NAME), "status": "running"})
    todo = [p.flat for p in points if p.flat not in arrays and p.flat not in errors]
    kwargs_of = lambda f: grid.kwargs(points[f])  # noqa: E731

    report = SweepProgress(grid.n_points, done=len(arrays) + len(errors),
                           desc=f"sweep {label or fn_name.rsplit('.', 1)[-1]}", enabled=progress)
    chunk_used = 1

    def record(recs):
        for r in recs:
            p = points[r["flat"]]
            meta = {"function": fn_name, "version": version, "params": p.params, "seed": p.seed,
                    "index": list(p.index), "seconds": r["seconds"]}
            if r["ok"]:
                arrays[r["flat"]] = r["arrays"]
                if st is not None:
                    st.save_ok(keys[r["flat"]], {**meta, "skipped": r["skipped"]}, r["arrays"])
            else:
                errors[r["flat"]] = r["error"]
                if st is not None:
                    st.save_error(keys[r["flat"]], {**meta, "traceback": r.get("traceback", "")}, r["error"])
            report.update(1, failed=0 if r["ok"] else 1)
            if not r["ok"] and fail_fast:
                raise PointFailed(f"point {dict(zip(grid.dims, p.index))} ({p.params}) failed: {r['error']}")

    be = _backends.make(backend, n_jobs=n_jobs, scheduler=scheduler) if todo else None
    try:
        if todo:
            if isinstance(chunk, int):
                chunk_used = chunk
                for recs in be.map(fn, _batches(todo, chunk, kwargs_of)):
                    record(recs)
            elif be.name == "serial":
                for recs in be.map(fn, _batches(todo, 1, kwargs_of)):
                    record(recs)
            else:
                # probe: one point per worker; the first point on a fresh worker often pays for
                # imports and caches, so when it was quick a second round sets the chunk size
                rest, seconds = todo, []
                for _ in range(2):
                    probe, rest = rest[:be.n_workers], rest[be.n_workers:]
                    seconds = []
                    for recs in be.map(fn, _batches(probe, 1, kwargs_of)):
                        seconds += [r["seconds"] for r in recs]
                        record(recs)
                    if not rest or statistics.median(seconds) >= target_seconds:
                        break
                # the rest in waves of 4 tasks per worker, the chunk re-estimated after each wave
                # (per-point times change along a grid and with the machine's load)
                while rest:
                    size = _chunk_size(seconds, len(rest), be.n_workers, target_seconds)
                    chunk_used = max(chunk_used, size)
                    wave, rest = rest[:size * 4 * be.n_workers], rest[size * 4 * be.n_workers:]
                    seconds = []
                    for recs in be.map(fn, _batches(wave, size, kwargs_of)):
                        seconds += [r["seconds"] for r in recs]
                        record(recs)
    finally:
        if be is not None:
            be.close()
        report.close()
    attrs = {"function": fn_name, "version": version, "backend": backend, "n_points": grid.n_points,
             "reused": reused, "computed": len(arrays) + len(errors) - reused,
             "chunk": chunk_used, "wall_time_s": time.perf_counter() - t_start}
    ds = _dataset.build(grid, arrays, errors, attrs)
    if st is not None or out is not None:
        path = Path(out) if out is not None else Path(store) / DATASET_NAME
        _dataset.save(ds, path)
        ds.attrs["path"] = str(path)
        if st is not None:
            st.write_manifest({"function": fn_name, "version": version, "grid": grid.to_dict(),
                               "dataset": str(path), "status": "done", "n_points": grid.n_points,
                               "reused": reused, "n_failed": len(errors)})
    if not reduce_seeds:
        return ds
    red = _dataset.reduce_seeds(ds)
    if "path" in ds.attrs:
        rpath = Path(ds.attrs["path"])
        rpath = rpath.with_name(rpath.stem + "_reduced.nc")
        red.attrs.pop("path", None)
        _dataset.save(red, rpath)
        red.attrs["path"] = str(rpath)
        red.attrs["full_path"] = ds.attrs["path"]
    return red


def summary(ds) -> str:
    """One line: points, reused, computed, failed, wall time."""
    a = ds.attrs
    return (f"{a.get('n_points')} points: {a.get('reused')} reused from the store, {a.get('computed')} computed, "
            f"{a.get('n_failed')} failed ({a.get('backend')}, chunk {a.get('chunk')}, {a.get('wall_time_s', 0):.1f} s)")
