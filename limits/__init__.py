"""limits — infinite-width and infinite-depth limits of neural networks.

Subpackages load lazily (``limits.params`` imports sympy only when first used)::

    import limits
    limits.activation("erf")
    limits.gaussian.expect2("erf", "erf", 1.0, 0.5, 1.0)
"""
from __future__ import annotations

from ._lazy import lazy_attributes

__version__ = "0.1.0"

_SUBMODULES = (
    "activations", "gaussian", "mehler", "results", "checks", "progress", "style", "stats", "blas",
    "params", "kernels", "layers", "pc", "dmft", "nfd", "finite", "validate", "gallery", "model", "checking", "predict",
    "sweep", "torch",
)

# names re-exported at the top level: the one network description and the check of any prediction
_EXPORTS = {"Model": "model", "mlp": "model", "resnet": "model", "ModelError": "model",
            "check": "checking", "CheckResult": "checking", "serial": "layers"}

# modules that moved into a package, still reachable as attributes (``limits.mehler.series``)
_MOVED = {"mehler": "gaussian.mehler", "corrinterp": "gaussian.corrinterp"}

__all__ = ["activation", "__version__", *_SUBMODULES, *_EXPORTS]


def activation(name_or_callable, **kwargs):
    """Return the registered :class:`limits.activations.Activation` for ``name``."""
    from .activations import activation as _activation

    return _activation(name_or_callable, **kwargs)


__getattr__, __dir__ = lazy_attributes(__name__, globals(), exports=_EXPORTS,
                                       submodules={**{n: n for n in _SUBMODULES}, **_MOVED})
del lazy_attributes
