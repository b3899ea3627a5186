"""Weight gradients of the equilibrated energy F* (envelope theorem), of the MSE loss (BP) and
per-layer Gauss–Newton directions; cosine similarities; training on F* or the MSE.

* PC (envelope theorem, docs/theory/pc.rst §2): ``∂F*/∂W_l = −(λ_l a_l / B) Σ_i ε*_{l,i} z*_{l−1,i}ᵀ``.
* BP on ``L = (1/B) Σ_i ½‖y_i − f(x_i)‖²``: ``∂L/∂W_l = −(a_l / B) Σ_i (G_lᵀ r_i) h_{l−1,i}ᵀ``.
* Gauss–Newton target (seed 003 Prop. 3.3, GNT): ``g_l = G_lᵀ (G_l G_lᵀ + ρ I)⁻¹ r`` replacing the
  BP error ``G_lᵀ r``; ρ → 0 gives the minimum-norm target ``G_l⁺ r``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..results import Result
from .equilibrium import solve_telescoped
from .network import check_data, forward, make_net, output_jacobians


def _prep(weights, X, Y, multipliers, skips, layer_weights, biases):
    net = make_net(weights, multipliers, skips, layer_weights, biases)
    X, Y = check_data(net, X, Y)
    return net, X, Y


def pc_gradients(weights, X, Y, multipliers=None, skips=None, layer_weights=None, biases=None, nudge=None):
    """``∂F*/∂W_l`` for l = 1..L (list of arrays shaped like the weights), envelope theorem."""
    net, X, Y = _prep(weights, X, Y, multipliers, skips, layer_weights, biases)
    e = solve_telescoped(net, X, Y, nudge)
    zs = [X] + list(e.z)
    B = X.shape[0]
    return [-(net.lam[l - 1] * net.a[l - 1] / B) * (e.errors[l - 1].T @ zs[l - 1]) for l in range(1, net.L + 1)]


def bp_gradients(weights, X, Y, multipliers=None, skips=None, biases=None):
    """``∂L/∂W_l`` of the MSE ``L = (1/B) Σ ½‖r_i‖²`` (backpropagation through the linear network)."""
    net, X, Y = _prep(weights, X, Y, multipliers, skips, None, biases)
    hs = forward(net, X)
    R = Y - hs[-1]
    G = output_jacobians(net)
    B = X.shape[0]
    return [-(net.a[l - 1] / B) * ((R @ G[l]).T @ hs[l - 1]) for l in range(1, net.L + 1)]


def gn_gradients(weights, X, Y, multipliers=None, skips=None, biases=None, damping=1e-8):
    """Per-layer Gauss–Newton-target directions ``−(a_l/B) Σ_i g_{l,i} h_{l−1,i}ᵀ`` with
    ``g_l = G_lᵀ (G_l G_lᵀ + ρ I)⁻¹ r`` (seed 003 Prop. 3.3, GNT with damping ρ)."""
    net, X, Y = _prep(weights, X, Y, multipliers, skips, None, biases)
    if not (np.isfinite(damping) and damping >= 0):
        raise ValueError(f"damping must be >= 0, got {damping}")
    hs = forward(net, X)
    R = Y - hs[-1]
    G = output_jacobians(net)
    B = X.shape[0]
    out = []
    for l in range(1, net.L + 1):
        K = G[l] @ G[l].T + damping * np.eye(net.d_out)
        U = sla.solve(K, R.T, assume_a="pos").T
        out.append(-(net.a[l - 1] / B) * ((U @ G[l]).T @ hs[l - 1]))
    return out


def cosine(a, b) -> float:
    """Cosine similarity of two arrays (flattened); NaN-free: 1.0 if both vanish."""
    a, b = np.ravel(a), np.ravel(b)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(a @ b / (na * nb))


def layer_cosines(g1, g2) -> np.ndarray:
    """Per-layer cosine similarities of two gradient lists."""
    return np.array([cosine(a, b) for a, b in zip(g1, g2)])


def total_cosine(g1, g2) -> float:
    return cosine(np.concatenate([np.ravel(a) for a in g1]), np.concatenate([np.ravel(b) for b in g2]))


# ----------------------------------------------------------------------------- training
@dataclass(frozen=True)
class Training(Result):
    """History of training a linear network on F* ("pc") or the MSE ("bp").

    Per step t (before the update): ``mse[t]``, ``energy[t]`` (F*), ``s[t]`` (λ_max of S; s(θ) for
    scalar output), ``cos[t, l]`` = cos(∂F*/∂W_l, ∂L/∂W_l), ``cos_total[t]``."""

    objective: str
    optimizer: str
    lr: float
    steps: int
    mse: np.ndarray
    energy: np.ndarray
    s: np.ndarray
    cos: np.ndarray
    cos_total: np.ndarray
    weights: list
    converged: bool


def train(weights, X, Y, objective="pc", optimizer="gd", lr=0.01, steps=100, multipliers=None, skips=None,
          layer_weights=None, adam_betas=(0.9, 0.999), adam_eps=1e-8, record_every=1) -> Training:
    """Train the raw weights by GD, Adam, or gradient flow (``optimizer="flow"``: RK45 with ``lr`` as the
    time unit of one step) on F*
    (``objective="pc"``, PC with equilibrated activities) or the MSE (``"bp"``), recording MSE, F*,
    s(θ) and PC–BP cosines. Raises ``ValueError`` if the loss becomes non-finite (divergence)."""
    from ._threads import blas_threads

    with blas_threads(), np.errstate(over="ignore", invalid="ignore"):   # divergence is detected explicitly
        return _train(weights, X, Y, objective, optimizer, lr, steps, multipliers, skips, layer_weights,
                      adam_betas, adam_eps, record_every)


def _train(weights, X, Y, objective, optimizer, lr, steps, multipliers, skips, layer_weights, adam_betas,
           adam_eps, record_every):
    if objective not in ("pc", "bp"):
        raise ValueError(f"objective must be 'pc' or 'bp', got {objective!r}")
    if optimizer not in ("gd", "adam", "flow"):
        raise ValueError(f"optimizer must be 'gd', 'adam' or 'flow', got {optimizer!r}")
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be > 0, got {lr}")
    from ..checks import positive_int

    steps = positive_int(steps, "steps", minimum=0)
    record_every = positive_int(record_every, "record_every")
    net, X, Y = _prep(weights, X, Y, multipliers, skips, layer_weights, None)
    if optimizer == "flow":
        return _train_flow(net, X, Y, objective, lr, steps, multipliers, skips, layer_weights, record_every)
    W = [w.copy() for w in net.W]
    m = [np.zeros_like(w) for w in W]
    v = [np.zeros_like(w) for w in W]
    rec = {"mse": [], "energy": [], "s": [], "cos": [], "cos_total": []}
    B = X.shape[0]
    for t in range(steps + 1):
        cur = make_net(W, multipliers, skips, layer_weights)
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                e = solve_telescoped(cur, X, Y, None)
        except ValueError as exc:                       # overflow / S not positive definite
            raise ValueError(f"training diverged at step {t} (lr = {lr} too large?): {exc}") from None
        zs = [X] + list(e.z)
        hs = [X] + list(e.forward)
        G = output_jacobians(cur)
        gp = [-(cur.lam[l - 1] * cur.a[l - 1] / B) * (e.errors[l - 1].T @ zs[l - 1]) for l in range(1, cur.L + 1)]
        gb = [-(cur.a[l - 1] / B) * ((e.residual @ G[l]).T @ hs[l - 1]) for l in range(1, cur.L + 1)]
        if t % record_every == 0 or t == steps:
            rec["mse"].append(e.mse)
            rec["energy"].append(e.energy)
            rec["s"].append(float(np.linalg.eigvalsh(e.S)[-1]))
            rec["cos"].append(layer_cosines(gp, gb))
            rec["cos_total"].append(total_cosine(gp, gb))
        if t == steps:
            break
        g = gp if objective == "pc" else gb
        if optimizer == "gd":
            W = [w - lr * gi for w, gi in zip(W, g)]
        else:
            b1, b2 = adam_betas
            for i in range(len(W)):
                m[i] = b1 * m[i] + (1 - b1) * g[i]
                v[i] = b2 * v[i] + (1 - b2) * g[i] ** 2
                mh = m[i] / (1 - b1 ** (t + 1))
                vh = v[i] / (1 - b2 ** (t + 1))
                W[i] = W[i] - lr * mh / (np.sqrt(vh) + adam_eps)
        if not all(np.all(np.isfinite(w)) for w in W):
            raise ValueError(f"training diverged at step {t} (non-finite weights; lr = {lr} too large?)")
    return Training(objective, optimizer, float(lr), int(steps), np.array(rec["mse"]), np.array(rec["energy"]),
                    np.array(rec["s"]), np.array(rec["cos"]), np.array(rec["cos_total"]), W, True)


FLOW_MAX_NFEV = 20_000


class _FlowTooLong(Exception):
    """Internal: the adaptive gradient-flow integration exceeded FLOW_MAX_NFEV evaluations."""


def _train_flow(net, X, Y, objective, dt, steps, multipliers, skips, layer_weights, record_every):
    """Gradient flow dW/dt = −∇ (F* or MSE) integrated by adaptive RK45 (rtol 1e-9) to T = steps·dt,
    recorded every ``record_every·dt`` (the GD run with lr = dt is its Euler discretisation)."""
    from scipy.integrate import solve_ivp

    shapes = [w.shape for w in net.W]
    sizes = [int(np.prod(sh)) for sh in shapes]

    def unflat(v):
        return [c.reshape(sh) for c, sh in zip(np.split(v, np.cumsum(sizes)[:-1]), shapes)]

    nfev = [0]

    def rhs(t, v):
        nfev[0] += 1
        if nfev[0] > FLOW_MAX_NFEV:
            raise _FlowTooLong
        W = unflat(v)
        g = pc_gradients(W, X, Y, multipliers, skips, layer_weights) if objective == "pc" else \
            bp_gradients(W, X, Y, multipliers, skips)
        return -np.concatenate([x.ravel() for x in g])

    ts = np.arange(0, steps + 1, record_every) * dt
    if ts[-1] < steps * dt:
        ts = np.append(ts, steps * dt)
    try:
        sol = solve_ivp(rhs, (0.0, steps * dt), np.concatenate([w.ravel() for w in net.W]), t_eval=ts,
                        rtol=1e-9, atol=1e-12, method="RK45")
    except _FlowTooLong:
        raise ValueError(f"gradient flow to T = steps·lr = {steps * dt:g} needs more than {FLOW_MAX_NFEV} gradient "
                         "evaluations (the flow is stiff at this time scale); reduce lr or steps") from None
    if not sol.success:
        raise ValueError(f"gradient-flow integration failed: {sol.message}")
    rec = {"mse": [], "energy": [], "s": [], "cos": [], "cos_total": []}
    for k in range(sol.y.shape[1]):
        W = unflat(sol.y[:, k])
        e = solve_telescoped(make_net(W, multipliers, skips, layer_weights), X, Y, None)
        gp = pc_gradients(W, X, Y, multipliers, skips, layer_weights)
        gb = bp_gradients(W, X, Y, multipliers, skips)
        rec["mse"].append(e.mse); rec["energy"].append(e.energy)
        rec["s"].append(float(np.linalg.eigvalsh(e.S)[-1]))
        rec["cos"].append(layer_cosines(gp, gb)); rec["cos_total"].append(total_cosine(gp, gb))
    return Training(objective, "flow", float(dt), int(steps), np.array(rec["mse"]), np.array(rec["energy"]),
                    np.array(rec["s"]), np.array(rec["cos"]), np.array(rec["cos_total"]), unflat(sol.y[:, -1]),
                    bool(sol.success))
