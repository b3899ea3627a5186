"""``limits depth-width``: how far a depth-L, width-N MLP is from its kernel limit, and its regime
(:func:`limits.nfd.depth_width_report`; docs/theory/depth_width.rst §6).

    limits depth-width --depth 50 --width 128                          # shaped leaky relu, c± = ±1
    limits depth-width --depth 50 --width 128 --activation relu        # unshaped He relu
    limits depth-width --depth 50 --width 128 --inputs X.npy --out r   # ρ₀ of two inputs; save r.npz + r.json
"""
from __future__ import annotations

import numpy as np


def input_correlation(path) -> float:
    """ρ₀ of the two rows of a 2×d array file (never unpickled)."""
    from ..cliutil import load_array

    X = load_array(path, "--inputs", ndim=2)
    if X.shape[0] != 2:
        raise ValueError(f"--inputs: need exactly 2 inputs (rows), got an array of shape {X.shape}")
    n = np.linalg.norm(X, axis=1)
    if np.any(n == 0):
        raise ValueError("--inputs: an input is the zero vector (its correlation is undefined)")
    return float(np.clip(X[0] @ X[1] / (n[0] * n[1]), -1.0, 1.0))


def _refuse_smaller(path, paths):
    """Never replace a saved report computed with more SDE paths by a smaller one."""
    from ..results import load_result, result_paths

    if not all(p.exists() for p in result_paths(path)):
        return
    try:
        old = load_result(path, "--out")
    except ValueError:
        return                                     # ensure_writable_result has vetted what is there
    if getattr(old, "paths", 0) > paths:
        raise ValueError(f"--out: {path}.npz holds a report with {old.paths} SDE paths, more than --paths {paths}; "
                         "refusing to replace it — choose another path")


def cmd_depth_width(args):
    from ..cliutil import emit
    from ..nfd.depth_width import depth_width_report

    rho = input_correlation(args.inputs) if args.inputs else args.rho
    if args.save:
        _refuse_smaller(args.save, args.paths)
    r = depth_width_report(args.depth, args.width, args.activation, c_plus=args.c_plus, c_minus=args.c_minus,
                           shape=args.shape, rho=rho, paths=args.paths, steps=args.steps, seed=args.seed)
    text = r.summary()
    if args.save:
        r.save(args.save)
        text += f"\nsaved {args.save}.npz/.json"
    emit(r, args, text)
    return 0


def register(subparsers):
    from ..nfd.depth_width import ACTIVATIONS

    s = subparsers.add_parser("depth-width", help="at depth L and width N: spread of the output correlation, the 1/N "
                                                  "expansion's error, regime (kernel-like / proportional / degenerate)")
    s.add_argument("--depth", type=int, required=True, help="number of hidden layers L (required)")
    s.add_argument("--width", type=int, required=True, help="width N of every hidden layer (required)")
    s.add_argument("--activation", default="shaped-relu", choices=ACTIVATIONS,
                   help="shaped-relu: slopes 1 + c±/√N; shaped-tanh: s tanh(x/s), s = shape·√N; relu: unshaped, He "
                        "initialisation (default: shaped-relu)")
    s.add_argument("--c-plus", type=float, default=1.0, help="shaped-relu: c₊ of the positive slope (default: 1)")
    s.add_argument("--c-minus", type=float, default=-1.0, help="shaped-relu: c₋ of the negative slope (default: -1)")
    s.add_argument("--shape", type=float, default=1.0,
                   help="shaped-tanh: φ(x) = s tanh(x/s) with s = shape·√N (default: 1)")
    s.add_argument("--rho", type=float, default=0.3, help="correlation ρ₀ of the two inputs (default: 0.3)")
    s.add_argument("--inputs", default=None,
                   help=".npy/.npz 2×d array: take ρ₀ from these two inputs instead of --rho (default: use --rho)")
    s.add_argument("--paths", type=int, default=10_000, help="SDE paths, ≥ 200 (default: 10000)")
    s.add_argument("--steps", type=int, default=None,
                   help="Euler steps of the SDE (default: max(16, min(L, 256⌈L/N⌉)), four times that for shaped-tanh)")
    s.add_argument("--seed", type=int, default=0, help="seed of the SDE paths (default: 0)")
    s.add_argument("--out", "--save", dest="save", default=None,
                   help="save the report as PATH.npz + PATH.json (default: not saved)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_depth_width)
