"""``limits table`` / ``limits classify`` / ``limits depth`` commands and the params part of the
main job (:func:`default_job`). User-typed exponents go through the restricted parser
(:func:`limits.params.parse`): numbers, fractions, + − * / ( ) and the declared symbols
``gamma_bar_L``, ``e_B`` only.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

_LAYER_FLAGS = {"1": "input", "h": "hidden", "o": "output"}


def _p(text, name):
    from ..params.expr import parse

    return parse(text, name=name)


def _extras(args):
    ex = {}
    if getattr(args, "gamma_bar_L", None) is not None:
        ex["gamma_bar_L"] = _p(args.gamma_bar_L, "--gamma-bar-L")
    if getattr(args, "e_B", None) is not None:
        ex["e_B"] = _p(args.e_B, "--e-B")
    return ex


def cmd_table(args):
    from ..params import table

    names = args.names or ["SP", "NTK", "MF", "muP"]
    fmt = "json" if args.json else args.format
    t = table(names, algorithm=args.algorithm, convention=args.convention, optimizer=args.optimizer,
              gauge=args.gauge, **_extras(args))
    out = {"md": t.to_markdown, "latex": t.to_latex, "json": t.to_json}[fmt]()
    print(out.rstrip("\n"))
    return 0


def build_from_args(args):
    """Parameterisation from ``--name`` (optional start point) and per-layer overrides."""
    from ..params.named import named
    from ..params.parameterisation import Parameterisation

    ex = _extras(args)
    if args.name:
        base = named(args.name, convention=args.convention, algorithm=args.algorithm, optimizer=args.optimizer, **ex)
        a, b, c, d = list(base.a), list(base.b), list(base.c), base.d
    else:
        a, b, c, d = [None] * 3, [None] * 3, [None] * 3, None
    if args.c is not None:
        c = [_p(args.c, "--c")] * 3
    for flag, lay in _LAYER_FLAGS.items():
        i = ("input", "hidden", "output").index(lay)
        for s, arr in (("a", a), ("b", b), ("c", c)):
            v = getattr(args, f"{s}{flag}")
            if v is not None:
                arr[i] = _p(v, f"--{s}{flag}")
    if args.d is not None:
        d = _p(args.d, "--d")
    missing = [f"--{s}{f}" for s, arr in (("a", a), ("b", b), ("c", c)) for f, v in zip("1ho", arr) if v is None]
    if missing:
        raise ValueError(f"missing exponents {', '.join(missing)} (or start from --name)")
    if d is None:
        d = 0
    return Parameterisation.make(a, b, c, d, convention=args.convention, algorithm=args.algorithm,
                                 optimizer=args.optimizer, name=args.name or "custom",
                                 gamma_bar_L=ex.get("gamma_bar_L"), e_B=ex.get("e_B"))


def cmd_classify(args):
    from ..params.classify import classify

    p = build_from_args(args)
    c = classify(p)
    if args.json:
        print(json.dumps({"parameterisation": p.to_dict(), "classification": c.to_dict()}, indent=1,
                         ensure_ascii=False))
    else:
        print(p)
        print(c)
    return 0


def cmd_depth(args):
    from ..params.depth import depth_regime

    r = depth_regime(_p(args.alpha, "--alpha"), _p(args.gamma, "--gamma"))
    if args.json:
        print(json.dumps({"alpha": str(r.alpha), "gamma": str(r.gamma), "stable_init": r.stable_init,
                          "stable_training": r.stable_training, "nontrivial": r.nontrivial, "faithful": r.faithful,
                          "sgd_lr_exponent": str(r.sgd_lr_exponent), "adam_lr_exponent": str(r.adam_lr_exponent),
                          "name": r.name}, indent=1))
    else:
        print(r)
    return 0


def _common(s, convention_default):
    from ..vocabulary import ALGORITHMS, CONVENTIONS, OPTIMIZERS

    s.add_argument("--algorithm", default="bp", choices=ALGORITHMS,
                   help="training algorithm: backpropagation, predictive coding, Gauss-Newton target, target "
                        "propagation, difference target propagation (default: bp)")
    s.add_argument("--convention", default=convention_default, choices=CONVENTIONS,
                   help="abc convention of the printed exponents: variance (seed 000, W ~ N(0, N^-b)) or std "
                        f"(Tensor Programs, W = N^-a w) (default: {convention_default})")
    s.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS, help="optimizer the learning-rate exponents "
                                                                          "are for (default: sgd)")
    s.add_argument("--gamma-bar-L", dest="gamma_bar_L", default=None,
                   help="PC inference step exponent γ̄_L (number, fraction or the symbol gamma_bar_L)")
    s.add_argument("--e-B", dest="e_B", default=None, help="GNT preconditioner exponent (default: the algorithm's)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")


def register(subparsers):
    s = subparsers.add_parser("table", help="parameterisation tables derived by the constraint solver")
    s.add_argument("names", nargs="*", help="SP SP-stable NTK MF muP muPC depth-muP (default: SP NTK MF muP)")
    _common(s, "variance")
    s.add_argument("--gauge", default=None, choices=["a0"], help="std convention: a_l = 0 gauge (seed 003)")
    s.add_argument("--format", default="md", choices=["md", "latex", "json"],
                   help="output format: Markdown, LaTeX or JSON (default: md)")
    s.set_defaults(func=cmd_table)

    s = subparsers.add_parser("classify", help="stability / regime / per-layer r_l of a parameterisation")
    s.add_argument("--name", default=None, help="start from a named parameterisation, then override")
    _common(s, "std")
    for flag, lay in _LAYER_FLAGS.items():
        for sym in "abc":
            s.add_argument(f"--{sym}{flag}", default=None, help=f"exponent {sym} of the {lay} layer (e.g. \"-1/2\")")
    s.add_argument("--c", default=None, help="one learning-rate exponent for every layer")
    s.add_argument("--d", default=None, help="output exponent d (variance convention)")
    s.set_defaults(func=cmd_classify)

    s = subparsers.add_parser("depth", help="Tensor Programs VI depth regime of (α, γ)")
    s.add_argument("--alpha", required=True,
                   help="depth exponent α of the branch multiplier L^-α (a number or fraction, e.g. 1/2)")
    s.add_argument("--gamma", required=True,
                   help="exponent γ of each block's effective weight update L^-γ (a number or fraction)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_depth)


def standard_tables() -> dict:
    """The standard tables: ``{file stem: Table}``."""
    import sympy as sp

    from ..params import table
    from ..params.tables import make_column_table

    G = sp.Symbol("gamma_bar_L", real=True)
    return {
        "params_seed000_table2_bp": table(["SP", "NTK", "MF", "muP"], algorithm="bp", convention="variance"),
        "params_seed000_table2_pc": table(["SP", "NTK", "MF", "muP"], algorithm="pc", convention="variance"),
        "params_tp4_table1_std": table(["SP-stable", "SP", "NTK", "muP"], algorithm="bp", convention="std"),
        "params_seed003_table1": make_column_table(
            [("SP", "SP", "bp", {}), ("SGD muP", "muP", "bp", {}), ("GNT muP", "muP", "gnt", {}),
             ("PC muP", "muP", "pc", {"gamma_bar_L": G}), ("TP muP", "muP", "tp", {})],
            convention="std", gauge="a0",
            title="seed 003 Table 1 (std convention, a_l = 0 gauge; derived by the constraint solver)"),
        "params_depth": table(["muP", "muPC", "depth-muP"], algorithm="pc", convention="variance"),
    }


def default_job(outdir) -> list[str]:
    """Write the standard tables (Markdown + LaTeX) into ``outdir/tables/`` atomically."""
    from ..results import atomic_write_text

    t0 = time.perf_counter()
    d = Path(outdir) / "tables"
    written = []
    for stem, t in standard_tables().items():
        atomic_write_text(d / f"{stem}.md", t.to_markdown())
        atomic_write_text(d / f"{stem}.tex", t.to_latex())
        written.append(stem)
    return [f"params: {len(written)} tables (.md + .tex) in {d}/ ({time.perf_counter() - t0:.1f}s): "
            + ", ".join(written)]
