"""BLAS thread control for loops of many small matrix products (simulators, block solvers, DMFT).

On a shared machine multi-threaded OpenBLAS spin-waits and can be 10–100× slower than one thread
on small products (measured: block Cholesky at N = H = 128 took 11.5 s CPU with the default
threads, 0.11 s with one). ``blas_threads(n)`` sets the thread count of every loaded OpenBLAS
(numpy's and scipy's, found in ``/proc/self/maps`` or next to numpy) via ctypes and restores it
afterwards — a no-op where none is found. The default ``n`` is ``$LIMITS_BLAS_THREADS`` (1). The threads of
:mod:`limits.parallel` (``n_jobs``) are a separate count: while they run, BLAS keeps one thread.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
import threading

_LIBS = None
_NAMES = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
          ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
          ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
          ("openblas_set_num_threads", "openblas_get_num_threads"))


def _candidate_paths():
    import numpy

    paths = set()
    try:
        with open("/proc/self/maps") as fh:
            paths |= {ln.split()[-1] for ln in fh if "openblas" in ln and ".so" in ln.split()[-1]}
    except OSError:
        pass
    here = os.path.dirname(numpy.__file__)
    paths |= set(glob.glob(os.path.join(os.path.dirname(here), "numpy.libs", "*openblas*")))
    paths |= set(glob.glob(os.path.join(here, ".libs", "*openblas*")))
    return sorted(paths)


def _libs(load_scipy=True):
    """The (setter, getter) pairs of every loaded OpenBLAS; ``load_scipy`` loads scipy's first (else it is
    included only once something has imported ``scipy.linalg``: a cold start need not pay for it)."""
    global _LIBS
    import sys

    if load_scipy and "scipy.linalg" not in sys.modules:
        import scipy.linalg  # noqa: F401  (load scipy's OpenBLAS too)
    key = "scipy.linalg" in sys.modules
    if _LIBS is None:
        _LIBS = {}
    if key not in _LIBS:
        _LIBS[key] = _scan()
    return _LIBS[key]


def _scan():
    found = []
    for path in _candidate_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _NAMES:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes, setter.restype, getter.restype = [ctypes.c_int], None, ctypes.c_int
                found.append((setter, getter))
                break
    return found


_WORKER = threading.local()       # .inside: this thread is a worker of a limits.parallel region


def inside_worker() -> bool:
    """True in a worker thread of :mod:`limits.parallel` (which sets the flag)."""
    return getattr(_WORKER, "inside", False)


@contextlib.contextmanager
def worker_thread():
    """Mark the current thread as a worker of :mod:`limits.parallel` for the block."""
    _WORKER.inside = True
    try:
        yield
    finally:
        _WORKER.inside = False


def default_threads() -> int:
    try:
        return int(os.environ.get("LIMITS_BLAS_THREADS", "1"))
    except ValueError:
        return 1


@contextlib.contextmanager
def blas_threads(n: int | None = None, load_scipy: bool = True):
    """Run the body with ``n`` BLAS threads (default ``$LIMITS_BLAS_THREADS`` or 1). A no-op in a worker thread
    of :mod:`limits.parallel` (the region already runs BLAS with one thread; the count is process-wide)."""
    n = default_threads() if n is None else int(n)
    libs = _libs(load_scipy) if (n > 0 and not inside_worker()) else []
    old = []
    try:
        for setter, getter in libs:
            old.append((setter, int(getter())))
            setter(n)
        yield
    finally:
        for setter, value in old:
            setter(value)


def limit_blas(fn):
    """Decorator: run ``fn`` inside :func:`blas_threads`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with blas_threads():
            return fn(*args, **kwargs)

    return wrapper
