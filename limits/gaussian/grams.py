"""Gram matrices E_{u ~ N(0,K)}[f(u_α) g(u_β)] (docs/theory/kernels.rst §1): the route per matrix.

Picks, for a whole P×P covariance ``K``, the cheapest certified route: the correlation interpolant
(:mod:`limits.gaussian.corrinterp`; built-in tanh/sigmoid with few distinct variances, where
:func:`interp_pays`), the Mehler series on the whole matrix (:func:`limits.gaussian.mehler.gram_series`;
smooth functions, uncertified entries redone by the tensor trapezoid), or the per-entry engine
(:func:`limits.gaussian.engine.expect2`) on the upper triangle. It sits above the engine and the
interpolant (both of which it imports; neither imports it).
"""
from __future__ import annotations

import math

import numpy as np

from ..activations import Derivative, activation
from .engine import asymptotic_split, check_finite, closed_kernel, expect2, is_builtin, is_registered, resolve, validate_cov


def _check_gram(K, name="K"):
    """K as a float64 square, finite, symmetric matrix (ValueError naming ``name`` otherwise)."""
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    check_finite(name, K)
    if not np.array_equal(K, K.T) and not np.allclose(K, K.T, rtol=1e-12,
                                                      atol=1e-12 * max(1.0, float(np.abs(K).max(initial=0.0)))):
        raise ValueError(f"{name} must be symmetric")
    return K


def _interp_pairs(pairs):
    """The pairs as names for :mod:`limits.gaussian.corrinterp` when every pair is (f, f) with f a built-in smooth
    activation without closed-form kernels (tanh, sigmoid) or its first derivative, else None."""
    out = []
    for f, g in pairs:
        _, fa, fo, _ = resolve(f)
        _, ga, go, _ = resolve(g)
        if not (fa is not None and fa is ga and fo == go and fo <= 1 and is_builtin(fa) and fa.smooth
                and asymptotic_split(fa, 0) is not None and closed_kernel(f, g) is None):
            return None
        out.append((fa.name + "'" * fo,) * 2)
    return out


def gram_pairs(pairs, K, name="K"):
    """[E_{N(0,K)}[f(u_α) f(u_β)] for (f, f) in pairs] by the correlation interpolant
    (:func:`limits.gaussian.corrinterp.gram`: few distinct variances, built-in tanh/sigmoid and derivatives), or
    None when that route does not apply (the caller then uses :func:`gram`/:func:`dgram`)."""
    names = _interp_pairs(pairs)
    if names is None:
        return None
    K = _check_gram(K, name)
    from . import corrinterp

    return corrinterp.gram(names, K)


def interp_pays(K) -> bool:
    """Whether the correlation interpolant (:func:`gram_pairs`) is expected to beat the general Gram path:
    its set-up is ~10 ms per variance pair at standard deviation ≤ 20 and ~0.3–1 s above (natural-variable
    node values), the general path costs ~0.3 µs per entry up to s = 200 (Mehler sweep) and ~1 ms per
    entry beyond (per-entry rule)."""
    from .mehler import S_MAX

    P = K.shape[0]
    smax = math.sqrt(max(float(np.max(np.diag(K), initial=0.0)), 0.0))
    if smax > S_MAX:
        return P >= 64
    from .corrinterp import MEHLER_SMAX

    return P >= (128 if smax <= MEHLER_SMAX else 512)


def _gram(f, g, K, name="K"):
    K = _check_gram(K, name)
    if K.shape[0] >= 64 and interp_pays(K):
        res = gram_pairs([(f, g)], K, name)
        if res is not None:
            return res[0]
    d = np.diag(K)
    fn, _, _, fs = resolve(f)
    gn, _, _, gs = resolve(g)
    iu = np.triu_indices(K.shape[0])
    try:
        validate_cov(d[iu[0]], K[iu], d[iu[1]])
        if fs > 0 and gs > 0 and K.shape[0] >= 8 and closed_kernel(f, g) is None:
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


def gram(act, K):
    """P×P matrix E_{u ~ N(0,K)}[φ(u_a) φ(u_b)] for a Gram/covariance matrix K (upper triangle computed)."""
    a = activation(act)
    return _gram(a, a, K)


def dgram(act, K):
    """P×P matrix E_{u ~ N(0,K)}[φ'(u_a) φ'(u_b)]."""
    a = activation(act)
    if is_registered(a):
        return _gram(Derivative(a, 1), Derivative(a, 1), K)
    return _gram(a.dphi, a.dphi, K)
