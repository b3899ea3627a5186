"""Empirical exponent checker ("coordinate check that reports exponents", docs/theory/params.rst §5).

Train finite networks for a few small steps at widths ``N ∈ {2^k}`` (or depths ``L ∈ {2^k}``),
measure per-representation ``|Δh|_rms``, per-layer ``|mult·ΔW·input|_rms``, ``|Δf|_rms`` and
``|f_0|_rms`` over independent seeds, and fit log–log slopes with confidence intervals
(:func:`limits.stats.loglog_fit`, weighted by the standard errors over seeds). Each fitted slope
is printed next to a symbolic prediction:

* width checks: ``p.one_step_exponents()`` of a ``limits.params`` parameterisation (duck-typed —
  this module does not import the theory package), or a ``predicted`` dict;
* depth / two-layer-block checks: predictions are passed in by the caller
  (``limits.validate.params`` / ``limits.gallery.params`` take them from ``limits.params.depth``).

Quantities (keys): ``"df"``, ``"f0"``, ``"dh:<rep>"`` (``rep`` ∈ ``h0, h1, …, u<b>.<k>``; the
aggregate ``"dh:hidden"`` is the mean over the deeper stream states h1…hB), ``"dWh:<layer>"``
(``in``, ``out``, ``<b>.<k>``; ``"dh:last"`` is the last stream state hB; aggregates ``"dWh:hidden"`` = mean over all hidden layers,
``"dWh:block1"``/``"dWh:block2"`` = mean over the first/second layer of every block), and
``"incr:block2"`` (= branch × ``dWh:block2``: the update of the residual increment).

Uses only the public API of :mod:`limits.finite` (``concretise``, ``train``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import generator, positive_int
from ..progress import progress
from ..results import Result
from ..stats import loglog_fit, mean_se, signed


@dataclass(frozen=True)
class ExponentFit(Result):
    """Fitted log–log slope of one quantity against ``x_name`` ("N" or "L")."""

    quantity: str
    x_name: str
    x: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    slope: float
    slope_se: float
    ci_low: float
    ci_high: float
    predicted: float | None
    consistent: bool | None
    tail_slope: float = float("nan")
    tail_slope_se: float = float("nan")
    tail_ci_low: float = float("nan")
    tail_ci_high: float = float("nan")
    tail_points: int = 0

    def line(self) -> str:
        pred = "" if self.predicted is None else f"{signed(self.predicted, 3)}"
        ok = "" if self.consistent is None else ("yes" if self.consistent else "NO")
        tail = (f"{signed(self.tail_slope, 3)} ± {self.tail_slope_se:.3f} [{signed(self.tail_ci_low, 3)}, "
                f"{signed(self.tail_ci_high, 3)}]"
                if self.tail_points and self.tail_points < len(self.x) else "(= all)")
        return (f"| {self.quantity} | {signed(self.slope, 3)} ± {self.slope_se:.3f} | [{signed(self.ci_low, 3)}, "
                f"{signed(self.ci_high, 3)}] | {tail} | {pred} | {ok} |")


@dataclass(frozen=True)
class CoordCheck(Result):
    """All fits of one sweep plus its inputs (``samples``: (n_x, seeds, n_quantities))."""

    name: str
    x_name: str
    x: np.ndarray
    quantities: tuple
    samples: np.ndarray
    fits: tuple
    seeds: int
    steps: int
    eta0: float
    activation: str
    settings: dict

    def fit(self, quantity) -> ExponentFit:
        for f in self.fits:
            if f.quantity == quantity:
                return f
        raise KeyError(f"no fit for {quantity!r}; have {[f.quantity for f in self.fits]}")

    def to_markdown(self) -> str:
        head = (f"**{self.name}** — slopes of log(quantity) vs log {self.x_name} over {self.x_name} = "
                f"{', '.join(str(int(v)) for v in self.x)}; {self.seeds} seeds, {self.steps} step(s), "
                f"η0 = {self.eta0:g}, {self.activation}\n\n"
                "| quantity | fitted slope ± SE (all) | 95% CI | largest-x fit ± SE [95% CI] | predicted | "
                "prediction in CI (largest-x fit) |\n|---|---|---|---|---|---|")
        return head + "\n" + "\n".join(f.line() for f in self.fits) + "\n"

    def __str__(self):
        return self.to_markdown()

    def plot(self, target=None, quantities=None):
        """Each quantity's mean over seeds (± 2 SE), relative to its value at the smallest x, against x on
        log–log axes, with its predicted slope dashed through the first point (at most 8 quantities; default
        all fits). ``target``: a path, an Axes or None (:func:`limits.style.plot_target`); returns the Figure."""
        from ..style import PALETTE, plot_target

        pt = plot_target(target, 1, figsize=(5.2, 3.6), what="CoordCheck.plot")
        ax = pt.axes[0]
        fits = [self.fit(q) for q in quantities] if quantities is not None else list(self.fits)
        x = np.asarray(self.x, float)
        for i, f in enumerate(fits[:8]):
            c = PALETTE[i % len(PALETTE)]
            m0 = f.mean[0] if f.mean[0] != 0 else 1.0
            ax.errorbar(x, f.mean / m0, yerr=2 * f.se / abs(m0), fmt="o-", ms=3, lw=1, color=c,
                        label=f"{f.quantity}: {f.slope:+.2f}" + ("" if f.predicted is None else f" (pred. {f.predicted:+.2f})"))
            if f.predicted is not None:
                ax.plot(x, (x / x[0]) ** f.predicted, "--", lw=0.8, color=c)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(self.x_name)
        ax.set_ylabel("relative to the smallest " + self.x_name)
        ax.set_title(self.name, fontsize=8)
        ax.legend(fontsize=6)
        return pt.finish()


def _toy_data(d_in, P, rng):
    X = rng.standard_normal((P, d_in))
    Y = np.sign(rng.standard_normal((P, 1)))
    Y[Y == 0] = 1.0
    return X, Y


def _measure(res, net):
    """Dict quantity -> (S,) array from one TrainResult (last record vs init)."""
    out = {}
    df = res.f[-1] - res.f[0]
    out["df"] = np.sqrt(np.mean(df ** 2, axis=(1, 2)))
    out["f0"] = np.sqrt(np.mean(res.f[0] ** 2, axis=(1, 2)))
    dh = res.dh_rms[-1]
    for i, nm in enumerate(res.rep_names):
        out[f"dh:{nm}"] = dh[:, i]
    deep = [i for i, nm in enumerate(res.rep_names) if nm.startswith("h") and nm != "h0"]
    if deep:
        out["dh:hidden"] = dh[:, deep].mean(axis=1)
        out["dh:last"] = dh[:, max(deep, key=lambda i: int(res.rep_names[i][1:]))]
    whr = res.dWh_rms[-1]
    for i, nm in enumerate(res.layer_names):
        out[f"dWh:{nm}"] = whr[:, i]
    hid = [i for i, nm in enumerate(res.layer_names) if nm not in ("in", "out")]
    if hid:
        out["dWh:hidden"] = whr[:, hid].mean(axis=1)
    b1 = [i for i, nm in enumerate(res.layer_names) if nm.endswith(".1") and nm not in ("in", "out")]
    b2 = [i for i, nm in enumerate(res.layer_names) if nm.endswith(".2")]
    if b1:
        out["dWh:block1"] = whr[:, b1].mean(axis=1)
    if b2:
        out["dWh:block2"] = whr[:, b2].mean(axis=1)
        branch = float(net.blocks[0].branch) if net.blocks else 1.0
        out["incr:block2"] = branch * out["dWh:block2"]
    return out


def fit_all(name, x_name, xs, per_x, quantities, predicted, tol, settings, seeds, steps, eta0, activation,
             tail=4):
    """Fit every quantity over all x and over the ``tail`` largest x (the asymptotic exponent is a
    large-N/L statement; corrections of relative size N^{-1/2}, L/N bias the small-x points, so the
    verdict uses the largest-x fit)."""
    missing = [q for q in quantities if any(q not in m for m in per_x)]
    if missing:
        raise ValueError(f"quantities {missing} are not measured for this network (e.g. no hidden layer); "
                         f"available: {sorted(set(per_x[0]))}")
    samples = np.stack([np.stack([m[q] for q in quantities], axis=1) for m in per_x], axis=0)
    xs = np.asarray(xs, float)
    k = min(len(xs), max(3, int(tail)))
    fits = []
    for j, q in enumerate(quantities):
        y = samples[:, :, j]
        mean, se = mean_se(y, axis=1)
        if np.any(mean <= 0) or not np.all(np.isfinite(mean)):
            raise ValueError(f"quantity {q!r} is not positive/finite at every {x_name}; cannot fit a power law")
        fit = loglog_fit(xs, mean, yerr=np.maximum(se, 1e-300))
        tf = loglog_fit(xs[-k:], mean[-k:], yerr=np.maximum(se[-k:], 1e-300)) if k < len(xs) else fit
        pred = predicted.get(q) if predicted else None
        pred = None if pred is None else float(pred)
        cons = None if pred is None else bool(tf.ci_low - tol <= pred <= tf.ci_high + tol)
        fits.append(ExponentFit(q, x_name, xs, mean, se, fit.slope, fit.slope_se, fit.ci_low,
                                fit.ci_high, pred, cons, tf.slope, tf.slope_se, tf.ci_low, tf.ci_high, k))
    return CoordCheck(name, x_name, np.asarray(xs, float), tuple(quantities), samples, tuple(fits), seeds, steps,
                      float(eta0), str(activation), settings)


def _train_chunks(net, X, Y, steps, seeds, seed, chunk, lr_scale=1.0, optimizer="gd", train_kw=None):
    from .training import train

    parts = []
    for start in range(0, seeds, chunk):
        k = min(chunk, seeds - start)
        res = train(net, X, Y, steps, n_inits=k, seed=[int(seed), start], optimizer=optimizer, lr_scale=lr_scale,
                    record_every=max(1, steps), keep_weights=False, **(train_kw or {}))
        parts.append(_measure(res, net))
    return {q: np.concatenate([p[q] for p in parts]) for q in parts[0]}


def width_check(p, widths=tuple(2 ** k for k in range(6, 12)), L=3, quantities=("df", "dh:h0", "dh:hidden"),
                seeds=8, steps=1, eta0=0.05, activation="tanh", d_in=16, P=8, seed=0, predicted=None,
                tol=0.0, chunk=None, name=None, progress_bar=False, train_kw=None, gnt_damping0=1.0,
                **concretise_kw) -> CoordCheck:
    """Width sweep for parameterisation ``p`` (a ``limits.params`` object or anything
    ``concretise`` accepts), trained with full-batch GD (Adam when ``p.optimizer == "adam"``). Predictions default to ``p.one_step_exponents()`` when ``steps`` = 1.
    ``tol`` widens the consistency interval (default 0: prediction must lie in the 95% CI).
    ``p.algorithm`` ∈ {"bp", "tp", "dtp", "gnt"} selects the finite training rule; for GNT the
    damping is ``gnt_damping0 · N^{predicted["gnt_damping_exponent"]}``. ``train_kw``: extra
    arguments for ``limits.finite.train`` (dict, or callable N → dict)."""
    from .concretise import concretise

    widths = [positive_int(n, "widths") for n in widths]
    if len(widths) < 3:
        raise ValueError("widths needs at least 3 values for a slope fit")
    seeds = positive_int(seeds, "seeds", minimum=2)
    steps = positive_int(steps, "steps")
    rng = generator(seed=seed)
    X, Y = _toy_data(positive_int(d_in, "d_in"), positive_int(P, "P"), rng)
    if predicted is None and steps == 1 and hasattr(p, "one_step_exponents"):
        predicted = {k: v for k, v in p.one_step_exponents().items()}
    chunk = chunk or seeds
    opt = "adam" if getattr(p, "optimizer", "sgd") == "adam" else "gd"   # Adam's first step is η·sign(g)
    alg = getattr(p, "algorithm", "bp")
    alg = alg if alg in ("bp", "tp", "dtp", "gnt") else "bp"
    per_n = []
    for N in progress(widths, desc="width check", disable=None if progress_bar else True):
        net = concretise(p, N, L, d_in=d_in, activation=activation, eta0=eta0, **concretise_kw)
        kw = {"algorithm": alg}
        if alg == "gnt":
            # damping of the same order as the preconditioner δᵀδ (seed 003; exponent from the theory side)
            dexp = float((predicted or {}).get("gnt_damping_exponent", 0.0))
            kw.update(gnt_power=float(getattr(p, "e_B", 1) or 0), gnt_damping=float(gnt_damping0) * N ** dexp)
        if train_kw is not None:
            kw.update(train_kw(N) if callable(train_kw) else train_kw)
        per_n.append(_train_chunks(net, X, Y, steps, seeds, seed, max(1, min(chunk, seeds if N < 1024 else 2)),
                                   optimizer=opt, train_kw=kw))
    nm = name or f"{getattr(p, 'name', 'custom')} width check"
    settings = {"L": L, "d_in": d_in, "P": P, "seed": seed}
    return fit_all(nm, "N", widths, per_n, list(quantities), predicted, tol, settings, seeds, steps, eta0, activation)


def depth_check(p, depths=tuple(2 ** k for k in range(2, 8)), N=128, alpha=0.5, quantities=("dh:hidden",),
                seeds=8, steps=1, eta0=0.05, activation="tanh", d_in=16, P=8, seed=0, predicted=None, tol=0.0,
                freeze=("in",), block_layers=1, branch=None, lr_block=None, name=None, progress_bar=False,
                **concretise_kw) -> CoordCheck:
    """Depth sweep of residual networks: ``depths`` = number of residual blocks B (weight layers
    L = B + 2), branch ``B^{-alpha}`` (or ``branch(B)`` callable), layers in ``freeze`` get
    learning rate 0 (default: the read-in, so stream changes come from the residual blocks only),
    ``lr_block``: optional ``{k: callable(B) -> factor}`` multiplying the learning rate of the
    k-th layer of every block (e.g. the two-layer-block correction ``{1: lambda B: B**0.5}``, or a
    depth-dependent rate ``{1: lambda B: B**-0.5}``). Trained with GD (Adam if ``p.optimizer`` is "adam")."""
    from .concretise import concretise

    depths = [positive_int(b, "depths") for b in depths]
    if len(depths) < 3:
        raise ValueError("depths needs at least 3 values for a slope fit")
    seeds = positive_int(seeds, "seeds", minimum=2)
    rng = generator(seed=seed)
    X, Y = _toy_data(positive_int(d_in, "d_in"), positive_int(P, "P"), rng)
    per = []
    for B in progress(depths, desc="depth check", disable=None if progress_bar else True):
        br = branch(B) if callable(branch) else (B ** (-float(alpha)) if branch is None else float(branch))
        net = concretise(p, N, B + 2, d_in=d_in, activation=activation, eta0=eta0, residual=True, blocks=B,
                         block_layers=block_layers, branch=br, lr_depth={}, **concretise_kw)
        over = {name_: 0.0 for name_ in freeze}
        if lr_block:
            layers = net.layers()
            for k, fac in lr_block.items():
                for b in range(1, B + 1):
                    nm_ = f"{b}.{k}"
                    over[nm_] = layers[nm_].lr * float(fac(B))
        if over:
            net = net.with_lr(1.0, **over)
        opt = "adam" if getattr(p, "optimizer", "sgd") == "adam" else "gd"
        per.append(_train_chunks(net, X, Y, steps, seeds, seed, seeds, optimizer=opt))
    nm = name or f"{getattr(p, 'name', 'custom')} depth check (α = {alpha})"
    settings = {"N": N, "alpha": float(alpha), "d_in": d_in, "P": P, "seed": seed, "freeze": list(freeze),
                "block_layers": block_layers}
    return fit_all(nm, "L", depths, per, list(quantities), predicted, tol, settings, seeds, steps, eta0, activation)


# ---------------------------------------------------------------------------------------------
# Minimal single-shot predictive-coding step (seed 003 §4.1, Eqs. 3–4, S.22–S.33). limits.finite has
# no PC training rule; this is the smallest piece needed to measure the γ̄_L-dependent exponents.
def _phi_fns(activation):
    if activation == "linear":
        return (lambda u: u), (lambda u: np.ones_like(u))
    if activation == "tanh":
        return np.tanh, (lambda u: 1.0 - np.tanh(u) ** 2)
    raise ValueError(f"activation must be 'linear' or 'tanh' for the PC step, got {activation!r}")


def pc_single_shot_step(net, W, X, Y, gamma_L, activation="tanh", return_updates=False):
    """One PC weight update after ONE sequential inference sweep with forward initialisation
    (seed 003: F-ini, single-shot SI, no FPA), batched over inits.

    Plain MLP ``u_1 = m_1 W_1 x``, ``u_l = m_l W_l φ(u_{l−1})``, ``f = out_scale·m_L W_L φ(u_{L−1})``;
    states ``v_l`` start at ``u_l`` (so e_{l,0} = 0); the sweep goes from the top:
    ``v_{L−1} += γ_L φ'(v_{L−1}) ⊙ W̃_Lᵀ (y − f)``, then ``v_l += γ_{l+1} φ'(v_l) ⊙ W̃_{l+1}ᵀ e_{l+1}`` with
    ``e_{l+1} = v_{l+1} − W̃_{l+1} φ(v_l)`` and γ_{l<L} = 1 (W̃ = m·W); afterwards
    ``e_l = v_l − W̃_l φ(v_{l−1})``, ``e_L = y − W̃_L φ(v_{L−1})`` and the weights move by
    ``ΔW_l = lr_l · m_l · e_lᵀ φ(v_{l−1}) / P`` (S.33; the step sizes γ_l are omitted there).
    Returns ``(dWh, dh)``: per layer rms of ``m_l ΔW_l · (input at init)`` (S, n_layers) and per hidden
    representation rms of the change of u_l after the update (S, n_hidden); with ``return_updates``
    also ``{layer name: ΔW}`` (raw-weight updates, (S, out, in)).
    """
    phi, dphi = _phi_fns(activation)
    names = net.layer_names()
    layers = net.layers()
    m = [layers[n].mult for n in names]
    lr = [layers[n].lr for n in names]
    Ws = [W[n] for n in names]
    Lw = len(names)
    out_scale = float(net.out_scale)
    eff = [mi * Wi for mi, Wi in zip(m, Ws)]
    eff[-1] = eff[-1] * out_scale

    def fwd(E):
        us = [np.matmul(X, np.swapaxes(E[0], 1, 2))]
        for k in range(1, Lw - 1):
            us.append(np.matmul(phi(us[-1]), np.swapaxes(E[k], 1, 2)))
        f = np.matmul(phi(us[-1]), np.swapaxes(E[-1], 1, 2))
        return us, f

    us, f = fwd(eff)
    v = [u.copy() for u in us]
    eL = Y[None] - f                                       # (S, P, d_out)
    v[-1] = v[-1] + gamma_L * dphi(us[-1]) * np.matmul(eL, eff[-1])
    for k in range(Lw - 3, -1, -1):                      # layers below, sequential (already-updated above)
        e_above = v[k + 1] - np.matmul(phi(v[k]), np.swapaxes(eff[k + 1], 1, 2))
        v[k] = v[k] + 1.0 * dphi(v[k]) * np.matmul(e_above, eff[k + 1])
    ins = [np.broadcast_to(X, us[0].shape[:2] + X.shape[1:])] + [phi(vk) for vk in v]
    errs = [v[0] - np.matmul(X, np.swapaxes(eff[0], 1, 2))]
    for k in range(1, Lw - 1):
        errs.append(v[k] - np.matmul(phi(v[k - 1]), np.swapaxes(eff[k], 1, 2)))
    errs.append(Y[None] - np.matmul(phi(v[-1]), np.swapaxes(eff[-1], 1, 2)))
    P = X.shape[0]
    dW = []
    for k in range(Lw):
        scale = lr[k] * m[k] * (out_scale if k == Lw - 1 else 1.0)
        dW.append(scale * np.matmul(np.swapaxes(errs[k], 1, 2), ins[k]) / P)
    ins0 = [np.broadcast_to(X, us[0].shape[:2] + X.shape[1:])] + [phi(u) for u in us]
    dWh = np.stack([np.sqrt(np.mean((m[k] * np.matmul(ins0[k], np.swapaxes(dW[k], 1, 2))) ** 2, axis=(1, 2)))
                    for k in range(Lw)], axis=1)
    new = [mi * (Wi + dWi) for mi, Wi, dWi in zip(m, Ws, dW)]
    new[-1] = new[-1] * out_scale
    us1, _ = fwd(new)
    dh = np.stack([np.sqrt(np.mean((a - b) ** 2, axis=(1, 2))) for a, b in zip(us1, us)], axis=1)
    if return_updates:
        return dWh, dh, dict(zip(names, dW))
    return dWh, dh


def pc_width_check(p, widths=tuple(2 ** k for k in range(6, 11)), L=3, gamma_prime=1.0, seeds=8, eta0=0.05,
                   activation="tanh", d_in=16, P=8, seed=0, predicted=None, tol=0.0, name=None) -> CoordCheck:
    """Width sweep of one single-shot PC step (:func:`pc_single_shot_step`) for a std-convention
    parameterisation with ``p.gamma_bar_L`` (γ_L = γ' N^{-γ̄_L}). Quantities: ``dWh:in``,
    ``dWh:hidden`` (mean over hidden layers), ``dWh:out``, ``dh:hidden`` (mean over hidden
    representations). ``predicted``: growth exponents (e.g. −r_l from ``limits.params``)."""
    from .concretise import concretise
    from .weights import init_weights

    g = getattr(p, "gamma_bar_L", None)
    if g is None:
        raise ValueError("p.gamma_bar_L is required (single-shot PC with γ_L = γ' N^{-γ̄_L})")
    if getattr(g, "free_symbols", None):
        raise ValueError(f"p.gamma_bar_L = {g} is symbolic; substitute a number first, e.g. "
                         f"p.subs({{'{sorted(map(str, g.free_symbols))[0]}': -0.5}})")
    g = float(g)
    widths = [positive_int(n, "widths") for n in widths]
    if len(widths) < 3:
        raise ValueError("widths needs at least 3 values for a slope fit")
    seeds = positive_int(seeds, "seeds", minimum=2)
    L = positive_int(L, "L (weight layers; >= 3 so that a hidden weight layer exists)", minimum=3)
    rng = generator(seed=seed)
    X, Y = _toy_data(positive_int(d_in, "d_in"), positive_int(P, "P"), rng)
    per = []
    for N in widths:
        net = concretise(p, N, L, d_in=d_in, activation=activation, eta0=eta0)
        w = init_weights(net, seeds, seed=[int(seed), 17])
        dWh, dh = pc_single_shot_step(net, w.W, X, Y, float(gamma_prime) * N ** (-g), activation)
        per.append({"dWh:in": dWh[:, 0], "dWh:hidden": dWh[:, 1:-1].mean(axis=1), "dWh:out": dWh[:, -1],
                    "dh:hidden": dh[:, 1:].mean(axis=1) if dh.shape[1] > 1 else dh[:, 0]})
    nm = name or f"{getattr(p, 'name', 'custom')} single-shot PC (γ̄_L = {g:g})"
    q = ("dWh:in", "dWh:hidden", "dWh:out", "dh:hidden")
    return fit_all(nm, "N", widths, per, list(q), predicted, tol, {"L": L, "gamma_prime": gamma_prime, "seed": seed},
                    seeds, 1, eta0, activation)
