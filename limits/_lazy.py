"""Lazy package attributes (PEP 562): a package's ``__getattr__`` and ``__dir__`` from name → module tables, so that
importing the package imports none of the modules named (``import limits`` stays light; ``limits.torch`` and
``limits.torch.zoo`` import neither torch nor transformers until an attribute is used).

    __getattr__, __dir__ = lazy_attributes(__name__, globals(), exports={"check": "checking"},
                                           submodules=("kernels", "torch"))

``limits.check`` then imports ``limits.checking`` and returns its ``check``; ``limits.kernels`` imports the
subpackage. Each value is stored in the package's namespace on first use, so later lookups are plain attributes.
"""
from __future__ import annotations

import importlib
from typing import Callable, Iterable, Mapping


def lazy_attributes(package: str, namespace: dict, exports: Mapping[str, str] | None = None,
                    submodules: Iterable[str] | Mapping[str, str] = (),
                    wrap: Mapping[str, Callable] | None = None) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``; ``namespace`` its ``globals()``).

    ``exports``: {name: module}, the attribute ``name`` of the submodule ``package.module``;
    ``submodules``: names of submodules, or {name: dotted path} for one reachable under another name
    (``{"mehler": "gaussian.mehler"}``); ``wrap``: {name: f}, the attribute is ``f(value)`` (applied once).
    Any other name raises ``AttributeError("module 'package' has no attribute 'name'")``.
    """
    exports = dict(exports or {})
    modules = dict(submodules) if isinstance(submodules, Mapping) else {n: n for n in submodules}
    wrap = dict(wrap or {})
    both = set(exports) & set(modules)
    if both or set(wrap) - set(exports):
        raise ValueError(f"{package}: names both exported and submodules {sorted(both)}, or wrapped but not "
                         f"exported {sorted(set(wrap) - set(exports))}")

    def __getattr__(name):
        if name in exports:
            value = getattr(importlib.import_module(f".{exports[name]}", package), name)
            value = wrap[name](value) if name in wrap else value
        elif name in modules:
            value = importlib.import_module(f".{modules[name]}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(exports) | set(modules))

    return __getattr__, __dir__
