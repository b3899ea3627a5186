"""Exceptions shared by every layer of the package (foundation: imports nothing of limits)."""
from __future__ import annotations


class ModelError(ValueError):
    """A theory or simulator cannot treat this Model (raised with the reason and what to change)."""


__all__ = ["ModelError"]
