"""Helpers shared by the component command lines (``limits/<component>/cli.py``)."""
from __future__ import annotations

import json

import numpy as np


def emit(obj, args, text):
    """Print ``obj`` as JSON when ``--json`` was given, else the human-readable ``text``."""
    from .results import to_jsonable

    if getattr(args, "json", False):
        print(json.dumps(to_jsonable(obj), indent=1))
    else:
        print(text)


def load_array(path, name, ndim=None):
    """A user array from ``.npy`` or ``.npz`` (its first array), never unpickled; NaN/inf or a
    wrong number of dimensions raise ``ValueError`` naming ``name``."""
    from .checks import finite_array

    if str(path).endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return finite_array(z[z.files[0]], name, ndim=ndim)
    return finite_array(np.load(path, allow_pickle=False), name, ndim=ndim)
