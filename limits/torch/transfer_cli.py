"""``limits transfer`` — μTransfer as a tested prediction, on the command line.

    limits transfer --factory mymodels:mlp --allow mymodels --param muP --widths 64 128 256 512 \\
        --log2-lrs -14 -4 1 --data mymodels:task [--backend loky|dask] [--store DIR] [--out DIR]
    limits transfer --factory mymodels:resnet --allow mymodels --param depth-muP --widths 128 \\
        --depths 4 8 16 32 --lrs 1e-4 3e-4 1e-3 3e-3 1e-2 --data mymodels:task

``--factory`` and ``--data`` follow the rules of ``limits coord-check`` (:mod:`limits.resolver`: a plain
function defined in a module allowed with ``--allow``, or a declared demo of limits such as
``limits.torch.transfer_demos:digits_mlp`` with no ``--allow``; an error in the user's code exits 2 with one
line naming it). ``--data`` returns ``(X, Y)`` or ``{"train": (X, Y), "test": (X, Y)}`` (the held-out pair is
evaluated after training). Exit 0 when the verdict is the predicted one (μP: transfers; SP: drifts downwards),
1 when it is not or is inconclusive (the reason is printed), 2 on bad input. Torch is imported only when the
command runs.
"""
from __future__ import annotations

import math

MAX_WIDTH = 2 ** 15
MAX_DEPTH = 4096
MAX_SEEDS = 256
MAX_STEPS = 1_000_000
MAX_LRS = 200


def register(sub):
    s = sub.add_parser("transfer", help="μTransfer test of a torch network: optimal learning rate per width (or "
                                        "depth) with CIs, its drift vs the parameterisation's prediction, a verdict "
                                        "(needs the extra 'torch')")
    s.add_argument("--factory", required=True, metavar="MODULE:FUNCTION",
                   help="a plain function width -> nn.Module (width, depth -> nn.Module with --depths) defined in a "
                        "module you allow, or a demo network of limits (limits.torch.transfer_demos:digits_mlp, "
                        ":byte_transformer, :residual_mlp; no --allow)")
    s.add_argument("--allow", action="append", default=[], metavar="MODULE",
                   help="your own module whose functions may be named, in the current folder or on sys.path "
                        "(not the standard library, limits or a library limits runs on); importing it runs its "
                        "code; repeatable")
    s.add_argument("--param", required=True, metavar="NAME", help="parameterisation applied: SP, muP, depth-muP, …")
    s.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256, 512],
                   help="widths the learning rates are scanned at (default: 64 128 256 512)")
    s.add_argument("--depths", type=int, nargs="+",
                   help="a depth study (one width): factory(width, depth) (default: a width study)")
    lr = s.add_mutually_exclusive_group(required=True)
    lr.add_argument("--lrs", type=float, nargs="+", metavar="LR", help="learning rates to scan")
    lr.add_argument("--log2-lrs", type=float, nargs=3, metavar=("START", "STOP", "STEP"),
                    help="log2 learning rates START, START+STEP, …, STOP")
    s.add_argument("--data", metavar="MODULE:FUNCTION",
                   help="a function () -> (X, Y) or {'train': (X, Y), 'test': (X, Y)} in an allowed module "
                        "(default: a tiny synthetic regression task)")
    s.add_argument("--role", action="append", default=[], metavar="NAME=ROLE",
                   help="the role of a tensor the traced forward cannot decide (input, hidden, output, vector, "
                        "constant), e.g. --role cls_token=input; repeatable (default: none)")
    s.add_argument("--steps", type=int, default=100, help="training steps per run (default: 100)")
    s.add_argument("--seeds", type=int, default=4,
                   help="independent runs per (width, learning rate), ≥ 2 for the confidence intervals "
                        "(default: 4)")
    s.add_argument("--batch-size", type=int, help="rows per step, drawn with replacement (default: full batch)")
    s.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="adam",
                   help="optimizer of the runs (default: adam)")
    s.add_argument("--criterion", choices=("train", "test"), default="train",
                   help="which loss the verdict reads (test needs held-out data) (default: train)")
    s.add_argument("--margin", type=float, default=0.25,
                   help="|drift| below this (log2 units per doubling) counts as transfer (default 0.25)")
    s.add_argument("--diverge", type=float, default=3.0,
                   help="a run whose final loss exceeds this × its initial loss is diverged (default 3)")
    s.add_argument("--target", type=int, help="size at which to predict the optimum (default 4 × the largest)")
    s.add_argument("--no-calibrate", action="store_true", help="skip the simulated false-verdict rate and power")
    s.add_argument("--backend", choices=("serial", "loky", "dask"), default="serial",
                   help="where the runs are computed (limits.sweep backends) (default: serial)")
    s.add_argument("--n-jobs", type=int, help="workers of the loky / local dask backend (default: one per core)")
    s.add_argument("--scheduler", metavar="ADDRESS", help="a running dask scheduler (tcp://host:8786)")
    s.add_argument("--store", metavar="DIR", help="store finished runs here; a rerun resumes (limits.sweep)")
    s.add_argument("--out", dest="out_dir", metavar="DIR",
                   help="write the result DIR/transfer.npz + .json, its Markdown (.md) and its figure (.png)")
    s.add_argument("--seed", type=int, default=0, help="seed of the initialisations and the data (default: 0)")
    s.set_defaults(func=cmd_transfer)


def _lrs(args):
    import numpy as np

    if args.lrs is not None:
        bad = [v for v in args.lrs if not (math.isfinite(v) and v > 0)]
        if bad:
            raise ValueError(f"--lrs must be finite numbers > 0, got {bad[0]}")
        return np.asarray(args.lrs, float)
    a, b, st = args.log2_lrs
    if not all(math.isfinite(v) for v in (a, b, st)) or st <= 0 or b < a or abs(a) > 200 or abs(b) > 200:
        raise ValueError(f"--log2-lrs START STOP STEP: need START ≤ STOP within ±200 and STEP > 0, got {a} {b} {st}")
    n = int(math.floor((b - a) / st + 1e-9)) + 1
    if n > MAX_LRS:
        raise ValueError(f"--log2-lrs gives {n} learning rates; at most {MAX_LRS}")
    return 2.0 ** (a + st * np.arange(n))


def _check_args(args):
    """Every option checked (naming it) before torch or the user's module is imported."""
    from ..model import parameterisation_name as _param_name

    try:
        _param_name(args.param)
    except ValueError as exc:
        raise ValueError(f"--param: {exc}") from None
    bad = [w for w in args.widths if not 1 <= w <= MAX_WIDTH]
    if bad:
        raise ValueError(f"--widths must lie in [1, {MAX_WIDTH}], got {bad[0]}")
    if args.depths is not None:
        bad = [d for d in args.depths if not 1 <= d <= MAX_DEPTH]
        if bad:
            raise ValueError(f"--depths must lie in [1, {MAX_DEPTH}], got {bad[0]}")
        if len(set(args.depths)) > 1 and len(set(args.widths)) > 1:
            raise ValueError("--depths with several depths is a depth study: give one --widths value")
    n = len(set(args.depths)) if args.depths and len(set(args.depths)) > 1 else len(set(args.widths))
    if n < 3:
        raise ValueError(f"need at least 3 distinct sizes (--widths, or --depths for a depth study), got {n}")
    if not 2 <= args.seeds <= MAX_SEEDS:
        raise ValueError(f"--seeds must lie in [2, {MAX_SEEDS}], got {args.seeds}")
    if not 1 <= args.steps <= MAX_STEPS:
        raise ValueError(f"--steps must lie in [1, {MAX_STEPS}], got {args.steps}")
    if args.batch_size is not None and args.batch_size < 1:
        raise ValueError(f"--batch-size must be a positive integer, got {args.batch_size}")
    if not (math.isfinite(args.margin) and args.margin > 0):
        raise ValueError(f"--margin must be a finite number > 0, got {args.margin}")
    if not (math.isfinite(args.diverge) and args.diverge > 1):
        raise ValueError(f"--diverge must be a finite factor > 1, got {args.diverge}")
    if args.target is not None and args.target < 1:
        raise ValueError(f"--target must be a positive size, got {args.target}")
    if args.n_jobs is not None and args.n_jobs < 1:
        raise ValueError(f"--n-jobs must be a positive integer, got {args.n_jobs}")
    if args.scheduler is not None and args.backend != "dask":
        raise ValueError("--scheduler needs --backend dask")
    if args.criterion == "test" and not args.data:
        raise ValueError("--criterion test needs --data returning {'train': …, 'test': …}")
    if args.out_dir:
        from ..cliutil import ensure_writable_dir
        from pathlib import Path

        ensure_writable_dir(Path(args.out_dir), "--out")
    from .roles import parse_roles

    args.roles = parse_roles(args.role)
    lrs = _lrs(args)
    if len(set(lrs.tolist())) < 3:
        raise ValueError("need at least 3 distinct learning rates (--lrs or --log2-lrs)")
    return lrs


def _split_data(got):
    """(train pair, held-out pair or None) from what a --data function returned."""
    from ..errors import elide

    if isinstance(got, dict):
        if set(got) - {"train", "test"} or "train" not in got:
            raise ValueError("--data: a dict must have the keys 'train' and optionally 'test', got "
                             f"{elide(str(sorted(map(str, got))), 80)}")
        if "test" in got and got["test"] is None:
            raise ValueError("--data: 'test' is None; give the held-out pair (X, Y) or leave the key out")
        return got["train"], got.get("test")
    if isinstance(got, (tuple, list)) and len(got) == 2:
        return tuple(got), None
    n = f" of {len(got)} items" if isinstance(got, (tuple, list)) else ""
    raise ValueError(f"--data must return (X, Y) or {{'train': (X, Y), 'test': (X, Y)}}, got {type(got).__name__}{n}")


def _default_data(factory, args):
    from .coordcheck import synthetic_data

    if args.depths:
        from .depth import AtDepth

        factory = AtDepth(factory, min(args.depths))
    return synthetic_data(factory, min(args.widths), batch=64, seed=args.seed)


def _write(r, out_dir):
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    from ..results import atomic_write_text

    d = Path(out_dir)
    r.save(d / "transfer")
    atomic_write_text((d / "transfer").with_suffix(".md"), r.to_markdown())
    r.plot((d / "transfer").with_suffix(".png"))


def cmd_transfer(args):
    lrs = _check_args(args)
    from ..errors import elide
    from .progress_lines import announce, sizes_text

    sizes = sorted(set(args.depths)) if args.depths and len(set(args.depths)) > 1 else sorted(set(args.widths))
    runs = len(sizes) * len(lrs) * args.seeds
    announce(f"transfer: {elide(args.factory, 80)} under {args.param}: {'depths' if len(sizes) > 1 and args.depths else 'widths'} "
             f"{sizes_text(sizes)}, {len(lrs)} learning rates × {args.seeds} seeds × {args.steps} steps = {runs} "
             f"training runs{'' if args.no_calibrate else ', then the calibration of the verdict'}")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("transfer needs PyTorch: python -m pip install 'limits[torch]'") from None
    from ..resolver import call
    from .resolve import resolve_factory

    factory = resolve_factory(args.factory, args.allow)     # every name resolved before anything is called
    data_fn = resolve_factory(args.data, args.allow, option="--data") if args.data else None
    if data_fn is not None:
        announce(f"transfer: calling --data {elide(args.data, 80)}")
        train, held = _split_data(call(data_fn, what=f"--data {elide(args.data)}"))
    else:
        train, held = _default_data(factory, args), None
    from .transfer_study import checked_data, transfer

    what = f"--data {elide(args.data)}" if args.data else "the synthetic data"
    train_x, train_y, held, _ = checked_data(factory, sorted(set(args.widths)), sorted(set(args.depths or [])) or None,
                                             train, held, args.batch_size,
                                             what=(what, f"{what} 'test'", "--batch-size"))  # before any run
    train = (train_x, train_y)

    r = transfer(factory, args.param, widths=args.widths, lrs=lrs, data=train, steps=args.steps, seeds=args.seeds,
                 optimizer=args.optimizer, depths=args.depths, held_out=held, batch_size=args.batch_size,
                 diverge=args.diverge, margin=args.margin, target=args.target, calibrate=not args.no_calibrate,
                 criterion=args.criterion, backend=args.backend, n_jobs=args.n_jobs, scheduler=args.scheduler,
                 store=args.store, seed=args.seed, roles=args.roles or None)
    print(r.to_markdown())
    if args.out_dir:
        _write(r, args.out_dir)
    return 0 if r.passed else 1
