"""The exact polar rule for N(0, S) in one or two dimensions, split at the coordinates' zero lines (relu's kinks):
shared by :mod:`limits.kernels.fourpoint` and :mod:`limits.kernels.relu_fourpoint`."""
from __future__ import annotations

import functools

import numpy as np

_RADIAL = 32          # Gauss–Legendre on [0, 12] against r e^{−r²/2}: r^p to 1e-15 for p ≤ 9
_ANGULAR = 20         # Gauss–Legendre nodes per arc between two kinks


@functools.lru_cache(maxsize=64)
def leggauss(n):
    """Gauss–Legendre nodes and weights on [−1, 1] (``numpy.polynomial.legendre.leggauss``), computed once per n:
    the polar rules are built per covariance, and the nodes cost more than the rule (read-only arrays)."""
    x, w = np.polynomial.legendre.leggauss(int(n))
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def polar_rule(S, radial=None, angular=None):
    """Nodes (r, Q) and weights (Q,) for N(0, S), S an r×r PSD matrix with r ≤ 2, exact (to rounding)
    for every integrand that is a polynomial in the radius times a piecewise trigonometric polynomial of
    the angle whose pieces end where a coordinate vanishes — products of relu, step and powers of x.
    x = A (ρ cos ϑ, ρ sin ϑ), A Aᵀ = S: Gauss–Legendre in ρ against ρe^{−ρ²/2} and, per arc between
    consecutive zeros of the coordinates, in ϑ. (Tensor Gauss–Hermite converges like 1/n on a step:
    E[step(u)step(v)] is 0.25 % off with 128² nodes.) ``radial``, ``angular``: more nodes for integrands that are
    smooth but not polynomial inside the arcs (:mod:`limits.kernels.relu_fourpoint`)."""
    S = np.atleast_2d(np.asarray(S, dtype=np.float64))
    r = S.shape[0]
    lam, V = np.linalg.eigh(0.5 * (S + S.T))
    A = V * np.sqrt(np.clip(lam, 0.0, None))
    x, w = leggauss(radial or _RADIAL)
    rho = (x + 1.0) * 6.0
    wr = w * 6.0 * rho * np.exp(-0.5 * rho * rho)
    if r == 1:                                    # |z| against the half-normal density, both signs
        wh = w * 6.0 * np.exp(-0.5 * rho * rho) / np.sqrt(2 * np.pi)
        return A[0, 0] * np.concatenate([rho, -rho])[None, :], np.concatenate([wh, wh])
    if r != 2:
        raise ValueError(f"polar_rule: dimension {r} > 2")
    cuts = [np.arctan2(-A[i, 0], A[i, 1]) % np.pi for i in range(2) if np.any(A[i] != 0)]
    edges = np.unique(np.concatenate([[0.0, 2 * np.pi], np.array(cuts), np.array(cuts) + np.pi]))
    xa, wa = leggauss(angular or _ANGULAR)
    th, wt = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi - lo > 1e-15:
            th.append(lo + (xa + 1) * (hi - lo) / 2)
            wt.append(wa * (hi - lo) / 2)
    th, wt = np.concatenate(th), np.concatenate(wt) / (2 * np.pi)
    e = np.stack([np.cos(th), np.sin(th)])                                   # (2, n_angles)
    pts = (A @ e)[:, :, None] * rho[None, None, :]                           # (2, n_angles, n_radial)
    return pts.reshape(2, -1), (wt[:, None] * wr[None, :]).ravel()
