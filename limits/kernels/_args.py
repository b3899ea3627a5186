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


def resolve(X=None, K0=None, *, depth, activation, sigma_w2, sigma_b2, residual, rho,
            sigma_w2_in, sigma_b2_in, sigma_w2_out, sigma_b2_out, depth_scaling="none", d_in=None):
    """Validate everything; return ``(K0, arch)`` with ``K0 = σ²_in X Xᵀ/d_in + σ²_b,in`` (seed 004 Eq. 16/30)."""
    L = positive_int(depth, "depth", minimum=1)
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
    rho_eff = {"none": rho_arg, "sqrt": rho_arg / np.sqrt(L), "linear": rho_arg / L}[depth_scaling]

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
            K = sw2_in * (Xa @ Xa.T) / d + sb2_in
            K = 0.5 * K + 0.5 * K.T
        if not (np.all(np.isfinite(K)) and float(np.max(np.abs(K))) <= LARGE):
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
