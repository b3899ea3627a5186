"""`limits model`, `limits kernel`, `limits check`: describe a network once, compute its kernels between
two input sets, and check a prediction against finite networks of the same model.

    limits model --resnet --d-in 10 --depth 20 --activation erf --rho 0.3 --out m.toml
    limits kernel --model m.toml --x1 a.npy --x2 b.npy --json
    limits kernel --model net.json --x1 images.npy     # a composition: limits.serial(...).save("net.json")
    limits check --model m.toml --what nngp --x x.npy --widths 64 128 256 512
    limits check --prediction pred          # a prediction saved by `limits predict ... --save pred`
"""
from __future__ import annotations

import numpy as np
from . import EXIT_INCONCLUSIVE


def model_arguments(s, required=False):
    """``--model FILE`` (a .toml/.json model or composition description) of `limits kernel` and `limits check`."""
    s.add_argument("--model", required=required, metavar="FILE",
                   help="model file (.toml or .json; write one with `limits model ... --out FILE`) or composition "
                        "file (`limits.serial(...).save(FILE)`)")


def load_model(path):
    from ..model import Model

    return Model.load(path)


def load_network(path):
    """``--model FILE`` of the commands whose theory takes compositions too (kernel, check, predict, regress): a
    model file (:meth:`limits.Model.load`) or a composition file written by ``limits.serial(...).save(FILE)``
    (``{"serial": [...]}``, every layer checked by :meth:`limits.layers.Serial.load`) — told apart by that key."""
    from pathlib import Path

    from ..layers import Serial
    from ..readfile import named, parse_json, parse_toml, read_text

    path = Path(path)
    text = read_text(path, "model file")
    d = (parse_toml if path.suffix.lower() == ".toml" else parse_json)(text, named("model file", path))
    inner = d.get("model") if isinstance(d, dict) and isinstance(d.get("model"), dict) else d
    if isinstance(inner, dict) and "serial" in inner:
        return Serial.load(path)
    return load_model(path)


def is_matrix_input(m) -> bool:
    """Whether 1-D input files are one column (a Model with d_in = 1) rather than one sample; a composition
    reads its inputs' shape from the file."""
    return getattr(m, "d_in", None) == 1


def read_array(path, option):
    """The float array in ``path`` (.npy/.npz/.csv/.txt, :func:`limits.cliutil.user_array`); a ValueError naming
    ``option`` if it cannot be read or is not a finite real array."""
    from ..cliutil import user_array
    from ..readfile import named

    a = np.asarray(user_array(path, option, key=option.lstrip("-").replace("-", "_")))
    if a.dtype.kind == "c":
        raise ValueError(f"{named(option, path)} holds complex values; a real array is needed "
                         "(the imaginary part is never dropped silently)")
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{named(option, path)} holds a {a.dtype} array; a real numeric array is needed")
    a = a.astype(float)
    if a.size and not np.all(np.isfinite(a)):
        raise ValueError(f"{named(option, path)} contains NaN or inf")
    return a


def _array(path, name):
    a = read_array(path, f"--{name.replace('_', '-')}")
    if a.ndim == 1:
        a = a[None, :]
    return a


# ------------------------------------------------------------------------------------------ limits model
def cmd_model(args):
    from ..cliutil import emit
    from ..model import Model, mlp, resnet

    if args.show:
        given = sorted(getattr(args, "_explicit", set()) - {"show", "out", "json", "command", "func"})
        if given:
            raise ValueError(f"--show describes an existing model file; drop "
                             f"{', '.join('--' + k.replace('_', '-') for k in given)} (or build a new model without --show)")
        m = load_model(args.show)
    else:
        kw = {k: getattr(args, k) for k in ("activation", "sigma_w2", "sigma_b2", "sigma_w2_in", "sigma_b2_in",
                                            "sigma_w2_out", "sigma_b2_out", "parameterisation", "gamma0", "lr",
                                            "d_out")}
        if args.resnet:
            kw.update(rho=args.rho, depth_scaling=args.depth_scaling, alpha=args.alpha,
                      block_layers=args.block_layers, post_activation=args.post_activation)
        elif args.block_layers != 1 or args.post_activation or args.depth_scaling != "none":
            raise ValueError("--block-layers/--post-activation/--depth-scaling need --resnet")
        if args.d_in is None:
            raise ValueError("--d-in is required (input dimension)")
        m = (resnet if args.resnet else mlp)(args.d_in, args.depth, **kw)
    if args.out:
        from ..cliutil import ensure_writable_file

        ensure_writable_file(args.out, "--out")
        m.save(args.out)
    text = m.describe() + (f"\nwritten to {args.out}" if args.out else "\n\n" + m.to_toml())
    emit(m.to_dict() if isinstance(m, Model) else m, args, text)
    return 0


def _model_parser(sub):
    from ..cliutil import add_variance_options

    s = sub.add_parser("model", help="describe a network once (read-in, depth blocks, read-out, "
                                     "parameterisation) and save it as a model file")
    s.add_argument("--show", metavar="FILE", help="describe an existing model file")
    s.add_argument("--resnet", action="store_true", help="residual blocks (default: a feed-forward MLP)")
    s.add_argument("--d-in", type=int, default=None, help="input dimension")
    s.add_argument("--depth", type=int, default=1,
                   help="hidden N×N blocks between read-in and read-out (the one meaning of depth "
                        "in every limits command; weight layers = depth·block_layers + 2) (default: 1)")
    s.add_argument("--d-out", type=int, default=1, help="output dimension (default: 1)")
    s.add_argument("--activation", default="erf", help="activation φ (`limits activations` lists them) (default: erf)")
    add_variance_options(s)
    s.add_argument("--rho", type=float, default=1.0, help="residual branch multiplier ρ (default: 1)")
    s.add_argument("--depth-scaling", default="none", choices=("none", "sqrt", "linear", "alpha"),
                   help="ρ_eff = ρ, ρ/√depth, ρ/depth, ρ·depth^-alpha (default: none)")
    s.add_argument("--alpha", type=float, default=0.5,
                   help="exponent of --depth-scaling alpha, ρ_eff = ρ·depth^-alpha (default: 0.5)")
    s.add_argument("--block-layers", type=int, default=1, help="weight layers per residual block (default: 1)")
    s.add_argument("--post-activation", action="store_true",
                   help="post-activation blocks x^l = φ(x^(l−1) + ρ F(x^(l−1))) instead of pre-activation "
                        "h^l = h^(l−1) + ρ F(h^(l−1)) (finite networks only; the theories treat pre-activation)")
    s.add_argument("--parameterisation", "--param", default="NTK",
                   help="SP, NTK, MF, muP, depth-muP, muPC (default: NTK)")
    s.add_argument("--gamma0", type=float, default=1.0, help="feature-learning strength γ0 (default: 1)")
    s.add_argument("--lr", type=float, default=1.0, help="base learning rate η0 (default: 1)")
    s.add_argument("--out", default=None, help="write the model file (.toml or .json) (default: print it)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_model)


# ------------------------------------------------------------------------------------------ limits kernel
def cmd_kernel(args):
    from ..cliutil import emit
    from ..kernels import kernel

    m = load_network(args.model)
    if args.save:
        from ..cliutil import ensure_writable_result

        ensure_writable_result(args.save, "--save")
    from ..progress import stage

    X1 = _array(args.x1, "x1")
    X2 = None if args.x2 is None else _array(args.x2, "x2")
    with stage(f"kernel: {' and '.join(g.upper() for g in args.get)} of {X1.shape[0]}×"
               f"{(X1 if X2 is None else X2).shape[0]} inputs"):
        k = kernel(m, X1, X2, get=tuple(args.get), layers=args.layers)
    if args.save:
        k.save(args.save)
    lines = [m.describe(), f"inputs: X1 {X1.shape}" + ("" if X2 is None else f", X2 {X2.shape}")]
    for name in args.get:
        arr = getattr(k, name)
        lines.append(f"{name.upper()} ({arr.shape[0]}×{arr.shape[1]}):")
        with np.printoptions(precision=8, suppress=False, linewidth=120, threshold=200):
            lines.append(str(arr))
    lines += [f"warning: {w}" for w in k.diagnostics.get("warnings", ())]
    if args.save:
        lines.append(f"saved {args.save}.npz/.json")
    emit({"nngp": k.nngp, "ntk": k.ntk, "diagnostics": k.diagnostics, "model": k.model}, args, "\n".join(lines))
    return 0


def _kernel_parser(sub):
    s = sub.add_parser("kernel", help="NNGP/NTK read-out kernels of a model between two input sets (P1×P2)")
    model_arguments(s, required=True)
    s.add_argument("--x1", required=True, help="inputs P1×d_in (.npy/.npz/.csv), samples are rows")
    s.add_argument("--x2", default=None, help="second input set P2×d_in (default: X1 against itself)")
    s.add_argument("--get", nargs="+", default=["nngp", "ntk"], choices=("nngp", "ntk"),
                   help="which kernels (default: nngp ntk)")
    s.add_argument("--layers", action="store_true", help="also keep every layer's block")
    s.add_argument("--save", default=None, metavar="PATH",
                   help="write PATH.npz + PATH.json (`limits predict --kernel PATH` reuses a kernel of inputs "
                        "holding every training and test row) (default: not saved)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_kernel)


# ------------------------------------------------------------------------------------------ limits check
PREDICTION_TYPES = ("limits.predict.PosteriorResult", "limits.predict.GDResult")


def load_prediction(path):
    """A prediction saved by ``limits predict --save PATH`` (PATH.npz + PATH.json): only the result
    types of :mod:`limits.predict` are accepted (the type is read before anything is imported)."""
    from ..results import load_result, read_payload

    payload = read_payload(path, "--prediction")
    kind = payload.get("type") if isinstance(payload, dict) else None
    if kind not in PREDICTION_TYPES:
        raise ValueError(f"--prediction: {path} holds {kind!r}, not a prediction of `limits predict` "
                         f"({', '.join(PREDICTION_TYPES)})")
    return load_result(path, "--prediction")


def cmd_check(args):
    from .. import check
    from ..cliutil import emit
    from .checkopts import check_summary

    if args.plot:                       # every output checked before the (possibly long) computation
        _check_plot_path(args.plot)
    if args.prediction is not None:
        if args.model or args.x or args.x2 or args.y or args.layers:
            raise ValueError("--prediction records its model and inputs: do not give --model/--x/--x2/--y/--layers")
        res = load_prediction(args.prediction)
        return _report_check(args, check(res, widths=args.widths, inits=args.inits, seed=args.seed,
                                         target_power=args.target_power), check_summary, emit)
    if args.model is None or args.x is None:
        raise ValueError("give --model and --x (or --prediction PATH of a saved prediction)")
    from ..progress import stage

    m = load_network(args.model)
    X = _array(args.x, "x")
    if args.what in ("nngp", "ntk", "kernel"):
        from ..kernels import kernel

        get = ("nngp", "ntk") if args.what == "kernel" else (args.what,)
        X2 = None if args.x2 is None else _array(args.x2, "x2")
        with stage(f"check: theory ({' and '.join(g.upper() for g in get)} of {X.shape[0]}"
                   f"{'' if X2 is None else '×' + str(X2.shape[0])} inputs)"):
            res = kernel(m, X, X2, get=get, layers=args.layers)
    else:
        from .. import dmft

        if args.y is None:
            raise ValueError("--what dmft needs --y (targets, P values)")
        from ..layers import as_serial

        if as_serial(m) is not None:
            from ..errors import ModelError

            raise ModelError("limits check --what dmft cannot treat a composition from the command line (its DMFT "
                             "needs gamma0 and the GD step dt): use limits.dmft.solve(X, y, model=composition, "
                             "gamma0=..., dt=..., T=...) and limits.check(result) in Python")
        y = np.asarray(_array(args.y, "y"), dtype=float).ravel()
        _refuse_trivial_training_data(X, y, args)
        with stage(f"check: theory (DMFT of {X.shape[0]} inputs, {args.steps} steps)"):
            res = dmft.solve(X, y, model=m, steps=args.steps)
    c = check(res, widths=args.widths, inits=args.inits, seed=args.seed, layers=args.layers,
              target_power=args.target_power)
    return _report_check(args, c, check_summary, emit)


def _refuse_trivial_training_data(X, y, args):
    """All-zero targets or inputs give the trained mean-field network nothing to learn (its infinite-width output
    stays 0, or every input is the same point): refused before the DMFT solve and the finite networks run, naming
    the file — the check would end, after both, in a prediction that is identically zero."""
    if y.size and not np.any(y):
        raise ValueError(f"--y: {args.y} holds only zeros: with zero targets the mean-field network's output stays at "
                         "its infinite-width start, 0, and the check has nothing to compare; give nonzero targets")
    if X.size and not np.any(X):
        raise ValueError(f"--x: {args.x} holds only zeros: every input is the same point (the origin), so the "
                         "features carry no signal and the trained output is degenerate; give distinct inputs")


def _report_check(args, c, check_summary, emit):
    if args.plot:
        c.plot(args.plot)                 # saved and closed (limits.style.plot_target)
    text = c.to_markdown() + (f"\nplot: {args.plot}" if args.plot else "")
    emit(check_summary(c), args, text)
    return 0 if c.passed else (EXIT_INCONCLUSIVE if c.verdict == "inconclusive" else 1)


def _check_plot_path(path):
    """``--plot FILE``: writable, with a suffix matplotlib can write (.png, .pdf, .svg, …) — checked first."""
    from ..cliutil import ensure_writable_file
    from ..style import figure_path

    figure_path(path, "--plot")
    ensure_writable_file(path, "--plot")


def _check_parser(sub):
    s = sub.add_parser("check", help="check a model's prediction against finite networks of the same model "
                                     "(z-scores, N → ∞ extrapolation, finite-size rate, power)")
    model_arguments(s, required=False)
    s.add_argument("--prediction", default=None, metavar="PATH",
                   help="check a prediction saved by `limits predict ... --save PATH` (PATH.npz + PATH.json) "
                        "instead of --model/--x")
    s.add_argument("--what", default="nngp", choices=("nngp", "ntk", "kernel", "dmft"),
                   help="the prediction checked: the NNGP, the NTK, both (kernel), or the DMFT of training "
                        "with --y (default: nngp)")
    s.add_argument("--x", default=None, help="inputs P×d_in (.npy/.npz/.csv); required with --model")
    s.add_argument("--x2", default=None, help="second input set for kernel checks")
    s.add_argument("--y", default=None, help="targets for --what dmft")
    s.add_argument("--steps", type=int, default=10,
                   help="GD steps for --what dmft (step = the model's lr) (default: 10)")
    from .checkopts import add_check_options

    add_check_options(s, "64 128 256 512 and 256 inits; for a --prediction three widths inside the asymptotic "
                         "regime of the problem and 64 inits")
    s.add_argument("--seed", type=int, default=0, help="seed of the finite networks (default: 0)")
    s.add_argument("--layers", action="store_true", help="kernel checks: every layer, not just the read-out")
    s.add_argument("--plot", default=None, metavar="FILE",
                   help="save the check's figure (.png/.pdf) (default: no figure)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_check)


def register(subparsers):
    _model_parser(subparsers)
    _kernel_parser(subparsers)
    _check_parser(subparsers)

