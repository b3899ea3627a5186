"""``limits pc ...`` — closed-form linear PC equilibria, spectra of the activity Hessian, iterative
inference against the closed form.

    limits pc equilibrium --width 64 --hidden 8 --param mupc --skips 1-skip --batch 16 [--json]
    limits pc equilibrium --weights W.npz --X X.npy --Y Y.npy        (W.npz: arrays W1..WL)
    limits pc spectrum --width 512 --hidden 512 --param sp|mupc|orthogonal [--skips 1-skip] [--json]
    limits pc infer --width 16 --hidden 8 [--beta 0.1 --steps 1000] [--update sequential] [--json]
        (linear GD defaults: β = 2/(λ_min + λ_max) of H_z, steps from the contraction (κ−1)/(κ+1))
"""
from __future__ import annotations

import warnings

import numpy as np

from ..cliutil import emit as _emit, load_array


def _skips(s):
    if s is None or s in ("none", "mlp"):
        return None
    if s.isdigit():
        return int(s)
    return s


def _load_weights(path):
    """W_1..W_L from an .npz (arrays ordered by the number in their names); never unpickled. Any
    unreadable file, an .npy (one array, not W1..WL) or a non-finite / non-2-D array → ``ValueError``
    naming --weights."""
    from ..checks import finite_array
    from ..cliutil import numpy_arrays

    arrays = numpy_arrays(path, "--weights", first_only=False)
    if len(arrays) == 1 and arrays[0][0] == "":
        raise ValueError(f"--weights: {path} is an .npy holding one array; pass an .npz holding the "
                         f"weight matrices W1..WL (numpy.savez(path, W1=..., W2=...))")
    arrays.sort(key=lambda kv: int("".join(c for c in kv[0] if c.isdigit()) or 0))
    return [finite_array(a, f"--weights {k}", ndim=2) for k, a in arrays]


def _no_multipliers_without_weights(args):
    if args.multipliers is not None and not args.weights:
        raise ValueError("--multipliers applies to --weights only (--param sets the multipliers of generated "
                         "weights)")


def _floats(text, flag):
    """Comma-separated numbers of a command-line option, or ValueError naming the option."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated numbers, got {text!r}") from None


def _problem(args):
    from ..pc import init_weights

    rng = np.random.default_rng(args.seed)
    _no_multipliers_without_weights(args)
    if getattr(args, "weights", None):
        W = _load_weights(args.weights)
        a = _floats(args.multipliers, "--multipliers")
    else:
        W, a = init_weights(args.width, args.hidden, args.param, d_in=args.d_in, d_out=args.d_out, rng=rng)
    d_in, d_out = W[0].shape[1], W[-1].shape[0]
    if not getattr(args, "X", None):
        from ..checks import positive_int

        positive_int(args.batch, "--batch")
    if getattr(args, "X", None):                # B×d_in (a 1-D row is one sample), as equilibrium() reads it
        from ..pc.network import check_data, make_net

        X, _ = check_data(make_net(W, a), load_array(args.X, "--X"), x_name="--X")
    else:
        X = rng.standard_normal((args.batch, d_in))
    Y = load_array(args.Y, "Y") if getattr(args, "Y", None) else rng.standard_normal((X.shape[0], d_out))
    return W, a, X, Y


def _net_args(s, spectrum=False):
    s.add_argument("--width", type=int, default=32, help="hidden width N (default: 32)")
    s.add_argument("--hidden", type=int, default=4, help="number of hidden layers H (L = H + 1) (default: 4)")
    s.add_argument("--param", default="sp", choices=["sp", "mupc", "orthogonal"],
                   help="random weights of seed 001 Table 1: sp (W ~ N(0, 1/N)), mupc (μPC multipliers), "
                        "orthogonal (default: sp)")
    s.add_argument("--skips", default=None, help="none | 1-skip | n (n-skip) (default: none)")
    s.add_argument("--d-in", dest="d_in", type=int, default=None, help="input dim (default: width)")
    s.add_argument("--d-out", dest="d_out", type=int, default=1, help="output dimension (default: 1)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random weights and data (default: 0)")
    s.add_argument("--weights", default=None,
                   help=".npz with W1..WL (overrides --width/--hidden/--param) (default: random weights)")
    s.add_argument("--multipliers", default=None, help="comma-separated a_l (with --weights) (default: all 1)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    if not spectrum:
        s.add_argument("--X", default=None, help=".npy/.npz B×d_in inputs (default random)")
        s.add_argument("--Y", default=None, help=".npy/.npz B×d_out targets (default random)")
        s.add_argument("--batch", type=int, default=8, help="random inputs B when --X is not given (default: 8)")
        s.add_argument("--layer-weights", dest="layer_weights", default=None,
                       help="comma-separated λ_l, one energy weight per layer (default: all 1)")


def _lam(args):
    return _floats(args.layer_weights, "--layer-weights")


def cmd_equilibrium(args):
    from ..pc import equilibrium

    W, a, X, Y = _problem(args)
    e = equilibrium(W, X, Y, a, _skips(args.skips), _lam(args), nudge=args.nudge, method=args.method)
    out = {"energy": e.energy, "mse": e.mse, "ratio_mse_over_energy": e.ratio, "S": e.S, "cond_S": e.cond_S,
           "method": e.method, "L": len(W), "batch": X.shape[0]}
    if args.full:
        out["z"] = e.z
        out["errors"] = e.errors
    lines = [f"linear PC equilibrium ({e.method}), L = {len(W)}, batch {X.shape[0]}",
             f"F* = {e.energy:.10g}   MSE = {e.mse:.10g}   MSE/F* = {e.ratio:.10g}",
             "S =", np.array2string(e.S, precision=6)]
    if args.save:
        e.save(args.save)
        lines.append(f"saved {args.save}.npz/.json")
    _emit(out, args, "\n".join(lines))
    return 0


def cmd_spectrum(args):
    from ..pc import extreme_eigenvalues
    from ..pc.spectra import init_weights

    _no_multipliers_without_weights(args)
    if args.weights:
        W = _load_weights(args.weights)
        a = _floats(args.multipliers, "--multipliers")
    else:
        W, a = init_weights(args.width, args.hidden, args.param, d_in=args.d_in, d_out=args.d_out,
                            rng=np.random.default_rng(args.seed))
    s = extreme_eigenvalues(W, a, _skips(args.skips), method=args.method, decay=args.decay,
                            measure_memory=args.memory, progress_bar=True)
    out = {"lambda_max": s.lambda_max, "lambda_min": s.lambda_min, "kappa": s.kappa, "n": s.n,
           "method": s.method, "seconds": s.seconds, "converged": s.converged}
    if args.memory:
        out["peak_bytes"] = s.peak_bytes
    text = (f"activity Hessian n = {s.n} ({s.method}): λ_max = {s.lambda_max:.8g}, λ_min = {s.lambda_min:.8g}, "
            f"κ = {s.kappa:.6g}  [{s.seconds:.1f}s{', converged' if s.converged else ', NOT converged'}]")
    _emit(out, args, text)
    return 0 if s.converged else 1


def cmd_infer(args):
    from ..pc import infer

    W, a, X, Y = _problem(args)
    auto_ok = args.activation in (None, "linear", "identity") and args.optimizer == "gd"
    beta = args.beta if args.beta is not None else ("auto" if auto_ok else 0.1)
    steps = args.steps if args.steps is not None else ("auto" if auto_ok else 1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = infer(W, X, Y, beta=beta, steps=steps, multipliers=a, skips=_skips(args.skips),
                  layer_weights=_lam(args), activation=args.activation, init=args.init, update=args.update,
                  optimizer=args.optimizer, fpa=args.fpa, tol=args.tol,
                  rng=np.random.default_rng(args.seed + 1))
    msgs = [str(w.message) for w in caught]
    out = {"message": r.message, "converged": r.converged, "diverged": r.diverged, "steps": r.steps,
           "beta": r.beta, "beta_bound": r.beta_bound, "energy_final": float(r.energy[-1]),
           "grad_norm_final": float(r.grad_norm[-1]),
           "distance_final": float(r.distance[-1]) if r.distance.size else None, "warnings": msgs}
    lines = [f"PC inference ({r.update}, {r.optimizer}{', FPA' if r.fpa else ''}): {r.message}"]
    if r.beta_bound:
        lines.append(f"β = {r.beta:g}, stability bound 2/λ_max = {r.beta_bound:.6g}")
    lines.append(f"F = {r.energy[-1]:.8g}, ‖∇F‖ = {r.grad_norm[-1]:.3e}" +
                 (f", ‖z − z*‖/‖z*‖ = {r.distance[-1]:.3e}" if r.distance.size else ""))
    lines += [f"warning: {m}" for m in msgs]
    _emit(out, args, "\n".join(lines))
    return 0 if r.converged else 1


def register(subparsers):
    p = subparsers.add_parser("pc", help="predictive coding: closed-form equilibria, activity-Hessian spectra, inference")
    sub = p.add_subparsers(dest="pc_command", metavar="PC_COMMAND")
    sub.required = True

    s = sub.add_parser("equilibrium", help="closed-form F*, S, z*, ε* of a linear PC network")
    _net_args(s)
    s.add_argument("--nudge", type=float, default=None,
                   help="β: free output with (β/2)‖y − z_L‖² (default: output clamped to y)")
    s.add_argument("--method", default="telescoped", choices=["telescoped", "block"],
                   help="telescoped closed form, or the block-tridiagonal Cholesky solve of H_z z = b "
                        "(default: telescoped)")
    s.add_argument("--full", action="store_true", help="include z* and ε* in --json output")
    s.add_argument("--save", default=None, help="save the result to PATH.npz/.json (default: not saved)")
    s.set_defaults(func=cmd_equilibrium)

    s = sub.add_parser("spectrum", help="λ_min, λ_max, κ of the activity Hessian (Lanczos + block Cholesky)")
    _net_args(s, spectrum=True)
    s.add_argument("--method", default="auto", choices=["auto", "dense", "lanczos", "lobpcg"],
                   help="dense eigvalsh, Lanczos (λ_min on H⁻¹ by block Cholesky), LOBPCG, or auto: dense up to "
                        "1500 activities (default: auto)")
    s.add_argument("--decay", type=float, default=0.0, help="activity decay α (default: 0)")
    s.add_argument("--memory", action="store_true", help="trace peak memory (slower)")
    s.set_defaults(func=cmd_spectrum)

    s = sub.add_parser("infer", help="iterative inference vs the closed-form equilibrium")
    _net_args(s)
    s.add_argument("--beta", type=float, default=None,
                   help="activity step size (default: 2/(λ_min + λ_max) of H_z for linear GD, else 0.1)")
    s.add_argument("--steps", type=int, default=None,
                   help="maximum steps (default: enough for --tol at the GD contraction rate for linear GD, "
                        "capped at 100000; else 1000)")
    s.add_argument("--activation", default=None,
                   help="activation φ of the hidden layers (default: linear, checked against the closed form)")
    s.add_argument("--init", default="forward", choices=["forward", "zeros", "random"],
                   help="initial activities: the forward pass, zeros or random (default: forward)")
    s.add_argument("--update", default="simultaneous", choices=["simultaneous", "sequential"],
                   help="all layers from the same state, or from the output down (seed 003 Alg. 1) "
                        "(default: simultaneous)")
    s.add_argument("--optimizer", default="gd", choices=["gd", "adam"],
                   help="activity optimizer (default: gd)")
    s.add_argument("--fpa", action="store_true",
                   help="fixed-prediction assumption: predictions and φ' frozen at the forward pass")
    s.add_argument("--tol", type=float, default=1e-10,
                   help="stop when the relative distance to z* (or the gradient norm) is below this (default: "
                        "1e-10)")
    s.set_defaults(func=cmd_infer)


def default_job(outdir) -> list[str]:
    """Main-job contribution: reference values of docs/theory/pc.rst §2 (fast)."""
    from ..pc import equilibrium

    e = equilibrium([[[1.0]], [[2.0]], [[1.5]]], [[1.0]], [[1.0]])
    return [f"pc: scalar chain w = (1, 2, 1.5), x = y = 1: S = {e.s:.6g}, F* = {e.energy:.7f}, "
            f"z* = ({e.z[0][0, 0]:.7f}, {e.z[1][0, 0]:.7f})"]
