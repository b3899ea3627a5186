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
