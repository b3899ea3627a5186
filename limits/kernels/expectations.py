"""Gaussian expectations the kernel recursions need, on whole P×P Gram matrices.

Thin layer over :mod:`limits.gaussian` (which owns closed forms and Gauss–Hermite quadrature).
The two Price-theorem derivatives the response functions need are added here, with closed forms
for linear / relu / erf and quadrature (``limits.gaussian.expect`` / ``expect2``) otherwise:

* ``diag_price(act, q) = E[φ'(u)² + φ(u)φ''(u)] = ∂_q E[φ(u)²]``,  u ~ N(0, q)   (seed 004 Eq. 38, 45)
* ``cross_price(act, K)[α, β] = ½ E[φ''(u_α) φ(u_β)] = ∂E[φ(u_α)φ(u_β)]/∂K_αα``  (Price, App. D)

(user activations: the same derivatives by Stein's identity in its scaling form, with φ and φ' only —
no φ'', which for a kinked function is a δ that finite differences would smear.)
"""
from __future__ import annotations

import numpy as np

_TWO_OVER_PI = 2.0 / np.pi


def activation_name(act) -> str:
    """The activation's name in lower case (``""`` for an object without one)."""
    return str(getattr(act, "name", "")).lower()


def _closed(act, which):
    f = getattr(act, which, None)
    return f if callable(f) else None


def _finite(E, what, act):
    """Overflow of a Gaussian expectation is an error, never a silent inf/NaN (issue 14)."""
    if not np.isfinite(E).all():
        raise ValueError(f"{what} of {activation_name(act) or 'the activation'} is not representable in float64 "
                         "(overflow at these variances); rescale the inputs")
    return E


def gram(act, K):
    """P×P matrix E_{N(0,K)}[φ(u_α) φ(u_β)] (closed form on the whole matrix when the activation has
    one — no per-entry overhead — else :func:`limits.gaussian.gram`)."""
    f = _closed(act, "kernel")
    if f is not None:
        d = np.diag(K)
        E = np.asarray(f(d[:, None], K, d[None, :]), dtype=np.float64)
    else:  # Mehler series with certified tail for smooth φ (limits.mehler), quadrature otherwise
        from .. import gaussian

        E = np.asarray(gaussian.gram(act, K), dtype=np.float64)
    return _finite(0.5 * (E + E.T), "E[φφ]", act)


def dgram(act, K):
    """P×P matrix E_{N(0,K)}[φ'(u_α) φ'(u_β)]."""
    f = _closed(act, "dkernel")
    if f is not None:
        d = np.diag(K)
        G = np.asarray(f(d[:, None], K, d[None, :]), dtype=np.float64)
    else:
        from .. import gaussian

        G = np.asarray(gaussian.dgram(act, K), dtype=np.float64)
    return _finite(0.5 * (G + G.T), "E[φ'φ']", act)


def moments(act, K, derivative=True, out=None, gout=None, work=None):
    """(E[φφ], E[φ'φ']) on a P×P Gram in one pass; for erf both share the normalised argument
    s = 2K/√((1+2K_αα)(1+2K_ββ)):  E = (2/π) arcsin s,  G = (4/π) / (√(a_α a_β) √(1 − s²)),
    a = 1 + 2 diag K — one arcsin and one sqrt per entry, no per-entry Python overhead.
    ``out``/``gout``/``work`` (P×P float64, optional) receive E, G and serve as scratch so a layer loop
    allocates nothing per layer (``out`` must not alias ``K``)."""
    if activation_name(act) == "erf":
        inv = 1.0 / np.sqrt(1.0 + 2.0 * np.diag(K))
        W = np.multiply.outer(inv, inv, out=work)     # exactly symmetric
        s_ = np.multiply(K, W, out=out)
        s_ *= 2.0
        np.clip(s_, -1.0, 1.0, out=s_)
        G = None
        if derivative:
            G = np.subtract(1.0, s_, out=gout)
            G *= 1.0 + s_                             # 1 − s² factored: accurate as |s| → 1
            np.sqrt(G, out=G)
            np.divide(W, G, out=G)
            G *= 4.0 / np.pi
        E = np.arcsin(s_, out=s_)
        E *= _TWO_OVER_PI
        # the diagonal (c = 1 exactly) without the cancellation in 1 − s² ≈ 1/k at large variance:
        # E[erf(u)²] = (2/π) atan2(2k, √(1 + 4k)),  E[erf'(u)²] = (4/π)/√(1 + 4k)
        dk = np.diag(K)
        r = np.sqrt(1.0 + 4.0 * dk)
        E.flat[:: K.shape[0] + 1] = _TWO_OVER_PI * np.arctan2(2.0 * dk, r)
        if G is not None:
            G.flat[:: K.shape[0] + 1] = (4.0 / np.pi) / r
        return E, G
    E = G = None
    from .. import gaussian

    if _closed(act, "kernel") is None and K.shape[0] >= 64 and gaussian.interp_pays(K):
        # tanh/sigmoid: E and G together from interpolants in the correlation (limits.corrinterp), one
        # per pair of distinct variances; None (general path below) when the variances are many
        name = getattr(act, "name", "")
        pairs = [(act, act)] + ([(f"{name}'", f"{name}'")] if derivative else [])
        res = gaussian.gram_pairs(pairs, K)
        if res is not None:
            E = _finite(res[0], "E[φφ]", act)
            G = _finite(res[1], "E[φ'φ']", act) if derivative else None
    if E is None:
        E = gram(act, K)
        G = dgram(act, K) if derivative else None
    if out is not None:
        out[...] = E
        E = out
    if G is not None and gout is not None:
        gout[...] = G
        G = gout
    return E, G


def pair_kernel(act, k11, k12, k22):
    """Elementwise E[φ(u)φ(v)] for arrays of (k11, k12, k22) (closed form when available)."""
    f = _closed(act, "kernel")
    if f is not None:
        return _finite(np.asarray(f(k11, k12, k22), dtype=np.float64), "E[φφ]", act)
    from .. import gaussian

    return np.asarray(gaussian.kernel(act, k11, k12, k22), dtype=np.float64)


def pair_dkernel(act, k11, k12, k22):
    """Elementwise E[φ'(u)φ'(v)] for arrays of (k11, k12, k22)."""
    f = _closed(act, "dkernel")
    if f is not None:
        return _finite(np.asarray(f(k11, k12, k22), dtype=np.float64), "E[φ'φ']", act)
    from .. import gaussian

    return np.asarray(gaussian.dkernel(act, k11, k12, k22), dtype=np.float64)


def diag_price(act, q):
    """E[φ'(u)² + φ(u)φ''(u)] for u ~ N(0, q), vectorised over ``q`` (= ∂_q E[φ(u)²])."""
    q = np.asarray(q, dtype=np.float64)
    name = activation_name(act)
    if name == "linear":
        return np.ones_like(q)
    if name == "relu":
        return np.full_like(q, 0.5)
    if name == "erf":
        return (4.0 / np.pi) / ((1.0 + 2.0 * q) * np.sqrt(1.0 + 4.0 * q))
    from .. import gaussian

    if is_builtin_activation(act):        # by name: the engine's certified rules at every variance (limits.gaussian)
        return (np.asarray(gaussian.expect2(f"{name}'", f"{name}'", q, q, q), dtype=np.float64)
                + np.asarray(gaussian.expect2(name, f"{name}''", q, q, q), dtype=np.float64))
    # user functions: Stein's identity in its scaling form, φ and φ' only (no φ'', a δ at a kink):
    # d/dq E[φ(u)²] = E[u φ(u) φ'(u)]/q  (u → λu moves q by 2)
    phi, dphi = act.phi, act.dphi
    pos = q > 0
    qs = np.where(pos, q, 1.0)
    val = np.asarray(gaussian.expect(lambda x: x * phi(x) * dphi(x), qs), dtype=np.float64) / qs
    if np.all(pos):
        return val
    at0 = float(dphi(np.zeros(1))[0] ** 2 + phi(np.zeros(1))[0] * act.d2phi(np.zeros(1))[0])
    return np.where(pos, val, at0)


def is_builtin_activation(act) -> bool:
    """Whether ``act`` is the built-in activation object of its name (closed forms and certified rules apply)."""
    from ..activations import BUILTIN

    return BUILTIN.get(getattr(act, "name", None)) is act


def cross_price(act, K):
    """A[α, β] = ½ E[φ''(u_α) φ(u_β)] = ∂ E[φ(u_α)φ(u_β)] / ∂K_αα (other entries of K fixed)."""
    K = np.asarray(K, dtype=np.float64)
    d = np.diag(K)
    name = activation_name(act)
    if name == "linear":
        return np.zeros_like(K)
    if name == "erf":
        a = 1.0 + 2.0 * d
        s = 2.0 * K / np.sqrt(np.outer(a, a))
        s = np.clip(s, -1.0, 1.0)
        root = np.sqrt(np.maximum(1.0 - s * s, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            A = -_TWO_OVER_PI * s / (a[:, None] * root)
        # |s| = 1 only when both variances are infinite-like; on the diagonal s < 1 always.
        return A
    if name == "relu":
        # ∂/∂k11 of √(k11k22)/(2π)(sinθ + (π−θ)cosθ) = √(k11 k22 − k12²) / (4π k11)
        det = np.maximum(np.outer(d, d) - K * K, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            A = np.where(d[:, None] > 0, np.sqrt(det) / (4.0 * np.pi * d[:, None]), 0.0)
        return A
    from .. import gaussian
    from ..activations import Derivative

    k11 = np.broadcast_to(d[:, None], K.shape)
    k22 = np.broadcast_to(d[None, :], K.shape)
    if is_builtin_activation(act):
        return 0.5 * np.asarray(gaussian.expect2(Derivative(act, 2), act, k11, K, k22), dtype=np.float64)
    # user functions: Stein's identity in its scaling form, φ and φ' only (no φ'', a δ at a kink):
    # ∂E[φ(u)φ(v)]/∂k11 = (E[u φ'(u) φ(v)] − k12 E[φ'(u) φ'(v)]) / (2 k11)
    if np.any(d <= 0):
        return 0.5 * np.asarray(gaussian.expect2(act.d2phi, act.phi, k11, K, k22), dtype=np.float64)
    uphi = lambda x: x * act.dphi(x)            # noqa: E731
    A = np.asarray(gaussian.expect2(uphi, act.phi, k11, K, k22), dtype=np.float64)
    B = np.asarray(gaussian.expect2(act.dphi, act.dphi, k11, K, k22), dtype=np.float64)
    return (A - K * B) / (2.0 * k11)


def dgram_price(act, K):
    """Response matrix of seed 004 Eq. C15: E[φ'_α φ'_β] off the diagonal, E[φ'² + φφ''] on it."""
    G = dgram(act, K)
    np.fill_diagonal(G, diag_price(act, np.diag(K)))
    return G
