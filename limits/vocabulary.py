"""The vocabulary of parameterisations: layer classes, exponent symbols, conventions, algorithms,
optimisers, and the check that an option is one of them. Plain strings, no sympy: the symbolic
:mod:`limits.params` (the :class:`~limits.params.parameterisation.Parameterisation` object and the
constraint system) and the command line's option choices both read it, and it imports nothing."""
from __future__ import annotations

LAYERS = ("input", "hidden", "output")
SYMBOLS = ("a", "b", "c", "d")
CONVENTIONS = ("variance", "std")
ALGORITHMS = ("bp", "pc", "gnt", "tp", "dtp")
OPTIMIZERS = ("sgd", "adam")


def check_choice(value, choices, name):
    """``value`` if it is one of ``choices``, else ``ValueError`` naming the option ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value
