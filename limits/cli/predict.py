"""`limits predict`: infinite-width predictions of a model on the user's own data (and their check).

    limits predict --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --y-test Ys.npy
    limits predict --model m.toml --x-train X.npy --y-train Y.npy --x-test Xs.npy --method flow --t 1 10 100 inf
    limits predict ... --method gd --t 10 100 --lr 0.1 --reduction mean --check --widths 64 128 256 --inits 64

``--method posterior`` (the default, needing no other option; ``flow`` when ``--t``/``--lr``/``--reduction``/
``--no-cov`` is given without ``--method``): NNGP posterior
(``limits.predict.nngp_posterior``); ``flow`` / ``gd``: the NTK ensemble of networks trained by gradient flow /
discrete GD (``limits.predict.gradient_descent``; ``--t`` times, integer step counts for gd, ``inf`` the
converged ensemble — the default). The posterior's noise σ² defaults to ``auto``: output scale s²
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


def _json_times(ts):
    """Times for ``--json`` (strict JSON has no infinity): numbers, and ``"inf"`` for t → ∞."""
    return [float(t) if np.isfinite(t) else "inf" for t in ts]


def _score_line(sc):
    acc = "" if sc["accuracy"] is None else f", accuracy {sc['accuracy']:.2%}"
    return f"test MSE {sc['mse']:.6g} (predicting the training mean: {sc['mse_train_mean']:.6g}){acc}"


def reusable_kernel(path, m, X, Xs, ntk):
    """``--kernel PATH``: (kernel, line) — the kernel saved at PATH (.npz + .json), verified to be this model's
    on these inputs, or, when PATH holds nothing yet, the kernel of the stacked training and test inputs
    computed now and saved there (NNGP and, where the model has one, the NTK, so every method reuses it)."""
    from ..precomputed import KernelMismatch, check_kernel, load_kernel, row_indices
    from ..predict import model_dict
    from ..results import result_paths

    npz, js = result_paths(path)
    if not (npz.exists() or js.exists()):
        import limits

        from ..cliutil import ensure_writable_result

        ensure_writable_result(path, "--kernel")

        get = ("nngp", "ntk") if getattr(m, "param_name", "NTK") == "NTK" else ("nngp",)
        k = limits.kernels.kernel(m, np.concatenate([X, Xs]), None, get)
        k.save(path)
        return k, (f"kernel: computed on the {X.shape[0]} training and {Xs.shape[0]} test inputs, saved to "
                   f"{path}.npz/.json (the next --kernel {path} reuses it)")
    k = load_kernel(path, "--kernel")
    what = "limits predict"
    try:
        check_kernel(k, model_dict(m), what, ntk)
        row_indices(np.asarray(k.X1), X, "--x-train", what)
        row_indices(np.asarray(k.X1), Xs, "--x-test", what)
    except KernelMismatch as exc:
        raise ValueError(f"--kernel {path}: the saved kernel {exc.reason}; give another --kernel path (the kernel "
                         f"is then computed and saved there) or remove {npz.name} and {js.name}") from None
    return k, f"kernel: read from {path}.npz/.json ({k.X1.shape[0]} inputs; this model, every input among them)"


def _predict(args, method, given, m, X, Y, Xs, Yt, Ytr, kernel):
    """(result, JSON object, text lines) of the prediction ``method``."""
    import limits
    from limits.predict import time_text

    if method == "posterior":
        if given:
            raise ValueError(f"{'/'.join(given)}: for the NTK ensemble of trained networks (--method flow or gd), "
                             "not the NNGP posterior")
        noise = _noise(args.noise)
        r = with_option_names(limits.predict.nngp_posterior, m, X, Y, Xs, noise=noise, kernel=kernel)
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
            raise ValueError("--noise is for --method posterior (the NTK ensemble has no observation noise)")
        ts = np.asarray([np.inf] if args.t is None else args.t, float)
        r = with_option_names(limits.predict.gradient_descent, m, X, Y, Xs, t=ts, learning_rate=args.lr,
                              flow=method == "flow", reduction=args.reduction or "sum", cov=not args.no_cov,
                              kernel=kernel)
        lines = [m.describe(), f"NTK ensemble, {'gradient flow' if r.flow else 'discrete GD'}, η = "
                 f"{r.learning_rate:g}, reduction {r.reduction}", "", "t | mean test output (first 3) | mean sd"]
        for k, t in enumerate(r.t):
            lines.append(f"{time_text(t)} | {np.array2string(r.mean[k, :3, 0], precision=5)} | "
                         f"{np.mean(np.sqrt(np.maximum(r.var[k], 0))):.5g}")
        obj = {"t": _json_times(r.t), "mean": r.mean, "var": r.var, "learning_rate": r.learning_rate, "reduction": r.reduction,
               "flow": r.flow}
        if Yt is not None:
            obj["test"] = [{"t": jt, **scores(r.mean[k], Yt, Ytr)} for k, jt in enumerate(_json_times(r.t))]
            lines += [""] + [f"t = {time_text(float(sc['t']))}: " + _score_line(sc) for sc in obj["test"]]
    return r, obj, lines


def cmd_predict(args):
    import limits

    from ..cliutil import emit
    from ..progress import stage
    from .model import is_matrix_input, load_network

    m = load_network(args.model)
    X = _load(args.x_train, "x_train", is_matrix_input(m))
    Y = _load(args.y_train, "y_train", False)
    Xs = _load(args.x_test, "x_test", is_matrix_input(m))
    Yt = None if args.y_test is None else _load(args.y_test, "y_test", False)
    Ytr = Y[:, None] if Y.ndim == 1 else Y
    given = [o for o, v in (("--t", args.t is not None), ("--lr", args.lr is not None),
                            ("--reduction", args.reduction is not None), ("--no-cov", args.no_cov)) if v]
    method = args.method or ("flow" if given else "posterior")
    kernel, kernel_line = None, None
    if args.kernel_path:
        with stage(f"predict: kernels of {X.shape[0]} + {Xs.shape[0]} inputs ({args.kernel_path})"):
            kernel, kernel_line = with_option_names(reusable_kernel, args.kernel_path, m, X, Xs,
                                                    method != "posterior")
    with stage(f"predict: {'NNGP posterior' if method == 'posterior' else 'NTK ensemble'} of {X.shape[0]} training "
               f"and {Xs.shape[0]} test inputs"):
        r, obj, lines = _predict(args, method, given, m, X, Y, Xs, Yt, Ytr, kernel)
    if kernel_line:
        lines.append(kernel_line)
        obj["kernel"] = {"path": args.kernel_path, "reused": kernel_line.startswith("kernel: read")}
    if args.save:
        r.save(args.save)
        lines.append(f"saved {args.save}.npz/.json")
    if args.check:
        c = with_option_names(limits.check, r, widths=args.widths, inits=args.inits, seed=args.seed,
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
    s.add_argument("--method", choices=("posterior", "flow", "gd"), default=None,
                   help="posterior: the NNGP posterior, Bayesian inference with the network prior; flow / gd: the "
                        "NTK ensemble of networks trained by gradient flow / discrete gradient descent on the MSE "
                        "loss (default: posterior; flow when --t, --lr, --reduction or --no-cov is given)")
    s.add_argument("--noise", default=None, metavar="auto|SIGMA2",
                   help="posterior: observation noise variance σ², or 'auto' (default: the output scale s² "
                        "and σ² fitted together by maximum marginal likelihood; 0 interpolates the training data)")
    s.add_argument("--y-test", default=None, metavar="FILE",
                   help="test targets: print the test MSE (and accuracy for ±1, 0/1 or one-hot labels) "
                        "(default: none)")
    s.add_argument("--t", type=float, nargs="+", default=None, metavar="T",
                   help="flow: training times; gd: integer step counts; inf: the converged ensemble, t → ∞ "
                        "(default: inf)")
    s.add_argument("--lr", type=float, default=None,
                   help="flow/gd: learning rate η (default: the model's lr; 1 for a composition)")
    s.add_argument("--reduction", choices=("sum", "mean"), default=None,
                   help="flow/gd: loss ½Σ_μ‖f−y‖² (sum) or its mean over the P samples (default: sum)")
    s.add_argument("--no-cov", action="store_true",
                   help="flow/gd: skip the P_test×P_test covariance per time (the variances are kept)")
    s.add_argument("--save", default=None, metavar="PATH", help="write PATH.npz + PATH.json (default: not saved)")
    s.add_argument("--kernel", dest="kernel_path", default=None, metavar="PATH",
                   help="reuse the kernels saved at PATH.npz + PATH.json (by `limits kernel ... --save PATH` on "
                        "inputs holding every training and test row, or by an earlier --kernel PATH), verified "
                        "to be this model's on these inputs; when PATH holds nothing yet they are computed and "
                        "saved there (default: computed, not saved)")
    s.add_argument("--check", action="store_true", help="also check against finite networks (limits.check)")
    add_check_options(s, "three widths inside the asymptotic regime of the problem, 64 inits")
    s.add_argument("--seed", type=int, default=0, help="seed of the finite networks of --check (default: 0)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_predict)
    return s
