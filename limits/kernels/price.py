"""Exact first and second derivatives of two-point Gaussian expectations with respect to the covariance.

For every entry (α, β) of a P×P Gram K, with f = φ^{(o)} (o = 0: the NNGP map E[φφ]; o = 1: E[φ'φ'])::

    F(k11, k12, k22) = E[f(u) f(v)],   (u, v) ~ N(0, [[k11, k12], [k12, k22]]),  k11 = K_αα, k12 = K_αβ, k22 = K_ββ

and on the diagonal F(q) = E[f(u)²], u ~ N(0, q). No finite differences: the derivatives are

* closed forms for relu (the arc-cosine kernels differentiated by hand; with r = √(k11k22 − k12²),
  ∂F/∂k12 = (π − θ)/2π, ∂F/∂k11 = r/(4πk11), ∂²F/∂k12² = 1/(2πr), ∂²F/∂k11∂k12 = −k12/(4πk11 r),
  ∂²F/∂k11∂k22 = 1/(8πr), ∂²F/∂k11² = (2k12² − k11k22)/(8πk11² r); and for f = step the same one order
  up) and for linear φ;
* otherwise Gaussian derivative rules evaluated by the engine (:func:`limits.gaussian.expect2`):
  Price's theorem ∂F/∂k12 = E[f'f'], ∂²F/∂k12² = E[f''f''], ∂²F/∂k11∂k22 = ¼E[f''f''], and for the
  variances Stein's identity in its scaling form (u → λu moves k11 → λ²k11, k12 → λk12)::

      E[u f'(u) g(v)] = 2k11 ∂_{k11}E[f g] + k12 E[f'g']   ⇒   ∂F/∂k11 = (E[(uf')(u) f(v)] − k12 E[f'f'])/(2k11),

  applied twice for ∂²F/∂k11∂k12 and ∂²F/∂k11²; on the diagonal dF/dq = E[uS'(u)]/(2q),
  d²F/dq² = (E[u²S''] − E[uS'])/(4q²), S = f². These need f and f' and f'' only (φ‴ for o = 1:
  :attr:`limits.activations.Activation.d3phi`), and divide by variances, never by k11k22 − k12², so they
  stay accurate as the correlation approaches ±1.

The non-smooth points of relu (a correlation of exactly ±1) are never crossed: the closed forms are
evaluated at the covariance itself, and an entry with k11k22 = k12² (duplicate inputs) is treated as what
it is, one variable (``limits.kernels.finite_width`` merges duplicate inputs before it gets here).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .expectations import activation_name

HESS_KEYS = ("11_11", "11_12", "11_22", "12_12", "12_22", "22_22")


@dataclass(frozen=True)
class PairDerivatives:
    """F = E[f(u_α) f(u_β)] on a P×P Gram and its derivatives (module docstring). Off the diagonal:
    ``g1[α, β]`` = ∂F_αβ/∂K_αα (so ∂F_αβ/∂K_ββ = ``g1[β, α]``), ``g12`` = ∂F/∂K_αβ, ``h[key]`` the second
    derivatives in (k11, k12, k22) = (K_αα, K_αβ, K_ββ) with keys ``HESS_KEYS``; on the diagonal
    ``d1[α]`` = dF/dq, ``d2[α]`` = d²F/dq² of F(q) = E[f(u)²]."""

    F: np.ndarray
    g1: np.ndarray
    g12: np.ndarray
    h: dict
    d1: np.ndarray
    d2: np.ndarray


def _off(P):
    i, j = np.nonzero(~np.eye(P, dtype=bool))
    return i, j


# ------------------------------------------------------------------ closed forms
def _relu(K, order):
    P = K.shape[0]
    d = np.diag(K)
    i, j = _off(P)
    k11, k12, k22 = d[i], K[i, j], d[j]
    g = np.sqrt(k11 * k22)
    det = np.maximum((g - np.abs(k12)) * (g + np.abs(k12)), 0.0)
    r = np.sqrt(det)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.arctan2(r, np.clip(k12, -g, g))
        if order == 0:
            F = (r + (np.pi - theta) * k12) / (2 * np.pi)
            g1, g12 = r / (4 * np.pi * k11), (np.pi - theta) / (2 * np.pi)
            h = {"12_12": 1 / (2 * np.pi * r), "11_12": -k12 / (4 * np.pi * k11 * r),
                 "12_22": -k12 / (4 * np.pi * k22 * r), "11_22": 1 / (8 * np.pi * r),
                 "11_11": (2 * k12 ** 2 - k11 * k22) / (8 * np.pi * k11 ** 2 * r),
                 "22_22": (2 * k12 ** 2 - k11 * k22) / (8 * np.pi * k22 ** 2 * r)}
            diag = (d / 2, np.full(P, 0.5), np.zeros(P))
        else:
            r3 = r ** 3
            F = (np.pi - theta) / (2 * np.pi)
            g1, g12 = -k12 / (4 * np.pi * k11 * r), 1 / (2 * np.pi * r)
            h = {"12_12": k12 / (2 * np.pi * r3), "11_12": -k22 / (4 * np.pi * r3),
                 "12_22": -k11 / (4 * np.pi * r3), "11_22": k12 / (8 * np.pi * r3),
                 "11_11": k12 / (4 * np.pi) * (1 / (k11 ** 2 * r) + k22 / (2 * k11 * r3)),
                 "22_22": k12 / (4 * np.pi) * (1 / (k22 ** 2 * r) + k11 / (2 * k22 * r3))}
            diag = (np.full(P, 0.5), np.zeros(P), np.zeros(P))
    return (i, j), F, g1, g12, h, diag


def _linear(K, order):
    P = K.shape[0]
    i, j = _off(P)
    n = i.size
    z = np.zeros(n)
    h = {k: z for k in HESS_KEYS}
    if order == 0:
        return (i, j), K[i, j], z, np.ones(n), h, (np.diag(K).copy(), np.ones(P), np.zeros(P))
    return (i, j), np.ones(n), z, z, h, (np.ones(P), np.zeros(P), np.zeros(P))


# ------------------------------------------------------------------ Gaussian derivative rules
def _derivs(act, order, second=True):
    fs = [act.phi, act.dphi, act.d2phi, getattr(act, "d3phi", None)]
    f, f1, f2 = fs[order], fs[order + 1], fs[order + 2]
    if f2 is None and second:
        raise ValueError(f"the second Price derivatives of E[φ'φ'] need φ‴ of {act.name!r}; "
                         "pass d3phi= to limits.activation(...)")
    return f, f1, f2


def _weighted(fn, power):
    if power == 0:
        return fn
    return lambda x: np.asarray(x, dtype=np.float64) ** power * fn(x)


def _rules(act, K, order, second=True):
    """Off-diagonal entries and diagonal derivatives by Price + the scaling form of Stein (module docstring);
    ``second=False``: first derivatives only (h empty, d2 zero)."""
    from .. import gaussian

    f, f1, f2 = _derivs(act, order, second)
    P = K.shape[0]
    d = np.diag(K)
    i, j = _off(P)
    a, c, b = d[i], K[i, j], d[j]
    E = lambda p, q: np.asarray(gaussian.expect2(p, q, a, c, b, checked=True), dtype=np.float64)  # noqa: E731
    F, B = E(f, f), E(f1, f1)
    Au, Av = E(_weighted(f1, 1), f), E(f, _weighted(f1, 1))
    g1, g2 = (Au - c * B) / (2 * a), (Av - c * B) / (2 * b)
    S0 = gaussian.expect(lambda x: f(x) ** 2, d)
    S1 = gaussian.expect(lambda x: 2 * x * f(x) * f1(x), d)
    if not second:
        return (i, j), F, g1, B, {}, (np.asarray(S0, dtype=np.float64), S1 / (2 * d), np.zeros(P))
    C = E(f2, f2)
    Du, Dv = E(_weighted(f2, 1), f1), E(f1, _weighted(f2, 1))
    E2u, E2v = E(_weighted(f2, 2), f), E(f, _weighted(f2, 2))
    h11_12, h12_22 = (Du - c * C) / (2 * a), (Dv - c * C) / (2 * b)
    dA_u = (Au + E2u - c * (B + Du)) / (2 * a)
    dA_v = (Av + E2v - c * (B + Dv)) / (2 * b)
    h = {"12_12": C, "11_22": C / 4, "11_12": h11_12, "12_22": h12_22,
         "11_11": -g1 / a + (dA_u - c * h11_12) / (2 * a), "22_22": -g2 / b + (dA_v - c * h12_22) / (2 * b)}
    # diagonal: S = f², S' = 2ff', S'' = 2(f'² + ff'')
    S2 = gaussian.expect(lambda x: 2 * x * x * (f1(x) ** 2 + f(x) * f2(x)), d)
    diag = (np.asarray(S0, dtype=np.float64), S1 / (2 * d), (S2 - S1) / (4 * d * d))
    return (i, j), F, g1, B, h, diag


def pair_derivatives(act, K, order=0, second=True) -> PairDerivatives:
    """:class:`PairDerivatives` of E[φ^{(order)} φ^{(order)}] on the Gram ``K`` (order 0 or 1); every
    variance must be positive. ``second=False``: first derivatives only (``h`` empty, ``d2`` zero; order 1
    then needs no φ‴)."""
    K = np.asarray(K, dtype=np.float64)
    if order not in (0, 1):
        raise ValueError(f"order must be 0 or 1, got {order}")
    if np.any(np.diag(K) <= 0):
        raise ValueError("pair_derivatives: every variance must be positive (an input with zero kernel "
                         "variance has no Gaussian derivative rule here)")
    name = activation_name(act)
    from .expectations import is_builtin_activation

    builtin = is_builtin_activation(act)
    rule = _relu if (builtin and name == "relu") else _linear if (builtin and name == "linear") else None
    (i, j), F, g1, g12, h, (d0, d1, d2) = rule(K, order) if rule is not None else _rules(act, K, order, second)
    P = K.shape[0]

    def full(v, diag=0.0):
        out = np.full((P, P), diag, dtype=np.float64)
        out[i, j] = v
        return out

    return PairDerivatives(full(F) + np.diag(d0), full(g1), full(g12), {k: full(v) for k, v in h.items()},
                           np.asarray(d1, dtype=np.float64), np.asarray(d2, dtype=np.float64))


def jacobian(pd: PairDerivatives, pairs) -> np.ndarray:
    """D[(αβ), (γδ)] = ∂F_αβ/∂K_γδ over the symmetric entries ``pairs`` (m×m)."""
    pos = {tuple(p): n for n, p in enumerate(pairs)}
    m = len(pairs)
    D = np.zeros((m, m))
    for n, (a, b) in enumerate(pairs):
        if a == b:
            D[n, n] = pd.d1[a]
        else:
            D[n, n] = pd.g12[a, b]
            D[n, pos[(a, a)]] += pd.g1[a, b]
            D[n, pos[(b, b)]] += pd.g1[b, a]
    return D


def hessian_contract(pd: PairDerivatives, W, pairs) -> np.ndarray:
    """(∂²F/∂K∂K : W)_p = Σ_{q,r} ∂²F_p/∂K_q∂K_r W_qr for W (m×m, pair coordinates ``pairs``) — each F_p
    depends on its own three entries only."""
    pos = {tuple(p): n for n, p in enumerate(pairs)}
    out = np.zeros(len(pairs))
    for n, (a, b) in enumerate(pairs):
        if a == b:
            out[n] = pd.d2[a] * W[n, n]
            continue
        ia, ib = pos[(a, a)], pos[(b, b)]
        H = pd.h
        s = (H["11_11"][a, b] * W[ia, ia] + H["12_12"][a, b] * W[n, n] + H["22_22"][a, b] * W[ib, ib]
             + 2 * (H["11_12"][a, b] * W[ia, n] + H["11_22"][a, b] * W[ia, ib] + H["12_22"][a, b] * W[n, ib]))
        out[n] = s
    return out
