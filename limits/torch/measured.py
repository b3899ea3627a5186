"""No verdict without a measurement: the rows of a coordinate check (and the tensors of a transfer study) that
training never moved measurably, and the runs that diverged — a check with any of them does not pass.

A judged row of :class:`limits.torch.coordcheck.TorchCoordCheck` is *measured* when at some step t ≥ 1 its change
m_N(t) (mean over seeds) is finite and > 0 at every width: only then is there a width series to fit. A row whose
change is 0 at every step (zero gradients: all-zero weights, a read-out initialised to zero checked for one step,
a detached use) or positive at some widths only is reported by name with the reason. A run (width, seed) whose
rows are all NaN from some step on stopped on a non-finite loss: it *diverged*. Rows of tensors that are not
trained (``requires_grad=False`` or in no optimizer group), and module rows whose own tensors are all untrained,
are exempt: nothing of theirs was meant to move. A trained tensor that is no row at all (its module is never
called: a weight used through ``torch.nn.functional``) and that no run changed is reported too.

A transfer study's run records how many of its trained tensors never changed (:func:`unchanged_tensors`); a size
at which every run left a tensor unchanged, or at which every run diverged, measures nothing about those
tensors, and the study is inconclusive (:func:`transfer_unmeasured`).
"""
from __future__ import annotations

import numpy as np

from .graph import plain_key


def untrained_rows(model, groups, order, rule_of) -> list:
    """Indices of the rows of ``order`` exempt from the measurement rule (module docstring)."""
    trained = {id(p) for g in groups for p in g["params"] if getattr(p, "requires_grad", False)}
    names = {plain_key(n) for n, p in model.named_parameters() if id(p) in trained}
    own = {}
    for q in rule_of.values():
        own.setdefault(q.module, []).append(plain_key(q.name))
    out = []
    for i, (key, kind, _) in enumerate(order):
        if kind == "tensor" and plain_key(key) not in names:
            out.append(i)
        elif kind == "module" and own.get(key) and not any(n in names for n in own[key]):
            out.append(i)
    return out


class Unchanged:
    """The trained tensors (plain names) that no run changed: ``before(model, groups)`` and ``after()`` around each
    run compare float64 fingerprints (:func:`fingerprints`); ``never`` is the set unchanged in every run."""

    def __init__(self):
        self.never = None

    def before(self, model, groups):
        trained = {id(p) for g in groups for p in g["params"] if getattr(p, "requires_grad", False)}
        self._named = [(plain_key(n), p) for n, p in model.named_parameters() if id(p) in trained]
        self._fp = fingerprints([p for _, p in self._named])

    def after(self):
        now = fingerprints([p for _, p in self._named])
        same = {n for (n, _), a, b in zip(self._named, self._fp, now) if a == b}
        self.never = same if self.never is None else self.never & same


def unrecorded_tensors(model, groups, order) -> list:
    """Plain names of the trained tensors that are no row of ``order``: no module owning them is called in the
    forward (nn.MultiheadAttention's ``out_proj``; a weight used through ``torch.nn.functional``). One that
    changes moves a row downstream; one that no run changes (:class:`Unchanged`) was never measured."""
    trained = {id(p) for g in groups for p in g["params"] if getattr(p, "requires_grad", False)}
    rows = {plain_key(k) for k, kind, _ in order if kind == "tensor"}
    return [plain_key(n) for n, p in model.named_parameters() if id(p) in trained and plain_key(n) not in rows]


def diverged_runs(samples) -> list:
    """[(width index, seed, first NaN step)] of runs whose rows are all NaN from a step t ≥ 1 on."""
    W, S, _, T1, _ = samples.shape
    out = []
    for w in range(W):
        for s in range(S):
            dead = np.all(np.isnan(samples[w, s]), axis=(0, 2))          # per step: every row and quantity NaN
            steps = [t for t in range(1, T1) if dead[t:].all()]
            if steps and not dead[0]:
                out.append((w, s, steps[0]))
    return out


def _row_status(y, widths, live):
    """'' (measured), or the reason: y (W, S, T+1) the change of one row; live (W, S, T+1) the runs not diverged."""
    zero_everywhere, some = True, set()
    for t in range(1, y.shape[2]):
        m = np.array([np.mean(y[w, live[w, :, t], t]) if live[w, :, t].any() else np.nan for w in range(len(widths))])
        if np.all(np.isfinite(m)) and np.all(m > 0):
            return ""
        pos = np.isfinite(m) & (m > 0)
        if pos.any():
            zero_everywhere = False
            some.update(int(widths[w]) for w in np.nonzero(pos)[0])
    if zero_everywhere:
        return "did not change"
    return "changed at width " + ", ".join(str(w) for w in sorted(some)) + " only"


def unmeasured_rows(r) -> list:
    """[(row label, reason)] of the judged rows of a coordinate check without a measurement, and one entry
    ("training", reason) per width where a run diverged (module docstring)."""
    samples = np.asarray(r.samples, float)
    W, S, R, T1, _ = samples.shape
    dead = diverged_runs(samples)
    live = np.ones((W, S, T1), dtype=bool)
    for w, s, t in dead:
        live[w, s, t:] = False
    exempt = set(r.settings.get("untrained_rows", ()))
    out = []
    for i in range(R):
        judged = r.judged[i, 1:, 1].astype(bool) & np.isfinite(r.predicted[i, 1:, 1])
        if i in exempt or not judged.any():
            continue
        why = _row_status(samples[:, :, i, :, 1], r.widths, live)
        if why:
            out.append((r.tensors[i], why))
    for name in r.settings.get("unrecorded_tensors", ()):
        out.append((name, "trained, never changed, and no row of its own: its module is never called (a detached "
                          "weight used through torch.nn.functional?)"))
    by_width = {}
    for w, s, t in dead:
        by_width.setdefault(w, []).append((s, t))
    for w, runs in sorted(by_width.items()):
        first = min(t for _, t in runs)
        out.append(("training", f"training diverged (non-finite loss) at width {int(r.widths[w])} in {len(runs)} "
                                f"of {S} seeds, from step {first}"))
    return out


def unmeasured_text(items) -> str:
    """One sentence from :func:`unmeasured_rows`; '' when every row was measured."""
    if not items:
        return ""
    rows = [(n, why) for n, why in items if n != "training"]
    parts = []
    if rows:
        still = [n for n, why in rows if why == "did not change"]
        other = [f"{n} ({why})" for n, why in rows if why != "did not change"]
        shown = still[:8] + other[:4]
        more = len(rows) - len(shown)
        parts.append(f"{len(rows)} judged row{'s' if len(rows) > 1 else ''} or tensor{'s' if len(rows) > 1 else ''} "
                     "without a measured change: "
                     + ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")
                     + (" — they did not change in training (zero gradients: all-zero weights, a detached use, or "
                        "a read-out initialised to zero needs ≥ 2 steps)" if still else ""))
    parts += [why for n, why in items if n == "training"]
    return "No verdict without a measurement: " + "; ".join(parts) + "."


# ------------------------------------------------------------------------------------------- transfer studies
def fingerprints(params) -> list:
    """(Σw, Σw²) in float64 of each tensor: equal before and after iff (almost surely) the tensor did not change."""
    import torch

    with torch.no_grad():
        return [(float(p.detach().double().sum()), float(p.detach().double().pow(2).sum())) for p in params]


def unchanged_tensors(before, params) -> tuple:
    """(count, index of the first) of the tensors whose fingerprint is unchanged (-1: none)."""
    after = fingerprints(params)
    same = [i for i, (a, b) in enumerate(zip(before, after)) if a == b]
    return len(same), (same[0] if same else -1)


def transfer_unmeasured(raw, sizes, axis, names=None) -> str:
    """'' or the reason a transfer study measured nothing at some size: every finished run at that size left
    a trained tensor unchanged (``raw['unchanged']`` ≥ 1), or every run diverged. ``names(size)``: the trained
    tensors' names at that size (to name the first unchanged one)."""
    failed = np.asarray(raw["failed"], bool)
    div = np.asarray(raw["diverged"], bool)
    dead, still = [], []
    for k, n in enumerate(np.asarray(sizes)):
        ok = ~failed[k]
        if not ok.any():
            continue
        if div[k][ok].all():
            dead.append(int(n))
            continue
        if raw.get("unchanged") is None:
            continue
        u = np.asarray(raw["unchanged"], float)[k][ok & ~div[k]]
        if u.size and np.all(u >= 1):
            i = int(np.asarray(raw["unchanged_first"], float)[k][ok & ~div[k]].flat[0])
            still.append((int(n), int(u.min()), i))
    def at(ns):
        return f"{axis}{'s' if len(ns) > 1 else ''} {', '.join(str(n) for n in ns)}"

    parts = []
    if dead:
        parts.append(f"every run diverged at {at(dead)} (non-finite, or above the divergence threshold)")
    if still:
        n0, c0, i0 = still[0]
        known = names(n0) if names else []
        label = repr(known[i0]) if 0 <= i0 < len(known) else f"tensor #{i0}"
        parts.append(f"at {at([n for n, _, _ in still])} every run left {min(c for _, c, _ in still)} "
                     f"or more trained tensors unchanged (e.g. {label}; zero gradients: all-zero weights or a "
                     "detached use), so the learning-rate curves say nothing about them")
    return ("no measurement: " + "; ".join(parts)) if parts else ""


__all__ = ["Unchanged", "untrained_rows", "unrecorded_tensors", "diverged_runs", "unmeasured_rows", "unmeasured_text", "fingerprints",
           "unchanged_tensors", "transfer_unmeasured"]
