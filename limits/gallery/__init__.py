"""Registry of reproducible paper figures: compute → data file → plot.

A figure module (``limits/gallery/<component>.py``, discovered automatically) registers::

    from limits.gallery import register

    def compute(params, rng):            # -> dict of arrays / numbers / strings / lists
        ...
    def plot(data, params):              # -> matplotlib Figure (use limits.style.paper_style)
        ...
    register("seed004_fig2", component="kernels", compute=compute, plot=plot,
             params={...}, quick={...overrides for --quick...},
             caption="...", seed_ref="seed 004 Fig. 2", default=False)

``make(name, outdir=D)`` writes ``D/NAME.npz`` + ``D/NAME.json`` (all parameters, the data,
wall time) and ``D/NAME.png`` / ``.pdf``; a second call with unchanged parameters reuses the
data; ``replot(name)`` redraws from the data file without recomputing. The command line puts
paper-size figures in ``figures/full/`` and quick ones in ``figures/`` (``limits.cli.figure_dir``);
``make`` itself never replaces a paper-size result by a quick one. Plots are written
byte-for-byte reproducibly (no dates or version strings in the PNG/PDF metadata), so
re-running a figure leaves a clean git tree.
"""
from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..readfile import read_json
from ..results import (MAX_RESULT_JSON_BYTES, decode_value, encode_value, atomic_write_bytes,
                       atomic_write_text, read_npz)

DEFAULT_OUTDIR = Path("figures")


@dataclass(frozen=True)
class FigureSpec:
    name: str
    component: str
    compute: Callable[[dict, np.random.Generator], dict]
    plot: Callable[[dict, dict], Any]
    params: dict
    quick: dict = field(default_factory=dict)
    caption: str = ""
    seed_ref: str = ""
    default: bool = False
    seed: int = 0

    def resolved_params(self, quick: bool) -> dict:
        p = dict(self.params)
        if quick:
            p.update(self.quick)
        return p


_FIGURES: dict[str, FigureSpec] = {}


def register(name, *, component, compute, plot, params, quick=None, caption="", seed_ref="",
             default=False, seed=0) -> FigureSpec:
    if name in _FIGURES:
        raise ValueError(f"figure {name!r} registered twice")
    spec = FigureSpec(name, component, compute, plot, dict(params), dict(quick or {}), caption,
                      seed_ref, default, seed)
    _FIGURES[name] = spec
    return spec


def _load_all():
    from .._plugins import load_submodules

    load_submodules(__name__)


def figures() -> dict[str, FigureSpec]:
    """All registered figures by name."""
    _load_all()
    return dict(sorted(_FIGURES.items()))


def get(name: str) -> FigureSpec:
    figs = figures()
    if name not in figs:
        raise ValueError(f"unknown figure {name!r}; available: {', '.join(figs) or '(none)'}")
    return figs[name]


def _key(spec: FigureSpec, params: dict) -> str:
    blob = json.dumps({"name": spec.name, "params": params, "seed": spec.seed}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _paths(outdir, name):
    outdir = Path(outdir)
    return {ext: outdir / f"{name}.{ext}" for ext in ("npz", "json", "png", "pdf")}


def save_data(outdir, spec: FigureSpec, params: dict, data: dict, wall_time: float, quick: bool):
    arrays: dict[str, np.ndarray] = {}
    payload = {
        "figure": spec.name,
        "component": spec.component,
        "seed_ref": spec.seed_ref,
        "caption": spec.caption,
        "params": encode_value(params, arrays, "params"),
        "seed": spec.seed,
        "quick": quick,
        "key": _key(spec, params),
        "wall_time_s": wall_time,
        "data": encode_value(data, arrays, "data"),
    }
    p = _paths(outdir, spec.name)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(p["npz"], buf.getvalue())
    atomic_write_text(p["json"], json.dumps(payload, indent=1, sort_keys=True, default=str))


def load_data(name: str, outdir=DEFAULT_OUTDIR) -> dict:
    """The stored payload of a figure: ``{'params':…, 'data':…, 'wall_time_s':…, …}``.
    Missing or unreadable data raise ``ValueError`` naming the file."""
    p = _paths(outdir, name)
    for key in ("json", "npz"):
        if not p[key].is_file():
            raise ValueError(f"figure {name}: no stored data {p[key]} — compute it first "
                             f"(drop --replot, or give the --outdir/--quick it was made with)")
    try:
        payload = read_json(p["json"], f"figure {name}: stored data", MAX_RESULT_JSON_BYTES)
        arrays = read_npz(p["npz"], f"figure {name}: stored data")
        payload["params"] = decode_value(payload["params"], arrays)
        payload["data"] = decode_value(payload["data"], arrays)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"figure {name}: cannot read the stored data {p['json']} / {p['npz']} "
                         f"({type(exc).__name__}: {exc}); recompute it with --force") from None
    return payload


def _save_plot(fig, outdir, name):
    """PNG and PDF, reproducible bytes (no creation date, no software/version strings: style.save_figure)."""
    from ..style import pyplot, save_figure

    p = _paths(outdir, name)
    try:
        for ext in ("png", "pdf"):
            save_figure(fig, p[ext])
    finally:
        pyplot().close(fig)


def replot(name: str, outdir=DEFAULT_OUTDIR):
    """Redraw ``figures/NAME.png/.pdf`` from the stored data (no recomputation)."""
    spec = get(name)
    payload = load_data(name, outdir)
    from ..style import paper_style

    with paper_style():
        fig = spec.plot(payload["data"], payload["params"])
        _save_plot(fig, outdir, name)
    return _paths(outdir, name)


def _stored(p) -> dict | None:
    try:
        old = read_json(p["json"], "stored figure data", MAX_RESULT_JSON_BYTES)
        return old if isinstance(old, dict) else None
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class MadeFigure:
    name: str
    paths: dict
    wall_time_s: float
    cached: bool


def make(name: str, quick: bool = False, outdir=DEFAULT_OUTDIR, force: bool = False) -> MadeFigure:
    """Compute (or reuse cached data), save data, plot. Returns paths and the compute wall time.

    Refuses (``ValueError``) to replace a stored paper-size result by a quick one, and to overwrite
    stored data whose metadata (``NAME.json``) is missing or unreadable (unless ``force`` for a
    paper-size run: a quick one could be replacing a paper-size result). If the data
    cannot be written after the computation, they are saved to a fresh temp directory and the
    ``OSError`` names it, so no computed result is lost."""
    spec = get(name)
    params = spec.resolved_params(quick)
    p = _paths(outdir, name)
    cached = False
    wall = 0.0
    old = _stored(p) if p["json"].exists() else None
    readable = old is not None and isinstance(old.get("quick"), bool) and old.get("figure") == name
    if not readable and p["npz"].exists() and (quick or not force):
        # data without readable metadata (truncated/damaged .json, or none): it may be a paper-size result
        # that took hours, and nothing says which variant it is — never overwrite it
        why = "cannot be read" if p["json"].exists() else "is missing"
        raise ValueError(f"figure {name}: {p['json']} {why}, so nothing tells what {p['npz']} holds (it may be "
                         f"the paper-size result); refusing to overwrite it — move both files away"
                         + ("" if quick else ", or pass --force to recompute and replace them"))
    if old is not None and quick and old.get("quick") is False and old.get("figure") == name:
        raise ValueError(f"figure {name}: {p['json']} holds the paper-size result; refusing to replace it "
                         f"by the quick variant (write the quick one to another directory)")
    if not force and old is not None and p["npz"].exists():
        cached = old.get("key") == _key(spec, params)
        try:
            wall = float(old.get("wall_time_s", 0.0))
        except (TypeError, ValueError):
            wall = 0.0
    if cached and (old.get("caption") != spec.caption or old.get("seed_ref") != spec.seed_ref):
        # same data, edited caption or source: refresh the text the docs' gallery reads, keep the data
        atomic_write_text(p["json"], json.dumps({**old, "caption": spec.caption, "seed_ref": spec.seed_ref},
                                                indent=1, sort_keys=True, default=str))
    if not cached:
        rng = np.random.default_rng(spec.seed)
        t0 = time.perf_counter()
        data = spec.compute(dict(params), rng)
        wall = time.perf_counter() - t0
        try:
            save_data(outdir, spec, params, data, wall, quick)
        except OSError as exc:
            from ..cliutil import rescue_dir

            rescued = rescue_dir()
            save_data(rescued, spec, params, data, wall, quick)
            raise OSError(f"figure {name}: could not write {p['npz']} ({exc.strerror or exc}); the computed "
                          f"data were saved to {rescued}/{name}.npz + .json instead (copy them back and "
                          f"run with --replot)") from None
    replot(name, outdir)
    return MadeFigure(name, {k: str(v) for k, v in p.items()}, wall, cached)


def committed_dir() -> Path | None:
    """The gallery committed with the source (``<repository>/figures``), or None when the package
    was installed without it (a wheel)."""
    d = Path(__file__).resolve().parents[2] / "figures"
    return d if d.is_dir() else None


def reuse(name: str, quick: bool, source, outdir) -> MadeFigure | None:
    """Copy a figure whose stored data in ``source`` match its current parameters into ``outdir``,
    byte for byte (data and images: nothing is re-rendered, so the committed PNG/PDF are never
    touched); None when ``source`` has no matching data (then :func:`make` computes it).

    Used by the main job: it reuses the committed gallery and writes only into its own folder."""
    spec = get(name)
    src, dst = _paths(source, name), _paths(outdir, name)
    old = _stored(src) if src["json"].is_file() else None
    if (old is None or old.get("figure") != name or old.get("quick") is not quick
            or old.get("key") != _key(spec, spec.resolved_params(quick))
            or old.get("caption") != spec.caption or not all(f.is_file() for f in src.values())):
        return None
    same = Path(source).resolve() == Path(outdir).resolve()
    if not same:
        for ext, f in src.items():
            atomic_write_bytes(dst[ext], f.read_bytes())
    try:
        wall = float(old.get("wall_time_s", 0.0))
    except (TypeError, ValueError):
        wall = 0.0
    return MadeFigure(name, {k: str(v) for k, v in dst.items()}, wall, True)


def default_names() -> list[str]:
    return [n for n, s in figures().items() if s.default]
