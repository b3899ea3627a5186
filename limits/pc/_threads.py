"""Limit OpenBLAS threads inside block-structured loops (many small BLAS calls).

Multithreaded OpenBLAS on many small (N ≲ 512) matrices is badly slowed by thread spinning when
the machine is shared (measured: block Cholesky N = H = 128 takes 11.5 s CPU with the default
threads, 0.11 s with one thread). ``blas_threads(n)`` sets the thread count of every loaded
OpenBLAS (numpy's and scipy's) via ctypes and restores it afterwards; a no-op if unavailable.
``LIMITS_PC_BLAS_THREADS`` overrides the default of 1.
"""
from __future__ import annotations

import contextlib
import ctypes
import os

_LIBS = None


def _libs():
    global _LIBS
    if _LIBS is not None:
        return _LIBS
    _LIBS = []
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line and line.strip().endswith(".so")}
    except OSError:
        paths = set()
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        for setter, getter in (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
                               ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
                               ("openblas_set_num_threads", "openblas_get_num_threads")):
            if hasattr(lib, setter) and hasattr(lib, getter):
                s, g = getattr(lib, setter), getattr(lib, getter)
                s.argtypes, s.restype, g.restype = [ctypes.c_int], None, ctypes.c_int
                _LIBS.append((s, g))
                break
    return _LIBS


@contextlib.contextmanager
def blas_threads(n: int | None = None):
    if n is None:
        try:
            n = int(os.environ.get("LIMITS_PC_BLAS_THREADS", "1"))
        except ValueError:
            n = 1
    import numpy  # noqa: F401  (make sure the libraries are loaded)
    import scipy.linalg  # noqa: F401

    libs = _libs()
    old = []
    try:
        for s, g in libs:
            old.append((s, g()))
            s(max(1, n))
        yield
    finally:
        for s, v in old:
            s(v)
