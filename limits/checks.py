"""Input validation shared by every component: clear ``ValueError``s naming the argument."""
from __future__ import annotations

import numbers

import numpy as np


def finite_array(x, name: str, ndim: int | None = None, dtype=np.float64) -> np.ndarray:
    """Return ``x`` as a float64 array; raise ``ValueError`` naming ``name`` if it is complex, has
    NaN/inf or the wrong number of dimensions."""
    try:
        if np.iscomplexobj(x) and np.dtype(dtype).kind != "c":
            raise ValueError(f"{name} is complex; a real array is needed (the imaginary part is never dropped "
                             "silently)")
        arr = np.asarray(x, dtype=dtype)
    except ValueError as exc:
        if str(exc).startswith(f"{name} is complex"):
            raise
        raise ValueError(f"{name} must be a numeric array ({exc})") from None
    except TypeError as exc:
        raise ValueError(f"{name} must be a numeric array ({exc})") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


EXACT_INT = 2 ** 53          # floats represent every integer up to here, and no longer all beyond


def positive_int(n, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """Integer ``minimum <= n`` (``<= maximum`` if given) or ``ValueError`` naming ``name``. An
    integral float is accepted only up to 2**53 (beyond it 1e308 "is" an integer only by rounding)."""
    if isinstance(n, bool) or not isinstance(n, (numbers.Integral, np.integer)):
        if isinstance(n, (float, np.floating)) and float(n).is_integer() and abs(float(n)) <= EXACT_INT:
            n = int(n)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    n = int(n)
    if n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n}")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {n}")
    return n


def sample_count(n, name: str) -> int:
    """Number of independent samples (inits, seeds) a standard error is computed from: an integer
    ``>= 2`` (the SE of one sample is undefined) or ``ValueError`` naming ``name``."""
    n = positive_int(n, name)
    if n < 2:
        raise ValueError(f"{name} must be >= 2 for a standard error, got {n}")
    return n


def finite_float(x, name: str) -> float:
    """Finite float or ``ValueError`` naming ``name``."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {x!r}") from None
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def real_number(x, name: str, *, positive: bool = False, allow_negative: bool = False) -> float:
    """Finite float (``> 0`` with ``positive``; ``>= 0`` unless ``allow_negative``) or ``ValueError``
    naming ``name``; booleans and strings (``True``, ``"1"``) are refused, not read as numbers."""
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise ValueError(f"{name} must be a real number, got {x!r}")
    if allow_negative:
        return finite_float(x, name)
    return positive_float(x, name, allow_zero=not positive)


def positive_float(x, name: str, allow_zero: bool = False) -> float:
    """Finite float ``x > 0`` (or ``>= 0``) or ``ValueError`` naming ``name``."""
    v = finite_float(x, name)
    if v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {v}")
    return v


def invertible_float(x, name: str) -> float:
    """Finite float ``x > 0`` whose reciprocal ``1/x`` is finite too (a subnormal ``x`` would make
    ``1/x`` overflow to inf), or ``ValueError`` naming ``name``."""
    v = positive_float(x, name)
    if not np.isfinite(1.0 / v):
        raise ValueError(f"{name} = {v!r} is too small: 1/{name} overflows float64 (use a value >= 1e-300)")
    return v


def nonnegative_float(x, name: str) -> float:
    return positive_float(x, name, allow_zero=True)


def psd_matrix(K, name: str, tol: float = 1e-10) -> np.ndarray:
    """Symmetric positive semi-definite matrix (up to relative ``tol``) or ``ValueError``."""
    K = finite_array(K, name, ndim=2)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be square, got shape {K.shape}")
    scale = max(1.0, float(np.max(np.abs(K))) if K.size else 1.0)
    if not np.allclose(K, K.T, rtol=0, atol=tol * scale):
        raise ValueError(f"{name} must be symmetric")
    if K.size:
        lam_min = float(np.linalg.eigvalsh(0.5 * (K / scale) + 0.5 * (K / scale).T)[0]) * scale   # no overflow
        if lam_min < -tol * scale * K.shape[0]:
            raise ValueError(f"{name} is not positive semi-definite (min eigenvalue {lam_min:.3e})")
    return K


def generator(rng=None, seed=None) -> np.random.Generator:
    """The one way randomness enters: an explicit Generator, or one built from ``seed``."""
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return rng
    if seed is None:
        raise ValueError("pass rng=numpy.random.Generator or an explicit integer seed")
    return np.random.default_rng(seed)
