"""Health checks for kernel recursions: explosion, loss of positive-definiteness, conditioning.

Exploding kernels are *reported* (a ``diagnostics`` dict on the result plus a
:class:`KernelWarning`, or :class:`KernelExplosion` with ``on_explode="raise"``), never returned as
silent NaN: layers after the blow-up are filled with ``+inf`` and ``diagnostics['exploded_at']``
names the first bad layer.
"""
from __future__ import annotations

import warnings

import numpy as np

LARGE = 1e100          # kernels above this are flagged as exploding (overflow is near 1e308)
COND_WARN = 1e14       # condition numbers above this are flagged as (numerically) singular
MAX_EIG_P = 400        # full spectrum up to this size; Cholesky + LAPACK condition estimate above


class KernelWarning(RuntimeWarning):
    """A kernel recursion exploded, lost positive semi-definiteness or became ill-conditioned."""


class KernelExplosion(FloatingPointError):
    """Raised instead of warning when ``on_explode="raise"``."""


def check_on_explode(on_explode: str) -> str:
    if on_explode not in ("warn", "raise", "ignore"):
        raise ValueError(f"on_explode must be 'warn', 'raise' or 'ignore', got {on_explode!r}")
    return on_explode


def layer_ok(K, psd=False) -> bool:
    """Finite and not exploding. For PSD kernels |K_αβ| ≤ max_α K_αα, so the diagonal suffices."""
    A = np.diag(K) if psd else K
    if A.size == 0:
        return True
    hi, lo = float(A.max()), float(A.min())     # NaN propagates through max/min; no P² temporaries
    return np.isfinite(hi) and np.isfinite(lo) and max(abs(hi), abs(lo)) <= LARGE


def spectrum_summary(K):
    """(min eigenvalue, condition number) of a symmetric matrix, or (None, None) when too large."""
    K = np.asarray(K)
    if not np.all(np.isfinite(K)):
        return None, None
    scale = float(np.max(np.abs(K))) if K.size else 0.0
    if scale == 0.0:
        return 0.0, float("inf")
    K = K / scale                 # scale-free: entries near the float64 limit must not overflow K + Kᵀ
    if K.shape[0] > MAX_EIG_P:
        from scipy.linalg import lapack

        c, info = lapack.dpotrf(K, lower=1)
        if info != 0:
            return float("-inf"), float("inf")   # not numerically positive definite
        anorm = float(np.max(np.sum(np.abs(K), axis=0)))
        rcond, _ = lapack.dpocon(c, anorm, uplo="L")
        return None, (float("inf") if rcond == 0 else 1.0 / rcond)   # 1-norm estimate
    lam = np.linalg.eigvalsh(0.5 * (K + K.T))
    lo, hi = float(lam[0]), float(lam[-1])
    cond = float("inf") if lo <= 0 else hi / lo
    return lo * scale, cond


def finish(diag: dict, K_last, K_out, on_explode: str, what: str = "kernel") -> dict:
    """Fill spectrum fields of ``diag`` and emit warnings / raise according to ``on_explode``."""
    msgs = list(diag.get("warnings", []))
    if diag.get("exploded_at", -1) >= 0:
        msgs.append(f"{what} exploded at layer {diag['exploded_at']} (|K| > {LARGE:g} or non-finite); "
                    "later layers are +inf")
    elif not (np.all(np.isfinite(K_last)) and np.all(np.isfinite(K_out))):
        msgs.append(f"{what} has non-finite entries at the last layer")
    else:
        lo, cond = spectrum_summary(K_last)
        diag["min_eig_K_L"] = lo
        diag["cond_K_L"] = cond
        lo2, cond2 = spectrum_summary(K_out)
        diag["min_eig_K_out"] = lo2
        diag["cond_K_out"] = cond2
        scale = float(np.max(np.abs(K_last))) if np.size(K_last) else 1.0
        if lo is not None and lo < -1e-10 * max(1.0, scale) * np.shape(K_last)[0]:
            msgs.append(f"{what} at the last layer is not PSD (min eigenvalue {lo:.3e})"
                        if np.isfinite(lo) else f"{what} at the last layer is not numerically positive definite")
        if cond is not None and cond > COND_WARN and np.shape(K_last)[0] > 1:
            msgs.append(f"{what} at the last layer is ill-conditioned (condition number {cond:.3e})")
    diag["warnings"] = msgs
    if msgs and on_explode == "raise" and diag.get("exploded_at", -1) >= 0:
        raise KernelExplosion("; ".join(msgs))
    if msgs and on_explode != "ignore":
        for m in msgs:
            warnings.warn(m, KernelWarning, stacklevel=3)
    return diag
