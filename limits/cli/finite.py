"""``limits finite ...`` — finite-network Monte Carlo and training from the command line.

    limits finite kernels --activation erf --width 500 --depth 10 --inits 200 [--mlp] [--rho 0.3 (default 1)]
                          [--sigma-w2 1.2 --sigma-b2 0.2] [--P 4 --d-in 10 | --X X.npy] [--json]
    limits finite ntk --activation erf --width 256 --depth 1 --inits 100 [--mlp] [--json]
    limits finite train --param MF --width 256 --depth 5 --steps 200 [--optimizer gd|sgd|online|adam|flow]
                        [--eta0 0.025 --gamma0 1] [--residual] [--inits 4] [--X data.npz] [--json]
"""
from __future__ import annotations


import numpy as np

from ..checks import positive_float, positive_int, real_number
from ..cliutil import emit as _emit


def _inputs(args, rng, d_in):
    from ..checks import positive_int
    from ..finite.data import load_arrays, sphere_inputs

    if args.X:
        X, Y = load_arrays(args.X)
        return X, Y
    positive_int(args.P, "P")
    positive_int(d_in, "d_in")
    return sphere_inputs(args.P, d_in, rng=rng), None


def cmd_kernels(args):
    from ..stats import se_text
    from ..finite import empirical_kernels, mlp, resnet

    from ..checks import positive_int

    positive_int(args.depth, "depth")
    real_number(args.rho, "--rho", allow_negative=True)
    rng = np.random.default_rng(args.seed)
    X, _ = _inputs(args, rng, args.d_in)
    kw = dict(activation=args.activation, sigma_w2=args.sigma_w2, sigma_b2=args.sigma_b2)
    if args.mlp:
        net = mlp(X.shape[1], args.width, args.depth, **kw)
    else:
        rho = args.rho
        net = resnet(X.shape[1], args.width, args.depth, rho=rho, block_layers=args.block_layers, **kw)
    ek = empirical_kernels(net, X, args.inits, rng=rng, method=args.method, keep_samples=False,
                           progress_bar=not args.json)
    P = X.shape[0]
    j = 1 if P > 1 else 0
    n = ek.n_inits

    def se(a, *ix):
        return se_text(None if a is None else a[ix], n)

    def val(m, *ix):                    # overflowed entries are reported as such, not as nan
        return f"{m[ix]:>13.6f}" if np.isfinite(m[ix]) else f"{'overflow':>13}"
    lines = [f"{'mlp' if args.mlp else 'resnet'} {args.activation}, N={args.width}, blocks={args.depth}, "
             f"{args.inits} inits, P={P}, method={ek.method}, {ek.seconds:.2f}s",
             f"{'layer':>6} {'K[0,0] mean ± SE':>24} {'K[0,%d] mean ± SE' % j:>24}"]
    for l in range(ek.mean.shape[0]):
        lines.append(f"{l:>6} {val(ek.mean, l, 0, 0)} ± {se(ek.se, l, 0, 0):<8} "
                     f"{val(ek.mean, l, 0, j)} ± {se(ek.se, l, 0, j):<8}")
    lines.append(f"{'out':>6} {val(ek.out_mean, 0, 0)} ± {se(ek.out_se, 0, 0):<8} "
                 f"{val(ek.out_mean, 0, j)} ± {se(ek.out_se, 0, j):<8}")
    if ek.overflow:                                # a clear error, not a table of partial results
        raise ValueError(_explodes(args, ek.mean, rho=None if args.mlp else rho))
    _emit({"mean": ek.mean, "se": ek.se, "out_mean": ek.out_mean, "out_se": ek.out_se, "n_inits": ek.n_inits,
           "width": ek.width, "method": ek.method, "seconds": ek.seconds, "X": X, "overflow": ek.overflow},
          args, "\n".join(lines))
    return 0


def _explodes(args, layer_means=None, rho=None):
    """Error text for a finite network whose activations overflowed: the layer and the options behind it."""
    where = ""
    if layer_means is not None:
        bad = [l for l in range(layer_means.shape[0]) if not np.all(np.isfinite(layer_means[l]))]
        where = f" from layer {bad[0]} on" if bad else " at the read-out"
    opts = f"--sigma-w2 {args.sigma_w2:g}, --sigma-b2 {args.sigma_b2:g}, --depth {args.depth}"
    if rho is not None:
        opts += f", --rho {rho:g}"
    return (f"the activations or kernels overflowed float64{where}: the network explodes at {opts}"
            f"{' and the inputs of --X' if args.X else ''}; reduce them")


def cmd_ntk(args):
    from ..stats import mean_se_or_none, se_text
    from ..checks import positive_int
    from ..finite import empirical_ntk, init_weights, mlp, resnet

    positive_int(args.inits, "inits")
    positive_int(args.chunk, "chunk")
    positive_int(args.depth, "--depth", minimum=0)
    real_number(args.rho, "--rho", allow_negative=True)
    rng = np.random.default_rng(args.seed)
    X, _ = _inputs(args, rng, args.d_in)
    kw = dict(activation=args.activation, sigma_w2=args.sigma_w2, sigma_b2=args.sigma_b2, parameterisation="ntk")
    net = mlp(X.shape[1], args.width, args.depth, **kw) if args.mlp else \
        resnet(X.shape[1], args.width, args.depth, rho=args.rho, **kw)
    chunks = []
    for a in range(0, args.inits, args.chunk):
        w = init_weights(net, min(args.chunk, args.inits - a), rng=rng)
        try:
            chunks.append(empirical_ntk(net, w, X))
        except ValueError as exc:
            if "overflowed" not in str(exc):
                raise
            raise ValueError(_explodes(args, rho=None if args.mlp else args.rho)) from None
    T = np.concatenate(chunks)
    with np.errstate(over="ignore", invalid="ignore"):
        m, se = mean_se_or_none(T, name="inits")
    if not (np.all(np.isfinite(m)) and (se is None or np.all(np.isfinite(se)))):   # NTK entries near 1e308
        raise ValueError(_explodes(args, rho=None if args.mlp else args.rho))
    lines = [f"empirical NTK (NTK parameterisation), {'mlp' if args.mlp else 'resnet'} {args.activation}, "
             f"N={args.width}, blocks={args.depth}, {args.inits} inits; mean ± SE:"]
    for i in range(m.shape[0]):
        lines.append("  " + "  ".join(f"{m[i, j]:10.5f} ± {se_text(None if se is None else se[i, j], len(T)):<8}"
                                      for j in range(m.shape[1])))
    _emit({"mean": m, "se": se, "n_inits": len(T), "X": X}, args, "\n".join(lines))
    return 0


def cmd_train(args):
    from ..stats import mean_se_or_none, se_text
    from .. import params
    from ..finite import concretise, train
    from ..finite.data import load_arrays, toy_task

    rng = np.random.default_rng(args.seed)
    if args.X:
        X, Y = load_arrays(args.X)
        if Y is None:
            raise ValueError("X: training data needs an .npz with arrays X and Y")
    else:
        X, Y = toy_task(rng=rng)
    if args.depth is not None and args.weight_layers is not None:
        raise ValueError("give --depth (hidden N×N blocks) or --weight-layers (= depth + 2), not both")
    blocks = (positive_int(args.weight_layers, "--weight-layers", minimum=2) - 2 if args.weight_layers is not None
              else positive_int(3 if args.depth is None else args.depth, "--depth", minimum=0))
    positive_int(args.width, "--width")
    positive_float(args.eta0, "--eta0")
    positive_float(args.gamma0, "--gamma0")
    p = params.named(args.param, convention="variance", algorithm="bp")
    try:
        net = concretise(p, args.width, blocks + 2, d_in=X.shape[1], d_out=Y.shape[1], activation=args.activation,
                         eta0=args.eta0, gamma0=args.gamma0, residual=args.residual)
    except ValueError as exc:      # lr = η0·γ0^k·N^c and out_scale ∝ 1/γ0 are derived: name the options that set them
        if not str(exc).startswith(("lr ", "out_scale ")):
            raise
        raise ValueError(f"--eta0 {args.eta0:g} / --gamma0 {args.gamma0:g} give a learning rate or output scale "
                         f"outside float64 ({exc}); use values closer to 1") from None
    kw = {}
    if args.optimizer == "sgd":
        kw["batch_size"] = args.batch_size
    if args.optimizer == "flow":
        kw["dt"] = args.dt
    r = train(net, X, Y, args.steps, n_inits=args.inits, rng=rng, optimizer=args.optimizer,
              record_every=max(1, args.steps // 10), center=args.center, progress_bar=not args.json, **kw)
    lines = [f"{args.param} ({'residual' if args.residual else 'MLP'}), N={args.width}, depth={blocks} hidden "
             f"blocks ({blocks + 2} weight layers), "
             f"{args.optimizer}, {args.inits} inits, {r.seconds:.2f}s" + ("" if r.converged else "  DIVERGED"),
             f"{'step':>6} {'loss mean':>12} {'± SE':>10}"]
    for k, st in enumerate(r.steps):
        if not np.all(np.isfinite(r.loss[k])):      # after divergence the records are NaN by design
            lines.append(f"{st:>6} {'diverged':>12} {'':>10}")
            continue
        m, se = mean_se_or_none(r.loss[k], name="inits")
        lines.append(f"{st:>6} {m:>12.6g} {se_text(se, r.loss.shape[1]):>10}")
    _emit({"steps": r.steps, "loss": r.loss, "dh_rms": r.dh_rms, "rep_names": r.rep_names,
           "converged": r.converged, "network": net.describe()}, args, "\n".join(lines))
    return 0 if r.converged else 1


def register(subparsers):
    p = subparsers.add_parser("finite", help="finite-network simulators: kernel Monte Carlo, training")
    sub = p.add_subparsers(dest="finite_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])

    s = sub.add_parser("kernels", help="per-layer mean empirical kernel ± SE over initialisations")
    s.add_argument("--activation", default="erf", help="activation φ (default: erf)")
    s.add_argument("--width", type=int, default=500, help="width N of the networks (default: 500)")
    s.add_argument("--depth", type=int, default=10, help="number of hidden blocks L (default: 10)")
    s.add_argument("--inits", type=int, default=200, help="initialisations averaged over (default: 200)")
    s.add_argument("--mlp", action="store_true", help="feed-forward instead of residual")
    s.add_argument("--rho", type=float, default=1.0,
                   help="residual branch scale ρ (default 1, as limits.Model and `limits finite ntk`; "
                        "e.g. 1/√L = 0.316 for --depth 10 keeps deep ResNets O(1))")
    s.add_argument("--block-layers", dest="block_layers", type=int, default=1,
                   help="weight layers per residual block (default: 1)")
    s.add_argument("--sigma-w2", dest="sigma_w2", type=float, default=1.0, help="weight variance σ_w² (default: 1)")
    s.add_argument("--sigma-b2", dest="sigma_b2", type=float, default=0.0, help="bias variance σ_b² (default: 0)")
    s.add_argument("--P", type=int, default=3,
                   help="number of random inputs (on the sphere of radius √d) (default: 3)")
    s.add_argument("--d-in", dest="d_in", type=int, default=10, help="input dimension d (default: 10)")
    s.add_argument("--X", default=None, help=".npy/.npz inputs (rows = samples) (default: random inputs)")
    s.add_argument("--method", default="auto", choices=["auto", "conditional", "dense"],
                   help="draw each layer's output given its input (conditional), or every N×N weight matrix "
                        "(dense); auto picks the cheaper (default: auto)")
    s.add_argument("--seed", type=int, default=0, help="seed of the inputs and initialisations (default: 0)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_kernels)

    s = sub.add_parser("ntk", help="empirical NTK mean ± SE over initialisations (NTK parameterisation)")
    s.add_argument("--activation", default="erf", help="activation φ (default: erf)")
    s.add_argument("--width", type=int, default=256, help="width N of the networks (default: 256)")
    s.add_argument("--depth", type=int, default=1, help="number of hidden blocks (default: 1)")
    s.add_argument("--inits", type=int, default=100, help="initialisations averaged over (default: 100)")
    s.add_argument("--chunk", type=int, default=50, help="inits held in memory at once (default: 50)")
    s.add_argument("--mlp", action="store_true", help="feed-forward instead of residual")
    s.add_argument("--rho", type=float, default=1.0, help="residual branch scale ρ (default 1, as limits.Model)")
    s.add_argument("--sigma-w2", dest="sigma_w2", type=float, default=1.0, help="weight variance σ_w² (default: 1)")
    s.add_argument("--sigma-b2", dest="sigma_b2", type=float, default=0.0, help="bias variance σ_b² (default: 0)")
    s.add_argument("--P", type=int, default=3,
                   help="number of random inputs (on the sphere of radius √d) (default: 3)")
    s.add_argument("--d-in", dest="d_in", type=int, default=10, help="input dimension d (default: 10)")
    s.add_argument("--X", default=None, help=".npy/.npz inputs (rows = samples) (default: random inputs)")
    s.add_argument("--seed", type=int, default=0, help="seed of the inputs and initialisations (default: 0)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_ntk)

    s = sub.add_parser("train", help="train finite networks of a named parameterisation (seed 000 toy task)")
    s.add_argument("--param", default="MF", help="SP | NTK | MF | muP (variance convention) (default: MF)")
    s.add_argument("--width", type=int, default=128, help="width N (default: 128)")
    s.add_argument("--depth", type=int, default=None,
                   help="hidden N×N blocks (the one meaning of depth in limits; default 3 = 5 weight layers)")
    s.add_argument("--weight-layers", type=int, default=None,
                   help="legacy: weight layers L (= depth + 2); the meaning --depth had before 0.2")
    s.add_argument("--activation", default="linear", help="activation φ (default: linear)")
    s.add_argument("--residual", action="store_true", help="residual blocks instead of a feed-forward MLP")
    s.add_argument("--steps", type=int, default=100, help="training steps (default: 100)")
    s.add_argument("--optimizer", default="gd", choices=["gd", "sgd", "online", "adam", "flow"],
                   help="full-batch GD, minibatch SGD, online SGD (one sample per step), Adam, or gradient flow "
                        "(Euler steps dt) (default: gd)")
    s.add_argument("--batch-size", dest="batch_size", type=int, default=5, help="sgd: minibatch size (default: 5)")
    s.add_argument("--dt", type=float, default=0.01, help="flow: Euler time step (default: 0.01)")
    s.add_argument("--eta0", type=float, default=0.025,
                   help="base learning rate η0 (scaled by the parameterisation) (default: 0.025)")
    s.add_argument("--gamma0", type=float, default=1.0, help="feature-learning strength γ0 (default: 1)")
    s.add_argument("--inits", type=int, default=4, help="networks trained from independent inits (default: 4)")
    s.add_argument("--center", action="store_true", help="train the centred output f − f0")
    s.add_argument("--X", default=None, help=".npz with arrays X and Y (default: seed 000 toy task)")
    s.add_argument("--seed", type=int, default=0, help="seed of the task and initialisations (default: 0)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_train)
