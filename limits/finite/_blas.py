"""BLAS thread control for the simulators (see :mod:`limits.blas`, the one implementation)."""
from ..blas import blas_threads, limit_blas  # noqa: F401


def quiet_overflow(fn):
    """Decorator for routines that detect and report overflow themselves (a flag in their result and
    at most one warning of their own): numpy's overflow / invalid-value warnings are silenced."""
    import functools

    import numpy as np

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(*args, **kwargs)

    return wrapper
