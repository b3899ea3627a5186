"""Name → function, for sweep files: ``MODULE.FUNCTION`` resolved by one import and one attribute
lookup (never eval, never an attribute chain).

The rule (a sweep file is something people download; resolving a name must never reach a program):

* ``MODULE`` must lie under an allowed root — ``limits``, or a module the *caller* allowed
  (``allow=["mypkg.theory"]`` in Python, ``--allow mypkg.theory`` on the command line; the
  standard library and the libraries limits builds on — numpy, scipy, sympy, joblib, … — cannot be
  allowed: they load pickles or evaluate text). It is imported with :func:`importlib.import_module`, so
  ``limits.cliutil.os`` (a module reached through another module's attribute) is no module at all.
* ``FUNCTION`` is exactly one public attribute of that module, and it must be a plain Python
  function (:class:`types.FunctionType`: no builtin, class, module, method or other callable)
  whose ``__qualname__`` is that name and whose ``__module__`` lies under an allowed root, so a
  re-exported ``os``/``numpy``/``subprocess`` function is refused.
* Inside ``limits``, functions of the command-line and file-writing modules (``cli``, ``cliutil``,
  ``*_cli``, ``results``, ``sweep``, ``gallery``, ``validate``) are refused: a sweep point is a
  computation, not a file writer.
* Every part of the name is a public identifier (no ``_``/dunder parts).
"""
from __future__ import annotations

import importlib
import re
import sys
import types

_PART = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# limits modules whose functions write files, parse command lines or run sweeps
_IO_PARTS = frozenset({"cli", "cliutil", "results", "sweep", "gallery", "validate"})
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "__future__"}
# libraries limits runs on: they load pickles (numpy.load, joblib.load, pandas.read_pickle) or evaluate
# text (sympy.sympify) — never "your own code", so they cannot be allowed either
_LIBRARIES = frozenset({"numpy", "scipy", "sympy", "mpmath", "matplotlib", "joblib", "xarray", "pandas", "dask",
                        "distributed", "cloudpickle", "tqdm", "tomli", "IPython", "pytest", "hypothesis",
                        "setuptools", "pip", "pkg_resources", "numba", "torch", "jax", "tensorflow"})


def _under(module: str, roots) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


def _io_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "limits" and any(p in _IO_PARTS or p.endswith("_cli") for p in parts[1:])


def check_allow(allow) -> tuple:
    """The allowed module roots given by a caller, checked: dotted module names outside the
    standard library."""
    if allow is None:
        return ()
    if isinstance(allow, str):
        allow = [allow]
    out = []
    for a in allow:
        if not isinstance(a, str) or not all(_PART.match(p) for p in a.split(".")):
            raise ValueError(f"allow: {a!r} is not a dotted module name")
        if a.split(".")[0] in _STDLIB | _LIBRARIES:
            what = "a standard-library module" if a.split(".")[0] in _STDLIB else "a library limits builds on"
            raise ValueError(f"allow: {a!r} is {what}; sweep functions come from limits or from your own code")
        out.append(a)
    return tuple(out)


def resolve(path: str, allow=(), what: str = "function"):
    """The function named ``path`` = ``MODULE.FUNCTION`` (module docstring for the rule); ``what``
    names the option in error messages."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what} must be a dotted name like 'limits.kernels.critical_line', got {path!r}")
    parts = path.split(".")
    if len(parts) < 2 or not all(_PART.match(p) for p in parts):
        raise ValueError(f"{what} {path!r}: give MODULE.FUNCTION, every part a public Python identifier")
    roots = ("limits", *check_allow(allow))
    module, attr = ".".join(parts[:-1]), parts[-1]
    if not _under(module, roots):
        raise ValueError(f"{what} {path!r} is outside limits; if you trust module {module!r}, allow it "
                         f"explicitly (--allow {module}, or allow=[{module!r}] in Python)")
    if _io_module(module):
        raise ValueError(f"{what} {path!r}: {module!r} is a command-line or file-writing module of limits; "
                         "a sweep function must be a computation")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ValueError(f"{what} {path!r}: there is no module {module!r} (give MODULE.FUNCTION, the function "
                         "defined in that module)") from None
    except Exception as exc:  # noqa: BLE001 — an allowed user module that fails to import
        raise ValueError(f"{what} {path!r}: importing {module!r} failed: {type(exc).__name__}: {exc}") from None
    try:
        fn = getattr(mod, attr)
    except AttributeError:
        raise ValueError(f"{what} {path!r}: {module!r} has no attribute {attr!r}") from None
    if not isinstance(fn, types.FunctionType):
        kind = "module" if isinstance(fn, types.ModuleType) else "class" if isinstance(fn, type) else \
            type(fn).__name__
        raise ValueError(f"{what} {path!r} is a {kind}, not a Python function defined in {module!r}")
    home = getattr(fn, "__module__", None)
    if not isinstance(home, str) or not _under(home, roots) or _io_module(home):
        raise ValueError(f"{what} {path!r} is defined in {home!r}, not in limits or an allowed module "
                         "(re-exported names are refused)")
    if fn.__qualname__ != attr:
        raise ValueError(f"{what} {path!r}: {module}.{attr} is {home}.{fn.__qualname__}, not a function "
                         f"named {attr!r} (re-exported names are refused)")
    return fn


def name_of(fn) -> str:
    """``module.qualname`` of a callable (the function part of a point's key)."""
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{mod}.{qual}"
