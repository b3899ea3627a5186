"""Theory curves with finite-network bands from a sweep dataset.

For each ``y`` variable: with a ``seed`` dim (or ``<y>_mean``/``<y>_se`` from ``reduce_seeds``)
the mean over seeds is drawn with a band of ±2 SE (ddof = 1); without one, a plain line (a
theory curve). One curve per value of ``hue``; every other dim must have length 1 or be fixed with
``sel={dim: value}``. Legends print values to 4 significant digits; a numeric ``hue`` with more than
``MAX_LEGEND_HUES`` values is coloured along a colour map with a colour bar instead of a legend. An
``x`` that is an array index (``loss_dim_0``) is replaced by the result's time coordinate ``t``
when it has that length. Axes are logarithmic where the (positive) values span two decades or more
(``logx``/``logy`` None; True/False force). PNG and PDF are written atomically and deterministically
(PDF ``CreationDate`` None, no timestamps in the PNG).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .grid import SEED_DIM


def _mean_se(ds, var):
    if var in ds.data_vars:
        da = ds[var].astype(np.float64)
        if "failed" in ds and SEED_DIM in ds["failed"].dims:
            da = da.where(~ds["failed"])
        if SEED_DIM in da.dims:
            n = da.notnull().sum(SEED_DIM)
            mean = da.sum(SEED_DIM, skipna=True) / n.where(n > 0)
            se = da.std(SEED_DIM, ddof=1, skipna=True) / np.sqrt(n.where(n > 1))
            return mean, se
        return da, None
    if f"{var}_mean" in ds.data_vars:
        return ds[f"{var}_mean"], ds.get(f"{var}_se")
    raise ValueError(f"y: no variable {var!r} in the dataset (has {sorted(ds.data_vars)})")


def _select(da, sel):
    for dim, value in sel.items():
        if dim not in da.dims:
            continue
        coord = da[dim].values
        if coord.dtype.kind in "iuf":
            value = float(value)
            idx = int(np.argmin(np.abs(coord.astype(np.float64) - value)))
            if not np.isclose(coord[idx], value):
                raise ValueError(f"sel: {dim}={value} is not on the grid ({coord.tolist()})")
        else:
            hits = np.nonzero(coord.astype(str) == str(value))[0]
            if not hits.size:
                raise ValueError(f"sel: {dim}={value} is not on the grid ({coord.tolist()})")
            idx = int(hits[0])
        da = da.isel({dim: idx})
    return da


MAX_LEGEND_HUES = 8
TIME_VARIABLES = ("t", "time")
_INDEX_DIM = re.compile(r"^.+_dim_\d+$")


def fmt_value(v) -> str:
    """A coordinate value for a legend: floats to 4 significant digits (0.15848931924611134 → 0.1585)."""
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return str(v)


def x_coordinate(ds, x):
    """(values, label) of the x axis: the dim's own values, or — for an array-index dim such as
    ``loss_dim_0`` — the time coordinate ``t`` of the result when it has that length and is the same
    at every grid point (DMFT, NFD and training results record one)."""
    xs = np.asarray(ds[x].values)
    if not _INDEX_DIM.match(x):
        return xs, x
    for name in TIME_VARIABLES:
        if name not in ds.data_vars:
            continue
        tv = ds[name]
        own = [d for d in tv.dims if _INDEX_DIM.match(d)]
        if len(own) != 1 or tv.sizes[own[0]] != xs.size:
            continue
        flat = np.asarray(tv.transpose(..., own[0]).values, dtype=float).reshape(-1, xs.size)
        flat = flat[np.all(np.isfinite(flat), axis=1)]
        if flat.size and np.allclose(flat, flat[0], rtol=1e-12, atol=0):
            return flat[0], name
    return xs, x


def _spans_decades(values) -> bool:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    pos = v[v > 0]
    return bool(pos.size >= 2 and np.all(v >= 0) and pos.max() / pos.min() >= 100.0)


def plot(ds, x, y, hue=None, sel=None, ax=None, logx=None, logy=None, title=None):
    """Draw ``y`` (a name or list of names) against dim ``x``; log axes where the values span two decades
    unless ``logx``/``logy`` say otherwise (module docstring). ``ax``: an Axes to draw into, a file path to
    save the figure to, or None (a new figure) — :func:`limits.style.plot_target`; returns the Figure."""
    from ..style import PALETTE, plot_target

    ys = [y] if isinstance(y, str) else list(y)
    sel = dict(sel or {})
    if x not in ds.dims:
        raise ValueError(f"x: {x!r} is not a dim of the dataset (dims: {list(ds.dims)})")
    if hue is not None and hue not in ds.dims:
        raise ValueError(f"hue: {hue!r} is not a dim of the dataset (dims: {list(ds.dims)})")
    target = plot_target(ax, 1, what="limits.sweep.plot")
    ax = target.axes[0]
    xs, xlabel = x_coordinate(ds, x)
    numeric_x = xs.dtype.kind in "iuf"
    if logx is None:
        logx = numeric_x and _spans_decades(xs)
    keep = (xs > 0) if (logx and numeric_x) else np.ones(xs.size, bool)      # t = 0 has no place on a log axis
    xs = xs[keep]
    hue_vals = np.asarray(ds[hue].values) if hue is not None else None
    cmap = norm = None
    if hue_vals is not None and hue_vals.dtype.kind in "iuf" and hue_vals.size > MAX_LEGEND_HUES:
        import matplotlib as mpl

        log_hue = bool(np.all(hue_vals > 0) and hue_vals.max() / hue_vals.min() >= 10.0)
        norm = (mpl.colors.LogNorm if log_hue else mpl.colors.Normalize)(float(hue_vals.min()), float(hue_vals.max()))
        cmap = mpl.colormaps["viridis"]
    y_all = []
    for k, var in enumerate(ys):
        mean, se = _mean_se(ds, var)
        mean = _select(mean, sel)
        se = _select(se, sel) if se is not None else None
        if se is not None and not np.any(np.nan_to_num(se.values) > 0):
            se = None                                  # same value for every seed: a theory curve
        hues = list(range(mean.sizes[hue])) if hue is not None and hue in mean.dims else [None]
        for h in hues:
            m = mean.isel({hue: h}) if h is not None else mean
            s = se.isel({hue: h}) if (h is not None and se is not None) else se
            extra = [d for d in m.dims if d != x and m.sizes[d] > 1]
            if extra:
                raise ValueError(f"{var}: dims {extra} left; pick one value with --sel DIM=VALUE or use --hue")
            m = m.squeeze(drop=True)
            mv = np.asarray(m.values)[keep]
            y_all.append(mv)
            if cmap is not None and h is not None:
                color = cmap(norm(float(hue_vals[h])))
                label = var if h == 0 and len(ys) > 1 else None
            else:
                color = PALETTE[(h if h is not None else k) % len(PALETTE)]
                label = var if h is None else f"{var}, {hue}={fmt_value(hue_vals[h])}"
            if s is None:
                ax.plot(xs, mv, "-", color=color, label=label)
            else:
                sv = np.asarray(s.squeeze(drop=True).values)[keep]
                ax.plot(xs, mv, "o--", lw=0.8, color=color, mfc="none",
                        label=None if label is None else label + " (mean ± 2 SE)")
                ax.fill_between(xs, mv - 2 * sv, mv + 2 * sv, color=color, alpha=0.2, lw=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ys[0] if len(ys) == 1 else ", ".join(ys))
    if logy is None:
        logy = bool(y_all) and _spans_decades(np.concatenate([np.ravel(v) for v in y_all]))
    if logx:
        ax.set_xscale("log")
        if numeric_x and len(xs) <= 12:
            ax.set_xticks(xs, [fmt_value(v) for v in xs])
            ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if cmap is not None:
        import matplotlib as mpl

        sm = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
        ax.figure.colorbar(sm, ax=ax, label=hue)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return target.finish()


def save_figure(fig, stem, formats=("png", "pdf")) -> list:
    """``stem.png``/``stem.pdf`` written atomically, byte-for-byte reproducible (:func:`limits.style.save_figure`)."""
    from ..style import save_figure as _save

    paths = []
    stem = Path(stem)
    for ext in formats:
        if ext not in ("png", "pdf"):
            raise ValueError(f"format must be png or pdf, got {ext!r}")
        paths.append(_save(fig, stem.with_name(f"{stem.name}.{ext}")))
    return paths
