"""BLAS thread control for the simulators' many small batched matmuls.

On a shared machine multi-threaded OpenBLAS spin-waits and can be 10–100× slower than one thread
for (S, P, N) × (S, N, N) products. The simulators run their loops inside ``blas_threads()``,
which sets the thread count of numpy's bundled OpenBLAS (via ctypes; a no-op when it cannot be
found) to ``LIMITS_BLAS_THREADS`` (default 1) and restores it afterwards.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os

_LIB = None
_SET = _GET = None


def _load():
    global _LIB, _SET, _GET
    if _LIB is not None:
        return _SET is not None
    _LIB = False
    try:
        import numpy

        root = os.path.dirname(os.path.dirname(numpy.__file__))
        cands = glob.glob(os.path.join(root, "numpy.libs", "*openblas*")) + \
            glob.glob(os.path.join(os.path.dirname(numpy.__file__), ".libs", "*openblas*"))
        for path in cands:
            lib = ctypes.CDLL(path)
            for s, g in (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
                         ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
                         ("openblas_set_num_threads", "openblas_get_num_threads")):
                if hasattr(lib, s) and hasattr(lib, g):
                    _LIB, _SET, _GET = lib, getattr(lib, s), getattr(lib, g)
                    _SET.argtypes = [ctypes.c_int]
                    _GET.restype = ctypes.c_int
                    return True
    except OSError:
        pass
    return False


@contextlib.contextmanager
def blas_threads(n=None):
    """Run the body with ``n`` BLAS threads (default ``$LIMITS_BLAS_THREADS`` or 1)."""
    if n is None:
        try:
            n = int(os.environ.get("LIMITS_BLAS_THREADS", "1"))
        except ValueError:
            n = 1
    if not _load() or n <= 0:
        yield
        return
    old = int(_GET())
    _SET(int(n))
    try:
        yield
    finally:
        _SET(old)


def limit_blas(fn):
    """Decorator: run ``fn`` inside :func:`blas_threads`."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with blas_threads():
            return fn(*args, **kwargs)

    return wrapper
