"""Argument checking shared by the kernel recursions (bad input → ``ValueError`` naming the argument)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array, positive_float, positive_int, psd_matrix
from .diagnostics import LARGE

DEPTH_SCALINGS = ("none", "sqrt", "linear")


@dataclass(frozen=True)
class Arch:
    """Resolved architecture: one place where user arguments become the numbers the recursions use.

    ``rho`` is the *effective* branch multiplier: ``rho_arg`` for ``depth_scaling="none"``,
    ``rho_arg/√L`` for ``"sqrt"`` (Hayou et al. stable ResNet) and ``rho_arg/L`` for ``"linear"``.
    """

    activation: object
    depth: int
    sigma_w2: float
    sigma_b2: float
    sigma_w2_in: float
    sigma_b2_in: float
    sigma_w2_out: float
    sigma_b2_out: float
    residual: bool
    rho: float
    rho_arg: float
    depth_scaling: str
    d_in: int | None

    @property
    def activation_name(self) -> str:
        return str(getattr(self.activation, "name", "custom"))

    def as_dict(self) -> dict:
        return {"activation": self.activation_name, "depth": self.depth, "sigma_w2": self.sigma_w2,
                "sigma_b2": self.sigma_b2, "sigma_w2_in": self.sigma_w2_in, "sigma_b2_in": self.sigma_b2_in,
                "sigma_w2_out": self.sigma_w2_out, "sigma_b2_out": self.sigma_b2_out,
                "residual": self.residual, "rho": self.rho, "rho_arg": self.rho_arg,
                "depth_scaling": self.depth_scaling, "d_in": self.d_in}


def resolve_activation(activation):
    """``limits.activation(...)`` with unknown names turned into a ``ValueError`` naming ``activation``."""
    from .. import activation as _activation

    if activation is None:
        raise ValueError("activation must be a registered name or a callable, got None")
    try:
        return _activation(activation)
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if "activation" in msg else f"activation: {msg}") from None
    except (KeyError, TypeError) as exc:
        raise ValueError(f"activation: unknown activation {activation!r} ({exc})") from None


def _float(x, name, allow_zero=True, bound=LARGE):
    """A variance (or ρ) in [0, bound]: beyond ``bound`` = 1e100 every kernel it enters is reported as
    exploded (:data:`diagnostics.LARGE`) and products with it leave float64, so refuse it up front."""
    v = positive_float(x, name, allow_zero=allow_zero)
    if v > bound:
        raise ValueError(f"{name} = {v:g} is too large: it must be <= {bound:g} (a kernel beyond {LARGE:g} "
                         f"counts as exploded, and float64 overflows near 1e308)")
    return v


def gram_upper(X, scale):
    """scale·X Xᵀ, exactly symmetric: ``numpy.dot(X, X.T)`` takes BLAS ``syrk`` for a product with its own
    transpose (half the flops of a general product) and mirrors the triangle; C-ordered. From P = 256 on, the
    upper triangle in row blocks of ``GRAM_ROWS`` (one-thread BLAS each, shared out over the threads of
    :mod:`limits.parallel`), then mirrored. (scipy's
    ``dsyrk`` would do the same but importing ``scipy.linalg`` costs ~0.25 s of every cold start.)"""
    X = np.ascontiguousarray(X, dtype=np.float64)
    P = X.shape[0]
    if P < 2 * GRAM_ROWS:
        R = np.dot(X, X.T)
    else:                                             # row blocks of the upper triangle on the threads of
        from .. import parallel                       # limits.parallel, then mirrored: the blocks depend on
        from ._fused import mirror                    # P alone, so the bits do not depend on n_jobs

        R = np.empty((P, P))
        starts = list(range(0, P, GRAM_ROWS))

        def part(group):
            for a in (starts[k] for k in group):
                R[a:a + GRAM_ROWS, a:] = X[a:a + GRAM_ROWS] @ X[a:].T
        parallel.map_blocks(part, parallel.split([(P - a) * GRAM_ROWS * X.shape[1] for a in starts],
                                                 parallel.threads(), parallel.MIN_COPIES))
        mirror(R, GRAM_ROWS)
    R *= scale
    return R


GRAM_ROWS = 128       # rows per block of gram_upper (a multiple of mirror's block: its diagonal squares)


def row_ids(X1, X2=None):
    """Ids of identical inputs: ``(ids1, ids2)`` with ids1[α] == ids2[β] ≥ 0 iff rows X1[α] and X2[β] are
    bitwise equal and −1 for a row no other row equals (X2=None: within X1; ids2 is then None). Identical
    inputs have correlation exactly 1 at every layer; rounding in the Gram products could make it 1 − ulp,
    where relu's E[φ'φ'] has an infinite slope (an error ~1e-8), so the callers snap those entries."""
    def rows(X):
        X = np.ascontiguousarray(X, dtype=np.float64)
        return X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()

    v = rows(X1) if X2 is None else np.concatenate([rows(X1), rows(X2)])
    _, inv, counts = np.unique(v, return_inverse=True, return_counts=True)
    ids = np.where(counts[inv] > 1, inv, -1).astype(np.intp)
    n1 = X1.shape[0]
    return (ids, None) if X2 is None else (ids[:n1], ids[n1:])


def snap_identical(K, ids_r, ids_c, q_r):
    """K[α, β] = q_r[α] wherever ids_r[α] == ids_c[β] ≥ 0 (see :func:`row_ids`); in place."""
    if ids_r.size == 0 or ids_c.size == 0 or ids_r.max() < 0 or ids_c.max() < 0:
        return K
    same = (ids_r[:, None] == ids_c[None, :]) & (ids_r[:, None] >= 0)
    K[same] = np.broadcast_to(q_r[:, None], K.shape)[same]
    return K


def snap_variances(q, ids, q_ref=None, ids_ref=None):
    """Equal variances for identical rows: q[α] = the value of the first row with the same id (in ``q_ref``,
    rows ``ids_ref``, when given — the other input set of a cross kernel); in place."""
    src_q, src_ids = (q, ids) if q_ref is None else (q_ref, ids_ref)
    dup = np.flatnonzero(ids >= 0)
    have = np.flatnonzero(src_ids >= 0)
    if dup.size == 0 or have.size == 0:
        return q
    u, first = np.unique(src_ids[have], return_index=True)      # the first row of every id in the source
    pos = np.searchsorted(u, ids[dup])
    pos = np.minimum(pos, u.size - 1)
    found = u[pos] == ids[dup]
    q[dup[found]] = src_q[have[first[pos[found]]]]
    return q


def resolve(X=None, K0=None, *, depth, activation, sigma_w2, sigma_b2, residual, rho,
            sigma_w2_in, sigma_b2_in, sigma_w2_out, sigma_b2_out, depth_scaling="none", d_in=None, min_depth=1):
    """Validate everything; return ``(K0, arch)`` with ``K0 = σ²_in X Xᵀ/d_in + σ²_b,in`` (seed 004 Eq. 16/30).
    ``min_depth`` = 0 admits the two-layer net (no hidden block: the read-out acts on K⁰)."""
    L = positive_int(depth, "depth", minimum=min_depth)
    act = resolve_activation(activation)
    sw2 = _float(sigma_w2, "sigma_w2")
    sb2 = _float(sigma_b2, "sigma_b2")
    sw2_in = sw2 if sigma_w2_in is None else _float(sigma_w2_in, "sigma_w2_in")
    sb2_in = sb2 if sigma_b2_in is None else _float(sigma_b2_in, "sigma_b2_in")
    sw2_out = sw2 if sigma_w2_out is None else _float(sigma_w2_out, "sigma_w2_out")
    sb2_out = sb2 if sigma_b2_out is None else _float(sigma_b2_out, "sigma_b2_out")
    if not isinstance(residual, (bool, np.bool_)):
        raise ValueError(f"residual must be True or False, got {residual!r}")
    rho_arg = _float(rho, "rho", bound=LARGE ** 0.5)            # ρ² multiplies every variance
    if depth_scaling is None:
        depth_scaling = "none"
    if depth_scaling not in DEPTH_SCALINGS:
        raise ValueError(f"depth_scaling must be one of {DEPTH_SCALINGS}, got {depth_scaling!r}")
    Ls = max(L, 1)                                               # (no branch at depth 0: ρ unused, as Model)
    rho_eff = {"none": rho_arg, "sqrt": rho_arg / np.sqrt(Ls), "linear": rho_arg / Ls}[depth_scaling]

    if (X is None) == (K0 is None):
        raise ValueError("pass exactly one of X (P×d_in data) or K0 (P×P read-in kernel)")
    if X is not None:
        Xa = finite_array(X, "X")
        if Xa.ndim == 1:
            Xa = Xa[None, :]
        if Xa.ndim != 2 or Xa.shape[0] < 1 or Xa.shape[1] < 1:
            raise ValueError(f"X must be a P×d_in array with P, d_in >= 1, got shape {Xa.shape}")
        if d_in is not None and positive_int(d_in, "d_in") != Xa.shape[1]:
            raise ValueError(f"d_in={d_in} disagrees with X.shape[1]={Xa.shape[1]}")
        d = Xa.shape[1]
        with np.errstate(over="ignore", invalid="ignore"):
            K = gram_upper(Xa, sw2_in / d)
            K += sb2_in
            ids, _ = row_ids(Xa)                         # identical inputs: correlation exactly 1
            snap_identical(K, ids, ids, snap_variances(np.diag(K).copy(), ids))
        hi, lo = float(K.max()), float(K.min())          # (NaN propagates; no |K| temporary)
        if not (np.isfinite(hi) and np.isfinite(lo) and max(hi, -lo) <= LARGE):
            w = "sigma_w2" if sigma_w2_in is None else "sigma_w2_in"
            raise ValueError(f"X: the read-in kernel K0 = {w}·X Xᵀ/d_in + sigma_b2_in exceeds {LARGE:g} (a kernel "
                             f"beyond it counts as exploded; max |X| = {float(np.max(np.abs(Xa))):.3g}, "
                             f"{w} = {sw2_in:g}): rescale X or reduce {w}")
    else:
        K = psd_matrix(K0, "K0")
        K = 0.5 * K + 0.5 * K.T                  # (K + Kᵀ)/2 without overflowing near the float64 limit
        if K.size and float(np.max(np.abs(K))) > LARGE:
            raise ValueError(f"K0 has entries up to {float(np.max(np.abs(K))):.3g}; a read-in kernel must stay "
                             f"<= {LARGE:g} (a kernel beyond it counts as exploded): rescale K0")
        if np.any(np.diag(K) < 0):
            raise ValueError("K0 has negative variances on its diagonal")
        d = None if d_in is None else positive_int(d_in, "d_in")
    arch = Arch(act, L, sw2, sb2, sw2_in, sb2_in, sw2_out, sb2_out, bool(residual), float(rho_eff),
                rho_arg, depth_scaling, d)
    return K, arch
