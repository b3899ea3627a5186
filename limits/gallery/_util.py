"""Shared plotting/caption helpers of the gallery modules (not a figure module: the leading
underscore keeps it out of figure discovery)."""
from __future__ import annotations

import numpy as np


def _fmt(v, pos=None):
    """Plain tick label: 0.002, 0.05, 3, 200, 1e+05 (at most 2 significant digits below 1)."""
    if 1 <= abs(v) < 1e5 and float(v).is_integer():
        return str(int(v))
    return f"{v:.2g}"


def log_ticks(fig):
    """Readable tick labels on every log axis of ``fig``, whatever its range.

    Axes containing two or more powers of ten get labels at the decades only (no crowded minor
    labels); others get plain labels at 1, 2, 5 × 10^k (1, 2, 3, 5 below one decade of range, 1…9
    below half a decade), so that no log
    axis is left without numbers. Axes with explicitly placed ticks (``data_ticks``) are left alone.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    for ax in fig.axes:
        for axis, scale, lim in ((ax.xaxis, ax.get_xscale(), ax.get_xlim),
                                 (ax.yaxis, ax.get_yscale(), ax.get_ylim)):
            if scale != "log" or isinstance(axis.get_major_locator(), FixedLocator):
                continue          # linear, or ticks placed explicitly (data_ticks)
            lo, hi = sorted(lim())
            if not (lo > 0 and np.isfinite(hi)):
                continue
            span = np.log10(hi / lo)
            decades = int(np.floor(np.log10(hi) + 1e-9) - np.ceil(np.log10(lo) - 1e-9) + 1)
            if decades >= 2:
                axis.set_major_locator(LogLocator(base=10))
                axis.set_minor_formatter(NullFormatter())
                continue
            subs = ((1.0, 2.0, 5.0) if span >= 1 else (1.0, 2.0, 3.0, 5.0) if span >= 0.5
                    else tuple(float(s) for s in range(1, 10)))
            axis.set_major_locator(LogLocator(base=10, subs=subs))
            axis.set_major_formatter(FuncFormatter(_fmt))
            axis.set_minor_formatter(NullFormatter())
    return fig


def data_ticks(ax, values, axis="x"):
    """Ticks exactly at the data values (integers shown as integers), minor ticks off."""
    from matplotlib.ticker import NullLocator

    vals = [float(v) for v in values]
    labels = [str(int(v)) if float(v).is_integer() else f"{v:g}" for v in vals]
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_ticks(vals, labels)
    a.set_minor_locator(NullLocator())


def with_caption(compute, caption):
    """Wrap ``compute(params, rng)`` so that its data carries ``data['caption']``: the caption
    formatted with the resolved parameters (the sizes actually run, quick or full)."""
    def wrapped(params, rng):
        data = compute(params, rng)
        data["caption"] = caption(params) if callable(caption) else caption.format(**params)
        return data

    wrapped.__name__ = getattr(compute, "__name__", "compute")
    wrapped.__doc__ = compute.__doc__
    return wrapped
