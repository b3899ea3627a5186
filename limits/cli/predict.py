"""`limits predict`: infinite-width predictions of a model on the user's own data (and their check).

    limits predict --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --method posterior --noise 1e-3
    limits predict --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --method flow --t 1 10 100
    limits predict ... --method gd --t 10 100 --lr 0.1 --reduction mean --check --widths 64 128 256 --inits 64

``--method posterior``: NNGP posterior (``limits.predict.nngp_posterior``); ``flow`` / ``gd``: the
NTK ensemble of networks trained by gradient flow / discrete GD (``limits.predict.gradient_descent``;
``--t`` times, integer step counts for gd). ``--save PATH`` writes PATH.npz + PATH.json; ``--check``
also runs ``limits.check`` against finite networks of the same model.
"""
from __future__ import annotations

import numpy as np


def _load(path, name, matrix):
    from .model import read_array

    a = read_array(path, f"--{name.replace('_', '-')}")
    if matrix and a.ndim == 1:
        a = a[:, None]
    return a


# API names in messages → the options that set them on this command line
_CLI_NAMES = (("flow=True", "--method flow"), ("learning_rate", "--lr"), ("X_train", "--x-train"),
              ("Y_train", "--y-train"), ("X_test", "--x-test"))


def _cli(fn, *a, **kw):
    """``fn(*a, **kw)`` with the API's argument names in a ValueError replaced by the options."""
    try:
        return fn(*a, **kw)
    except ValueError as exc:
        msg = str(exc)
        for api, cli in _CLI_NAMES:
            msg = msg.replace(api, cli)
        if msg == str(exc):
            raise
        raise ValueError(msg) from None


def cmd_predict(args):
    import limits

    from ..cliutil import emit
    from ..model import Model

    m = Model.load(args.model)
    X = _load(args.x_train, "x_train", m.d_in == 1)
    Y = _load(args.y_train, "y_train", False)
    Xs = _load(args.x_test, "x_test", m.d_in == 1)
    if args.method == "posterior":
        if args.t is not None or args.lr is not None:
            raise ValueError("--t/--lr are for --method flow|gd, not posterior")
        r = _cli(limits.predict.nngp_posterior, m, X, Y, Xs, noise=args.noise)
        lines = [m.describe(), f"NNGP posterior, noise σ² = {r.noise:g}, log marginal likelihood "
                 f"{r.log_marginal_likelihood:.6g}", "", "test point | mean | sd"]
        for i in range(r.mean.shape[0]):
            lines.append(f"{i} | {np.array2string(r.mean[i], precision=5)} | {np.sqrt(max(r.var[i], 0)):.5g}")
        obj = {"mean": r.mean, "var": r.var, "log_marginal_likelihood": r.log_marginal_likelihood,
               "noise": r.noise}
    else:
        if args.noise != 0.0:
            raise ValueError("--noise is for --method posterior")
        if args.t is None:
            raise ValueError("--t is required for --method flow|gd (times, or GD step counts)")
        r = _cli(limits.predict.gradient_descent, m, X, Y, Xs, t=np.asarray(args.t, float), learning_rate=args.lr,
                 flow=args.method == "flow", reduction=args.reduction, cov=not args.no_cov)
        lines = [m.describe(), f"NTK ensemble, {'gradient flow' if r.flow else 'discrete GD'}, η = "
                 f"{r.learning_rate:g}, reduction {r.reduction}", "", "t | mean test output (first 3) | mean sd"]
        for k, t in enumerate(r.t):
            lines.append(f"{t:g} | {np.array2string(r.mean[k, :3, 0], precision=5)} | "
                         f"{np.mean(np.sqrt(np.maximum(r.var[k], 0))):.5g}")
        obj = {"t": r.t, "mean": r.mean, "var": r.var, "learning_rate": r.learning_rate, "reduction": r.reduction,
               "flow": r.flow}
    if args.save:
        r.save(args.save)
        lines.append(f"saved {args.save}.npz/.json")
    if args.check:
        c = _cli(limits.check, r, widths=args.widths, inits=args.inits, seed=args.seed, progress=False)
        lines += ["", c.to_markdown()]
        obj["check"] = {"passed": c.passed, "worst_z": c.worst_z, "rate": c.rate, "rate_ci": c.rate_ci,
                        "scale_bias": c.scale_bias, "scale_bias_se": c.scale_bias_se, "power": c.power,
                        "reasons": c.reasons}
    emit(obj, args, "\n".join(lines))
    return 0 if not args.check or obj["check"]["passed"] else 1


def register(subparsers):
    s = subparsers.add_parser("predict", help="infinite-width predictions on your data: NNGP posterior or the "
                                              "NTK ensemble of GD-trained networks (and their check)")
    s.add_argument("--model", required=True, metavar="FILE", help="model file (.toml/.json; `limits model`)")
    s.add_argument("--x-train", required=True, metavar="FILE", help="training inputs P×d_in (.npy/.npz/.csv/.txt)")
    s.add_argument("--y-train", required=True, metavar="FILE", help="training targets (P,) or P×d_out")
    s.add_argument("--x-test", required=True, metavar="FILE", help="test inputs P_test×d_in")
    s.add_argument("--method", choices=("posterior", "flow", "gd"), default="flow")
    s.add_argument("--noise", type=float, default=0.0, help="posterior: observation noise variance σ²")
    s.add_argument("--t", type=float, nargs="+", default=None, help="flow: times; gd: integer step counts")
    s.add_argument("--lr", type=float, default=None, help="learning rate η (default: the model's lr)")
    s.add_argument("--reduction", choices=("sum", "mean"), default="sum",
                   help="loss ½Σ_μ‖f−y‖² (sum) or its mean over the P samples")
    s.add_argument("--no-cov", action="store_true", help="skip the P_test×P_test covariance per time")
    s.add_argument("--save", default=None, metavar="PATH", help="write PATH.npz + PATH.json")
    s.add_argument("--check", action="store_true", help="also check against finite networks (limits.check)")
    s.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256])
    s.add_argument("--inits", type=int, default=64)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_predict)
    return s
