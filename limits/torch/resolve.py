"""``--factory module:function`` / ``--data module:function`` → the function, under the one rule of
:mod:`limits.resolver` for every name a user gives: a torch factory (or data function) declared by limits
(``limits.torch.demos:mlp``, …; no ``--allow``), or a plain function defined in a module the user allowed
(``--allow module``: the user's own code — importing it runs it).
"""
from __future__ import annotations

from ..resolver import resolve


def resolve_factory(spec: str, allow=(), option="--factory", kind=None):
    """The plain function named ``module:function``; ``kind``: ``"factory"`` (width → nn.Module) or ``"data"``
    (() → (X, Y)), by default ``"data"`` for ``option="--data"`` and ``"factory"`` otherwise."""
    kind = kind or ("data" if option == "--data" else "factory")
    return resolve(spec, kind=kind, allow=allow, option=option, syntax="colon")


__all__ = ["resolve_factory"]
