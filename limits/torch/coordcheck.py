"""``coord_check``: the coordinate check of a torch network as numbers — per tensor and training step, the
fitted width exponent of its activation scale and of its change since init, against the exponents the
solver predicts for the parameterisation (``limits.params``).

For every width N and seed s the module is built (``Parameterised(N)`` or the factory as-is), trained
``steps`` full-batch steps on ``data``, and the output y of every recorded module is measured on the same
batch after each step t = 0…steps:

    scale_t = rms(y_t),   change_t = rms(y_t − y_0)        (rms over all entries)

Per (module, t, quantity) the mean over seeds m_N ± SE is fitted as log m_N = log C + e·log N
(:func:`limits.stats.loglog_fit`, 95 % t-interval, weighted by the SEs). Predictions are the solver's
first-step exponents ``p.one_step_exponents()`` of the parameterisation (TP4 std convention, its
optimizer), mapped on the tensor roles of :mod:`limits.torch.apply_params`:

    input-like   scale 0, change e[dh:h0];    hidden (Linear/Conv/attention block)  scale 0, change e[dh:hidden]
    output-like  scale e[f0], change e[df];   normalisation (LayerNorm …)  scale 0, change e[dh:hidden]
    attention logits q·k/√d_h (nn.MultiheadAttention, q scaled by N^{q}): scale q, change E = e[dh:hidden] + ½ + q
        (a width-d contraction of correlated vectors, TP5; q = −½ under μP attention, 0 otherwise)

and, in forward order, every hidden/norm/output tensor after an attention takes max(its change e, E): a logit
change Δα moves the attention output Σ_s Δα_ts v_s, and everything downstream, by N^E. When E > e the change
is a sum A N^e + B N^E whose fitted slope lies in [e, E] at finite width and tends to E (SP with Adam:
e = 1, E = 3/2, the crossover still under way at widths 64…512): the prediction is then the range [e, E]
(``predicted_low``, ``predicted``) and a fit is consistent when its CI, widened by ``tol``, meets it. Logits
get [min(own, e_x + q), max(own, E_upstream)]: q and k also move through the changed input stream x (change
N^{e_x}), and (W_q Δx)·k/√d is an uncorrelated width-d contraction, N^{e_x + q} (μP: N^{-1/2}, which
dominates the Θ(1) coherent part at small widths).

The change exponents hold at every fixed step t ≥ 1 as N → ∞ while updates stay perturbative (small lr);
the scale after training is predicted only when the change does not outgrow it (e_change ≤ e_scale).
A prediction is *consistent* when it lies in the fit's 95 % CI widened by ``tol`` (the finite-width
corrections of relative size N^{-1/2} bias slopes fitted over 64…512 by a few hundredths).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..results import Result
from ..stats import loglog_fit, mean_se, signed
from .apply_params import Parameterised, build_module as _build, classify, resolve_table
from .network import torch_threads

QUANTITIES = ("scale", "change")
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm) + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ())


@dataclass(frozen=True)
class TorchCoordCheck(Result):
    """Per recorded tensor (``tensors``, roles ``roles``), step t = 0…steps and quantity (scale, change):
    ``samples`` (n_widths, seeds, n_tensors, steps+1, 2), fitted ``slope``/``ci_low``/``ci_high``,
    ``predicted`` (the N → ∞ exponent; nan = no prediction), ``predicted_low`` (< predicted where a
    finite-width crossover from that exponent is under way, else equal) and ``consistent`` (1 yes, 0 no,
    −1 no verdict), each (n_tensors, steps+1, 2)."""

    name: str
    widths: np.ndarray
    tensors: tuple
    roles: tuple
    steps: int
    seeds: int
    samples: np.ndarray
    slope: np.ndarray
    slope_se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    predicted: np.ndarray
    predicted_low: np.ndarray
    consistent: np.ndarray
    tol: float
    cpu_seconds: float
    settings: dict

    @property
    def passed(self) -> bool:
        """Every tensor consistent with its predictions at every step (and no divergence)."""
        return not self.failures()

    def failures(self) -> list:
        """(tensor, step, quantity, slope, ci_low, ci_high, predicted) of every inconsistent fit."""
        out = []
        for i, t, q in zip(*np.nonzero(self.consistent == 0)):
            out.append((self.tensors[i], int(t), QUANTITIES[q], float(self.slope[i, t, q]),
                        float(self.ci_low[i, t, q]), float(self.ci_high[i, t, q]), self._pred(i, t, q)))
        return out

    def _pred(self, i, t, q) -> str:
        p, lo = self.predicted[i, t, q], self.predicted_low[i, t, q]
        if not np.isfinite(p):
            return "—"
        return signed(p) if not lo < p else f"{signed(lo)}…{signed(p)}"

    def failing_tensors(self) -> list:
        return sorted({f[0] for f in self.failures()}, key=self.tensors.index)

    def exponent(self, tensor, quantity="change", step=None) -> tuple:
        """(slope, ci_low, ci_high, predicted) of one tensor (last step by default)."""
        i = self.tensors.index(tensor)
        t = self.steps if step is None else int(step)
        q = QUANTITIES.index(quantity)
        return (float(self.slope[i, t, q]), float(self.ci_low[i, t, q]), float(self.ci_high[i, t, q]),
                float(self.predicted[i, t, q]))

    def to_markdown(self) -> str:
        ws = ", ".join(str(int(w)) for w in self.widths)
        head = (f"**coord check — {self.name}**: widths {ws}; {self.seeds} seeds, {self.steps} step(s), "
                f"{self.settings.get('optimizer')} lr {self.settings.get('lr'):g}; fitted exponent of the "
                f"activation scale at init and of its change after step {self.steps} (95 % CI, tol ±{self.tol:g}); "
                f"verdict over every step. CPU {self.cpu_seconds:.1f} s\n\n"
                "| tensor | role | scale at init: fitted [CI] | pred. | change: fitted [CI] | pred. | verdict |\n"
                "|---|---|---|---|---|---|---|")
        rows = []
        fails = set(self.failing_tensors())
        T = self.steps
        for i, name in enumerate(self.tensors):
            def cell(t, q):
                s, lo, hi, p = self.slope[i, t, q], self.ci_low[i, t, q], self.ci_high[i, t, q], self.predicted[i, t, q]
                fit = "—" if not np.isfinite(s) else f"{signed(s)} [{signed(lo)}, {signed(hi)}]"
                return fit, self._pred(i, t, q)
            a, pa = cell(0, 0)
            b, pb = cell(T, 1) if T > 0 else ("—", "—")
            verdict = "**NO**" if name in fails else ("ok" if np.any(self.consistent[i] == 1) else "—")
            rows.append(f"| {name} | {self.roles[i]} | {a} | {pa} | {b} | {pb} | {verdict} |")
        tail = ("\n\nAll tensors behave as predicted.\n" if self.passed else
                "\n\nNot as predicted: " + "; ".join(
                    f"{n} ({q} at step {t}: {signed(s)} [{signed(lo)}, {signed(hi)}], predicted {p})"
                    for n, t, q, s, lo, hi, p in self.failures()[:12]) + "\n")
        return head + "\n" + "\n".join(rows) + tail

    def __str__(self):
        return self.to_markdown()

    def plot(self, ax=None, quantity="change", step=None):
        """Fitted exponent ± 95 % CI of every tensor (dots) against its prediction (crosses)."""
        import matplotlib.pyplot as plt

        t = self.steps if step is None else int(step)
        q = QUANTITIES.index(quantity)
        if ax is None:
            _, ax = plt.subplots(figsize=(max(5.0, 0.35 * len(self.tensors)), 3.6))
        x = np.arange(len(self.tensors))
        s = self.slope[:, t, q]
        ax.errorbar(x, s, yerr=[s - self.ci_low[:, t, q], self.ci_high[:, t, q] - s], fmt="o", ms=4,
                    label="fitted (95 % CI)")
        ax.plot(x, self.predicted[:, t, q], "x", color="C3", ms=7, label="predicted")
        bad = self.consistent[:, t, q] == 0
        if np.any(bad):
            ax.plot(x[bad], s[bad], "o", mfc="none", mec="C3", ms=10, label="not as predicted")
        ax.set_xticks(x)
        ax.set_xticklabels(self.tensors, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel(f"width exponent of {quantity} (step {t})")
        ax.set_title(self.name, fontsize=9)
        ax.legend(fontsize=7)
        return ax


# ---------------------------------------------------------------------- predictions
def predictions(p, role, query_exponent=0.0) -> tuple:
    """(scale-at-init, change) exponents of a recorded tensor with this role (module docstring)."""
    e = {k: float(v) for k, v in p.one_step_exponents().items()}
    if role == "input":
        return 0.0, e["dh:h0"]
    if role == "hidden":
        return 0.0, e["dh:hidden"]
    if role == "output":
        return e["f0"], e["df"]
    if role == "norm":
        return 0.0, e["dh:hidden"]
    if role == "logits":
        return query_exponent, e["dh:hidden"] + 0.5 + query_exponent
    raise ValueError(f"no prediction for role {role!r}")


# ---------------------------------------------------------------------- recording
def _recorded(model, rules):
    """[(name, module, role)] in module order: owners of input/hidden/output weights, norms, attention logits."""
    role_of = {}
    for q in rules:
        if q.role in ("input", "hidden", "output"):
            prev = role_of.get(q.module)
            if prev is None or q.role == "output" or (q.role == "hidden" and prev == "input"):
                role_of[q.module] = q.role
    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, _NORMS) and any(True for _ in mod.parameters(recurse=False)):
            out.append((name, mod, "norm"))
        elif name in role_of:
            out.append((name, mod, role_of[name]))
        if isinstance(mod, nn.MultiheadAttention) and name in role_of:
            if not mod._qkv_same_embed_dim:
                raise ValueError(f"coord_check: attention {name!r} has separate q/k/v projections; only the "
                                 "packed in_proj is recorded")
            out.append((name + ":logits", mod, "logits"))
    return out


def _logits(mod, args, kwargs):
    query = args[0] if args else kwargs["query"]
    key = args[1] if len(args) > 1 else kwargs["key"]
    if not mod.batch_first:
        query, key = query.transpose(0, 1), key.transpose(0, 1)
    E, h = mod.embed_dim, mod.num_heads
    W, b = mod.in_proj_weight, mod.in_proj_bias
    q = torch.nn.functional.linear(query, W[:E], None if b is None else b[:E])
    k = torch.nn.functional.linear(key, W[E:2 * E], None if b is None else b[E:2 * E])
    B, T, _ = q.shape
    d = E // h
    q = q.reshape(B, T, h, d)
    k = k.reshape(B, key.shape[1], h, d)
    return torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d)


def _check_deterministic(model):
    for name, mod in model.named_modules():
        if isinstance(mod, nn.modules.dropout._DropoutNd) and mod.p > 0:
            raise ValueError(f"coord_check: dropout module {name!r} has p = {mod.p}; build the network with "
                             "dropout 0 (the check compares deterministic forwards)")
        if isinstance(mod, nn.MultiheadAttention) and mod.dropout > 0:
            raise ValueError(f"coord_check: attention {name!r} has dropout {mod.dropout}; use dropout 0")


def _as_tensor(a, dtype):
    t = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a)
    if t.is_floating_point():
        return t.to(dtype)
    return t


def default_loss(out, y):
    """Integer targets: cross-entropy over the last axis; real targets: (1/B) Σ ½ (out − y)²."""
    if not y.is_floating_point():
        return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return 0.5 * ((out - y.reshape(out.shape)) ** 2).sum() / out.shape[0]


def _run_one(model, groups, X, Y, optimizer, lr, steps, loss_fn, rec):
    model.train()
    _check_deterministic(model)
    store, hooks = {}, []
    for name, mod, role in rec:
        if role == "logits":
            hooks.append(mod.register_forward_pre_hook(
                lambda m, a, kw, name=name: store.__setitem__(name, _logits(m, a, kw).detach().clone()),
                with_kwargs=True))
        else:
            hooks.append(mod.register_forward_hook(
                lambda m, a, o, name=name: store.__setitem__(name, (o[0] if isinstance(o, tuple) else o).detach().clone())))
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer]
    opt = cls(groups, lr=float(lr))
    res = None
    first = None
    try:
        for t in range(steps + 1):
            opt.zero_grad()
            out = model(X)
            if first is None:        # forward (call) order; modules never called (MHA.out_proj) drop out
                by_name = {r[0]: r for r in rec}
                rec = [by_name[n] for n in store if n in by_name]
                res = np.full((len(rec), steps + 1, 2), np.nan)
            y = [store[n] for n, _, _ in rec]
            if first is None:
                first = y
            for i, (a, a0) in enumerate(zip(y, first)):
                res[i, t, 0] = a.double().pow(2).mean().sqrt().item()
                if t > 0:
                    res[i, t, 1] = (a.double() - a0.double()).pow(2).mean().sqrt().item()
            if t == steps:
                break
            loss = loss_fn(out, Y)
            if not torch.isfinite(loss):
                break
            loss.backward()
            opt.step()
    finally:
        for h in hooks:
            h.remove()
    return res, rec


def _groups(groups, lr):
    """A factory's own optimizer groups; a group's ``lr_mult`` sets its rate to lr · lr_mult."""
    out = []
    for g in groups:
        if not isinstance(g, dict) or "params" not in g:
            raise ValueError("factory: param_groups must be dicts with 'params' (and 'lr' or 'lr_mult')")
        g = dict(g)
        if "lr_mult" in g:
            g["lr"] = float(lr) * float(g.pop("lr_mult"))
        out.append(g)
    return out


def coord_check(module_factory, widths, data, optimizer=None, lr=1e-2, steps=3, seeds=4, expect=None,
                loss=None, tol=0.1, roles=None, seed=0, name=None, threads=None,
                parameterisation=None) -> TorchCoordCheck:
    """Coordinate check (module docstring). ``module_factory``: a :class:`Parameterised` (predictions from its
    table; ``optimizer`` defaults to its own) or a plain ``factory(width)`` checked as-is against the
    parameterisation ``expect`` (the factory may return ``(module, param_groups)`` for its own per-tensor
    learning rates; a group's ``lr_mult`` means lr · lr_mult). ``parameterisation``: a name for a plain factory
    — shorthand for ``coord_check(parameterise(factory, name, widths[:2], optimizer), …)``. ``threads``: torch
    threads during the runs (default ``$LIMITS_BLAS_THREADS``, 1). ``data``: ``(X, Y)`` (arrays or tensors; integer Y → cross-entropy) or inputs X alone (then fixed N(0, 1)
    regression targets of the output's shape, drawn from ``seed``; zero targets would cap the output's
    change at its init size, N^{-1/2} under μP). ``seeds``: a count."""
    t_cpu = time.process_time()
    widths = sorted(int(w) for w in widths)
    if len(widths) < 3 or len(set(widths)) != len(widths) or widths[0] < 1:
        raise ValueError(f"widths: need at least 3 distinct positive widths for a slope fit, got {widths}")
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    seeds = int(seeds)
    if seeds < 2:
        raise ValueError(f"seeds must be >= 2 (the CI needs a spread over seeds), got {seeds}")
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        if isinstance(data, (tuple, list)) or data is None:
            raise ValueError("data must be a pair (X, Y) or the inputs X alone")
        data = (data, None)
    if parameterisation is not None:
        if isinstance(module_factory, Parameterised) or expect is not None:
            raise ValueError("parameterisation= applies a table to a plain factory; pass a plain factory and "
                             "no expect= (or a Parameterised alone)")
        from .apply_params import parameterise

        module_factory = parameterise(module_factory, parameterisation, widths=widths[:2],
                                      optimizer=optimizer or "adam", roles=roles)
    if isinstance(module_factory, Parameterised):
        P = module_factory
        if expect is not None:
            raise ValueError("expect= is for a factory checked as-is; a Parameterised is checked against its own table")
        if optimizer not in (None, P.optimizer_name):
            raise ValueError(f"optimizer {optimizer!r} differs from the one the table was derived for "
                             f"({P.optimizer_name!r}); parameterise(..., optimizer={optimizer!r})")
        optimizer = P.optimizer_name
        p, rules, fl = P.table, P.rules, P.feature_learning
        label = name or f"{P.name} (parameterised)"
    else:
        if not callable(module_factory):
            raise ValueError("module_factory must be a Parameterised or a callable width -> nn.Module")
        if expect is None:
            raise ValueError("expect: name the parameterisation a factory checked as-is should follow (e.g. 'muP')")
        optimizer = optimizer or "adam"
        p = resolve_table(expect, optimizer)
        rules, _ = classify(module_factory, widths, roles)
        from ..params import classify as classify_p

        fl = classify_p(p).regime == "feature-learning"
        label = name or f"as built, expected {getattr(p, 'name', expect)}"
    qexp = -0.5 if fl else 0.0
    loss_fn = loss or default_loss
    samples = None
    for wi, N in enumerate(widths):
        for s in range(seeds):
            with torch.random.fork_rng(devices=[]), torch_threads(threads):
                torch.manual_seed(int(seed) * 1_000_003 + s)
                if isinstance(module_factory, Parameterised):
                    model = P(N)
                    groups = P.param_groups(model, lr)
                else:
                    built = module_factory(N)
                    model, groups = (built if isinstance(built, tuple) else (built, None))
                    if not isinstance(model, nn.Module):
                        raise ValueError(f"factory({N}) must return an nn.Module, got {type(model).__name__}")
                    groups = list(model.parameters()) if groups is None else _groups(groups, lr)
                rec = _recorded(model, rules)
                if not rec:
                    raise ValueError("coord_check: no input/hidden/output tensor to record")
                dtype = next((q.dtype for q in model.parameters() if q.is_floating_point()), torch.float32)
                X = _as_tensor(data[0], dtype)
                if data[1] is None:                # inputs only: fixed N(0, 1) targets of the output's shape
                    with torch.no_grad(), torch.random.fork_rng(devices=[]):
                        out0 = model(X)
                    out0 = out0[0] if isinstance(out0, tuple) else out0
                    g = torch.Generator().manual_seed(int(seed))
                    data = (data[0], torch.randn(out0.shape, generator=g, dtype=out0.dtype))
                    Y = data[1]
                else:
                    Y = _as_tensor(data[1], dtype)
                res, rec = _run_one(model, groups, X, Y, optimizer, lr, steps, loss_fn, rec)
            if samples is None:
                names = tuple(n for n, _, _ in rec)
                rl = tuple(r for _, _, r in rec)
                samples = np.full((len(widths), seeds, len(rec), steps + 1, 2), np.nan)
            samples[wi, s] = res
    pred = np.full((len(names), steps + 1, 2), np.nan)
    pred_low = np.full_like(pred, np.nan)
    E = -math.inf                  # largest logit-change exponent upstream (tensors are in forward order)
    e_stream = predictions(p, "input", qexp)[1]     # change of the stream entering the next layer (lower end)
    for i, r in enumerate(rl):
        e0, ec = predictions(p, r, qexp)
        low = ec
        if r == "logits":
            # q, k also move through the changed stream: (W_q Δx)·k/√d is an uncorrelated contraction,
            # N^{e_stream + q} (μP: N^{-1/2}); and through upstream logits, N^E
            low, ec = min(ec, e_stream + qexp), max(ec, E)
            E = max(E, ec)
        else:
            if r in ("hidden", "norm", "output") and E > ec:
                ec = E                 # a logit change moves the attention output, and all downstream, by N^E
            if r != "output":
                e_stream = low
        pred[i, 0, 0] = pred_low[i, 0, 0] = e0
        pred[i, 1:, 1], pred_low[i, 1:, 1] = ec, low
        if ec <= e0:
            pred[i, 1:, 0] = pred_low[i, 1:, 0] = e0
    shape = pred.shape
    slope, sse, lo, hi = (np.full(shape, np.nan) for _ in range(4))
    cons = np.full(shape, -1, dtype=np.int64)
    xs = np.asarray(widths, float)
    for i in range(shape[0]):
        for t in range(shape[1]):
            for q in range(2):
                if t == 0 and q == 1:
                    continue
                y = samples[:, :, i, t, q]
                m, se = mean_se(y, axis=1)
                if np.all(np.isfinite(m)) and np.all(m > 0):
                    f = loglog_fit(xs, m, yerr=np.maximum(se, 1e-300))
                    slope[i, t, q], sse[i, t, q], lo[i, t, q], hi[i, t, q] = f.slope, f.slope_se, f.ci_low, f.ci_high
                    if np.isfinite(pred[i, t, q]):      # the CI (± tol) meets [predicted_low, predicted]
                        cons[i, t, q] = int(f.ci_low - tol <= pred[i, t, q] and pred_low[i, t, q] <= f.ci_high + tol)
                elif np.isfinite(pred[i, t, q]) and not np.all(np.isfinite(m)):
                    cons[i, t, q] = 0              # diverged: not as predicted
    settings = {"optimizer": optimizer, "lr": float(lr), "seed": int(seed),
                "parameterisation": str(getattr(p, "name", "")), "feature_learning": bool(fl),
                "query_exponent": qexp}
    return TorchCoordCheck(label, xs, names, rl, steps, seeds, samples, slope, sse, lo, hi, pred, pred_low, cons,
                           float(tol), time.process_time() - t_cpu, settings)


def synthetic_data(factory, width=64, batch=16, seq=8, seed=0):
    """A tiny task for a factory's modules: inputs shaped for the first input-like tensor (token ids for an
    Embedding, N(0, 1) rows for a Linear, 8×8 images for a Conv2d) and N(0, 1) regression targets of
    the output's shape."""
    g = torch.Generator().manual_seed(int(seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        m = _build(factory, width)
    first = next((mod for mod in m.modules() if isinstance(mod, (nn.Embedding, nn.Linear, nn.modules.conv._ConvNd))),
                 None)
    if first is None:
        raise ValueError("synthetic data: no Embedding/Linear/Conv layer to read the input shape from; pass data")
    dtype = next((q.dtype for q in m.parameters() if q.is_floating_point()), torch.float32)
    if isinstance(first, nn.Embedding):
        X = torch.randint(0, first.num_embeddings, (batch, seq), generator=g)
    elif isinstance(first, nn.Linear):
        X = torch.randn((batch, first.in_features), generator=g, dtype=dtype)
    else:
        nd = len(first.kernel_size)
        X = torch.randn((batch, first.in_channels) + (8,) * nd, generator=g, dtype=dtype)
    with torch.no_grad():
        out = m(X)
    out = out[0] if isinstance(out, tuple) else out
    Y = torch.randn(out.shape, generator=g, dtype=out.dtype)
    return X, Y


__all__ = ["coord_check", "TorchCoordCheck", "predictions", "synthetic_data", "default_loss", "QUANTITIES"]
