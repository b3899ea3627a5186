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
    """For ``--save PATH`` (written as ``PATH.npz`` + ``PATH.json``): check both files can be written."""
    from .results import result_paths

    for p in result_paths(prefix):
        ensure_writable_file(p, argname)
    return Path(prefix)


def rescue_dir() -> Path:
    """A fresh private directory in the temp dir for results that could not be written where asked."""
    return Path(tempfile.mkdtemp(prefix="limits-rescued-"))


def numpy_arrays(path, name, first_only):
    """``[(key, array), …]`` of an .npy/.npz file, never unpickled; any problem → ``ValueError``
    naming ``name``."""
    import numpy as np

    p = Path(path)
    if not p.exists():
        raise ValueError(f"{name}: file {path} does not exist")
    if p.is_dir():
        raise ValueError(f"{name}: {path} is a directory, not an .npy/.npz file")
    if not p.is_file():                 # a FIFO would block, /dev/zero never ends
        raise ValueError(f"{name}: {path} is not a regular file (a FIFO, device or socket)")
    try:
        with open(p, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise ValueError(f"{name}: cannot read {path} ({_describe(exc)})") from None
    try:
        if magic.startswith(b"PK"):
            with open(p, "rb") as fh, np.load(fh, allow_pickle=False) as z:     # closed even if not a zip
                if not z.files:
                    raise ValueError(f"{name}: {path} holds no arrays")
                out = [(k, z[k]) for k in (z.files[:1] if first_only else z.files)]
        elif magic == b"\x93NUMPY":
            out = [("", np.load(p, allow_pickle=False))]
        else:
            raise ValueError(f"{name}: {path} is not an .npy/.npz file (save it with numpy.save or numpy.savez)")
    except ValueError as exc:
        msg = str(exc)
        if msg.startswith(f"{name}: "):
            raise
        if "pickle" in msg.lower():
            raise ValueError(f"{name}: {path} holds a pickled (object) array; pickles are never loaded — "
                             f"save a numeric array instead") from None
        raise ValueError(f"{name}: cannot read {path} ({msg})") from None
    except Exception as exc:  # corrupt zip/header, truncated data, ...
        raise ValueError(f"{name}: cannot read {path}: corrupt or truncated file "
                         f"({type(exc).__name__}: {exc})") from None
    for key, arr in out:
        if arr.dtype.kind not in "biuf":
            what = f"{path}[{key}]" if key else str(path)
            raise ValueError(f"{name}: {what} is a {arr.dtype} array; a real numeric array is needed")
    return out


def check_input_file(path, name):
    """Before a command runs: ``path`` exists, is a readable file and — for numpy data (.npy/.npz,
    recognised by content or suffix) — every array in it loads without pickle and is real numeric.
    ``ValueError`` naming ``name`` otherwise. Shapes and values are the command's business."""
    p = Path(path)
    numpyish = p.suffix.lower() in (".npy", ".npz")
    if p.is_file() and not numpyish:
        try:
            with open(p, "rb") as fh:
                numpyish = fh.read(6) in (b"\x93NUMPY",) or fh.seek(0) == 0 and fh.read(2) == b"PK"
        except OSError as exc:
            raise ValueError(f"{name}: cannot read {path} ({_describe(exc)})") from None
    if numpyish or not p.is_file():
        numpy_arrays(p, name, first_only=False)
    return p


def load_array(path, name, ndim=None, allow_empty=False):
    """A user array from ``.npy`` or ``.npz`` (its first array), never unpickled. A missing,
    unreadable, corrupt or pickled file, a non-numeric, empty (unless ``allow_empty``) or
    NaN/inf array, or a wrong number of dimensions raise ``ValueError`` naming ``name``."""
    from .checks import finite_array

    (_, arr), = numpy_arrays(path, name, first_only=True)
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name}: {path} holds an empty array (shape {arr.shape})")
    return finite_array(arr, name, ndim=ndim)
