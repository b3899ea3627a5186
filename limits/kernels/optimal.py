"""Optimal residual scaling ρ* = argmax_ρ χ_out (seed 004 §III, Fig. 4–5) and Eq. 61–62.

Every entry (α, β) of χ_out depends only on the 2×2 block (K⁰_αα, K⁰_αβ, K⁰_ββ), so the elementwise
response is run as a batch of scalar recursions — one per entry — each with its own ρ. The maximum
is located per entry by a log-spaced scan on log ρ (robust to flat or multi-modal curves) followed by
a vectorised golden-section search inside the best bracket. Maxima on the scan boundary are reported
(``converged = False``), not hidden. η⁰ = N/d_in only rescales χ_out, so ρ* does not depend on it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array, positive_float, positive_int
from ..results import Result
from ._args import resolve
from .expectations import diag_price, pair_dkernel, pair_kernel
from ..registry import sweep_computation

_INVPHI = (np.sqrt(5.0) - 1.0) / 2.0


def _pair_moments(act, k11, k12, k22):
    return pair_kernel(act, k11, k12, k22), pair_dkernel(act, k11, k12, k22)


def chi_out_entries(act, k11, k12, k22, rho, depth, sigma_w2, sigma_b2, sigma_w2_out, residual=True):
    """Elementwise χ_out/η⁰ for batches of entries: returns (χ_αα, χ_αβ) with shapes of the inputs.

    ``k11, k12, k22``: read-in kernel entries K⁰_αα, K⁰_αβ, K⁰_ββ; ``rho``: branch scale per entry.
    χ_αα is the diagonal response of the α-entry (depends on k11 only)."""
    k11, k12, k22, rho = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22, rho)))
    q, c, q2 = k11.copy(), k12.copy(), k22.copy()
    r2 = rho * rho
    chi_d = np.ones_like(q)
    chi_o = np.ones_like(q)
    for _ in range(depth):
        E12, G12 = _pair_moments(act, q, c, q2)
        Eq, _ = _pair_moments(act, q, q, q)
        Eq2, _ = _pair_moments(act, q2, q2, q2)
        Rd = diag_price(act, q)
        if residual:
            chi_d = chi_d + r2 * sigma_w2 * Rd * chi_d
            chi_o = chi_o + r2 * sigma_w2 * G12 * chi_o
            q = q + r2 * (sigma_w2 * Eq + sigma_b2)
            q2 = q2 + r2 * (sigma_w2 * Eq2 + sigma_b2)
            c = c + r2 * (sigma_w2 * E12 + sigma_b2)
        else:
            chi_d = r2 * sigma_w2 * Rd * chi_d
            chi_o = r2 * sigma_w2 * G12 * chi_o
            q, q2, c = (r2 * (sigma_w2 * Eq + sigma_b2), r2 * (sigma_w2 * Eq2 + sigma_b2),
                        r2 * (sigma_w2 * E12 + sigma_b2))
    _, G12 = _pair_moments(act, q, c, q2)
    return sigma_w2_out * diag_price(act, q) * chi_d, sigma_w2_out * G12 * chi_o


@dataclass(frozen=True)
class OptimalRho(Result):
    """Per-entry ρ* (P×P), the maximal χ_out (P×P, with η⁰ = N/d_in if ``width``/``d_in`` were given,
    else per unit η⁰), means over diagonal / off-diagonal entries, convergence flags and the search box."""

    rho_star: np.ndarray
    chi_out_max: np.ndarray
    rho_star_diag_mean: float
    rho_star_offdiag_mean: float
    converged: np.ndarray
    bounds: tuple
    iterations: int
    depth: int
    params: dict


@sweep_computation
def optimal_rho(X=None, depth=10, activation="erf", sigma_w2=1.0, sigma_b2=0.0, sigma_w2_in=None,
                sigma_b2_in=None, sigma_w2_out=None, *, K0=None, d_in=None, width=None,
                bounds=(1e-3, 3.0), n_grid=61, tol=1e-10, residual=True) -> OptimalRho:
    """ρ* = argmax_ρ χ_out for every entry of the read-in kernel (seed 004 Fig. 4–6)."""
    lo, hi = (positive_float(b, "bounds") for b in bounds)
    if not lo < hi:
        raise ValueError(f"bounds must satisfy low < high, got {bounds}")
    n_grid = positive_int(n_grid, "n_grid", minimum=5)
    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=1.0, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=None, d_in=d_in)
    act, L, P = arch.activation, arch.depth, K0m.shape[0]
    iu, ju = np.triu_indices(P)
    k11, k12, k22 = np.diag(K0m)[iu], K0m[iu, ju], np.diag(K0m)[ju]
    is_diag = iu == ju
    B = iu.size

    def objective(logrho):  # (B,) → χ_out of each entry at its own ρ
        cd, co = chi_out_entries(act, k11, k12, k22, np.exp(logrho), L, arch.sigma_w2, arch.sigma_b2,
                                 arch.sigma_w2_out, residual=arch.residual)
        return np.where(is_diag, cd, co)

    grid = np.linspace(np.log(lo), np.log(hi), n_grid)
    vals = np.stack([objective(np.full(B, g)) for g in grid])            # (n_grid, B)
    vals = np.where(np.isfinite(vals), vals, -np.inf)
    best = np.argmax(vals, axis=0)
    converged = (best > 0) & (best < n_grid - 1)
    a = grid[np.clip(best - 1, 0, n_grid - 1)]
    b = grid[np.clip(best + 1, 0, n_grid - 1)]
    c_ = b - _INVPHI * (b - a)
    d_ = a + _INVPHI * (b - a)
    fc, fd = objective(c_), objective(d_)
    it = 0
    while np.max(b - a) > tol and it < 200:
        it += 1
        left = fc > fd                      # maximum in [a, d]
        b = np.where(left, d_, b)
        a = np.where(left, a, c_)
        newc = b - _INVPHI * (b - a)
        newd = a + _INVPHI * (b - a)
        # reuse one evaluation per entry
        fd_new = np.where(left, fc, np.nan)
        fc_new = np.where(left, np.nan, fd)
        need_c = left
        need_d = ~left
        x_eval = np.where(need_c, newc, newd)
        f_eval = objective(x_eval)
        fc = np.where(need_c, f_eval, fc_new)
        fd = np.where(need_d, f_eval, fd_new)
        c_, d_ = newc, newd
    xs = 0.5 * (a + b)
    rho_star_v = np.exp(xs)
    fmax = objective(xs)
    scale = 1.0
    if width is not None:
        if arch.d_in is None:
            raise ValueError("d_in is required with K0 to scale chi_out by eta[0] = N/d_in")
        scale = positive_int(width, "width") / arch.d_in
    rs = np.empty((P, P))
    cm = np.empty((P, P))
    cv = np.empty((P, P), bool)
    rs[iu, ju] = rs[ju, iu] = rho_star_v
    cm[iu, ju] = cm[ju, iu] = fmax * scale
    cv[iu, ju] = cv[ju, iu] = converged
    off = ~is_diag
    return OptimalRho(rs, cm, float(np.mean(rho_star_v[is_diag])),
                      float(np.mean(rho_star_v[off])) if np.any(off) else float("nan"),
                      cv, (lo, hi), it, L, arch.as_dict())


@sweep_computation
def rho_star_estimate(K0, depth, activation="erf", sigma_w2=1.0, sigma_b2=0.0, V=1.0, large_L=False):
    """Closed-form estimate of ρ* from the linearised kernel growth (seed 004 Eq. 61; Eq. 62 with
    ``large_L=True``), assuming √K^L = V/2 (dynamic range V; erf: V = 1, App. E). ``K0`` is the
    read-in variance (scalar or array, elementwise)."""
    from ._args import resolve_activation

    act = resolve_activation(activation)
    L = positive_int(depth, "depth")
    sw2 = positive_float(sigma_w2, "sigma_w2")
    sb2 = positive_float(sigma_b2, "sigma_b2", allow_zero=True)
    V = positive_float(V, "V")
    K0 = finite_array(K0, "K0")
    if np.any(K0 < 0):
        raise ValueError("K0 must be >= 0 (a variance)")
    d0 = float(np.asarray(act.dphi(np.array([0.0])))[0])
    if d0 == 0.0:
        raise ValueError("activation: φ'(0) = 0, the linearised estimate (Eq. 61) is undefined")
    a = sw2 * d0 * d0
    ratio = (a * (V / 2) ** 2 + sb2) / (a * K0 + sb2)
    if np.any(ratio <= 1):
        raise ValueError("K0: the read-in variance already exceeds (V/2)²; Eq. 61 has no real solution")
    if large_L:
        return np.sqrt(np.log(ratio) / (a * L))
    return np.sqrt(ratio ** (1.0 / L) - 1.0) / np.sqrt(a)
