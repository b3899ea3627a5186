"""Every result type in the registry (limits.results.RESULT_MODULES) prints a short repr — one line of at most
REPR_LIMIT characters with its numbers and flags first, array shapes, never array contents — also when its
arrays are large and its dicts long; a repr never fills a lazily computed diagnostics dict."""
import dataclasses
import importlib

import numpy as np
import pytest

from limits.results import REPR_LIMIT, RESULT_MODULES, Result, _REGISTRY, summary_repr


def _registered():
    for m in RESULT_MODULES:
        try:
            importlib.import_module(m)
        except ImportError:                      # an optional extra that is not installed (torch)
            continue
    return {n: c for n, c in sorted(_REGISTRY.items()) if n.startswith("limits.")}


def _big(annotation):
    """A large value of the annotated type: a 300×400 array, a dict of 40 arrays, a 60-long tuple, …"""
    a = str(annotation)
    if "ndarray" in a:
        return np.arange(300 * 400, dtype=float).reshape(300, 400)
    for prefix, value in (("float", 0.123456789), ("int", 7), ("bool", True), ("str", "a setting"),
                          ("dict", {f"entry{i}": np.ones(1000) for i in range(40)}), ("tuple", tuple(range(60))),
                          ("list", [np.ones(50)] * 60)):
        if a.startswith(prefix):
            return value
    return None


CLASSES = _registered()
GENERIC = {n: c for n, c in CLASSES.items() if "__repr__" not in c.__dict__ or c.__repr__ is Result.__repr__}


def test_the_registry_is_walked():
    assert len(GENERIC) >= 40 and "limits.predict.GDResult" in GENERIC and "limits.dmft.result.DMFTResult" in GENERIC


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_a_large_result_prints_one_short_line(name):
    cls = GENERIC[name]
    obj = object.__new__(cls)                    # fields set directly: no __post_init__ checks on fake values
    fields = dataclasses.fields(cls)
    for f in fields:
        object.__setattr__(obj, f.name, _big(f.type))
    text = repr(obj)
    assert "\n" not in text and len(text) <= REPR_LIMIT + len(cls.__name__) + 20, text
    assert "array(" not in text and "119999" not in text and "[1. 1." not in text, text
    arrays = [f.name for f in fields if "ndarray" in str(f.type)]
    if arrays and len(text) < REPR_LIMIT:
        assert f"{arrays[0]} 300×400" in text, text
    scalars = [f.name for f in fields if str(f.type).split(" ")[0] in ("float", "int", "bool", "str")]
    if scalars:                                  # numbers, flags and settings come first: never cut away
        assert text.startswith(f"{cls.__name__}({scalars[0]}="), text


def test_summary_of_a_real_result_and_the_cut():
    import limits

    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3))
    g = limits.predict.gradient_descent(limits.mlp(3, 2), X, np.sin(X[:, 0]), X[:4], t=[1.0, np.inf])
    assert repr(g).startswith("GDResult(learning_rate=1, reduction='sum', flow=True; arrays: t 2, mean 2×4×1, "
                              "cov 2×4×4")
    short = summary_repr(g, limit=60)
    assert short.endswith("more))") and len(short) < 100, short


def test_a_repr_does_not_compute_lazy_diagnostics(monkeypatch):
    import limits
    from limits.kernels import diagnostics

    monkeypatch.setattr(diagnostics, "MAX_EIG_P", 5)           # above it the spectra are computed on access
    r = limits.kernels.nngp(np.random.default_rng(1).standard_normal((12, 3)), depth=2)
    assert r.diagnostics._pending is not None
    text = repr(r)
    assert r.diagnostics._pending is not None and "min_eig_K_L" not in text and "exploded_at=-1" in text
    assert "min_eig_K_L" in r.diagnostics and "min_eig_K_L" not in text                  # filled on access
