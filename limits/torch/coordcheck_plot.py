"""The figure of a coordinate check (:meth:`limits.torch.coordcheck.TorchCoordCheck.plot`): one row per module,
attention-logits or tensor row, in forward order from the top, names written horizontally; two panels —

* left: the width exponent of the **scale at init** (step 0), fitted (dot, 95 % CI) against the prediction (|);
* right: the exponent of the **change** (for a tensor: the effect of its own update) after **every** step
  t = 1…T, one colour per step, against the prediction (| for a point, a grey bar for a crossover range).

Cells the verdict rejects are ringed in red; the names of failing rows are red and marked ✗, rows without a
measured change (:mod:`limits.torch.measured`) orange, rows no verdict is given on grey. So a row wrong at
init, or at the first step only, shows — the previous figure drew the last step alone, with names rotated 70°
at 6 pt.
"""
from __future__ import annotations

import numpy as np

RED, ORANGE, GREY = "#c0392b", "#d35400", "#7f8c8d"
QUANTITIES = ("scale", "change", "update")          # the last axis of a check's arrays (coordcheck.QUANTITIES)


def _xlim(values):
    v = np.asarray([x for x in values if np.isfinite(x)], float)
    if not v.size:
        return -1.5, 1.5
    lo, hi = float(v.min()), float(v.max())
    return min(lo, -0.5) - 0.75, max(hi, 0.5) + 0.75


def _panel(ax, r, q, steps, y, colours):
    """Fitted exponents (dots, CIs) of quantity ``q`` at ``steps`` and their predictions, rows at ``y``."""
    R = len(r.tensors)
    k = len(steps)
    offsets = np.linspace(-0.28, 0.28, k) if k > 1 else np.zeros(1)
    shown = []
    for j, t in enumerate(steps):
        s, lo, hi = r.slope[:, t, q], r.ci_low[:, t, q], r.ci_high[:, t, q]
        ok = np.isfinite(s)
        judged = ok & (r.judged[:, t, q] == 1) & np.isfinite(r.predicted[:, t, q])
        for sel, face, lab in ((judged, colours[j], f"fitted, step {t} (95 % CI)" if k > 1 else "fitted (95 % CI)"),
                               (ok & ~judged, "white", "fitted, no verdict on it (shown)")):
            if sel.any():
                ax.errorbar(s[sel], y[sel] + offsets[j], xerr=[s[sel] - lo[sel], hi[sel] - s[sel]], fmt="o",
                            ms=3.5, color=colours[j], mfc=face, elinewidth=1, capsize=0,
                            alpha=1.0 if face != "white" else 0.7, label=lab)
        bad = (r.consistent[:, t, q] == 0) & ok
        if bad.any():
            ax.plot(s[bad], y[bad] + offsets[j], "o", mfc="none", mec=RED, ms=9, mew=1.4,
                    label="not as predicted" if "ring" not in shown else None)
            shown.append("ring")
        shown += list(s[ok])                   # the axis follows the fits; a wider CI runs to the edge
    t = steps[-1]
    p, pl = r.predicted[:, t, q], r.predicted_low[:, t, q]
    point = np.isfinite(p) & ~(pl < p)
    ax.plot(p[point], y[point], "|", color="k", ms=13, mew=2, label="predicted (N → ∞)")
    for i in np.nonzero(np.isfinite(p) & (pl < p))[0]:
        ax.plot([pl[i], p[i]], [y[i], y[i]], "-", color="0.55", lw=6, alpha=0.45, solid_capstyle="butt",
                label="predicted range (crossover)" if i == np.nonzero(np.isfinite(p) & (pl < p))[0][0] else None)
    ax.set_xlim(*_xlim([v for v in shown if isinstance(v, float)] + list(p[np.isfinite(p)]) + list(pl[np.isfinite(pl)])))
    ax.set_ylim(R - 0.5, -0.5)
    ax.grid(axis="x", color="0.9", lw=0.8)
    for i in range(R):
        if i % 2:
            ax.axhspan(i - 0.5, i + 0.5, color="0.965", lw=0, zorder=0)


def _row_styles(r):
    """(label text, colour, weight) per row: failing ✗ red, unmeasured orange, not judged grey; a zero init's scale
    at init says it is not measurable."""
    fails = set(r.failing_tensors())
    none = dict(r.unmeasured())
    zero = {n for n, _ in r.not_measurable()}
    out = []
    for i, name in enumerate(r.tensors):
        if name in zero and name not in fails and name not in none:
            out.append((f"{name} (zero init: scale not measurable)", "0.1", "normal"))
        elif name in fails:
            out.append((f"✗ {name}", RED, "bold"))
        elif name in none:
            out.append((f"{name} — {none[name]}", ORANGE, "bold"))
        elif not np.any(r.consistent[i] >= 0):
            out.append((name, GREY, "normal"))
        else:
            out.append((name, "0.1", "normal"))
    return out


def plot_coord_check(r, target=None, quantity="change", step=None):
    """The coordinate check's figure (module docstring). ``quantity``: the right panel's "change" (default),
    "scale" or "update"; ``step``: one step instead of every step. ``target``: a path, an Axes (split in two),
    two Axes, or None (:func:`limits.style.plot_target`); returns the Figure."""
    from ..style import plot_target

    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
    q = QUANTITIES.index(quantity)
    steps = list(range(1, r.steps + 1)) if step is None else [int(step)]
    if any(not 0 <= t <= r.steps for t in steps):
        raise ValueError(f"step must lie in [0, {r.steps}], got {step}")
    R = len(r.tensors)
    pt = plot_target(target, 2, figsize=(11.0, 1.6 + 0.24 * R), what="TorchCoordCheck.plot")
    left, right = pt.axes
    y = np.arange(R, dtype=float)
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    colours = [cmap(0.1 + 0.75 * j / max(1, len(steps) - 1)) for j in range(len(steps))]
    _panel(left, r, 0, [0], y, ["C0"])
    _panel(right, r, q, steps, y, colours)
    styles = _row_styles(r)
    left.set_yticks(y)
    left.set_yticklabels([s[0] for s in styles], fontsize=8)
    for tick, (_, colour, weight) in zip(left.get_yticklabels(), styles):
        tick.set_color(colour)
        tick.set_fontweight(weight)
    right.set_yticks(y)
    right.set_yticklabels([])
    left.set_xlabel("width exponent of the scale at init (step 0)", fontsize=9)
    what = {"change": "change since init\n(tensors: the effect of their own update)", "scale": "scale\n",
            "update": "update ‖W_t − W_0‖\n(not judged)"}[quantity]
    right.set_xlabel(f"width exponent of the {what}" + (f", steps 1…{r.steps}" if step is None else f", step {step}"),
                     fontsize=9)
    n_bad, n_none = len(r.failing_tensors()), len([n for n, _ in r.unmeasured() if n != "training"])
    verdict = "all rows as predicted" if r.passed else ", ".join(
        x for x in (f"{n_bad} row(s) not as predicted (✗)" if n_bad else "",
                    f"{n_none} without a measured change" if n_none else "",
                    "training diverged" if any(n == "training" for n, _ in r.unmeasured()) else "") if x)
    left.set_title(f"{r.name}\nwidths {int(r.widths[0])}–{int(r.widths[-1])}, {r.seeds} seeds: {verdict}",
                   fontsize=9.5, loc="left", color="0.1" if r.passed else RED)
    handles, labels = [], []
    for ax in (right, left):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    right.legend(handles, labels, fontsize=7.5, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=2,
                 frameon=False, borderaxespad=0.0)           # above the panel: no row is covered
    return pt.finish()


__all__ = ["plot_coord_check"]
