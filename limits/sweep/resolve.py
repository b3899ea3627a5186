"""Name → function, for sweep files: a dotted path resolved by import + attribute lookup (never eval).

``"limits.kernels.critical_line"`` resolves anywhere inside ``limits``; any other module must be
allowed explicitly (``allow=["mypkg.theory"]`` allows ``mypkg.theory`` and its submodules).
Private names (a part starting with ``_``) are refused.
"""
from __future__ import annotations

import importlib
import re

_PART = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def _allowed(module: str, allow) -> bool:
    for root in ("limits", *allow):
        if module == root or module.startswith(root + "."):
            return True
    return False


def resolve(path: str, allow=()):
    """The callable named by ``path`` (``package.module.function`` or ``package.module.Class.method``)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"function must be a dotted name like 'limits.kernels.critical_line', got {path!r}")
    parts = path.split(".")
    if not all(_PART.match(p) for p in parts):
        raise ValueError(f"function {path!r}: every part must be a public Python identifier")
    allow = tuple(allow or ())
    for a in allow:
        if not isinstance(a, str) or not all(_PART.match(p) for p in a.split(".")):
            raise ValueError(f"allow: {a!r} is not a dotted module name")
    if not _allowed(path, allow):
        raise ValueError(f"function {path!r} is outside limits; allow its module explicitly "
                         f"(sweep file `allow = [\"{parts[0]}\"]` or --allow {parts[0]})")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if not _allowed(module, allow):
            raise ValueError(f"function {path!r}: module {module!r} is not allowed")
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module.startswith(exc.name):
                continue
            raise
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                raise ValueError(f"function {path!r}: {module!r} has no attribute {'.'.join(parts[cut:])!r}")
            obj = getattr(obj, attr)
        if not callable(obj):
            raise ValueError(f"function {path!r} is not callable")
        return obj
    raise ValueError(f"function {path!r}: no importable module in the name")


def name_of(fn) -> str:
    """``module.qualname`` of a callable (the function part of a point's key)."""
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{mod}.{qual}"
