"""The sweep driver: points → backend → store → dataset (:func:`run`)."""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import statistics
import time
from pathlib import Path

from ..errors import elide, shown
from . import backends as _backends
from . import dataset as _dataset
from .grid import DIM_NAME as _DIM_NAME, RESERVED, as_grid
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


MAX_POINTS = 100_000
# measured bookkeeping per grid point (grid enumeration, point key, record): time and driver memory
_US_PER_POINT, _BYTES_PER_POINT = 100.0, 600.0
# names the dataset uses for its own bookkeeping; an output may not take them
RESERVED_OUTPUTS = frozenset(RESERVED)


def _bytesize(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}"
        n /= 1000


def _check_size(grid, max_points):
    """Refuse a grid of more than ``max_points`` points, with a cost estimate."""
    if isinstance(max_points, bool) or not isinstance(max_points, numbers.Integral) or max_points < 1:
        raise ValueError(f"max_points must be a positive integer, got {max_points!r}")
    n = grid.n_points
    if n <= max_points:
        return
    axes = " × ".join(f"{d} {k}" for d, k in zip(grid.dims, grid.shape))
    secs = n * _US_PER_POINT * 1e-6
    raise ValueError(
        f"max_points: the grid has {n:,} points ({axes}); before any point runs, bookkeeping alone takes "
        f"~{_fmt_time(secs)} and ~{_bytesize(n * _BYTES_PER_POINT)} of memory, a store holds {2 * n:,} files, "
        f"and at 1 ms per point the sweep runs {_fmt_time(n * 1e-3)} per worker; shrink the grid or confirm "
        f"with max_points={n} (--max-points {n}, or [run] max_points = {n})")


def _fmt_time(s):
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.0f} h" \
        if s < 172800 else f"{s / 86400:.0f} days"


def _check_flag(value, name):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


def _check_path(value, name):
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value) or "\x00" in str(value):
        raise ValueError(f"{name} must be a path, got {value!r}")
    return Path(value)


def _check_outputs(store, out, reduce_seeds, n_points, read_only=False):
    """Every file the sweep will write is writable, and replaces nothing but a sweep dataset of no more points
    (:func:`limits.sweep.dataset.check_replaceable`) — checked before any point runs. A read-only store is not
    written: its dataset goes to ``out``."""
    from ..cliutil import ensure_writable_dir, ensure_writable_file

    if store is not None and not read_only:
        ensure_writable_dir(store, "store")
        ensure_writable_dir(store / "points", "store")
    path = out if out is not None else (store / DATASET_NAME if store is not None else None)
    if path is not None:
        name = "out" if out is not None else "store"
        for p in [path] + ([path.with_name(path.stem + "_reduced.nc")] if reduce_seeds else []):
            ensure_writable_file(p, name)
            if p.exists() and not p.is_file():         # a FIFO or a device (/dev/stdout): never replaced
                raise ValueError(f"{name}: {p} exists and is not a regular file")
            _dataset.check_replaceable(p, n_points, name)


def _check_names(arrays, fn_name):
    for k in arrays:
        if k in RESERVED_OUTPUTS or _DIM_NAME.search(k):
            why = ("is a name the sweep dataset uses for its bookkeeping" if k in RESERVED_OUTPUTS
                   else "looks like the name of an output's array dim (<output>_dim_<k>)")
            raise ValueError(f"output {k!r} of {fn_name} {why} (reserved: {', '.join(sorted(RESERVED_OUTPUTS))} "
                             "and <name>_dim_<k>); rename that output")


def _save_dataset(ds, path, option):
    try:
        return _dataset.save(ds, path)
    except OSError as exc:
        raise ValueError(f"{option}: cannot write the dataset {path} ({exc.strerror or exc}); free space or "
                         f"choose another path") from None


def run(fn, grid, backend="serial", n_jobs=None, scheduler=None, store=None, chunk="auto", *,
        fail_fast=False, reduce_seeds=False, out=None, name=None, version=None, allow=(), progress=None, label=None,
        target_seconds=0.2, retry_failed=True, max_points=MAX_POINTS):
    """Run ``fn(**point)`` at every point of ``grid``; return an ``xarray.Dataset`` over the grid.

    ``fn``: any callable of keyword arguments returning a :class:`limits.results.Result`, a dict,
    an array or a number (or a dotted name ``MODULE.FUNCTION``, resolved by
    :func:`limits.sweep.resolve.resolve` with ``allow``). ``grid``: a :class:`limits.sweep.Grid` or a ``{param: values}`` dict.
    ``backend``: ``"serial"``, ``"loky"`` (joblib process pool, ``n_jobs`` workers) or ``"dask"``
    (``scheduler=None`` → a LocalCluster of ``n_jobs`` workers; ``"tcp://…"`` or a
    ``distributed.Client`` → that cluster). ``chunk``: ``"auto"`` times the first point on each
    worker and batches the rest into tasks of ≳ ``target_seconds`` (at least 4 per worker), in
    waves of 4 tasks per worker with the size re-estimated after each; an int fixes the batch size.
    ``store``: directory of finished points (resume: only missing points run; failed ones are
    retried unless ``retry_failed=False``), locked against a second sweep process; the dataset is
    also saved to ``out`` (default ``store/sweep.nc``) — both are checked writable before any point runs.
    A failing point (an exception or ``sys.exit``) is recorded and the sweep goes on (``fail_fast=True``
    raises :class:`PointFailed`). Point keys hash (``name`` or ``module.qualname``, ``version``
    (default ``limits.__version__``; pass your own code's version for your functions), parameters,
    seed). ``progress``: None (bar on a terminal, else a line every 10 s), False, True; ``label``
    names the sweep in it. ``reduce_seeds=True`` returns ``<var>_mean``/``<var>_se`` over
    the seeds (saved beside the full dataset as ``<name>_reduced.nc``). A grid of more than
    ``max_points`` points is refused with a cost estimate (raise it to confirm). Outputs may not be
    named ``failed``, ``n_seeds`` or ``<x>_dim_<k>``. The run summary is in ``ds.attrs``: ``n_points``, ``reused``, ``computed``,
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
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name must be a string, got {name!r}")
    chunk = _backends.check_chunk(chunk)
    if isinstance(target_seconds, bool) or not (isinstance(target_seconds, (int, float))
                                                and 0 < target_seconds < math.inf):
        raise ValueError(f"target_seconds must be a positive number of seconds, got {target_seconds!r}")
    for flag, fname in ((fail_fast, "fail_fast"), (reduce_seeds, "reduce_seeds"), (retry_failed, "retry_failed")):
        _check_flag(flag, fname)
    if not isinstance(backend, str) or backend not in _backends.BACKENDS:
        raise ValueError(f"backend must be one of {sorted(_backends.BACKENDS)}, got {backend!r}")
    n_jobs = _backends.check_n_jobs(n_jobs)
    store, out = _check_path(store, "store"), _check_path(out, "out")
    if store is not None and "<" in fn_name:
        raise ValueError(f"name: {fn_name!r} is a lambda or local function; give name='…' so stored points "
                         "of different functions cannot collide")
    grid = as_grid(grid)
    if reduce_seeds and grid.seeds is None:
        raise ValueError("reduce_seeds=True needs a grid with seeds=n")
    _check_size(grid, max_points)
    if version is None:
        from .. import __version__ as version
    if not isinstance(version, str):
        raise ValueError(f"version must be a string, got {version!r}")
    st = Store(store) if store is not None else None
    read_only = st is not None and st.read_only()
    if read_only and out is None:
        raise ValueError(f"store: {store} is on a read-only file system (or not writable): its points can be read, "
                         "but the dataset cannot be written there — give out=… (--out PATH) elsewhere")
    _check_outputs(store, out, reduce_seeds, grid.n_points, read_only)
    with (st.lock() if st is not None else contextlib.nullcontext()):
        ds = _run(fn, fn_name, grid, version, st, out, backend, n_jobs, scheduler, chunk, fail_fast, retry_failed,
                  progress, label, target_seconds, t_start, read_only)
        if not reduce_seeds:
            return ds
        red = _dataset.reduce_seeds(ds)
        if "path" in ds.attrs:
            rpath = Path(ds.attrs["path"])
            rpath = rpath.with_name(rpath.stem + "_reduced.nc")
            red.attrs.pop("path", None)
            _save_dataset(red, rpath, "out" if out is not None else "store")
            red.attrs["path"] = str(rpath)
            red.attrs["full_path"] = ds.attrs["path"]
        return red


def _load_stored(st, points, keys, fn_name, retry_failed):
    """``(arrays, errors, reused)`` of the points already in the store ``st`` (failed ones only when they are not
    to be retried)."""
    arrays, errors, reused = {}, {}, 0
    for p, k in zip(points, keys):
        got = st.load(k)
        if got is None:
            continue
        meta, arr = got
        if arr is not None:
            try:
                _check_names(arr, fn_name)
            except ValueError:
                continue                         # stored by an older limits: recompute (and refuse)
            arrays[p.flat] = arr
            reused += 1
        elif not retry_failed:
            errors[p.flat] = str(meta.get("error", "failed"))
            reused += 1
    return arrays, errors, reused


def _compute(be, fn, todo, chunk, kwargs_of, record, target_seconds) -> int:
    """Run the points ``todo`` on the backend ``be`` (``record`` files each batch's records); returns the largest
    batch size used (``chunk``: docstring of :func:`run`)."""
    if isinstance(chunk, int):
        for recs in be.map(fn, _batches(todo, chunk, kwargs_of)):
            record(recs)
        return chunk
    if be.name == "serial":
        for recs in be.map(fn, _batches(todo, 1, kwargs_of)):
            record(recs)
        return 1
    # probe: one point per worker; the first point on a fresh worker often pays for
    # imports and caches, so when it was quick a second round sets the chunk size
    rest, seconds, chunk_used = todo, [], 1
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
    return chunk_used


def _recorder(points, keys, grid, fn_name, version, st, arrays, errors, report, fail_fast):
    """The function that files a batch's records: into ``arrays``/``errors``, the store and the progress line."""
    def record(recs):
        for r in recs:
            p = points[r["flat"]]
            meta = {"function": fn_name, "version": version, "params": p.params, "seed": p.seed,
                    "index": list(p.index), "seconds": r["seconds"]}
            if r["ok"]:
                _check_names(r["arrays"], fn_name)
                arrays[r["flat"]] = r["arrays"]
                if st is not None:
                    st.save_ok(keys[r["flat"]], {**meta, "skipped": r["skipped"]}, r["arrays"])
            else:
                errors[r["flat"]] = r["error"]
                if st is not None:
                    st.save_error(keys[r["flat"]], {**meta, "traceback": r.get("traceback", "")}, r["error"])
            report.update(1, failed=0 if r["ok"] else 1)
            if not r["ok"] and fail_fast:
                raise PointFailed(f"{fn_name} failed at point {dict(zip(grid.dims, p.index))} ({shown(p.params, 200)}): "
                                  f"{elide(r['error'], 200)}")
    return record


def _run(fn, fn_name, grid, version, st, out, backend, n_jobs, scheduler, chunk, fail_fast, retry_failed,
         progress, label, target_seconds, t_start, read_only=False):
    """The sweep proper (the store, if any, is locked by the caller; a read-only store is only read)."""
    points = list(grid.points())
    keys = [point_key(fn_name, version, p.params, p.seed) for p in points]
    arrays, errors, reused = {}, {}, 0
    dpath = out if out is not None else (st.root / DATASET_NAME if st is not None else None)
    manifest = {"function": fn_name, "version": version, "grid": grid.to_dict(), "dataset": str(dpath)}
    writes = st is not None and not read_only
    if st is not None:
        if writes:
            st.clean_temporary()
        arrays, errors, reused = _load_stored(st, points, keys, fn_name, retry_failed)
    todo = [p.flat for p in points if p.flat not in arrays and p.flat not in errors]
    if read_only and todo:
        raise ValueError(f"store: {st.root} is on a read-only file system (or not writable) and {len(todo)} of "
                         f"{len(points)} points are missing from it; run the sweep where the store is writable (or "
                         "copy it and give --store COPY)")
    if writes:
        st.write_manifest({**manifest, "status": "running"})
    kwargs_of = lambda f: grid.kwargs(points[f])  # noqa: E731
    report = SweepProgress(grid.n_points, done=len(arrays) + len(errors),
                           desc=f"sweep {label or fn_name.rsplit('.', 1)[-1]}", enabled=progress)
    record = _recorder(points, keys, grid, fn_name, version, st, arrays, errors, report, fail_fast)
    chunk_used = 1
    be = None
    try:
        if todo and backend != "serial":
            report.set_phase(f"starting the {backend} workers")
        be = _backends.make(backend, n_jobs=n_jobs, scheduler=scheduler) if todo else None
        if todo:
            n = be.n_workers
            report.set_phase("running the first point" if be.name == "serial" else
                             f"waiting for the first points from {n} worker{'s' if n > 1 else ''}")
            chunk_used = _compute(be, fn, todo, chunk, kwargs_of, record, target_seconds)
        if be is not None:
            be.close()
            be = None
        report.close()
        attrs = {"function": fn_name, "version": version, "backend": backend, "n_points": grid.n_points,
                 "reused": reused, "computed": len(arrays) + len(errors) - reused,
                 "chunk": chunk_used, "wall_time_s": time.perf_counter() - t_start}
        ds = _dataset.build(grid, arrays, errors, attrs)
        if dpath is not None:
            _save_dataset(ds, dpath, "out" if out is not None else "store")
            ds.attrs["path"] = str(dpath)
    except BaseException:
        if writes:                               # never leave the manifest saying "running"
            try:
                st.write_manifest({**manifest, "status": "interrupted"})
            except (OSError, ValueError):
                pass
        raise
    finally:
        if be is not None:
            be.close()
        report.close()
    if writes:
        st.write_manifest({**manifest, "status": "done", "n_points": grid.n_points,
                           "reused": reused, "n_failed": len(errors)})
    return ds


def summary(ds) -> str:
    """One line: points, reused, computed, failed, wall time."""
    a = ds.attrs
    return (f"{a.get('n_points')} points: {a.get('reused')} reused from the store, {a.get('computed')} computed, "
            f"{a.get('n_failed')} failed ({a.get('backend')}, chunk {a.get('chunk')}, {a.get('wall_time_s', 0):.1f} s)")
