"""nfd — Neural Feature Dynamics: SDE limits of deep pre-activation ResNets (docs/theory/nfd.rst; seed 002).

* :func:`kernel_ode` — adaptive solve of dΣ/dt = E_{N(0,Σ)}[φφᵀ] (infinite-depth NNGP) and the
  backward (gradient) kernel; :func:`residual_recursion` — its Euler scheme (step T/L).
* :func:`particles` — particle Euler–Maruyama for the forward/backward McKean–Vlasov SDEs at init
  (pieces: :func:`brownian_increments`, :func:`forward_coefficients`, :func:`euler_maruyama`).
* :func:`train_particles` — the training dynamics of docs/theory/nfd.rst §4 (online SGD, multi-pass Gaussian
  family, per-layer growing rank-tolerant Cholesky factors); ``mode="coupled"`` adds the
  reused-weight response terms (infinite-width, finite-depth dynamics of ordinary backprop).
* :func:`covariance_sde` — the neural covariance SDE of shaped MLPs in the proportional limit T = L/N
  (docs/theory/depth_width.rst); :func:`relu_log_norm` — the unshaped relu MLP's log-normal norm.
* :func:`depth_width_report` — at depth L and width N: the spread of the output correlation, the first order of
  the 1/N expansion (:func:`first_order`) and its error, and the regime (kernel-like, proportional, degenerate).
* :func:`gia_first_order` — the first-order (small η̄) coupled − decoupled test-output gap at
  infinite width and depth L (and L → ∞); ``limits.check`` compares it with finite ResNets.

Measured (see ``limits nfd gia`` / ``gia-limit`` and ``limits validate nfd``): with M = n particles
both modes have exactly the law of the corresponding finite networks; the coupled − NFD gap of
the test outputs does not shrink with depth (L = 4 … 256), i.e. seed 002 Cor. 1 is not observed in
this setting; freezing the input layer shrinks the gap about 7×, again without L-dependence.
"""
from .kernel_ode import (KernelODE, NestingCheck, ResidualRecursion, input_gram, kernel_ode,
                         nesting_check, residual_recursion)
from .covariance_sde import CovarianceSDE, covariance_sde, drift_coefficient, relu_log_norm, shaped_slopes
from .gia import GIAFirstOrder, gia_first_order
from .sde import (ParticleInit, SDEPath, backward_coefficients, brownian_increments, correlate,
                  euler_maruyama, forward_coefficients, particles, psd_sqrt)

from .._lazy import lazy_attributes
from ..model import nfd_view as _nfd_view, with_model as _with_model

kernel_ode = _with_model(kernel_ode, _nfd_view("limits.nfd.kernel_ode"), "limits.nfd.kernel_ode")
particles = _with_model(particles, _nfd_view("limits.nfd.particles", depth_arg="L"), "limits.nfd.particles")

__all__ = ["kernel_ode", "KernelODE", "residual_recursion", "ResidualRecursion", "nesting_check",
           "NestingCheck", "input_gram", "particles", "ParticleInit", "euler_maruyama", "SDEPath",
           "brownian_increments", "forward_coefficients", "backward_coefficients", "correlate", "psd_sqrt",
           "gia_first_order", "GIAFirstOrder", "covariance_sde", "CovarianceSDE", "drift_coefficient",
           "relu_log_norm", "shaped_slopes", "depth_width_report", "DepthWidthReport", "first_order", "FirstOrder"]

_LAZY = {"train_particles": "training", "TrainParticles": "training", "GrowingCholesky": "training",
         "depth_width_report": "depth_width", "DepthWidthReport": "depth_width", "first_order": "linear_noise",
         "FirstOrder": "linear_noise"}
__getattr__, __dir__ = lazy_attributes(__name__, globals(), exports=_LAZY)
del lazy_attributes
