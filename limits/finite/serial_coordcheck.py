"""A composition (``limits.serial``) trained in any width parameterisation, and its per-layer coordinate check.

Parameterisation (TP4's abc form, std convention, per trained tensor): W = N^{-a} w, w ~ N(0, N^{-2b}),
SGD learning rate η N^{-c}, with (a, b, c) from a per-tensor table (``limits.params.layer_table``; duck-typed —
this module does not import the theory package: the table's rows give ``layer``, ``tensor``, ``role`` and
``std`` = (a, b, c)). The layers of a composition already scale a weight by σ_w/√fan_in (the NTK parameterisation,
:mod:`limits.finite.serial`), i.e. carry a_base = ½ when the fan-in grows with N (hidden, output) and 0 otherwise
(read-in weights, biases), b_base = c_base = 0; each tensor therefore gets

    forward multiplier N^{-(a − a_base)},   init factor N^{-b},   learning-rate factor N^{-c}

on top of its layer's own scale (factors of exactly 1 are not applied: NTK trains bit-identically to
:meth:`limits.finite.serial.SerialNetwork.train_gd`).

Coordinate check (:func:`width_check`): at widths N = 2^k, ``seeds`` initialisations take ``steps`` full-batch SGD
steps on ℓ = (1/P) Σ ½‖f − y‖²; per top-level Dense/Conv/Residual output (``"dh:<i>"``, before the read-out) the
rms change |Δh|_rms over inputs, positions and channels, their mean over the hidden ones (``"dh:hidden"``), the
output change |Δf|_rms (``"df"``) and, per Dense/Conv layer (residual branches included, ``"dWh:<path>"``), the rms
of its own update contribution — the layer with effective weights W_t − W_0 and no bias applied to its input at
step t, x_t ΔW (Dense) or x_t ⋆ ΔW (Conv) — are fitted log–log against N (:func:`limits.stats.loglog_fit` through
:mod:`limits.finite.coordcheck`, weighted by the SE over seeds, verdict on the fit over the 4 largest widths: the
prediction must lie in its 95% CI) and compared with the table's one-step exponents (``table.predicted``: μP every
Δh and every own contribution Θ(1); SP Δh of hidden layers ∝ N^{1/2}, Δf ∝ N, own contributions of the read-in,
hidden layers and read-out ∝ N^{-1/2}, N^{1/2}, N). A layer whose learning rate is too small leaves its Δh at
Θ(1) (inherited from the layers before it); only its own contribution shows it.

Calibration at the defaults (8 seeds, 2 steps, η0 = 1e-3, P = 8; widths 32–512, CNN 16–256), independent checks
(``nice python benchmarks/serial_coordcheck_calibration.py --checks 100 --power-checks 30``, then ``--resolution 20
--mild 30`` and ``--mild 30 --mild-exponent -0.25``; ``benchmarks/results/calibration/serial_coordcheck.json``,
about 7 CPU-min in all)::

                                         MLP (tanh)       CNN (Conv/relu, GAP)   MLP + LayerNorm
    false alarms, μP vs μP               0/100            2/100 (2 ± 1.4 %)      0/100
    power, SP vs μP's predictions        30/30            30/30                  30/30
    power, one hidden layer lr × N       30/30            30/30                  30/30
    power, one hidden layer lr × N^-1    30/30            30/30                  30/30     (each only through dWh)
    power, one hidden layer lr × N^¼     30/30            25/30 (83 ± 7 %)       30/30
    power, one hidden layer lr × N^-¼    29/30 (97 ± 3 %) 27/30 (90 ± 5 %)       30/30
    median 95 % CI half-width (Δh, Δf)   0.11–0.14        0.09–0.22              0.10–0.13
    median 95 % CI half-width (dWh)      0.11–0.19        0.09–0.23              0.10–0.12

The verdict is conservative (2 false alarms in 300 checks, both the CNN read-out's own contribution ``dWh:5``,
whose fitted exponent carries a finite-width bias of −0.048 ± 0.014 over the 100 μP checks; nominal 5 % per quantity:
the four-point fit's CI uses the t quantile with 2 degrees of freedom); it resolves exponent errors of about
0.1–0.2 — a layer whose learning rate is off by N^{±¼} is caught 83–100 % of the time, one off by N^{±1} always.
A too-small learning rate is seen by the layer's ``dWh`` alone: its Δh stays Θ(1), fed by the layers before it.
"""
from __future__ import annotations

import numpy as np

from ..checks import generator, positive_int
from ..progress import progress
from ._blas import limit_blas
from .coordcheck import CoordCheck, fit_all

TRAINED = ("Dense", "Conv")


def _base_a(role) -> float:
    return 0.5 if role in ("hidden", "output") else 0.0


def tensor_factors(table, width, lr_offsets=None) -> dict:
    """{(layer path, tensor): (init factor, forward multiplier, learning-rate factor)} at width N (module
    docstring); ``lr_offsets``: {layer path: e} multiplies that layer's learning rates by N^e (a deliberately wrong
    layer, for the power of the check)."""
    N = float(width)
    opt = table.parameterisation.get("optimizer", "sgd")
    if opt != "sgd":
        raise ValueError(f"serial width check: the table {table.name!r} is derived for {opt!r}; compositions are "
                         "trained with SGD here (take the table with optimizer='sgd')")
    out = {}
    for r in table.rows:
        if r.kind not in TRAINED:
            raise ValueError(f"serial width check: layer {r.layer} ({r.kind}) is not trained in a parameterisation "
                             f"here (trained: {', '.join(TRAINED)}; Attention's tied keys and 1/(C·n) logits have no "
                             "abc form)")
        a, b, c = (float(x) for x in r.std)
        if not all(np.isfinite((a, b, c))):
            raise ValueError(f"serial width check: tensor {r.tensor} of layer {r.layer} has symbolic exponents")
        c -= float((lr_offsets or {}).get(r.layer, 0.0))
        da = a - _base_a(r.role) if r.role != "constant" else 0.0
        out[(r.layer, r.tensor)] = tuple(1.0 if e == 0 else N ** (-e) for e in (b, da, c))
    return out


def factor_tree(comp, factors, k, prefix=""):
    """Per layer of ``comp`` (Residual: a nested list) {tensor: factor k of :func:`tensor_factors`}."""
    out = []
    for i, l in enumerate(comp.layers):
        path = f"{prefix}{i}"
        if type(l).__name__ == "Residual":
            out.append(factor_tree(l.branch, factors, k, f"{path}.branch."))
        else:
            out.append({t: f[k] for (p, t), f in factors.items() if p == path})
    return out


def map_weights(params, fac, fn):
    """``fn(array, factor)`` over the weights; an array whose factor is 1 is passed through unchanged."""
    if isinstance(params, dict):
        return {k: (v if fac.get(k, 1.0) == 1.0 else fn(v, fac[k])) for k, v in params.items()}
    return [map_weights(p, f, fn) for p, f in zip(params, fac)]


def forward_recording(comp, params, x, ins=None, prefix=""):
    """f, caches (as ``Serial.apply``) and the output of every top-level layer; ``ins`` (a dict) receives
    {layer path: (layer, its input)} of every Dense/Conv, residual branches included."""
    caches, outs = [], []
    for i, (l, p) in enumerate(zip(comp.layers, params)):
        if type(l).__name__ == "Residual":
            y, c, _ = forward_recording(l.branch, p, x, ins, f"{prefix}{i}.branch.")
            x = x + l.rho * y
        else:
            if ins is not None and type(l).__name__ in TRAINED:
                ins[f"{prefix}{i}"] = (l, x)
            x, c = l.apply(p, x)
        caches.append(c)
        outs.append(x)
    return x, caches, outs


def _weights(params, prefix=""):
    """{layer path: W} of every Dense/Conv weight of ``params`` (Residual: nested lists)."""
    out = {}
    for i, p in enumerate(params):
        if isinstance(p, list):
            out.update(_weights(p, f"{prefix}{i}.branch."))
        elif "W" in p:
            out[f"{prefix}{i}"] = p["W"]
    return out


def own_updates(ins, W0, W1) -> dict:
    """{"dWh:<path>": the layer's own update applied to its input}, i.e. the layer with effective weights
    W_t − W_0 and no bias (its own ``apply``: x ΔW for Dense, the convolution of x with ΔW for Conv) on its input
    x_t; ``ins`` as filled by :func:`forward_recording`, ``W0``/``W1`` {path: effective W} at init and at step t."""
    out = {}
    for path, (layer, x) in ins.items():
        dW = W1[path] - W0[path]
        y, _ = layer.apply({"W": dW, "b": np.zeros(dW.shape[:1] + dW.shape[-1:])}, x)
        out[f"dWh:{path}"] = y
    return out


@limit_blas
def train_parameterised(comp, table, width, X, Y, steps, eta0, n_inits, seed=0, lr_offsets=None, record=(),
                        updates=False):
    """``steps`` full-batch SGD steps of ``comp`` at width N in the parameterisation of ``table`` (module docstring),
    ``n_inits`` initialisations (init s from its own stream, as :class:`~limits.finite.serial.SerialNetwork`).
    Returns (outputs at init, outputs after training): per top-level layer in ``record`` its output (S, P, …) and
    under key "f" the network output (S, P, d_out); with ``updates`` the second also holds every Dense/Conv
    layer's own update contribution under "dWh:<path>" (:func:`own_updates`)."""
    from .serial import SerialNetwork

    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    net = SerialNetwork(comp, width, Y.shape[1])
    fac = tensor_factors(table, width, lr_offsets)
    init, mult, lr = (factor_tree(comp, fac, k) for k in range(3))
    w = net.init_weights(X.shape[1:], n_inits, seed=seed)
    w = map_weights(w, init, lambda v, f: v * f)
    x = np.ascontiguousarray(np.broadcast_to(X[None], (n_inits,) + X.shape))
    snaps, W0 = [], None
    for k in range(steps + 1):
        eff = map_weights(w, mult, lambda v, f: v * f)
        ins = {} if updates and k == steps else None
        f, caches, outs = forward_recording(comp, eff, x, ins)
        if k == 0 and updates:
            W0 = {q: v.copy() for q, v in _weights(eff).items()}     # w is updated in place
        if k in (0, steps):
            snaps.append({**{i: outs[i] for i in record}, "f": f})
        if k == steps:
            if updates:
                snaps[-1].update(own_updates(ins, W0, _weights(eff)))
            break
        _, g = comp.vjp(eff, caches, (f - Y[None]) / X.shape[0])
        g = map_weights(g, mult, lambda v, m: v * m)                  # ∂ℓ/∂w = m ∂ℓ/∂W
        sgd_step(w, g, lr, eta0)
    return snaps[0], snaps[-1]


def sgd_step(w, g, lr, eta0):
    for p, q, f in zip(w, g, lr):
        if isinstance(p, dict):
            for key, v in q.items():
                p[key] -= (eta0 * f.get(key, 1.0)) * v
        else:
            sgd_step(p, q, f, eta0)


def _rms(d):
    d = d.reshape(d.shape[0], -1)
    return np.sqrt(np.mean(d * d, axis=1))


def width_check(comp, table, in_shape, widths=(32, 64, 128, 256, 512), seeds=8, steps=2, eta0=1e-3, P=8, seed=0,
                lr_offsets=None, predicted=None, tol=0.0, name=None, progress_bar=False) -> CoordCheck:
    """Per-layer coordinate check of composition ``comp`` trained in the parameterisation of ``table`` (module
    docstring) on P Gaussian inputs of shape ``in_shape`` with ±1 targets; ``predicted`` defaults to
    ``table.predicted``. ``verdict(result)`` is True when every fitted exponent is consistent."""
    widths = [positive_int(n, "widths") for n in widths]
    if len(widths) < 3:
        raise ValueError("widths needs at least 3 values for a slope fit")
    seeds, steps = positive_int(seeds, "seeds", minimum=2), positive_int(steps, "steps")
    rng = generator(seed=seed)
    X = rng.standard_normal((positive_int(P, "P"),) + tuple(int(s) for s in in_shape))
    Y = np.where(rng.standard_normal((P, 1)) >= 0, 1.0, -1.0)
    idx = comp.hidden_outputs()
    per_n = []
    for N in progress(widths, desc="serial width check", disable=None if progress_bar else True):
        s0, s1 = train_parameterised(comp, table, N, X, Y, steps, eta0, seeds, seed=seed, lr_offsets=lr_offsets,
                                     record=idx, updates=True)
        m = {f"dh:{i}": _rms(s1[i] - s0[i]) for i in idx}
        if len(idx) > 2:
            m["dh:hidden"] = np.mean([m[f"dh:{i}"] for i in idx[1:]], axis=0)
        m["df"] = _rms(s1["f"] - s0["f"])
        m.update({k: _rms(v) for k, v in s1.items() if isinstance(k, str) and k.startswith("dWh:")})
        per_n.append(m)
    pred = table.predicted if predicted is None else predicted
    q = [k for k in per_n[0] if k in pred] if pred else list(per_n[0])
    nm = name or f"{table.name} per-layer width check"
    settings = {"in_shape": list(in_shape), "P": P, "seed": seed, "lr_offsets": dict(lr_offsets or {}),
                "composition": comp.to_dict(), "table": table.name}
    return fit_all(nm, "N", widths, per_n, q, pred, tol, settings, seeds, steps, eta0, "composition")


def verdict(check: CoordCheck) -> bool:
    """Every fitted quantity consistent with its prediction."""
    return all(f.consistent for f in check.fits if f.consistent is not None)
