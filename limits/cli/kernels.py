"""`limits nngp`, `limits response`, `limits critical-line` (human-readable by default, --json)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def load_matrix(path, key):
    """A matrix from a ``.npy``/``.csv``/``.txt`` file, or array ``key`` of a ``.npz`` file (``ValueError`` naming
    the option ``--key`` otherwise; :func:`limits.cliutil.user_array`)."""
    from ..cliutil import user_array

    return user_array(path, f"--{key}", key=key)


def _data(args):
    if args.X and args.K0:
        raise ValueError("give --X or --K0, not both")
    if args.K0:
        return None, load_matrix(args.K0, "K0")
    if args.X:
        return load_matrix(args.X, "X"), None
    rng = np.random.default_rng(args.seed)
    P, d = args.random
    return rng.standard_normal((P, d)), None


def _common(s):
    from ..cliutil import add_variance_options

    g = s.add_mutually_exclusive_group()
    g.add_argument("--X", help="data file P×d_in (.npy/.npz/.csv), samples are rows")
    g.add_argument("--K0", help="read-in kernel file P×P instead of data")
    s.add_argument("--random", nargs=2, type=int, default=(3, 10), metavar=("P", "D"),
                   help="without --X/--K0: P standard-normal inputs of dimension D (default 3 10)")
    s.add_argument("--seed", type=int, default=0, help="seed for --random inputs (default: 0)")
    s.add_argument("--depth", "-L", type=int, default=_ARCH_DEFAULTS["depth"],
                   help="hidden N×N blocks (layers l = 0..depth; the one meaning of depth in limits) (default: "
                        f"{_ARCH_DEFAULTS['depth']})")
    s.add_argument("--model", default=None, metavar="FILE",
                   help="model file (.toml/.json, see `limits model`) instead of the architecture options")
    s.add_argument("--activation", default="erf", help="activation φ (`limits activations` lists them) (default: erf)")
    add_variance_options(s)
    s.add_argument("--residual", action="store_true", help="residual network (seed 004 Eq. 1)")
    s.add_argument("--rho", type=float, default=1.0, help="branch scale (β with --depth-scaling) (default: 1)")
    s.add_argument("--depth-scaling", choices=("none", "sqrt", "linear"), default="none",
                   help="ρ_eff = rho, rho/√L or rho/L (default: none)")
    s.add_argument("--d-in", type=int, default=None, help="input dimension (needed with --K0 for response)")
    s.add_argument("--keep", choices=("all", "last"), default="all",
                   help="store every layer (default) or only layers 0 and L (O(P²) memory)")
    s.add_argument("--max-memory", type=float, default=None,
                   help="refuse runs needing more bytes than this (default: half the available memory)")
    s.add_argument("--save", default=None, help="save the result to SAVE.npz + SAVE.json (default: not saved)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")


_ARCH_DEFAULTS = dict(depth=10, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False, rho=1.0,
                      sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None,
                      depth_scaling="none")


def _kw(args):
    kw = dict(depth=args.depth, activation=args.activation, sigma_w2=args.sigma_w2, sigma_b2=args.sigma_b2,
              residual=args.residual, rho=args.rho, sigma_w2_in=args.sigma_w2_in,
              sigma_b2_in=args.sigma_b2_in, sigma_w2_out=args.sigma_w2_out, sigma_b2_out=args.sigma_b2_out,
              depth_scaling=args.depth_scaling)
    extra = dict(keep=args.keep, max_memory=args.max_memory)
    if getattr(args, "model", None):
        from ..model import model_or_arguments

        return {"model": model_or_arguments(args.model, kw, _ARCH_DEFAULTS,
                                            explicit=getattr(args, "_explicit", None)), **extra}
    return {**kw, **extra}


def _cli_call(fn, *a, **kw):
    """``fn(*a, **kw)`` with the memory refusal's keyword hints (keep="last", max_memory) given as the
    command-line options that set them."""
    try:
        return fn(*a, **kw)
    except ValueError as exc:
        msg = str(exc)
        if "needs about" not in msg:
            raise
        for api, cli in (('keep="last"', "--keep last"), ("max_memory", "--max-memory"),
                         ("fewer layers/inputs", "a smaller --depth or fewer inputs")):
            msg = msg.replace(api, cli)
        raise ValueError(msg) from None


def _clean(x):
    """JSON-safe: NaN/inf → None (strict JSON has no NaN)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _dump(obj):
    print(json.dumps(_clean(obj)))


def _fmt(M):
    return np.array2string(np.asarray(M), precision=6, suppress_small=True, max_line_width=120)


def cmd_nngp(args):
    from ..kernels import nngp

    X, K0 = _data(args)
    r = _cli_call(nngp, X, K0=K0, d_in=args.d_in, ntk_scale=args.ntk_scale, **_kw(args))
    if args.save:
        r.save(args.save)
    if args.json:
        _dump({"params": r.params, "diagnostics": r.diagnostics, "K": r.K.tolist(),
               "K_out": r.K_out.tolist(), "Theta_out": None if r.Theta_out is None else r.Theta_out.tolist(),
               "Theta_out_log_scale": r.Theta_out_log_scale})
        return 0
    p = r.params
    print(f"NNGP ({'residual' if p['residual'] else 'feed-forward'}, {p['activation']}, L={p['depth']}, "
          f"σ_w²={p['sigma_w2']}, σ_b²={p['sigma_b2']}, ρ={p['rho']:.6g})")
    print("K^0 =\n" + _fmt(r.K[0]))
    print(f"K^{p['depth']} =\n" + _fmt(r.K[-1]))
    print("K_out =\n" + _fmt(r.K_out))
    if r.Theta_out is None:
        print("NTK Θ_out: not computed (SP model: the NTK grows ∝ N; use parameterisation NTK)")
    elif r.Theta_out_log_scale:
        print(f"NTK Θ_out (NTK parameterisation) = exp({r.Theta_out_log_scale:.10g}) ×\n" + _fmt(r.Theta_out))
    else:
        print("NTK Θ_out (NTK parameterisation) =\n" + _fmt(r.Theta_out))
    d = r.diagnostics
    if d.get("exploded_at", -1) >= 0:
        print(f"NNGP kernel OVERFLOWED at layer {d['exploded_at']}: K^l and K_out from there on are +inf")
    if d.get("ntk_exploded_at", -1) >= 0:
        print(f"NTK OVERFLOWED at layer {d['ntk_exploded_at']} (Θ grows like χ₁^L); the NNGP kernel above is "
              "finite and correct; rerun with --ntk-scale log for Θ = exp(s)·Θ̃")
    print(f"diagnostics: {d}")
    return 0


def cmd_response(args):
    from ..kernels import response

    X, K0 = _data(args)
    s = _cli_call(response, X, K0=K0, d_in=args.d_in, width=args.width, **_kw(args))
    if args.save:
        s.save(args.save)
    if args.json:
        _dump({"params": s.params, "width": s.width, "d_in": s.d_in, "eta": s.eta.tolist(),
               "chi": s.chi.tolist(), "chi_out": s.chi_out.tolist(), "diagnostics": s.diagnostics})
        return 0
    print(f"response (N={s.width}, d_in={s.d_in}, η⁰ = N/d_in = {s.width / s.d_in:g})")
    print("layer  η^l[0,0]      η^l[0,1]      χ^l[0,0]      χ^l[0,1]")
    P = s.eta.shape[1]
    j = 1 if P > 1 else 0
    labels = range(s.eta.shape[0]) if s.layers is None else s.layers
    for i, l in enumerate(labels):
        print(f"{l:5d}  {s.eta[i, 0, 0]:12.6g}  {s.eta[i, 0, j]:12.6g}  {s.chi[i, 0, 0]:12.6g}  {s.chi[i, 0, j]:12.6g}")
    print("χ_out =\n" + _fmt(s.chi_out))
    d = s.diagnostics
    if d.get("exploded_at", -1) >= 0:
        print(f"NNGP kernel OVERFLOWED at layer {d['exploded_at']}: K, η, χ from there on are +inf")
    elif d.get("chi_exploded_at", -1) >= 0:
        print(f"response χ OVERFLOWED at layer {d['chi_exploded_at']}: η, χ, χ_out from there on are +inf; "
              "the NNGP kernel is finite")
    return 0


def cmd_critical(args):
    from ..kernels import critical_line

    rows = []
    for b in args.sigma_b2:
        c = critical_line(args.activation, b)
        rows.append({"activation": c.activation, "sigma_b2": c.sigma_b2, "sigma_w2": c.sigma_w2,
                     "qstar": c.qstar, "chi1": c.chi1, "converged": c.converged, "note": c.note})
    if args.json:
        _dump(rows)
        return 0
    print(f"order-to-chaos line (χ_1 = 1) for {args.activation}:")
    print("   σ_b²         σ_w²           q*")
    for r in rows:
        print(f"{r['sigma_b2']:8.4g}  {r['sigma_w2']:.10f}  {r['qstar']:.10g}  {r['note']}")
    return 0


def register(sub):
    s = sub.add_parser("nngp", help="NNGP/NTK kernels of a feed-forward or residual network")
    _common(s)
    s.add_argument("--ntk-scale", choices=("linear", "log"), default="linear",
                   help="plain NTK (default; +inf past float64) or Θ = exp(s)·Θ̃ (deep chaotic NTKs)")
    s.set_defaults(func=cmd_nngp)
    s = sub.add_parser("response", help="response functions η^l, χ^l, χ_out (seed 004 Eq. 45–48)")
    _common(s)
    s.add_argument("--width", "-N", type=int, required=True,
                   help="network width N (η⁰ = N/d_in; the response functions are per width)")
    s.set_defaults(func=cmd_response)
    s = sub.add_parser("critical-line", help="σ_w² on the order-to-chaos line for given σ_b²")
    s.add_argument("activation", help="activation φ (`limits activations` lists them)")
    s.add_argument("--sigma-b2", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2],
                   help="bias variances σ_b², one critical σ_w² each (default: 0 0.05 0.1 0.2)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_critical)


def default_job(outdir) -> list[str]:
    """Critical-line table for tanh and erf (≈1 s) → OUTDIR/kernels_critical_line.json."""
    from ..results import atomic_write_text
    from ..kernels import critical_line

    rows = []
    for act, bs in (("tanh", (0.0, 0.05, 0.1, 0.2)), ("erf", (0.0, 0.05, 0.1))):
        for b in bs:
            c = critical_line(act, b)
            rows.append({"activation": act, "sigma_b2": b, "sigma_w2": c.sigma_w2, "qstar": c.qstar})
    path = Path(outdir) / "kernels_critical_line.json"
    atomic_write_text(path, json.dumps(_clean(rows), indent=1))
    tanh = next(r for r in rows if r["activation"] == "tanh" and r["sigma_b2"] == 0.05)
    return [f"kernels critical line: {path} (tanh σ_b²=0.05 → σ_w²={tanh['sigma_w2']:.6f}, "
            f"q*={tanh['qstar']:.6f})"]
