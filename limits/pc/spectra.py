"""Spectra and conditioning of the activity Hessian at scale (docs/theory/pc.rst §4; seed 001 §3.1, §A.2.3,
Fig. 2, 4, A.1–A.7, A.22).

* ``λ_max``: Lanczos (``scipy.sparse.linalg.eigsh``) on the matrix-free product ``H_z v`` (O(H N²)).
* ``λ_min``: Lanczos on ``H_z⁻¹`` (shift-invert at σ = 0), applied through
  :class:`~limits.pc.hessian.ChainInverse` — the Woodbury form of ``H_z = CᵀΛC + d·uᵀu`` with ``C``
  block unit lower triangular, two sweeps over the weights per solve, no factorisation, no memory
  beyond the weights (clamped input, no decay) — or through the block-banded Cholesky factor
  (factorisation O(H N³), memory O(H N²); decay / free input), or LOBPCG.
* dense ``eigvalsh`` for small matrices (the seed's method; used as the check).
* random-matrix references: unit-shifted Marchenko–Pastur edges {1, 5}, semicircle ±2, Weyl bounds
  λ_max ≤ 7 and λ_min ≥ −1.
"""
from __future__ import annotations

import time
import tracemalloc
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spla

from ..results import Result
from .hessian import BlockCholesky, ChainInverse, activity_hessian, hessian_operator, layout
from .network import make_net
from ..registry import sweep_computation

PARAMETERISATIONS = ("sp", "mupc", "orthogonal")


@sweep_computation
def init_weights(width, hidden, param="sp", d_in=None, d_out=1, rng=None, seed=None):
    """Random weights and multipliers for an MLP / ResNet with ``hidden`` layers of width ``width``
    (L = hidden + 1 weight matrices) in one of the parameterisations of seed 001 Table 1:

    * ``"sp"``: a_l = 1, W_ij ~ N(0, 1/N_{l−1});
    * ``"mupc"``: W_ij ~ N(0, 1), a_1 = N_0^{-1/2}, a_l = (N L)^{-1/2}, a_L = 1/N;
    * ``"orthogonal"``: a_l = 1, (semi-)orthogonal W_l (Haar, via QR with sign fix).

    Returns ``(weights, multipliers)``."""
    from ..checks import generator, positive_int

    N = positive_int(width, "width")
    H = positive_int(hidden, "hidden")
    d_in = N if d_in is None else positive_int(d_in, "d_in")
    d_out = positive_int(d_out, "d_out")
    if param not in PARAMETERISATIONS:
        raise ValueError(f"param must be one of {PARAMETERISATIONS}, got {param!r}")
    rng = generator(rng, seed)
    L = H + 1
    dims = [d_in] + [N] * H + [d_out]
    W = []
    for l in range(1, L + 1):
        shape = (dims[l], dims[l - 1])
        if param == "orthogonal":
            A = rng.standard_normal((max(shape), min(shape)))
            Q, R = np.linalg.qr(A)
            Q = Q * np.sign(np.diag(R))
            W.append(Q if shape[0] >= shape[1] else Q.T)
        elif param == "sp":
            W.append(rng.standard_normal(shape) / np.sqrt(dims[l - 1]))
        else:
            W.append(rng.standard_normal(shape))
    if param == "mupc":
        a = [d_in ** -0.5] + [(N * L) ** -0.5] * (H - 1) + [1.0 / N]
    else:
        a = [1.0] * L
    return W, np.array(a)


@dataclass(frozen=True)
class Spectrum(Result):
    """Extreme eigenvalues of ``H_z`` and its condition number κ = λ_max/λ_min, with diagnostics."""

    lambda_max: float
    lambda_min: float
    kappa: float
    n: int
    method: str
    seconds: float
    peak_bytes: int
    converged: bool
    note: str = ""          # e.g. "numerically singular": λ_min below double-precision resolution


@sweep_computation
def extreme_eigenvalues(weights, multipliers=None, skips=None, layer_weights=None, nudge=None, decay=0.0,
                        which="both", method="auto", tol=1e-10, unsupervised=False, measure_memory=False,
                        progress_bar=False, inverse="auto") -> Spectrum:
    """λ_max / λ_min of the activity Hessian. ``method``: "dense" (eigvalsh), "lanczos" (λ_max by
    Lanczos, λ_min by Lanczos on H⁻¹ via block Cholesky), "lobpcg" (λ_min by LOBPCG preconditioned
    with the block-diagonal Cholesky), or "auto" (dense when n ≤ 1500)."""
    net = make_net(weights, multipliers, skips, layer_weights)
    lay = layout(net, unsupervised, nudge, decay)
    n = lay.n
    if which not in ("both", "max", "min"):
        raise ValueError(f"which must be 'both', 'max' or 'min', got {which!r}")
    if method == "auto":
        method = "dense" if n <= 1500 else "lanczos"
    if method not in ("dense", "lanczos", "lobpcg"):
        raise ValueError(f"method must be 'auto', 'dense', 'lanczos' or 'lobpcg', got {method!r}")
    if inverse not in ("auto", "chain", "cholesky"):
        raise ValueError(f"inverse must be 'auto', 'chain' or 'cholesky', got {inverse!r}")
    if inverse == "auto":
        inverse = "cholesky" if (unsupervised or lay.decay) else "chain"
    elif inverse == "chain" and (unsupervised or lay.decay):
        raise ValueError("inverse='chain' needs a clamped input and no decay; use inverse='cholesky'")
    from ._threads import blas_threads

    with blas_threads():
        return _extreme(net, lay, n, which, method, tol, unsupervised, nudge, decay, measure_memory, progress_bar,
                        inverse)


def _extreme(net, lay, n, which, method, tol, unsupervised, nudge, decay, measure_memory, progress_bar,
             inverse="cholesky"):
    if measure_memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    lmax = lmin = np.nan
    converged = True
    note = ""
    if method == "dense":
        Hd = activity_hessian(net.W, net.a, _skip_spec(net), net.lam, unsupervised, nudge, decay, dense=True)
        ev = np.linalg.eigvalsh(Hd)
        lmax, lmin = float(ev[-1]), float(ev[0])
    else:
        op = hessian_operator(net, lay)
        v0 = np.ones(n) / np.sqrt(n)
        if which in ("both", "max"):
            try:
                lmax = float(spla.eigsh(op, k=1, which="LA", tol=tol, v0=v0, return_eigenvectors=False,
                                        maxiter=20 * n, ncv=min(n - 1, 60))[0])
            except spla.ArpackNoConvergence as exc:
                converged = False
                lmax = float(np.max(exc.eigenvalues)) if len(exc.eigenvalues) else np.nan
        if which in ("both", "min"):
            try:
                chol = ChainInverse(net, lay) if inverse == "chain" else BlockCholesky(net, lay,
                                                                                        progress_bar=progress_bar)
            except ValueError as exc:
                if "not positive definite" not in str(exc):
                    raise
                # PD in exact arithmetic (seed 001 Thm A.1) but κ beyond 1/ε_mach: report κ = ∞
                chol = None
                lmin = 0.0
                note = ("numerically singular: block Cholesky failed, λ_min is below the double-precision "
                        f"resolution ~ε·λ_max (κ ≳ 1e16); {exc}")
            if chol is None:
                pass
            elif method == "lanczos":
                inv = spla.LinearOperator((n, n), matvec=chol.solve, matmat=chol.solve, dtype=np.float64)
                try:
                    mu = float(spla.eigsh(inv, k=1, which="LA", tol=tol, v0=v0, return_eigenvectors=False,
                                          maxiter=20 * n, ncv=min(n - 1, 60))[0])
                    if np.isfinite(mu) and mu > 0:
                        lmin = 1.0 / mu
                    else:                                 # structured inverse of a numerically singular H_z
                        lmin = 0.0
                        note = ("numerically singular: the largest eigenvalue of H_z⁻¹ came out "
                                f"{mu!r}; λ_min is below the double-precision resolution (κ ≳ 1e16)")
                except spla.ArpackNoConvergence as exc:
                    converged = False
                    lmin = 1.0 / float(np.max(exc.eigenvalues)) if len(exc.eigenvalues) else np.nan
            else:
                M = spla.LinearOperator((n, n), matvec=chol.solve, matmat=chol.solve, dtype=np.float64)
                rng = np.random.default_rng(0)
                X0 = rng.standard_normal((n, 2))
                with warnings.catch_warnings():      # n < 5·block: scipy solves densely (exact) and says so
                    warnings.filterwarnings("ignore", message=".*dense eigensolver.*")
                    res = spla.lobpcg(op, X0, M=M, largest=False, tol=1e-9, maxiter=200,
                                      retResidualNormsHistory=True)
                vals = res[0]                         # the dense fallback returns no residual history
                lmin = float(np.min(vals))
                if len(res) > 2 and len(res[2]):
                    scale = max(1.0, abs(lmax) if np.isfinite(lmax) else 1.0)
                    converged = converged and float(np.max(res[2][-1])) < 1e-6 * scale
    secs = time.perf_counter() - t0
    peak = 0
    if measure_memory:
        peak = int(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    kappa = float(lmax / lmin) if (np.isfinite(lmax) and np.isfinite(lmin) and lmin > 0) else float("inf")
    return Spectrum(float(lmax), float(lmin), kappa, int(n), method, secs, peak, bool(converged), note)


def _skip_spec(net):
    from .network import skips_arg

    return skips_arg(net)


@sweep_computation(forwards=(extreme_eigenvalues,))
def condition_number(weights, multipliers=None, skips=None, **kw) -> float:
    """κ(H_z) = λ_max / λ_min (seed 001 §3.1)."""
    return extreme_eigenvalues(weights, multipliers, skips, **kw).kappa


@sweep_computation
def condition_grid(widths, depths, param="sp", skips=None, d_in=None, d_out=1, rng=None, seed=None,
                   method="auto", progress_bar=False) -> dict:
    """κ(H_z), λ_min, λ_max at initialisation over a (width N, hidden layers H) grid (seed 001
    Fig. 2 / 4 / A.22 / A.7). Returns a dict of arrays indexed [i_N, i_H]."""
    from ..checks import generator
    from ..progress import progress

    rng = generator(rng, seed)
    widths, depths = list(widths), list(depths)
    K = np.full((len(widths), len(depths)), np.nan)
    lo, hi = K.copy(), K.copy()
    pairs = [(i, j) for i in range(len(widths)) for j in range(len(depths))]
    for i, j in progress(pairs, total=len(pairs), desc=f"κ grid {param}", disable=None if progress_bar else True):
        N, H = widths[i], depths[j]
        sk = skips if (skips is None or H >= 2) else None
        W, a = init_weights(N, H, param, d_in if d_in else N, d_out, rng=rng)
        sp = extreme_eigenvalues(W, a, sk, method=method)
        K[i, j], lo[i, j], hi[i, j] = sp.kappa, sp.lambda_min, sp.lambda_max
    return {"widths": np.array(widths), "depths": np.array(depths), "kappa": K, "lambda_min": lo, "lambda_max": hi}


# ----------------------------------------------------------------------------- RMT references
@sweep_computation
def mp_edges(ratio=1.0, shift=1.0):
    """Edges of the unit-shifted Marchenko–Pastur law of ``I + WᵀW`` (W_ij ~ N(0, 1/N), aspect
    ``ratio`` = N_in/N_out): ``shift + (1 ± √ratio)²`` → {1, 5} for ratio 1 (seed 001 Eq. 22)."""
    from ..checks import positive_float

    ratio = positive_float(ratio, "ratio")
    shift = float(shift)
    if not np.isfinite(shift):
        raise ValueError(f"shift must be finite, got {shift}")
    return shift + (1 - np.sqrt(ratio)) ** 2, shift + (1 + np.sqrt(ratio)) ** 2


@sweep_computation
def mp_density(x, ratio=1.0, shift=1.0):
    """Density of the shifted Marchenko–Pastur law (ratio ≤ 1 part; the atom at 0 is omitted)."""
    lo, hi = mp_edges(ratio, 0.0)
    u = np.asarray(x, float) - shift
    out = np.zeros_like(u)
    m = (u > lo) & (u < hi)
    out[m] = np.sqrt((hi - u[m]) * (u[m] - lo)) / (2 * np.pi * ratio * u[m])
    return out


@sweep_computation
def semicircle_density(x, radius=2.0):
    """Wigner semicircle on [−radius, radius] (seed 001 Eq. 23: ±2)."""
    x = np.asarray(x, float)
    return np.where(np.abs(x) < radius, 2 * np.sqrt(np.maximum(radius**2 - x**2, 0)) / (np.pi * radius**2), 0.0)


WEYL_LAMBDA_MAX = 7.0   # λ_max(D) + λ_max(O) = 5 + 2
WEYL_LAMBDA_MIN = -1.0  # λ_min(D) + λ_min(O) = 1 − 2 (loose: H_z is PD)
# Edge of the off-diagonal part for deep chains (H → ∞): each block row couples to two Ginibre
# blocks of variance 1/N, row variance 2, semicircle radius 2√2 (the seed's ±2 holds for H = 2).
OFFDIAG_EDGE_DEEP = 2.0 * np.sqrt(2.0)


def hessian_parts(weights, multipliers=None, skips=None):
    """Dense ``D`` (block diagonal) and ``O`` (off-diagonal) parts of H_z = D + O (seed 001 Eq. 20)."""
    Hd = activity_hessian(weights, multipliers, skips, dense=True)
    net = make_net(weights, multipliers, skips)
    lay = layout(net)
    D = np.zeros_like(Hd)
    for p in range(len(lay.layers)):
        sl = slice(lay.offsets[p], lay.offsets[p + 1])
        D[sl, sl] = Hd[sl, sl]
    return D, Hd - D, Hd
