"""Finite compositions in the mean-field (μP) parameterisation of the DMFT, trained by full-batch GD — what
``limits.check`` compares the DMFT of a composition with (docs/theory/dmft.rst §6).

Per trained tensor the multipliers, initial scales and learning-rate exponents of the MF table in the std convention
(``limits.params.layer_table(comp, "MF", convention="std")``, applied as :func:`limits.finite.serial_coordcheck
.tensor_factors`: read-in and hidden layers keep their NTK scale σ_w/√fan_in, the read-out gets N^{-1/2}, every
weight and bias a learning rate ∝ N), and the DMFT's γ0 and step dt::

    f = (read-out) / γ0,   θ ← θ − dt·γ0²·N·∂ℓ/∂θ  (every raw weight),   ℓ = ½ Σ_μ (f_μ − f_μ(θ₀) − y_μ)²

— outputs centred at their initial value (the DMFT starts at f = 0; centring leaves the N → ∞ limit unchanged), all
weights N(0, 1). Recorded per init: the centred outputs at every step (training and test inputs) and, at the
requested steps, the feature kernel of every hidden stage — the input of each Dense/Conv after the first, averaged
over position pairs: Φ̄_{μν} = (1/N) ⟨mean_i x_{μ,i}, mean_j x_{ν,j}⟩ (after Flatten the positions are recovered from
the width). Cost per init and step: the forward and backward pass, O(P·N²·|F|·S) per hidden conv layer.
"""
from __future__ import annotations

import numpy as np

from ..checks import positive_float, positive_int
from ._blas import limit_blas
from .serial import leaves
from .serial_coordcheck import forward_recording, map_weights, sgd_step, factor_tree, tensor_factors

CHUNK_BYTES = 256 * 2**20       # weights of the inits trained together stay below this


def meanfield_factors(table, width, gamma0):
    """Per tensor (init factor, forward multiplier, learning-rate factor) of the MF table at width N, the read-out's
    multiplier divided by γ0 (module docstring)."""
    fac = tensor_factors(table, width)
    out = {}
    for r in table.rows:
        i, m, lr = fac[(r.layer, r.tensor)]
        if r.role == "output":
            m = m / gamma0
        out[(r.layer, r.tensor)] = (i, m, lr)
    return out


def _pooled_gram(x, N):
    """Φ̄ (S, P, P) of a stage's output x: (S, P, *spatial, N) or flattened (S, P, S_x·N)."""
    S, P = x.shape[:2]
    v = x.reshape(S, P, -1, N).mean(axis=2)
    return np.einsum("spc,sqc->spq", v, v) / N


def _param_bytes(comp, in_shape, width):
    plan = comp.plan(tuple(in_shape), width, 1)
    total = 0
    for l, sin, _, n in plan:
        if l.parametric:
            total += sum(int(np.prod(s)) for s in l.param_shapes(sin, n).values())
    return 8.0 * total


@limit_blas
def train_meanfield(comp, width, X, y, steps, dt, gamma0, n_inits, seed=0, X_test=None, kernel_steps=()):
    """``steps`` GD steps of ``comp`` at width N in the mean-field parameterisation (module docstring) for ``n_inits``
    initialisations (init s from its own stream, ``SeedSequence(seed).spawn``). Returns a dict: ``f`` (steps+1, S, P)
    and ``f_test`` (steps+1, S, P_test) centred outputs, ``Phi`` (len(kernel_steps), n_stages, S, P, P) the pooled
    feature kernels on the training inputs."""
    from ..params import layer_table
    from .serial import SerialNetwork

    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64).reshape(-1)
    width, steps = positive_int(width, "width"), positive_int(steps, "steps", minimum=0)
    dt, gamma0 = positive_float(dt, "dt"), positive_float(gamma0, "gamma0")
    table = layer_table(comp, "MF", convention="std")
    fac = meanfield_factors(table, width, gamma0)
    init, mult, lr = (factor_tree(comp, fac, k) for k in range(3))
    P = X.shape[0]
    Xa = X if X_test is None else np.concatenate([X, np.asarray(X_test, dtype=np.float64)])
    kernel_steps = sorted(set(int(k) for k in kernel_steps))
    per = _param_bytes(comp, X.shape[1:], width)
    chunk = int(max(1, min(n_inits, CHUNK_BYTES // max(per, 1.0))))
    gens = [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(n_inits)]
    net = SerialNetwork(comp, width, 1)
    fs, Phis = [], []
    for c0 in range(0, n_inits, chunk):
        w = net.init_weights(X.shape[1:], None, streams=gens[c0:c0 + chunk])
        w = map_weights(w, init, lambda v, f: v * f)
        f, Phi = _train_chunk(comp, w, mult, lr, Xa, y, P, steps, dt * gamma0 ** 2, width, kernel_steps)
        fs.append(f)
        Phis.append(Phi)
    f = np.concatenate(fs, axis=1)
    out = {"f": f[:, :, :P], "f_test": f[:, :, P:] if X_test is not None else None}
    out["Phi"] = np.concatenate(Phis, axis=2) if kernel_steps else None
    return out


def _train_chunk(comp, w, mult, lr, Xa, y, P, steps, eta, N, kernel_steps):
    """Centred outputs (steps+1, S, P_all) and pooled kernels (len(kernel_steps), stages, S, P, P) of one chunk."""
    S = next(leaves(w)).shape[0]
    x = np.ascontiguousarray(np.broadcast_to(Xa[None], (S,) + Xa.shape))
    f_rec, K_rec, f0 = [], [], None
    for k in range(steps + 1):
        eff = map_weights(w, mult, lambda v, m: v * m)
        ins = {}
        f, caches, _ = forward_recording(comp, eff, x, ins)
        f = f[..., 0]
        f0 = f.copy() if f0 is None else f0
        f_rec.append(f - f0)
        if k in kernel_steps:
            paths = sorted(ins, key=lambda p: int(p.split(".")[0]))[1:]
            K_rec.append(np.stack([_pooled_gram(ins[p][1][:, :P], N) for p in paths]))
        if k == steps:
            break
        gy = np.zeros(f.shape + (1,))
        gy[:, :P, 0] = f[:, :P] - f0[:, :P] - y[None]
        _, g = comp.vjp(eff, caches, gy)
        g = map_weights(g, mult, lambda v, m: v * m)
        sgd_step(w, g, lr, eta)
    return np.stack(f_rec), (np.stack(K_rec) if K_rec else None)
