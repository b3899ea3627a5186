"""``coord_check``: the coordinate check of a torch network as numbers — per module, attention site and tensor
and per training step, the fitted width exponent of its scale and of its change since init, against the
exponents the solver predicts for the parameterisation (``limits.params``), with a calibrated verdict.

For every width N and seed s the module is built (``Parameterised(N)`` or the factory as-is), trained
``steps`` full-batch steps on ``data`` and measured after each step t = 0…steps (:mod:`limits.torch.recording`):
module outputs (a read-out tied to the embedding included, as an output row) and attention logits (scale
rms(y_t), change rms(y_t − y_0)); every trainable tensor W (its
own ``update`` rms(W_t − W_0) and scale rms(W_t) as stored, and its effect — ``change`` — on the owning module's
output with the input held at its init value).

**Predictions: one source of truth.** Each row's prediction is the table's canonical exponent for its role (the
solver's first-step exponents ``p.one_step_exponents()``, TP4 std convention, its optimizer) moved by the row's
*offset* under the plan — the plan :func:`limits.torch.parameterise` applied, or, for a module checked as built,
its measured init and its optimizer groups' rates — propagated through the traced forward
(:mod:`limits.torch.offsets`, :mod:`limits.torch.plan`): a query multiplier, a read-out written
``self.output(h) * (1/r)``, a tied read-out's r^{−a_r}, any width-dependent constant enters every row downstream
of it up to the next non-linearity, where a plan that realises the table has offset 0:

    module rows   input-like   scale 0, change e[dh:h0];    hidden / normalisation   scale 0, change e[dh:hidden]
                  output-like  scale e[f0], change e[df]   (a module whose output has no width-sized dimension,
                               the root module included)                                             — each + o
    logits        head dimension d ∝ N: TP5's q·k/d: scale −½, change E = e[dh:hidden] (a width-d contraction of
                      correlated vectors); d fixed (heads ∝ N): scale 0, change e[dh:hidden]   (offset 0: forced)
    tensor rows   effect (judged)  e[dWh:in] (input-like, vectors), e[dWh:hidden], e[dWh:out]; 0 for
                      width-independent tensors under Adam — + the offset of the owner's output, with the gauge
                      the constraints require of the tensor (so a wrong rate or init names it, not the rows after
                      it); under Adam judged after the first step only (±η·sign(g) exactly; later steps follow the
                      gradient's sign history); a key projection's own bias is not judged (the softmax over the
                      keys removes it: no gradient)
                  scale at init (judged)  the stored init that realises the table under the plan
                  update (shown)  Adam −c, SGD e[dWh] − [fan-in ∝ N] + a

A read-out that reads a tensor the forward read earlier as an input (a tied embedding) has a coherent self-term:
its scale at init is predicted in [e, e + ½]. A read-out initialised below the table's scale (zero, or ∝ N^−3/2
as mup's) is accepted: the scale at init of the rows it feeds is an upper bound, their change a range reaching
down by the same factor (its own W₀·Δh), and the check says which init it found (``settings["plan"]``).
In forward order every hidden/norm/output module after an attention takes the range [e, max(e, E)]: a logit
change moves the attention output, and everything downstream, by N^E (SP with Adam: e = 1, E = 3/2, the crossover
still under way at widths 64…512). Logits get [min(own, e_x + q), max(own, E_upstream)]: q and k also move
through the changed input stream x (an uncorrelated contraction, N^{e_x + q}).

The verdict (:func:`limits.torch.exponents.exponent_test`) allows each exponent its leading finite-width
correction, m_N = a N^p + b N^{p−½}, and requires the leading term to be present (dominant at the largest width
or significantly positive); a crossover range [lo, p] adds the lower end and its correction; an upper bound is
a one-sided test of the log-log slope (:func:`limits.torch.exponents.bound_test`); each of the m judged fits is
tested at α/m (Bonferroni), so a correct module is flagged with probability ≤ α (default 5 %; measured in
``benchmarks/coordcheck_calibration.py``, ``benchmarks/torch_suite_calibration.py`` and
``benchmarks/torch_property.py``). ``failures()`` lists culprits first: tensors whose own rows deviate (their
init, or the effect of their update on the module that uses them), then rows wrong at init, then the rest
(tensors read through other layers among them), each in forward order. A tensor its owner reads between other
layers (a class token or position embedding on the root, a layer scale) has its effect read where it enters the
stream (:mod:`limits.torch.recording`), so a wrong rate on it names it first. A scale at init that is exactly 0
at every width (a zero init) has no exponent: ``not_measurable()`` lists it, neither passed nor failed.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..results import Result
from ..stats import loglog_fit, mean_se, signed
from .apply_params import Parameterised, build_module as _build, classify, resolve_table
from .data_checks import check_factory_data, check_seed
from .exponents import bound_test, exponent_test
from .losses import default_loss
from .measured import Unchanged, unrecorded_tensors, untrained_rows
from .progress_lines import each_seed, runs as progress_runs
from .network import torch_threads
from .graph import sites_of as _graph_sites, find_ties, plain_key, trace, width_scaling
from .recording import describe, label, run_one, site_key

QUANTITIES = ("scale", "change", "update")


@dataclass(frozen=True)
class TorchCoordCheck(Result):
    """Per row (``tensors``: labels; ``kinds``: module | logits | tensor; ``roles``), step t = 0…steps and
    quantity (scale, change, update): ``samples`` (n_widths, seeds, n_rows, steps+1, 3), the plain log-log fit
    ``slope``/``ci_low``/``ci_high`` (95 %), ``predicted`` (the N → ∞ exponent; nan = none), ``predicted_low``
    (< predicted where a crossover from that exponent is under way), ``judged`` (1 where a verdict is given),
    ``p_value`` of the exponent test and ``consistent`` (1 yes, 0 no, −1 no verdict), each (n_rows, steps+1, 3)."""

    name: str
    widths: np.ndarray
    tensors: tuple
    kinds: tuple
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
    judged: np.ndarray
    p_value: np.ndarray
    consistent: np.ndarray
    alpha: float
    cpu_seconds: float
    settings: dict

    @property
    def passed(self) -> bool:
        """Every judged fit consistent with its prediction, every judged row measured, no run diverged."""
        return not self.failures() and not self.unmeasured()

    def unmeasured(self) -> list:
        """[(row, reason)] of judged rows training never moved measurably, and ("training", reason) per width
        where a run diverged (:mod:`limits.torch.measured`): no verdict without a measurement."""
        from .measured import unmeasured_rows

        return unmeasured_rows(self)

    def not_measurable(self) -> list:
        """[(row, reason)] of the judged scale-at-init fits with nothing to fit: a tensor initialised to exactly 0
        (a class token, a zero-initialised read-out) has no init scale at any width — neither passed nor failed."""
        out = []
        for i in range(len(self.tensors)):
            y = self.samples[:, :, i, 0, 0]
            if self.judged[i, 0, 0] and np.isfinite(self.predicted[i, 0, 0]) and np.all(y == 0):
                out.append((self.tensors[i], "scale at init: exactly 0 at every width (zero init), nothing to fit"))
        return out

    @property
    def tests(self) -> int:
        """Number of judged fits (the Bonferroni count)."""
        return int(np.sum(self.consistent >= 0))

    def failures(self) -> list:
        """(row, step, quantity, slope, ci_low, ci_high, predicted) of every inconsistent fit, culprits first:
        tensors whose own effect deviates, then rows wrong at init, then the rest; forward order within each."""
        out = []
        indirect = set(self.settings.get("indirect") or ())
        for i, t, q in zip(*np.nonzero(self.consistent == 0)):
            own = self.kinds[i] == "tensor" and (t == 0 or self._key(i) not in indirect)
            tier = 0 if own else (1 if t == 0 else 2)
            out.append(((tier, int(t), int(i)), (self.tensors[i], int(t), QUANTITIES[q], float(self.slope[i, t, q]),
                                                  float(self.ci_low[i, t, q]), float(self.ci_high[i, t, q]),
                                                  self._pred(i, t, q))))
        return [f for _, f in sorted(out, key=lambda x: x[0])]

    def _key(self, i) -> str:
        """The recorded key of row i (its label without the description in parentheses)."""
        return self.tensors[i].split(" (")[0]

    def _pred(self, i, t, q) -> str:
        p, lo = self.predicted[i, t, q], self.predicted_low[i, t, q]
        if not np.isfinite(p):
            return "—"
        if lo == -math.inf:
            return f"≤ {signed(p)}"
        return signed(p) if not lo < p else f"{signed(lo)}…{signed(p)}"

    def failing_tensors(self) -> list:
        """Rows with an inconsistent fit, culprit first (see :meth:`failures`)."""
        return list(dict.fromkeys(f[0] for f in self.failures()))

    def _index(self, name) -> int:
        if name in self.tensors:
            return self.tensors.index(name)
        short = [n.split(" (")[0] for n in self.tensors]
        if name in short:
            return short.index(name)
        raise KeyError(f"no row {name!r}; rows: {', '.join(self.tensors[:12])}…")

    def exponent(self, tensor, quantity="change", step=None) -> tuple:
        """(slope, ci_low, ci_high, predicted) of one row (last step by default)."""
        i = self._index(tensor)
        t = self.steps if step is None else int(step)
        q = QUANTITIES.index(quantity)
        return (float(self.slope[i, t, q]), float(self.ci_low[i, t, q]), float(self.ci_high[i, t, q]),
                float(self.predicted[i, t, q]))

    def summary(self) -> str:
        """"All … as predicted." or the line "Not as predicted: …" naming failing rows, culprit first."""
        from .measured import unmeasured_text

        zero = [n for n, _ in self.not_measurable()]
        note = (f" Not measurable (not judged): the scale at init of {', '.join(zero[:6])}"
                f"{' …' if len(zero) > 6 else ''} — exactly 0 at every width (zero init).") if zero else ""
        if self.passed:
            return "All tensors behave as predicted." + note
        seen, parts = set(), []
        for n, t, q, s, lo, hi, p in self.failures():
            if n in seen:
                continue
            seen.add(n)
            fit = f"∝ N^{signed(s)} [{signed(lo)}, {signed(hi)}]" if np.isfinite(s) else "not finite at some widths"
            parts.append(f"{n}: {'effect of its update' if q == 'change' and self.kinds[self.tensors.index(n)] == 'tensor' else q} "
                         f"at step {t} {fit}, predicted {p}")
        more = f" (+{len(parts) - 12} more)" if len(parts) > 12 else ""
        failed = ("Not as predicted: " + "; ".join(parts[:12]) + more) if parts else ""
        return " ".join(x for x in (failed, unmeasured_text(self.unmeasured())) if x) + note

    def to_markdown(self) -> str:
        ws = ", ".join(str(int(w)) for w in self.widths)
        T = self.steps
        head = (f"**coord check — {self.name}**: widths {ws}; {self.seeds} seeds, {T} step(s), "
                f"{self.settings.get('optimizer')} lr {self.settings.get('lr'):g}; fitted exponent (95 % CI) of the "
                f"scale at init and of the change after step {T} (tensors: the effect of their own update on their "
                f"module's output, and the update itself); verdict over every step: leading exponent with its "
                f"N^-1/2 correction, {self.tests} fits at family-wise α = {self.alpha:g}. CPU {self.cpu_seconds:.1f} s\n\n"
                "| row | role | scale at init: fitted [CI] | pred. | change: fitted [CI] | pred. | update ‖ΔW‖ | pred. | verdict |\n"
                "|---|---|---|---|---|---|---|---|---|")
        rows = []
        fails = set(self.failing_tensors())
        unmeasured = dict(self.unmeasured())
        zero = {n for n, _ in self.not_measurable()}
        for i, name in enumerate(self.tensors):
            def cell(t, q):
                s, lo, hi = self.slope[i, t, q], self.ci_low[i, t, q], self.ci_high[i, t, q]
                fit = "—" if not np.isfinite(s) else f"{signed(s)} [{signed(lo)}, {signed(hi)}]"
                return fit, self._pred(i, t, q)
            a, pa = cell(0, 0)
            if name in zero:
                a, pa = "0 (zero init)", "not measurable"
            b, pb = cell(T, 1)
            c, pc = cell(T, 2)
            verdict = "**NO**" if name in fails else ("**no change**" if name in unmeasured else
                                                       ("ok" if np.any(self.consistent[i] == 1) else "—"))
            rows.append(f"| {name} | {self.roles[i]} | {a} | {pa} | {b} | {pb} | {c} | {pc} | {verdict} |")
        miss = self.settings.get("attention_not_measured") or {}
        note = ("\n\nAttention whose logits are not measured (not recognised in the traced forward): "
                + "; ".join(f"{k} ({v})" for k, v in miss.items())) if miss else ""
        plan = self.settings.get("plan") or []
        if plan:
            note += "\n\nFrom the plan (offsets through the traced forward): " + "; ".join(plan[:12]) + "."
        return head + "\n" + "\n".join(rows) + note + "\n\n" + self.summary() + "\n"

    def __str__(self):
        return self.to_markdown()

    def __repr__(self):
        from .reprs import coordcheck_repr          # one line, not the arrays (limits.torch.reprs)

        return coordcheck_repr(self)

    def plot(self, target=None, quantity="change", step=None):
        """Fitted exponents ± 95 % CI of every row against the predictions: the scale at init and the change
        after every step (or ``step``), failing rows marked (:mod:`limits.torch.coordcheck_plot`). ``target``:
        a path, an Axes, two Axes or None (:func:`limits.style.plot_target`); returns the Figure."""
        from .coordcheck_plot import plot_coord_check

        return plot_coord_check(self, target, quantity, step)


# ---------------------------------------------------------------------- predictions
def predictions(p, role, query_exponent=0.0, head_dim_scales=True) -> tuple:
    """(scale-at-init, change) exponents of a recorded module or logits row with this role (module docstring)."""
    e = {k: float(v) for k, v in p.one_step_exponents().items()}
    if role == "input":
        return 0.0, e["dh:h0"]
    if role in ("hidden", "norm"):
        return 0.0, e["dh:hidden"]
    if role == "output":
        return e["f0"], e["df"]
    if role == "logits":
        if not head_dim_scales:
            return 0.0, e["dh:hidden"]
        return query_exponent, e["dh:hidden"] + 0.5 + query_exponent
    raise ValueError(f"no prediction for role {role!r}")


_DWH = {"input": "dWh:in", "vector": "dWh:in", "hidden": "dWh:hidden", "output": "dWh:out"}
_ROW = {"input": "input", "vector": "input", "hidden": "hidden", "output": "output"}      # vectors: finite fan-in


def tensor_predictions(p, rule, optimizer) -> tuple:
    """(init scale, effect, update) exponents of a tensor with this :class:`TensorRule` (module docstring)."""
    e = {k: float(v) for k, v in p.one_step_exponents().items()}
    adam = optimizer in ("adam", "adamw")
    if rule.role == "constant":
        return math.nan, (0.0 if adam else math.nan), (0.0 if adam else math.nan)
    a, b, c = (float(p.exponent(_ROW[rule.role], s)) for s in "abc")
    effect = e[_DWH[rule.role]]
    fan_in_scales = rule.role in ("hidden", "output")
    update = -c if adam else effect - float(fan_in_scales) + a
    return (-b if rule.role in ("input", "hidden", "output") else math.nan), effect, update


def _predict(p, order, rule_of, fl, optimizer, head_scales, steps, offsets=None, out_fixed=()):
    """(predicted, predicted_low, judged) (n_rows, steps+1, 3) in forward order (module docstring), each row moved
    by its offset from the plan (:func:`limits.torch.plan.row_offsets`); ``out_fixed``: module rows whose output
    has no width-scaled dimension (predicted as outputs). A predicted_low of −inf marks an upper bound."""
    offsets = offsets or {}
    R = len(order)
    pred = np.full((R, steps + 1, 3), np.nan)
    low = np.full_like(pred, np.nan)
    judged = np.zeros((R, 3), dtype=np.int64)
    E = -math.inf                          # largest logit-change exponent upstream
    e_stream = predictions(p, "input")[1]  # change of the stream entering the next layer (lower end)
    site_E = {}
    for i, (key, kind, extra) in enumerate(order):
        if kind == "tensor":
            continue
        role = "output" if kind == "module" and key in out_fixed and extra != "norm" else extra
        qexp = (-0.5 if fl else 0.0) if head_scales.get(key, True) else 0.0
        e0, ec = predictions(p, "logits" if kind == "logits" else role, qexp, head_scales.get(key, True))
        lo = ec
        if kind == "logits":
            lo, ec = min(ec, e_stream + qexp), max(ec, E)
            E = max(E, ec)
            site_E[key.split(":logits")[0]] = max(ec, site_E.get(key.split(":logits")[0], -math.inf))
        else:
            if E > ec:
                ec = E                     # a logit change moves the attention output, and all downstream, by N^E
            if role != "output":
                e_stream = lo
        o = offsets.get(key)
        d = o.offset if o is not None else 0.0
        e0 += o.init_shift if o is not None else 0.0
        pred[i, 0, 0] = low[i, 0, 0] = e0 + d
        if o is not None and o.tie_range:  # a coherent self-term (a tied read-out reading its own embedding)
            pred[i, 0, 0] = e0 + d + 0.5
        if o is not None and o.upper_init:
            low[i, 0, 0] = -math.inf
        pred[i, 1:, 1], low[i, 1:, 1] = ec + d, lo + d + (o.change_low if o is not None else 0.0)
        if ec <= e0:
            pred[i, 1:, 0], low[i, 1:, 0] = pred[i, 0, 0], low[i, 0, 0]
        judged[i, :2] = 1
    for i, (key, kind, extra) in enumerate(order):     # a tensor's effect: its own module, input held at init
        if kind != "tensor":
            continue
        rule = rule_of[plain_key(key)]
        e0, eff, upd = tensor_predictions(p, rule, optimizer)
        hi = max(eff, site_E.get(rule.module, -math.inf))      # an attention's own logits move its output
        o = offsets.get(key)
        d = o.offset if o is not None else 0.0
        pred[i, 0, 0] = low[i, 0, 0] = e0
        if o is not None and np.isfinite(o.init):           # the stored init that realises the table
            pred[i, 0, 0] = low[i, 0, 0] = o.init
            low[i, 0, 0] = -math.inf if o.upper_init else o.init
            judged[i, 0] = 1
        pred[i, 1:, 1], low[i, 1:, 1] = hi + d, eff + d + (o.change_low if o is not None else 0.0)
        if o is not None and o.upper_effect:
            low[i, 1:, 1] = -math.inf
        pred[i, 1:, 2] = low[i, 1:, 2] = upd
        if optimizer in ("adam", "adamw"):       # Adam's first step is ±η·sign(g) exactly; later ones follow the
            pred[i, 2:, 1] = low[i, 2:, 1] = np.nan   # gradient's sign history (judged on the module rows)
        if o is not None and not o.judge_effect:
            pred[i, 1:, 1] = low[i, 1:, 1] = np.nan   # no gradient reaches it (a key's bias under softmax)
        judged[i, 1] = int(np.isfinite(eff))
    return pred, low, judged


def _fit(widths, samples, pred, low, judged, alpha):
    """Plain log-log fits (display) and the exponent tests (verdict) of every (row, step, quantity)."""
    R, T1 = pred.shape[:2]
    shape = (R, T1, 3)
    slope, sse, lo, hi = (np.full(shape, np.nan) for _ in range(4))
    pv = np.full(shape, np.nan)
    cons = np.full(shape, -1, dtype=np.int64)
    xs = np.asarray(widths, float)
    tested = []
    for i in range(R):
        for t in range(T1):
            for q in range(3):
                y = samples[:, :, i, t, q]
                if (t == 0 and q > 0) or np.all(np.isnan(y)):
                    continue
                m, se = mean_se(y, axis=1)
                if np.all(np.isfinite(m)) and np.all(m > 0):
                    f = loglog_fit(xs, m, yerr=np.maximum(se, 1e-12 * m))
                    slope[i, t, q], sse[i, t, q], lo[i, t, q], hi[i, t, q] = f.slope, f.slope_se, f.ci_low, f.ci_high
                if not (judged[i, q] and np.isfinite(pred[i, t, q])):
                    continue
                if not np.all(np.isfinite(m)):
                    cons[i, t, q] = 0                         # diverged: not as predicted
                elif np.all(m > 0):
                    if low[i, t, q] == -math.inf:
                        p, regime = bound_test(xs, y, pred[i, t, q])
                    else:
                        p, regime = exponent_test(xs, y, pred[i, t, q], low[i, t, q])
                    pv[i, t, q] = p
                    tested.append((i, t, q, regime))
    level = alpha / max(1, len(tested) + int(np.sum(cons == 0)))
    for i, t, q, regime in tested:
        cons[i, t, q] = int(regime and pv[i, t, q] >= level)
    return slope, sse, lo, hi, pv, cons


# ---------------------------------------------------------------------- the check
def _as_tensor(a, dtype):
    t = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a)
    if t.is_floating_point():
        return t.to(dtype)
    return t


def _groups(model, groups, lr, width):
    """A factory's own optimizer groups, validated; a group's ``lr_mult`` sets its rate to lr · lr_mult. Refused:
    no trainable tensor in any group, a tensor that is not the module's, a rate ≤ 0 or not finite."""
    own = {id(p): n for n, p in model.named_parameters()}
    out, trainable = [], 0
    for k, g in enumerate(groups):
        if not isinstance(g, dict) or "params" not in g:
            raise ValueError("factory: param_groups must be dicts with 'params' (and 'lr' or 'lr_mult')")
        g = dict(g)
        g["params"] = list(g["params"]) if not isinstance(g["params"], torch.Tensor) else [g["params"]]
        if "lr_mult" in g:
            g["lr"] = float(lr) * float(g.pop("lr_mult"))
        rate = float(g.get("lr", lr))
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"factory({width}): optimizer group {k} ({g.get('name', 'unnamed')}) has learning rate "
                             f"{rate:g}; a coordinate check needs every rate finite and > 0")
        for p in g["params"]:
            if not isinstance(p, torch.Tensor) or id(p) not in own:
                raise ValueError(f"factory({width}): optimizer group {k} holds a tensor that is not a parameter of "
                                 "the module it returns (groups built from another instance?)")
            trainable += int(p.requires_grad)
        out.append(g)
    if not trainable:
        raise ValueError(f"factory({width}): no trainable tensor in the optimizer groups — nothing would move, so "
                         "no exponent could be checked")
    return out


def _check_args(widths, steps, seeds, data, lr, alpha):
    widths = sorted(int(w) for w in widths)
    if len(widths) < 3 or len(set(widths)) != len(widths) or widths[0] < 1:
        raise ValueError(f"widths: need at least 3 distinct positive widths for a slope fit, got {widths}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if int(seeds) < 2:
        raise ValueError(f"seeds must be >= 2 (the CI needs a spread over seeds), got {seeds}")
    if not (math.isfinite(float(lr)) and float(lr) > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr}")
    if not 0 < float(alpha) < 1:
        raise ValueError(f"alpha must be a level in (0, 1), got {alpha}")
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        if isinstance(data, (tuple, list)) or data is None:
            raise ValueError("data must be a pair (X, Y) or the inputs X alone")
        data = (data, None)
    return widths, int(steps), int(seeds), data


def _target(module_factory, expect, optimizer, parameterisation, widths, roles, name, inputs):
    """(factory or Parameterised, table, rules, feature learning, optimizer, label) of a check; ``inputs``: the
    check's inputs X (traced by ``parameterise`` when ``parameterisation`` is given)."""
    if parameterisation is not None:
        if isinstance(module_factory, Parameterised) or expect is not None:
            raise ValueError("parameterisation= applies a table to a plain factory; pass a plain factory and "
                             "no expect= (or a Parameterised alone)")
        from .apply_params import parameterise

        if not callable(module_factory):
            raise ValueError("module_factory must be a callable width -> nn.Module")
        module_factory = parameterise(module_factory, parameterisation, widths=widths,
                                      optimizer=optimizer or "adam", roles=roles,
                                      example_inputs=trace_inputs(module_factory, inputs, widths[0]))
    if isinstance(module_factory, Parameterised):
        P = module_factory
        if expect is not None:
            raise ValueError("expect= is for a factory checked as-is; a Parameterised is checked against its own table")
        if optimizer not in (None, P.optimizer_name):
            raise ValueError(f"optimizer {optimizer!r} differs from the one the table was derived for "
                             f"({P.optimizer_name!r}); parameterise(..., optimizer={optimizer!r})")
        return P, P.table, P.rules, P.feature_learning, P.optimizer_name, name or f"{P.name} (parameterised)"
    if not callable(module_factory):
        raise ValueError("module_factory must be a Parameterised or a callable width -> nn.Module")
    if expect is None:
        raise ValueError("expect: name the parameterisation a factory checked as-is should follow (e.g. 'muP')")
    optimizer = optimizer or "adam"
    p = resolve_table(expect, optimizer)
    rules, _ = classify(module_factory, widths, roles, inputs=trace_inputs(module_factory, inputs, widths[0]))
    from ..params import classify as classify_p

    fl = classify_p(p).regime == "feature-learning"
    return module_factory, p, rules, fl, optimizer, name or f"as built, expected {getattr(p, 'name', expect)}"


def trace_inputs(factory, X, width) -> tuple:
    """``(X,)`` as a tensor of ``factory(width)``'s floating dtype (integer inputs as they are), for tracing."""
    with torch.random.fork_rng(devices=[]):
        m = _build(factory, width)
    dtype = next((q.dtype for q in m.parameters() if q.is_floating_point()), torch.float32)
    return (_as_tensor(X, dtype),)


def _build_run(factory, N, lr, data, seed):
    """(model, groups, X, Y, data) at width N (data gains fixed N(0, 1) targets when it has none)."""
    if isinstance(factory, Parameterised):
        model = factory(N)
        groups = factory.param_groups(model, lr)
    else:
        built = factory(N)
        model, groups = (built if isinstance(built, tuple) else (built, None))
        if not isinstance(model, nn.Module):
            raise ValueError(f"factory({N}) must return an nn.Module, got {type(model).__name__}")
        groups = [{"params": list(model.parameters())}] if groups is None else groups
        groups = _groups(model, groups, lr, N)
    dtype = next((q.dtype for q in model.parameters() if q.is_floating_point()), torch.float32)
    X = _as_tensor(data[0], dtype)
    if data[1] is None:                     # inputs only: fixed N(0, 1) targets of the output's shape
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out0 = model(X)
        out0 = out0[0] if isinstance(out0, tuple) else out0
        g = torch.Generator().manual_seed(int(seed))
        data = (data[0], torch.randn(out0.shape, generator=g, dtype=out0.dtype))
    return model, groups, X, _as_tensor(data[1], dtype), data


def coord_check(module_factory, widths, data, optimizer=None, lr=1e-2, steps=3, seeds=4, expect=None,
                loss=None, alpha=0.05, roles=None, seed=0, name=None, threads=None,
                parameterisation=None, progress=None) -> TorchCoordCheck:
    """Coordinate check (module docstring). ``module_factory``: a :class:`Parameterised` (predictions from its
    table; ``optimizer`` defaults to its own) or a plain ``factory(width)`` checked as-is against the
    parameterisation ``expect`` (the factory may return ``(module, param_groups)`` for its own per-tensor
    learning rates; a group's ``lr_mult`` means lr · lr_mult). ``parameterisation``: a name for a plain factory
    — shorthand for ``coord_check(parameterise(factory, name, widths[:2], optimizer, example_inputs=(X,)), …)``
    (traced on the check's own inputs). ``alpha``: the
    family-wise false-alarm level of the verdict. ``threads``: torch threads during the runs (default
    ``$LIMITS_BLAS_THREADS``, 1). ``data``: ``(X, Y)`` (arrays or tensors; integer Y → cross-entropy) or inputs X
    alone (then fixed N(0, 1) regression targets of the output's shape, drawn from ``seed``). ``seeds``: a count.
    ``progress``: None (a bar on a terminal, else a line every 10 s), True, False."""
    t_cpu = time.process_time()
    widths, steps, seeds, data = _check_args(widths, steps, seeds, data, lr, alpha)
    check_seed(seed)
    data = check_factory_data(module_factory, widths[0], data, loss=loss, inputs_only=True)   # before any training
    factory, p, rules, fl, optimizer, title = _target(module_factory, expect, optimizer, parameterisation, widths,
                                                      roles, name, data[0])
    rule_of = {plain_key(q.name): q for q in rules}
    runs = _runs(factory, rules, widths, seeds, steps, data, lr, optimizer, loss or default_loss, seed, threads,
                 progress)
    order, samples, descs, sites = runs["order"], runs["samples"], runs["descs"], runs["sites"]
    na, nb = widths[0], widths[1]
    head_scales = {site_key(a.site): a.head_dim == "scales"
                   for a in width_scaling(_known(sites[na]), _known(sites[nb]), na, nb)}
    offs, out_fixed, plan_info = _plan_offsets(factory, p, rules, fl, optimizer, order, runs, widths)
    pred, low, judged = _predict(p, order, rule_of, fl, optimizer, head_scales, steps, offs, out_fixed)
    slope, sse, lo, hi, pv, cons = _fit(widths, samples, pred, low, judged, alpha)
    labels, kinds, rl = _labels(order, rule_of, descs, na, nb)
    rl = tuple("output" if k == "module" and key in out_fixed and r not in ("norm", "output") else r
               for (key, k, _), r in zip(order, rl))
    settings = {"optimizer": optimizer, "lr": float(lr), "seed": int(seed),
                "parameterisation": str(getattr(p, "name", "")), "feature_learning": bool(fl),
                "head_dim_scales": {k: bool(v) for k, v in head_scales.items()},
                "untrained_rows": runs["untrained"], "unrecorded_tensors": runs["unrecorded"],
                "attention_not_measured": {s.name: s.reason or "unrecognised" for s in sites[na]
                                           if s.kind == "unrecognised"}, **plan_info}
    return TorchCoordCheck(title, np.asarray(widths, float), labels, kinds, rl, steps, seeds, samples, slope, sse,
                           lo, hi, pred, low, np.repeat(judged[:, None, :], steps + 1, axis=1), pv, cons,
                           float(alpha), time.process_time() - t_cpu, settings)


def _runs(factory, rules, widths, seeds, steps, data, lr, optimizer, loss_fn, seed, threads, progress=None) -> dict:
    """Every training run of a check: ``order`` (rows), ``samples`` (widths, seeds, rows, steps+1, 3), per width
    ``descs`` (module labels), ``sites`` (attention), ``lrs`` ({tensor: rate}); ``probes``: (untrained copy,
    trace) of the first seed's module at each width (the plan's offsets are read from two of them);
    ``untrained`` (rows exempt from "no measurement") and ``unrecorded`` (trained tensors no row measures and no
    run changed). ``progress``: a bar, or a line every 10 s (:func:`limits.torch.progress_lines.runs`)."""
    samples = order = None
    descs, sites, tied, lrs, probes = {}, {}, {}, {}, {}
    bar = progress_runs(len(widths) * seeds, "coord-check", progress)
    watch = Unchanged()                                                  # trained tensors no run changed
    for wi, N in enumerate(widths):
        for s in each_seed(bar, N, seeds):
            with torch.random.fork_rng(devices=[]), torch_threads(threads):
                torch.manual_seed(int(seed) * 1_000_003 + s)
                model, groups, X, Y, data = _build_run(factory, N, lr, data, seed)
                if s == 0:
                    descs[N] = {n: describe(m) for n, m in model.named_modules()}
                    tr = _trace(model, X)
                    sites[N] = _graph_sites(tr, model)
                    tied[N] = _tied_readouts(factory, model)
                    lrs[N] = _rates(model, groups, lr)
                    probes[N] = (copy.deepcopy(model), tr)
                watch.before(model, groups)
                rows, res = run_one(model, rules, sites[N], groups, X, Y, optimizer, lr, steps, loss_fn, tied[N])
                watch.after()
            if order is None:
                order = rows
                if not any(k != "tensor" for _, k, _ in order):
                    raise ValueError("coord_check: no input/hidden/output module to record")
                rule_of = {plain_key(q.name): q for q in rules}
                untrained = untrained_rows(model, groups, order, rule_of)      # exempt from "no measurement"
                unrecorded = unrecorded_tensors(model, groups, order)        # trained, never measured
                samples = np.full((len(widths), seeds, len(order), steps + 1, 3), np.nan)
            idx = {r[0]: i for i, r in enumerate(rows)}
            for j, (key, kind, extra) in enumerate(order):
                if key in idx:
                    samples[wi, s, j] = res[idx[key]]
    bar.close()
    return {"order": order, "samples": samples, "descs": descs, "sites": sites, "lrs": lrs, "probes": probes,
            "untrained": untrained, "unrecorded": [n for n in unrecorded if n in watch.never]}


def _trace(model, X):
    """The traced forward of ``model`` on ``X`` (:func:`limits.torch.graph.trace`)."""
    with torch.random.fork_rng(devices=[]):
        return trace(model, (X,))


def _rates(model, groups, lr) -> dict:
    """{plain tensor name: its learning rate} of the optimizer groups."""
    names = {id(q): plain_key(n) for n, q in model.named_parameters()}
    out = {}
    for g in groups:
        for q in g["params"]:
            if id(q) in names:
                out[names[id(q)]] = float(g.get("lr", lr))
    return out


def _plan_offsets(factory, p, rules, fl, optimizer, order, runs, widths) -> tuple:
    """({row: :class:`limits.torch.plan.RowOffset`}, module rows with a width-independent output, settings) from
    the plan of a Parameterised — or, for a module checked as built, its measured init and rates — propagated
    through the traced graph (:mod:`limits.torch.offsets`)."""
    from .offsets import build, role_of_use
    from .plan import RowOffset, fitted_exponent, measured_gauges, plan_gauges, row_offsets

    na, nb = _aligned_pair(runs["probes"], widths)
    (ma, ta), (mb, tb) = runs["probes"][na], runs["probes"][nb]
    try:
        graph = build(ma, mb, na, nb, None, role_of_use(rules), fl, traces=(ta, tb))
    except Exception as exc:               # noqa: BLE001 — the check runs on, with the rows' own predictions
        return {}, set(), {"plan": [f"offsets not computed ({type(exc).__name__}: {str(exc)[:200]})"]}
    if isinstance(factory, Parameterised):
        gauges = plan_gauges(factory, graph)
    else:
        samples = runs["samples"]
        init_exp = {plain_key(k): fitted_exponent(widths, samples[:, :, i, 0, 0])
                    for i, (k, kind, _) in enumerate(order) if kind == "tensor"}
        lr_exp = {}
        for n in runs["lrs"][na]:
            v = [runs["lrs"][N].get(n) for N in widths]
            if all(x is not None and x > 0 for x in v):
                lr_exp[n] = float(np.polyfit(np.log(widths), np.log(v), 1)[0])
        gauges = measured_gauges(rules, p, optimizer, graph, init_exp, lr_exp)
    called = _called(ta)
    rule_of = {plain_key(q.name): q for q in rules}
    offs, req, notes = row_offsets(order, graph, gauges, rule_of, lambda key: _owner(key, called), p, optimizer)
    for key in _softmax_invariant(runs["sites"][widths[0]], order):
        offs[key] = dataclasses.replace(offs.get(key, RowOffset()), judge_effect=False)
        notes.append(f"{plain_key(key)}: the key's bias gets no gradient (softmax over the keys is invariant to it): "
                     "its effect is not judged")
    fixed = set()
    for key, kind, _ in order:
        node = graph.module_node(key) if kind == "module" else None
        other = _same_node(ta, tb, node)
        if node is not None and other is not None and _shape(ta, node) is not None and \
                _shape(ta, node) == _shape(tb, other):
            fixed.add(key)
    info = {"plan": notes, "trace": graph.method,
            "indirect": [plain_key(k) for k, o in offs.items() if not o.direct],
            "offsets": {k: float(o.offset) for k, o in offs.items() if abs(o.offset) > 1e-9},
            "plan_notes": list(graph.notes[:8])}
    return offs, fixed, info


def _softmax_invariant(sites, order) -> list:
    """Row keys of key-projection biases of their own (not shared with the query's rows): q·(k + b) adds q·b to
    every key's logit alike, which the softmax removes, so they get no gradient."""
    keys = {s.key.bias for s in sites if s.kind != "unrecognised" and s.key is not None and s.key.bias
            and (s.query is None or s.key.bias != s.query.bias)}
    return [k for k, kind, _ in order if kind == "tensor" and plain_key(k) in keys]


def _aligned_pair(probes, widths) -> tuple:
    """The first two consecutive widths whose traced forwards have the same ops (a forward may branch on the width,
    e.g. skip a multiplier that is 1 at the base width), else the two smallest."""
    for a, b in zip(widths, widths[1:]):
        ta, tb = probes[a][1], probes[b][1]
        if len(ta.nodes) == len(tb.nodes) and all((x.kind, x.name) == (y.kind, y.name)
                                                  for x, y in zip(ta.nodes, tb.nodes)):
            return a, b
    return widths[0], widths[1]


def _same_node(ta, tb, node):
    """The node of ``tb`` that is ``ta``'s node ``node``: the same leaf module's last call, else the same index
    when the two forwards have the same ops."""
    if node is None:
        return None
    n = ta.nodes[node]
    if n.kind == "module":
        hits = [m.index for m in tb.nodes if m.kind == "module" and m.name == n.name]
        return hits[-1] if hits else None
    same = len(ta.nodes) == len(tb.nodes) and all(x.name == y.name for x, y in zip(ta.nodes, tb.nodes))
    return node if same else None


def _shape(t, node):
    if node >= len(t.nodes):
        return None
    v = t.nodes[node].value
    v = v[0] if isinstance(v, (tuple, list)) and v else v
    return tuple(v.shape) if isinstance(v, torch.Tensor) else None


def _called(t) -> set:
    """Module paths the traced forward calls: leaf modules, enclosing scopes and their ancestors, the root."""
    out = {""}
    for n in t.nodes:
        for path in ((n.name,) if n.kind == "module" else ()) + (n.scope,):
            parts = path.split(".") if path else []
            out.update(".".join(parts[:k]) for k in range(len(parts) + 1))
    return out


def _owner(key, called) -> str:
    """The nearest called module owning tensor ``key`` (whose output its effect is measured on)."""
    parts = plain_key(key).split(".")[:-1]
    for k in range(len(parts), -1, -1):
        path = ".".join(parts[:k])
        if path in called:
            return path
    return ""


def rejudge(r, alpha=None) -> TorchCoordCheck:
    """``r`` with its verdicts recomputed from its samples and predictions by this version's exponent test
    (at ``alpha``, default r's own): a saved check judged again without training anything."""
    import dataclasses

    a = r.alpha if alpha is None else float(alpha)
    slope, sse, lo, hi, pv, cons = _fit(r.widths, r.samples, r.predicted, r.predicted_low, r.judged[:, 0, :], a)
    return dataclasses.replace(r, slope=slope, slope_se=sse, ci_low=lo, ci_high=hi, p_value=pv, consistent=cons,
                               alpha=a)


def _tied_readouts(factory, model) -> tuple:
    """Module paths of the read-outs sharing the token embedding's tensor: a Parameterised's own
    (:class:`limits.torch.structure.TiedReadout`), else those :func:`limits.torch.graph.find_ties` finds."""
    if isinstance(factory, Parameterised):
        return tuple(t.module for t in factory.readouts)
    return tuple(t.readout for t in find_ties(model) if t.kind == "embedding-readout")


def _known(sites):
    return tuple(s for s in sites if s.kind != "unrecognised")


def _labels(order, rule_of, descs, na, nb):
    """Row labels (bare Sequential indices say what they are), kinds and roles."""
    labels, kinds, roles = [], [], []
    for key, kind, extra in order:
        if kind == "tensor":
            q = rule_of[plain_key(key)]
            lab = label(q.module, descs[na].get(q.module), descs[nb].get(q.module), na, nb)
            labels.append(plain_key(key) + lab[len(q.module):])
            roles.append(q.role)
        elif kind == "logits":
            site = key.split(":logits")[0]
            lab = label(site, descs[na].get(site), descs[nb].get(site), na, nb)
            labels.append(lab + key[len(site):])
            roles.append("logits")
        else:
            labels.append(label(key, descs[na].get(key), descs[nb].get(key), na, nb))
            roles.append(extra)
        kinds.append(kind)
    return tuple(labels), tuple(kinds), tuple(roles)
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


__all__ = ["coord_check", "rejudge", "TorchCoordCheck", "predictions", "tensor_predictions", "synthetic_data", "default_loss",
           "QUANTITIES"]
