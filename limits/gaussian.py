"""Gaussian expectation engine (kernels.md §1).

``expect(f, q)``            E[f(u)],          u ~ N(0, q)
``expect2(f, g, k11, k12, k22)``  E[f(u) g(v)], (u, v) ~ N(0, [[k11, k12], [k12, k22]])

``f`` and ``g`` are activation names (``"tanh"``), derivative names (``"tanh'"``, ``"tanh''"``),
:class:`~limits.activations.Activation` objects, or plain callables. All covariance arguments
broadcast against each other; the result has the broadcast shape.

Method. Closed forms when both functions are the same registered activation with a known kernel
(linear, relu, erf; E[φφ] and E[φ'φ']). Otherwise the Cholesky substitution
``u = √k11 z1``, ``v = (k12/√k11) z1 + √(k22 − k12²/k11) z2`` and a tensor trapezoidal rule in
``(z1, z2)`` on [−8.5, 8.5]². For integrands analytic in a strip of half-width δ/s around the real
axis (δ = the activation's ``strip``, s its largest standard deviation) the trapezoidal error is
O(exp(−2πδ/(s h))) — far better than Gauss–Hermite for tanh/sigmoid, whose poles sit close to the
real axis — so the step is chosen as ``h = 2πδ/(33 s)`` (target ~1e-14), capped at 0.45. Triples
are grouped by the resulting node count, so one large variance does not slow down the others.
Degenerate covariances (k11 = 0, k22 = 0, |c| = 1) reduce exactly to 1-D integrals.

Accuracy (tests/test_gaussian.py, against mpmath at 30 digits): ≤ 1e-12 for tanh, sigmoid, gelu,
erf with variances up to 10. Non-smooth user functions converge only algebraically (kinks): use
the closed forms for relu, or pass a larger ``n``.

Price's theorem: ∂/∂q E[g(u)] = ½ E[g''(u)]; ∂/∂k12 E[φ(u)φ(v)] = E[φ'(u)φ'(v)]
(:func:`dq_expect_square` gives ∂/∂q E[φ(u)²] = E[φ'² + φφ''].)
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .activations import Activation, activation

ZMAX = 8.5
_TARGET_EXPONENT = 33.0          # exp(-33) ~ 5e-15
_H_MAX = 0.45
_LADDER = (39, 55, 77, 109, 153, 217, 305, 431, 609, 861, 1217)
_MAX_ELEMENTS = 2_000_000        # work-array budget per chunk (float64 elements)


# ------------------------------------------------------------------ function specs
def _resolve(f):
    """-> (callable, activation or None, derivative order, strip)."""
    if isinstance(f, Activation):
        return f.phi, f, 0, f.strip
    if isinstance(f, str):
        name = f.strip()
        order = 0
        while name.endswith("'"):
            order += 1
            name = name[:-1]
        act = activation(name)
        if order > 2:
            raise ValueError(f"derivative order {order} of {name!r} not available (max 2)")
        strip = act.strip if act.smooth or order == 0 else 0.0
        # derivatives have higher-order poles at the same places: a larger trapezoid prefactor
        strip = strip / (1.0 + 0.3 * order)
        return act.derivative(order), act, order, strip
    if callable(f):
        return f, None, 0, 1.0
    raise ValueError(f"expected an activation name, Activation or callable, got {type(f).__name__}")


@lru_cache(maxsize=None)
def _grid(n: int):
    x = np.linspace(-ZMAX, ZMAX, n)
    h = x[1] - x[0]
    w = h * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def _nodes_for(scale_over_strip: np.ndarray, n_override=None) -> np.ndarray:
    """Node count per entry from s/δ (inf strip -> coarse grid; δ = 0 -> finest grid)."""
    if n_override is not None:
        return np.full(scale_over_strip.shape, int(n_override) | 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(scale_over_strip > 0, 2.0 * np.pi / (_TARGET_EXPONENT * scale_over_strip), _H_MAX)
    h = np.minimum(np.nan_to_num(h, nan=0.0, posinf=_H_MAX), _H_MAX)
    need = np.where(h > 0, 2.0 * np.ceil(ZMAX / np.maximum(h, 1e-300)) + 1.0, np.inf)
    ladder = np.asarray(_LADDER, dtype=float)
    idx = np.searchsorted(ladder, need)
    return ladder[np.minimum(idx, len(ladder) - 1)].astype(int)


# ------------------------------------------------------------------ validation
def _check(name, arr):
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")


def _validate_cov(k11, k12, k22, tol=1e-10):
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    for nm, a in (("k11", k11), ("k12", k12), ("k22", k22)):
        _check(nm, a)
    scale = np.maximum(np.maximum(np.abs(k11), np.abs(k22)), 1e-300)
    if np.any(k11 < -tol * scale):
        raise ValueError(f"k11 must be a non-negative variance (min {k11.min():.3e})")
    if np.any(k22 < -tol * scale):
        raise ValueError(f"k22 must be a non-negative variance (min {k22.min():.3e})")
    k11 = np.maximum(k11, 0.0)
    k22 = np.maximum(k22, 0.0)
    excess = k12 * k12 - k11 * k22
    if np.any(excess > tol * scale * scale):
        i = int(np.argmax(excess))
        raise ValueError(
            f"k12 makes the covariance non-PSD: k12² > k11·k22 at index {i} "
            f"(k11={k11.flat[i]:.6g}, k12={k12.flat[i]:.6g}, k22={k22.flat[i]:.6g})")
    # project onto the PSD cone within tolerance
    bound = np.sqrt(k11 * k22)
    k12 = np.clip(k12, -bound, bound)
    return k11, k12, k22


# ------------------------------------------------------------------ 1-D
def expect(f, q, n=None):
    """E[f(u)] for u ~ N(0, q), vectorised over ``q`` (trapezoidal rule, exact at q = 0)."""
    fn, _, _, strip = _resolve(f)
    q = np.asarray(q, dtype=np.float64)
    _check("q", q)
    if np.any(q < 0):
        raise ValueError(f"q must be a non-negative variance (min {q.min():.3e})")
    flat = q.ravel()
    out = np.empty(flat.shape)
    s = np.sqrt(flat)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(strip > 0, s / strip, np.inf) if np.isfinite(strip) else np.zeros_like(s)
    nodes = _nodes_for(ratio, n)
    for nn in np.unique(nodes):
        idx = np.nonzero(nodes == nn)[0]
        x, w = _grid(int(nn))
        step = max(1, _MAX_ELEMENTS // int(nn))
        for lo in range(0, idx.size, step):
            j = idx[lo:lo + step]
            out[j] = fn(s[j, None] * x[None, :]) @ w
    return out.reshape(q.shape)[()]


def _expect_pair_1d(fn, gn, su, sv, n_nodes):
    """E[f(su z) g(sv z)], z ~ N(0,1) — the |c| = 1 degenerate case (sv may be negative)."""
    out = np.empty(su.shape)
    for nn in np.unique(n_nodes):
        idx = np.nonzero(n_nodes == nn)[0]
        x, w = _grid(int(nn))
        out[idx] = (fn(su[idx, None] * x) * gn(sv[idx, None] * x)) @ w
    return out


# ------------------------------------------------------------------ 2-D
def _quad2(fn, gn, k11, k12, k22, strip_f, strip_g, n=None):
    out = np.empty(k11.shape)
    s1 = np.sqrt(k11)
    s2 = np.sqrt(k22)

    def ratio(s, strip):
        if not np.isfinite(strip):
            return np.zeros_like(s)
        if strip <= 0:
            return np.full_like(s, np.inf)
        return s / strip

    nodes = _nodes_for(np.maximum(ratio(s1, strip_f), ratio(s2, strip_g)), n)

    zero1 = k11 <= 0.0
    zero2 = (k22 <= 0.0) & ~zero1
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(zero1, 0.0, k12 / np.where(zero1, 1.0, s1))
        b2 = np.maximum(k22 - a * a, 0.0)
    b = np.sqrt(b2)
    # |c| = 1 up to rounding (e.g. the diagonal of a Gram matrix, where b² = k22 − (k12/√k11)² is a few
    # ulps of k22): dropping b z2 changes E[f g] by ≈ (b²/2) E[f g''] ≤ 5e-16 k22 max|g''| — far below
    # the quadrature error — and turns an n² tensor rule into an n-point 1-D rule.
    degenerate = ~zero1 & ~zero2 & (b2 <= 1e-15 * np.maximum(k22, 1e-300))
    regular = ~zero1 & ~zero2 & ~degenerate

    if np.any(zero1):
        i = np.nonzero(zero1)[0]
        f0 = float(np.asarray(fn(np.zeros(1)))[0])
        out[i] = f0 * _expect_pair_1d(lambda z: np.ones_like(z), gn, np.zeros(i.size), s2[i], nodes[i])
    if np.any(zero2):
        i = np.nonzero(zero2)[0]
        g0 = float(np.asarray(gn(np.zeros(1)))[0])
        out[i] = g0 * _expect_pair_1d(fn, lambda z: np.ones_like(z), s1[i], np.zeros(i.size), nodes[i])
    if np.any(degenerate):
        i = np.nonzero(degenerate)[0]
        out[i] = _expect_pair_1d(fn, gn, s1[i], a[i], nodes[i])
    if np.any(regular):
        ridx = np.nonzero(regular)[0]
        for nn in np.unique(nodes[ridx]):
            idx = ridx[nodes[ridx] == nn]
            x, w = _grid(int(nn))
            step = max(1, _MAX_ELEMENTS // (int(nn) * int(nn)))
            for lo in range(0, idx.size, step):
                j = idx[lo:lo + step]
                U = fn(s1[j, None] * x[None, :])                                   # (m, n)
                V = gn(a[j, None, None] * x[None, :, None] + b[j, None, None] * x[None, None, :])
                out[j] = np.einsum("mi,mi->m", U * w, V @ w)
    return out


def _mehler_pays(fs, gs, k11, k22) -> bool:
    """Use the Mehler series when both functions are smooth and the batch shares variances."""
    if not (fs > 0 and gs > 0) or k11.size < 64:
        return False
    if k11.size > 8192 and np.unique(k11[:2048]).size + np.unique(k22[:2048]).size > 512:
        return False        # clearly unrelated triples: skip sorting the whole batch
    n_var = np.unique(k11).size + np.unique(k22).size
    return n_var * 8 <= k11.size


def expect2(f, g, k11, k12, k22, n=None, closed_form=True, method="auto"):
    """E[f(u) g(v)], (u, v) ~ N(0, [[k11, k12], [k12, k22]]), vectorised by broadcasting.

    Raises ``ValueError`` naming the argument for NaN/inf, negative variances or a non-PSD
    covariance (|k12| > √(k11 k22) beyond a 1e-10 relative tolerance). ``n`` forces the
    number of quadrature nodes per dimension; ``closed_form=False`` forces quadrature.
    ``method``: "auto" (Mehler series with certified tail — :mod:`limits.mehler` — when the batch
    shares variances, e.g. Gram matrices; for ≥ 512 unrelated triples of registered smooth
    activations the Mehler series with Chebyshev-in-s coefficient interpolants, certified to 1e-12;
    tensor trapezoid otherwise and for every uncertified triple), "mehler" or "trapezoid".
    """
    fn, fa, fo, fs = _resolve(f)
    gn, ga, go, gs = _resolve(g)
    k11, k12, k22 = _validate_cov(k11, k12, k22)
    shape = k11.shape
    if closed_form:
        closed = _closed(f, g)
        if closed is not None:
            return np.asarray(closed(k11, k12, k22), dtype=np.float64).reshape(shape)[()]
    a, b, c = k11.ravel(), k12.ravel(), k22.ravel()
    if method not in ("auto", "mehler", "trapezoid"):
        raise ValueError(f"method must be 'auto', 'mehler' or 'trapezoid', got {method!r}")
    if n is None and (method == "mehler" or (method == "auto" and _mehler_pays(fs, gs, a, c))):
        from .mehler import series

        out, ok = series(fn, gn, a, b, c)
        if not np.all(ok):
            bad = ~ok
            out[bad] = _quad2(fn, gn, a[bad], b[bad], c[bad], fs, gs, None)
    elif n is None and method == "auto" and _generic_mehler_pays(fa, fs, ga, gs, a.size):
        # unrelated triples: Mehler series with coefficients interpolated in s (limits.mehler)
        from .mehler import series_generic

        out, ok = series_generic(fn, gn, a, b, c, tol=1e-12)      # certified to 1e-12 (trapezoid-level)
        if not np.all(ok):
            bad = ~ok
            out[bad] = _quad2(fn, gn, a[bad], b[bad], c[bad], fs, gs, None)
    else:
        out = _quad2(fn, gn, a, b, c, fs, gs, n)
    return out.reshape(shape)[()]


_GENERIC_MIN = 512      # below this the interpolant's fixed set-up (~10 ms) does not pay


def _generic_mehler_pays(fa, fs, ga, gs, size) -> bool:
    """Registered smooth activations (or their derivatives) on a batch large enough to amortise the
    coefficient interpolant; user callables keep the tensor trapezoid."""
    return (size >= _GENERIC_MIN and fa is not None and ga is not None and 0 < fs and 0 < gs
            and fa.smooth and ga.smooth)


# ------------------------------------------------------------------ conveniences
def kernel(act, k11, k12, k22, **kw):
    """E[φ(u)φ(v)] (closed form when known)."""
    a = activation(act)
    return expect2(a, a, k11, k12, k22, **kw)


def dkernel(act, k11, k12, k22, **kw):
    """E[φ'(u)φ'(v)] (closed form when known)."""
    a = activation(act)
    return expect2(f"{a.name}'" if _is_registered(a) else a.dphi,
                   f"{a.name}'" if _is_registered(a) else a.dphi, k11, k12, k22, **kw)


def _is_registered(a: Activation) -> bool:
    from .activations import registered

    try:
        return a.name in registered() and activation(a.name) is a
    except ValueError:
        return False


def _gram(f, g, K, name="K"):
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    _check(name, K)
    if not np.allclose(K, K.T, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(K).max(initial=0.0)))):
        raise ValueError(f"{name} must be symmetric")
    d = np.diag(K)
    fn, _, _, fs = _resolve(f)
    gn, _, _, gs = _resolve(g)
    iu = np.triu_indices(K.shape[0])
    try:
        _validate_cov(d[iu[0]], K[iu], d[iu[1]])
        if fs > 0 and gs > 0 and K.shape[0] >= 8 and _closed(f, g) is None:
            # Mehler series on the whole matrix; diagonal and uncertified entries exactly
            from .mehler import gram_series

            E, ok = gram_series(fn, gn, K, upper=True)
            bad = ~ok[iu]
            E[iu[0][bad], iu[1][bad]] = expect2(f, g, d[iu[0][bad]], K[iu][bad], d[iu[1][bad]],
                                                method="trapezoid")
            vals = E[iu]
        else:
            vals = expect2(f, g, d[iu[0]], K[iu], d[iu[1]])
    except ValueError as exc:
        raise ValueError(f"{name} is not a valid covariance matrix: {exc}") from None
    out = np.empty_like(K)
    out[iu] = vals
    out[(iu[1], iu[0])] = vals
    return out


def _closed(f, g):
    """The closed-form kernel used by expect2 for (f, g), or None."""
    _, fa, fo, _ = _resolve(f)
    _, ga, go, _ = _resolve(g)
    if fa is not None and fa is ga and fo == go:
        return fa.kernel if fo == 0 else (fa.dkernel if fo == 1 else None)
    return None


def gram(act, K):
    """P×P matrix E_{u ~ N(0,K)}[φ(u_a) φ(u_b)] for a Gram/covariance matrix K (upper triangle computed)."""
    a = activation(act)
    return _gram(a, a, K)


def dgram(act, K):
    """P×P matrix E_{u ~ N(0,K)}[φ'(u_a) φ'(u_b)]."""
    a = activation(act)
    if _is_registered(a):
        return _gram(f"{a.name}'", f"{a.name}'", K)
    return _gram(a.dphi, a.dphi, K)


def dq_expect(f, q):
    """∂/∂q E[f(u)] = ½ E[f''(u)] (Price); ``f`` a name like ``"tanh"`` or ``"tanh'"``."""
    fn, fa, fo, _ = _resolve(f)
    if fa is None:
        raise ValueError("dq_expect needs a registered activation name (it uses f'')")
    return 0.5 * expect(f"{fa.name}" + "'" * (fo + 2), q)


def dq_expect_square(act, q):
    """∂/∂q E[φ(u)²] = E[φ'(u)² + φ(u)φ''(u)] (Price's theorem)."""
    a = activation(act)
    return expect(lambda x: a.dphi(x) ** 2 + a.phi(x) * a.d2phi(x), q)
