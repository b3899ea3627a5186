"""Gaussian expectation engine: E[f(u)] and E[f(u) g(v)] for Gaussian (u, v), and Gram matrices.

    limits.gaussian.expect2("erf", "erf", 1.0, 0.5, 1.0)     # E[erf(u) erf(v)]

Modules, lowest first (each imports only those before it, plus :mod:`limits.activations`, the registry
of φ, φ', φ'' and their closed-form kernels):

* :mod:`.mehler` — Mehler (Hermite) series E[f g] = Σ a_k b_k c^k with certified truncation bounds;
* :mod:`.engine` — :func:`expect`, :func:`expect2` (closed forms, tensor trapezoid, natural-variable
  rules at large variance, Mehler where it pays), :func:`kernel`, :func:`dkernel`, Price derivatives;
* :mod:`.corrinterp` — Chebyshev interpolants of E[f g] in the correlation, node values from the engine;
* :mod:`.grams` — P×P Gram matrices :func:`gram`, :func:`dgram`, :func:`gram_pairs`: the route per matrix.
"""
from __future__ import annotations

from ..activations import Activation, activation  # noqa: F401 (limits.gaussian.activation, as before)
from .engine import (ZMAX, AccuracyWarning, dkernel, dq_expect, dq_expect_square, expect, expect2, kernel,
                     wide_pair_batch)
from .grams import dgram, gram, gram_pairs, interp_pays

__all__ = ["AccuracyWarning", "ZMAX", "expect", "expect2", "kernel", "dkernel",
           "dq_expect", "dq_expect_square", "wide_pair_batch", "gram", "dgram", "gram_pairs", "interp_pays"]
