"""Theory curves with finite-network bands from a sweep dataset.

For each ``y`` variable: with a ``seed`` dim (or ``<y>_mean``/``<y>_se`` from ``reduce_seeds``)
the mean over seeds is drawn with a band of ±2 SE (ddof = 1); without one, a plain line (a
theory curve). One curve per value of ``hue``; every other dim must have length 1 or be fixed with
``sel={dim: value}``. PNG and PDF are written atomically and deterministically (PDF
``CreationDate`` None, no timestamps in the PNG).
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..results import atomic_write_bytes
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


def plot(ds, x, y, hue=None, sel=None, ax=None, logx=False, logy=False, title=None):
    """Draw ``y`` (a name or list of names) against dim ``x`` on ``ax`` (new figure if None)."""
    from ..style import PALETTE, pyplot

    ys = [y] if isinstance(y, str) else list(y)
    sel = dict(sel or {})
    if x not in ds.dims:
        raise ValueError(f"x: {x!r} is not a dim of the dataset (dims: {list(ds.dims)})")
    if hue is not None and hue not in ds.dims:
        raise ValueError(f"hue: {hue!r} is not a dim of the dataset (dims: {list(ds.dims)})")
    fig = None
    if ax is None:
        fig, ax = pyplot().subplots()
    xs = np.asarray(ds[x].values)
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
            label = var if h is None else f"{var}, {hue}={ds[hue].values[h]}"
            color = PALETTE[(h if h is not None else k) % len(PALETTE)]
            if s is None:
                ax.plot(xs, m.values, "-", color=color, label=label)
            else:
                s = s.squeeze(drop=True)
                ax.plot(xs, m.values, "o--", lw=0.8, color=color, mfc="none", label=label + " (mean ± 2 SE)")
                ax.fill_between(xs, (m - 2 * s).values, (m + 2 * s).values, color=color, alpha=0.2, lw=0)
    ax.set_xlabel(x)
    ax.set_ylabel(ys[0] if len(ys) == 1 else ", ".join(ys))
    if logx:
        ax.set_xscale("log")
        if xs.dtype.kind in "iuf" and len(xs) <= 12:
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
            ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.legend()
    return fig if fig is not None else ax.figure


def save_figure(fig, stem, formats=("png", "pdf")) -> list:
    """``stem.png``/``stem.pdf`` written atomically, byte-for-byte reproducible."""
    paths = []
    stem = Path(stem)
    for ext in formats:
        if ext not in ("png", "pdf"):
            raise ValueError(f"format must be png or pdf, got {ext!r}")
        meta = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}[ext]
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, metadata=meta)
        paths.append(atomic_write_bytes(stem.with_name(f"{stem.name}.{ext}"), buf.getvalue()))
    return paths
