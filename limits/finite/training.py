"""Training loops for finite networks, batched over initialisations (docs/theory/finite.rst §2).

``train(net, X, Y, steps, ...)`` with optimizer
  * "gd"     full-batch gradient descent, ``θ ← θ − η_θ ∂ℓ/∂θ``;
  * "sgd"    minibatch SGD (``batch_size``; minibatches drawn without replacement per epoch,
             the same sequence for every init; from ``rng``/``seed`` the init root is drawn first,
             then the seed of the minibatch-order generator);
  * "online" one sample per step, rows of X in order (pass fresh rows for fresh data);
  * "adam"   full-batch (or minibatch with ``batch_size``) Adam;
  * "flow"   gradient flow dθ/dt = −η_θ ∂ℓ/∂θ by explicit Euler with step ``dt`` (time t = k·dt).
Learning rates are the Network's per-layer ``lr`` times ``lr_scale``. ``loss`` is the MSE
``c Σ ½ (f − y)²`` (c = 1/batch for ``reduction="mean"``, 1 for "sum"). ``center=True`` trains the
centred output ``f − f0`` (f0 = output at init, on every input). ``decoupled`` gives the backward
pass independent weight copies W̃ that receive the same updates (docs/theory/nfd.rst §5).

Records (every ``record_every`` steps and at the end): loss on the full training set, outputs on
X (and ``X_test``), per-representation ``|Δh|_rms`` (rms over samples and units of h(t) − h(0) on
the probe inputs, default X), per-layer ``‖ΔW‖_F`` and ``|ΔW·input|_rms`` (rms of
mult·ΔW·(current layer input) on the probe) — what the exponent checker of docs/theory/params.rst §5 fits.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ._blas import limit_blas, quiet_overflow
from ..checks import finite_array, generator, positive_float, positive_int
from ..results import Result
from .backward import backward, mse_loss
from .forward import check_inputs, forward
from .optim import GD, Adam
from .weights import Weights, init_weights, streams_from_root

OPTIMIZERS = ("gd", "sgd", "online", "adam", "flow")


@dataclass(frozen=True)
class TrainResult(Result):
    """``steps`` (R,) recorded step indices, ``t`` (R,) times (step·lr_scale·dt for flow, else step),
    ``loss`` (R, S), ``f`` (R, S, P, d_out), ``f_test`` (R, S, P_test, d_out) or None,
    ``dh_rms`` (R, S, n_rep) with names ``rep_names``, ``dW_fro``/``dWh_rms`` (R, S, n_layers) with
    ``layer_names``; ``final`` (flat arrays of the final weights, see ``final_weights()``)."""

    steps: np.ndarray
    t: np.ndarray
    loss: np.ndarray
    f: np.ndarray
    f_test: np.ndarray | None
    dh_rms: np.ndarray
    rep_names: tuple
    dW_fro: np.ndarray
    dWh_rms: np.ndarray
    layer_names: tuple
    optimizer: str
    center: bool
    decoupled: tuple
    seconds: float
    final: dict | None
    converged: bool

    def final_weights(self) -> Weights:
        if self.final is None:
            raise ValueError("final weights were not kept (keep_weights=False)")
        W = {k[2:]: v for k, v in self.final.items() if k.startswith("W:")}
        b = {k[2:]: v for k, v in self.final.items() if k.startswith("b:")}
        Wb = {k: self.final.get(f"Wb:{k}", W[k]) for k in W}
        return Weights(W, b, Wb)


def _targets(Y, P, d_out):
    Y = finite_array(Y, "Y")
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape != (P, d_out):
        raise ValueError(f"Y must have shape ({P}, {d_out}), got {Y.shape}")
    return Y


def _measure(net, w, w0, fwd_probe, fwd0_probe):
    reps = fwd_probe.preactivations()
    reps0 = fwd0_probe.preactivations()
    dh = np.stack([np.sqrt(np.mean((reps[k] - reps0[k]) ** 2, axis=(1, 2))) for k in reps], axis=1)
    fro, whr = [], []
    for name, d in net.layers().items():
        dW = w.W[name] - w0.W[name]
        fro.append(np.sqrt(np.einsum("sij,sij->s", dW, dW)))
        dWh = np.matmul(fwd_probe.inp[name], dW.transpose(0, 2, 1)) * d.mult
        whr.append(np.sqrt(np.mean(dWh**2, axis=(1, 2))))
    return dh, np.stack(fro, axis=1), np.stack(whr, axis=1)


def _concat(parts) -> "TrainResult":
    p0 = parts[0]
    cat = lambda name, axis=1: (None if getattr(p0, name) is None
                                else np.concatenate([getattr(p, name) for p in parts], axis=axis))
    final = None
    if p0.final is not None:
        final = {k: np.concatenate([p.final[k] for p in parts], axis=0) for k in p0.final}
    return TrainResult(p0.steps, p0.t, cat("loss"), cat("f"), cat("f_test"), cat("dh_rms"), p0.rep_names,
                       cat("dW_fro"), cat("dWh_rms"), p0.layer_names, p0.optimizer, p0.center, p0.decoupled,
                       float(sum(p.seconds for p in parts)), final, all(p.converged for p in parts))


@limit_blas
@quiet_overflow
def train(net, X, Y, steps, *, weights=None, n_inits=1, rng=None, seed=None, optimizer="gd",
          lr_scale=1.0, batch_size=None, dt=None, betas=(0.9, 0.999), eps=1e-8, center=False,
          reduction="mean", decoupled=False, X_test=None, probe=None, record_every=1,
          record_features=True, keep_weights=True, progress_bar=False, algorithm="bp", tp_beta=1.0,
          tp_mu=0.0, gnt_damping=1.0, gnt_power=1.0, chunk=None, _order_seed=None) -> TrainResult:
    """Train ``net`` on (X, Y); see the module docstring. ``weights`` (a :class:`Weights`, copied)
    or fresh ``init_weights(net, n_inits, rng|seed, decoupled)``. ``algorithm``: "bp" (backprop),
    "tp"/"dtp" (target propagation with ridge-fixed-point linear feedback, :mod:`limits.finite.tp`,
    output step ``tp_beta``, ridge ``tp_mu``; plain MLPs only), "gnt" (Gauss–Newton targets,
    :mod:`limits.finite.gnt`, damping ``gnt_damping``, preconditioner power ``gnt_power`` = e_B). ``chunk``: train the inits in groups of
    this size (memory: all weights of a group are held at once); records are identical to one batch."""
    lr_scale0, batch_size0, dt0 = lr_scale, batch_size, dt
    X = check_inputs(net, X)
    P = X.shape[0]
    Y = _targets(Y, P, net.d_out)
    steps = positive_int(steps, "steps", minimum=0)
    record_every = positive_int(record_every, "record_every")
    if algorithm not in ("bp", "tp", "dtp", "gnt"):
        raise ValueError(f"algorithm must be 'bp', 'tp', 'dtp' or 'gnt', got {algorithm!r}")
    if algorithm == "gnt":
        from .gnt import gnt_gradients

        gnt_damping = positive_float(gnt_damping, "gnt_damping")
        gnt_power = positive_float(gnt_power, "gnt_power", allow_zero=True)
    if algorithm in ("tp", "dtp"):
        from .tp import check_plain, tp_gradients

        check_plain(net)
        tp_beta = positive_float(tp_beta, "tp_beta")
        tp_mu = positive_float(tp_mu, "tp_mu", allow_zero=True)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    lr_scale = positive_float(lr_scale, "lr_scale", allow_zero=True)
    if optimizer == "flow":
        dt = positive_float(1e-3 if dt is None else dt, "dt")
        lr_scale *= dt
    elif dt is not None:
        raise ValueError("dt is only used with optimizer='flow'")
    if optimizer == "sgd" and batch_size is None:
        raise ValueError("batch_size is required for optimizer='sgd'")
    if batch_size is not None:
        batch_size = positive_int(batch_size, "batch_size")
        if batch_size > P:
            raise ValueError(f"batch_size must be <= P = {P}, got {batch_size}")
    if optimizer == "online":
        batch_size = 1
    Xt = None if X_test is None else check_inputs(net, X_test, "X_test")
    Xp = X if probe is None else check_inputs(net, probe, "probe")
    minibatch = optimizer == "sgd" or (optimizer == "adam" and batch_size is not None)
    root = None
    if _order_seed is None and (weights is None or minibatch):
        if rng is None and seed is None:
            raise ValueError("pass rng= or seed= (initialisation and/or minibatch order)")
        g = generator(rng, seed)
        root = int(g.integers(0, 2**63 - 1))
        _order_seed = int(g.integers(0, 2**63 - 1))
    rng_mb = np.random.default_rng(_order_seed) if minibatch else None
    if weights is None:
        n_inits = positive_int(n_inits, "n_inits")
        if chunk is not None and positive_int(chunk, "chunk") < n_inits:
            parts = []
            for a in range(0, n_inits, chunk):
                wk = init_weights(net, streams=streams_from_root(root, range(a, min(a + chunk, n_inits))),
                                  decoupled=decoupled)
                parts.append(train(net, X, Y, steps, weights=wk, optimizer=optimizer, lr_scale=lr_scale0,
                                   batch_size=batch_size0, dt=dt0, betas=betas, eps=eps, center=center,
                                   reduction=reduction, X_test=X_test, probe=probe, record_every=record_every,
                                   record_features=record_features, keep_weights=keep_weights,
                                   progress_bar=progress_bar, algorithm=algorithm, tp_beta=tp_beta,
                                   tp_mu=tp_mu, gnt_damping=gnt_damping, gnt_power=gnt_power,
                                   _order_seed=_order_seed))
            return _concat(parts)
        w = init_weights(net, streams=streams_from_root(root, range(n_inits)), decoupled=decoupled)
    else:
        if not isinstance(weights, Weights):
            raise ValueError("weights must be a limits.finite.Weights")
        if decoupled not in (False, None):
            raise ValueError("decoupled is set by init_weights(..., decoupled=) when weights are passed")
        w = weights.copy()
    w0 = w.copy()
    S = w.n_inits

    lrs = {}
    for name, d in net.layers().items():
        lrs[("W", name)] = d.lr * lr_scale
        lrs[("b", name)] = d.b_lr * lr_scale
    opt = Adam(lrs, betas, eps) if optimizer == "adam" else GD(lrs)

    fwd0 = forward(net, w, X)
    f0 = fwd0.f.copy() if center else None
    f0_test = forward(net, w, Xt).f if (center and Xt is not None) else None
    fwd0_probe = forward(net, w0, Xp) if record_features else None

    rec_steps = sorted(set(range(0, steps + 1, record_every)) | {steps})
    R = len(rec_steps)
    loss_r = np.empty((R, S))
    f_r = np.empty((R, S, P, net.d_out))
    ft_r = None if Xt is None else np.empty((R, S, Xt.shape[0], net.d_out))
    reps = list(fwd0.preactivations())
    names = net.layer_names()
    dh_r = np.zeros((R, S, len(reps)))
    fro_r = np.zeros((R, S, len(names)))
    whr_r = np.zeros((R, S, len(names)))

    order = None
    pos = 0
    it = range(steps + 1)
    if progress_bar:
        from ..progress import progress

        it = progress(it, total=steps + 1, desc=f"train ({optimizer})")
    t0 = time.perf_counter()
    ri = 0
    converged = True
    for k in it:
        if ri < R and rec_steps[ri] == k:
            fwd = fwd0 if k == 0 else forward(net, w, X, check=False)
            fk = fwd.f if f0 is None else fwd.f - f0
            loss_r[ri], _ = mse_loss(fk, Y, reduction)
            f_r[ri] = fk
            if Xt is not None:
                ft = forward(net, w, Xt, check=False).f
                ft_r[ri] = ft if f0_test is None else ft - f0_test
            if record_features:
                fp = forward(net, w, Xp, check=False)
                dh_r[ri], fro_r[ri], whr_r[ri] = _measure(net, w, w0, fp, fwd0_probe)
            if not np.all(np.isfinite(loss_r[ri])):
                converged = False
            ri += 1
        if k == steps or not converged:
            if not converged:
                for arr in (loss_r, f_r, ft_r, dh_r, fro_r, whr_r):
                    if arr is not None:
                        arr[ri:] = np.nan
            break
        # -- one optimisation step ------------------------------------------------------------
        if optimizer == "online":
            idx = np.array([k % P])
        elif batch_size is not None and batch_size < P:
            if order is None or pos + batch_size > P:
                order = rng_mb.permutation(P)
                pos = 0
            idx = np.sort(order[pos:pos + batch_size])
            pos += batch_size
        else:
            idx = None
        Xb, Yb = (X, Y) if idx is None else (X[idx], Y[idx])
        fwd = forward(net, w, Xb, check=False)
        fb = fwd.f if f0 is None else fwd.f - (f0 if idx is None else f0[:, idx])
        _, g = mse_loss(fb, Yb, reduction)
        if algorithm == "bp":
            grads = backward(net, w, fwd, g)
        elif algorithm == "gnt":
            grads = gnt_gradients(net, w, fwd, g, gnt_damping, gnt_power)
        else:
            grads = tp_gradients(net, w, fwd, g, tp_beta, tp_mu, algorithm,
                                 c=1.0 / Xb.shape[0] if reduction == "mean" else 1.0)
        gd = {("W", n): v for n, v in grads.dW.items()}
        gd.update({("b", n): v for n, v in grads.db.items()})
        upd = opt.update(gd)
        for (kind, name), dv in upd.items():
            if kind == "W":
                w.W[name] += dv
                if w.Wb.get(name) is not None and w.Wb[name] is not w.W[name]:
                    w.Wb[name] += dv
            else:
                w.b[name] += dv
    secs = time.perf_counter() - t0
    steps_arr = np.asarray(rec_steps, dtype=np.int64)
    tt = steps_arr * (dt if optimizer == "flow" else 1.0) if optimizer == "flow" else steps_arr.astype(float)
    return TrainResult(steps_arr, tt.astype(float), loss_r, f_r, ft_r, dh_r, tuple(reps), fro_r, whr_r,
                       tuple(names), optimizer, bool(center), w.decoupled, secs,
                       w.arrays() if keep_weights else None, converged)
