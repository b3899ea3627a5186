"""Turn what a swept function returns into named numeric arrays (the dataset's variables).

* a :class:`limits.results.Result` or any dataclass → one entry per field;
* a dict → one entry per key (nested dicts and dataclasses joined with ``_``: ``diagnostics_iterations``);
* a number or bool → a 0-d array; a numeric array → itself; a list/tuple → one array if it is
  rectangular and numeric, else one entry per element (``errors_0``, ``errors_1``, …);
* a bare scalar/array return value is called ``value``.

Strings, ``None`` and other non-numeric values are skipped (their names are reported), complex
values are split into ``<name>_real`` and ``<name>_imag``.
"""
from __future__ import annotations

import dataclasses
import numbers
import re

import numpy as np

_BAD = re.compile(r"[^0-9A-Za-z_]")


def _clean(name: str) -> str:
    name = _BAD.sub("_", str(name))
    return name if name and not name[0].isdigit() else f"v_{name}"


def _put(out, skipped, name, value):
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (bool, np.bool_, numbers.Number, np.generic)):
        arr = np.asarray(value)
    elif hasattr(value, "__array__") and not dataclasses.is_dataclass(value) and not isinstance(value, dict):
        arr = np.asarray(value)        # array-likes: a kernel result's lazily unpacked LayerStack, …
    else:
        _walk(out, skipped, name, value)
        return
    if arr.dtype.kind == "c":
        out[f"{name}_real"] = np.array(arr.real, order="C")
        out[f"{name}_imag"] = np.array(arr.imag, order="C")
    elif arr.dtype.kind in "biuf":
        if name in out:
            raise ValueError(f"output name {name!r} occurs twice after flattening")
        out[name] = np.array(arr, order="C")
    else:
        skipped.append(name)


def _walk(out, skipped, prefix, value):
    join = (lambda k: f"{prefix}_{_BAD.sub('_', str(k))}") if prefix else _clean
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _put(out, skipped, join(f.name), getattr(value, f.name))
    elif isinstance(value, dict):
        for k, v in value.items():
            _put(out, skipped, join(k), v)
    elif isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except ValueError:                      # ragged
            arr = None
        if arr is not None and arr.dtype.kind in "biufc" and arr.size:
            _put(out, skipped, prefix or "value", arr)
        else:
            for i, v in enumerate(value):
                _put(out, skipped, join(str(i)), v)
    elif value is None or isinstance(value, (str, bytes)):
        if prefix:
            skipped.append(prefix)
    else:
        skipped.append(prefix or type(value).__name__)


def flatten(value) -> tuple[dict, list]:
    """``(arrays, skipped)``: named numeric arrays from a function's return value, and the names of
    the non-numeric parts left out."""
    out: dict[str, np.ndarray] = {}
    skipped: list[str] = []
    if isinstance(value, (np.ndarray, bool, np.bool_, numbers.Number, np.generic)):
        _put(out, skipped, "value", value)
    else:
        _walk(out, skipped, "", value)
    if not out:
        raise ValueError(f"the function returned no numeric output (got {type(value).__name__}"
                         + (f"; skipped {skipped}" if skipped else "") + ")")
    return out, skipped
