"""`limits` command line.

Core commands live here (``run``, ``figure``, ``validate``, ``expect``, ``activations``); each
command group has its own module in this package, ``limits/cli/<component>.py``, with
``register(subparsers)`` (and optionally ``default_job(outdir) -> list[str]`` to contribute to
the main job, ``limits`` with no arguments).

Every command runs inside one error boundary (:func:`main`), installed before anything heavy is
imported or the command line is parsed:

* exit 0 — success; exit 1 — the command ran but its check failed (not converged, a validation
  case failed), as each command documents;
* exit 2 — a user error: bad arguments, bad values (``ValueError``), missing, unreadable or
  unwritable files (``OSError``), not enough memory for the requested sizes, the user's own code (a module
  allowed with ``--allow``) raising or calling ``sys.exit`` (:func:`limits.resolver.blame`), a folder named
  ``limits`` in the current directory shadowing the package. One line on stderr, ``limits: error: ...``, in
  which no long value is echoed whole;
* exit 70 (``EX_SOFTWARE``) — an internal error (a bug): one line on stderr naming the file
  where the full traceback was written (``$TMPDIR/limits-error-*.txt``);
* exit 130 — interrupted (Ctrl-C), one line on stderr, also during start-up (saying what was kept when a
  resumable computation was interrupted, e.g. the tiles of ``limits regress --solver cg``);
* exit 3 — ``limits sweep run`` finished but some grid points failed (they are listed; the others are stored).

:data:`EXIT_STATUSES` lists them all for ``limits --help``.

Output paths (``--outdir``, ``--out``, ``--save``) are checked for writability before any
computation. Paper-size figures go to ``OUTDIR/full/``, quick variants to ``OUTDIR/`` (the
committed gallery); a quick run never replaces a paper-size result.
"""
from __future__ import annotations

import sys

COMPONENTS = ("params", "kernels", "pc", "dmft", "nfd", "finite", "sweep")
EXIT_USAGE = 2
EXIT_POINTS_FAILED = 3      # `limits sweep run`: finished, but some grid points raised (listed)
EXIT_INCONCLUSIVE = 4       # `limits check` / `predict --check`: nothing failed, but a required test was not decided
EXIT_INTERNAL = 70          # sysexits.h EX_SOFTWARE
EXIT_INTERRUPTED = 130
# every exit status a command returns, for `limits --help` (tests/test_cli_exit_status.py scans the commands'
# return statements and the constants above against it)
EXIT_STATUSES = {
    0: "ok (also --help, --version, and output cut short by a closed pipe such as `| head`)",
    1: "a check did not pass (a failed check, not converged, a validation case failed, a "
       "coordinate check not as predicted, `sweep run --fail-fast` stopped at a failing point)",
    EXIT_USAGE: "bad input: arguments, values, files (one line on stderr)",
    EXIT_POINTS_FAILED: "`limits sweep run` finished but some grid points failed (listed; the rest is stored)",
    EXIT_INCONCLUSIVE: "`limits check` / `limits predict --check` inconclusive: nothing failed, but a required test "
                       "was too wide to decide (the inits/widths that would decide it are printed) or, for predictions, "
                       "a failure lies outside the asymptotic regime",
    EXIT_INTERNAL: "internal error, a bug (the traceback is saved to a file in the temp dir, named on stderr)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}
FULL_SUBDIR = "full"


def _component_clis():
    """The command modules of the components, ``limits/cli/<component>.py`` (each has
    ``register(subparsers)``), in :data:`COMPONENTS` order; a missing one is skipped."""
    import importlib
    import importlib.util

    mods = []
    for comp in COMPONENTS:
        name = f"{__name__}.{comp}"
        if importlib.util.find_spec(name) is None:
            continue
        mods.append(importlib.import_module(name))
    return mods


def _print(obj, as_json: bool):
    import argparse

    from ..cliutil import emit

    emit(obj, argparse.Namespace(json=as_json), obj)


# ---------------------------------------------------------------- core commands
def figure_dir(outdir, quick: bool):
    """Where ``limits figure`` puts a figure: quick variants in ``OUTDIR`` (the committed gallery),
    paper-size ones in ``OUTDIR/full`` — so neither ever replaces the other."""
    from pathlib import Path

    return Path(outdir) if quick else Path(outdir) / FULL_SUBDIR


RUN_OUTDIR = "results"


def cmd_run(args):
    """Main job: default tables and figures into the output directory (``results/`` by default,
    git-ignored). Figures whose committed data (``figures/``, or ``figures/full/`` with ``--full``)
    match their parameters are copied byte for byte, not recomputed or re-rendered; nothing
    outside the output directory is written, so the repository stays clean."""
    import time
    from pathlib import Path

    from ..cliutil import ensure_writable_dir

    outdir = Path(args.outdir)
    figdir = figure_dir(outdir, quick=not args.full)
    ensure_writable_dir(outdir, "--outdir")
    ensure_writable_dir(figdir, "--outdir")
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    lines = []
    from ..progress import stage

    for mod in _component_clis():
        if hasattr(mod, "default_job"):
            with stage(f"limits run: {mod.__name__.rsplit('.', 1)[-1]}"):
                lines += mod.default_job(outdir)
    from .. import gallery

    committed = gallery.committed_dir()
    source = None if committed is None else figure_dir(committed, quick=not args.full)
    for name in gallery.default_names():
        made = None if source is None else gallery.reuse(name, not args.full, source, figdir)
        how = "copied from the committed gallery" if made is not None else None
        if made is None:
            with stage(f"limits run: figure {name}"):
                made = gallery.make(name, quick=not args.full, outdir=figdir)
            how = "cached" if made.cached else f"{made.wall_time_s:.1f}s"
        lines.append(f"figure {name}: {made.paths['png']} ({how})")
    lines.append(f"done in {time.perf_counter() - t0:.1f}s; outputs in {outdir}/")
    print("\n".join(lines))
    return 0


def cmd_figure(args):
    from .. import gallery
    from ..cliutil import ensure_writable_dir

    if args.list:
        for name, spec in gallery.figures().items():
            print(f"{name:32s} [{spec.component}] {spec.seed_ref}  {spec.caption.splitlines()[0] if spec.caption else ''}")
        return 0
    names = list(gallery.figures()) if args.all else args.names
    if not names:
        raise ValueError("give figure NAME(s), --all or --list")
    for name in names:              # every name checked before the first (possibly long) computation
        gallery.get(name)
    outdir = figure_dir(args.outdir, args.quick)
    ensure_writable_dir(outdir, "--outdir")
    summary = []
    for name in names:
        if args.replot:
            paths = gallery.replot(name, outdir)
            summary.append({"name": name, "replotted": True, **{k: str(v) for k, v in paths.items()}})
            if not args.json:
                print(f"{name}: {paths['png']}  (replotted from {paths['npz']})")
            continue
        from ..progress import stage

        with stage(f"figure {name}{' (quick)' if args.quick else ''}"):
            made = gallery.make(name, quick=args.quick, outdir=outdir, force=args.force)
        summary.append({"name": name, "wall_time_s": made.wall_time_s, "cached": made.cached, **made.paths})
        if not args.json:
            print(f"{name}: {made.paths['png']}  ({'cached data' if made.cached else f'computed in {made.wall_time_s:.1f}s'})")
    if args.json:
        _print(summary, True)
    return 0


def cmd_validate(args):
    from pathlib import Path

    from .. import validate
    from ..cliutil import ensure_writable_file, rescue_dir

    comps = None if (args.all or not args.components) else args.components
    suffix = "" if comps is None else "_" + "_".join(comps)
    out = Path(args.out) if args.out else Path(args.outdir) / f"validation{suffix}.md"
    ensure_writable_file(out, "--out" if args.out else "--outdir")
    report = validate.run(comps, quick=not args.full, seed=args.seed)
    target = validate.FULL_POWER_TARGET if args.full else None
    if args.json:
        _print([c.__dict__ for c in report.cases], True)
    else:
        print(report.to_markdown(power_target=target))
    try:
        validate.write_report(report, out, power_target=target)
    except OSError as exc:          # the report took minutes: never lose it
        rescued = validate.write_report(report, rescue_dir() / out.name, power_target=target)
        raise OSError(f"could not write the report to {out} ({exc.strerror or exc}); "
                      f"it was saved to {rescued} instead") from None
    print(f"report written to {out}", file=sys.stderr if args.json else sys.stdout)
    return 0 if report.passed else 1


def cmd_activations(args):
    from ..activations import registered

    rows = []
    for name in registered():
        from ..activations import activation

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
    from ..gaussian import expect2

    g = args.g or args.f
    val = expect2(args.f, g, args.k11, args.k12, args.k22)
    if args.json:
        _print({"f": args.f, "g": g, "k11": args.k11, "k12": args.k12, "k22": args.k22, "value": float(val)}, True)
    else:
        print(f"E[{args.f}(u) {g}(v)] = {float(val):.15g}")
    return 0


def _parser_class():
    import argparse

    class Parser(argparse.ArgumentParser):
        """Argument errors as one line, ``limits: error: ...`` (exit 2), pointing at ``--help``."""

        def error(self, message):
            raise _UsageError(f"{message} (see `{self.prog} --help`)")

    return Parser


class _UsageError(Exception):
    pass


def build_parser():
    import argparse

    p = _parser_class()(
        prog="limits",
        description="Infinite-width and infinite-depth limits of neural networks, cross-validated "
                    "against finite networks. With no command, runs the main job (`limits run`).",
        epilog="Exit status: " + "; ".join(f"{k} {v}" for k, v in EXIT_STATUSES.items()) + ".")
    p.add_argument("--version", action="version", version=f"limits {__import__('limits').__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("run", help="main job: default tables and figures into results/ (git-ignored)")
    s.add_argument("--outdir", default=RUN_OUTDIR,
                   help="output folder (default results/, git-ignored); committed figures whose data match "
                        "are copied from figures/, never re-rendered")
    s.add_argument("--full", action="store_true",
                   help="paper-sized figures, into OUTDIR/full/ (default: the quick variants, about a minute "
                        "in all, into OUTDIR/)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("figure", help="reproduce paper figures (compute → figures/full/NAME.npz/.json → .png/.pdf)")
    s.add_argument("names", nargs="*", metavar="NAME", help="registered figure names (`limits figure --list`)")
    s.add_argument("--all", action="store_true", help="every registered figure")
    s.add_argument("--list", action="store_true", help="list the registered figures")
    s.add_argument("--quick", action="store_true",
                   help="reduced sizes for a fast run (CI), into OUTDIR/ instead of OUTDIR/full/")
    s.add_argument("--force", action="store_true", help="recompute even if cached data match")
    s.add_argument("--replot", action="store_true", help="redraw from the stored data only")
    s.add_argument("--outdir", default="figures",
                   help="folder of the gallery: quick variants in OUTDIR/, paper-size ones in OUTDIR/full/ "
                        "(default: figures)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_figure)

    s = sub.add_parser("validate", help="theory vs finite networks; writes a Markdown verdict table")
    s.add_argument("components", nargs="*", metavar="COMPONENT",
                   help=f"components to validate: {', '.join(c for c in COMPONENTS if c != 'sweep')} (default: all)")
    s.add_argument("--all", action="store_true", help="every component (report: figures/validation.md)")
    s.add_argument("--full", action="store_true", help="full sizes instead of the quick defaults")
    s.add_argument("--seed", type=int, default=0, help="seed of every finite network and sample (default: 0)")
    s.add_argument("--out", default=None, help="report path (default figures/validation[_COMP].md)")
    s.add_argument("--outdir", default="figures",
                   help="folder of the report when --out is not given (default: figures)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("activations", help="list registered activations and their closed forms")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_activations)

    s = sub.add_parser("expect", help="E[f(u) g(v)] for (u,v) ~ N(0, [[k11,k12],[k12,k22]])")
    s.add_argument("f", help="activation name")
    s.add_argument("--g", default=None, help="second activation (default: same as f)")
    s.add_argument("--k11", type=float, default=1.0, help="variance of u (default: 1)")
    s.add_argument("--k12", type=float, default=0.5, help="covariance of u and v, |k12| ≤ √(k11 k22) (default: 0.5)")
    s.add_argument("--k22", type=float, default=1.0, help="variance of v (default: 1)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the text")
    s.set_defaults(func=cmd_expect)

    for mod in _component_clis():
        mod.register(sub)
    from . import model as model_cli, predict as predict_cli

    model_cli.register(sub)
    predict_cli.register(sub)
    from ..torch import cli as torch_cli          # imports torch only when `coord-check` runs

    torch_cli.register(sub)
    from ..torch import transfer_cli              # imports torch only when `transfer` runs

    transfer_cli.register(sub)
    from . import regress

    regress.register(sub)
    from . import depth_width

    depth_width.register(sub)
    _accept_negative_fractions(p)
    return p


_NEGATIVE_NUMBER = r"^-(\d+|\d*\.\d+)([eE][-+]?\d+)?(/\d+)?$"


def _accept_negative_fractions(parser):
    """Let option values like ``--a1 "-1/2"`` through (argparse would read them as flags)."""
    import argparse
    import re

    parser._negative_number_matcher = re.compile(_NEGATIVE_NUMBER)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _accept_negative_fractions(sub)


# every command's --seed: numpy's SeedSequence takes any size, but torch.manual_seed, legacy numpy seeding and the
# per-init seeds derived from it (seed · 1 000 003 + s) do not — one range for every command, checked first
MAX_SEED = 2 ** 32 - 1


# output options of component commands, checked before the command runs:
# ``--save PATH`` writes PATH.npz + PATH.json, ``--out FILE`` one file
_OUTPUT_OPTIONS = {"save": "--save", "out": "--out"}


# input files of component commands, checked (exist, readable, numpy data without pickles)
# before the command runs, so every command gives the same clear error naming the option
_INPUT_OPTIONS = {"X": "--X", "Y": "--Y", "K0": "--K0", "weights": "--weights"}


# every option naming a file or folder: an OSError on a path under it names the option (a full disk, a file too
# large, a permission) — _classify
_PATH_OPTIONS = {**_OUTPUT_OPTIONS, **_INPUT_OPTIONS, "outdir": "--outdir", "store": "--store", "plot": "--plot",
                 "model": "--model", "x1": "--x1", "x2": "--x2", "x": "--x", "y": "--y", "x_train": "--x-train",
                 "y_train": "--y-train", "x_test": "--x-test", "y_test": "--y-test", "prediction": "--prediction",
                 "kernel_path": "--kernel"}
_GIVEN_PATHS: list = []          # (absolute path, option) of the command line being run


def _remember_paths(args):
    import os

    _GIVEN_PATHS.clear()
    for attr, flag in _PATH_OPTIONS.items():
        value = getattr(args, attr, None)
        if isinstance(value, str) and value:
            _GIVEN_PATHS.append((os.path.abspath(value), flag))


def _option_of(filename):
    """The option whose path ``filename`` is, or lies under (``--save P`` → P.npz, ``--store D`` → D/nngp/…)."""
    import os

    f = os.path.abspath(os.fsdecode(filename))
    hits = [(len(p), flag) for p, flag in _GIVEN_PATHS
            if f == p or f.startswith(p.rstrip(os.sep) + os.sep) or (f.startswith(p) and f[len(p):] in (".npz", ".json"))]
    return max(hits)[1] if hits else None


_OS_HINTS = {"ENOSPC": "the disk is full: free space or choose another place",
             "EDQUOT": "the disk quota is used up: free space or choose another place",
             "EFBIG": "larger than the file system (or `ulimit -f`) allows for one file: choose another place or a "
                      "smaller problem"}


def _os_error_message(exc) -> str:
    """One line for an OSError: the option, the file, the system's reason and what to do about it."""
    import errno as _errno

    where = exc.filename if exc.filename2 is None else f"{exc.filename} → {exc.filename2}"
    flag = _option_of(exc.filename)
    hint = _OS_HINTS.get(_errno.errorcode.get(exc.errno, ""), "")
    return (f"{flag}: " if flag else "") + f"{where}: {exc.strerror or exc}" + (f" ({hint})" if hint else "")


def _check_files(args):
    from ..cliutil import check_input_file, ensure_writable_file, ensure_writable_result

    seed = getattr(args, "seed", None)
    if isinstance(seed, int) and not 0 <= seed <= MAX_SEED:     # checked before anything runs
        raise ValueError(f"--seed must be an integer from 0 to 2^32 − 1 = {MAX_SEED}, got "
                         f"{seed if abs(seed) < 10 ** 30 else f'a {len(str(abs(seed)))}-digit number'}")
    plot = getattr(args, "plot", None)
    if isinstance(plot, str) and plot and args.command not in ("run", "figure", "validate"):
        from ..style import figure_path

        figure_path(plot, "--plot")             # a suffix matplotlib writes, and a writable place: before computing
        ensure_writable_file(plot, "--plot")
    for attr, flag in _INPUT_OPTIONS.items():
        value = getattr(args, attr, None)
        if isinstance(value, str):
            check_input_file(value, flag)
    if args.command in ("run", "figure", "validate"):
        return                      # these check their own outputs (they know the final paths)
    for attr, flag in _OUTPUT_OPTIONS.items():
        value = getattr(args, attr, None)
        if isinstance(value, str) and value:
            (ensure_writable_result if attr == "save" else ensure_writable_file)(value, flag)


def explicit_options(argv) -> set:
    """The dests of the options given on the command line ``argv`` (not left at their defaults): ``argv``
    parsed again by a parser whose every default is suppressed. So ``--depth 10`` counts as given even
    when 10 is the default (a model file then conflicts with it)."""
    import argparse

    parser = build_parser()

    def suppress(p):
        p._defaults.clear()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    suppress(sub)
            else:
                a.default = argparse.SUPPRESS

    suppress(parser)
    return set(vars(parser.parse_args(list(argv))))


def _dispatch(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *(sys.argv[1:] if argv is None else argv)])
    if getattr(args, "model", None) is not None or getattr(args, "show", None) is not None:
        # the options given explicitly, which a model file must not contradict
        args._explicit = explicit_options(sys.argv[1:] if argv is None else [str(a) for a in argv])
    _remember_paths(args)
    _check_files(args)
    from ..progress import stage

    with stage(command_name(args)):          # a line within seconds when the command works longer
        return int(args.func(args) or 0)


def command_name(args) -> str:
    """``limits sweep run``: the command (and subcommand) being run, for its progress lines."""
    sub = getattr(args, f"{str(args.command).replace('-', '_')}_command", None)
    return f"limits {args.command}" + (f" {sub}" if isinstance(sub, str) else "")


def _write_crash_report(exc, argv) -> str | None:
    """Full traceback of an internal error into ``$TMPDIR/limits-error-*.txt``; returns the path."""
    import os
    import platform
    import tempfile
    import time
    import traceback

    try:
        from ..results import atomic_write_text

        stamp = time.strftime("%Y%m%dT%H%M%S")
        fd, path = tempfile.mkstemp(prefix=f"limits-error-{stamp}-", suffix=".txt")   # a fresh, unique name
        os.close(fd)
        cmd = " ".join(["limits", *(sys.argv[1:] if argv is None else [str(a) for a in argv])])
        text = (f"command: {cmd}\npython {platform.python_version()} on {platform.platform()}\n"
                f"limits {__import__('limits').__version__}\n\n"
                + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        atomic_write_text(path, text)
        return path
    except Exception:               # never let the report itself crash the boundary
        return None


def _largest_size_option(argv):
    """``'--width 10000000000'``: the option given the largest integer value on the command line — a size, never
    a seed (``--seed 123456`` allocates nothing)."""
    tokens = [str(t) for t in (sys.argv[1:] if argv is None else argv)]
    best = None
    for i, tok in enumerate(tokens):
        if not tok.startswith("-"):
            continue
        flag, _, val = tok.partition("=")
        if "seed" in flag.lower():
            continue
        vals = [val] if val else tokens[i + 1:i + 2]
        j = i + 2
        while not val and j < len(tokens) and not tokens[j].startswith("-"):   # nargs="+" options
            vals.append(tokens[j])
            j += 1
        for v in vals:
            try:
                n = int(v)
            except ValueError:
                continue
            if best is None or n > best[1]:
                best = (flag, n)
    return None if best is None else f"{best[0]} {best[1]}"


def _user_code(exc):
    """The one-line message when ``exc`` came out of the user's own code (a module allowed with ``--allow``:
    a factory, data or sweep function raising or calling ``sys.exit``), else None (:func:`limits.resolver.blame`)."""
    resolver = sys.modules.get("limits.resolver")        # not imported: no user code was loaded
    return None if resolver is None else resolver.blame(exc)


def _classify(exc, argv=None):
    """(exit status, one-line message) for an exception escaping a command."""
    if isinstance(exc, _UsageError):
        return EXIT_USAGE, str(exc)
    blamed = _user_code(exc)
    if blamed is not None:
        return EXIT_USAGE, blamed
    if isinstance(exc, ValueError):
        return EXIT_USAGE, str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        if exc.filename is not None:
            return EXIT_USAGE, _os_error_message(exc)
        return EXIT_USAGE, str(exc) or type(exc).__name__
    if isinstance(exc, MemoryError):
        big = _largest_size_option(argv)
        return EXIT_USAGE, ("not enough memory for the requested sizes"
                            + (f" (the largest given: {big})" if big else "") + "; reduce them")
    return EXIT_INTERNAL, None


def _exit_quietly_on_interrupt():
    """From now on (shutdown of a finished program), Ctrl-C ends the process silently with 130."""
    import os
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_INTERRUPTED))


def _note_interrupts():
    """Ctrl-C raises KeyboardInterrupt as usual and is remembered: a C extension interrupted while it
    is imported (numpy turns an interrupted ``import datetime`` into an ImportError) still ends as an
    interruption, not as an internal error. A KeyboardInterrupt raised where Python ignores exceptions
    (a weakref callback such as the import system's module-lock one, a ``__del__``) is not printed as
    "Exception ignored …": it is raised again in the main thread 20 ms later, once that callback has
    returned (``_thread.interrupt_main`` from a timer thread), and, should that be lost too, at the next progress step or when the
    command returns (:mod:`limits.interrupts`)."""
    import signal
    import threading

    from .. import interrupts

    def handler(signum, frame):
        interrupts.note(signum)
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, handler)
    default_hook = sys.unraisablehook

    def unraisable(info):
        if info.exc_type is not None and issubclass(info.exc_type, KeyboardInterrupt):
            import _thread

            # our handler again, 20 ms later from another thread: by then the main thread has left the
            # callback and the exception propagates (were it swallowed again, this repeats). A bare thread:
            # threading.Timer.start() waits for the thread to start, and on a loaded machine the interrupt
            # it sends could land in that wait, inside this hook (printed as "Exception ignored").
            try:
                _thread.start_new_thread(_interrupt_main_later, (0.02,))
            except KeyboardInterrupt:   # a Ctrl-C landing here is recorded; the progress steps raise it
                pass
            return
        default_hook(info)

    sys.unraisablehook = unraisable


def _interrupt_main_later(delay: float) -> None:
    import _thread
    import time

    time.sleep(delay)
    _thread.interrupt_main()


def _shadowing_folder():
    """The folder imported as ``limits`` instead of this package (``python -m limits`` or ``import limits`` run
    where a folder named ``limits`` lies in the current directory), or None."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    pkg = sys.modules.get("limits")
    init = getattr(pkg, "__file__", None)
    if pkg is None or (init and os.path.realpath(init) == os.path.join(here, "__init__.py")):
        return None
    paths = list(getattr(pkg, "__path__", None) or [])
    return paths[0] if paths else os.path.dirname(init or ".")


def _elided(msg: str, argv=None) -> str:
    """A user-error message that echoes no long user text whole: a command-line value of more than 160
    characters, and any single word that long, keep their start and say how long they were."""
    from ..errors import elide

    msg = str(msg)
    tokens = [str(t) for t in (sys.argv[1:] if argv is None else argv)]
    for t in sorted({v.strip() for t in tokens for v in (t, t.partition("=")[2]) if len(v.strip()) > 160},
                    key=len, reverse=True):
        msg = msg.replace(t, elide(t, 120))
    return "\n".join(" ".join(w if len(w) <= 160 else elide(w, 120) for w in line.split(" "))
                     for line in msg.split("\n"))


def main(argv=None) -> int:
    """Run ``limits ARGV`` inside the error boundary; returns the exit status (see the module
    docstring). ``argv=None`` means the real command line (then Ctrl-C during interpreter
    shutdown is silent too); a list runs in-process (tests)."""
    shadow = _shadowing_folder()
    if shadow is not None:
        print(f"limits: error: the folder {shadow} is imported as the package limits (it has the same name and "
              "lies in the current directory); run limits from another directory or rename that folder",
              file=sys.stderr)
        return EXIT_USAGE
    from .. import interrupts

    program = argv is None
    try:
        try:
            if program:
                _note_interrupts()
            code = _dispatch(argv)
            if program:              # a Ctrl-C swallowed after the last progress step: still 130
                interrupts.raise_if_interrupted()
            return code
        except KeyboardInterrupt:
            raise
        except SystemExit as exc:    # argparse's --help/--version pass; sys.exit in the user's code is an error
            blamed = _user_code(exc)
            if blamed is None:
                raise
            print(f"limits: error: {_elided(blamed, argv)}", file=sys.stderr)
            return EXIT_USAGE
        except BrokenPipeError:      # e.g. `limits table | head`: stop quietly
            if program:
                import os

                try:                 # no second BrokenPipeError when Python flushes stdout at exit
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                except (OSError, ValueError):
                    pass
            return 0
        except Exception as exc:        # noqa: BLE001 — this is the boundary
            if interrupts.seen():        # the error is the interruption's doing: exit 130, as documented
                raise KeyboardInterrupt from None
            code, msg = _classify(exc, argv)
            if code == EXIT_INTERNAL:
                path = _write_crash_report(exc, argv)
                where = f"full traceback in {path}" if path else "could not save the traceback"
                from ..errors import elide

                msg = (f"internal error ({type(exc).__name__}: {elide(str(exc), 200) if str(exc) else ''}) "
                       f"— a bug in limits; {where}")
            print(f"limits: error: {_elided(msg, argv)}" if code != EXIT_INTERNAL else f"limits: {msg}", file=sys.stderr)
            return code
    except KeyboardInterrupt as exc:
        if program:
            _exit_quietly_on_interrupt()
        try:                      # a long computation may say what it kept ("… a rerun resumes"): one line
            said = str(exc).splitlines()[0] if str(exc) else ""
            print("limits: interrupted" + (f"; {said}" if said else ""), file=sys.stderr)
        except Exception:
            pass
        return EXIT_INTERRUPTED
    finally:
        if program:
            _exit_quietly_on_interrupt()


if __name__ == "__main__":
    sys.exit(main())
