"""Discovery of plug-in modules (``limits/gallery/<component>.py``, ``limits/validate/<component>.py``)."""
from __future__ import annotations

import functools
import importlib
import pkgutil


@functools.lru_cache(maxsize=None)
def load_submodules(package: str) -> tuple:
    """Import every public submodule of ``package`` once; returns their names."""
    pkg = importlib.import_module(package)
    names = tuple(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names
