"""Kernels of compositions (``limits.serial``): ``kernel(serial, X1, X2)`` through the layers' own rules.

Inputs are (P, d) or (P, *spatial, C) (as neural-tangents). The state K⁰(x, y)[i, j] = ⟨x_i, y_j⟩/C,
Θ⁰ = 0 is handed from layer to layer (:mod:`limits.layers.state`); each layer maps it by its rule
(:mod:`limits.layers`). The representation — every pair of positions ("full", P1·P2·S² floats per
block) or equal positions only ("diagonal", P1·P2·S) — is decided by one backward pass over the
composition and reported per layer in ``diagnostics["structure"]`` with its memory
(``diagnostics["peak_bytes"]``). Cost: the sum of the layers' costs (see each layer's docstring).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array
from ..results import Result

GETS = ("nngp", "ntk")


@dataclass(frozen=True)
class SerialKernelResult(Result):
    """Read-out NNGP ``nngp`` and NTK ``ntk`` (P1×P2) of a composition, the composition (as a dict), the
    inputs, and diagnostics: ``structure`` (per layer: representation, spatial shape, bytes),
    ``input_representation``, ``peak_bytes``."""

    nngp: np.ndarray | None
    ntk: np.ndarray | None
    model: dict
    diagnostics: dict
    symmetric: bool = False
    X1: np.ndarray | None = None
    X2: np.ndarray | None = None

    @property
    def shape(self):
        a = self.nngp if self.nngp is not None else self.ntk
        return a.shape


def _inputs(X, name):
    X = finite_array(X, name)
    if X.ndim < 2 or X.shape[0] < 1 or X.shape[-1] < 1:
        raise ValueError(f"{name} must be (P, d) or (P, *spatial, C) with P, C >= 1, got shape {X.shape}")
    if X.ndim > 4:
        raise ValueError(f"{name}: at most two spatial axes (P, H, W, C), got shape {X.shape}")
    return X


def kernel(model, X1, X2=None, get=("nngp", "ntk")) -> SerialKernelResult:
    """NNGP / NTK read-out kernels of the composition ``model`` between X1 and X2 (module docstring).
    The composition must end without spatial axes (Flatten / GlobalAvgPool before the read-out)."""
    from ..layers import Serial, serial
    from ..layers.state import initial

    m = model if isinstance(model, Serial) else serial(model)
    if isinstance(get, str):
        get = (get,)
    get = tuple(get)
    if not get or any(g not in GETS for g in get):
        raise ValueError(f"get must be a non-empty subset of {GETS}, got {get!r}")
    X1 = _inputs(X1, "X1")
    if X2 is not None:
        X2 = _inputs(X2, "X2")
        if X2.shape[1:] != X1.shape[1:]:
            raise ValueError(f"X2 has shape {X2.shape[1:]} per input but X1 has {X1.shape[1:]}")
    full = m.needs_full(False)
    k0 = initial(X1, X2, full, "ntk" in get)
    trace = [{"layer": -1, "name": "input", "representation": k0.representation, "spatial": list(k0.spatial),
              "bytes": int(k0.nbytes)}]
    with np.errstate(over="ignore", invalid="ignore"):
        k = m.kernel(k0, False, "", trace)
    if k.spatial:
        raise ValueError(f"the composition ends with spatial axes {k.spatial}; end it with Flatten() or "
                         "GlobalAvgPool() (and a Dense read-out) for P1×P2 kernels")
    nngp = k.nngp if "nngp" in get else None
    ntk = k.ntk if "ntk" in get else None
    for name, a in (("NNGP", nngp), ("NTK", ntk)):
        if a is not None and not np.all(np.isfinite(a)):
            raise ValueError(f"the {name} of this composition overflowed (inf/NaN); use smaller variances")
    diag = {"structure": trace, "input_representation": k0.representation,
            "peak_bytes": int(max(t["bytes"] for t in trace)), "source": "limits.kernels.composed"}
    return SerialKernelResult(nngp, ntk, m.to_dict(), diag, X2 is None, X1, X2)
