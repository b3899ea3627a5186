"""`limits regress`: kernel regression for training sets of any size (the NNGP posterior or the NTK flow limit).

    limits regress --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --noise 0.1
    limits regress ... --solver cg --backend dask --scheduler tcp://host:8786 --store K.tiles --var-points 100

``--solver cholesky`` (default) factors the P×P kernel in memory (:func:`limits.predict.kernel_regression`);
``--solver cg`` stores it as tiles in ``--store`` (resumable: rerun the same command after an interruption)
and solves by preconditioned CG (:mod:`limits.largep`), on this machine or on a dask.distributed cluster.
"""
from __future__ import annotations

import numpy as np


def cmd_regress(args):
    import warnings

    from ..cliutil import emit, parse_bytes
    from ..predict import kernel_regression
    from .model import is_matrix_input, load_network, read_array

    m = load_network(args.model)
    X = read_array(args.x_train, "--x-train")
    Y = read_array(args.y_train, "--y-train")
    Xs = read_array(args.x_test, "--x-test")
    X, Xs = (a[:, None] if a.ndim == 1 and is_matrix_input(m) else a for a in (X, Xs))
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim == 2 and hasattr(m, "d_out") and Y.shape[1] != m.d_out:
        m = m.with_(d_out=Y.shape[1])              # the kernel is shared by the outputs (a composition has no d_out)
    cg = args.solver == "cg"
    if not cg and (args.backend != "serial" or args.scheduler or args.store or args.var_points is not None):
        raise ValueError("--backend/--scheduler/--store/--var-points belong to --solver cg")
    if args.scheduler and args.backend != "dask":
        raise ValueError("--scheduler needs --backend dask")
    kw = {"memory_limit": parse_bytes(args.max_memory, "--max-memory")}
    if args.block is not None:
        kw["block"] = args.block
    if cg:
        nv = Xs.shape[0] if args.var_points is None else args.var_points
        if nv < 0:
            raise ValueError(f"--var-points must be >= 0, got {nv}")
        kw.update(solver="cg", backend=args.backend, scheduler=args.scheduler, store=args.store,
                  n_workers=args.workers, worker_memory=args.worker_memory, tol=args.tol,
                  var=np.arange(min(nv, Xs.shape[0])) if nv else False)
    with warnings.catch_warnings():            # recomputed tiles are reported below, in the output
        warnings.filterwarnings("ignore", message="tile store .* recomputed", category=RuntimeWarning)
        r = _cli_names(kernel_regression, m, X, Y, Xs, kernel=args.kernel, noise=args.noise, **kw)
    lines = [m.describe(), _headline(args, r)]
    if cg:
        lines += _cg_lines(args, r.diagnostics)
    nv = 0 if r.var is None else r.var.shape[0]
    lines += ["", "test point | mean | sd"]
    for i in range(r.mean.shape[0]):
        sd = f"{np.sqrt(max(r.var[i], 0.0)):.5g}" if i < nv else "—"
        lines.append(f"{i} | {np.array2string(r.mean[i], precision=5)} | {sd}")
    if args.save:
        r.save(args.save)
        lines.append(f"saved {args.save}.npz/.json")
    d = r.diagnostics
    obj = {"mean": r.mean, "var": r.var, "log_marginal_likelihood": r.log_marginal_likelihood, "noise": r.noise,
           "kernel": r.kernel,
           "diagnostics": {k: v for k, v in d.items() if k not in ("history", "pivots", "iterations_per_column")}}
    emit(obj, args, "\n".join(lines))
    return 0


# API names in messages → the options that set them on this command line
_CLI_NAMES = (("memory_limit", "--max-memory"), ("X_train", "--x-train"), ("Y_train", "--y-train"),
              ("X_test", "--x-test"))


def _cli_names(fn, *a, **kw):
    from .predict import with_option_names

    try:
        return with_option_names(fn, *a, names=_CLI_NAMES, **kw)
    except ValueError as exc:                 # the tile store's argument is --store here
        if str(exc).startswith("store: "):
            raise ValueError("--store: " + str(exc)[len("store: "):]) from None
        raise


def _headline(args, r):
    d, lml = r.diagnostics, r.log_marginal_likelihood
    if args.kernel == "ntk":
        return "NTK gradient-flow limit (t → ∞)" + (f", ridge σ² = {r.noise:g}" if r.noise else "")
    if not np.isfinite(lml):
        return (f"NNGP posterior, noise σ² = {r.noise:g}, log marginal likelihood not representable in float64 "
                f"(yᵀ(K + σ²I)⁻¹y overflowed: the targets reach {np.abs(r.Y_train).max():.3g}; rescale them)")
    se = d.get("log_marginal_likelihood_se")
    return (f"NNGP posterior, noise σ² = {r.noise:g}, log marginal likelihood {lml:.6g}"
            + (f" ± {se:.2g} (stochastic Lanczos estimate)" if se is not None else " (exact)"))


def _cg_lines(args, d):
    t = d["tiles"]
    lines = [f"solver cg: {d['iterations']} iterations to relative residual {d['tol']:g} (true "
             f"{d['true_relative_residual']:.1e}), preconditioner rank {d['rank']}; tiles {t['computed']} computed, "
             f"{t['reused']} reused" + (f" in {args.store}" if args.store else "")]
    bad = t.get("recomputed") or {}
    again = d["tiles"].get("recomputed_while_reading", 0)
    if bad or again:
        what = {"foreign": "of another kernel (copied from another store or written by another run)",
                "damaged": "whose bytes did not match their digest (damaged or torn)"}
        parts = [f"{n} {what[k]}" for k, n in bad.items()] + ([f"{again} changed while in use"] if again else [])
        lines.append("tiles recomputed: " + "; ".join(parts))
    if t.get("orphans_removed"):
        lines.append(f"temporary files of an interrupted run removed: {t['orphans_removed']}")
    return lines


def register(subparsers):
    from .predict import add_data_options

    s = subparsers.add_parser("regress", help="kernel regression at any P: in-memory Cholesky, or tiles on disk + "
                                              "preconditioned CG on this machine or a dask cluster")
    add_data_options(s)
    s.add_argument("--kernel", choices=("nngp", "ntk"), default="nngp",
                   help="nngp: the NNGP posterior mean and variance; ntk: the converged gradient-flow ensemble "
                        "(t → ∞) (default: nngp)")
    s.add_argument("--noise", type=float, default=0.0, help="observation noise variance σ² (cg: > 0) (default: 0)")
    s.add_argument("--solver", choices=("cholesky", "cg"), default="cholesky",
                   help="in-memory Cholesky of the P×P kernel, or tiles on disk + preconditioned CG (default: "
                        "cholesky)")
    s.add_argument("--backend", choices=("serial", "dask"), default="serial",
                   help="cg: where the tiles are computed (default: serial)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS", help="cg + dask: tcp://host:8786 (default: a "
                                                                        "local cluster)")
    s.add_argument("--workers", type=int, default=None, help="cg + dask, local cluster: worker processes")
    s.add_argument("--worker-memory", default="2GiB",
                   help="cg + dask, local cluster: memory_limit per worker (default: 2GiB)")
    s.add_argument("--store", default=None, metavar="DIR", help="cg: tile directory (kept; a rerun resumes)")
    s.add_argument("--var-points", type=int, default=None,
                   help="cg: variances of the first N test points (default all; each is one more CG column)")
    s.add_argument("--tol", type=float, default=1e-10, help="cg: relative residual to stop at (default: 1e-10)")
    s.add_argument("--block", type=int, default=None,
                   help="tile edge (cholesky: 256 inputs; cg: 2048 — each tile one file of the store)")
    s.add_argument("--max-memory", default=None, metavar="BYTES",
                   help="memory this process may use, e.g. 8GiB (default: half the available memory); the need is "
                        "estimated before anything is allocated and a larger one refused")
    s.add_argument("--save", default=None, metavar="PATH", help="write PATH.npz + PATH.json (default: not saved)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_regress)
    return s
