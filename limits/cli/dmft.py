"""``limits dmft ...`` — solve the DMFT of a mean-field network from the command line.

    limits dmft solve --depth 4 --activation linear --gamma0 1 --dt 0.02 --steps 100
                      [--P 20 --D 40 --seed 0 | --X data.npz] [--method gd|flow] [--richardson]
                      [--M 2000] [--save out/dmft] [--json]
    limits dmft seed000 --eta0 0.025 --P 20 --L 5 --steps 200     # abcd → DMFT mapping, then solve
"""
from __future__ import annotations

import json

import numpy as np


def _data(args):
    from ..dmft import toy_task

    if args.X:
        from ..finite.data import load_arrays

        X, Y = load_arrays(args.X)
        if Y is None:
            raise ValueError("X: the .npz must hold X and Y arrays")
        return X, np.asarray(Y, float).reshape(X.shape[0], -1)[:, 0]
    return toy_task(args.P, args.D, seed=args.seed)


def _report(d, args):
    from ..results import to_jsonable

    s = d.summary()
    if args.save:
        d.save(args.save)
    if args.json:
        out = dict(s, t=d.t, f=d.f, loss=d.loss, loss_mean=d.loss_mean, f_se=d.f_se)
        print(json.dumps(to_jsonable(out), indent=1))
        return 0
    print(f"DMFT {s['activation']} depth={s['depth']} gamma0={s['gamma0']:g} dt={s['dt']:g} "
          f"steps={s['n_steps']} P={s['P']} method={s['method']} solver={s['solver']}")
    print(f"  converged={s['converged']} iterations={s['iterations']} residual={s['residual']:.3e} "
          f"MC samples={s['mc_samples']} max SE(f)={s['max_f_se']:.2e}")
    print(f"  loss ½Σ(f−y)²: {s['initial_loss']:.6g} → {s['final_loss']:.6g};  relative NTK change "
          f"{s['ntk_change']:.4f};  {s['wall_time_s']:.2f}s")
    idx = np.unique(np.linspace(0, d.t.size - 1, min(11, d.t.size)).astype(int))
    print(f"  {'t':>10} {'loss':>14}")
    for k in idx:
        print(f"  {d.t[k]:>10.4g} {d.loss[k]:>14.6g}")
    if s["message"]:
        print(f"  {s['message']}")
    return 0


def cmd_solve(args):
    from ..dmft import solve

    X, y = _data(args)
    common = dict(steps=args.steps, method=args.method, richardson=args.richardson, M=args.M, seed=args.seed,
                  progress=not args.json)
    if args.model:
        from ..model import model_or_arguments

        given = {"depth": args.depth, "hidden_layers": args.hidden_layers, "activation": args.activation,
                 "gamma0": args.gamma0}
        m = model_or_arguments(args.model, given, {"depth": None, "hidden_layers": None, "activation": "linear",
                                                   "gamma0": 1.0}, explicit=getattr(args, "_explicit", None))
        d = solve(X, y, model=m, dt=args.dt if args.dt is not None else m.lr, **common)
        return _report(d, args)
    hidden = hidden_layers(args.depth, args.hidden_layers)
    d = solve(X, y, depth=hidden, activation=args.activation, gamma0=args.gamma0,
              dt=0.02 if args.dt is None else args.dt, **common)
    return _report(d, args)


def hidden_layers(depth, hidden):
    """DMFT hidden layers from ``--depth`` (hidden N×N blocks, the one meaning of depth in limits:
    hidden layers = depth + 1) or the legacy ``--hidden-layers``; both at once is an error."""
    from ..checks import positive_int

    if depth is not None and hidden is not None:
        raise ValueError("give --depth (hidden N×N blocks) or --hidden-layers (= depth + 1), not both")
    if hidden is not None:
        return positive_int(hidden, "--hidden-layers")
    return positive_int(0 if depth is None else depth, "--depth", minimum=0) + 1


def cmd_seed000(args):
    from fractions import Fraction as F

    from ..dmft import StepTooLarge, from_abcd, solve

    L = args.L
    half = F(1, 2)
    m = from_abcd([0] + [half] * (L - 1), [0] * L, 0, half, gamma0=args.gamma0, eta0=args.eta0, P=args.P,
                  loss=args.loss)
    X, y = _data(args)
    if not args.json:
        print(f"seed 000 mean-field, L={L} weight layers → DMFT depth={m.depth}, gamma0={m.gamma0:g}, "
              f"dt per GD step = {m.dt:g} ({args.loss} loss)")
    try:
        d = solve(X, y, depth=m.depth, gamma0=m.gamma0, dt=m.dt, steps=args.steps, progress=not args.json)
    except StepTooLarge as exc:                    # dt is not an option here: name the ones that set it
        step = "eta0/P" if args.loss == "mean" else "eta0"
        raise StepTooLarge(f"{exc} — here dt = {step} = {m.dt:g} comes from --eta0 {args.eta0:g}: reduce --eta0"
                           + (" or --gamma0" if "gamma0" in str(exc) else "")) from None
    return _report(d, args)


def register(subparsers):
    p = subparsers.add_parser("dmft", help="dynamical mean field theory of feature learning")
    sub = p.add_subparsers(dest="dmft_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])

    def common(s):
        s.add_argument("--P", type=int, default=20, help="samples of the seed-000 toy task (default: 20)")
        s.add_argument("--D", type=int, default=40, help="input dimension of the toy task (default: 40)")
        s.add_argument("--X", default=None,
                       help=".npz with arrays X (P×D) and Y (P or P×1) (default: the seed-000 toy task)")
        s.add_argument("--seed", type=int, default=0,
                       help="seed of the toy task and of the Monte Carlo paths (default: 0)")
        s.add_argument("--gamma0", type=float, default=1.0,
                       help="feature-learning strength γ0 (output f = h_L/(γ0 N)) (default: 1)")
        s.add_argument("--steps", type=int, default=100, help="GD steps (default: 100)")
        s.add_argument("--save", default=None, help="save the result to SAVE.npz + SAVE.json (default: not saved)")
        s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")

    s = sub.add_parser("solve", help="solve the DMFT (exact for linear, Monte Carlo otherwise)")
    common(s)
    s.add_argument("--depth", type=int, default=None,
                   help="hidden N×N blocks between read-in and read-out (default 0: a two-layer network); "
                        "the DMFT's hidden layers are depth + 1 (seed 000's weight layers L = depth + 2)")
    s.add_argument("--hidden-layers", type=int, default=None,
                   help="legacy: hidden layers h^1..h^L (= depth + 1); the meaning --depth had before 0.2")
    s.add_argument("--model", default=None, metavar="FILE",
                   help="model file (MF/muP parameterisation; see `limits model`) instead of the architecture "
                        "options; its lr is the GD step unless --dt is given")
    s.add_argument("--activation", default="linear",
                   help="activation φ; linear is solved exactly, others by Monte Carlo (default: linear)")
    s.add_argument("--dt", type=float, default=None, help="GD step (DMFT time per step; default 0.02)")
    s.add_argument("--method", choices=("gd", "flow"), default="gd",
                   help="discrete gradient descent, or gradient flow (time steps dt) (default: gd)")
    s.add_argument("--richardson", action="store_true", help="flow: extrapolate dt, dt/2 → 0")
    s.add_argument("--M", type=int, default=2000, help="Monte Carlo paths per layer (nonlinear) (default: 2000)")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("seed000", help="seed 000 abcd mean-field run (η = η0 γ0² N) mapped to the DMFT")
    common(s)
    s.add_argument("--L", type=int, default=5, help="weight layers (seed 000 convention) (default: 5)")
    s.add_argument("--eta0", type=float, default=0.025,
                   help="base learning rate η0 of η = η0 γ0² N (default: 0.025)")
    s.add_argument("--loss", choices=("mean", "sum"), default="mean",
                   help="loss averaged or summed over the P samples (default: mean)")
    s.set_defaults(func=cmd_seed000)


def default_job(outdir):
    """Fast (< 5 s) line for the main ``limits`` job: the two-layer single-sample oracle."""
    from scipy.integrate import solve_ivp

    from ..dmft import solve

    g0, y = 1.5, 1.0
    d = solve([[1.0]], [y], depth=1, gamma0=g0, T=2.0, dt=0.05, method="flow", richardson=True)
    sol = solve_ivp(lambda t, f: 2 * np.sqrt(1 + g0 ** 2 * f ** 2) * (y - f), (0, 2.0), [0.0], rtol=1e-12,
                    atol=1e-13, dense_output=True)
    err = float(np.max(np.abs(d.f[:, 0] - sol.sol(d.t)[0])))
    return [f"dmft: two-layer linear single-sample oracle, max |f_DMFT − f_ODE| = {err:.1e} "
            f"(dt = 0.05, Richardson, γ0 = {g0})"]
