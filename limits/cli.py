"""`limits` command line.

Core commands live here (``run``, ``figure``, ``validate``, ``expect``, ``activations``); each
component adds its own by providing ``limits/<component>/cli.py`` with
``register(subparsers)`` (and optionally ``default_job(outdir) -> list[str]`` to contribute to
the main job, ``limits`` with no arguments).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import sys
import time
from pathlib import Path

COMPONENTS = ("params", "kernels", "pc", "dmft", "nfd", "finite", "sweep")


def _component_clis():
    mods = []
    for comp in COMPONENTS:
        name = f"limits.{comp}.cli"
        try:
            if importlib.util.find_spec(f"limits.{comp}") is None or importlib.util.find_spec(name) is None:
                continue
        except ModuleNotFoundError:
            continue
        mods.append(importlib.import_module(name))
    return mods


def _print(obj, as_json: bool):
    from .cliutil import emit

    emit(obj, argparse.Namespace(json=as_json), obj)


# ---------------------------------------------------------------- core commands
def cmd_run(args):
    """Main job: default tables and figures into the output directory."""
    outdir = Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    lines = []
    for mod in _component_clis():
        if hasattr(mod, "default_job"):
            lines += mod.default_job(outdir)
    from . import gallery

    for name in gallery.default_names():
        made = gallery.make(name, quick=not args.full, outdir=outdir)
        lines.append(f"figure {name}: {made.paths['png']} ({'cached' if made.cached else f'{made.wall_time_s:.1f}s'})")
    lines.append(f"done in {time.perf_counter() - t0:.1f}s; outputs in {outdir}/")
    print("\n".join(lines))
    return 0


def cmd_figure(args):
    from . import gallery

    if args.list:
        for name, spec in gallery.figures().items():
            print(f"{name:32s} [{spec.component}] {spec.seed_ref}  {spec.caption.splitlines()[0] if spec.caption else ''}")
        return 0
    names = list(gallery.figures()) if args.all else args.names
    if not names:
        print("give figure NAME(s), --all or --list", file=sys.stderr)
        return 2
    summary = []
    for name in names:
        if args.replot:
            gallery.replot(name, args.outdir)
            summary.append({"name": name, "replotted": True})
            print(f"{name}: replotted from {args.outdir}/{name}.npz")
            continue
        made = gallery.make(name, quick=args.quick, outdir=args.outdir, force=args.force)
        summary.append({"name": name, "wall_time_s": made.wall_time_s, "cached": made.cached, **made.paths})
        if not args.json:
            print(f"{name}: {made.paths['png']}  ({'cached data' if made.cached else f'computed in {made.wall_time_s:.1f}s'})")
    if args.json:
        _print(summary, True)
    return 0


def cmd_validate(args):
    from . import validate

    comps = None if (args.all or not args.components) else args.components
    report = validate.run(comps, quick=not args.full, seed=args.seed)
    suffix = "" if comps is None else "_" + "_".join(comps)
    out = Path(args.out) if args.out else Path(args.outdir) / f"validation{suffix}.md"
    validate.write_report(report, out)
    if args.json:
        _print([c.__dict__ for c in report.cases], True)
    else:
        print(report.to_markdown())
        print(f"report written to {out}")
    return 0 if report.passed else 1


def cmd_activations(args):
    from .activations import registered

    rows = []
    for name in registered():
        from .activations import activation

        a = activation(name)
        rows.append({"name": name, "closed_form_kernel": a.kernel is not None,
                     "closed_form_derivative_kernel": a.dkernel is not None})
    if args.json:
        _print(rows, True)
    else:
        for r in rows:
            print(f"{r['name']:10s} E[φφ]: {'closed form' if r['closed_form_kernel'] else 'quadrature'}; "
                  f"E[φ'φ']: {'closed form' if r['closed_form_derivative_kernel'] else 'quadrature'}")
    return 0


def cmd_expect(args):
    from .gaussian import expect2

    g = args.g or args.f
    val = expect2(args.f, g, args.k11, args.k12, args.k22)
    if args.json:
        _print({"f": args.f, "g": g, "k11": args.k11, "k12": args.k12, "k22": args.k22, "value": float(val)}, True)
    else:
        print(f"E[{args.f}(u) {g}(v)] = {float(val):.15g}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="limits",
        description="Infinite-width and infinite-depth limits of neural networks, cross-validated "
                    "against finite networks. With no command, runs the main job (`limits run`).")
    p.add_argument("--version", action="version", version=f"limits {__import__('limits').__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("run", help="main job: default tables and figures into figures/")
    s.add_argument("--outdir", default="figures")
    s.add_argument("--full", action="store_true",
                   help="paper-sized figures (default: the quick variants, about a minute in all)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("figure", help="reproduce paper figures (compute → figures/NAME.npz/.json → .png/.pdf)")
    s.add_argument("names", nargs="*", metavar="NAME")
    s.add_argument("--all", action="store_true", help="every registered figure")
    s.add_argument("--list", action="store_true", help="list the registered figures")
    s.add_argument("--quick", action="store_true", help="reduced sizes for a fast run (CI)")
    s.add_argument("--force", action="store_true", help="recompute even if cached data match")
    s.add_argument("--replot", action="store_true", help="redraw from the stored data only")
    s.add_argument("--outdir", default="figures")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_figure)

    s = sub.add_parser("validate", help="theory vs finite networks; writes a Markdown verdict table")
    s.add_argument("components", nargs="*", metavar="COMPONENT")
    s.add_argument("--all", action="store_true", help="every component (report: figures/validation.md)")
    s.add_argument("--full", action="store_true", help="full sizes instead of the quick defaults")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None, help="report path (default figures/validation[_COMP].md)")
    s.add_argument("--outdir", default="figures")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("activations", help="list registered activations and their closed forms")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_activations)

    s = sub.add_parser("expect", help="E[f(u) g(v)] for (u,v) ~ N(0, [[k11,k12],[k12,k22]])")
    s.add_argument("f", help="activation name")
    s.add_argument("--g", default=None, help="second activation (default: same as f)")
    s.add_argument("--k11", type=float, default=1.0)
    s.add_argument("--k12", type=float, default=0.5)
    s.add_argument("--k22", type=float, default=1.0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_expect)

    for mod in _component_clis():
        mod.register(sub)
    _accept_negative_fractions(p)
    return p


_NEGATIVE_NUMBER = re.compile(r"^-(\d+|\d*\.\d+)([eE][-+]?\d+)?(/\d+)?$")


def _accept_negative_fractions(parser):
    """Let option values like ``--a1 "-1/2"`` through (argparse would read them as flags)."""
    parser._negative_number_matcher = _NEGATIVE_NUMBER
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _accept_negative_fractions(sub)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *([] if argv is None else argv)])
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"limits: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:          # e.g. `limits table | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("limits: interrupted (finished results were saved)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
