"""Time–sample grid of the DMFT and the map from seed 000's abcd/γ0 form.

Grid. Times ``t_k = k·dt``, ``k = 0..n_steps``; a two-time kernel is an ``(n_t·P) × (n_t·P)``
matrix in time-major order (row ``k·P + μ``). Every time integral of the DMFT,
``γ0 ∫_0^t ds O(t, s) x(s)``, is replaced by the strictly causal left sum
``γ0 dt Σ_{s<t} O(t, s) x(s)``.

Why the left sum is *exact* for discrete gradient descent. With step ``dt`` the weights obey
``W^l(t+dt) = W^l(t) + dt·(γ0/√N) Σ_μ Δ_μ(t) g^{l+1}_μ(t) φ(h^l_μ(t))ᵀ`` (mean-field network,
loss ``½Σ_μ Δ_μ²``, rate ``γ0² N``), so ``W^l(t) = W^l(0) + dt Σ_{s<t}(…)`` is exactly a left sum
and the fields at time ``t`` depend on sources at times ``s < t`` only. Repeating the DMFT
derivation with this sum gives the same saddle-point equations with ``∫ds → dt Σ_{s<t}``: the
discrete DMFT describes N → ∞ GD with learning-rate step ``dt`` exactly, and gradient flow to
first order in ``dt`` (``method="flow"`` can Richardson-extrapolate two grids for second order).

Seed 000 (App. A.3, Eqs. 11–15): ``f = h^L/γ``, ``γ = γ0 N^d``, ``W ~ N(0, N^{-b})``,
``h^l = N^{-a_l} W h^{l-1}``, ``η = η0 γ² N^{-c}``, loss ``(1/2P)Σ_μ Δ_μ²`` (Eq. 1). Every
member of the feature-learning family (Eq. 15: ``2a_l+b_l = 1 = 2a_l+c`` for l ≥ 2,
``2a_1+b_1 = 0 = 2a_1+c``, ``d = ½``) has the same preactivation dynamics as the mean-field
point (a_l = ½, b = c = a_1 = 0): the forward pass depends on ``N^{-2a-b}`` and the feature
update on ``η N^{-2a_l}``, both invariant. With ``η = η0 γ0² N`` one GD step on the *mean*
loss moves DMFT time by ``dt = η0 / P``; on the *sum* loss ``½Σ_μΔ_μ²`` by ``dt = η0``.
Seed depth ``L`` counts weight layers: the DMFT ``depth`` (hidden layers) is ``L − 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..checks import positive_float, positive_int


@dataclass(frozen=True)
class TimeGrid:
    """``n_steps`` steps of size ``dt``; ``t = dt·arange(n_steps+1)``."""

    dt: float
    n_steps: int

    @property
    def t(self) -> np.ndarray:
        return self.dt * np.arange(self.n_steps + 1, dtype=np.float64)

    @property
    def n_t(self) -> int:
        return self.n_steps + 1


def make_grid(T=None, dt=None, steps=None) -> TimeGrid:
    """Grid from two of (final time ``T``, step ``dt``, number of steps ``steps``).

    ``T`` must be an integer multiple of ``dt`` (to 1e-9 relative); otherwise ``ValueError``.
    """
    if dt is None:
        if T is None or steps is None:
            raise ValueError("dt is required (or give both T and steps)")
        T = positive_float(T, "T")
        steps = positive_int(steps, "steps")
        return TimeGrid(T / steps, steps)
    dt = positive_float(dt, "dt")
    if steps is not None:
        steps = positive_int(steps, "steps")
        if T is not None and abs(float(T) - steps * dt) > 1e-9 * max(1.0, float(T)):
            raise ValueError(f"T={T} is not steps*dt={steps * dt}")
        return TimeGrid(dt, steps)
    if T is None:
        raise ValueError("T (final time) or steps is required")
    T = positive_float(T, "T")
    n = T / dt
    k = int(round(n))
    if k < 1 or abs(n - k) > 1e-9 * max(1.0, n):
        raise ValueError(f"T={T} must be a positive integer multiple of dt={dt} (T/dt = {n})")
    return TimeGrid(dt, k)


def _q(x):
    return Fraction(x).limit_denominator(10**6) if not isinstance(x, Fraction) else x


def gd_time_step(eta0, P, loss="mean") -> float:
    """DMFT time advanced by one GD step of a mean-field net with ``η = η0 γ0² N``.

    ``loss="mean"``: seed 000 Eq. 1, ``(1/2P)Σ_μΔ_μ²`` → ``dt = η0/P``;
    ``loss="sum"``: ``½Σ_μΔ_μ²`` (the DMFT convention of docs/theory/dmft.rst §1) → ``dt = η0``.
    """
    eta0 = positive_float(eta0, "eta0")
    P = positive_int(P, "P")
    if loss == "mean":
        if eta0 / P == 0.0:
            raise ValueError(f"eta0 = {eta0!r} is too small: the DMFT time step eta0/P underflows to 0")
        return eta0 / P
    if loss == "sum":
        return eta0
    raise ValueError(f"loss must be 'mean' or 'sum', got {loss!r}")


@dataclass(frozen=True)
class DMFTParams:
    """What a seed-000 (abcd, γ0, η0) training run corresponds to in the DMFT."""

    gamma0: float
    dt: float
    depth: int          # hidden layers (DMFT convention)
    note: str


def from_abcd(a, b, c, d, gamma0, eta0, P, loss="mean") -> DMFTParams:
    """Map seed 000's abcd parameterisation (variance convention, Eqs. 11–15) to DMFT inputs.

    ``a``, ``b`` are sequences over the L weight layers (``a[0]`` = input layer, ``a[-1]`` =
    readout); ``c``, ``d`` numbers. Raises ``ValueError`` (naming the violated constraint) if the
    point is not in the width-stable feature-learning family of Eq. 15, which is the only family
    the mean-field DMFT describes. Returns γ0 (unchanged), the DMFT step per GD step and depth.
    """
    gamma0 = positive_float(gamma0, "gamma0")
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("a and b must be sequences of equal length L >= 2 (one per weight layer)")
    a = [_q(v) for v in a]
    b = [_q(v) for v in b]
    c, d = _q(c), _q(d)
    if 2 * a[0] + b[0] != 0:
        raise ValueError("b: first layer violates 2a_1 + b_1 = 0 (seed 000 Eq. 15)")
    if 2 * a[0] + c != 0:
        raise ValueError("c: first layer violates 2a_1 + c = 0 (seed 000 Eq. 15)")
    for l in range(1, len(a)):
        if 2 * a[l] + b[l] != 1:
            raise ValueError(f"b: layer {l + 1} violates 2a_l + b_l = 1 (seed 000 Eq. 15)")
        if 2 * a[l] + c != 1:
            raise ValueError(f"c: layer {l + 1} violates 2a_l + c = 1 (seed 000 Eq. 15)")
    if d != Fraction(1, 2):
        raise ValueError(f"d: feature learning needs d = 1/2 (seed 000 Eq. 15), got {d}")
    dt = gd_time_step(eta0, P, loss)
    return DMFTParams(gamma0=gamma0, dt=dt, depth=len(a) - 1,
                      note=f"same preactivation dynamics as the mean-field point (a_l=1/2, b=c=0); "
                           f"one GD step = dt = {dt:g} DMFT time ({loss} loss)")
