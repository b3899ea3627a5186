"""nfd — Neural Feature Dynamics: SDE limits of deep pre-activation ResNets (nfd.md; seed 002).

* :func:`kernel_ode` — adaptive solve of dΣ/dt = E_{N(0,Σ)}[φφᵀ] (infinite-depth NNGP) and the
  backward (gradient) kernel; :func:`residual_recursion` — its Euler scheme (step T/L).
* :func:`particles` — particle Euler–Maruyama for the forward/backward McKean–Vlasov SDEs at init
  (pieces: :func:`brownian_increments`, :func:`forward_coefficients`, :func:`euler_maruyama`).
* :func:`train_particles` — the training dynamics of nfd.md §4 (online SGD, multi-pass Gaussian
  family, per-layer growing rank-tolerant Cholesky factors).
"""
from .kernel_ode import (KernelODE, NestingCheck, ResidualRecursion, input_gram, kernel_ode,
                         nesting_check, residual_recursion)
from .sde import (ParticleInit, SDEPath, backward_coefficients, brownian_increments, correlate,
                  euler_maruyama, forward_coefficients, particles, psd_sqrt)

__all__ = ["kernel_ode", "KernelODE", "residual_recursion", "ResidualRecursion", "nesting_check",
           "NestingCheck", "input_gram", "particles", "ParticleInit", "euler_maruyama", "SDEPath",
           "brownian_increments", "forward_coefficients", "backward_coefficients", "correlate", "psd_sqrt"]


def __getattr__(name):
    if name in ("train_particles", "TrainParticles", "GrowingCholesky"):
        from . import training

        return getattr(training, name)
    raise AttributeError(f"module 'limits.nfd' has no attribute {name!r}")
