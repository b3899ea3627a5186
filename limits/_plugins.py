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


# the optional extras the core may hand work to, by the module that implements them (an allowlist)
OPTIONAL_EXTRAS = {"limits.torch.network": "torch"}


def optional_extra(module: str, extra: str):
    """The module of an optional extra (``Model.to_torch`` → ``limits.torch.network``), imported on first use
    so that the core never depends on it; ``ImportError`` naming the extra when it is not installed. Only the
    modules in :data:`OPTIONAL_EXTRAS` resolve."""
    if OPTIONAL_EXTRAS.get(module) != extra:
        raise ValueError(f"{module!r} is not an optional extra of limits (known: {sorted(OPTIONAL_EXTRAS)})")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} needs the optional extra {extra!r} (python -m pip install -e \".[{extra}]\"): "
                          f"{exc}") from exc
