"""``limits.check``: any theory prediction against finite networks built from the same Model.

    c = limits.check(result, widths=(64, 128, 256, 512), inits=256, seed=0)

Modules: :mod:`.core` — the analysis (per-width z-scores, N → ∞ extrapolation, scale test, finite-size
rate; :class:`CheckResult`), the read-out kernel observables, and the dispatcher :func:`check`; one
module per further observable, each registering its check with :func:`limits.checking.core.register`
(the dispatcher discovers them; no module imports another's private names):
:mod:`.dmft` (trained networks' outputs), :mod:`.dmft_serial` (trained mean-field compositions: outputs, loss,
feature kernels), :mod:`.fluctuations` (kernel variance across inits),
:mod:`.nfd` (the first-order GIA gap), :mod:`.predict` (posterior / gradient-descent predictions),
:mod:`.response` (response functions by finite differences).
"""
from __future__ import annotations

from .core import DEFAULT_WIDTHS, Z_POWER, CheckResult, analyse, check, recorded, register

__all__ = ["DEFAULT_WIDTHS", "Z_POWER", "CheckResult", "analyse", "check", "recorded", "register"]
