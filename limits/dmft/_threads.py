"""BLAS thread count for the DMFT solvers (one implementation: :mod:`limits.blas`)."""
from ..blas import blas_threads as _blas_threads
from ..blas import limit_blas as blas_limited  # noqa: F401


def single_blas():
    """Context manager: ``$LIMITS_BLAS_THREADS`` (default 1) BLAS threads for a solve."""
    return _blas_threads()
