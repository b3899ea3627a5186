"""BLAS thread control for the simulators (see :mod:`limits.blas`, the one implementation)."""
from ..blas import blas_threads, limit_blas  # noqa: F401
