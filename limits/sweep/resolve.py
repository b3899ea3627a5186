"""Name → function for sweeps: ``MODULE.FUNCTION`` under the one rule of :mod:`limits.resolver` — a sweep
computation declared by limits (``limits sweep functions`` lists them) or a plain function of a module the
caller allowed (``allow=[...]``, ``--allow``). Never eval, never an attribute chain."""
from __future__ import annotations

from ..resolver import check_allow, name_of
from ..resolver import resolve as _resolve


def resolve(path: str, allow=(), what: str = "function"):
    """The function named ``path`` = ``MODULE.FUNCTION``; ``what`` names the key or option in messages."""
    return _resolve(path, kind="sweep", allow=allow, option=what, syntax="dotted")


__all__ = ["resolve", "check_allow", "name_of"]
