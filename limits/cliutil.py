"""Helpers shared by the command lines (``limits/cli.py`` and ``limits/<component>/cli.py``):
printing (:func:`emit`), reading user arrays (:func:`load_array`) and checking output paths
before any work is done (:func:`ensure_writable_dir`, :func:`ensure_writable_file`)."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path


def _strict(value):
    """JSON-safe copy: NaN/±inf → None (strict JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return value


def emit(obj, args, text):
    """Print ``obj`` as strict JSON (NaN/inf → null) when ``--json`` was given, else ``text``."""
    from .results import to_jsonable

    if getattr(args, "json", False):
        print(json.dumps(_strict(to_jsonable(obj)), indent=1, allow_nan=False))
    else:
        print(text)


def _describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def ensure_writable_dir(path, argname: str) -> Path:
    """Check that files can be created in directory ``path`` (created later if missing) — before
    any computation, so a long run never ends in a write error. Raises ``ValueError`` naming
    ``argname``. Probes by creating and removing a temporary file (``os.access`` is wrong for
    root, ACLs and read-only file systems)."""
    path = Path(path)
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is not a directory" if probe == path else f"cannot be created ({probe} is a file)"
        raise ValueError(f"{argname}: {path} {what}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".limits-write-check.", dir=probe)
    except OSError as exc:
        raise ValueError(f"{argname}: cannot write to {path} ({_describe(exc)})") from None
    os.close(fd)
    os.unlink(tmp)
    return path


def ensure_writable_file(path, argname: str) -> Path:
    """Check that file ``path`` can be written (its directory is writable, it is not a directory)."""
    path = Path(path)
    if str(path) in ("", "."):
        raise ValueError(f"{argname}: empty file name")
    if path.is_dir():
        raise ValueError(f"{argname}: {path} is a directory, not a file name")
    ensure_writable_dir(path.parent, argname)
    return path


def ensure_writable_result(prefix, argname: str) -> Path:
    """For ``--save PATH`` (written as ``PATH.npz`` + ``PATH.json``): check both files can be written, and that
    whatever is there already is a saved limits result (a ``.json`` naming its type beside its ``.npz``) — never
    another kind of file (someone's data, notes, an array file)."""
    from .results import read_payload, result_paths

    paths = result_paths(prefix)
    for p in paths:
        ensure_writable_file(p, argname)
    if any(os.path.lexists(p) for p in paths):
        try:
            payload = read_payload(prefix, argname)
            ok = isinstance(payload, dict) and isinstance(payload.get("type"), str) and "fields" in payload
        except ValueError:
            ok = False
        if not ok:
            have = [str(p) for p in paths if os.path.lexists(p)]
            verb = "exists and is" if len(have) == 1 else "exist and are"
            raise ValueError(f"{argname}: {' and '.join(have)} {verb} not a saved limits result; {argname} never "
                             "overwrites another kind of file — choose another path or remove it")
    return Path(prefix)


_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text, option):
    """``'8GiB'``, ``'500MB'``, ``'1e9'`` → bytes (float); None → None. ``ValueError`` naming ``option`` otherwise."""
    import re

    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS or not 0 < float(m.group(1)) * _UNITS[m.group(2).lower()] < 1e30:
        raise ValueError(f"{option} must be a positive size such as 8GiB, 500MB or 2e9 (bytes), got {str(text)[:40]!r}")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def add_variance_options(parser):
    """The layer variances of a network's command: ``--sigma-w2``, ``--sigma-b2`` (the hidden layers, W ~ N(0, σ_w²/n),
    b ~ N(0, σ_b²)) and ``--sigma-w2-in``/``--sigma-b2-in``, ``--sigma-w2-out``/``--sigma-b2-out`` for the read-in and
    read-out layers (None: the hidden value)."""
    parser.add_argument("--sigma-w2", type=float, default=1.0,
                        help="weight variance σ_w² of the hidden layers (default: 1)")
    parser.add_argument("--sigma-b2", type=float, default=0.0,
                        help="bias variance σ_b² of the hidden layers (default: 0)")
    for end, where in (("in", "read-in"), ("out", "read-out")):
        parser.add_argument(f"--sigma-w2-{end}", type=float, default=None,
                            help=f"weight variance of the {where} layer (default: --sigma-w2)")
        parser.add_argument(f"--sigma-b2-{end}", type=float, default=None,
                            help=f"bias variance of the {where} layer (default: --sigma-b2)")


def rescue_dir() -> Path:
    """A fresh private directory in the temp dir for results that could not be written where asked."""
    return Path(tempfile.mkdtemp(prefix="limits-rescued-"))


def numpy_arrays(path, name, first_only, key=None):
    """``[(key, array), …]`` of an .npy/.npz file, never unpickled, sized from its headers before loading
    (:func:`limits.readfile.load_arrays`); any problem → ``ValueError`` naming ``name``."""
    from .readfile import load_arrays, named

    out = load_arrays(path, name, first_only=first_only, key=key)
    for key, arr in out:
        if arr.dtype.kind not in "biuf":
            what = f"{named(name, path)}[{key}]" if key else named(name, path)
            raise ValueError(f"{what} is a {arr.dtype} array; a real numeric array is needed")
    return out


def check_input_file(path, name):
    """Before a command runs: ``path`` is a readable regular file and — for numpy data (.npy/.npz,
    recognised by content or suffix) — every array in it loads without pickle and is real numeric.
    ``ValueError`` naming ``name`` otherwise. Shapes and values are the command's business."""
    from .readfile import opened

    p = Path(path)
    with opened(p, name) as (fh, _):
        head = fh.read(6)
    if p.suffix.lower() in (".npy", ".npz") or head == b"\x93NUMPY" or head.startswith(b"PK"):
        numpy_arrays(p, name, first_only=False)
    return p


MAX_TEXT_ARRAY_BYTES = 256 * 2**20      # .csv/.txt arrays larger than this: use .npy


def user_array(path, option, key=None):
    """The array in the user's file ``path``: ``.csv``/``.txt`` (by suffix; at most 256 MiB of text), else an
    ``.npy``, or an ``.npz``'s member ``key`` (its only member when it holds one) — sized from its headers before
    loading (:mod:`limits.readfile`). ``ValueError`` naming ``option`` for every problem."""
    import io

    import numpy as np

    from .readfile import named, read_bytes

    p = Path(path)
    if p.suffix.lower() in (".csv", ".txt"):
        data = read_bytes(p, option, MAX_TEXT_ARRAY_BYTES, hint="save the array with numpy.save and pass the .npy "
                                                                "(parsing text takes several times its size in memory)")
        try:
            return np.loadtxt(io.BytesIO(data), delimiter="," if p.suffix.lower() == ".csv" else None, ndmin=2)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{named(option, p)} is not a table of numbers ({str(exc).splitlines()[0][:200]})") \
                from None
    (_, arr), = numpy_arrays(p, option, first_only=key is None, key=key)
    return arr


def load_array(path, name, ndim=None, allow_empty=False):
    """A user array from ``.npy`` or ``.npz`` (its first array), never unpickled. A missing,
    unreadable, corrupt or pickled file, a non-numeric, empty (unless ``allow_empty``) or
    NaN/inf array, or a wrong number of dimensions raise ``ValueError`` naming ``name``."""
    from .checks import finite_array

    (_, arr), = numpy_arrays(path, name, first_only=True)
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name}: {path} holds an empty array (shape {arr.shape})")
    return finite_array(arr, name, ndim=ndim)
