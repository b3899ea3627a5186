"""A user's own ``nn.Module`` declared equivalent to a :class:`limits.Model`: the declaration is verified before
any kernel is computed from it (``limits.check(k, network=factory)``, :func:`equivalent`).

``factory(width) -> nn.Module`` (evaluated in float64: ``module.double()``). Its parameters are paired with the
model's tensors ``W_in, b_in, W_1_1, …, W_out, b_out`` (:class:`limits.torch.network.TorchNetwork`) in
registration order, or by ``mapping={user name: model name}``. At every width N the declaration must hold:

1. **shapes** — each paired tensor has the model's shape at N (nn.Linear's (out, in) is the model's);
2. **function** — with the weights θ of one ``model.to_torch(N)`` copied into the module, on probe inputs
   (and the check's X): max|f_user(θ) − f_model(θ)| ≤ 1e-10 · max(1, max|f_model|), and so is every
   per-tensor Jacobian ∂f_0/∂θ_k (torch.func.jacrev). On a mismatch each tensor k (and each model layer's
   W, b together) is tried alone: if f_user(θ with θ_k ← c θ_k) = f_model(θ) for some c (Gauss–Newton on c),
   the reason names the tensor and c at every width (c ≈ N^e: a missing or wrong forward multiplier); if no
   single one does, one multiplier per tensor is fitted jointly (Levenberg–Marquardt) and the reason names
   the tensors it changes;
3. **init law** — the module's own init (``factory(N)`` under ``torch.manual_seed``) draws each tensor as the
   model's N(0, std²): pooled over draws and widths, v = w/std_N has mean 0, E v² = 1 and kurtosis 3 (the
   statistics of :mod:`limits.torch.init_law`, whose null distributions are exact — Σv/√n ~ N(0, 1),
   Σv² ~ χ²_n — or Anscombe–Glynn-accurate for the kurtosis, Bonferroni over tensors × 3 at family-wise
   ``alpha``); a tensor with std 0 must be exactly 0. Extra draws at the smallest width bring every tensor to ``target`` power (a relative init-std
   error of ``target`` detected with 80 % probability), at most ``max_draws``; weaker tensors are reported
   (``weak``), and one with fewer than 100 pooled entries is not z-tested.

A violation raises :class:`NotEquivalent` (a ValueError) naming the tensor. The verified
:class:`Equivalence` then builds the modules of ``limits.check``: empirical NTK Θ̂ = Σ_θ ∂f_0/∂θ ∂f_0/∂θᵀ and
read-out NNGP K̂_out = Σ_{θ ∈ read-out} std_θ² ∂f_0/∂θ ∂f_0/∂θᵀ = E[f_0 f_0ᵀ | the rest] (f is affine in the
read-out, whose init law 3. verified) of each init (:mod:`limits.torch.kernels`).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call, jacrev, jvp

from .init_law import N_SUMS, law_z, moment_sums
from .network import TorchNetwork, param_key as _key, torch_threads

FORWARD_TOL = 1e-10
MIN_ENTRIES = 100                     # fewer pooled entries: a tensor's moments are not z-tested (SEs unreliable)
Z_POWER = 0.8416212335729143          # one-sided 80 % quantile of N(0, 1)
_MOMENTS = ("mean", "variance", "fourth moment (kurtosis)")


class NotEquivalent(ValueError):
    """The module is not the model it is declared equivalent to; the message names the tensor and the reason."""


def _build(factory, width, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        m = factory(int(width))
    if isinstance(m, tuple) and m and isinstance(m[0], torch.nn.Module):
        m = m[0]
    if not isinstance(m, torch.nn.Module):
        raise NotEquivalent(f"factory({width}) must return a torch.nn.Module, got {type(m).__name__}")
    _refuse_unsupported(m, width, seed)
    return m.to(torch.float64)


def _refuse_fixed_init(factory, width, seed):
    """NotEquivalent when ``factory(width)`` builds the same weights under two torch seeds: one fixed draw (a
    fixed generator or seed inside the factory) has no init law to compare with the model's."""
    a, b = _build(factory, width, seed), _build(factory, width, int(seed) + 1)
    pb = dict(b.named_parameters())
    drawn = [(p, pb[n]) for n, p in a.named_parameters() if p.numel() and bool(p.detach().abs().sum() > 0)]
    if drawn and all(torch.equal(p, q) for p, q in drawn):
        raise NotEquivalent(f"factory({width}) builds the same weights under torch.manual_seed({seed}) and "
                            f"({int(seed) + 1}): its init does not draw from torch's global RNG (a fixed torch.Generator "
                            "or seed inside the factory?), so it is one fixed draw, not an init law to compare with "
                            "the model's — draw the init from torch's RNG")


def _refuse_unsupported(m, width, seed):
    """NotEquivalent for what no verdict can be built on: frozen or non-finite parameters, active dropout."""
    for name, p in m.named_parameters():
        if not p.requires_grad:
            raise NotEquivalent(f"tensor {name!r} is frozen (requires_grad=False) at width {width}; the model trains "
                                "every tensor and its NTK sums over all of them — unfreeze it or leave it out of "
                                "the module")
        bad = int((~torch.isfinite(p.detach())).sum())
        if bad:
            raise NotEquivalent(f"tensor {name!r} has {bad} NaN/inf entries at init (width {width}, seed {seed}); "
                                "an init law cannot be tested on them")
    for name, mod in m.named_modules():
        p = getattr(mod, "p", 0.0) if isinstance(mod, torch.nn.modules.dropout._DropoutNd) else \
            getattr(mod, "dropout", 0.0) if isinstance(mod, torch.nn.MultiheadAttention) else 0.0
        if mod.training and float(p) > 0:
            raise NotEquivalent(f"module {name!r} applies dropout (p = {float(p):g}) in train mode: the forward is "
                                "random, so no function can be compared — build it with p = 0 or call .eval()")


def model_tensors(net):
    """[(model tensor name, layer name, "W" | "b", std)] of a concrete network, in TorchNetwork order."""
    out = []
    for name, d in net.layers().items():
        out.append((_key("W", name), name, "W", float(d.std)))
        if d.bias:
            out.append((_key("b", name), name, "b", float(d.bias_std)))
    return out


def _pairs(user, net, mapping, width):
    """[(user name, model name)] — by order, or by ``mapping`` (a bijection)."""
    un = [n for n, _ in user.named_parameters()]
    mt = [t[0] for t in model_tensors(net)]
    if mapping is None:
        if len(un) != len(mt):
            raise NotEquivalent(f"at width {width} the module has {len(un)} parameter tensors ({', '.join(un)}), the "
                                f"model {len(mt)} ({', '.join(mt)}); pair them with mapping={{user name: model name}}")
        return list(zip(un, mt))
    mapping = dict(mapping)
    bad_u = sorted(set(mapping) - set(un))
    bad_m = sorted(set(mapping.values()) - set(mt))
    if bad_u or bad_m:
        raise NotEquivalent(f"mapping: " + "; ".join(
            ([f"no module parameter {bad_u} (it has {un})"] if bad_u else [])
            + ([f"no model tensor {bad_m} (it has {mt})"] if bad_m else [])))
    miss_u = [n for n in un if n not in mapping]
    miss_m = [n for n in mt if n not in mapping.values()]
    if miss_u or miss_m or len(set(mapping.values())) != len(mapping):
        raise NotEquivalent("mapping must pair every module parameter with a distinct model tensor; unpaired: "
                            f"module {miss_u}, model {miss_m}")
    return [(n, mapping[n]) for n in un]


def _output0(f, d_out, who):
    if not isinstance(f, torch.Tensor):
        raise NotEquivalent(f"{who} returns a {type(f).__name__}, not a tensor; the model's output is one (P, {d_out}) "
                            "tensor — return it alone (e.g. a wrapper that selects it)")
    if f.ndim == 1 and d_out == 1:
        f = f[:, None]
    if f.ndim != 2 or f.shape[1] != d_out:
        raise NotEquivalent(f"{who} returns shape {tuple(f.shape)}; the model's output is (P, {d_out})")
    return f


@dataclass(frozen=True)
class InitStat:
    """Init-law statistics of one tensor (pooled over draws and widths): ``n`` entries, the mean, variance and
    kurtosis of v = w/std (model: 0, 1, 3) with their SEs under the model's law and z
    (:func:`limits.torch.init_law.law_z`), ``power`` (smallest relative init-std error detected with 80 %
    probability)."""

    name: str
    model_name: str
    n: int
    std_zero: bool
    moments: tuple
    se: tuple
    z: tuple
    power: float


@dataclass(frozen=True)
class Equivalence:
    """A verified declaration (module docstring). ``pairs``: ((user name, model name), …); ``readout``: user names
    of the read-out tensors; ``forward_error``/``jacobian_error``: per width; ``init``: :class:`InitStat` per
    tensor; ``z_crit``: the Bonferroni threshold; ``weak``: tensors below the target power."""

    factory: object
    model: object
    widths: tuple
    pairs: tuple
    readout: tuple
    forward_error: dict
    jacobian_error: dict
    init: tuple
    z_crit: float
    target: float
    draws: dict
    seconds: float

    @property
    def weak(self) -> tuple:
        return tuple(s.name for s in self.init if not s.std_zero and (s.power > self.target or s.n < MIN_ENTRIES))

    def build(self, width, seed):
        """The user's module at ``width`` drawn under ``torch.manual_seed(seed)``, in float64."""
        return _build(self.factory, width, seed)

    def std(self, user_name, width) -> float:
        """The model's init std of the tensor paired with ``user_name`` at ``width``."""
        model_name = dict(self.pairs)[user_name]
        return {t[0]: t[3] for t in model_tensors(self.model.finite(int(width)))}[model_name]

    def to_markdown(self) -> str:
        ws = ", ".join(str(w) for w in self.widths)
        rows = [f"**declared equivalent to** {self.model.describe()} — verified at widths {ws} "
                f"({self.seconds:.1f} s)", "",
                "| width | max rel. forward error | max rel. Jacobian error | init draws |", "|---:|---:|---:|---:|"]
        for w in self.widths:
            rows.append(f"| {w} | {self.forward_error[w]:.1e} | {self.jacobian_error[w]:.1e} | {self.draws.get(w, 0)} |")
        rows += ["", f"| tensor | model | entries | mean of w/std | variance of w/std | kurtosis of w | detects std errors ≥ |",
                 "|---|---|---:|---|---|---|---|"]
        for s in self.init:
            if s.std_zero:
                rows.append(f"| {s.name} | {s.model_name} | {s.n} | zero init (all entries 0) | | | |")
                continue
            cells = [f"{m:+.4f} ± {e:.4f} (z {z:+.1f})" for m, e, z in zip(s.moments, s.se, s.z)]
            rows.append(f"| {s.name} | {s.model_name} | {s.n} | {' | '.join(cells)} | {s.power:.2%} |")
        rows.append(f"\nthreshold |z| < {self.z_crit:.2f} (Bonferroni); read-out tensors {', '.join(self.readout)}")
        if self.weak:
            rows.append(f"weakly tested (power above {self.target:.0%}): {', '.join(self.weak)}")
        return "\n".join(rows)

    def __str__(self):
        return self.to_markdown()


# ------------------------------------------------------------------------------------------- verification
def _probe(model, X, seed):
    g = np.random.default_rng([int(seed), 7])
    Xp = g.standard_normal((8, model.d_in))
    if X is not None:
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != model.d_in:
            raise ValueError(f"X must be (P, {model.d_in}), got shape {X.shape}")
        Xp = np.vstack([Xp, X])
    return torch.as_tensor(Xp, dtype=torch.float64)


def _fit_multiplier(user, params, names, X, target):
    """c minimising ‖f(θ with θ_k ← c θ_k, k ∈ names) − target‖ (Gauss–Newton from several starts) and the
    relative residual, or (nan, inf)."""
    def f(c):
        p = dict(params)
        for n in names:
            p[n] = params[n] * c
        return functional_call(user, p, (X,)).reshape(target.shape)

    scale = max(1.0, float(target.abs().max()))
    best = (math.nan, math.inf)
    N = max(max(params[n].shape) for n in names)
    for c0 in (1.0, N ** -0.5, N ** 0.5):
        c = torch.tensor(float(c0), dtype=torch.float64)
        for _ in range(15):
            with warnings.catch_warnings():      # torch 2.13's forward-mode AD calls its own deprecated jit.script
                warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated",
                                        category=DeprecationWarning)
                r, d = jvp(f, (c,), (torch.ones((), dtype=torch.float64),))
            r = r - target
            dd = float((d * d).sum())
            if not math.isfinite(dd) or dd == 0:
                break
            step = float((r * d).sum()) / dd
            c = c - step
            if abs(step) <= 1e-14 * max(1.0, abs(float(c))):
                break
        with torch.no_grad():
            res = float((f(c) - target).abs().max()) / scale
        if math.isfinite(res) and res < best[1]:
            best = (float(c), res)
        if best[1] <= 1e-8:
            break
    return best


def _fit_joint(user, params, names, X, target, iters=60):
    """Per-tensor multipliers c (one per name) minimising ‖f(θ_k ← c_k θ_k) − target‖ (Levenberg–Marquardt from
    c = 1, Jacobian by forward mode) and the relative residual. Odd activations make (W_l, b_l, W_{l+1}) → −(…) a
    symmetry: a solution with negative entries is replaced by |c| when that fits as well (multipliers are positive)."""
    from torch.func import jacfwd

    def f(c):
        p = dict(params)
        for i, n in enumerate(names):
            p[n] = params[n] * c[i]
        return functional_call(user, p, (X,)).reshape(-1)

    t = target.reshape(-1)
    scale = max(1.0, float(t.abs().max()))
    c = torch.ones(len(names), dtype=torch.float64)
    with torch.no_grad():
        r = f(c) - t
    cost, lam = float(r @ r), 1e-3
    for _ in range(iters):
        J = jacfwd(f)(c).detach().numpy()
        rn = r.detach().numpy()
        d = np.sqrt(np.maximum(np.sum(J * J, axis=0), 1e-300))
        A = np.vstack([J, math.sqrt(lam) * np.diag(d)])                 # damped least squares (no inverse)
        step = np.linalg.lstsq(A, -np.concatenate([rn, np.zeros(len(names))]), rcond=None)[0]
        c_new = c + torch.as_tensor(step)
        with torch.no_grad():
            r_new = f(c_new) - t
        cost_new = float(r_new @ r_new)
        if math.isfinite(cost_new) and cost_new < cost:
            c, r, cost, lam = c_new, r_new, cost_new, lam / 3
            if float(np.max(np.abs(step))) <= 1e-13 * max(1.0, float(c.abs().max())):
                break
        else:
            lam *= 10
            if lam > 1e12:
                break
    if bool((c < 0).any()):
        with torch.no_grad():
            r_abs = f(c.abs()) - t
        if float(r_abs.abs().max()) <= float(r.abs().max()) + 1e-12 * scale:
            c, r = c.abs(), r_abs
    return c.numpy(), float(r.abs().max()) / scale


def _localise(user, params, pairs, X, target, only=None):
    """[(names, label, c)] of the tensors (or a layer's W and b together) whose rescaling alone explains the
    mismatch (``only``: labels to try); if none does, the tensors a joint per-tensor rescaling changes
    (labels ending in "jointly")."""
    cands = [((u,), f"{u!r} (model {m})") for u, m in pairs]
    by_layer = {}
    for u, m in pairs:
        by_layer.setdefault(m.split("_", 1)[1], []).append((u, m))
    cands += [(tuple(u for u, _ in v), " and ".join(repr(u) for u, _ in v) + f" together (model layer {k!r})")
              for k, v in by_layer.items() if len(v) == 2]
    found = []
    for names, label in cands:
        if only is not None and label not in only:
            continue
        c, res = _fit_multiplier(user, params, names, X, target)
        if res <= 1e-8:
            found.append((names, label, c))
    if not found and (only is None or any(lab.endswith("jointly") for lab in only)):
        names = [u for u, _ in pairs]
        c, res = _fit_joint(user, params, names, X, target)
        if res <= 1e-8:
            found = [((u,), f"{u!r} (model {m}) jointly", float(ck)) for (u, m), ck in zip(pairs, c)
                     if abs(ck - 1.0) > 1e-6]
    return found


def _verify_function(factory, model, width, mapping, X, seed, only=None):
    """(pairs, readout user names, forward error, Jacobian error) at one width, or NotEquivalent (module docstring)."""
    net = model.finite(int(width))
    user = _build(factory, width, seed)
    pairs = _pairs(user, net, mapping, width)
    tnet = TorchNetwork(net, seed=seed)
    up, mp = dict(user.named_parameters()), dict(tnet.named_parameters())
    for u, m in pairs:
        if tuple(up[u].shape) != tuple(mp[m].shape):
            hint = " (transposed?)" if tuple(up[u].shape) == tuple(mp[m].shape)[::-1] else ""
            raise NotEquivalent(f"tensor {u!r} has shape {tuple(up[u].shape)} at width {width}; the model's {m} has "
                                f"{tuple(mp[m].shape)}{hint}")
    with torch.no_grad():
        for u, m in pairs:
            up[u].copy_(mp[m])
    Xt = _probe(model, X, seed)
    with torch.no_grad():
        fm = _output0(tnet(Xt), model.d_out, "the model")
        fu = _output0(user(Xt), model.d_out, f"the module at width {width}")
        again = _output0(user(Xt), model.d_out, f"the module at width {width}")
    if not torch.equal(fu, again):
        raise NotEquivalent(f"the module's forward at width {width} is not deterministic (two calls on the same "
                            f"inputs differ by {float((fu - again).abs().max()):.2e}): randomness such as "
                            "F.dropout in train mode; no function can be compared")
    scale = max(1.0, float(fm.abs().max()))
    err = float((fu - fm).abs().max()) / scale
    if not err <= FORWARD_TOL:
        params = {n: p.detach() for n, p in user.named_parameters()}
        g = np.random.default_rng([int(seed), 13])          # more inputs than multipliers: the fit is determined
        Xl = torch.cat([Xt, torch.as_tensor(g.standard_normal((4 * len(pairs), model.d_in)))])
        with torch.no_grad():
            fl = _output0(tnet(Xl), model.d_out, "the model")
        found = _localise(user, params, pairs, Xl, fl, only)
        return pairs, None, err, None, found
    pu = {n: p.detach() for n, p in user.named_parameters()}
    pm = {n: p.detach() for n, p in tnet.named_parameters()}
    Ju = jacrev(lambda p: _output0(functional_call(user, p, (Xt,)), model.d_out, "module")[:, 0])(pu)
    Jm = jacrev(lambda p: functional_call(tnet, p, (Xt,))[:, 0])(pm)
    jerr = 0.0
    for u, m in pairs:
        s = max(1.0, float(Jm[m].abs().max()))
        e = float((Ju[u] - Jm[m]).abs().max()) / s
        if not e <= FORWARD_TOL:
            raise NotEquivalent(f"tensor {u!r} (model {m}): at width {width} the forward agrees but ∂f/∂{u} differs "
                                f"from the model's by {e:.2e} (relative) — the module does not use this tensor as "
                                "the model does (a detached, clamped or re-scaled use?)")
        jerr = max(jerr, e)
    readout = tuple(u for u, m in pairs if m in (_key("W", "out"), _key("b", "out")))
    return pairs, readout, err, jerr, None


def _mismatch_reason(model, fails):
    """NotEquivalent text from {width: (error, found)} (module docstring, item 2)."""
    ws = sorted(fails)
    err = max(fails[w][0] for w in ws)
    common = [lab for _, lab, _ in fails[ws[0]][1]
              if all(any(l2 == lab for _, l2, _ in fails[w][1]) for w in ws)]
    head = (f"the module's forward differs from the model's ({model.describe()}) at the copied weights: max "
            f"relative error {err:.2e} > {FORWARD_TOL:g}")
    if not common:
        return head + "; no single tensor's multiplier explains it (the activation, the architecture or the way " \
                      "biases/skips enter differ)"
    parts = []
    joint = all(lab.endswith(" jointly") for lab in common)
    for lab in common:
        cs = [next(c for _, l2, c in fails[w][1] if l2 == lab) for w in ws]
        txt = ", ".join(f"{c:.4g}" for c in cs) + " at widths " + ", ".join(str(w) for w in ws)
        if len(ws) >= 2 and all(c > 0 for c in cs):
            from ..stats import loglog_slope, signed

            txt += f" (≈ N^{signed(loglog_slope(ws, cs))})"
        if joint:
            parts.append(f"{lab.removesuffix(' jointly')} × {txt}")
        else:
            parts.append(f"tensor {lab}: the forward matches only if it is multiplied by {txt}")
    if joint:
        return (head + "; no single tensor explains it, but the forward matches when these tensors are rescaled "
                "together: " + "; ".join(parts) + " — forward multipliers are missing or wrong")
    return head + "; " + "; ".join(parts) + " — a forward multiplier is missing or wrong"


def _init_stats(eq_pairs, factory, model, widths, seed, target, max_draws, alpha, base_draws):
    """Per-tensor moment sums over draws at every width (``base_draws``) plus extra draws at the smallest width
    until each tensor reaches the target power, at most ``max_draws`` there."""
    from scipy.stats import norm

    k = len(eq_pairs)
    z_crit = float(norm.isf(alpha / (2 * 3 * max(k, 1))))
    names = [u for u, _ in eq_pairs]
    acc = {n: np.zeros(6) for n in names}     # n, Σv, Σv², Σv³, Σv⁴ (init_law.moment_sums); nonzero entries of std-0
    zero = {n: True for n in names}
    draws = {}
    rng = np.random.default_rng([int(seed), 11])

    def add(width, count):
        stds = {t[0]: t[3] for t in model_tensors(model.finite(int(width)))}
        for s in rng.integers(0, 2**62, size=count).tolist():
            m = _build(factory, width, s)
            params = dict(m.named_parameters())
            for u, mn in eq_pairs:
                w = params[u].detach().reshape(-1).numpy()
                a = acc[u]
                sd = stds[mn]
                if sd == 0:
                    a[0] += w.size
                    a[5] += np.count_nonzero(w)
                    continue
                zero[u] = False
                a[:N_SUMS] += moment_sums(w / sd)
        draws[width] = draws.get(width, 0) + count

    def need(a):
        """Entries for the target power on the variance: n ≥ ((z_crit + z_0.8)·√var(v²)/δ)², δ = (1+t)² − 1."""
        delta = (1 + target) ** 2 - 1
        return ((z_crit + Z_POWER) ** 2) * 2.0 / delta ** 2

    for w in widths:
        add(w, base_draws)
    w0 = min(widths)
    per = {u: max(1, params_n) for u, params_n in
           ((u, int(np.prod(dict(_build(factory, w0, 0).named_parameters())[u].shape))) for u, _ in eq_pairs)}
    extra = 0
    for u, _ in eq_pairs:
        if zero[u]:
            continue
        extra = max(extra, math.ceil(max(0.0, need(acc[u]) - acc[u][0]) / per[u]))
    extra = min(extra, max(0, max_draws - draws.get(w0, 0)))
    if extra:
        add(w0, extra)
    stats = []
    for u, mn in eq_pairs:
        a = acc[u]
        n = int(a[0])
        if zero[u]:
            stats.append(InitStat(u, mn, n, True, (float(a[5]), 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 0.0))
            continue
        moments, se, z = law_z(a[:N_SUMS])          # exact / Anscombe–Glynn null distributions (init_law)
        power_var = (z_crit + Z_POWER) * math.sqrt(2.0 / max(n - 1, 1))        # detectable relative variance error
        stats.append(InitStat(u, mn, n, False, moments, se, z, math.sqrt(1 + power_var) - 1))
    return tuple(stats), z_crit, draws, zero, acc


def equivalent(factory, model, widths=(64, 128, 256, 512), *, X=None, mapping=None, seed=0, alpha=0.01,
               target=0.05, max_draws=2048, draws=4, threads=None) -> Equivalence:
    """Verify that ``factory(width)`` builds ``model`` (module docstring); :class:`Equivalence` or
    :class:`NotEquivalent` naming the tensor. ``widths``: every width checked; ``X``: inputs added to the
    probes; ``mapping``: {module parameter name: model tensor name}; ``target``: the init-std error each
    tensor's test should detect with 80 % probability (more draws at the smallest width, ≤ ``max_draws``)."""
    from ..model import as_model

    t0 = time.perf_counter()
    if not callable(factory):
        raise ValueError(f"factory must be a callable width -> nn.Module, got {type(factory).__name__}")
    model = as_model(model)
    widths = tuple(sorted({int(w) for w in np.atleast_1d(widths)}))
    if not widths or widths[0] < 1:
        raise ValueError(f"widths: give positive widths, got {widths}")
    if not 0 < float(target) < 1:
        raise ValueError(f"target must be a relative error in (0, 1), got {target}")
    fwd, jac, fails = {}, {}, {}
    pairs = readout = None
    with torch_threads(threads):
        for w in widths:
            only = None if not fails else {lab for _, lab, _ in fails[min(fails)][1]}
            if fails and (not only or len(fails) >= 3):
                break                    # the reason is known: localised at three widths (or not at all)
            p, ro, err, jerr, found = _verify_function(factory, model, w, mapping, X, seed, only)
            if found is not None:
                fails[w] = (err, found)
                continue
            if pairs is not None and p != pairs:
                raise NotEquivalent(f"the module's parameters pair differently at width {w} ({p}) than before ({pairs})")
            pairs, readout, fwd[w], jac[w] = p, ro, err, jerr
        if fails:
            raise NotEquivalent(_mismatch_reason(model, fails))
        _refuse_fixed_init(factory, min(widths), seed)
        stats, z_crit, draws_done, _, _ = _init_stats(pairs, factory, model, widths, seed, float(target),
                                                      int(max_draws), float(alpha), int(draws))
    reasons = []
    for s in stats:
        if s.std_zero or s.n < MIN_ENTRIES:      # too few entries for sample SEs of moments (reported as weak)
            continue
        bad = [f"{_MOMENTS[i]} of w/std = {s.moments[i]:.4f} ± {s.se[i]:.4f} (model {[0, 1, 3][i]}, z = {s.z[i]:+.1f})"
               for i in range(3) if abs(s.z[i]) > z_crit]
        if bad:
            std_ratio = math.sqrt(max(s.moments[1], 0.0))
            reasons.append(f"tensor {s.name!r} (model {s.model_name}): init law is not the model's N(0, std²): "
                           + "; ".join(bad) + f" — its init std is {std_ratio:.4f}× the model's")
    for s in stats:
        if s.std_zero and s.moments[0]:
            reasons.append(f"tensor {s.name!r} (model {s.model_name}): the model initialises it to 0, the module has "
                           f"{int(s.moments[0])} nonzero entries of {s.n}")
    if reasons:
        raise NotEquivalent(f"|z| > {z_crit:.2f} (Bonferroni over {len(stats)} tensors × 3 moments, α = {alpha:g}): "
                            + " | ".join(reasons))
    return Equivalence(factory, model, widths, tuple(pairs), readout, fwd, jac, stats, z_crit, float(target),
                       draws_done, time.perf_counter() - t0)


def declare(network, model, widths, X=None, seed=0):
    """An :class:`Equivalence` for ``network`` (a factory, or an Equivalence already verified for this model at
    these widths — else verified again)."""
    if isinstance(network, Equivalence):
        if network.model.to_dict() == model.to_dict() and set(int(w) for w in widths) <= set(network.widths):
            return network
        network = network.factory
    return equivalent(network, model, widths, X=X, seed=seed)


__all__ = ["equivalent", "declare", "Equivalence", "NotEquivalent", "InitStat", "model_tensors"]
