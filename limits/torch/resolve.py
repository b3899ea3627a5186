"""``--factory module:function`` → the function, under the project's rule for user code named on a command
line: only a plain Python function *defined* in a module the user allowed (``--allow module``).

* ``module`` is a dotted name of public identifiers, equal to an allowed module (or inside an allowed
  package); ``function`` is one public identifier — no attribute chains (``mod:obj.attr``), no private names;
* the object is looked up in the module's own namespace (no module ``__getattr__``), must be a
  ``types.FunctionType`` (not a class, builtin, ``functools.partial``, lambda or callable instance) and its
  ``__module__`` must be that module (a function re-exported from elsewhere is refused).

Importing the module runs its top-level code: that is what ``--allow`` consents to.
"""
from __future__ import annotations

import importlib
import re
import types

_PART = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def resolve_factory(spec: str, allow=(), option="--factory"):
    """The plain function named ``module:function`` (module docstring)."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ValueError(f"{option} must be 'module:function', got {spec!r}")
    module, fn = spec.split(":")
    parts = module.split(".")
    if not module or not all(_PART.match(p) for p in parts):
        raise ValueError(f"{option} {spec!r}: the module must be a dotted name of public identifiers")
    if not _PART.match(fn):
        raise ValueError(f"{option} {spec!r}: the function must be one public identifier (no attribute chains)")
    allow = tuple(allow or ())
    for a in allow:
        if not isinstance(a, str) or not all(_PART.match(p) for p in a.split(".")):
            raise ValueError(f"--allow: {a!r} is not a dotted module name")
    if not any(module == a or module.startswith(a + ".") for a in allow):
        raise ValueError(f"{option} {spec!r}: module {module!r} is not allowed; pass --allow {module} "
                         "(importing it runs its code)")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ValueError(f"{option} {spec!r}: cannot import {module!r} ({exc})") from None
    obj = vars(mod).get(fn)
    if obj is None:
        raise ValueError(f"{option} {spec!r}: module {module!r} defines no {fn!r}")
    if not isinstance(obj, types.FunctionType) or obj.__name__ != fn:
        raise ValueError(f"{option} {spec!r}: {fn!r} is a {type(obj).__name__}, not a plain function defined "
                         f"with def in {module!r}")
    if obj.__module__ != module:
        raise ValueError(f"{option} {spec!r}: {fn!r} is defined in {obj.__module__!r}, not in {module!r} "
                         "(re-exported functions are refused)")
    return obj


__all__ = ["resolve_factory"]
