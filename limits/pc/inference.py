"""Iterative PC inference (the thing the closed forms are checked against; docs/theory/pc.rst §3).

Gradient descent on the activities ``z ← z − β ∇_z F`` (seed 000 §2.1, seed 001 Eq. 2), per-sample
energy (no 1/B), with:

* ``update="simultaneous"`` (all layers from the same state) or ``"sequential"`` (seed 003 Alg. 1:
  layers updated from the output down to the input, each seeing the already-updated layer above);
* ``init="forward"`` (F-ini), ``"zeros"``, ``"random"`` (needs ``rng``) or explicit arrays;
* ``fpa=True``: fixed-prediction assumption — predictions and φ' frozen at the forward pass;
* ``optimizer="adam"``;
* ``batch_mean=True``: descend the 1/B batch-averaged energy (seed 000 Eq. 2), i.e. per-sample step β/B
  (the bound becomes β < 2B/λ_max);
* any activation via ``limits.activation(name)`` (φ on hidden layers; the same routine as linear).

For linear networks the distance to the closed-form ``z*`` is recorded at every step (small gradients
need not mean closeness, seed 001 §3.1) and ``β`` is checked against the stability bound
``β < 2/λ_max(H_z)`` (Lanczos on the matrix-free Hessian); a larger β triggers a warning naming the
bound. Non-convergence and divergence are reported in the result (and warned), never as NaNs.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..results import Result
from .equilibrium import solve_telescoped
from .network import check_data, forward, make_net, phi_pair, predictions, skips_arg
from ..registry import sweep_computation


@dataclass(frozen=True)
class Inference(Result):
    """Result of iterative inference. Traces have one entry per recorded step (step 0 = init).

    ``distance[t]`` = ‖z_t − z*‖ / ‖z*‖ over all free activities (NaN-free: empty when no reference);
    ``grad_norm[t]`` = ‖∇_z F‖ (batch-summed); ``energy[t]`` = F (1/B convention)."""

    z: list
    z_out: np.ndarray | None
    energy: np.ndarray
    grad_norm: np.ndarray
    distance: np.ndarray
    steps: int
    beta: float
    beta_bound: float | None
    converged: bool
    diverged: bool
    message: str
    update: str
    optimizer: str
    fpa: bool


def _grads(net, zs, phi, Y, nudge, decay, fwd=None, only=None):
    """∂F/∂z_k (rows = samples, per-sample energy) for the free layers; ``fwd`` = (μ_fwd, φ'_fwd)
    for the fixed-prediction assumption."""
    L = net.L
    if fwd is None:
        mus = predictions(net, zs, phi)
    else:
        mus = fwd[0]
    eps = [None] + [zs[l] - mus[l - 1] for l in range(1, L + 1)]
    free = list(range(1, L)) + ([L] if nudge is not None else [])
    if only is not None:
        free = [only]
    out = {}
    for k in free:
        g = net.lam[k - 1] * eps[k]
        if k + 1 <= L:
            back = net.a[k] * (eps[k + 1] @ net.W[k])
            if phi is not None:
                back = back * (fwd[1][k] if fwd is not None else phi.dphi(zs[k]))
            g = g - net.lam[k] * back
        for m in range(k + 1, L + 1):
            if net.tau[m - 1] != 0 and net.src[m - 1] == k:
                g = g - net.tau[m - 1] * net.lam[m - 1] * eps[m]
        if decay and k < L:
            g = g + decay * zs[k]
        if nudge is not None and k == L:
            g = g + nudge * (zs[L] - Y)
        out[k] = g
    return out, eps


def lambda_max(weights, multipliers=None, skips=None, layer_weights=None, nudge=None, decay=0.0) -> float:
    """Largest eigenvalue of the linear activity Hessian (Lanczos on the matrix-free product)."""
    from .spectra import extreme_eigenvalues

    return extreme_eigenvalues(weights, multipliers, skips, layer_weights, nudge=nudge, decay=decay,
                               which="max").lambda_max


AUTO_STEPS_CAP = 100_000


def gd_rate(beta, lambda_min, lambda_max) -> float:
    """Contraction factor per step of GD with step ``beta`` on a quadratic with Hessian spectrum in
    [λ_min, λ_max]: ``ρ = max(|1 − β λ_min|, |1 − β λ_max|)`` (< 1 iff 0 < β < 2/λ_max; smallest,
    (κ − 1)/(κ + 1), at β = 2/(λ_min + λ_max))."""
    return float(max(abs(1.0 - beta * lambda_min), abs(1.0 - beta * lambda_max)))


def gd_steps_needed(rho, tol, start=1.0) -> float:
    """Steps for a relative error ``start`` to fall below ``tol`` at contraction ``rho`` (inf if ρ ≥ 1)."""
    if start <= tol:
        return 0.0
    if not rho < 1.0 or tol <= 0:
        return float("inf")
    if rho <= 0.0:
        return 1.0
    return float(np.ceil(np.log(tol / start) / np.log(rho)))


@sweep_computation
def infer(weights, X, Y, beta=0.1, steps=100, multipliers=None, skips=None, layer_weights=None,
          activation=None, init="forward", update="simultaneous", optimizer="gd", fpa=False, nudge=None,
          decay=0.0, tol=1e-10, rng=None, reference=None, record_every=1, adam_betas=(0.9, 0.999),
          adam_eps=1e-8, warn=True, batch_mean=False) -> Inference:
    """Run ``steps`` of activity inference and report energy, gradient norm and distance to ``z*``
    (closed form for linear networks, or ``reference`` = list of arrays). Stops early when the
    relative distance (or, without a reference, the gradient norm) falls below ``tol``.

    Linear networks with ``optimizer="gd"`` also accept ``beta="auto"`` — the optimal fixed step
    ``2/(λ_min + λ_max)`` of H_z, contraction ``(κ − 1)/(κ + 1)`` per step — and ``steps="auto"``:
    the number of steps that contraction needs to reach ``tol`` (capped at 100 000)."""
    from ._threads import blas_threads

    with blas_threads():
        return _infer(weights, X, Y, beta, steps, multipliers, skips, layer_weights, activation, init, update,
                      optimizer, fpa, nudge, decay, tol, rng, reference, record_every, adam_betas, adam_eps, warn,
                      batch_mean)


def _infer(weights, X, Y, beta, steps, multipliers, skips, layer_weights, activation, init, update,
           optimizer, fpa, nudge, decay, tol, rng, reference, record_every, adam_betas, adam_eps, warn,
           batch_mean=False):
    from ..checks import finite_array, nonnegative_float, positive_float, positive_int

    net = make_net(weights, multipliers, skips, layer_weights)
    X, Y = check_data(net, X, Y)
    auto_beta = isinstance(beta, str) and beta == "auto"
    if not auto_beta:
        if isinstance(beta, str):
            raise ValueError(f"beta (activity step size) must be a number > 0 or 'auto', got {beta!r}")
        beta = positive_float(beta, "beta (activity step size)")
    auto_steps = isinstance(steps, str) and steps == "auto"
    if not auto_steps:
        if isinstance(steps, bool) or isinstance(steps, str) or int(steps) != steps or steps < 0:
            raise ValueError(f"steps must be a non-negative integer or 'auto', got {steps!r}")
    if update not in ("simultaneous", "sequential"):
        raise ValueError(f"update must be 'simultaneous' or 'sequential', got {update!r}")
    if optimizer not in ("gd", "adam"):
        raise ValueError(f"optimizer must be 'gd' or 'adam', got {optimizer!r}")
    tol = nonnegative_float(tol, "tol")
    if auto_steps and tol == 0:
        raise ValueError("steps='auto' needs tol > 0 (tol = 0 is never reached)")
    record_every = positive_int(record_every, "record_every")
    if nudge is not None:
        nudge = positive_float(nudge, "nudge (β)")
    decay = nonnegative_float(decay, "decay")
    phi = phi_pair(activation)
    L = net.L
    linear = phi is None
    beta_bound = None
    lmin = lmax = None
    scale = X.shape[0] if batch_mean else 1.0       # gradient of the 1/B batch-averaged energy
    if (auto_beta or auto_steps) and not (linear and optimizer == "gd"):
        raise ValueError("beta='auto' / steps='auto' need a linear network (activation None) and optimizer='gd'; "
                         "pass numbers")
    if linear and optimizer == "gd":
        from .spectra import extreme_eigenvalues

        sp_ = extreme_eigenvalues(net.W, net.a, skips_arg(net), net.lam, nudge=nudge, decay=decay,
                                  which="both" if (auto_beta or auto_steps) else "max")
        lmax = sp_.lambda_max
        lmin = sp_.lambda_min if np.isfinite(sp_.lambda_min) else None
        beta_bound = 2.0 * scale / lmax
        if auto_beta:
            beta = 2.0 * scale / (lmax + lmin)
        if beta >= beta_bound and warn:
            warnings.warn(f"beta = {beta:g} exceeds the GD stability bound 2/λ_max(H_z) = {beta_bound:.6g}; "
                          "inference will diverge", RuntimeWarning, stacklevel=2)
    hs = forward(net, X, phi.phi if phi is not None else None)
    # reference solution
    ref = None
    free = list(range(1, L)) + ([L] if nudge is not None else [])
    if reference is not None:
        ref = [finite_array(r, f"reference[{i}]") for i, r in enumerate(reference)]
        if len(ref) != len(free) or any(r.shape != hs[k].shape for r, k in zip(ref, free)):
            raise ValueError(f"reference must hold {len(free)} arrays of shapes "
                             f"{[hs[k].shape for k in free]} (free layers), got {[r.shape for r in ref]}")
    elif linear and not decay:
        e = solve_telescoped(net, X, Y, nudge)
        ref = list(e.z) + ([e.z_out] if nudge is not None else [])
    # init
    if isinstance(init, str):
        if init == "forward":
            zs = [X] + [hs[l].copy() for l in range(1, L)] + [hs[L].copy() if nudge is not None else Y]
        elif init == "zeros":
            zs = [X] + [np.zeros_like(hs[l]) for l in range(1, L)] + [np.zeros_like(Y) if nudge is not None else Y]
        elif init == "random":
            if rng is None:
                raise ValueError("init='random' needs rng=numpy.random.Generator")
            zs = [X] + [rng.standard_normal(hs[l].shape) for l in range(1, L)] + \
                 [rng.standard_normal(Y.shape) if nudge is not None else Y]
        else:
            raise ValueError(f"init must be 'forward', 'zeros', 'random' or a list of arrays, got {init!r}")
    else:
        init = list(init)
        if len(init) != len(free):
            raise ValueError(f"init must hold {len(free)} arrays (free layers), got {len(init)}")
        init = [finite_array(v, f"init[{i}]").copy() for i, v in enumerate(init)]
        for i, (k, v) in enumerate(zip(free, init)):
            want = hs[k].shape
            if v.shape != want:
                raise ValueError(f"init[{i}] must have shape {want} (B × N_{k}), got {v.shape}")
        zs = [X] + init[:L - 1] + [init[-1] if nudge is not None else Y]
    fwd = None
    if fpa:
        mus = predictions(net, [X] + hs[1:L] + [hs[L]], phi)
        dph = [None] + [phi.dphi(hs[l]) if phi is not None else None for l in range(1, L)] + [None]
        fwd = (mus, dph)
    ref_norm = None if ref is None else np.sqrt(sum(np.sum(r * r) for r in ref))

    def record(zs):
        g, eps = _grads(net, zs, phi, Y, nudge, decay, fwd)
        gn = float(np.sqrt(sum(np.sum(v * v) for v in g.values())))
        B = X.shape[0]
        F = sum(0.5 * net.lam[l - 1] * np.sum(eps[l] ** 2) for l in range(1, L + 1))
        if nudge is not None:
            F += 0.5 * nudge * np.sum((Y - zs[L]) ** 2)
        if decay:
            F += 0.5 * decay * sum(np.sum(zs[l] ** 2) for l in range(1, L))
        d = np.nan
        if ref is not None:
            d = float(np.sqrt(sum(np.sum((zs[k] - r) ** 2) for k, r in zip(free, ref))) / max(ref_norm, 1e-300))
        return F / B, gn, d

    E, GN, D = [], [], []
    F0, g0, d0 = record(zs)
    E.append(F0); GN.append(g0); D.append(d0)
    if auto_steps:
        start = d0 if ref is not None else 1.0
        steps = int(min(AUTO_STEPS_CAP, 1.1 * gd_steps_needed(gd_rate(beta / scale, lmin, lmax), tol, start) + 10))
    m = {k: np.zeros_like(zs[k]) for k in free}
    v = {k: np.zeros_like(zs[k]) for k in free}
    converged = (d0 < tol) if ref is not None else (g0 < tol)
    diverged = False
    t_done = 0
    for t in range(1, int(steps) + 1):
        if converged:
            break
        if update == "simultaneous":
            g, _ = _grads(net, zs, phi, Y, nudge, decay, fwd)
            order = free
        else:
            order = free[::-1]
            g = None
        new = list(zs)
        for k in order:
            gk = g[k] if g is not None else _grads(net, new, phi, Y, nudge, decay, fwd, only=k)[0][k]
            if optimizer == "gd":
                step = (beta / scale) * gk
            else:
                b1, b2 = adam_betas
                m[k] = b1 * m[k] + (1 - b1) * gk
                v[k] = b2 * v[k] + (1 - b2) * gk * gk
                step = beta * (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + adam_eps)
            new[k] = zs[k] - step
        if not all(np.all(np.isfinite(new[k])) for k in free) or \
                max(np.max(np.abs(new[k])) for k in free) > 1e150:
            diverged = True
            break
        zs = new
        t_done = t
        if t % record_every == 0 or t == steps:
            F, gn, d = record(zs)
            if not (np.isfinite(F) and np.isfinite(gn)) or F > 1e12 * (abs(E[0]) + 1.0):
                diverged = True
                break
            E.append(F); GN.append(gn); D.append(d)
            converged = (d < tol) if ref is not None else (gn < tol)
    if diverged:
        msg = f"diverged after {t_done} steps (beta = {beta:g}" + \
              (f", stability bound 2/λ_max = {beta_bound:.4g})" if beta_bound else ")")
    elif converged:
        msg = f"converged in {t_done} steps (tolerance {tol:g})"
    else:
        last = D[-1] if ref is not None else GN[-1]
        what = "relative distance to z*" if ref is not None else "gradient norm"
        msg = f"not converged after {t_done} steps: {what} = {last:.3e} > tol {tol:g}; " + \
            _advice(net, nudge, decay, beta / scale, lmin, lmax, scale, tol, last, optimizer, linear)
    if warn and not converged:
        warnings.warn(f"PC inference {msg}", RuntimeWarning, stacklevel=2)
    hidden = [zs[l] for l in range(1, L)]
    return Inference(hidden, zs[L] if nudge is not None else None, np.array(E), np.array(GN),
                     np.array(D) if ref is not None else np.array([]), t_done, float(beta), beta_bound,
                     bool(converged), bool(diverged), msg, update, optimizer, bool(fpa))


def _advice(net, nudge, decay, b, lmin, lmax, scale, tol, last, optimizer, linear) -> str:
    """What to change when inference has not converged (GD on a linear network: from the spectrum)."""
    if tol == 0:
        return "tol = 0 is never reached in floating point; pass tol > 0"
    if not (linear and optimizer == "gd"):
        return "raise steps (or loosen tol)"
    if lmin is None:
        from .spectra import extreme_eigenvalues

        lmin = extreme_eigenvalues(net.W, net.a, skips_arg(net), net.lam, nudge=nudge, decay=decay,
                                   which="min").lambda_min
    if not (np.isfinite(lmin) and lmin > 0):
        return "H_z is numerically singular (κ ≳ 1e16): GD cannot reach this tol; loosen tol"
    rho = gd_rate(b, lmin, lmax)
    best = 2.0 / (lmin + lmax)
    more = gd_steps_needed(rho, tol, last)
    txt = (f"at beta = {b * scale:g} GD contracts the error by ρ = {rho:.6g} per step (κ(H_z) = {lmax / lmin:.4g}), "
           + (f"so about {more:.3g} more steps are needed: raise steps" if np.isfinite(more) else
              "so it makes no progress in double precision (ρ rounds to 1): raise beta"))
    if b < 0.95 * best:
        rb = gd_rate(best, lmin, lmax)
        txt += (f", or use beta = 2/(λ_min + λ_max) = {best * scale:.6g} (beta='auto'; ρ = {rb:.6g}, "
                f"about {gd_steps_needed(rb, tol, last):.3g} more steps)")
    return txt


def bp_gradients_nonlinear(weights, X, Y, activation, multipliers=None, skips=None):
    """BP gradients of the MSE (1/B)Σ½‖y − f‖² for the nonlinear network of the same energy
    (φ on hidden layers, linear read-in and identity skips)."""
    net = make_net(weights, multipliers, skips)
    X, Y = check_data(net, X, Y)
    phi = phi_pair(activation)
    hs = forward(net, X, phi.phi if phi is not None else None)
    L = net.L
    B = X.shape[0]
    delta = [None] * (L + 1)
    delta[L] = -(Y - hs[L]) / B                      # ∂L/∂h_L
    for k in range(L - 1, 0, -1):
        d = net.a[k] * (delta[k + 1] @ net.W[k])
        if phi is not None:
            d = d * phi.dphi(hs[k])
        for m in range(k + 1, L + 1):
            if net.tau[m - 1] != 0 and net.src[m - 1] == k:
                d = d + net.tau[m - 1] * delta[m]
        delta[k] = d
    grads = []
    for l in range(1, L + 1):
        prev = hs[l - 1] if (phi is None or l == 1) else phi.phi(hs[l - 1])
        grads.append(net.a[l - 1] * delta[l].T @ prev)
    return grads


def pc_gradients_at(weights, X, Y, z, activation=None, multipliers=None, skips=None, layer_weights=None):
    """``∂F/∂W_l = −(λ_l a_l/B) Σ_i ε_{l,i} φ(z_{l−1,i})ᵀ`` at given activities ``z`` (hidden layers),
    e.g. the last step of iterative inference (seed 000 Fig. 4)."""
    from .equilibrium import full_states

    net = make_net(weights, multipliers, skips, layer_weights)
    X, Y = check_data(net, X, Y)
    phi = phi_pair(activation)
    zs = full_states(net, X, Y, z, None, None)
    mus = predictions(net, zs, phi)
    B = X.shape[0]
    out = []
    for l in range(1, net.L + 1):
        eps = zs[l] - mus[l - 1]
        prev = zs[l - 1] if (phi is None or l == 1) else phi.phi(zs[l - 1])
        out.append(-(net.lam[l - 1] * net.a[l - 1] / B) * eps.T @ prev)
    return out
