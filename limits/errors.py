"""Exceptions shared by every layer of the package, and the one rule for echoing user text in a message
(foundation: imports nothing of limits)."""
from __future__ import annotations


class ModelError(ValueError):
    """A theory or simulator cannot treat this Model (raised with the reason and what to change)."""


class UserCodeError(ValueError):
    """The user's own code failed: a function or module named with ``--factory``, ``--data``, a sweep file's
    ``function``/``[inputs]`` or ``--allow`` raised, had a syntax error or called ``sys.exit``. The command line
    exits 2 with one line naming the function and the exception — it is the user's error, not a bug in limits
    (exit 70)."""


ECHO_LIMIT = 80


def elide(text, limit: int = ECHO_LIMIT) -> str:
    """``repr``-free short form of user text for a message: ``text`` itself when it has at most ``limit``
    characters and one line, else its start, ``…`` and its length (``'xxxx…' (300 characters)``), so a long
    value is never echoed whole while the start still identifies it."""
    s = str(text)
    first = s.splitlines()[0] if s else s
    if len(s) <= limit and first == s:
        return s
    return f"{first[:limit]}… ({len(s)} characters)"


def shown(value, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` for a message, elided like :func:`elide` when longer than ``limit``."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[:limit]}… ({len(str(value))} characters)"


__all__ = ["ModelError", "UserCodeError", "elide", "shown", "ECHO_LIMIT"]
