"""``limits coord-check`` — the coordinate check of the user's own torch network, as numbers.

    limits coord-check --factory mymodels:transformer --allow mymodels --param muP --widths 64 128 256 512
        applies the parameterisation to the factory's modules, then checks every tensor against its
        predicted exponents
    limits coord-check --factory mymodels:transformer --allow mymodels --as-is --expect muP --widths ...
        checks the modules exactly as the factory builds them (the user's own implementation)

``--factory``/``--data`` name a plain function of a module allowed with ``--allow`` (found in the current folder
without PYTHONPATH) or a demo of limits (``limits.torch.demos:mlp``, no ``--allow``); the rule is
:mod:`limits.resolver`'s, and an error in the user's code exits 2 with one line naming it.

Exit 0 when every tensor behaves as predicted, 1 when one does not (the line "Not as predicted: …" names the
failing rows, culprit first), 2 on bad input (and on optimizer groups that cannot support a verdict: no trainable
tensor, a tensor not in the module, a learning rate ≤ 0).
This module imports torch only when the command runs (the parser is built without it).
"""
from __future__ import annotations


def register(sub):
    s = sub.add_parser("coord-check", help="coordinate check of a torch network: per-tensor width exponents vs "
                                           "the parameterisation's predictions (needs the extra 'torch')")
    s.add_argument("--factory", required=True, metavar="MODULE:FUNCTION",
                   help="a plain function width -> torch.nn.Module defined in a module you allow (or a demo "
                        "network of limits: limits.torch.demos:mlp, :transformer, …)")
    s.add_argument("--allow", action="append", default=[], metavar="MODULE",
                   help="your own module whose functions may be named, in the current folder or on sys.path "
                        "(not the standard library, limits or a library limits runs on); importing it runs its "
                        "code; repeatable")
    how = s.add_mutually_exclusive_group(required=True)
    how.add_argument("--param", metavar="NAME", help="apply this parameterisation (SP, NTK, MF, muP, …)")
    how.add_argument("--as-is", action="store_true", help="check the modules as the factory builds them")
    s.add_argument("--expect", metavar="NAME",
                   help="with --as-is: the parameterisation they should follow (required with --as-is)")
    s.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256, 512],
                   help="widths N the module is built at, at least three for the exponent fit (default: 64 128 "
                        "256 512)")
    s.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="adam",
                   help="optimizer of the training steps; the predicted exponents are its own (default: adam)")
    s.add_argument("--lr", type=float, default=1e-4,
                   help="learning rate (default 1e-4: the predicted exponents are those of small updates; an "
                        "unstable parameterisation such as SP leaves that regime at large widths)")
    s.add_argument("--steps", type=int, default=3,
                   help="full-batch training steps; every tensor is measured after each (default: 3)")
    s.add_argument("--seeds", type=int, default=4,
                   help="independent initialisations per width, ≥ 2 for the confidence intervals (default: 4)")
    s.add_argument("--seed", type=int, default=0, help="seed of the initialisations and the data (default: 0)")
    s.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise false-alarm level of the verdict on a correct module (default 0.05)")
    s.add_argument("--gauge", choices=("a0", "derived"), default="a0",
                   help="a0: init and learning rates only (default); derived: the solver's gauge with forward multipliers")
    s.add_argument("--no-init-check", dest="check_init", action="store_false",
                   help="with --param: take the factory's init as SP without checking it (parameterise refuses an "
                        "init whose width scaling is not SP's, e.g. std 0.02 at every width)")
    s.add_argument("--data", metavar="MODULE:FUNCTION",
                   help="a function () -> (X, Y) in a module you allow, or limits.torch.demos:mlp_data / "
                        ":transformer_data (default: a tiny synthetic task)")
    s.add_argument("--role", action="append", default=[], metavar="NAME=ROLE",
                   help="the role of a tensor the traced forward cannot decide (input, hidden, output, vector, "
                        "constant), e.g. --role cls_token=input; repeatable (default: none)")
    s.add_argument("--save", metavar="PATH", help="write the result to PATH.npz + PATH.json (default: not saved)")
    s.add_argument("--plot", metavar="FILE", help="write the exponent plot (png/pdf) (default: no plot)")
    s.set_defaults(func=cmd_coord_check)


MAX_WIDTH = 2 ** 15          # an N×N float32 weight at 2^15 is 4 GB
MAX_SEEDS = 256
MAX_STEPS = 1000
MAX_SEED = (2 ** 63 - 1) // 1_000_003 - 1024    # = limits.torch.data_checks.MAX_SEED (torch not imported here)


def _check_args(args):
    """Every option checked (naming it) before torch or the user's module is imported."""
    import math

    from ..model import parameterisation_name as _param_name

    if args.as_is and not args.expect:
        raise ValueError("--as-is needs --expect NAME (the parameterisation the modules should follow)")
    if args.param and args.expect:
        raise ValueError("--expect is for --as-is; with --param the parameterisation is the expectation")
    if args.as_is and not args.check_init:
        raise ValueError("--no-init-check is for --param (--as-is checks the modules as built, their init included)")
    for flag, name in (("--param", args.param), ("--expect", args.expect)):
        if name is not None:
            try:
                _param_name(name)
            except ValueError as exc:
                raise ValueError(f"{flag}: {exc}") from None
    bad = [w for w in args.widths if not 1 <= w <= MAX_WIDTH]
    if bad:
        raise ValueError(f"--widths must lie in [1, {MAX_WIDTH}], got {bad[0]}")
    if len(set(args.widths)) < 3:
        raise ValueError(f"--widths: need at least 3 distinct widths, got {args.widths}")
    if not 2 <= args.seeds <= MAX_SEEDS:
        raise ValueError(f"--seeds must lie in [2, {MAX_SEEDS}], got {args.seeds}")
    if not 1 <= args.steps <= MAX_STEPS:
        raise ValueError(f"--steps must lie in [1, {MAX_STEPS}] (a coordinate check takes a few steps), got {args.steps}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise ValueError(f"--lr must be a finite number > 0, got {args.lr}")
    if not (math.isfinite(args.alpha) and 0 < args.alpha < 1):
        raise ValueError(f"--alpha must be a level in (0, 1), got {args.alpha}")
    if not 0 <= args.seed <= MAX_SEED:
        raise ValueError(f"--seed must lie in [0, {MAX_SEED}] (torch seeds are 64-bit), got {args.seed}")
    from .roles import parse_roles

    args.roles = parse_roles(args.role)


def cmd_coord_check(args):
    _check_args(args)
    from ..errors import elide
    from .progress_lines import announce, sizes_text

    ws = sorted(set(args.widths))
    how = f"under {args.param}" if args.param else f"as built, expected to follow {args.expect}"
    announce(f"coord-check: {elide(args.factory, 80)} {how}: widths {sizes_text(ws)}, {args.seeds} seeds × "
             f"{args.steps} step(s) = {len(ws) * args.seeds} training runs (the widest take most of the time)")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("coord-check needs PyTorch: python -m pip install 'limits[torch]'") from None
    from ..resolver import call
    from .resolve import resolve_factory

    factory = resolve_factory(args.factory, args.allow)     # every name resolved before anything is called
    data_fn = resolve_factory(args.data, args.allow, option="--data") if args.data else None
    from .apply_params import parameterise
    from .coordcheck import trace_inputs, coord_check, synthetic_data
    from .data_checks import check_factory_data

    widths = sorted(set(args.widths))
    if data_fn is not None:
        announce(f"coord-check: calling --data {elide(args.data, 80)}")
        data = call(data_fn, what=f"--data {elide(args.data)}")
    else:
        data = synthetic_data(factory, widths[0], seed=args.seed)
    data = check_factory_data(factory, widths[0], data, what=f"--data {elide(args.data)}" if args.data else
                              "the synthetic data", inputs_only=True)          # before tracing or training
    if args.param:
        x = data[0] if isinstance(data, (tuple, list)) else data          # traced to find the attention
        announce(f"coord-check: applying {args.param} (tracing the factory at widths {', '.join(map(str, widths))})")
        target = parameterise(factory, args.param, widths=widths, optimizer=args.optimizer,
                              gauge=None if args.gauge == "derived" else "a0", roles=args.roles,
                              example_inputs=trace_inputs(factory, x, widths[0]), check_init=args.check_init)
        r = coord_check(target, widths, data, lr=args.lr, steps=args.steps, seeds=args.seeds, alpha=args.alpha,
                        seed=args.seed)
    else:
        r = coord_check(factory, widths, data, optimizer=args.optimizer, lr=args.lr, steps=args.steps,
                        seeds=args.seeds, expect=args.expect, alpha=args.alpha, seed=args.seed, roles=args.roles)
    print(r.to_markdown())
    if args.save:
        r.save(args.save)
    if args.plot:
        r.plot(args.plot)                 # saved and closed (limits.style.plot_target)
    return 0 if r.passed else 1
