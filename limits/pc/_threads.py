"""BLAS thread limit inside the block-structured loops (one implementation: :mod:`limits.blas`).

Measured here: block Cholesky at N = H = 128 takes 11.5 s CPU with the default OpenBLAS threads and
0.11 s with one thread on a shared machine. ``$LIMITS_BLAS_THREADS`` (default 1) sets the count.
"""
from ..blas import blas_threads  # noqa: F401
