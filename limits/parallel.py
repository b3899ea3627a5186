"""How many cores ``limits`` uses: one option, ``n_jobs``, resolved in one place.

Every entry point that runs a block loop — the MLP kernels (:func:`limits.kernels.kernel`, ``nngp``), the
compositions' packed pairs, :func:`limits.kernels.kernel_blocked`, the predictions (:mod:`limits.predict`) and the
finite-network Monte Carlo (:func:`limits.finite.empirical_kernels`, the compositions' finite networks) — takes
``n_jobs``:

* ``None`` (default): ``$LIMITS_NUM_THREADS`` if set, else every core this process may run on
  (``os.sched_getaffinity``);
* ``-1``: every core; a positive integer: that many threads. Anything else is a ``ValueError``.

``with limits.parallel.using(4): ...`` sets it for a whole block of calls (an explicit ``n_jobs=`` still wins).

The blocks (row blocks of a packed Gram, tiles, chunks of input pairs, chunks of inits) run on the standard
library's thread pool (``concurrent.futures.ThreadPoolExecutor``, one per call, the calling thread taking a share;
joblib's threading backend polls for finished tasks every 10 ms — ``time.sleep(0.01)`` in ``Parallel._retrieve`` —
longer than a whole layer of a P = 1000 kernel): numpy releases the GIL inside its element-wise loops, BLAS and the random
fills, and each block writes its own slice of the output, so a block's numbers never depend on the thread that
computed it or on ``n_jobs`` (tests/test_parallel.py compares n_jobs = 1 and 2 bit for bit). BLAS runs one
thread during such a call (:func:`limits.blas.blas_threads`; a worker's own ``blas_threads`` calls are then
no-ops), so k threads never spawn k × cores BLAS threads — and multi-threaded BLAS, which may split a product's
sums differently, never changes a bit. Work that is one dense product or factorisation (the inputs' Gram, the
predictions' Cholesky and triangular solves) gets the k cores through BLAS instead (:func:`blas_cores`): those
agree with one thread to rounding (≤ 1e-14 relative), not bit for bit. A call made inside a worker runs
serially (no nested pools).
"""
from __future__ import annotations

import contextlib
import contextvars
import os

from .blas import blas_threads, inside_worker as _inside, worker_thread

ENV = "LIMITS_NUM_THREADS"

_CURRENT = contextvars.ContextVar("limits_n_jobs", default=None)    # the innermost _Region
MIN_ENTRIES = 1 << 16     # kernel entries (a transcendental each) per task: ~1 ms against ~0.1 ms per dispatch
MIN_COPIES = 1 << 16      # entries per task of a copy (512 KiB)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):             # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _check(value, what):
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (int(value) < 1 and int(value) != -1):
        raise ValueError(f"{what} must be a positive integer, -1 (every core) or None ($LIMITS_NUM_THREADS, else "
                         f"every core); got {value!r}")
    return available_cores() if int(value) == -1 else int(value)


def resolve(n_jobs=None) -> int:
    """The number of threads for ``n_jobs`` (module docstring)."""
    if n_jobs is not None:
        return _check(n_jobs, "n_jobs")
    env = os.environ.get(ENV)
    if env is None or env.strip() == "":
        return available_cores()
    try:
        value = int(env.strip())
    except ValueError:
        raise ValueError(f"${ENV} must be a positive integer or -1 (every core); got {env!r}") from None
    return _check(value, f"${ENV}")


def inside_worker() -> bool:
    """True in a thread of a running parallel region (its calls run serially, its BLAS calls keep one thread)."""
    return _inside()


def threads() -> int:
    """Threads the current call may use: 1 inside a worker, else the innermost :func:`using` value, else
    :func:`resolve` (None)."""
    if inside_worker():
        return 1
    cur = _CURRENT.get()
    return resolve(None) if cur is None else cur.n


class _Region:
    """The thread count of a :func:`using` block and its thread pool (n − 1 threads: the calling thread takes a
    share of every loop), started on first use — a call whose loops all stay serial never starts one."""

    def __init__(self, n):
        self.n, self.pool = n, None

    def executor(self):
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=self.n - 1, thread_name_prefix="limits-parallel")
        return self.pool

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None


@contextlib.contextmanager
def using(n_jobs=None):
    """Run the block with ``n_jobs`` threads (None: keep an enclosing ``using``'s value, else resolve it), BLAS
    with one thread. One thread pool serves every parallel loop of the block."""
    outer = _CURRENT.get()
    n = outer.n if (n_jobs is None and outer is not None) else resolve(n_jobs)
    if inside_worker():
        n = 1
    if outer is not None and outer.n == n:
        yield n
        return
    region = _Region(n)
    with blas_threads(1, load_scipy=False):          # BLAS: one thread, unless blas_cores
        token = _CURRENT.set(region)
        try:
            yield n
        finally:
            _CURRENT.reset(token)
            region.close()


def _in_worker(fn, item):
    with worker_thread():
        return fn(item)


def _share(pool, fn, items, n):
    """Run ``fn`` on every item: n runners (n − 1 in ``pool``, one in this thread) take the next item in turn;
    the results in the items' order. A runner's exception stops the others' next items and is raised here."""
    import threading

    results = [None] * len(items)
    order = iter(range(len(items)))
    lock, failed = threading.Lock(), []

    def runner():
        with worker_thread():
            while not failed:
                with lock:
                    k = next(order, None)
                if k is None:
                    return
                try:
                    results[k] = fn(items[k])
                except BaseException:
                    failed.append(True)
                    raise

    futures = [pool.submit(runner) for _ in range(n - 1)]
    try:
        runner()
    finally:
        errors = [f.exception() for f in futures]    # waits for every runner (no polling)
    for e in errors:
        if e is not None:
            raise e
    return results


def map_blocks(fn, items, n_jobs=None) -> list:
    """``[fn(x) for x in items]`` in order, the items shared out over the threads (:func:`threads`, or
    ``n_jobs``) and this one; serially in this thread when one thread (or one item) is all there is."""
    items = list(items)
    n = min(threads() if n_jobs is None else resolve(n_jobs), len(items))
    if n <= 1 or inside_worker():
        return [fn(x) for x in items]
    cur = _CURRENT.get()
    region = cur if (cur is not None and cur.n >= n) else _Region(n)
    try:
        with blas_threads(1, load_scipy=False), _counted():
            return _share(region.executor(), fn, items, n)
    finally:
        if region is not cur:
            region.close()


def imap_blocks(fn, items, n_jobs=None):
    """:func:`map_blocks` as a generator: the results in order as they are consumed, at most 2 × threads of them
    computed ahead (``n`` pool threads; this thread consumes) — for loops that reduce results one by one."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    n = min(threads() if n_jobs is None else resolve(n_jobs), len(items))
    if n <= 1 or inside_worker():
        yield from (fn(x) for x in items)
        return
    with blas_threads(1, load_scipy=False), _counted(), \
            ThreadPoolExecutor(max_workers=n, thread_name_prefix="limits-parallel") as pool:
        pending, todo = deque(), iter(items)
        try:
            while True:
                while len(pending) < 2 * n:
                    x = next(todo, todo)
                    if x is todo:
                        break
                    pending.append(pool.submit(_in_worker, fn, x))
                if not pending:
                    return
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


PROFILE = None     # a dict: the process CPU seconds spent in parallel regions are added to PROFILE["parallel"]


@contextlib.contextmanager
def _counted():
    """Add the process CPU of the (outermost) parallel region to ``PROFILE["parallel"]`` when profiling: with the
    CPU of the whole call, the work outside the regions is the serial part of Amdahl's law
    (benchmarks/bench_cores.py; regions nested in a region are not counted twice)."""
    prof = PROFILE
    if prof is None or prof.get("depth", 0):
        yield
        return
    import time

    prof["depth"] = 1
    c = time.process_time()
    try:
        yield
    finally:
        prof["parallel"] = prof.get("parallel", 0.0) + time.process_time() - c
        prof["depth"] = 0


def split(sizes, n, min_size=0) -> list:
    """Contiguous groups of item indices (as ranges) with about equal total ``sizes``, at most ``n`` of them and
    at most one per ``min_size`` of the total — one task per thread, so a loop over many small blocks costs one
    dispatch per thread, and a small loop stays in this thread (a dispatch costs ~0.1 ms)."""
    total = float(sum(sizes))
    if min_size > 0:
        n = min(n, int(total // min_size))
    if n <= 1 or len(sizes) <= 1 or total <= 0:
        return [range(len(sizes))]
    out, start, acc = [], 0, 0.0
    for k, s in enumerate(sizes):
        acc += s
        if acc >= total * (len(out) + 1) / n and len(out) < n - 1:
            out.append(range(start, k + 1))
            start = k + 1
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


def blas_cores(n_jobs=None, load_scipy=True):
    """A context in which BLAS/LAPACK use the current thread count (:func:`threads`): for one large dense
    factorisation or product, where BLAS is the parallel loop (outside a parallel region only). Multi-threaded
    BLAS may sum in another order: such results agree with one thread to rounding, not bit for bit."""
    n = threads() if n_jobs is None else resolve(n_jobs)
    if n <= 1:
        return blas_threads(1, load_scipy=load_scipy)
    stack = contextlib.ExitStack()
    stack.enter_context(blas_threads(n, load_scipy=load_scipy))
    stack.enter_context(_counted())                   # BLAS's threads: a parallel region for PROFILE
    return stack


def n_jobs_option(fn):
    """Decorator: ``fn`` also takes ``n_jobs=`` (keyword only) and runs inside :func:`using` — the one way an
    entry point gets the option."""
    import functools
    import inspect

    @functools.wraps(fn)
    def wrapper(*args, n_jobs=None, **kwargs):
        with using(n_jobs):
            return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    at = next((k for k, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter("n_jobs", inspect.Parameter.KEYWORD_ONLY, default=None))
    wrapper.__signature__ = sig.replace(parameters=params)
    return wrapper


def dense_blas(n_rows, n_jobs=None, minimum=256):
    """:func:`blas_cores` for a dense factorisation or product of ``n_rows`` rows (at least ``minimum``: smaller
    ones are faster on one BLAS thread), else a no-op context."""
    return blas_cores(n_jobs) if n_rows >= minimum else contextlib.nullcontext()


def _row_groups(A, per_row):
    rows = A.shape[0] if A.ndim else 0
    step = max(1, -(-rows // (8 * threads()))) if rows else 1
    starts = list(range(0, rows, step))
    return starts, step, split([min(step, rows - a) * per_row for a in starts], threads(), MIN_COPIES)


def copyto(dst, src):
    """``dst[...] = src`` for 2-D arrays of one shape, by row blocks on the threads (a copy into fresh pages is
    bound by its page faults, which the threads take in parallel)."""
    starts, step, groups = _row_groups(dst, dst.shape[1] if dst.ndim == 2 else 1)

    def part(group):
        for a in (starts[k] for k in group):
            dst[a:a + step] = src[a:a + step]
    map_blocks(part, groups)
    return dst


def extremes(A) -> tuple:
    """(max, min) of a 2-D array by row blocks on the threads (exact: no rounding to reorder)."""
    starts, step, groups = _row_groups(A, A.shape[1] if A.ndim == 2 else 1)

    def part(group):
        blocks = [A[a:a + step] for a in (starts[k] for k in group)]
        return max(float(b.max()) for b in blocks), min(float(b.min()) for b in blocks)
    out = map_blocks(part, groups)
    return max(o[0] for o in out), min(o[1] for o in out)
