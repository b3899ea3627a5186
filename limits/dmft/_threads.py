"""BLAS thread count for the DMFT solvers.

The solvers issue many (P × k)·(k × k) products; on a shared 2-core machine multi-threaded
OpenBLAS spin-waits and runs them 10–100× slower than a single thread. ``single_blas()`` sets the
thread count of numpy's OpenBLAS to ``$LIMITS_BLAS_THREADS`` (default 1) for the duration of a
solve (no-op if the library entry point is not found). (limits.finite has the same helper; theory
modules may not import it — a shared home for both would be cleaner.)
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os

_FUNCS = None


def _find():
    global _FUNCS
    if _FUNCS is not None:
        return _FUNCS
    _FUNCS = ()
    import numpy

    here = os.path.dirname(numpy.__file__)
    paths = glob.glob(os.path.join(os.path.dirname(here), "numpy.libs", "*openblas*"))
    paths += glob.glob(os.path.join(here, ".libs", "*openblas*"))
    names = [("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
             ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
             ("openblas_set_num_threads", "openblas_get_num_threads")]
    for p in paths:
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        for set_name, get_name in names:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes = [ctypes.c_int]
                getter.restype = ctypes.c_int
                _FUNCS = (setter, getter)
                return _FUNCS
    return _FUNCS


@contextlib.contextmanager
def single_blas():
    try:
        n = int(os.environ.get("LIMITS_BLAS_THREADS", "1"))
    except ValueError:
        n = 1
    funcs = _find()
    if not funcs or n <= 0:
        yield
        return
    setter, getter = funcs
    old = int(getter())
    setter(n)
    try:
        yield
    finally:
        setter(old)


def blas_limited(fn):
    @functools.wraps(fn)
    def wrapped(*a, **k):
        with single_blas():
            return fn(*a, **k)
    return wrapped
