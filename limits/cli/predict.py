"""`limits predict`: infinite-width predictions of a model on the user's own data (and their check).

    limits predict --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --method posterior --y-test Ys.npy
    limits predict --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --method flow --t 1 10 100
    limits predict ... --method gd --t 10 100 --lr 0.1 --reduction mean --check --widths 64 128 256 --inits 64

``--method posterior``: NNGP posterior (``limits.predict.nngp_posterior``); ``flow`` / ``gd``: the
NTK ensemble of networks trained by gradient flow / discrete GD (``limits.predict.gradient_descent``;
``--t`` times, integer step counts for gd). The posterior's noise σ² defaults to ``auto``: output scale s²
and noise σ² fitted together by maximum marginal likelihood (``--noise 0`` interpolates; a given noise keeps
s² = 1). ``--y-test`` prints the test MSE (and the accuracy
when the targets are class labels ±1, 0/1 or one-hot). ``--save PATH`` writes PATH.npz + PATH.json
(``limits check --prediction PATH`` checks it later); ``--check`` also runs ``limits.check`` against
finite networks of the same model, with the defaults of ``limits.check``.
"""
from __future__ import annotations

import numpy as np
from . import EXIT_INCONCLUSIVE


from .checkopts import add_check_options, check_summary  # noqa: F401  (check_summary: the shared JSON summary)


def _load(path, name, matrix):
    from .model import read_array

    a = read_array(path, f"--{name.replace('_', '-')}")
    if matrix and a.ndim == 1:
        a = a[:, None]
    return a


# API names in messages → the options that set them on this command line
_CLI_NAMES = (("flow=True", "--method flow"), ("learning_rate", "--lr"), ("X_train", "--x-train"),
              ("Y_train", "--y-train"), ("X_test", "--x-test"))


def with_option_names(fn, *a, names=_CLI_NAMES, **kw):
    """``fn(*a, **kw)`` with the API's argument ``names`` in a ValueError replaced by the options."""
    try:
        return fn(*a, **kw)
    except ValueError as exc:
        msg = str(exc)
        for api, cli in names:
            msg = msg.replace(api, cli)
        if msg == str(exc):
            raise
        raise ValueError(msg) from None


def _noise(text):
    """``--noise``: 'auto' or a number ≥ 0."""
    if text is None or text == "auto":
        return "auto"
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"--noise must be 'auto' or a number >= 0, got {text!r}") from None
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"--noise must be 'auto' or a finite number >= 0, got {text!r}")
    return v


def scores(mean, Y_test, Y_train):
    """{'mse', 'mse_train_mean' (predicting the training mean), 'accuracy' (None unless the targets are
    labels: one-hot rows, ±1 or 0/1)} of a prediction ``mean`` (P_test×d) against ``Y_test``."""
    Y = np.asarray(Y_test, dtype=float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    mean = np.asarray(mean, dtype=float)
    if Y.shape != mean.shape:
        raise ValueError(f"--y-test has shape {np.asarray(Y_test).shape}; the predictions have {mean.shape}")
    out = {"mse": float(np.mean((mean - Y) ** 2)),
           "mse_train_mean": float(np.mean((np.mean(Y_train, axis=0) - Y) ** 2)), "accuracy": None}
    vals = np.unique(Y)
    if Y.shape[1] > 1 and vals.size == 2 and np.all(np.sum(Y == vals[1], axis=1) == 1):
        out["accuracy"] = float(np.mean(np.argmax(mean, 1) == np.argmax(Y, 1)))
    elif Y.shape[1] == 1 and vals.size <= 2 and set(vals.tolist()) <= {-1.0, 1.0}:
        out["accuracy"] = float(np.mean(np.sign(mean) == Y))
    elif Y.shape[1] == 1 and vals.size <= 2 and set(vals.tolist()) <= {0.0, 1.0}:
        out["accuracy"] = float(np.mean((mean > 0.5) == (Y > 0.5)))
    return out


def _score_line(sc):
    acc = "" if sc["accuracy"] is None else f", accuracy {sc['accuracy']:.2%}"
    return f"test MSE {sc['mse']:.6g} (predicting the training mean: {sc['mse_train_mean']:.6g}){acc}"


def cmd_predict(args):
    import limits

    from ..cliutil import emit
    from .model import is_matrix_input, load_network

    m = load_network(args.model)
    X = _load(args.x_train, "x_train", is_matrix_input(m))
    Y = _load(args.y_train, "y_train", False)
    Xs = _load(args.x_test, "x_test", is_matrix_input(m))
    Yt = None if args.y_test is None else _load(args.y_test, "y_test", False)
    Ytr = Y[:, None] if Y.ndim == 1 else Y
    if args.method == "posterior":
        if args.t is not None or args.lr is not None:
            raise ValueError("--t/--lr are for --method flow|gd, not posterior")
        noise = _noise(args.noise)
        r = with_option_names(limits.predict.nngp_posterior, m, X, Y, Xs, noise=noise)
        how = " (both fitted by maximum marginal likelihood)" if noise == "auto" else ""
        lines = [m.describe(), f"NNGP posterior, noise σ² = {r.noise:.6g}, output scale s² = {r.output_scale:.6g}{how}, "
                 f"log marginal likelihood {r.log_marginal_likelihood:.6g}", "", "test point | mean | sd"]
        for i in range(r.mean.shape[0]):
            lines.append(f"{i} | {np.array2string(r.mean[i], precision=5)} | {np.sqrt(max(r.var[i], 0)):.5g}")
        obj = {"mean": r.mean, "var": r.var, "log_marginal_likelihood": r.log_marginal_likelihood,
               "noise": r.noise, "output_scale": r.output_scale}
        if Yt is not None:
            obj["test"] = scores(r.mean, Yt, Ytr)
            lines += ["", _score_line(obj["test"])]
    else:
        if args.noise is not None:
            raise ValueError("--noise is for --method posterior")
        if args.t is None:
            raise ValueError("--t is required for --method flow|gd (times, or GD step counts)")
        r = with_option_names(limits.predict.gradient_descent, m, X, Y, Xs, t=np.asarray(args.t, float), learning_rate=args.lr,
                 flow=args.method == "flow", reduction=args.reduction, cov=not args.no_cov)
        lines = [m.describe(), f"NTK ensemble, {'gradient flow' if r.flow else 'discrete GD'}, η = "
                 f"{r.learning_rate:g}, reduction {r.reduction}", "", "t | mean test output (first 3) | mean sd"]
        for k, t in enumerate(r.t):
            lines.append(f"{t:g} | {np.array2string(r.mean[k, :3, 0], precision=5)} | "
                         f"{np.mean(np.sqrt(np.maximum(r.var[k], 0))):.5g}")
        obj = {"t": r.t, "mean": r.mean, "var": r.var, "learning_rate": r.learning_rate, "reduction": r.reduction,
               "flow": r.flow}
        if Yt is not None:
            obj["test"] = [{"t": float(t), **scores(r.mean[k], Yt, Ytr)} for k, t in enumerate(r.t)]
            lines += [""] + [f"t = {sc['t']:g}: " + _score_line(sc) for sc in obj["test"]]
    if args.save:
        r.save(args.save)
        lines.append(f"saved {args.save}.npz/.json")
    if args.check:
        c = with_option_names(limits.check, r, widths=args.widths, inits=args.inits, seed=args.seed, progress=False,
                 target_power=args.target_power)
        lines += ["", c.to_markdown()]
        obj["check"] = check_summary(c)
    emit(obj, args, "\n".join(lines))
    if not args.check or obj["check"]["passed"]:
        return 0
    return EXIT_INCONCLUSIVE if obj["check"]["verdict"] == "inconclusive" else 1


def add_data_options(s):
    """--model/--x-train/--y-train/--x-test, shared by `limits predict` and `limits regress`."""
    s.add_argument("--model", required=True, metavar="FILE",
                   help="model file (.toml/.json; `limits model`) or composition file (`limits.serial(...).save(FILE)`)")
    s.add_argument("--x-train", required=True, metavar="FILE", help="training inputs P×d_in (.npy/.npz/.csv/.txt)")
    s.add_argument("--y-train", required=True, metavar="FILE", help="training targets (P,) or P×d_out")
    s.add_argument("--x-test", required=True, metavar="FILE", help="test inputs P_test×d_in")


def register(subparsers):
    s = subparsers.add_parser("predict", help="infinite-width predictions on your data: NNGP posterior or the "
                                              "NTK ensemble of GD-trained networks (and their check)")
    add_data_options(s)
    s.add_argument("--method", choices=("posterior", "flow", "gd"), default="flow")
    s.add_argument("--noise", default=None, metavar="auto|SIGMA2",
                   help="posterior: observation noise variance σ², or 'auto' (default: the output scale s² "
                        "and σ² fitted together by maximum marginal likelihood; 0 interpolates the training data)")
    s.add_argument("--y-test", default=None, metavar="FILE",
                   help="test targets: print the test MSE (and accuracy for ±1, 0/1 or one-hot labels)")
    s.add_argument("--t", type=float, nargs="+", default=None, help="flow: times; gd: integer step counts")
    s.add_argument("--lr", type=float, default=None, help="learning rate η (default: the model's lr)")
    s.add_argument("--reduction", choices=("sum", "mean"), default="sum",
                   help="loss ½Σ_μ‖f−y‖² (sum) or its mean over the P samples")
    s.add_argument("--no-cov", action="store_true", help="skip the P_test×P_test covariance per time")
    s.add_argument("--save", default=None, metavar="PATH", help="write PATH.npz + PATH.json")
    s.add_argument("--check", action="store_true", help="also check against finite networks (limits.check)")
    add_check_options(s, "three widths inside the asymptotic regime of the problem, 64 inits")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_predict)
    return s
