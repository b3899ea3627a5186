"""The DMFT of layer compositions (``limits.serial``: Dense, Conv, AvgPool, GlobalAvgPool, Flatten, Activation,
LayerNorm after a Dense/Conv) in the mean-field / μP parameterisation (docs/theory/dmft.rst §6)::

    d = limits.dmft.solve(X, y, model=limits.serial(...), gamma0=1.0, T=..., dt=..., seed=0)
    d.f (n_t×P), d.f_se, d.loss, d.ntk, d.Phi_pool / d.G_pool (per stage, position-averaged), d.Phi / d.G (spatial)

Modules: :mod:`.chain` (the composition as parametric stages and channel-wise maps; what is refused and why),
:mod:`.spatial` (patch operators on kernels), :mod:`.factor` (causal Gaussian sources), :mod:`.fields` (ψ and its
Jacobians), :mod:`.responses` (response functions by reverse mode), :mod:`.march` / :mod:`.replica` (one pass in
time), :mod:`.cost` (memory and time before allocating), :mod:`.solve` (replicas → means ± standard errors).
"""
from .chain import REFUSED, build_chain
from .cost import estimate
from .solve import solve_serial

__all__ = ["solve_serial", "build_chain", "estimate", "REFUSED"]
