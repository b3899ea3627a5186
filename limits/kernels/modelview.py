"""What the kernel recursions take from a :class:`limits.Model`: its arguments (``Model.kernel_kwargs``),
after a refusal of depths whose recursion would run for longer than :data:`DEPTH_BUDGET_S` (measured per
activation on this machine, :func:`layer_seconds`), and the ``with_model`` view of ``nngp``/``response``/
``kernel_fluctuations`` (:func:`kernel_view`). The cost check lives on the kernel side because it runs the
kernel recursion; the Model itself knows nothing of kernels."""
from __future__ import annotations

import math

from ..errors import ModelError

DEPTH_FREE = 10_000          # depths up to this run without a cost estimate (seconds at most)
DEPTH_BUDGET_S = 600.0       # refuse a kernel recursion projected to run longer than this
MIN_LAYER_SECONDS = 1e-5     # floor of the measured cost: a layer is a dozen numpy calls on arrays
_LAYER_SECONDS: dict = {}    # activation name → measured seconds per layer (two inputs)


def layer_seconds(act) -> float:
    """Seconds per layer of the NNGP/NTK recursion of ``act`` on two inputs, measured once per process:
    the fastest of three runs of 36 layers minus the fastest of three of 4, over 32 (set-up and
    preemption excluded), at least :data:`MIN_LAYER_SECONDS`. The smallest per-layer cost, so depth × it
    is a lower bound on any run's time."""
    import time

    import numpy as np

    from .nngp import nngp

    key = getattr(act, "name", None) or id(act)
    if key not in _LAYER_SECONDS:
        X = np.array([[1.0, 0.3], [-0.4, 0.9]])
        nngp(X, depth=4, activation=act, on_explode="ignore", keep="last")       # warm-up (imports, caches)
        best = {4: math.inf, 36: math.inf}
        for _ in range(3):
            for L in best:
                t0 = time.perf_counter()
                nngp(X, depth=L, activation=act, on_explode="ignore", keep="last")
                best[L] = min(best[L], time.perf_counter() - t0)
        _LAYER_SECONDS[key] = max((best[36] - best[4]) / 32, MIN_LAYER_SECONDS)
    return _LAYER_SECONDS[key]


def check_depth_cost(m, what):
    """:class:`ModelError` naming depth when ``depth × seconds per layer`` (measured, :func:`layer_seconds`)
    exceeds :data:`DEPTH_BUDGET_S` — a refusal within a second instead of hours of silent work."""
    if m.depth <= DEPTH_FREE:
        return
    est = m.depth * layer_seconds(m.act)
    if est > DEPTH_BUDGET_S:
        from ..progress import format_seconds

        raise ModelError(f"{what}: depth = {m.depth} would take at least {format_seconds(est)} (the kernel recursion costs "
                         f"≈ {layer_seconds(m.act) * 1e3:.2g} ms per layer for {m.activation_name} on this "
                         f"machine, more for many inputs; the limit is {DEPTH_BUDGET_S:g} s); use a smaller depth")


def kernel_arguments(m, what="limits.kernels") -> dict:
    """``m.kernel_kwargs(what)`` after :func:`check_depth_cost`: the keyword arguments of the kernel
    recursions for this model, or a refusal naming the depth."""
    kw = m.kernel_kwargs(what)
    check_depth_cost(m, what)
    return kw


def kernel_view(what, ntk_arg="ntk"):
    """``with_model`` view for the kernel recursions: SP/NTK models only (MF/μP read-out kernels
    vanish at N → ∞); for SP the NTK is not computed unless asked for (it diverges ∝ N)."""

    def view(m, given: dict) -> dict:
        m.require(what, kernel_regime=True)
        kw = kernel_arguments(m, what)
        if ntk_arg is not None and m.param_name == "SP":
            if given.get(ntk_arg):
                raise ModelError(f"{what}: the NTK of a standard-parameterised (SP) network grows ∝ N "
                                 "with width at a fixed learning rate; use parameterisation='NTK'")
            kw[ntk_arg] = False
        return kw

    return view
