"""Finite-network simulators that every theory result is checked against (docs/theory/finite.rst).

Plain numpy, float64, batched over S independent initialisations (leading axis = init index),
hand-written backward passes verified against finite differences.

Quick start::

    import numpy as np, limits, limits.finite as F
    X = F.data.sphere_inputs(4, 10, seed=0)
    net = F.resnet(10, 500, 50, activation="erf", sigma_w2=1.2, sigma_b2=0.2, rho=50 ** -0.5)
    ek = F.empirical_kernels(net, X, 1000, seed=1)          # ek.mean[l] ± ek.se[l], l = 0..50
    p = limits.params.named("MF", convention="variance", algorithm="bp")
    net = F.concretise(p, N=256, L=5, d_in=40, eta0=0.025)  # seed 000 mean-field MLP
    X, Y = F.data.toy_task(seed=0)
    r = F.train(net, X, Y, 200, n_inits=8, seed=0)          # r.loss (R, 8), r.dh_rms, …

Describe a network
------------------
``Network(readin, blocks, readout, activation, out_scale, post_activation, readin_phi, readout_phi)``
with ``Dense(fan_in, fan_out, mult, std, lr, bias, bias_std, bias_lr, bias_mult)`` layers
(``u = mult · W · input + bias_mult · b``, ``W_ij ~ N(0, std²)``, learning rate ``lr`` on W) and
``Block(layers=(Dense, ...), residual=True|False, branch=β)``::

    pre-activation (default):   h⁰ = m W_in x + b;   h^l = [h^{l−1}] + β F(h^{l−1});
                                F: u_1 = m_1 W_1 φ(h) + b_1, u_k = m_k W_k φ(u_{k−1}) + b_k
                                f = out_scale · (m W_out φ(h^B) + b)
    post_activation=True:       x^l = φ([x^{l−1}] + β F(x^{l−1})),  u_1 = m_1 W_1 x + b_1 (docs/theory/nfd.rst §1)

One-layer, two-layer (``block_layers=2``) and n-skip residual blocks; plain (MLP) blocks with
``residual=False``; branch multiplier β = ρ, √(T/L), L^{-α} — any number.
Builders: ``mlp(d_in, width, blocks, d_out, activation, sigma_w2, sigma_b2, ...)`` and
``resnet(..., rho=, block_layers=, post_activation=)`` use docs/theory/kernels.rst conventions
(W ~ N(0, σ_w²/fan_in), biases N(0, σ_b²); ``parameterisation="ntk"``: W = σ_w w/√fan_in,
b = σ_b β with w, β ~ N(0, 1) trained — the convention of ``limits.kernels.nngp``'s Θ). ``blocks`` counts hidden N×N blocks: seed 004 / nfd L → blocks = L; seed 000 depth L
(weight layers) → L − 2; DMFT depth L (hidden layers) → L − 1.
``net.layer_names()`` → ['in', '1.1', …, 'B.k', 'out']; ``net.describe()`` prints the numbers;
``net.with_lr(scale, **{'in': 0.0})`` rescales / freezes learning rates.

From a parameterisation (the ONE place exponents become numbers)
----------------------------------------------------------------
``concretise(p, N, L, d_in=, d_out=1, activation=, eta0=, gamma0=, sigma=, residual=, alpha=,
branch=, blocks=, block_layers=, bias=, lr_depth=, subs=)`` → Network. ``p`` from
``limits.params`` (``p.convention``, ``p.exponent(layer, symbol)``) or a dict
``{"convention": "variance", "input": {"a":0,"b":0,"c":0}, "hidden": {...}, "output": {...},
"d": 0.5, "alpha": 0.5}``. Variance convention: mult N^{-a} (input also 1/√d_in), std σ N^{-b/2},
lr η0 γ² N^{-c}, out_scale 1/γ, γ = γ0 N^d. Std convention: std σ N^{-b}, lr η0 N^{-c}.

Weights and forward pass
------------------------
``w = init_weights(net, n_inits, rng=|seed=, decoupled=False|True|"hidden"|[names])`` →
``Weights`` with ``w.W[name]`` (S, out, in), ``w.b[name]`` (S, out), ``w.Wb[name]`` the weight the
backward pass uses (an independent copy W̃ that receives the same updates when decoupled,
docs/theory/nfd.rst §5). Init s draws from its own stream (``init_streams``), so results never depend on chunking.
``fwd = forward(net, w, X)`` (X is P × d_in, samples are rows): ``fwd.h[l]`` (S, P, N) stream states
l = 0..B, ``fwd.pre[name]``/``fwd.inp[name]`` each layer's output/input, ``fwd.z`` (post-act pre-φ),
``fwd.f`` (S, P, d_out); ``fwd.preactivations()`` → {'h0', …, 'u1.1', …}.

Empirical kernels (Monte Carlo over inits)
------------------------------------------
``ek = empirical_kernels(net, X, n_inits, rng=|seed=, method="auto"|"conditional"|"dense",
chunk=None, memory_mb=512, keep_samples=True, phi_kernels=False, n_jobs=None)`` → ``EmpiricalKernels``:
``ek.K`` (S, B+1, P, P) per-init Grams ``h^l h^lᵀ/N``, ``ek.K_out`` (S, P, P) = ``f fᵀ/d_out``,
``ek.mean``/``ek.se`` (B+1, P, P), ``ek.out_mean``/``ek.out_se`` (the SEs are None for one init), ``ek.K_phi`` (``φ(h)φ(h)ᵀ/N``),
``ek.seconds``, ``ek.gflops``, ``ek.overflow`` (inf/NaN, with a RuntimeWarning). "conditional" samples each layer's output exactly from its
Gaussian law given the layer input (each weight is used once at init), O(P²N) per layer;
"dense" draws full weight matrices; "auto" (default) runs the cheaper one by an explicit cost model
(``sampler_costs(net, P, n_inits)``, ``choose_method``; same distribution either way, ``ek.method`` says which). ``kernels_of(fwd)`` gives the Grams of an explicit forward.

Gradients and training
----------------------
``loss, g = mse_loss(f, Y, reduction="mean"|"sum")`` (ℓ = c Σ ½(f − y)², c = 1/P or 1);
``grads = backward(net, w, fwd, g)`` → ``grads.dW[name]``, ``grads.db[name]``,
``grads.dh[l]`` (∂ℓ/∂h^l), ``grads.dpre[name]``; ``loss_and_grads(net, w, X, Y, f0=)``.
``train(net, X, Y, steps, ...)`` (see :mod:`limits.finite.training`): optimizers "gd", "sgd"
(minibatch), "online" (one sample per step), "adam", "flow" (gradient flow, small Euler steps),
per-layer learning rates from the Network, ``center=True`` (train f − f0), ``decoupled=``,
``chunk=`` (train inits in groups; identical records), ``algorithm="bp"|"tp"|"dtp"|"gnt"``.
``TrainResult``: ``steps``, ``t``, ``loss`` (R, S), ``f`` (R, S, P, d_out), ``f_test``,
``dh_rms`` (R, S, n_rep; names ``rep_names`` = 'h0'…'hB', 'u1.1'…), ``dW_fro``/``dWh_rms``
(R, S, n_layers; ``layer_names``), ``converged`` (False if the loss became inf/NaN),
``final_weights()``. Optimisers ``GD(lrs)``, ``Adam(lrs, betas, eps)`` work on any dict of arrays.
:mod:`limits.finite.compare`: ``update_directions`` (BP/GNT/TP/DTP descent directions) and
``cosines`` (per layer and overall).

Empirical NTK
-------------
``empirical_ntk(net, w, X, output=0, lr_weighted=False, per_layer=False)`` → (S, P, P) from one
backward pass (per layer ``m² (g gᵀ)∘(a aᵀ) + m_b² g gᵀ``).
``conditional_ntk(net, X, n_inits, seed=…)`` draws the same random kernel for fresh initialisations
without weight matrices (W is sampled only on the span of the forward inputs and backward signals,
exact in distribution; O(N·P²) per layer instead of O(N²·P)) — what ``limits.check`` uses.

Target propagation
------------------
``train(..., algorithm="tp"|"dtp", tp_beta=β, tp_mu=μ)`` (plain MLPs): linear feedback at the ridge
fixed point ``Q* = A_{k−1}ᵀ(A_kA_kᵀ + μI)⁻¹A_k`` (seed 003 Eq. S.120, applied by a solve),
output target ``f − β∂ℓ/∂f``, DTP/TP target propagation, local-loss updates; read-out by BP.
:mod:`limits.finite.tp`: ``targets``, ``tp_gradients``, ``feedback_apply``, ``ridge_feedback``.

Gauss–Newton targets
--------------------
``train(..., algorithm="gnt", gnt_damping=ρ, gnt_power=e_B)``: per-layer signal
``J(JᵀJ + ρI)^{-e_B} ∂ℓ/∂f`` with J = ∂f/∂u_l (seed 003 Prop. 3.3; e_B = 0 is BP);
:func:`limits.finite.gnt.gnt_gradients`.

Compositions of layers
----------------------
:mod:`limits.finite.serial`: ``limits.serial(...).finite(N)`` → ``SerialNetwork`` (every Dense/Conv/Attention
at width N, NTK parameterisation); ``net.kernels(X, n_inits, seed=)`` → per-init NNGP observable and exact
parameter-gradient NTK (hand-written backward per layer, in :mod:`limits.layers`).

Randomness and BLAS
-------------------
Init s, layer j draws from a PCG64 substream (``weights.Streams``; ``init_streams(n, seed=)``,
``root_seed``), so every result is reproducible from ``seed`` and independent of chunking.
Heavy loops run with ``$LIMITS_BLAS_THREADS`` (default 1) OpenBLAS threads (``_blas.blas_threads``):
multi-threaded BLAS is 10–100× slower for these small batched products on a shared machine.

Data
----
:mod:`limits.finite.data`: ``gaussian_inputs``, ``sphere_inputs``, ``toy_task`` (seed 000 §A.8:
P = 20, D = 40, x ~ N(0, I), y = ±1), ``angle_inputs`` (seed 004 Fig. 6), ``load_arrays`` (.npy/.npz,
allow_pickle=False).
"""
from __future__ import annotations

from .backward import Grads, backward, loss_and_grads, mse_loss
from .concretise import concretise
from .empirical import EmpiricalKernels, choose_method, empirical_kernels, kernels_of, sampler_costs
from .forward import Forward, forward, output
from .network import Block, Dense, Network, mlp, resnet
from .ntk import conditional_ntk, empirical_ntk
from .optim import GD, Adam
from .training import TrainResult, train
from . import data
from .weights import Streams, Weights, init_streams, init_weights, root_seed

__all__ = [
    "Block", "Dense", "Network", "mlp", "resnet", "concretise",
    "Weights", "Streams", "init_weights", "init_streams", "root_seed",
    "Forward", "forward", "output",
    "EmpiricalKernels", "empirical_kernels", "kernels_of", "sampler_costs", "choose_method",
    "Grads", "backward", "mse_loss", "loss_and_grads",
    "GD", "Adam", "TrainResult", "train", "empirical_ntk", "conditional_ntk",
]

