"""Where sweep points run: in this process, on joblib's loky process pool, or on dask.distributed.

Every backend runs the same task function, :func:`evaluate`, on a *batch* of points and yields
the batch's records as they finish (in completion order; the driver files them by grid index).
Workers use one BLAS thread and one :mod:`limits.parallel` thread each (:func:`limits.blas.blas_threads`; loky also gets
``inner_max_num_threads=1``, dask's nannies set ``OMP_NUM_THREADS=1`` and friends by default).
The driver, not the workers, writes the store, so a remote cluster needs no shared filesystem.
"""
from __future__ import annotations

import contextlib
import logging
import numbers
import os
import time
import traceback

from ..interrupts import children_ignore_sigint
from .outputs import flatten


def evaluate(fn, batch, threads=None):
    """Run ``fn(**kwargs)`` for each ``(flat, kwargs)`` of ``batch``; one record per point:
    ``{"flat", "ok", "arrays", "skipped", "error", "seconds"}``. An exception inside a point is
    recorded (type, message and the last traceback lines), never raised — a ``sys.exit`` inside a
    point (``SystemExit``) too; only ``KeyboardInterrupt`` stops the batch."""
    import contextlib

    from ..blas import blas_threads
    from ..parallel import using

    ctx = contextlib.ExitStack()
    if threads:                         # a worker of a pool: as many threads for limits.parallel as for BLAS
        ctx.enter_context(using(threads))
        ctx.enter_context(blas_threads(threads))
    records = []
    with ctx:
        for flat, kwargs in batch:
            t0 = time.perf_counter()
            try:
                arrays, skipped = flatten(fn(**kwargs))
                rec = {"flat": flat, "ok": True, "arrays": arrays, "skipped": skipped, "error": None}
            except BaseException as exc:        # noqa: BLE001 — recorded, the sweep goes on (sys.exit too)
                if isinstance(exc, KeyboardInterrupt):
                    raise
                tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
                rec = {"flat": flat, "ok": False, "arrays": None, "skipped": [],
                       "error": f"{type(exc).__name__}: {exc}", "traceback": "".join(tb[-3:])}
            rec["seconds"] = time.perf_counter() - t0
            rec["pid"] = os.getpid()
            records.append(rec)
    return records


def ship_by_value(fn):
    """A function of a module the user allowed from the current folder (loaded from its file, not on
    ``sys.path``: :func:`limits.resolver.loaded_from_folder`) is pickled by value, so worker processes — which
    cannot import it by name — receive its code with the task."""
    import sys

    from ..resolver import loaded_from_folder

    module = getattr(fn, "__module__", None)
    if not isinstance(module, str) or not loaded_from_folder(module):
        return
    try:
        import cloudpickle
    except ImportError:                     # pragma: no cover — joblib and dask both need it
        return
    cloudpickle.register_pickle_by_value(sys.modules[module.split(".")[0]])


class WorkerCannotLoad(RuntimeError):
    """A worker could not unpickle the point function (its module is not importable there)."""


def evaluate_pickled(payload, name, batch, threads=None):
    """:func:`evaluate` of the point function pickled in ``payload`` (by :func:`function_payload`): unpickled here,
    inside the task, so that a worker which cannot import its module fails this task with
    :class:`WorkerCannotLoad` naming the function — not while reading the message, where dask would log the error
    and leave the task waiting for ever."""
    import pickle

    try:
        fn = pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001 — ModuleNotFoundError, AttributeError, …: all mean "not loadable here"
        raise WorkerCannotLoad(f"{type(exc).__name__}: {exc}") from None
    return evaluate(fn, batch, threads)


def function_payload(fn) -> bytes:
    """``fn`` pickled for the workers: by value when its module was allowed from the current folder
    (:func:`ship_by_value`), else by reference (the workers import its module)."""
    ship_by_value(fn)
    import cloudpickle

    return cloudpickle.dumps(fn)


def _lost(batch, message):
    return [{"flat": flat, "ok": False, "arrays": None, "skipped": [], "error": message, "seconds": 0.0}
            for flat, _ in batch]


class Serial:
    name = "serial"
    n_workers = 1

    def __init__(self, n_jobs=None, scheduler=None):
        if scheduler is not None:
            raise ValueError("scheduler is only used with backend='dask'")

    def map(self, fn, batches):
        for b in batches:
            yield evaluate(fn, b, None)

    def close(self):
        pass


class Loky:
    """joblib ``Parallel(backend="loky", return_as="generator_unordered")``; a worker that dies
    (segfault, OOM kill) makes joblib raise ``TerminatedWorkerError``: its batches are recorded as
    failed and the remaining ones are resubmitted to a fresh pool (up to ``max_restarts`` times)."""
    name = "loky"
    max_restarts = 3

    def __init__(self, n_jobs=None, scheduler=None):
        if scheduler is not None:
            raise ValueError("scheduler is only used with backend='dask'")
        self.n_workers = int(n_jobs) if n_jobs else max(1, os.cpu_count() or 1)
        if self.n_workers < 1:
            raise ValueError(f"n_jobs must be positive, got {n_jobs}")

    def map(self, fn, batches):
        ship_by_value(fn)
        from joblib import Parallel, delayed, parallel_config
        from joblib.externals.loky.process_executor import TerminatedWorkerError

        pending = {b[0][0]: b for b in batches}          # first flat index → batch
        restarts = 0
        while pending:
            todo = list(pending.values())
            try:
                with parallel_config(backend="loky", inner_max_num_threads=1):
                    gen = Parallel(n_jobs=self.n_workers, return_as="generator_unordered", batch_size=1,
                                   pre_dispatch="2*n_jobs")(delayed(evaluate)(fn, b, 1) for b in todo)
                    for records in gen:
                        pending.pop(records[0]["flat"], None)
                        yield records
            except TerminatedWorkerError as exc:
                restarts += 1
                if restarts > self.max_restarts:
                    for b in list(pending.values()):
                        yield _lost(b, f"worker died: {str(exc).splitlines()[0]}")
                    return
                continue

    def close(self):
        pass


class Dask:
    """dask.distributed: ``scheduler=None`` starts a ``LocalCluster`` (``n_jobs`` single-threaded
    worker processes), a string connects to a running scheduler (``tcp://host:8786``), a
    ``distributed.Client`` is used as is. At most ``4 × workers`` batches are in flight. A batch
    whose worker dies is rescheduled by dask; after ``distributed.scheduler.allowed-failures``
    deaths it fails with ``KilledWorker`` and its points are recorded as failed."""
    name = "dask"

    def __init__(self, n_jobs=None, scheduler=None):
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:          # pragma: no cover — depends on the install
            raise ValueError("backend='dask' needs dask.distributed: pip install 'limits[cluster]'") from exc
        self._own = []
        if scheduler is None:
            n = int(n_jobs) if n_jobs else max(1, os.cpu_count() or 1)
            with children_ignore_sigint():
                # CRITICAL, as the tile store's cluster: a point's error comes back with its task, and what the
                # workers log at ERROR while the cluster closes (a heartbeat to a scheduler already gone, after a
                # Ctrl-C on a loaded machine) would break the one-line report of an interruption
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=logging.CRITICAL)
            self.client = Client(cluster)
            self._own = [self.client, cluster]
        elif isinstance(scheduler, str):
            if not scheduler.startswith(("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")):
                raise ValueError(f"scheduler must be an address like tcp://host:8786, got {scheduler!r}")
            try:
                self.client = Client(scheduler, timeout=30)
            except (OSError, TimeoutError) as exc:
                raise ValueError(f"scheduler: cannot connect to {scheduler}: {exc}") from exc
            self._own = [self.client]
        elif isinstance(scheduler, Client):
            self.client = scheduler
        else:
            raise ValueError(f"scheduler must be None, an address string or a distributed.Client, got {scheduler!r}")
        self.n_workers = max(1, len(self.client.scheduler_info().get("workers", {})) or (int(n_jobs) if n_jobs else 1))

    def map(self, fn, batches):
        # dask pickles a task with the standard pickle first, which sends a module function by reference even when
        # cloudpickle was told to send its module by value: the function travels as bytes, unpickled in the task
        payload = function_payload(fn)
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
        from distributed import as_completed

        batches = list(batches)
        limit = 4 * self.n_workers
        futures = {}
        it = iter(batches)

        def submit(b):
            f = self.client.submit(evaluate_pickled, payload, name, b, 1, pure=False)
            futures[f] = b
            return f

        first = [submit(b) for _, b in zip(range(limit), it)]
        ac = as_completed(first)
        try:
            for fut in ac:
                b = futures.pop(fut)
                try:
                    records = fut.result()
                except WorkerCannotLoad as exc:
                    module = name.rsplit(".", 1)[0]
                    raise ValueError(f"function {name}: the dask workers cannot load it ({exc}); install "
                                     f"{module} on every worker, or run from the folder holding "
                                     f"{module.split('.')[0]}.py with --allow {module.split('.')[0]} (allow=[…]): "
                                     "its code then travels with each task") from None
                except Exception as exc:  # noqa: BLE001 — KilledWorker, CancelledError, …
                    records = _lost(b, f"{type(exc).__name__}: {exc}")
                yield records
                nxt = next(it, None)
                if nxt is not None:
                    ac.add(submit(nxt))
        finally:
            if futures:
                self.client.cancel(list(futures))

    def close(self):
        for obj in self._own:
            try:
                obj.close()
            except Exception:  # noqa: BLE001 — shutting down
                pass


MAX_CHUNK = 1_000_000               # points per task (a task of more would hold the whole grid anyway)


def check_chunk(chunk, name="chunk"):
    """``chunk``: ``"auto"`` or a whole number of points per task, 1 … :data:`MAX_CHUNK`."""
    from ..errors import shown

    if chunk == "auto":
        return chunk
    if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or not 1 <= chunk <= MAX_CHUNK:
        raise ValueError(f"{name} must be 'auto' or a whole number of points per task from 1 to {MAX_CHUNK:,}, "
                         f"got {shown(chunk, 60)}")
    return int(chunk)


BACKENDS = {"serial": Serial, "loky": Loky, "dask": Dask}


def make(backend, n_jobs=None, scheduler=None):
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    return BACKENDS[backend](n_jobs=check_n_jobs(n_jobs), scheduler=scheduler)


def check_n_jobs(n_jobs):
    """``n_jobs``: None or a positive integer (not a bool, a float or a string like ``'two'``), at most
    ``max(64, 4 × cores)`` local worker processes."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer (number of workers) or None, got {n_jobs!r}")
    most = max(64, 4 * (os.cpu_count() or 1))
    if n_jobs > most:
        raise ValueError(f"n_jobs = {n_jobs} worker processes on a machine with {os.cpu_count()} cores; at most "
                         f"{most} (a larger cluster: a dask scheduler, --scheduler tcp://…)")
    return int(n_jobs)
