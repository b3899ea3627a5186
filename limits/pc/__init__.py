"""Predictive coding in closed form (docs/theory/pc.rst): equilibria of linear PC networks via the telescoped
rescaling S, the activity Hessian (sparse, matrix-free, block Cholesky), weight gradients by the
envelope theorem, iterative inference, spectra and conditioning at scale.

    e = limits.pc.equilibrium(weights, X, Y, multipliers=None, skips=None, layer_weights=None)
    e.energy, e.S, e.errors, e.z
    H = limits.pc.activity_hessian(weights, multipliers=None, skips=None)
    r = limits.pc.infer(weights, X, Y, beta="auto", steps="auto")   # GD at 2/(λ_min+λ_max), to tol

Conventions: samples are rows; ε_l := z_l − prediction_l; r := y − f(x); energies use 1/B.
"""
from .network import Net, make_net, forward, output_jacobians, with_dummy_latents
from .equilibrium import (Equilibrium, equilibrium, energy, rescaling, s_theta, s_seed000_eq6,
                          s_seed000_eq25, s_seed000_eq104, S_seed001_eq32, seed003_fixed_point,
                          Seed003FixedPoint, block_equilibrium)
from .telescoped import equilibrium_energy
from .hessian import (activity_hessian, ep_hessian, hessian_operator, BlockCholesky, layout, rhs,
                      nonlinear_activity_hessian)

__all__ = [
    "Net", "make_net", "equilibrium_energy", "forward", "output_jacobians", "with_dummy_latents", "Equilibrium", "equilibrium", "energy",
    "rescaling", "s_theta", "s_seed000_eq6", "s_seed000_eq25", "s_seed000_eq104", "S_seed001_eq32",
    "seed003_fixed_point", "Seed003FixedPoint", "activity_hessian", "ep_hessian", "hessian_operator",
    "BlockCholesky", "layout", "rhs", "block_equilibrium", "nonlinear_activity_hessian",
]
from .gradients import (pc_gradients, bp_gradients, gn_gradients, cosine, layer_cosines, total_cosine,
                        Training, train)

__all__ += ["pc_gradients", "bp_gradients", "gn_gradients", "cosine", "layer_cosines", "total_cosine",
            "Training", "train"]
from .inference import Inference, infer, lambda_max, bp_gradients_nonlinear, pc_gradients_at
from .spectra import (Spectrum, init_weights, extreme_eigenvalues, condition_number, condition_grid,
                      mp_edges, mp_density, semicircle_density, hessian_parts, WEYL_LAMBDA_MAX,
                      WEYL_LAMBDA_MIN, OFFDIAG_EDGE_DEEP)

__all__ += ["Inference", "infer", "lambda_max", "bp_gradients_nonlinear", "pc_gradients_at", "Spectrum",
            "init_weights", "extreme_eigenvalues", "condition_number", "condition_grid", "mp_edges",
            "mp_density", "semicircle_density", "hessian_parts", "WEYL_LAMBDA_MAX", "WEYL_LAMBDA_MIN", "OFFDIAG_EDGE_DEEP"]
