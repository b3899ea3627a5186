"""Gaussian expectation engine (docs/theory/kernels.rst §1).

``expect(f, q)``            E[f(u)],          u ~ N(0, q)
``expect2(f, g, k11, k12, k22)``  E[f(u) g(v)], (u, v) ~ N(0, [[k11, k12], [k12, k22]])

``f`` and ``g`` are activation names (``"tanh"``), derivative names (``"tanh'"``, ``"tanh''"``),
:class:`~limits.activations.Activation` objects, or plain callables. All covariance arguments
broadcast against each other; the result has the broadcast shape.

Method. Closed forms when both functions are the same registered activation with a known kernel
(linear, relu, erf, gelu; E[φφ] and E[φ'φ']). Otherwise the Cholesky substitution
``u = √k11 z1``, ``v = (k12/√k11) z1 + √(k22 − k12²/k11) z2`` and a tensor trapezoidal rule in
``(z1, z2)`` on [−8.5, 8.5]². For integrands analytic in a strip of half-width δ/s around the real
axis (δ = the activation's ``strip``, s its largest standard deviation) the trapezoidal error is
O(exp(−2πδ/(s h))) — far better than Gauss–Hermite for tanh/sigmoid, whose poles sit close to the
real axis — so the step is chosen as ``h = 2πδ/(33 s)`` (target ~1e-14), capped at 0.45. Triples
are grouped by the resulting node count, so one large variance does not slow down the others.
Degenerate covariances (k11 = 0, k22 = 0, ``|c| = 1``) reduce exactly to 1-D integrals.

Large variances. The z-space rule needs O(s/δ) nodes per dimension; beyond 305 (s/δ ≳ 3.4, and always
for the relu kink) registered activations switch to rules in the *natural variable* x = s z, where
their features sit within a few δ of 0 while the Gaussian factor is nearly flat (:func:`_wide_pair`):
composite Gauss–Legendre on panels graded geometrically away from 0, and the split φ = p + r into an
asymptotic part p with closed-form Gaussian integrals (erf(κx) for tanh/sigmoid) and an exponentially
decaying remainder r. The cost does not grow with s. User callables beyond the trapezoid's largest
grid raise an :class:`AccuracyWarning` (their features are unknown); ``n=`` forces the old rule.

Accuracy (tests/test_gaussian.py, tests/test_reliability_numerics.py, against mpmath): ≤ 1e-10 relative
(plus 1e-14·√(E f² E g²) where the value vanishes by symmetry) for every registered activation, both
kernels, variances 1e-6 … 1e8 and ``|c| ∈ {0, 0.5, 0.999, 1}``, on the scalar and the Gram paths;
typically ~1e-14. The Mehler routes certify ``|error| ≤ 1e-11·max(|E|, 1e-3 √(E f² E g²))`` (shared variances)
and ``1e-12·max(|E|, √(E f² E g²))`` (unrelated triples) and hand everything else to the quadrature. A result that overflows float64 is a ``ValueError`` (never inf); the degree-1
homogeneous relu and linear kernels are evaluated scale-free, so they overflow only when the value
itself does.

Gram matrices (:func:`gram`, :func:`dgram`, :func:`gram_pairs`): tanh and sigmoid Grams whose diagonal takes
few values (inputs of equal norm: one group) are evaluated from piecewise Chebyshev interpolants in the
correlation, one per pair of variances (:mod:`limits.gaussian.corrinterp`), where :func:`interp_pays`; otherwise the
Mehler sweep with certified tail and the per-entry rules above.

Price's theorem: ∂/∂q E[g(u)] = ½ E[g''(u)]; ∂/∂k12 E[φ(u)φ(v)] = E[φ'(u)φ'(v)]
(:func:`dq_expect_square` gives ∂/∂q E[φ(u)²] = E[φ'² + φφ''].)
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..activations import Activation, Derivative, activation
from ..registry import sweep_computation

ZMAX = 8.5
_TARGET_EXPONENT = 33.0          # exp(-33) ~ 5e-15
_H_MAX = 0.45
_LADDER = (39, 55, 77, 109, 153, 217, 305, 431, 609, 861, 1217)
_MAX_ELEMENTS = 2_000_000        # work-array budget per chunk (float64 elements)


# ------------------------------------------------------------------ function specs
def resolve(f):
    """-> (callable, activation or None, derivative order, strip). ``f``: an :class:`Activation`, a
    :class:`~limits.activations.Derivative` of one, a name (``"tanh''"``: the name is looked up here, once),
    or a plain callable."""
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
        f = Derivative(act, order)
    if isinstance(f, Derivative):
        act, order = f.act, f.order
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


def raw_need(scale_over_strip: np.ndarray) -> np.ndarray:
    """Unclamped node count per dimension the z-space trapezoid needs for s/δ (inf for δ = 0)."""
    r = np.asarray(scale_over_strip, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h = np.where(r > 0, 2.0 * np.pi / (_TARGET_EXPONENT * r), _H_MAX)
    h = np.minimum(np.nan_to_num(h, nan=0.0, posinf=_H_MAX), _H_MAX)
    with np.errstate(divide="ignore"):
        return np.where(h > 0, 2.0 * np.ceil(ZMAX / np.maximum(h, 1e-300)) + 1.0, np.inf)


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
def check_finite(name, arr):
    """``ValueError`` naming ``name`` if ``arr`` contains NaN or inf."""
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")


def validate_cov(k11, k12, k22, tol=1e-10):
    """Broadcast covariance entries, checked to form valid 2×2 covariances (``ValueError`` naming the entry)."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    for nm, a in (("k11", k11), ("k12", k12), ("k22", k22)):
        check_finite(nm, a)
    scale = np.maximum(np.maximum(np.abs(k11), np.abs(k22)), 1e-300)
    if np.any(k11 < -tol * scale):
        raise ValueError(f"k11 must be a non-negative variance (min {k11.min():.3e})")
    if np.any(k22 < -tol * scale):
        raise ValueError(f"k22 must be a non-negative variance (min {k22.min():.3e})")
    k11 = np.maximum(k11, 0.0)
    k22 = np.maximum(k22, 0.0)
    # k12² − k11k22 > tol·scale², formed scale-free (no overflow for variances up to the float64 maximum)
    from ..activations import moderate_variances, geometric_mean

    if moderate_variances(k11, k22):
        bound = np.sqrt(k11 * k22)
        with np.errstate(over="ignore"):        # |k12| ≳ 1e154 ≫ the moderate variances: excess = inf → refused below
            excess = k12 * k12 - k11 * k22
        over = excess > tol * scale * scale
    else:
        bound = geometric_mean(k11, k22)
        ak = np.abs(k12)
        excess = ((ak - bound) / scale) * ((ak + bound) / scale)
        over = excess > tol
    if np.any(over):
        i = int(np.argmax(excess))
        raise ValueError(
            f"k12 makes the covariance non-PSD: k12² > k11·k22 at index {i} "
            f"(k11={k11.flat[i]:.6g}, k12={k12.flat[i]:.6g}, k22={k22.flat[i]:.6g})")
    # project onto the PSD cone within tolerance
    k12 = np.clip(k12, -bound, bound)
    return k11, k12, k22


def project_cov(k11, k12, k22):
    """:func:`validate_cov` without its checks, for covariances already known to be valid (a recursion's own
    Gram entries): the same broadcast and projection onto the PSD cone (k11, k22 ≥ 0, |k12| ≤ √(k11 k22)),
    so a valid input gives the very same arrays."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    k11 = np.maximum(k11, 0.0)
    k22 = np.maximum(k22, 0.0)
    from ..activations import moderate_variances, geometric_mean

    bound = np.sqrt(k11 * k22) if moderate_variances(k11, k22) else geometric_mean(k11, k22)
    return k11, np.clip(k12, -bound, bound), k22


# ------------------------------------------------------------------ large variances
# The z-space trapezoid above needs O(s/δ) nodes per dimension: beyond SWITCH nodes (s/δ ≳ 3.4) it is
# replaced by rules in the activation's *natural* variable x = s·z, where every registered activation
# has its features (kinks, steep regions, poles of the continuation) within a few δ of x = 0:
#
# * 1-D expectations (and the degenerate pairs |c| = 1, k11 = 0, k22 = 0): composite Gauss–Legendre on
#   panels graded geometrically away from 0 (widths δ/2, δ, 2δ, … capped at s) over [−9s, 9s].
#   Singularities of the registered activations lie on the imaginary axis, so a panel [r, 2r] sees them
#   at relative distance ≥ 3 (Bernstein parameter ≥ 5.8: ρ^{−2n} ≈ 1e-24 for n = 16 nodes).
# * 2-D: φ = p + r with p an "asymptotic part" whose Gaussian expectations are closed forms (erf(κx)
#   for tanh/sigmoid, the whole function for gelu, relu, linear, erf) and r decaying exponentially
#   (|r| < 1e-17 beyond |x| = X).  Then
#       E[f(u)g(v)] = E[p_f p_g] + E[r_f(u) g(v)] + E[p_f(u) r_g(v)],
#   the first term closed, the second a graded-panel integral over u ∈ [−X_f, X_f] of
#   r_f(u) N(u; 0, k11) E[g(v) | u] with E[g | u] = P_g(μ, b) + ∫ r_g(x) N(x; μ, b²) dx (μ = k12 u/k11,
#   b² = k22 − k12²/k11; the inner integral on graded panels in x with width ≤ b, or in z = (x − μ)/b by
#   the trapezoid when b is small), the third a graded-panel integral over v of r_g(v) N(v) P_f(μ', b').
#   Every piece is resolved at the scale of its own features, so the cost does not grow with s.
SWITCH = 305                     # z-space nodes per dimension above which the natural-variable rule is used
_GL_N = 16
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_GL_N)
_SQ2 = math.sqrt(2.0)
_SQ2PI = math.sqrt(2.0 * math.pi)


class AccuracyWarning(RuntimeWarning):
    """A Gaussian expectation could not be certified to the engine's stated accuracy."""


def _graded(W: float, ell: float, wmax: float, fine: float = np.inf, fine_to: float = 0.0):
    """Gauss–Legendre nodes/weights on [−W, W]: panels [−ell, 0], [0, ell], then widths ell, 2ell, 4ell,
    … (at most ``wmax``; at most ``fine`` while |x| < ``fine_to``, where the integrand still decays
    exponentially on an O(1) scale: 16 nodes integrate e^{−x} on a panel of width ≤ 3 to 1e-20)."""
    ell = min(max(ell, 1e-300), W, fine)
    wmax = max(wmax, ell)
    b = [ell]
    w = ell
    while b[-1] < W:
        w = min(2.0 * w, wmax, fine if b[-1] < fine_to else np.inf)
        b.append(min(b[-1] + w, W))
        if len(b) > 100_000:
            raise RuntimeError("graded panels: too many panels")
    bb = np.asarray(b)
    edges = np.concatenate([-bb[::-1], [0.0], bb])      # an edge at 0: kinks (relu) sit on it
    lo, hi = edges[:-1], edges[1:]
    half = 0.5 * (hi - lo)
    x = (0.5 * (hi + lo))[:, None] + half[:, None] * _GL_X[None, :]
    w = half[:, None] * _GL_W[None, :]
    return x.ravel(), w.ravel()


_FINE = 3.0


def _npdf(x, s):
    return np.exp(-0.5 * (x / s) ** 2) / (_SQ2PI * s)


def _ndtr(x):
    from scipy.special import ndtr

    return ndtr(x)


# function splits φ = p + r ------------------------------------------------------------------
_KAPPA = math.sqrt(math.pi) / 2.0     # erf(κx) has tanh's slope at 0


def asymptotic_split(act, order):
    """(p, r, X, δ) for a registered activation's derivative of given order, or None.
    p: ("erf", A, B, κ) = A + B erf(κx) | ("gelu", k) | ("relu", k) | ("lin",) = x | ("zero",)."""
    from scipy import special

    name = act.name
    if name == "tanh":
        if order == 0:
            return ("erf", 0.0, 1.0, _KAPPA), (lambda x: np.tanh(x) - special.erf(_KAPPA * x)), 23.0, math.pi / 2
        return ("zero",), act.derivative(order), 23.0, math.pi / 2
    if name == "sigmoid":
        if order == 0:
            return (("erf", 0.5, 0.5, _KAPPA / 2),
                    (lambda x: 0.5 * (np.tanh(0.5 * x) - special.erf(0.5 * _KAPPA * x))), 46.0, math.pi)
        return ("zero",), act.derivative(order), 46.0, math.pi
    if name == "gelu":
        if order < 2:
            return ("gelu", order), None, 0.0, np.inf
        return ("zero",), act.d2phi, 10.0, 1.5
    if name == "erf":
        if order == 0:
            return ("erf", 0.0, 1.0, 1.0), None, 0.0, np.inf
        return ("zero",), act.derivative(order), 7.0, 1.5
    if name == "relu":
        return (("relu", order) if order < 2 else ("zero",)), None, 0.0, np.inf
    if name == "linear":
        p = (("lin",), ("erf", 1.0, 0.0, 1.0), ("zero",))[order]
        return p, None, 0.0, np.inf
    return None


def _p_scale(p) -> float:
    """Feature width of x ↦ p(x) around 0 (0 for the relu kink)."""
    if p[0] == "erf":
        return 1.0 / max(p[3], 1e-300)
    return 0.0 if p[0] == "relu" else 1.0


def _p_mean(p, mu, b):
    """E[p(μ + b z)], z ~ N(0, 1) (closed forms; μ, b arrays, b ≥ 0)."""
    from scipy import special

    kind = p[0]
    mu = np.asarray(mu, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if kind == "zero":
        return np.zeros(np.broadcast(mu, b).shape)
    if kind == "lin":
        return mu + 0.0 * b
    if kind == "erf":
        _, A, B, k = p
        return A + B * special.erf(k * mu / np.sqrt(1.0 + 2.0 * k * k * b * b))
    if kind == "gelu":
        r = np.sqrt(1.0 + b * b)
        t = mu / r
        if p[1] == 0:
            return mu * _ndtr(t) + b * b * np.exp(-0.5 * t * t) / (_SQ2PI * r)
        return _ndtr(t) + np.exp(-0.5 * t * t) / (_SQ2PI * r) * mu / (r * r)
    if kind == "relu":
        with np.errstate(divide="ignore", invalid="ignore"):
            t = mu / b
            if p[1] == 0:
                v = mu * _ndtr(t) + b * np.exp(-0.5 * t * t) / _SQ2PI
                return np.where(b > 0, v, np.maximum(mu, 0.0))
            return np.where(b > 0, _ndtr(t), (mu > 0).astype(float))
    raise AssertionError(kind)


def _p_pair(pf, pg, k11, k12, k22):
    """E[p_f(u) p_g(v)] in closed form, or None when the pair has none here."""
    from ..activations import BUILTIN

    kf, kg = pf[0], pg[0]
    if kf == "zero" or kg == "zero":
        return 0.0
    const_f = kf == "erf" and pf[2] == 0.0
    const_g = kg == "erf" and pg[2] == 0.0
    if const_f:
        return pf[1] * float(_p_mean(pg, 0.0, math.sqrt(k22)))
    if const_g:
        return pg[1] * float(_p_mean(pf, 0.0, math.sqrt(k11)))
    if kf == "erf" and kg == "erf":
        from ..activations import erf_root

        _, A1, B1, a = pf
        _, A2, B2, c = pg
        _, rho, cc = erf_root(k11, k12, k22, a, c)
        return A1 * A2 + B1 * B2 * (2.0 / math.pi) * math.atan2(2.0 * a * c * float(cc), float(rho))
    if kf == kg and kf in ("gelu", "relu") and pf[1] == pg[1]:
        act = BUILTIN[kf]
        fn = act.kernel if pf[1] == 0 else act.dkernel
        return float(fn(k11, k12, k22))
    if kf == "lin" and kg == "lin":
        return k12
    return None


def _wide_1d(fn, s, delta, fine=np.inf, fine_to=0.0):
    """E[fn(s z)] (features of fn within a few δ of 0) on graded panels in x = s z."""
    x, w = _graded(9.0 * s, 0.5 * delta, s, fine, fine_to)
    return float(np.dot(fn(x), w * _npdf(x, s)))


def _inner_r(r, X, delta, mu, b):
    """∫ r(x) N(x; μ_i, b²) dx for an array μ (r negligible for |x| > X)."""
    if b <= 0.0:
        return r(mu)
    if b < 0.5 * delta:                             # narrow Gaussian: trapezoid in z per node
        z = np.arange(-8.5, 8.5 + 1e-12, min(0.3, math.pi * delta / (18.0 * b)))
        wz = np.exp(-0.5 * z * z) * (z[1] - z[0]) / _SQ2PI
        return r(mu[:, None] + b * z[None, :]) @ wz
    x, w = _graded(X, 0.5 * delta, b, _FINE, X)
    rx = r(x) * w
    t = mu / (b * b)
    T = float(np.max(np.abs(t))) * X if t.size else 0.0
    if T <= 2.0:
        # N(x; μ, b²) = e^{−μ²/2b²} e^{−x²/2b²} e^{tx}, t = μ/b²: with |t x| ≤ 2 the exponential is a
        # 28-term Taylor series (remainder ≤ 2²⁸ e²/28! < 1e-20), so the n_μ × n_x kernel matrix becomes
        # 28 moments of the x-rule — O(n_μ + n_x) instead of O(n_μ n_x)
        m = rx * np.exp(-0.5 * (x / b) ** 2)
        mom = np.empty(28)
        for k in range(28):
            mom[k] = m.sum()
            m = m * x / (k + 1.0)
        acc = np.full(t.shape, mom[-1])
        for k in range(26, -1, -1):
            acc = acc * t + mom[k]
        return np.exp(-0.5 * (mu / b) ** 2) * acc / (_SQ2PI * b)
    return np.exp(-0.5 * ((x[None, :] - mu[:, None]) / b) ** 2) @ rx / (_SQ2PI * b)


def _wide_pair(sf, sg, k11, k12, k22):
    """E[f(u) g(v)] by the natural-variable rule for one regular triple (0 < |c| < 1 or c = 0)."""
    pf, rf, Xf, df = sf
    pg, rg, Xg, dg = sg
    total = _p_pair(pf, pg, k11, k12, k22)
    s1, s2 = math.sqrt(k11), math.sqrt(k22)
    if rf is not None:                               # E[r_f(u) g(v)], outer u
        cp = k12 / k11
        b = math.sqrt(max(k22 - k12 * cp, 0.0))
        scale_h = max(min(dg, _p_scale(pg)), b) / max(abs(cp), 1e-300)
        W = min(Xf, 9.0 * s1)
        u, w = _graded(W, 0.5 * min(df, scale_h), s1, _FINE, Xf)
        H = _p_mean(pg, cp * u, b)
        if rg is not None:
            H = H + _inner_r(rg, Xg, dg, cp * u, b)
        total += float(np.dot(rf(u) * H, w * _npdf(u, s1)))
    if rg is not None and pf[0] != "zero":           # E[p_f(u) r_g(v)], outer v
        cq = k12 / k22
        b2 = math.sqrt(max(k11 - k12 * cq, 0.0))
        scale_h = max(_p_scale(pf), b2) / max(abs(cq), 1e-300)
        W = min(Xg, 9.0 * s2)
        v, w = _graded(W, 0.5 * min(dg, scale_h), s2, _FINE, Xg)
        total += float(np.dot(rg(v) * _p_mean(pf, cq * v, b2), w * _npdf(v, s2)))
    return total


def _inner_r_batch(r, X, delta, mu, b):
    """:func:`_inner_r` for many Gaussians at once: ∫ r(x) N(x; μ_ij, b_i²) dx for μ (n_c, n_u), b (n_c,)
    (the same three regimes per row i; common grids, at least as fine as the per-row ones)."""
    out = np.empty(mu.shape)
    zero = b <= 0.0
    narrow = ~zero & (b < 0.5 * delta)
    wide = ~zero & ~narrow
    if zero.any():
        out[zero] = r(mu[zero])
    if narrow.any():                                   # trapezoid in z (step 0.3 = min(0.3, πδ/18b) here)
        z = np.arange(-8.5, 8.5 + 1e-12, 0.3)
        wz = np.exp(-0.5 * z * z) * (z[1] - z[0]) / _SQ2PI
        i = np.nonzero(narrow)[0]
        out[i] = r(mu[i, :, None] + b[i, None, None] * z[None, None, :]) @ wz
    if wide.any():
        i = np.nonzero(wide)[0]
        x, w = _graded(X, 0.5 * delta, float(b[i].min()), _FINE, X)
        rx = r(x) * w
        t = mu[i] / (b[i, None] ** 2)
        T = np.max(np.abs(t), axis=1) * X
        tay = T <= 2.0
        if tay.any():                                  # 28-term Taylor series of e^{tx} (see _inner_r)
            j = i[tay]
            bj = b[j]
            m = rx[None, :] * np.exp(-0.5 * (x[None, :] / bj[:, None]) ** 2)       # (n, n_x)
            pw = np.empty((x.size, 28))
            pw[:, 0] = 1.0
            for k in range(1, 28):
                pw[:, k] = pw[:, k - 1] * x / k
            mom = m @ pw                                                           # (n, 28)
            tt = t[tay]
            acc = np.repeat(mom[:, -1:], tt.shape[1], axis=1)
            for k in range(26, -1, -1):
                acc *= tt
                acc += mom[:, k:k + 1]
            out[j] = np.exp(-0.5 * (mu[j] / bj[:, None]) ** 2) * acc / (_SQ2PI * bj[:, None])
        rest = i[~tay]
        if rest.size:
            # trapezoid in z = (x − μ)/b with the narrow rule's step πδ/(18b) (error ~e^{−36}) when it
            # needs fewer nodes than the x-grid; else the dense kernel matrix, row by row
            h = min(0.3, math.pi * delta / (18.0 * float(b[rest].max())))
            if 17.0 / h < x.size:
                z = np.arange(-8.5, 8.5 + 1e-12, h)
                wz = np.exp(-0.5 * z * z) * h / _SQ2PI
                for jj in rest:
                    out[jj] = r(mu[jj][:, None] + b[jj] * z[None, :]) @ wz
            else:
                for jj in rest:
                    out[jj] = np.exp(-0.5 * ((x[None, :] - mu[jj][:, None]) / b[jj]) ** 2) @ rx / (_SQ2PI * b[jj])
    return out


def _p_pair_batch(pf, pg, k11, k12, k22):
    """:func:`_p_pair` for an array k12 (scalars k11, k22)."""
    if pf[0] == "erf" and pg[0] == "erf" and pf[2] != 0.0 and pg[2] != 0.0:
        from ..activations import erf_root

        _, A1, B1, a = pf
        _, A2, B2, c = pg
        _, rho, cc = erf_root(k11, k12, k22, a, c)
        return A1 * A2 + B1 * B2 * (2.0 / math.pi) * np.arctan2(2.0 * a * c * cc, rho)
    return np.array([_p_pair(pf, pg, k11, float(x), k22) for x in k12])


def wide_pair_batch(f, g, k11: float, k12, k22: float, even: bool = False, omc=None):
    """E[f(u) g(v)] by the natural-variable rule (:func:`_wide_pair`) for one pair of variances and an array
    of covariances k12 with 0 < abs(c) < 1 (up to b² > 1e-15 k22) — all rows at once on common grids; the
    degenerate rows (abs(c) = 1) by :func:`expect2`. ``f``, ``g`` names of built-in activations. ``even=True``
    (caller's guarantee: every split part of f and g is odd or even, with f·g even — tanh and its
    derivatives): the outer integrands are even and only the nodes x > 0 of the symmetric grids are used.
    ``omc`` (optional, same shape as k12): 1 − abs(c) given exactly, so that the conditional variances
    k22(1 − c²) = k22·omc·(2 − omc) are formed without the cancellation of k22 − k12²/k11 near abs(c) = 1."""
    fn, fa, fo, _ = resolve(f)
    gn, ga, go, _ = resolve(g)
    sf, sg = asymptotic_split(fa, fo), asymptotic_split(ga, go)
    k12 = np.asarray(k12, dtype=np.float64)
    s1, s2 = math.sqrt(k11), math.sqrt(k22)
    cp = k12 / k11
    if omc is None:
        b_sq = k22 - k12 * cp
        one_m_c2 = None
    else:
        one_m_c2 = np.asarray(omc, dtype=np.float64) * (2.0 - np.asarray(omc, dtype=np.float64))
        b_sq = k22 * one_m_c2
    deg = b_sq <= 1e-15 * k22
    out = np.empty(k12.shape)
    if deg.any():
        out[deg] = expect2(f, g, np.full(int(deg.sum()), k11), k12[deg], np.full(int(deg.sum()), k22),
                           method="trapezoid")
    # rows in octaves of the conditional standard deviation b: each octave gets grids as fine as its
    # finest row needs (not the batch's finest)
    b_all = np.sqrt(np.maximum(b_sq, 0.0))
    with np.errstate(divide="ignore"):
        octave = np.floor(np.log2(np.maximum(b_all, 1e-300)))
    for o in np.unique(octave[~deg]):
        i = np.nonzero(~deg & (octave == o))[0]
        out[i] = _wide_rows(sf, sg, k11, k12[i], k22, cp[i], even,
                            None if one_m_c2 is None else one_m_c2[i])
    return out


def _half(x, w, even):
    """The x > 0 half of a symmetric rule with doubled weights (even integrands), or the rule itself."""
    if not even:
        return x, w
    k = x > 0.0
    return x[k], 2.0 * w[k]


def _wide_rows(sf, sg, k11, k12r, k22, cp, even=False, one_m_c2=None):
    """Rows of :func:`wide_pair_batch` (regular covariances) on common grids."""
    s1, s2 = math.sqrt(k11), math.sqrt(k22)
    pf, rf, Xf, df = sf
    pg, rg, Xg, dg = sg
    p = _p_pair_batch(pf, pg, k11, k12r, k22)
    total = np.broadcast_to(np.asarray(p, dtype=np.float64), k12r.shape).copy()
    if rf is not None:                                  # E[r_f(u) g(v)], outer u
        b = np.sqrt(np.maximum(k22 - k12r * cp, 0.0) if one_m_c2 is None else k22 * one_m_c2)
        with np.errstate(divide="ignore"):
            scale_h = np.maximum(min(dg, _p_scale(pg)), b) / np.maximum(np.abs(cp), 1e-300)
        W = min(Xf, 9.0 * s1)
        u, w = _half(*_graded(W, 0.5 * min(df, float(scale_h.min())), s1, _FINE, Xf), even)
        mu = cp[:, None] * u[None, :]
        H = _p_mean(pg, mu, b[:, None])
        if rg is not None:
            H = H + _inner_r_batch(rg, Xg, dg, mu, b)
        total += H @ (rf(u) * w * _npdf(u, s1))
    if rg is not None and pf[0] != "zero":              # E[p_f(u) r_g(v)], outer v
        cq = k12r / k22
        b2 = np.sqrt(np.maximum(k11 - k12r * cq, 0.0) if one_m_c2 is None else k11 * one_m_c2)
        with np.errstate(divide="ignore"):
            scale_h = np.maximum(_p_scale(pf), b2) / np.maximum(np.abs(cq), 1e-300)
        W = min(Xg, 9.0 * s2)
        v, w = _half(*_graded(W, 0.5 * min(dg, float(scale_h.min())), s2, _FINE, Xg), even)
        total += _p_mean(pf, cq[:, None] * v[None, :], b2[:, None]) @ (rg(v) * w * _npdf(v, s2))
    return total


def _feat(act) -> float:
    s = float(act.strip)
    return s if 0.0 < s < np.inf else 1.0


def _wide_any(fn, gn, sf, sg, fa, ga, k11, k12, k22):
    """Natural-variable rule for one triple, including the degenerate ones (k11 = 0, k22 = 0, ``|c| = 1``)."""
    s1, s2 = math.sqrt(k11), math.sqrt(k22)
    if s1 == 0.0 or s2 == 0.0:                      # E[f(0) g(v)] or E[f(u) g(0)]
        f0, g0 = (float(np.asarray(h(np.zeros(1)))[0]) for h in (fn, gn))
        if s1 == 0.0 and s2 == 0.0:
            return f0 * g0
        return f0 * _expect_split(sg, s2) if s1 == 0.0 else g0 * _expect_split(sf, s1)
    a = k12 / s1
    b2 = k22 - a * a
    if b2 <= 1e-15 * k22:                           # |c| = 1: one-dimensional
        t = a / s1
        d = min(_feat(fa), _feat(ga) / abs(t)) if t != 0 else _feat(fa)
        decay = [(sf[2], _FINE)] if sf[0][0] == "zero" else []
        if sg[0][0] == "zero" and t != 0:
            decay.append((sg[2] / abs(t), _FINE / abs(t)))
        fine, fine_to = (min(v[1] for v in decay), min(v[0] for v in decay)) if decay else (np.inf, 0.0)
        return _wide_1d(lambda x: fn(x) * gn(t * x), s1, d, fine, fine_to)
    return _wide_pair(sf, sg, k11, k12, k22)


def _expect_split(sp, s):
    """E[φ(s z)] = E[p(s z)] (closed form) + E[r(s z)] (graded panels on |x| ≤ min(X, 9s))."""
    p, r, X, d = sp
    val = float(_p_mean(p, 0.0, s))
    W = min(X, 9.0 * s)
    if r is not None and W > 0:
        x, w = _graded(W, 0.5 * d, s, _FINE, X)
        val += float(np.dot(r(x), w * _npdf(x, s)))
    return val


def is_builtin(act) -> bool:
    """Whether ``act`` is the built-in activation object of its name."""
    from ..activations import BUILTIN

    return act is not None and BUILTIN.get(getattr(act, "name", None)) is act


def _label(f) -> str:
    if isinstance(f, Derivative):
        return f.act.name + "'" * f.order
    return f if isinstance(f, str) else getattr(f, "name", getattr(f, "__name__", "f"))


def _warn_uncertified(what, need):
    import warnings

    warnings.warn(f"{_label(what)}: the variance is too large for the z-space trapezoid "
                  f"({float(np.max(need)):.3g} nodes per dimension needed, {_LADDER[-1]} used) and the "
                  "function is not a registered activation with a natural-variable rule: the value is NOT "
                  "certified to the engine's accuracy (pass n= to force more nodes)",
                  AccuracyWarning, stacklevel=4)


def _finite_result(out, what):
    """Overflow is an error, not an inf: finite inputs gave a non-finite expectation."""
    if not np.all(np.isfinite(out)):
        i = int(np.argmax(~np.isfinite(out.ravel())))
        raise ValueError(f"{what} is not representable in float64 (got {out.ravel()[i]!r} at flat index "
                         f"{i}): the expectation overflows; rescale the variances")
    return out


# ------------------------------------------------------------------ 1-D
@sweep_computation
def expect(f, q, n=None):
    """E[f(u)] for u ~ N(0, q), vectorised over ``q`` (trapezoidal rule, exact at q = 0; registered
    activations at large q/non-smooth: closed-form asymptotic part + graded Gauss–Legendre remainder).
    ``ValueError`` if the result overflows; :class:`AccuracyWarning` for user callables whose variance is
    beyond the trapezoid's largest grid."""
    fn, fa, fo, strip = resolve(f)
    q = np.asarray(q, dtype=np.float64)
    check_finite("q", q)
    if np.any(q < 0):
        raise ValueError(f"q must be a non-negative variance (min {q.min():.3e})")
    flat = q.ravel()
    out = np.empty(flat.shape)
    s = np.sqrt(flat)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(strip > 0, s / strip, np.inf) if np.isfinite(strip) else np.zeros_like(s)
    nodes = _nodes_for(ratio, n)
    wide = np.zeros(s.shape, dtype=bool)
    if n is None:
        wide = raw_need(ratio) > SWITCH
        sp = asymptotic_split(fa, fo) if is_builtin(fa) else None
        if np.any(wide):
            if sp is None:
                need = raw_need(ratio)
                if np.any(need > _LADDER[-1]):          # the trapezoid's finest grid certifies the rest
                    _warn_uncertified(f, need[need > _LADDER[-1]])
                wide[:] = False
            else:
                for j in np.nonzero(wide)[0]:
                    out[j] = _expect_split(sp, s[j])
    for nn in np.unique(nodes[~wide]):
        idx = np.nonzero((nodes == nn) & ~wide)[0]
        x, w = _grid(int(nn))
        step = max(1, _MAX_ELEMENTS // int(nn))
        for lo in range(0, idx.size, step):
            j = idx[lo:lo + step]
            out[j] = fn(s[j, None] * x[None, :]) @ w
    return _finite_result(out.reshape(q.shape), f"E[{_label(f)}(u)]")[()]


def _expect_pair_1d(fn, gn, su, sv, n_nodes):
    """E[f(su z) g(sv z)], z ~ N(0,1) — the |c| = 1 degenerate case (sv may be negative)."""
    out = np.empty(su.shape)
    for nn in np.unique(n_nodes):
        idx = np.nonzero(n_nodes == nn)[0]
        x, w = _grid(int(nn))
        out[idx] = (fn(su[idx, None] * x) * gn(sv[idx, None] * x)) @ w
    return out


# ------------------------------------------------------------------ 2-D
def _quad2(fn, gn, k11, k12, k22, strip_f, strip_g, n=None, spec_f=None, spec_g=None, label="E[f g]"):
    """Quadrature for flat arrays of triples; ``spec_f``/``spec_g`` = (activation, derivative order) of
    registered functions route large s/δ to the natural-variable rule (:func:`_wide_pair`)."""
    out = np.empty(k11.shape)
    s1 = np.sqrt(k11)
    s2 = np.sqrt(k22)

    def ratio(s, strip):
        if not np.isfinite(strip):
            return np.zeros_like(s)
        if strip <= 0:
            return np.full_like(s, np.inf)
        return s / strip

    rmax = np.maximum(ratio(s1, strip_f), ratio(s2, strip_g))
    nodes = _nodes_for(rmax, n)
    if n is None:
        need = raw_need(rmax)
        wide = need > SWITCH
        if np.any(wide):
            sf = asymptotic_split(*spec_f) if spec_f is not None and is_builtin(spec_f[0]) else None
            sg = asymptotic_split(*spec_g) if spec_g is not None and is_builtin(spec_g[0]) else None
            if sf is None or sg is None or _p_pair(sf[0], sg[0], 1.0, 0.5, 1.0) is None:
                if np.any(need > _LADDER[-1]):          # the trapezoid's finest grid certifies the rest
                    _warn_uncertified(label, need[need > _LADDER[-1]])
            else:
                rest = ~wide
                for j in np.nonzero(wide)[0]:
                    out[j] = _wide_any(fn, gn, sf, sg, spec_f[0], spec_g[0], k11[j], k12[j], k22[j])
                if np.any(rest):
                    out[rest] = _quad2(fn, gn, k11[rest], k12[rest], k22[rest], strip_f, strip_g, None,
                                       None, None, label)
                return out

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


@sweep_computation
def expect2(f, g, k11, k12, k22, n=None, closed_form=True, method="auto", checked=False):
    """E[f(u) g(v)], (u, v) ~ N(0, [[k11, k12], [k12, k22]]), vectorised by broadcasting.

    Raises ``ValueError`` naming the argument for NaN/inf, negative variances or a non-PSD
    covariance (``|k12| > √(k11 k22)`` beyond a 1e-10 relative tolerance). ``n`` forces the
    number of quadrature nodes per dimension; ``closed_form=False`` forces quadrature.
    ``method``: "auto" (Mehler series with certified tail — :mod:`limits.gaussian.mehler` — when the batch
    shares variances, e.g. Gram matrices; for ≥ 512 unrelated triples of registered smooth
    activations the Mehler series with Chebyshev-in-s coefficient interpolants, certified to 1e-12;
    tensor trapezoid otherwise and for every uncertified triple), "mehler" or "trapezoid". Registered
    activations whose variance is too large for the z-space trapezoid take the natural-variable rule
    (module docstring) whatever ``method`` says; a result that overflows float64 raises ``ValueError``
    (never inf/NaN); user callables beyond the largest grid give an :class:`AccuracyWarning`.
    ``checked=True`` (internal callers whose covariances are valid by construction, e.g. a kernel
    recursion's layers after its inputs were checked once): the checks are skipped, the projection kept
    (:func:`project_cov`).
    """
    fn, fa, fo, fs = resolve(f)
    gn, ga, go, gs = resolve(g)
    k11, k12, k22 = project_cov(k11, k12, k22) if checked else validate_cov(k11, k12, k22)
    shape = k11.shape
    label = f"E[{_label(f)}(u) {_label(g)}(v)]"
    spec = dict(spec_f=(fa, fo) if fa is not None else None, spec_g=(ga, go) if ga is not None else None,
                label=label)
    if closed_form:
        closed = closed_kernel(f, g)
        if closed is not None:
            val = np.asarray(closed(k11, k12, k22), dtype=np.float64).reshape(shape)
            return _finite_result(val, label)[()]
    a, b, c = k11.ravel(), k12.ravel(), k22.ravel()
    if method not in ("auto", "mehler", "trapezoid"):
        raise ValueError(f"method must be 'auto', 'mehler' or 'trapezoid', got {method!r}")
    if n is None and (method == "mehler" or (method == "auto" and _mehler_pays(fs, gs, a, c))):
        from .mehler import series

        out, ok = series(fn, gn, a, b, c)
        if not np.all(ok):
            bad = ~ok
            out[bad] = _quad2(fn, gn, a[bad], b[bad], c[bad], fs, gs, None, **spec)
    elif n is None and method == "auto" and _generic_mehler_pays(fa, fs, ga, gs, a.size):
        # unrelated triples: Mehler series with coefficients interpolated in s (limits.gaussian.mehler)
        from .mehler import series_generic

        out, ok = series_generic(fn, gn, a, b, c, tol=1e-12)      # certified to 1e-12 (trapezoid-level)
        if not np.all(ok):
            bad = ~ok
            out[bad] = _quad2(fn, gn, a[bad], b[bad], c[bad], fs, gs, None, **spec)
    else:
        out = _quad2(fn, gn, a, b, c, fs, gs, n, **spec)
    return _finite_result(out.reshape(shape), label)[()]


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
    return expect2(Derivative(a, 1) if is_registered(a) else a.dphi,
                   Derivative(a, 1) if is_registered(a) else a.dphi, k11, k12, k22, **kw)


def is_registered(a: Activation) -> bool:
    """Whether ``a`` is the registered activation of its name (then its derivatives keep the registry's
    certified rules; a user's unregistered object is integrated as plain callables)."""
    from ..activations import is_registered as registered_object

    return registered_object(a)


def closed_kernel(f, g):
    """The closed-form kernel used by expect2 for (f, g), or None."""
    _, fa, fo, _ = resolve(f)
    _, ga, go, _ = resolve(g)
    if fa is not None and fa is ga and fo == go:
        return fa.kernel if fo == 0 else (fa.dkernel if fo == 1 else None)
    return None


def dq_expect(f, q):
    """∂/∂q E[f(u)] = ½ E[f''(u)] (Price); ``f`` a name like ``"tanh"`` or ``"tanh'"``. relu's f'' is a δ at the
    kink, not the 0 its φ'' stands for: there the closed forms ∂/∂q E[relu(u)] = 1/(2√(2πq)) (Stein's scaling
    form E[u f'(u)]/(2q)) and ∂/∂q E[step(u)] = 0; other non-smooth activations are refused."""
    fn, fa, fo, _ = resolve(f)
    if fa is None:
        raise ValueError("dq_expect needs a registered activation name (it uses f'')")
    if fa.smooth:
        return 0.5 * expect(Derivative(fa, fo + 2), q)
    q = np.asarray(q, dtype=np.float64)
    if is_builtin(fa) and fa.name == "relu":
        if np.any(q <= 0):
            raise ValueError("dq_expect('relu', q): q must be > 0 (the derivative at q = 0 is infinite)")
        return (1.0 / (2.0 * np.sqrt(2.0 * np.pi * q)) if fo == 0 else np.zeros_like(q))[()]
    raise ValueError(f"dq_expect of the non-smooth {fa.name!r}: its f'' is a distribution at the kinks")


def dq_expect_square(act, q):
    """∂/∂q E[φ(u)²] = E[φ'(u)² + φ(u)φ''(u)] (Price's theorem)."""
    a = activation(act)
    if is_builtin(a):          # by name: certified at every variance (natural-variable rule)
        q = np.asarray(q, dtype=np.float64)
        return expect2(Derivative(a, 1), Derivative(a, 1), q, q, q) + expect2(a, Derivative(a, 2), q, q, q)
    return expect(lambda x: a.dphi(x) ** 2 + a.phi(x) * a.d2phi(x), q)
