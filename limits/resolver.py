"""One rule for every name a user gives: a sweep file's ``function`` and ``[inputs] function``
(``MODULE.FUNCTION``), ``--factory`` and ``--data`` (``module:function``) and every later hook.

* A name inside ``limits`` resolves only to a function *declared* for that use (:mod:`limits.registry`: sweep
  computations, torch factories, data functions), looked up in a module that declares some; nothing else of
  limits (file writers, the command line) can be reached.
* Any other name must lie in a module the user allowed (``--allow MODULE``, ``allow=[...]``) and be a plain
  function (``def``) defined there under that name: no builtin, class, instance, ``functools.partial``,
  lambda, re-exported function or attribute chain; every part a public identifier.
* ``--allow`` is itself an allowlist: only the user's own code — a module in the current folder or on
  ``sys.path`` that is not part of the standard library, of limits, or of an installed distribution limits
  depends on (transitively, every extra included; read from ``importlib.metadata``). Those libraries load
  pickles, evaluate text or start programs, and whatever library limits depends on next is refused too,
  without a list to update.
* A module of the current folder is found without ``PYTHONPATH``: just that module (or package) is loaded
  from its file; the folder is not put on ``sys.path``, so nothing else in it is imported.
* The user's code failing — on import (``SyntaxError``, an exception, ``sys.exit``) or when limits calls it —
  is the user's error: :class:`limits.errors.UserCodeError` / :func:`blame` give one line naming the function
  and the exception (the command line exits 2, not 70).
"""
from __future__ import annotations

import functools
import importlib
import os
import re
import sys
import types
from pathlib import Path

from .errors import UserCodeError, elide, shown
from .registry import KINDS, MODULES, declared_target

_PART = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_USER_ROOTS: dict = {}          # allowed top-level module -> "folder" (loaded from the current folder) or "path"
_NAMED: dict = {}               # id(code of a resolved user function) -> (option, spec)
_HINT = {"sweep": "`limits sweep functions` lists them", "factory": "limits.torch.demos:mlp, :transformer, …",
         "data": "limits.torch.demos:mlp_data, :transformer_data"}


# ------------------------------------------------------------------ which modules may be allowed
def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


@functools.lru_cache(maxsize=None)
def library_modules() -> dict:
    """``{top-level module: distribution}`` of limits and of every installed distribution it depends on,
    transitively and with every extra (``importlib.metadata``); these modules can never be allowed."""
    import importlib.metadata as md

    def requires(dist):
        try:
            reqs = md.requires(dist) or []
        except md.PackageNotFoundError:
            return None
        return [m.group(0) for r in reqs if (m := re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r))]

    roots = requires("limits")
    if roots is None:           # limits run from a source tree without metadata: its core requirements
        roots = ["numpy", "scipy", "sympy", "mpmath", "matplotlib", "tqdm", "joblib", "xarray", "tomli"]
    seen, todo = {"limits"}, [_norm(r) for r in roots]
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        todo += [_norm(r) for r in requires(d) or []]
    out = {top: d for top, dists in md.packages_distributions().items() for d in dists if _norm(d) in seen}
    out["limits"] = "limits"
    return out


def _stdlib_dirs() -> tuple:
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple({str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib") if k in paths})


def _refusal(name: str) -> str | None:
    """Why module ``name`` cannot be allowed (a clause: "'os' is part of the standard library"), or None."""
    top = name.split(".")[0]
    if top == "limits":
        return ("limits itself cannot be allowed (its sweep computations, `limits sweep functions`, and demo "
                "networks, limits.torch.demos:mlp, …, are declared and need no --allow)")
    if top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names or top == "__future__":
        return f"{top!r} is part of the standard library"
    if _find_spec(top) is None:         # importable from nowhere on sys.path: no installed library (fast path)
        return None
    dist = library_modules().get(top)
    if dist is not None:
        return f"{top!r} belongs to {dist}, a library limits runs on"
    return None


def _find_spec(top: str):
    """``importlib.util.find_spec`` of a top-level name (runs no module code), None when it cannot be found."""
    import importlib.util

    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError, OSError):
        return None


def check_allow(allow, option: str = "--allow") -> tuple:
    """The modules a caller allowed (``--allow``, ``allow=[...]``), each checked: a dotted name of public
    identifiers naming the user's own code (module docstring)."""
    if allow is None:
        return ()
    if isinstance(allow, str):
        allow = [allow]
    out = []
    for a in allow:
        if not isinstance(a, str) or not all(_PART.match(p) for p in a.split(".")):
            raise ValueError(f"{option}: {shown(a) if isinstance(a, str) else type(a).__name__} is not a dotted "
                             "module name")
        why = _refusal(a)
        if why is not None:
            raise ValueError(f"{option} {elide(a)}: {why}" + ("" if why.startswith("limits") else
                             "; only your own code can be allowed (a module in the current folder or on sys.path "
                             "whose functions you name)"))
        out.append(a)
    return tuple(out)


# ------------------------------------------------------------------ loading an allowed module
def _in_folder(top: str):
    """``(path, is_package)`` of module ``top`` in the current folder, or None."""
    cwd = Path.cwd()
    try:
        if (cwd / top / "__init__.py").is_file():
            return cwd / top / "__init__.py", True
        if (cwd / f"{top}.py").is_file():
            return cwd / f"{top}.py", False
    except OSError:                         # a name too long for a file name: no such module here
        pass
    return None


def _load_from_folder(top, path, package):
    import importlib.util

    spec = importlib.util.spec_from_file_location(top, path, submodule_search_locations=[str(path.parent)]
                                                  if package else None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[top] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(top, None)
        raise
    return mod


def _import_user(module, root, what):
    """Import the allowed ``module`` (under the allowed ``root``): from the current folder when it is there,
    else from ``sys.path``. Its failures are :class:`UserCodeError` naming it."""
    top = module.split(".")[0]
    local = None
    if top not in sys.modules:
        local = _in_folder(top)
        if local is None:
            spec = _find_spec(top)
            if spec is None:
                raise ValueError(f"{what}: there is no module {shown(top)} in the current folder ({Path.cwd()}) "
                                 "or on sys.path")
            if spec.origin and str(Path(spec.origin).resolve()).startswith(_stdlib_dirs()):
                raise ValueError(f"{what}: {top!r} is part of the standard library; --allow is for your own code")
    try:
        if local is not None:
            _load_from_folder(top, *local)
            _USER_ROOTS[top] = "folder"
        _USER_ROOTS.setdefault(top, "path")
        _USER_ROOTS.setdefault(root, _USER_ROOTS[top])
        return importlib.import_module(module)
    except KeyboardInterrupt:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise ValueError(f"{what}: there is no module {shown(exc.name)} (give the module that defines the "
                             "function)") from None
        raise UserCodeError(f"{what}: importing {elide(module)} failed: {_describe(exc)}") from None
    except BaseException as exc:  # noqa: BLE001 — the user's module failed while importing (SyntaxError, sys.exit too)
        raise UserCodeError(f"{what}: importing {elide(module)} failed: {_describe(exc)}") from None


def loaded_from_folder(module: str) -> bool:
    """Whether ``module`` was loaded from the current folder without being on ``sys.path`` (worker processes
    cannot import it by name: the sweep backends ship it by value)."""
    return _USER_ROOTS.get(str(module).split(".")[0]) == "folder"


# ------------------------------------------------------------------ resolving a name
def parse(spec, syntax: str = "dotted", option: str = "function"):
    """``(module, function)`` of ``spec``: ``MODULE.FUNCTION`` (``syntax="dotted"``) or ``module:function``
    (``"colon"``), every part a public identifier."""
    form = "MODULE.FUNCTION" if syntax == "dotted" else "module:function"
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"{option} must be a name like {form}, got {elide(repr(spec))}")
    if syntax == "colon":
        if spec.count(":") != 1:
            raise ValueError(f"{option} must be 'module:function', got {shown(spec)}")
        module, attr = spec.split(":")
        if not module or not all(_PART.match(p) for p in module.split(".")):
            raise ValueError(f"{option} {shown(spec)}: the module must be a dotted name of public identifiers")
        if not _PART.match(attr):
            raise ValueError(f"{option} {shown(spec)}: the function must be one public identifier "
                             "(no attribute chains, no private names)")
        return module, attr
    parts = spec.split(".")
    if len(parts) < 2 or not all(_PART.match(p) for p in parts):
        raise ValueError(f"{option} {shown(spec)}: give {form}, every part a public Python identifier")
    return ".".join(parts[:-1]), parts[-1]


def _under(module: str, root: str) -> bool:
    return module == root or module.startswith(root + ".")


def _declared(module, attr, kind, spec, what):
    """The declared ``kind`` function ``module.attr`` of limits (or a ValueError)."""
    if not any(_under(m, module) for m in MODULES[kind]):
        raise ValueError(f"{what} {shown(spec)} is not a declared {KINDS[kind]} of limits ({_HINT[kind]})")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"{what} {shown(spec)}: cannot import {elide(module)} ({elide(str(exc))})") from None
    obj = getattr(mod, attr, None)
    if obj is None:
        raise ValueError(f"{what} {shown(spec)}: module {module!r} has no attribute {shown(attr)} (the declared "
                         f"{KINDS[kind]}s: {_HINT[kind]})")
    fn = declared_target(obj, kind)
    if fn is None:
        raise ValueError(f"{what} {shown(spec)} is not a declared {KINDS[kind]} of limits ({_HINT[kind]})")
    return fn


def _plain(mod, module, attr, root, spec, what):
    """The plain function ``attr`` defined in the allowed module (or a ValueError)."""
    obj = vars(mod).get(attr)
    if obj is None:
        raise ValueError(f"{what} {shown(spec)}: module {shown(module)} defines no {shown(attr)}")
    if not isinstance(obj, types.FunctionType) or obj.__name__ == "<lambda>":
        kind = "module" if isinstance(obj, types.ModuleType) else "class" if isinstance(obj, type) else \
            "lambda" if isinstance(obj, types.FunctionType) else type(obj).__name__
        raise ValueError(f"{what} {shown(spec)} is a {kind}, not a plain function defined with def in {shown(module)}")
    home = obj.__module__ if isinstance(obj.__module__, str) else ""
    if not _under(home, root) or obj.__qualname__ != attr:
        raise ValueError(f"{what} {shown(spec)} is {elide(home + '.' + obj.__qualname__)}, not a function named "
                         f"{shown(attr)} defined in {shown(module)} (re-exported names are refused)")
    return obj


def resolve(spec, *, kind: str = "sweep", allow=(), option: str = "function", syntax: str = "dotted"):
    """The function a user named with ``spec`` for a use of ``kind`` (``"sweep"``, ``"factory"``, ``"data"``),
    under the rule of the module docstring; ``allow``: the modules the user allowed; ``option`` names the
    option or key in every message. Nothing the name points to is called."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    module, attr = parse(spec, syntax, option)
    roots = check_allow(allow)
    root = next((r for r in roots if _under(module, r)), None)
    if root is None:
        if module.split(".")[0] == "limits":
            return _declared(module, attr, kind, spec, option)
        why = _refusal(module)
        if why is not None:
            raise ValueError(f"{option} {shown(spec)} is outside limits, and {why}: it cannot be allowed")
        raise ValueError(f"{option} {shown(spec)} is outside limits and not allowed: if you trust module "
                         f"{shown(module)}, allow it explicitly (--allow {elide(module)}, or "
                         f"allow=[{shown(module)}] in Python; importing it runs its code)")
    fn = _plain(_import_user(module, root, f"{option} {shown(spec)}"), module, attr, root, spec, option)
    _NAMED[id(fn.__code__)] = (option, spec, fn)
    return fn


def name_of(fn) -> str:
    """``module.qualname`` of a callable (the function part of a sweep point's key)."""
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{mod}.{qual}"


# ------------------------------------------------------------------ the user's code failing
def _describe(exc) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({elide(repr(exc.code), 40)})"
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({Path(exc.filename or '?').name}, line {exc.lineno})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {elide(text.splitlines()[0], 200)}" if text else type(exc).__name__


def _user_places():
    """(files, folders) of the allowed modules imported so far."""
    files, dirs = set(), set()
    for name, mod in list(sys.modules.items()):
        if not any(_under(name, r) for r in _USER_ROOTS):
            continue
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        f = os.path.realpath(f)
        files.add(f)
        if os.path.basename(f) == "__init__.py":
            dirs.add(os.path.dirname(f) + os.sep)
    return files, tuple(dirs)


def _limits_dir() -> str:
    return os.path.dirname(os.path.realpath(__file__)) + os.sep


def _user_frames(exc):
    """(all frames, the user's frames) of ``exc``'s traceback, outermost first."""
    import traceback

    if exc is None or exc.__traceback__ is None:
        return [], []
    files, dirs = _user_places()
    frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
    mine = [f for f in frames if os.path.realpath(f.f_code.co_filename) in files
            or os.path.realpath(f.f_code.co_filename).startswith(dirs)]
    return frames, mine


def _where(frame) -> str:
    code = frame.f_code
    return f"{Path(code.co_filename).name}:{frame.f_lineno}, in {getattr(code, 'co_qualname', code.co_name)}"


def _module_of(frame) -> str:
    fname = os.path.realpath(frame.f_code.co_filename)
    return next((name for name, mod in list(sys.modules.items())
                 if getattr(mod, "__file__", None) and os.path.realpath(mod.__file__) == fname), "your module")


def blame(exc) -> str | None:
    """One line when ``exc`` was raised in (or through) the code of an allowed module — the user's error —
    naming the function limits called, where it failed and the exception; None otherwise (also when the
    exception was raised inside limits below the user's code: limits' own error)."""
    if not _USER_ROOTS or isinstance(exc, (KeyboardInterrupt, UserCodeError)):
        return None
    for e in (exc, exc.__cause__, exc.__context__):
        frames, mine = _user_frames(e)
        if not mine:
            continue
        if os.path.realpath(frames[-1].f_code.co_filename).startswith(_limits_dir()) and \
                not isinstance(exc, SystemExit):
            return None
        called = next((_NAMED[id(f.f_code)] for f in mine if id(f.f_code) in _NAMED), None)
        who = f"{called[0]} {elide(called[1])}" if called else f"the code of {elide(_module_of(mine[-1]))}"
        return f"{who} failed ({_where(mine[-1])}): {_describe(exc)}"
    return None


def call(fn, *args, what: str, **kwargs):
    """``fn(*args, **kwargs)``; when ``fn`` is the user's code (not a function of limits), anything it raises
    but Ctrl-C — an exception, ``sys.exit`` — becomes one :class:`UserCodeError` naming ``what``."""
    if str(getattr(fn, "__module__", "")).split(".")[0] == "limits":
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 — the user's function failed (sys.exit included)
        _, mine = _user_frames(exc)
        where = f" ({_where(mine[-1])})" if mine else ""
        raise UserCodeError(f"{what} failed{where}: {_describe(exc)}") from None


__all__ = ["resolve", "check_allow", "parse", "blame", "call", "name_of", "library_modules", "loaded_from_folder"]
