"""Collect sweep points into one labelled ``xarray.Dataset`` and save/load it as netCDF.

Dims are the swept parameters (product axes, one dim per zipped group, ``seed``); each output
becomes a variable over those dims plus its own array dims ``<name>_dim_0``, ``<name>_dim_1``, ….
Outputs whose shape changes across points (e.g. ``K`` of shape (L+1, P, P) over a depth axis)
are padded with NaN to the largest shape (``padded`` attribute). Failed points are NaN (integer
and bool outputs become float64 when a point failed or was padded); ``failed`` marks them and the
``error`` attribute lists them (JSON: parameters and message).

Format: netCDF-3 written by xarray's ``scipy`` engine — one self-describing file readable by
every netCDF tool, with no extra C library and no extra dependency (scipy is already core).
Zarr would need the ``zarr`` package and writes a directory tree that cannot be swapped in
atomically. The file is written with :func:`limits.results.atomic_write_bytes`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import elide
from ..results import atomic_write_bytes
from .grid import SEED_DIM, Grid

_NC3_KINDS = "biuf"


def _fill_dtype(dtypes, need_nan):
    dt = np.result_type(*dtypes)
    if need_nan and dt.kind in "biu":
        return np.dtype(np.float64)
    if dt.kind == "u" or (dt.kind == "i" and dt.itemsize > 4):
        return np.dtype(np.float64) if dt.kind == "u" else dt     # netCDF-3 has no unsigned ints
    return dt


def build(grid: Grid, arrays: dict, errors: dict, attrs: dict | None = None):
    """``arrays``: flat index → {name: ndarray} of the finished points; ``errors``: flat index →
    message of the failed ones (the two are disjoint; points in neither are missing, also NaN)."""
    import xarray as xr

    shape = grid.shape
    dims = grid.dims
    names: dict[str, list] = {}
    for flat in sorted(arrays):
        for k, v in arrays[flat].items():
            names.setdefault(k, []).append(v)
    data_vars = {}
    padded = []
    for name, vals in names.items():
        ndims = {v.ndim for v in vals}
        if len(ndims) != 1:
            raise ValueError(f"output {name!r} has a different number of dimensions at different points: "
                             f"{sorted(ndims)}")
        nd = ndims.pop()
        full = tuple(max(v.shape[k] for v in vals) for k in range(nd))
        was_padded = any(v.shape != full for v in vals)
        incomplete = len(vals) < grid.n_points
        dt = _fill_dtype([v.dtype for v in vals], was_padded or incomplete)
        fill = np.nan if dt.kind == "f" else 0
        out = np.full(shape + full, fill, dtype=dt)
        for flat, a in arrays.items():
            if name in a:
                v = a[name]
                idx = np.unravel_index(flat, shape) if shape else ()
                out[tuple(idx) + tuple(slice(0, s) for s in v.shape)] = v
        if len(vals) < len(arrays):         # output absent at some finished points
            was_padded = True
        if was_padded:
            padded.append(name)
        data_vars[name] = (dims + tuple(f"{name}_dim_{k}" for k in range(nd)), out)
    failed = np.zeros(shape, dtype=bool)
    err_list = []
    for flat in sorted(errors):
        idx = tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()
        failed[idx] = True
        p = grid.point(idx)
        err_list.append({"index": dict(zip(dims, idx)),
                         "params": {k: v for k, v in p.params.items() if k not in grid.fixed},
                         "error": errors[flat]})
    data_vars["failed"] = (dims, failed)
    coords = grid.coords()
    echoed = []
    for name in [n for n in data_vars if n in coords or n in dims]:
        vdims, vals = data_vars.pop(name)
        if name in coords and len(vdims) == len(dims):       # a scalar output named like a parameter
            cdim, cvals = coords[name]
            ref = np.broadcast_to(np.asarray(cvals).reshape([-1 if d == cdim else 1 for d in dims]), shape)
            if ref.dtype.kind in "biuf" and np.array_equal(np.where(failed, ref, vals), ref):
                echoed.append(name)                             # the input echoed back: drop
                continue
        if f"{name}_result" in data_vars or f"{name}_result" in coords:
            raise ValueError(f"output {name!r} is named like a parameter and must become {name}_result, but the "
                             f"function also returns an output {name}_result; rename one of them")
        data_vars[f"{name}_result"] = (vdims, vals)
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs.update(attrs or {})
    ds.attrs["error"] = json.dumps(err_list)
    ds.attrs["n_failed"] = len(err_list)
    ds.attrs["padded"] = json.dumps(padded)
    ds.attrs["echoed_inputs"] = json.dumps(echoed)
    ds.attrs["grid"] = grid.describe()
    return ds


def reduce_seeds(ds):
    """Mean and standard error over the ``seed`` dim: ``<var>_mean``, ``<var>_se`` (ddof = 1, over
    the seeds that did not fail; ``n_seeds`` counts them). Variables without a seed dim are kept."""
    import xarray as xr

    if SEED_DIM not in ds.dims:
        raise ValueError("reduce_seeds: the dataset has no 'seed' dim (give the grid seeds=n)")
    out = {}
    ok = ~ds["failed"]
    n = ok.sum(SEED_DIM)
    for name, var in ds.data_vars.items():
        if name == "failed":
            continue
        if SEED_DIM not in var.dims:
            out[name] = var
            continue
        x = var.astype(np.float64).where(ok)
        cnt = x.notnull().sum(SEED_DIM)
        mean = x.sum(SEED_DIM, skipna=True) / cnt.where(cnt > 0)
        se = x.std(SEED_DIM, ddof=1, skipna=True) / np.sqrt(cnt.where(cnt > 1))
        out[f"{name}_mean"] = mean
        out[f"{name}_se"] = se
    out["n_seeds"] = n
    out["failed"] = (~ok).all(SEED_DIM)
    red = xr.Dataset(out, coords={k: v for k, v in ds.coords.items() if SEED_DIM not in v.dims})
    red.attrs.update(ds.attrs)
    red.attrs["reduced_seeds"] = int(ds.sizes[SEED_DIM])
    return red


def to_bytes(ds) -> bytes:
    """netCDF-3 bytes (scipy engine); attributes that are not str/number become JSON strings, integers beyond
    netCDF-3's 32 bits floats."""
    ds = ds.copy()
    for k, v in list(ds.attrs.items()):
        if not isinstance(v, (str, int, float, np.integer, np.floating)) or isinstance(v, bool):
            ds.attrs[k] = json.dumps(v, default=str)
        elif isinstance(v, (int, np.integer)) and not -2**31 <= int(v) < 2**31:
            ds.attrs[k] = float(v)
    for name in list(ds.variables):
        if ds[name].dtype.kind == "i" and ds[name].dtype.itemsize > 4:
            vals = ds[name].values
            if vals.size and (vals.min() < np.iinfo(np.int32).min or vals.max() > np.iinfo(np.int32).max):
                ds[name] = ds[name].astype(np.float64)
    return bytes(ds.to_netcdf(engine="scipy"))


def header(path) -> dict | None:
    """The global attributes of the netCDF-3 file ``path`` (its header only, read without loading the data), or
    None when ``path`` is not a readable netCDF-3 file."""
    import warnings

    from scipy.io import netcdf_file

    from ..readfile import opened

    try:
        with opened(path, "sweep dataset") as (fh, _):
            if fh.read(3) != b"CDF":
                return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = netcdf_file(str(path), "r", mmap=True)
            try:
                attrs = dict(f._attributes)
            finally:
                f.close()
    except Exception:  # noqa: BLE001 — whatever a damaged or foreign file makes scipy raise: not a dataset
        return None
    return {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for k, v in attrs.items()}


def check_replaceable(path, n_points, option):
    """Refuse (``ValueError`` naming ``option``) to replace ``path`` unless it is missing or a sweep dataset of at
    most ``n_points`` points: a file of another kind (a text file, a result, someone's data) is never overwritten,
    nor a dataset computed over a larger grid."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    attrs = header(path)
    if not attrs or "function" not in attrs or "n_points" not in attrs or "grid" not in attrs:
        raise ValueError(f"{option}: {path} exists and is not a sweep dataset; a sweep never overwrites another "
                         "kind of file — choose another path or remove it")
    try:
        had = int(float(np.asarray(attrs["n_points"]).ravel()[0]))
    except (TypeError, ValueError, IndexError, OverflowError):
        had = None
    if had is None or had > n_points:
        size = f"{had} points" if had is not None else "an unknown number of points"
        raise ValueError(f"{option}: {path} holds a sweep dataset of {size} ({elide(str(attrs['function']), 80)}), "
                         f"more than this run's {n_points}; a result "
                         "computed over a larger grid is never replaced by a smaller one — choose another path "
                         "(--out) or remove it")


def save(ds, path) -> Path:
    """Write ``ds`` to ``path`` (netCDF) atomically."""
    return atomic_write_bytes(path, to_bytes(ds))


LOAD_FACTOR = 2.0      # memory to load a dataset, × its file size (arrays decoded, int → float where masked)


def load(path):
    """Read a sweep dataset written by :func:`save` into memory (the file is closed). The file is checked first — a
    regular netCDF-3 file — and its memory estimated from its size before a byte of data is read
    (:data:`LOAD_FACTOR` × the size against the available memory: a ``ValueError`` with the sizes instead of
    reading half the memory and failing); it is then memory-mapped from the checked descriptor (Linux; a copy
    elsewhere), so the data are read once."""
    import xarray as xr

    from ..memory import available_memory
    from ..readfile import array_limit, human, opened

    path = Path(path)
    with opened(path, "sweep dataset", limit=array_limit()) as (fh, size):
        if fh.read(3) != b"CDF":        # checked before reading a possibly huge file into memory
            raise ValueError(f"sweep dataset {path} is not a netCDF-3 file (written by limits.sweep.save)")
        avail = available_memory()
        if avail is not None and LOAD_FACTOR * size > avail:
            raise ValueError(f"sweep dataset {path} is {human(size)}: loading it takes ≈ {human(LOAD_FACTOR * size)} "
                             f"of memory, more than the {human(avail)} available; open it lazily "
                             f"(xarray.open_dataset(path, engine='scipy') memory-maps it) and select what you need, "
                             "or free memory")
        fh.seek(0)
        by_fd = f"/proc/self/fd/{fh.fileno()}"
        try:
            with xr.open_dataset(by_fd if os.path.exists(by_fd) else fh, engine="scipy") as ds:
                return ds.load()
        except (ValueError, TypeError, OSError, EOFError, IndexError, KeyError, OverflowError, MemoryError) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"sweep dataset {path} is damaged or truncated ({msg[:120]})") from None
