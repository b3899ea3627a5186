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


@dataclass(frozen=True)
class SerialDMFTResult(Result):
    """Infinite-width GD trajectory of a composition (``limits.serial``) in the mean-field parameterisation
    (docs/theory/dmft.rst §6), the mean of ``replicas`` independent Monte Carlo replicas of M paths each; every
    ``*_se`` is the standard error over the replicas (the Monte Carlo error of that quantity).

    ``t`` (n_t,), ``f`` (n_t×P) outputs on the training inputs, ``loss`` = ½Σ_μ(f_μ − y_μ)², ``ntk`` (n_t×P×P) the
    NTK K(t); per hidden stage k (the output of the k-th Dense/Conv after its activation and pooling, the features the
    next layer reads) ``Phi_pool[k]`` (n_t×P×P) the feature kernel averaged over position pairs and ``G_pool[k]`` the
    gradient kernel likewise; ``Phi``/``G`` (tuples over stages, n_t × P·S × P·S, samples = training then test inputs,
    positions row-major) the equal-time kernels with their spatial indices when kept (``keep_spatial``).
    ``ntk_lazy`` is the composition's NTK at initialisation from :func:`limits.kernels.kernel` (exact; the γ0 → 0
    limit). ``f_test`` (n_t×P_test) when solved with ``X_test``. ``cost``: the estimate made before solving and the
    CPU time spent."""

    t: np.ndarray
    f: np.ndarray
    f_se: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    y: np.ndarray
    ntk: np.ndarray
    ntk_se: np.ndarray
    Phi_pool: np.ndarray
    Phi_pool_se: np.ndarray
    Phi_change_se: np.ndarray       # standard error of Φ̄_k(t) − Φ̄_k(0) (the same paths: smaller than Φ̄'s own)
    G_pool: np.ndarray
    G_pool_se: np.ndarray
    ntk_lazy: np.ndarray
    gamma0: float
    dt: float
    replicas: int
    mc_samples: int
    composition: dict
    chain: str
    positions: tuple                # (S_h, S_x) per hidden stage
    method: str = "gd"
    solver: str = "serial-mc-march"
    iterations: int = 1
    residual: float = 0.0
    converged: bool = True
    message: str = ""
    wall_time_s: float = 0.0
    cost: dict | None = None
    Phi: tuple | None = None
    Phi_se: tuple | None = None
    G: tuple | None = None
    G_se: tuple | None = None
    inputs: dict | None = None      # {"model": composition dict, "X": training inputs} (for limits.check)
    X_test: np.ndarray | None = None
    f_test: np.ndarray | None = None
    f_test_se: np.ndarray | None = None
    ntk_test: np.ndarray | None = None
    ntk_test_se: np.ndarray | None = None
    replica_values: dict | None = None    # per replica: "f", "f_test", "loss", "Phi_pool" (the check's correlations)

    @property
    def P(self) -> int:
        return self.f.shape[1]

    @property
    def Delta(self) -> np.ndarray:
        return self.y[None, :] - self.f

    @property
    def loss_mean(self) -> np.ndarray:
        return self.loss / self.y.size

    def alignment(self, target=None) -> np.ndarray:
        """Kernel–target alignment ⟨Φ̄_k(t), y yᵀ⟩ / (‖Φ̄_k(t)‖ ‖y yᵀ‖) per stage and time (L × n_t) of the
        position-averaged feature kernels (``target``: another P-vector, default y)."""
        yv = self.y if target is None else np.asarray(target, dtype=float)
        Y = np.outer(yv, yv)
        num = np.einsum("ktab,ab->kt", self.Phi_pool, Y)
        return num / (np.linalg.norm(self.Phi_pool, axis=(2, 3)) * np.linalg.norm(Y))

    def summary(self) -> dict:
        return {"chain": self.chain, "gamma0": self.gamma0, "dt": self.dt, "n_steps": int(self.t.size - 1),
                "P": self.P, "replicas": self.replicas, "M": self.mc_samples, "final_loss": float(self.loss[-1]),
                "final_loss_se": float(self.loss_se[-1]), "max_f_se": float(np.max(self.f_se)),
                "ntk_change": float(np.linalg.norm(self.ntk[-1] - self.ntk[0]) / np.linalg.norm(self.ntk[0])),
                "residual": self.residual, "message": self.message, "wall_time_s": self.wall_time_s}
