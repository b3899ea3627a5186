"""Activation registry: φ, φ', φ'' (vectorised numpy) and closed-form Gaussian kernels.

For ``(u, v) ~ N(0, [[k11, k12], [k12, k22]])`` (docs/theory/kernels.rst §1)::

    ======  ============================================  ==============================================
    φ       E[φ(u)φ(v)]                                   E[φ'(u)φ'(v)]
    ======  ============================================  ==============================================
    linear  k12                                           1
    erf     (2/π) arcsin(2k12/√((1+2k11)(1+2k22)))         (4/π)/√((1+2k11)(1+2k22) − 4k12²)
    relu    √(k11k22)/(2π)(sin θ + (π−θ)cos θ)            (π − θ)/(2π),  θ = arccos(k12/√(k11k22))
    gelu    k11B₄(k22+Δ)/(1+k11) + k12B₁ + k12²B₄/(1+k22)  B₁ + k12B₄(1/(1+k11) + 1/(1+k22) + 1/D)
    ======  ============================================  ==============================================

gelu: Δ = k11k22 − k12², D = det(I + K) = 1 + k11 + k22 + Δ, B₁ = E[Φ(u)Φ(v)] = 1/4 + arcsin(k12/√((1+k11)(1+k22)))/2π,
B₄ = E[ϕ(u)ϕ(v)] = 1/(2π√D) (Gaussian integration by parts; checked against mpmath in tests).
Every closed form is evaluated with √(k11k22) factored out and ``1 − c² = (1 − |c|)(1 + |c|)``, so it
neither overflows (relu and linear are degree-1 homogeneous) nor cancels near ``|c| = 1``.

(erf/relu: Williams 1997, Cho & Saul 2009.) For relu, θ is computed as
``atan2(√((√(k11k22) − |k12|)(√(k11k22) + |k12|)), k12)`` which keeps full relative accuracy near ``|c| = 1`` where arccos
loses half the digits. relu'' is taken as 0: in the kernel recursions the δ-function it really is
only ever appears multiplied by relu itself (φ''φ = 0); where it would multiply anything else (the DMFT
response Jacobians, docs/theory/dmft.rst §3) relu is refused (``smooth=False``).

``strip`` is the half-width of the strip around the real axis in which φ is analytic (tanh:
π/2, sigmoid: π; entire functions get an effective value): the Gaussian engine sets its
quadrature step from it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

_SQRT2 = math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class Activation:
    """An activation with its first two derivatives and (optional) closed-form kernels."""

    name: str
    phi: Callable[[np.ndarray], np.ndarray]
    dphi: Callable[[np.ndarray], np.ndarray]
    d2phi: Callable[[np.ndarray], np.ndarray]
    kernel: Optional[Callable] = None    # (k11, k12, k22) -> E[φ(u)φ(v)]
    dkernel: Optional[Callable] = None   # (k11, k12, k22) -> E[φ'(u)φ'(v)]
    strip: float = 1.0                   # analyticity half-width, for quadrature step selection
    smooth: bool = True                  # C^∞ (quadrature converges spectrally)
    exact_derivatives: bool = True       # False for user functions differentiated numerically
    d3phi: Optional[Callable] = None     # φ''' (built-ins; Price derivatives of E[φ'φ'], limits.kernels.price)

    def __call__(self, x):
        return self.phi(x)

    def derivative(self, order: int) -> Callable:
        """φ, φ' or φ'' for order 0, 1, 2."""
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order}")
        return (self.phi, self.dphi, self.d2phi)[order]


@dataclass(frozen=True)
class Derivative:
    """φ^(order) of a resolved :class:`Activation`, as a function argument of the Gaussian engine
    (``limits.gaussian.expect2(Derivative(a, 1), ...)`` is what the name ``"tanh'"`` means for
    ``a = activation("tanh")``): code that holds the object never goes back to its name."""

    act: Activation
    order: int

    def __post_init__(self):
        if self.order not in (0, 1, 2):
            raise ValueError(f"derivative order {self.order} of {self.act.name!r} not available (max 2)")


# ------------------------------------------------------------------ closed forms
def geometric_mean(k11, k22):
    """√(k11 k22) without overflow or underflow: √(k11·k22) where the product is a normal number
    (then √(k·k) = k exactly, so the diagonal of a Gram matrix has c = 1 exactly), √k11·√k22 otherwise."""
    k11, k22 = np.asarray(k11, dtype=np.float64), np.asarray(k22, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        prod = k11 * k22
        if prod.size == 0 or (prod.min() >= 1e-290 and prod.max() < np.inf):   # the common case: one pass
            return np.sqrt(prod)
        safe = np.isfinite(prod) & (prod >= 1e-290)
        return np.where(safe, np.sqrt(np.where(safe, prod, 1.0)), np.sqrt(k11) * np.sqrt(k22))


_MODERATE = 1e150      # variances below this: k11·k22 cannot overflow (fast direct formulas)


def moderate_variances(k11, k22) -> bool:
    """Whether every variance is below 1e150, so k11·k22 cannot overflow (the fast direct formulas apply)."""
    return (np.size(k11) == 0 or (float(np.max(k11)) < _MODERATE and float(np.max(k22)) < _MODERATE))


def _det(k11, k12, k22):
    """k11k22 − k12² ≥ 0 as (g − |k12|)(g + |k12|), g = √(k11k22) (moderate variances; no cancellation)."""
    g = np.sqrt(k11 * k22)
    ak = np.abs(k12)
    return np.maximum((g - ak) * (g + ak), 0.0), g


def _cov_parts(k11, k12, k22):
    """(g, c, det/(k11 k22)) with g = √k11·√k22 (no overflow), c = k12/g clipped to [−1, 1] and
    1 − c² = (1 − |c|)(1 + |c|) (no cancellation near |c| = 1); c = 0 where g = 0."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    g = geometric_mean(k11, k22)
    if g.size and g.min() > 0:
        c = k12 / g
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(g > 0, k12 / np.where(g > 0, g, 1.0), 0.0)
    c = np.clip(c, -1.0, 1.0)
    one_m_c2 = np.maximum((1.0 - np.abs(c)) * (1.0 + np.abs(c)), 0.0)
    return g, c, one_m_c2


def _relu_theta(k11, k12, k22):
    g, c, omc2 = _cov_parts(k11, k12, k22)
    return np.arctan2(np.sqrt(omc2), c), g, c, omc2


def relu_kernel(k11, k12, k22):
    """E[relu(u) relu(v)] = (√(k11k22)/2π)(√(1 − c²) + (π − θ) c), θ = atan2(√(1 − c²), c).
    Degree-1 homogeneous: evaluated scale-free (√k11·√k22 factored out), so it overflows only when
    the value itself does."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    if moderate_variances(k11, k22):
        det, g = _det(k11, k12, k22)
        k12 = np.clip(k12, -g, g)
        root = np.sqrt(det)
        return (root + (np.pi - np.arctan2(root, k12)) * k12) / (2.0 * np.pi)
    theta, g, c, omc2 = _relu_theta(k11, k12, k22)
    return g * ((np.sqrt(omc2) + (np.pi - theta) * c) / (2.0 * np.pi))


def relu_dkernel(k11, k12, k22):
    """E[step(u) step(v)] = (π − θ)/(2π)."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    if moderate_variances(k11, k22):
        det, g = _det(k11, k12, k22)
        return (np.pi - np.arctan2(np.sqrt(det), np.clip(k12, -g, g))) / (2.0 * np.pi)
    theta = _relu_theta(k11, k12, k22)[0]
    return (np.pi - theta) / (2.0 * np.pi)


def erf_root(k11, k12, k22, a=1.0, b=1.0):
    """(g, ρ) with g = √k11·√k22 and g·ρ = √((1+2a²k11)(1+2b²k22) − 4a²b²k12²)
    = √(1 + 2a²k11 + 2b²k22 + 4a²b²(k11k22 − k12²)); the determinant is formed without cancellation
    (k11k22 − k12² = g²(1 − c²)) and everything is divided by g first (no overflow). ρ is the root
    itself (g := 1) where a variance is 0."""
    g, c, omc2 = _cov_parts(k11, k12, k22)
    k11, k22 = np.broadcast_arrays(np.asarray(k11, dtype=np.float64), np.asarray(k22, dtype=np.float64))
    pos = g > 0
    gs = np.where(pos, g, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r11 = np.where(pos, np.sqrt(k11) / np.sqrt(np.where(pos, k22, 1.0)), k11)   # k11/g
        r22 = np.where(pos, np.sqrt(k22) / np.sqrt(np.where(pos, k11, 1.0)), k22)   # k22/g
    inv = 1.0 / gs
    rho = np.sqrt(inv * inv + 2.0 * a * a * r11 * inv + 2.0 * b * b * r22 * inv
                  + np.where(pos, 4.0 * a * a * b * b * omc2, 0.0))
    return gs, rho, c


def erf_kernel(k11, k12, k22):
    """E[erf(u) erf(v)] = (2/π) arcsin(2k12/√((1+2k11)(1+2k22))) = (2/π) atan2(2k12, √((1+2k11)(1+2k22) − 4k12²))
    (the atan2 form keeps full relative accuracy as the argument of arcsin approaches 1; evaluated with
    √(k11k22) factored out, so it never overflows)."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    if moderate_variances(k11, k22):
        det, g = _det(k11, k12, k22)
        return (2.0 / np.pi) * np.arctan2(2.0 * np.clip(k12, -g, g), np.sqrt(1.0 + 2.0 * (k11 + k22) + 4.0 * det))
    _, rho, c = erf_root(k11, k12, k22)            # k12/g = c (and k12 = c = 0 where g = 0)
    return (2.0 / np.pi) * np.arctan2(2.0 * c, rho)


def erf_dkernel(k11, k12, k22):
    """E[erf'(u) erf'(v)] = (4/π) / √((1+2k11)(1+2k22) − 4k12²)."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    if moderate_variances(k11, k22):
        det, _ = _det(k11, k12, k22)
        return (4.0 / np.pi) / np.sqrt(1.0 + 2.0 * (k11 + k22) + 4.0 * det)
    g, rho, _ = erf_root(k11, k12, k22)
    return (4.0 / np.pi) / g / rho


def _gelu_parts(k11, k12, k22):
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    g, c, omc2 = _cov_parts(k11, k12, k22)
    det = (g * g) * omc2                                   # k11 k22 − k12² ≥ 0
    D = 1.0 + k11 + k22 + det                              # det(I + K)
    B4 = 1.0 / (2.0 * np.pi * np.sqrt(D))                  # E[ϕ(u) ϕ(v)], ϕ the standard normal density
    # E[Φ(u) Φ(v)] = 1/4 + arcsin(k12/√((1+k11)(1+k22)))/(2π)  (orthant probability)
    B1 = 0.25 + np.arctan2(k12, np.sqrt(D)) / (2.0 * np.pi)
    return k11, k12, k22, det, D, B1, B4


def gelu_kernel(k11, k12, k22):
    """E[gelu(u) gelu(v)], gelu(x) = xΦ(x), in closed form (Gaussian integration by parts):
    k11 B4 (k22 + det)/(1 + k11) + k12 B1 + k12² B4/(1 + k22), with det = k11k22 − k12²,
    B1 = E[Φ(u)Φ(v)] = 1/4 + atan2(k12, √det(I+K))/(2π), B4 = E[ϕ(u)ϕ(v)] = 1/(2π √det(I+K))."""
    k11, k12, k22, det, D, B1, B4 = _gelu_parts(k11, k12, k22)
    return k11 * B4 * (k22 + det) / (1.0 + k11) + k12 * B1 + k12 * k12 * B4 / (1.0 + k22)


def gelu_dkernel(k11, k12, k22):
    """E[gelu'(u) gelu'(v)], gelu'(x) = Φ(x) + xϕ(x), in closed form:
    B1 + k12 B4 (1/(1 + k11) + 1/(1 + k22) + 1/det(I+K))."""
    k11, k12, k22, det, D, B1, B4 = _gelu_parts(k11, k12, k22)
    return B1 + k12 * B4 * (1.0 / (1.0 + k11) + 1.0 / (1.0 + k22) + 1.0 / D)


def linear_kernel(k11, k12, k22):
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    return k12.copy()


def linear_dkernel(k11, k12, k22):
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    return np.ones_like(k12)


# ------------------------------------------------------------------ elementwise functions
def _sigmoid(x):
    from scipy import special

    return special.expit(x)


def _d3sigmoid(x):
    from scipy import special

    s = special.expit(x)
    return s * (1.0 - s) * (1.0 - 6.0 * s * (1.0 - s))


def _dsigmoid(x):
    from scipy import special

    s = special.expit(x)
    return s * (1.0 - s)


def _d2sigmoid(x):
    from scipy import special

    s = special.expit(x)
    return s * (1.0 - s) * (1.0 - 2.0 * s)


def _tanh(x):
    return np.tanh(x)


def _dtanh(x):
    t = np.tanh(x)
    return 1.0 - t * t


def _d2tanh(x):
    t = np.tanh(x)
    return -2.0 * t * (1.0 - t * t)


def _d3tanh(x):
    t = np.tanh(x)
    return -2.0 * (1.0 - t * t) * (1.0 - 3.0 * t * t)


def _gelu(x):
    from scipy import special

    x = np.asarray(x, dtype=np.float64)
    return x * special.ndtr(x)


def _dgelu(x):
    from scipy import special

    x = np.asarray(x, dtype=np.float64)
    return special.ndtr(x) + x * _INV_SQRT2PI * np.exp(-0.5 * x * x)


def _d2gelu(x):
    x = np.asarray(x, dtype=np.float64)
    return _INV_SQRT2PI * np.exp(-0.5 * x * x) * (2.0 - x * x)


def _d3gelu(x):
    x = np.asarray(x, dtype=np.float64)
    return _INV_SQRT2PI * np.exp(-0.5 * x * x) * x * (x * x - 4.0)


def _erf(x):
    from scipy import special

    return special.erf(x)


def _derf(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):            # |x| > 1.3e154: x² = inf, exp(−inf) = 0 exactly
        return (2.0 / math.sqrt(math.pi)) * np.exp(-x * x)


def _d2erf(x):
    x = np.asarray(x, dtype=np.float64)
    return (-4.0 / math.sqrt(math.pi)) * x * np.exp(-x * x)


def _d3erf(x):
    x = np.asarray(x, dtype=np.float64)
    return (4.0 / math.sqrt(math.pi)) * (2.0 * x * x - 1.0) * np.exp(-x * x)


def _relu(x):
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0)


def _drelu(x):
    return (np.asarray(x, dtype=np.float64) > 0).astype(np.float64)


def _zeros_like(x):
    return np.zeros_like(np.asarray(x, dtype=np.float64))


def _identity(x):
    return np.asarray(x, dtype=np.float64)


def _ones_like(x):
    return np.ones_like(np.asarray(x, dtype=np.float64))


# the built-in activations by name (public within the package: the Gaussian engine and the kernels
# recognise them by identity to use their closed forms and certified rules)
BUILTIN = {
    "linear": Activation("linear", _identity, _ones_like, _zeros_like, linear_kernel, linear_dkernel,
                         strip=np.inf, d3phi=_zeros_like),
    "relu": Activation("relu", _relu, _drelu, _zeros_like, relu_kernel, relu_dkernel, strip=0.0,
                       smooth=False),
    "erf": Activation("erf", _erf, _derf, _d2erf, erf_kernel, erf_dkernel, strip=2.0, d3phi=_d3erf),
    "tanh": Activation("tanh", _tanh, _dtanh, _d2tanh, strip=math.pi / 2, d3phi=_d3tanh),
    "gelu": Activation("gelu", _gelu, _dgelu, _d2gelu, gelu_kernel, gelu_dkernel, strip=2.0, d3phi=_d3gelu),
    "sigmoid": Activation("sigmoid", _sigmoid, _dsigmoid, _d2sigmoid, strip=math.pi, d3phi=_d3sigmoid),
}
_ALIASES = {"identity": "linear", "id": "linear", "logistic": "sigmoid", "ReLU": "relu"}
_USER: dict[str, Activation] = {}


def registered() -> list[str]:
    """Names of all registered activations (built-in and user-registered)."""
    return sorted(set(BUILTIN) | set(_USER))


def _numeric_derivative(f, order):
    h = 1e-4 if order == 1 else 1e-3

    def d(x):
        x = np.asarray(x, dtype=np.float64)
        if order == 1:
            return (f(x + h) - f(x - h)) / (2 * h)
        return (f(x + h) - 2 * f(x) + f(x - h)) / (h * h)

    return d


def _distribution(name):
    """φ'' of a non-smooth user activation: a distribution (δ at the kinks), never a function to sample."""
    def d2(x):
        raise ValueError(f"activation {name!r} is not smooth (smooth=False): its φ'' is a δ at the kinks, not a "
                         "function; this computation needs φ'' (the kernels use φ and φ' only)")
    return d2


def is_registered(act: Activation) -> bool:
    """Whether ``act`` is the very object registered under its name (built in or ``register=True``)."""
    return BUILTIN.get(act.name) is act or _USER.get(act.name) is act


def activation(name_or_callable, *, dphi=None, d2phi=None, name=None, strip=1.0, smooth=True,
               register=False, d3phi=None) -> Activation:
    """Look up a registered activation by name, or wrap a user function.

    ``activation("erf")``; ``activation(np.sin, dphi=np.cos, d2phi=lambda x: -np.sin(x), name="sin")``.
    User functions without derivatives get central finite differences (accuracy ~1e-8 for φ',
    ~1e-6 for φ''; ``exact_derivatives`` is then False) — for smooth functions only: ``smooth=False``
    requires ``dphi`` and leaves φ'' undefined (an error if a computation needs it) unless given; ``d3phi`` = φ''' is optional — the finite-width
    NTK correction needs it and refuses an activation without it). ``register=True`` makes the name
    available to ``activation(name)`` and to the command line.
    """
    if isinstance(name_or_callable, Activation):
        return name_or_callable
    if isinstance(name_or_callable, str):
        key = _ALIASES.get(name_or_callable, name_or_callable)
        key = _ALIASES.get(key.lower(), key.lower()) if key not in BUILTIN and key not in _USER else key
        if key in BUILTIN:
            return BUILTIN[key]
        if key in _USER:
            return _USER[key]
        raise ValueError(f"activation: unknown activation {name_or_callable!r}; "
                         f"known: {', '.join(registered())}")
    if not callable(name_or_callable):
        raise ValueError(f"activation must be a name or a callable, got {type(name_or_callable).__name__}")
    f = name_or_callable
    label = name or getattr(f, "__name__", "user")
    if not smooth and dphi is None:
        raise ValueError(f"activation {label!r}: a non-smooth function (smooth=False) needs dphi= (its derivative "
                         "away from the kinks): central finite differences across a kink are wrong there")
    exact = dphi is not None and d2phi is not None
    second = d2phi if d2phi is not None else (_numeric_derivative(f, 2) if smooth else _distribution(label))
    act = Activation(
        label,
        f,
        dphi if dphi is not None else _numeric_derivative(f, 1),
        second,
        strip=float(strip), smooth=smooth, exact_derivatives=exact, d3phi=d3phi,
    )
    if register:
        if act.name in BUILTIN:
            raise ValueError(f"name {act.name!r} is a built-in activation")
        _USER[act.name] = act
    return act
