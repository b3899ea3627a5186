"""`limits sweep run FILE.toml`, `limits sweep show STORE_OR_FILE`, `limits sweep plot STORE_OR_FILE`, `limits sweep functions`."""
from __future__ import annotations

import json
from pathlib import Path


def _dataset_path(target) -> Path:
    """A sweep dataset from a .nc file, a store directory (its sweep.json) or a sweep file (.toml).
    A sweep file is only parsed for its ``[run] out``/``store`` — no function is resolved or run."""
    p = Path(target)
    if p.suffix == ".toml":
        from ..sweep.sweepfile import default_store, file_out, parse

        run = parse(p).get("run", {})
        if run.get("out"):
            return file_out(run["out"], default_store(p))
        p = default_store(p)
    if p.is_dir():
        from ..sweep.store import Store

        m = Store(p, writing=False).manifest()
        ds = m.get("dataset") if m else None
        if ds is not None and (not isinstance(ds, str) or not ds or "\x00" in ds):
            raise ValueError(f"{target}: {p / 'sweep.json'} is damaged (its dataset is {ds!r:.60}, not a path)")
        cand = Path(ds) if ds else p / "sweep.nc"
        if not cand.is_file():
            raise ValueError(f"{target}: no dataset yet ({cand} missing; run the sweep first)")
        return cand
    if not p.exists():
        raise ValueError(f"{target}: no such sweep dataset, store or sweep file")
    if not p.is_file():
        raise ValueError(f"{target}: not a regular file (a sweep dataset .nc, a store directory or a sweep file)")
    return p


def cmd_run(args):
    from ..sweep.driver import PointFailed, summary
    from ..sweep.sweepfile import run_file

    from ..sweep.sweepfile import check_chunk

    chunk = args.chunk
    if chunk is not None and chunk != "auto":
        if not chunk.isascii() or not chunk.isdigit():
            check_chunk(chunk, "--chunk")                   # raises, naming the option
        chunk = check_chunk(int(chunk), "--chunk")
    try:
        ds = run_file(args.file, allow=args.allow, backend=args.backend, n_jobs=args.n_jobs, scheduler=args.scheduler,
                      store=args.store, chunk=chunk, fail_fast=True if args.fail_fast else None,
                      reduce_seeds=True if args.reduce_seeds else None, out=args.out,
                      max_points=args.max_points, progress=False if args.quiet else None)
    except PointFailed as exc:          # the function failed at a point: the user's error, one line (exit 2)
        from ..errors import UserCodeError

        raise UserCodeError(f"sweep stopped at the first failing point (--fail-fast): {exc}") from None
    a = ds.attrs
    info = {k: a.get(k) for k in ("function", "n_points", "reused", "computed", "n_failed", "backend", "chunk",
                                  "wall_time_s", "path")}
    info["errors"] = json.loads(a.get("error", "[]"))
    if args.json:
        from ..cliutil import emit

        emit(info, args, "")
    else:
        print(summary(ds))
        for e in info["errors"][:10]:
            print(f"  failed {e['params']}: {e['error']}")
        if len(info["errors"]) > 10:
            print(f"  … {len(info['errors']) - 10} more (see the dataset's `error` attribute)")
        if a.get("full_path"):
            print(f"dataset: {a['full_path']} (mean ± SE over seeds: {a['path']})")
        elif a.get("path"):
            print(f"dataset: {a['path']}")
    from . import EXIT_POINTS_FAILED

    return 0 if not info["n_failed"] else EXIT_POINTS_FAILED


def cmd_show(args):
    from ..sweep.dataset import load

    path = _dataset_path(args.target)
    ds = load(path)
    if args.json:
        from ..cliutil import emit

        emit({"path": str(path), "dims": dict(ds.sizes), "variables": sorted(ds.data_vars),
              "attrs": {k: v for k, v in ds.attrs.items() if k != "grid"}}, args, "")
    else:
        print(f"{path}\n{ds}")
    return 0


def _sel(items):
    sel = {}
    for it in items or []:
        if "=" not in it:
            raise ValueError(f"--sel takes DIM=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        sel[k.strip()] = v.strip()
    return sel


def cmd_plot(args):
    from ..style import paper_style, pyplot
    from ..sweep.dataset import load
    from ..sweep.plot import plot, save_figure

    path = _dataset_path(args.target)
    ds = load(path)
    stem = Path(args.out) if args.out else path.with_name(f"{path.stem}_{'_'.join(args.y)}_vs_{args.x}")
    if stem.suffix in (".png", ".pdf"):
        stem = stem.with_suffix("")
    with paper_style():
        fig = plot(ds, args.x, args.y, hue=args.hue, sel=_sel(args.sel), logx=args.logx, logy=args.logy,
                   title=args.title)
        paths = save_figure(fig, stem, formats=args.format)
        pyplot().close(fig)
    if args.json:
        from ..cliutil import emit

        emit({"dataset": str(path), "figures": [str(p) for p in paths]}, args, "")
    else:
        print("\n".join(str(p) for p in paths))
    return 0


def _summary_line(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _signature(fn) -> str:
    """``(X, depth, activation='erf', …)``: the parameters, without annotations."""
    import inspect

    sig = inspect.signature(fn)
    return str(sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                           return_annotation=sig.empty))


def cmd_functions(args):
    """The declared sweep computations: name, signature, one-line summary (``--json``: a list of dicts)."""
    from ..registry import entries, public_name

    rows = [{"name": public_name(e), "signature": _signature(e.fn),
             "summary": e.summary, "defined_in": e.name} for e in entries("sweep")]
    if args.json:
        from ..cliutil import emit

        emit(rows, args, "")
        return 0
    print(f"{len(rows)} sweep computations (name them in a sweep file's `function` or `[inputs] function`; your "
          "own functions need --allow MODULE):")
    for r in rows:
        print(f"\n{r['name']}{r['signature']}\n    {_summary_line(r['summary'])}")
    return 0


def register(sub):
    s = sub.add_parser("sweep", help="parameter sweeps: resumable grids on joblib or dask → xarray dataset")
    ss = s.add_subparsers(dest="sweep_command", metavar="SUBCOMMAND", required=True)

    r = ss.add_parser("run", help="run a TOML sweep file (only points missing from the store are computed)")
    r.add_argument("file", help="sweep file (.toml), see docs/sweep.rst")
    r.add_argument("--backend", choices=("serial", "loky", "dask"), default=None,
                   help="default: the file's [run] backend, else loky (dask: a LocalCluster of --n-jobs "
                        "workers unless --scheduler)")
    r.add_argument("--n-jobs", type=int, default=None,
                   help="workers (loky processes / LocalCluster workers; default: all cores); a sweep file "
                        "cannot set it")
    r.add_argument("--scheduler", default=None,
                   help="dask scheduler address tcp://HOST:PORT (backend dask; this process unpickles what "
                        "that cluster sends back: only a cluster you trust); a sweep file cannot set it")
    r.add_argument("--store", default=None,
                   help="store directory (default sweeps/<file stem>): a new or empty directory, or a sweep "
                        "store; a sweep file cannot set it")
    r.add_argument("--out", default=None,
                   help="dataset path (default STORE/sweep.nc, or the file's [run] out inside the store); "
                        "an existing file is replaced only by a sweep dataset of no fewer points")
    r.add_argument("--chunk", default=None, help="'auto' (tasks of ≳ 0.2 s) or points per task")
    r.add_argument("--fail-fast", action="store_true", help="stop at the first failing point")
    r.add_argument("--reduce-seeds", action="store_true", help="return <var>_mean/<var>_se over seeds")
    r.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="confirm a grid of up to N points (default 100000; larger grids are refused with a "
                        "cost estimate; a sweep file cannot confirm its own size)")
    r.add_argument("--allow", action="append", default=[], metavar="MODULE",
                   help="allow the functions defined in MODULE, your own code in the current folder or on sys.path "
                        "(not the standard library, limits or a library limits runs on; importing it runs its code "
                        "— a sweep file's own `allow` list is not enough); repeatable")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    r.set_defaults(func=cmd_run)

    r = ss.add_parser("functions", help="list the sweep computations of limits a sweep file may name")
    r.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    r.set_defaults(func=cmd_functions)

    r = ss.add_parser("show", help="summary of a sweep dataset (a .nc, a store directory or a sweep file)")
    r.add_argument("target", metavar="STORE_OR_FILE",
                   help="a dataset (.nc), a store directory, or a sweep file (its store)")
    r.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    r.set_defaults(func=cmd_show)

    r = ss.add_parser("plot", help="theory curves with finite-network bands (mean ± 2 SE over seeds)")
    r.add_argument("target", metavar="STORE_OR_FILE",
                   help="a dataset (.nc), a store directory, or a sweep file (its store)")
    r.add_argument("--x", required=True, help="dim on the x axis")
    r.add_argument("--y", required=True, action="append", help="variable(s) to draw; repeatable")
    r.add_argument("--hue", default=None, help="one curve per value of this dim")
    r.add_argument("--sel", action="append", default=[], metavar="DIM=VALUE", help="fix a dim; repeatable")
    r.add_argument("--logx", action="store_true", default=None,
                   help="log x axis (default: log where the values span two decades or more)")
    r.add_argument("--logy", action="store_true", default=None,
                   help="log y axis (default: log where the values span two decades or more)")
    r.add_argument("--title", default=None, help="figure title (default: none)")
    r.add_argument("--out", default=None, help="figure path stem (default next to the dataset)")
    r.add_argument("--format", nargs="+", default=["png", "pdf"], choices=("png", "pdf"),
                   help="figure formats written (default: png pdf)")
    r.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    r.set_defaults(func=cmd_plot)
