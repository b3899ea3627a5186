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


class Diagnostics(dict):
    """The ``diagnostics`` dict of a kernel result. For P > ``MAX_EIG_P`` its spectral entries — ``min_eig_K_L``,
    ``cond_K_L``, ``min_eig_K_out``, ``cond_K_out`` and the warnings they lead to — cost two O(P³) Cholesky
    factorisations, more than a shallow O(L P²) recursion itself (P = 1000, L = 10), so for kernels from
    closed forms (``finish(lazy=True)``) they are computed on first access (of those keys, of ``warnings``, or of the dict as a whole: iteration, ``items``, saving),
    from the result's own arrays; the warnings are emitted then. Every other entry is there at once."""

    _LAZY = frozenset(("min_eig_K_L", "cond_K_L", "min_eig_K_out", "cond_K_out", "warnings"))

    def __init__(self, data=(), pending=None):
        super().__init__(data)
        self._pending = pending

    def _fill(self):
        if self._pending is not None:
            fill, self._pending = self._pending, None
            fill(self)

    def __getitem__(self, key):
        if key in self._LAZY:
            self._fill()
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self._LAZY:
            self._fill()
        return super().get(key, default)

    def __contains__(self, key):
        self._fill()
        return super().__contains__(key)

    def __iter__(self):
        self._fill()
        return super().__iter__()

    def __len__(self):
        self._fill()
        return super().__len__()

    def __eq__(self, other):
        self._fill()
        if isinstance(other, Diagnostics):
            other._fill()
        return super().__eq__(other)

    __hash__ = None

    def __repr__(self):
        self._fill()
        return super().__repr__()

    def __reduce__(self):
        self._fill()
        return (dict, (dict(super().items()),))


for _name in ("keys", "items", "values", "copy", "pop", "popitem", "setdefault", "update", "__or__", "__ror__",
              "__ior__"):
    def _filled(self, *a, _m=getattr(dict, _name), **k):
        self._fill()
        return _m(self, *a, **k)
    setattr(Diagnostics, _name, _filled)


def _spectra(diag, K_last, K_out, what) -> list:
    """Fill the spectral entries of ``diag``; return the warnings they lead to."""
    lo, cond = spectrum_summary(K_last)
    lo2, cond2 = spectrum_summary(K_out)
    dict.update(diag, min_eig_K_L=lo, cond_K_L=cond, min_eig_K_out=lo2, cond_K_out=cond2)
    msgs = []
    scale = float(np.max(np.abs(K_last))) if np.size(K_last) else 1.0
    if lo is not None and lo < -1e-10 * max(1.0, scale) * np.shape(K_last)[0]:
        msgs.append(f"{what} at the last layer is not PSD (min eigenvalue {lo:.3e})"
                    if np.isfinite(lo) else f"{what} at the last layer is not numerically positive definite")
    if cond is not None and cond > COND_WARN and np.shape(K_last)[0] > 1:
        msgs.append(f"{what} at the last layer is ill-conditioned (condition number {cond:.3e})")
    return msgs


def finish(diag: dict, K_last, K_out, on_explode: str, what: str = "kernel", lazy: bool = False,
           last_finite: bool | None = None) -> dict:
    """Fill spectrum fields of ``diag`` and emit warnings / raise according to ``on_explode``; returns a
    :class:`Diagnostics`. ``lazy=True`` (kernels from closed forms, PSD by construction up to rounding)
    defers the spectral entries to their first access when P > ``MAX_EIG_P`` or ``on_explode="ignore"``
    (nothing is warned at once then; predictions and ``kernels.kernel`` read only the kernels); otherwise (quadrature, where
    a lost PSD property would flag an inaccurate result) they are computed and warned about at once.
    ``K_last`` may be a function returning the last layer (built only when the spectra are computed; then
    ``last_finite`` says whether it is finite)."""
    msgs = list(diag.get("warnings", []))
    defer = False
    get_last = K_last if callable(K_last) else (lambda: K_last)
    fin = last_finite if callable(K_last) else bool(np.all(np.isfinite(K_last)))
    if diag.get("exploded_at", -1) >= 0:
        msgs.append(f"{what} exploded at layer {diag['exploded_at']} (|K| > {LARGE:g} or non-finite); "
                    "later layers are +inf")
    elif not (fin and np.all(np.isfinite(K_out))):
        msgs.append(f"{what} has non-finite entries at the last layer")
    elif lazy and (np.shape(K_out)[0] > MAX_EIG_P or on_explode == "ignore"):
        defer = True                   # (with "ignore" nothing is warned at once: no reason to pay now)
    else:
        msgs += _spectra(diag, get_last(), K_out, what)
    diag["warnings"] = msgs
    if msgs and on_explode == "raise" and diag.get("exploded_at", -1) >= 0:
        raise KernelExplosion("; ".join(msgs))
    if msgs and on_explode != "ignore":
        for m in msgs:
            warnings.warn(m, KernelWarning, stacklevel=3)
    if not defer:
        return Diagnostics(diag)

    def fill(d):
        new = _spectra(d, get_last(), K_out, what)
        dict.__getitem__(d, "warnings").extend(new)
        if on_explode != "ignore":
            for m in new:
                warnings.warn(m, KernelWarning, stacklevel=4)
    return Diagnostics(diag, pending=fill)
