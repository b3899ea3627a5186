"""Result objects: small frozen dataclasses that save to ``.npz`` + ``.json`` and load back identically.

Arrays go into the ``.npz`` (loaded with ``allow_pickle=False``); everything else (numbers,
strings, bools, None, lists, tuples, dicts with string keys) into the ``.json``. Both files are
written atomically (temporary file + ``os.replace``), the ``.json`` last, so an interrupted run
never leaves a readable-but-corrupt result.

Subclass with ``@dataclasses.dataclass(frozen=True)`` and register with :func:`register_result`
(done automatically by subclassing :class:`Result`) so :func:`load` can rebuild it by name.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

_REGISTRY: dict[str, type] = {}
FORMAT_VERSION = 1

# The modules that define Result types: a type named in a file (a saved result, a result nested in one) is
# resolved only through this list — its module imported if it is not yet — never by importing whatever module
# the file names (tests/test_results_registry.py keeps it equal to the Result subclasses in the source).
RESULT_MODULES = (
    "limits.checking.core", "limits.checking.finite_width", "limits.dmft.result", "limits.finite.coordcheck",
    "limits.finite.empirical", "limits.finite.gia", "limits.finite.residual_response", "limits.finite.training",
    "limits.kernels.composed", "limits.kernels.cross", "limits.kernels.finite_width",
    "limits.kernels.finite_width_posterior", "limits.kernels.fluctuations", "limits.kernels.nngp",
    "limits.kernels.optimal", "limits.kernels.response", "limits.kernels.signal", "limits.nfd.covariance_sde",
    "limits.nfd.depth_width", "limits.nfd.gia", "limits.nfd.linear_noise",
    "limits.nfd.kernel_ode", "limits.nfd.sde", "limits.nfd.training", "limits.params.layer_table",
    "limits.pc.equilibrium", "limits.pc.gradients", "limits.pc.inference", "limits.pc.spectra", "limits.predict",
    "limits.torch.coordcheck", "limits.torch.depth_result", "limits.torch.transfer_result", "limits.validate",
)


def result_class(name, where="result file") -> type:
    """The registered Result type ``name`` (``module.QualName``) read from a file: its module is imported only
    when it is one of :data:`RESULT_MODULES`; anything else is refused (ValueError naming ``where``)."""
    if not isinstance(name, str):
        raise ValueError(f"{where} is not a saved limits result (no 'type')")
    module = name.rsplit(".", 1)[0]
    if name not in _REGISTRY and module in RESULT_MODULES:
        import importlib

        try:
            importlib.import_module(module)
        except ImportError as exc:      # an optional extra (torch) that is not installed
            raise ValueError(f"{where}: result type {name!r} needs {exc.name or module}, which is not "
                             "installed") from None
    if name not in _REGISTRY:
        raise ValueError(f"{where}: unknown result type {name[:120]!r} (a type outside limits loads only once "
                         "the module defining it is imported)")
    return _REGISTRY[name]


def register_result(cls):
    _REGISTRY[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (``/proc/self/status``);
    elsewhere set-and-restore under a lock."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, then rename).

    The file gets the mode an ordinary ``open(path, "w")`` would give, ``0o666 & ~umask``
    (``tempfile.mkstemp`` alone would leave it at 0600). Readers never see a partial file. Any ``OSError``
    (a full disk, a file larger than the file system or ``ulimit -f`` allows) names ``path``."""
    path = Path(path)
    try:
        return _atomic_write(path, data)
    except OSError as exc:
        if exc.filename is not None and exc.filename != str(path) and not str(exc.filename).endswith(".tmp"):
            raise
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None


def _atomic_write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def replace_marked_block(path, begin: str, end: str, lines) -> Path:
    """Replace the text between the marker lines ``begin`` and ``end`` of the file ``path`` by ``lines`` (generated
    README tables), atomically; ``SystemExit`` naming the markers when the file lacks them."""
    text = Path(path).read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{path} has no {begin!r} … {end!r} block")
    head, rest = text.split(begin, 1)
    return atomic_write_text(path, head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


def encode_value(value, arrays: dict, key: str):
    """JSON-able form of a result field; arrays go into ``arrays`` under ``key`` and are referenced by name."""
    if getattr(value, "lazy_array", False):          # e.g. a checkpointed layer stack: saved materialised
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"field {key!r}: object arrays cannot be saved without pickle")
        arrays[key] = value
        return {"__array__": key}
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return {"__float__": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v, arrays, f"{key}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode_value(v, arrays, f"{key}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"field {key!r}: dict keys must be str, got {type(k).__name__}")
            out[k] = encode_value(v, arrays, f"{key}.{k}")
        return {"__dict__": out}
    if dataclasses.is_dataclass(value) and isinstance(value, Result):
        return {"__result__": type(value)._registry_name(), "fields": _encode_fields(value, arrays, key + ".")}
    raise TypeError(f"field {key!r}: cannot save value of type {type(value).__name__}")


def _encode_fields(obj, arrays, prefix=""):
    return {f.name: encode_value(getattr(obj, f.name), arrays, prefix + f.name) for f in dataclasses.fields(obj)}


def decode_value(value, arrays):
    """Inverse of :func:`encode_value`: the field with array references replaced by the arrays."""
    if isinstance(value, list):
        return [decode_value(v, arrays) for v in value]
    if isinstance(value, dict):
        if "__array__" in value:
            return arrays[value["__array__"]]
        if "__tuple__" in value:
            return tuple(decode_value(v, arrays) for v in value["__tuple__"])
        if "__float__" in value:
            return float(value["__float__"])
        if "__dict__" in value:
            return {k: decode_value(v, arrays) for k, v in value["__dict__"].items()}
        if "__result__" in value:
            cls = result_class(value["__result__"], "a nested result")
            return cls(**{k: decode_value(v, arrays) for k, v in value["fields"].items()})
    return value


def result_paths(path):
    """The ``.npz`` and ``.json`` paths of a result saved at ``path`` (with or without either suffix)."""
    path = Path(path)
    stem = path.with_suffix("") if path.suffix in (".npz", ".json") else path
    return stem.with_name(stem.name + ".npz"), stem.with_name(stem.name + ".json")


def save_result(obj, path) -> tuple[Path, Path]:
    """Save a :class:`Result` to ``path.npz`` + ``path.json`` atomically."""
    arrays: dict[str, np.ndarray] = {}
    payload = {
        "format": FORMAT_VERSION,
        "type": type(obj)._registry_name(),
        "fields": _encode_fields(obj, arrays),
    }
    npz_path, json_path = result_paths(path)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(npz_path, buf.getvalue())
    atomic_write_text(json_path, json.dumps(payload, indent=1, sort_keys=True))
    return npz_path, json_path


MAX_RESULT_JSON_BYTES = 64 << 20      # a result's .json: fields and diagnostics (arrays live in the .npz)


def read_npz(path, what="result file") -> dict:
    """All arrays of the ``.npz`` file ``path`` (never unpickled; sized from the zip directory and the ``.npy``
    headers before anything is allocated, :mod:`limits.readfile`). A file that is not an .npz archive, or one
    holding object arrays, raises ``ValueError`` naming the file — not numpy's advice to set ``allow_pickle=True``."""
    from .readfile import load_npz

    return load_npz(path, what)


def read_payload(path, what="result file"):
    """The parsed ``.json`` of a result saved at ``path`` (a regular file of at most 64 MiB, nested at most 100
    deep); ``path`` itself, when it exists and is not a regular file (a FIFO, a device, a folder), is refused as
    what it is — not reported as a missing result."""
    from .readfile import opened, read_json

    npz_path, json_path = result_paths(path)
    if os.path.lexists(path) and not os.path.isfile(path):
        with opened(path, what):
            pass
    with opened(npz_path, what):
        pass
    return read_json(json_path, what, MAX_RESULT_JSON_BYTES)


def load_result(path, what="result file"):
    """Load a result saved by :func:`save_result` (no pickle is ever loaded; every file read bounded)."""
    npz_path, json_path = result_paths(path)
    payload = read_payload(path, what)
    # the type first: a file naming anything but a listed Result type is refused before its arrays are read
    # (reading the zip imports a codec on first use: a refused file must import nothing)
    cls = result_class(payload.get("type") if isinstance(payload, dict) else None, str(json_path))
    arrays = read_npz(npz_path, what)
    name = f"{cls.__module__}.{cls.__qualname__}"
    try:
        return cls(**{k: decode_value(v, arrays) for k, v in payload["fields"].items()})
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{json_path} does not describe a {name} ({type(exc).__name__}: {exc})") from None


def results_equal(a, b) -> bool:
    """Exact structural equality (arrays compared bitwise, NaN == NaN; lazy array-likes as their arrays)."""
    if getattr(a, "lazy_array", False) or getattr(b, "lazy_array", False):
        a, b = np.asarray(a), np.asarray(b)
    if isinstance(a, dict) and isinstance(b, dict):   # a dict subclass (lazily filled diagnostics) loads as dict
        return a.keys() == b.keys() and all(results_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(results_equal(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a):
        return all(results_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    return a == b


class Result:
    """Mixin for frozen dataclass results: ``r.save(path)``, ``Cls.load(path)``, ``r.equals(other)``.

    Convention: include the inputs that produced the result and solver diagnostics
    (e.g. ``iterations``, ``residual``, ``converged``) as fields.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register_result(cls)
        if "__repr__" not in cls.__dict__:
            # set before @dataclass runs, which then keeps it: a summary, never a dump of the arrays
            cls.__repr__ = Result.__repr__

    def __repr__(self):
        """One line, :func:`summary_repr`: the numbers, flags and short strings first (settings and diagnostics
        such as ``converged``, ``iterations``, ``residual``), the scalar entries of a ``diagnostics`` dict,
        then every array as its shape — never array contents, at most :data:`REPR_LIMIT` characters
        (``str(result)`` may say more)."""
        return summary_repr(self)

    @classmethod
    def _registry_name(cls) -> str:
        return f"{cls.__module__}.{cls.__qualname__}"

    def save(self, path):
        return save_result(self, path)

    @classmethod
    def load(cls, path):
        obj = load_result(path)
        if not isinstance(obj, cls):
            raise ValueError(f"{path} holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    def equals(self, other) -> bool:
        return results_equal(self, other)


def model_label(d) -> str:
    """A short name of a model dict a result records: 'MLP (depth 3, relu)', 'Conv → relu → GlobalAvgPool →
    Dense' (a composition)."""
    d = d if isinstance(d, dict) else {}
    if "serial" in d:
        names = [x.get("name") if x.get("layer") == "Activation" else x.get("layer", "?") for x in d["serial"]]
        return " → ".join(str(n) for n in names)
    if "depth" in d:
        return f"{'ResNet' if d.get('residual') else 'MLP'} (depth {d['depth']}, {d.get('activation')})"
    return "a model" + (f" ({d['activation']})" if isinstance(d.get("activation"), str) else "")


def kernel_summary(r) -> str:
    """One paragraph with the key numbers of a kernel result ``r`` (``nngp``/``ntk``, ``symmetric``, ``model``):
    the shape, and per kernel its diagonal range and the range of its correlations K_ij/√(K_ii K_jj)
    (symmetric) or of its entries (cross)."""
    A = r.nngp if r.nngp is not None else r.ntk
    head = (f"{type(r).__name__}: read-out kernels of {model_label(r.model)}, "
            + (f"{A.shape[0]}×{A.shape[1]} (symmetric)" if r.symmetric else f"{A.shape[0]}×{A.shape[1]} (cross)"))
    parts = [head]
    for name, K in (("NNGP", r.nngp), ("NTK", r.ntk)):
        if K is None:
            continue
        if r.symmetric and K.shape[0] > 1:
            d = np.diag(K)
            c = K / np.sqrt(np.outer(d, d))
            off = c[~np.eye(K.shape[0], dtype=bool)]
            parts.append(f"{name}: diagonal {d.min():.4g}–{d.max():.4g}, correlations {off.min():.4f}–{off.max():.4f}")
        else:
            parts.append(f"{name}: entries {K.min():.4g}–{K.max():.4g}")
    return "; ".join(parts)


REPR_LIMIT = 400            # characters of a result's repr
_DIAGNOSTIC_FIELDS = ("diagnostics", "details", "info")


def _is_array(v) -> bool:
    if getattr(v, "lazy_array", False):
        return True
    return isinstance(v, np.ndarray) and not (v.ndim == 0 or v.size == 1 and v.dtype.kind in "biuf")


def _is_scalar(v) -> bool:
    if isinstance(v, (bool, int, float, np.generic)) or v is None:
        return True
    if isinstance(v, np.ndarray):
        return not _is_array(v)
    if isinstance(v, str):
        return len(v) <= 40
    return isinstance(v, (list, tuple)) and len(v) <= 4 and all(isinstance(x, (int, float, str, bool, np.generic))
                                                                for x in v)


def summary_repr(obj, limit=REPR_LIMIT) -> str:
    """``Name(a=1, converged=True, …; diagnostics: iterations=12, …; arrays: mean 500×10, cov 500×500; model
    {12 keys})`` of a result dataclass ``obj``: scalars, a diagnostics dict's scalar entries (those computed:
    a lazily filled dict stays unfilled), array shapes, the other fields shortened (:func:`short_value`); None
    fields left out; cut at ``limit`` characters with the count left out."""
    scalars, diag, arrays, other = [], [], [], []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        v = getattr(obj, f.name, None)
        if _is_array(v):
            shape = np.shape(v)
            arrays.append(f"{f.name} {'×'.join(map(str, shape)) or 'scalar'}")
        elif v is None:
            continue
        elif _is_scalar(v):
            scalars.append(f"{f.name}={short_value(v)}")
        elif f.name in _DIAGNOSTIC_FIELDS and isinstance(v, dict):
            entries = dict.items(v)            # the entries there now: a lazily filled dict is not filled by a repr
            items = [f"{k}={short_value(x)}" for k, x in entries if isinstance(k, str) and _is_scalar(x)]
            rest = dict.__len__(v) - len(items)
            diag.append(f"{f.name}: " + ", ".join(items) + (f" (+{rest} more)" if rest and items else
                                                            (f"{{{rest} keys}}" if not items else "")))
        else:
            other.append(f"{f.name} {short_value(v)}")
    groups = [", ".join(scalars), "; ".join(diag), ("arrays: " + ", ".join(arrays)) if arrays else "",
              ", ".join(other)]
    text = "; ".join(g for g in groups if g)
    if len(text) > limit:
        cut = text[:limit].rsplit(", ", 1)[0]
        text = f"{cut}, … (+{text[len(cut):].count(', ') + text[len(cut):].count('; ')} more)"
    return f"{type(obj).__name__}({text})"


def short_value(v) -> str:
    """A field value in a result's one-line summary: numbers to 4 significant digits, arrays as their shape
    (a scalar array as its value), dicts by size, long strings and sequences shortened."""
    if getattr(v, "lazy_array", False):
        v = np.asarray(v)
    if isinstance(v, np.ndarray):
        if v.ndim == 0 or v.size == 1 and v.dtype.kind in "biuf":
            return short_value(v.reshape(-1)[0].item())
        return f"array({'×'.join(map(str, v.shape))})"
    if isinstance(v, (bool, np.bool_)) or v is None:
        return repr(bool(v) if isinstance(v, np.bool_) else v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    if isinstance(v, str):
        return repr(v if len(v) <= 40 else v[:37] + "…")
    if isinstance(v, dict):
        return f"{{{len(v)} key{'s' if len(v) != 1 else ''}}}"
    if isinstance(v, (list, tuple)):
        if len(v) <= 4 and all(isinstance(x, (int, float, str, bool, np.generic)) for x in v):
            inner = ", ".join(short_value(x) for x in v)
            return f"({inner}{',' if len(v) == 1 else ''})" if isinstance(v, tuple) else f"[{inner}]"
        return f"{type(v).__name__}({len(v)})"
    if isinstance(v, Result):
        return type(v).__name__ + "(…)"
    return type(v).__name__


def to_jsonable(value: Any):
    """Convert numpy scalars/arrays inside ``value`` to plain JSON types (for ``--json`` output)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value
