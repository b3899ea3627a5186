"""Shared matplotlib style for paper figures (headless-safe: uses the Agg backend) and the small plotting
helpers the notebooks share."""
from __future__ import annotations

import contextlib

import numpy as np

PAPER_RC = {
    "figure.figsize": (4.8, 3.4),
    "figure.dpi": 110,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "errorbar.capsize": 2,
    "axes.prop_cycle": None,  # filled in below
}

# colour-blind-safe cycle (Okabe–Ito)
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def _rc():
    import matplotlib as mpl

    rc = dict(PAPER_RC)
    rc["axes.prop_cycle"] = mpl.cycler(color=PALETTE)
    return rc


def pyplot():
    """Import ``matplotlib.pyplot`` — on the non-interactive Agg backend, except inside a Jupyter
    kernel, whose inline backend is left alone so figures still display."""
    import sys

    import matplotlib

    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def paper_style():
    """``with paper_style(): fig, ax = pyplot().subplots()`` — the project's figure look."""
    import matplotlib as mpl

    pyplot()
    with mpl.rc_context(_rc()):
        yield


def theory_vs_finite(ax, x, theory, estimate=None, se=None, label="theory", finite_label="finite N",
                     color=None, marker="o"):
    """The house convention: theory as a line, finite-network Monte Carlo as points with ±SE bars."""
    line, = ax.plot(x, theory, "-", color=color, label=label)
    if estimate is not None:
        ax.errorbar(x, estimate, yerr=se, fmt=marker, color=line.get_color(), mfc="none",
                    label=finite_label)
    return line


def int_xticks(ax, xs):
    """Plain integer labels at the given positions of a log x-axis."""
    from matplotlib.ticker import NullLocator

    ax.set_xticks(list(xs))
    ax.set_xticklabels([str(int(v)) for v in xs])
    ax.xaxis.set_minor_locator(NullLocator())


def power_law(x, y, exponent):
    """The power law ``c·x**exponent`` with c fitted to (x, y) by the geometric mean — a guide line
    of a predicted slope through measured points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return np.exp(np.mean(np.log(y) - exponent * np.log(x))) * x ** exponent


def show(fig):
    """Display a figure inline in a notebook (IPython) and free it."""
    from IPython.display import display

    display(fig)
    pyplot().close(fig)


# ---------------------------------------------------------------------------------------------- result.plot(target)
class PlotTarget:
    """Where a result's ``.plot(target)`` draws (:func:`plot_target`): ``fig``, ``axes`` (one per panel),
    and :meth:`finish`, which saves the figure when the target was a path and returns the Figure."""

    def __init__(self, fig, axes, path=None):
        self.fig, self.axes, self.path = fig, list(axes), path

    def finish(self):
        if self.path is not None:
            save_figure(self.fig, self.path)
            pyplot().close(self.fig)          # saved: no figure left open in a loop of plot(path) calls
        return self.fig


def plot_target(target, panels=1, figsize=None, what="plot") -> PlotTarget:
    """The one rule every result's ``.plot(target)`` follows:

    * ``None`` — a new figure (returned; shown inline in a notebook);
    * a path (``str`` or ``os.PathLike``; .png, .pdf, .svg or another format matplotlib writes) — a new
      figure, saved there atomically by :meth:`PlotTarget.finish` (no timestamps in the metadata) and
      closed; it is still returned;
    * a matplotlib ``Axes`` — drawn into it; a plot of ``panels`` > 1 panels splits that axes' place in its
      figure into ``panels`` side by side;
    * a sequence of ``panels`` Axes — one panel each.

    ``.plot`` always returns the Figure (its panels: ``fig.axes``)."""
    import os

    from matplotlib.axes import Axes

    if target is None or isinstance(target, (str, os.PathLike)):
        path = None
        if target is not None:
            path = figure_path(target, what)
        fig, axes = pyplot().subplots(1, panels, figsize=figsize, constrained_layout=True, squeeze=False)
        return PlotTarget(fig, axes[0], path)
    if isinstance(target, Axes):
        return PlotTarget(target.figure, [target] if panels == 1 else _split(target, panels))
    if isinstance(target, (list, tuple)) and len(target) == panels and all(isinstance(a, Axes) for a in target):
        return PlotTarget(target[0].figure, target)
    raise ValueError(f"{what}: the target must be None, a file path (.png/.pdf/.svg), a matplotlib Axes or a "
                     f"sequence of {panels} Axes; got {type(target).__name__}"
                     + (f" of length {len(target)}" if isinstance(target, (list, tuple)) else ""))


def _split(ax, n):
    """``n`` axes side by side in the place of ``ax`` (which is removed)."""
    fig = ax.figure
    spec = ax.get_subplotspec()
    if spec is not None:
        gs = spec.subgridspec(1, n, wspace=0.35)
        ax.remove()
        return [fig.add_subplot(gs[0, i]) for i in range(n)]
    x0, y0, w, h = ax.get_position().bounds
    ax.remove()
    gap = 0.1 * w / n
    return [fig.add_axes([x0 + i * w / n + (gap / 2 if i else 0), y0, w / n - gap / 2, h]) for i in range(n)]


def figure_path(path, what="plot"):
    """``path`` as a Path whose suffix is a format matplotlib writes (.png, .pdf, .svg, …), else ValueError."""
    from pathlib import Path

    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(path)
    ext = path.suffix.lower().lstrip(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        raise ValueError(f"{what}: {path} has {'no suffix' if not ext else f'the suffix .{ext}'}; give a "
                         f"file name ending in one of {', '.join('.' + f for f in sorted(formats))}")
    return path


def save_figure(fig, path):
    """``fig`` written atomically to ``path`` (format from the suffix); PNG, PDF and SVG byte-for-byte
    reproducible (no timestamps or software versions in their metadata)."""
    import io

    import matplotlib as mpl

    from .results import atomic_write_bytes

    path = figure_path(path, "save_figure")
    ext = path.suffix.lower().lstrip(".")
    meta = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Creator": None, "Producer": None},
            "svg": {"Date": None, "Creator": None}}.get(ext)
    buf = io.BytesIO()
    with mpl.rc_context({"svg.hashsalt": "limits"}):         # SVG element ids from a fixed salt, not random
        fig.savefig(buf, format=ext, metadata=meta)
    return atomic_write_bytes(path, buf.getvalue())
