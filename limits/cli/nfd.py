"""``limits nfd ...`` — kernel ODE, particle Euler–Maruyama, NFD training, GIA and two-layer studies."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..cliutil import emit as _emit, load_array
from ..stats import signed


def _inputs(args):
    from ..checks import positive_int

    positive_int(args.P, "--P")
    positive_int(args.d, "--d")
    rng = np.random.default_rng(args.seed)
    Z = rng.standard_normal((args.P, args.d))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True) * np.sqrt(args.d)


def _input_args(s):
    s.add_argument("--X", default=None, help=".npy/.npz P×d input array (default: random points on the sphere)")
    s.add_argument("--P", type=int, default=4, help="random inputs when --X is not given (default: 4)")
    s.add_argument("--d", type=int, default=3, help="their dimension (points on the sphere of radius √d) (default: 3)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random inputs and particles (default: 0)")
    s.add_argument("--T", type=float, default=1.0, help="terminal depth-time T of the SDE (default: 1)")
    s.add_argument("--activation", default="erf", help="activation φ (default: erf)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")


def cmd_kernel_ode(args):
    from ..nfd.kernel_ode import kernel_ode, residual_recursion

    X = load_array(args.X, "X", ndim=2) if args.X else _inputs(args)
    try:
        k = kernel_ode(X, T=args.T, activation=args.activation)
    except ValueError as exc:                      # the API's hints name keywords; name the options here
        msg = str(exc)
        for api_hint in (", or pass backward=False for Σ_T and K_T alone", " (or raise max_nfev)"):
            msg = msg.replace(api_hint, "")
        raise ValueError(msg.replace("reduce T", "reduce --T")) from None
    out = {"T": k.T, "activation": k.activation, "Sigma": k.Sigma, "K": k.K, "Gamma0": k.Gamma0,
           "nfev": k.nfev, "converged": k.converged, "error_estimate": k.error_estimate}
    lines = [f"kernel ODE, {k.activation}, T = {k.T}: nfev {k.nfev}, error estimate {k.error_estimate:.2e}",
             "Sigma_T =", np.array2string(k.Sigma, precision=6), "K_T =", np.array2string(k.K, precision=6)]
    if args.L:
        r = residual_recursion(X, args.L, args.T, args.activation)
        out["euler_error"] = float(np.abs(r.Sigma[-1] - k.Sigma).max())
        lines.append(f"Euler scheme (L = {args.L}) max |Σ_L − Σ_T| = {out['euler_error']:.3e}")
    if args.save:
        k.save(args.save)
        lines.append(f"saved {args.save}.npz/.json")
    _emit(out, args, "\n".join(lines))
    return 0


def cmd_particles(args):
    from ..nfd.kernel_ode import kernel_ode
    from ..nfd.sde import particles

    X = load_array(args.X, "X", ndim=2) if args.X else _inputs(args)
    p = particles(X, args.T, args.L, args.M, args.activation, seed=args.seed, design=args.design,
                  interaction=args.interaction)
    out = {"L": p.L, "M": p.M, "design": p.design, "Sigma_L": p.Sigma_emp[-1], "K_L": p.K_emp,
           "mean_feature": p.mean_feature[-1], "rms_feature": p.rms_feature[-1]}
    lines = [f"particle Euler–Maruyama ({p.design}, {p.interaction}), L = {p.L}, M = {p.M}",
             "empirical Σ_L =", np.array2string(p.Sigma_emp[-1], precision=5),
             f"feature mean {p.mean_feature[-1]:+.4f}, rms {p.rms_feature[-1]:.4f}"]
    if p.design == "pre":                          # only Σ_T is compared: no backward kernel needed
        k = kernel_ode(X, T=args.T, activation=args.activation, backward=False, error_estimate=False)
        out["max_abs_err_vs_ode"] = float(np.abs(p.Sigma_emp[-1] - k.Sigma).max())
        out["mc_scale"] = float(np.sqrt(2.0 / p.M) * np.abs(k.Sigma).max())
        lines.append(f"max |Σ_emp − Σ_T(ODE)| = {out['max_abs_err_vs_ode']:.3e} (MC scale ≈ {out['mc_scale']:.1e})")
    _emit(out, args, "\n".join(lines))
    return 0


def cmd_train(args):
    from ..nfd.training import train_particles

    from ..finite.gia import gia_task

    from ..checks import positive_int

    Xtr, ytr, Xte = gia_task(d=positive_int(args.d, "--d"), K=positive_int(args.K, "--K"),
                             P_test=positive_int(args.P, "--P", minimum=0))
    tp = train_particles(Xtr, ytr, Xte, T=args.T, L=args.L, M=args.M, activation=args.activation,
                         eta_bar=args.eta_bar, train_input_layer=not args.freeze_input, seed=args.seed,
                         progress_bar=True, target_se=args.target_se)
    out = {"f_train": tp.f_train, "chi": tp.chi, "f_test": tp.f_test, "f_test_se": tp.f_test_se,
           "min_eig_forward": tp.min_eig_forward.min(axis=1), "min_eig_backward": tp.min_eig_backward.min(axis=1),
           "memory_bytes": tp.memory_bytes}
    lines = [f"NFD particles: K = {tp.K} steps, L = {tp.L}, M = {tp.M}, η̄ = {tp.eta_bar}",
             "step  f(x_k)    χ_k     λmin fwd   λmin bwd"]
    for k in range(tp.K):
        lines.append(f"{k:4d} {tp.f_train[k]:+.4f} {tp.chi[k]:+.4f}  {out['min_eig_forward'][k]:.3e}  "
                     f"{out['min_eig_backward'][k]:.3e}")
    lines.append("final test outputs: " + ", ".join(f"{v:+.4f}±{s:.4f}" for v, s in zip(tp.f_test[-1], tp.f_test_se[-1])))
    if args.save:
        tp.save(args.save)
    _emit(out, args, "\n".join(lines))
    return 0


def _seeds(n, flag):
    """Seed counts of the studies: their ± columns are standard errors, which need ≥ 2 samples."""
    from ..checks import sample_count

    return sample_count(n, flag)


def cmd_gia(args):
    from ..gallery.nfd import gia_study
    from ..results import atomic_write_text, to_jsonable

    _seeds(args.seeds, "--seeds")
    _seeds(args.particle_seeds, "--particle-seeds")

    data = gia_study(ns=args.ns, Ls=args.Ls, n_seeds=args.seeds, M=args.M, n_particle_seeds=args.particle_seeds,
                     K=args.K, train_input_layer=not args.freeze_input, progress_bar=True)
    lines = [f"GIA sweep (input layer {'frozen' if args.freeze_input else 'trained'}), test point 0 and rms over points:",
             "   n     L    gap(x0) ± SE        rms gap"]
    for i, n in enumerate(data["ns"]):
        for j, L in enumerate(data["Ls"]):
            g, s = data["gap_mean"][i, j], data["gap_se"][i, j]
            lines.append(f"{n:5d} {L:5d}  {g[0]:+.4f} ± {s[0]:.4f}   {np.sqrt(np.mean(g ** 2)):.4f}")
    lines.append("n → ∞ extrapolated gap per L (x0): " + ", ".join(
        f"L={L}: {g:+.4f}±{s:.4f}" for L, g, s in zip(data["Ls"], data["gap_ninf"][:, 0], data["gap_ninf_se"][:, 0])))
    if "gap_Linf" in data:
        lines.append("L → ∞ (a + b/L fit) per test point: " + ", ".join(
            f"{g:+.4f}±{s:.4f}" for g, s in zip(data["gap_Linf"], data["gap_Linf_se"])))
    if "gap_rate_L" in data:
        lines.append(f"rms gap vs L log–log slope {signed(data['gap_rate_L'][0], 3)} "
                     f"[{signed(data['gap_rate_L'][1], 3)}, {signed(data['gap_rate_L'][2], 3)}]")
    if args.out:
        atomic_write_text(args.out, json.dumps(to_jsonable(data), indent=1))
        lines.append(f"data written to {args.out}")
    _emit(data, args, "\n".join(lines))
    return 0


def cmd_gia_limit(args):
    from ..gallery.nfd import gia_limit_study
    from ..results import atomic_write_text, to_jsonable

    _seeds(args.seeds, "--seeds")

    data = gia_limit_study(Ls=args.Ls, M=args.M, n_seeds=args.seeds, K=args.K,
                           train_input_layer=not args.freeze_input, progress_bar=True, response=args.response)
    lines = [f"infinite-width coupled − NFD (decoupled) particles, M = {args.M}, input layer "
             f"{'frozen' if args.freeze_input else 'trained'}, response terms in {'+'.join(args.response)} passes:",
             "    L   gap(x0) ± SE      rms gap"]
    for j, L in enumerate(data["Ls"]):
        lines.append(f"{L:5d}  {data['gap_mean'][j, 0]:+.4f} ± {data['gap_se'][j, 0]:.4f}   {data['gap_rms'][j]:.4f}")
    if "gap_Linf" in data:
        lines.append("L → ∞ (a + b/L fit) per test point: " + ", ".join(
            f"{g:+.4f}±{s:.4f}" for g, s in zip(data["gap_Linf"], data["gap_Linf_se"])))
    if "gap_rate_L" in data:
        lines.append(f"rms gap vs L log–log slope {signed(data['gap_rate_L'][0], 3)} "
                     f"[{signed(data['gap_rate_L'][1], 3)}, {signed(data['gap_rate_L'][2], 3)}]")
    if args.out:
        atomic_write_text(args.out, json.dumps(to_jsonable(data), indent=1))
    _emit(data, args, "\n".join(lines))
    return 0


def cmd_two_layer(args):
    from ..gallery.nfd import two_layer_study
    from ..results import atomic_write_text, to_jsonable

    from ..checks import positive_int

    _seeds(args.seeds, "--seeds")
    positive_int(args.n, "--n")
    positive_int(args.transfer_n, "--transfer-n")
    positive_int(args.steps, "--steps", minimum=0)

    data = two_layer_study(Ls=args.Ls, n=args.n, eta_bar=args.eta_bar, n_seeds=args.seeds, etas=args.etas,
                           transfer_Ls=args.Ls, transfer_n=args.transfer_n, steps=args.steps)
    lines = ["   L   Δu (η̄n)         Δu (η₁ corrected)   L·Δr (η̄n)"]
    for j, L in enumerate(data["Ls"]):
        lines.append(f"{L:4d}  {data['du_rms'][j]:.4f}±{data['du_rms_se'][j]:.4f}  "
                     f"{data['du_rms_corrected'][j]:.4f}±{data['du_rms_corrected_se'][j]:.4f}  "
                     f"{data['dr_rms'][j]:.4f}±{data['dr_rms_se'][j]:.4f}")
    for key in ("du_rms", "du_rms_corrected", "dr_rms"):
        if key + "_rate" in data:
            r = data[key + "_rate"]
            lines.append(f"slope of {key} vs L: {signed(r[0], 3)} [{signed(r[1], 3)}, {signed(r[2], 3)}]")
    lines.append("best η̄ per depth (plain / corrected): " + ", ".join(
        f"L={L}: {a:g}/{b:g}" for L, a, b in zip(data["transfer_Ls"], data["best_eta"][0], data["best_eta"][1])))
    if args.out:
        atomic_write_text(args.out, json.dumps(to_jsonable(data), indent=1))
    _emit(data, args, "\n".join(lines))
    return 0


def register(subparsers):
    p = subparsers.add_parser("nfd", help="Neural Feature Dynamics: SDE limits of deep ResNets (seed 002)")
    sub = p.add_subparsers(dest="nfd_command", metavar="NFD_COMMAND", required=True)

    s = sub.add_parser("kernel-ode", help="adaptive solve of dΣ/dt = E[φφᵀ] (infinite-depth NNGP)")
    _input_args(s)
    s.add_argument("--depth", "--L", dest="L", type=int, default=0,
                   help="also compare with the Euler scheme of depth L residual blocks (--L: alias) "
                        "(default: 0, no comparison)")
    s.add_argument("--save", default=None, help="save the result (PATH.npz + PATH.json) (default: not saved)")
    s.set_defaults(func=cmd_kernel_ode)

    s = sub.add_parser("particles", help="particle Euler–Maruyama of the forward/backward SDE at init")
    _input_args(s)
    s.add_argument("--depth", "--L", dest="L", type=int, default=64,
                   help="residual blocks L (Euler–Maruyama steps; --L: alias) (default: 64)")
    s.add_argument("--M", type=int, default=10_000, help="particles (default: 10000)")
    s.add_argument("--design", default="pre", choices=["pre", "post", "post_branch"],
                   help="where φ sits: pre-activation h + √dt ξ, post-activation φ(h + √dt ξ), or on the "
                        "branch h + φ(√dt ξ) (default: pre)")
    s.add_argument("--interaction", default="empirical", choices=["empirical", "exact"],
                   help="the noise covariance E[φφᵀ] from the particles themselves, or exact (default: "
                        "empirical)")
    s.set_defaults(func=cmd_particles)

    s = sub.add_parser("train", help="NFD particle solver for online SGD (docs/theory/nfd.rst §4)")
    s.add_argument("--K", type=int, default=4, help="online SGD steps, one training sample each (default: 4)")
    s.add_argument("--depth", "--L", dest="L", type=int, default=16,
                   help="residual blocks L (--L: alias) (default: 16)")
    s.add_argument("--M", type=int, default=4096, help="particles (default: 4096)")
    s.add_argument("--T", type=float, default=1.0, help="terminal depth-time T (default: 1)")
    s.add_argument("--d", type=int, default=10, help="input dimension of the synthetic task (default: 10)")
    s.add_argument("--P", type=int, default=4, help="test inputs (default: 4)")
    s.add_argument("--eta-bar", type=float, default=1.0, help="learning rate η̄ (default: 1)")
    s.add_argument("--activation", default="tanh", help="activation φ (default: tanh)")
    s.add_argument("--freeze-input", action="store_true", help="do not train the input layer")
    s.add_argument("--target-se", type=float, default=None,
                   help="warn when the particles' standard error of the test outputs exceeds this (default: no "
                        "warning)")
    s.add_argument("--seed", type=int, default=0, help="seed of the particles (default: 0)")
    s.add_argument("--save", default=None, help="save the result (PATH.npz + PATH.json) (default: not saved)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("gia", help="coupled vs decoupled finite networks vs NFD over (n, L) (docs/theory/nfd.rst §5)")
    s.add_argument("--ns", type=int, nargs="+", default=[128, 256, 512],
                   help="widths n of the finite networks (default: 128 256 512)")
    s.add_argument("--Ls", type=int, nargs="+", default=[8, 32, 128], help="depths L (default: 8 32 128)")
    s.add_argument("--seeds", type=int, default=8, help="finite networks per (n, L), ≥ 2 (default: 8)")
    s.add_argument("--M", type=int, default=8192, help="NFD particles (default: 8192)")
    s.add_argument("--particle-seeds", type=int, default=4, help="particle runs per L, ≥ 2 (default: 4)")
    s.add_argument("--K", type=int, default=4, help="online SGD steps (default: 4)")
    s.add_argument("--freeze-input", action="store_true", help="do not train the input layer")
    s.add_argument("--out", default=None, help="write the data as JSON (default: not written)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_gia)

    s = sub.add_parser("gia-limit", help="infinite-width coupled (response terms) vs NFD particles vs L")
    s.add_argument("--Ls", type=int, nargs="+", default=[4, 16, 64, 256], help="depths L (default: 4 16 64 256)")
    s.add_argument("--M", type=int, default=8192, help="particles (default: 8192)")
    s.add_argument("--seeds", type=int, default=8, help="particle runs per L, ≥ 2 (default: 8)")
    s.add_argument("--K", type=int, default=4, help="online SGD steps (default: 4)")
    s.add_argument("--freeze-input", action="store_true", help="do not train the input layer")
    s.add_argument("--response", nargs="+", choices=["forward", "backward"], default=["forward", "backward"],
                   help="which passes keep the reused-weight terms (ablation) (default: forward backward)")
    s.add_argument("--out", default=None, help="write the data as JSON (default: not written)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_gia_limit)

    s = sub.add_parser("two-layer", help="two-layer block collapse and the depth-aware LR correction (docs/theory/nfd.rst §6)")
    s.add_argument("--Ls", type=int, nargs="+", default=[4, 16, 64], help="depths L (default: 4 16 64)")
    s.add_argument("--n", type=int, default=128, help="width of the collapse study (default: 128)")
    s.add_argument("--eta-bar", type=float, default=0.5, help="learning rate η̄ of the collapse study (default: 0.5)")
    s.add_argument("--seeds", type=int, default=3, help="networks per point, ≥ 2 (default: 3)")
    s.add_argument("--etas", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.4, 0.8, 1.6],
                   help="learning rates η̄ of the transfer study (default: 0.05 0.1 0.2 0.4 0.8 1.6)")
    s.add_argument("--transfer-n", type=int, default=64, help="width of the transfer study (default: 64)")
    s.add_argument("--steps", type=int, default=15, help="training steps of the transfer study (default: 15)")
    s.add_argument("--out", default=None, help="write the data as JSON (default: not written)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_two_layer)


def default_job(outdir) -> list[str]:
    """Fast (< 2 s): kernel ODE on 4 sphere points, saved to OUTDIR/nfd_kernel_ode_T1."""
    from ..nfd.kernel_ode import kernel_ode, residual_recursion

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((4, 3))
    X = Z / np.linalg.norm(Z, axis=1, keepdims=True) * np.sqrt(3)
    k = kernel_ode(X, T=1.0, activation="erf")
    path = Path(outdir) / "nfd_kernel_ode_T1"
    k.save(path)
    err = np.abs(residual_recursion(X, 64, 1.0, "erf").Sigma[-1] - k.Sigma).max()
    return [f"nfd kernel ODE (erf, T=1, P=4): λmin(K_T) = {np.linalg.eigvalsh(k.K)[0]:.4f}, "
            f"Euler L=64 error {err:.2e}; saved {path}.npz/.json"]
