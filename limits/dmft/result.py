"""Result object of :func:`limits.dmft.solve`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..results import Result


@dataclass(frozen=True)
class DMFTResult(Result):
    """Infinite-width training trajectory of a mean-field network (docs/theory/dmft.rst §2–3).

    ``t`` (n_t,), ``f`` (n_t×P) predictions, ``loss`` = ½Σ_μ(f_μ−y_μ)² (the DMFT loss; seed 000
    Eq. 1's (1/2P)Σ is ``loss_mean``), ``Delta`` = y − f, ``ntk`` (n_t×P×P) the NTK
    ``K(t) = Σ_{l=0}^{L} G^{l+1}(t,t)∘Φ^l(t,t)``, ``Phi``/``G`` (L×n_t×P×P) equal-time kernels of the
    hidden layers l = 1..L. ``f_se`` is the Monte Carlo standard error of f (zeros for the exact
    linear solver). Two-time kernels are kept in ``Phi2``/``G2`` (L×n×n) when requested.
    """

    t: np.ndarray
    f: np.ndarray
    loss: np.ndarray
    loss_mean: np.ndarray
    Delta: np.ndarray
    y: np.ndarray
    ntk: np.ndarray
    Phi: np.ndarray
    G: np.ndarray
    f_se: np.ndarray
    depth: int
    activation: str
    gamma0: float
    dt: float
    method: str            # "gd" (exact discrete GD with step dt) | "flow"
    solver: str            # "linear-march" | "linear-picard" | "mc-alternating" | "lazy"
    iterations: int
    residual: float
    converged: bool
    message: str = ""
    mc_samples: int = 0
    wall_time_s: float = 0.0
    Phi2: np.ndarray | None = None
    G2: np.ndarray | None = None
    inputs: dict | None = None     # {"model": Model dict, "X": P×D} when solved with model= (for limits.check)
    # test predictions (solve(..., X_test=)): f_test (n_t×P_test) with its MC error, test–train NTK
    # ntk_test (n_t×P_test×P) and kernels Phi_test/G_test (L×n_t×P_test×P); None without X_test
    X_test: np.ndarray | None = None
    f_test: np.ndarray | None = None
    f_test_se: np.ndarray | None = None
    ntk_test: np.ndarray | None = None
    Phi_test: np.ndarray | None = None
    G_test: np.ndarray | None = None

    @property
    def P(self) -> int:
        return self.f.shape[1]

    def summary(self) -> dict:
        return {
            "depth": self.depth, "activation": self.activation, "gamma0": self.gamma0, "dt": self.dt,
            "method": self.method, "solver": self.solver, "n_steps": int(self.t.size - 1),
            "P": self.P, "final_time": float(self.t[-1]), "initial_loss": float(self.loss[0]),
            "final_loss": float(self.loss[-1]), "iterations": self.iterations,
            "residual": self.residual, "converged": self.converged, "mc_samples": self.mc_samples,
            "max_f_se": float(np.max(self.f_se)) if self.f_se.size else 0.0,
            "ntk_change": float(np.linalg.norm(self.ntk[-1] - self.ntk[0]) / np.linalg.norm(self.ntk[0])),
            "message": self.message, "wall_time_s": self.wall_time_s,
        }
