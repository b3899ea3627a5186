"""On-disk store of finished sweep points (what makes a sweep resumable).

Layout under the store directory::

    points/ab/<key>.npz   numeric outputs of the point (np.savez, loaded with allow_pickle=False)
    points/ab/<key>.json  {"key", "function", "version", "params", "seed", "status": "ok"|"error",
                           "error", "seconds", "outputs": [names], "skipped": [names]}
    sweep.json            the last sweep run against this store (function, grid, dataset path, status)
    sweep.lock            held (``fcntl.flock``) by the one sweep process running on the store (opened
                          read-only, never written: :mod:`limits.stores`)

``key = sha256(canonical JSON of (function name, package version, parameters, seed))``; arrays
among the parameters enter by dtype, shape and a sha256 of their bytes. Each file is written with
:func:`limits.results.atomic_write_bytes` (temporary file + rename), the ``.npz`` first and the
``.json`` last: a point counts as stored only once its ``.json`` exists and names every array the
``.npz`` holds, so a kill at any moment leaves complete points or none — never a partial one.
Nothing is ever unpickled, and only regular files are opened: a point whose ``.json`` is not a
point record (``null``, a list, ``"outputs": null``), is not a regular file (a FIFO, a link to
``/dev/zero``) or is larger than ``MAX_JSON_BYTES`` is damaged, hence missing, and recomputed.

A store is made only in a new or empty directory or an existing sweep store (one with a ``sweep.json``); a
complete store on a read-only file system is read without a lock (:mod:`limits.stores`).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

from ..results import atomic_write_bytes


def _canonical(value):
    if isinstance(value, np.ndarray) or (hasattr(value, "__array__") and not np.isscalar(value)):
        a = np.ascontiguousarray(np.asarray(value))
        if a.dtype == object:
            raise ValueError("object arrays cannot be sweep parameters")
        return {"__array__": [a.dtype.str, list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"sweep parameter of type {type(value).__name__} cannot be hashed "
                     "(use numbers, strings, bools, lists, dicts or numeric arrays)")


def point_key(function: str, version: str, params: dict, seed) -> str:
    """Hash of (function name, package version, parameters, seed) naming a point's files."""
    payload = json.dumps({"function": function, "version": version, "params": _canonical(params),
                          "seed": seed}, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(payload.encode()).hexdigest()


LOCK_NAME = "sweep.lock"
MAX_JSON_BYTES = 64 << 20               # a point's .json is a few kB (array parameters enter by hash)


def _read_json(path):
    """The JSON in ``path``, or None when it is missing, not a regular file, oversized, nested too deeply or not
    JSON (:mod:`limits.readfile`)."""
    from ..readfile import read_json

    try:
        return read_json(path, "point", MAX_JSON_BYTES)
    except ValueError:
        return None


def _json_params(params: dict) -> dict:
    return {k: (v if isinstance(v, (bool, int, float, str, type(None))) else _canonical(v)) for k, v in params.items()}


def is_sweep_store(root) -> bool:
    """Whether ``root`` holds a sweep store's description (``sweep.json``: a record with its function and grid)."""
    m = _read_json(Path(root) / "sweep.json")
    return isinstance(m, dict) and isinstance(m.get("function"), str) and isinstance(m.get("grid"), dict)


class Store:
    """Point files under ``root`` (created on first write) — a new or empty directory, or a sweep store
    (:func:`limits.stores.check_store_dir`: a foreign non-empty directory is refused before anything is written);
    ``writing=False`` only reads (``limits sweep show``)."""

    def __init__(self, root, writing=True):
        from ..stores import check_store_dir

        self.root = Path(root)
        if writing:
            check_store_dir(self.root, "store", "sweep store", is_sweep_store, own=(LOCK_NAME,))
        elif self.root.exists() and not self.root.is_dir():
            raise ValueError(f"store: {root} exists and is not a directory")

    def read_only(self) -> bool:
        """Whether the store exists and nothing can be written in it (a read-only file system): then a complete
        store is read without a lock and nothing is written into it."""
        from ..stores import writable

        return self.root.is_dir() and not writable(self.root)

    def _paths(self, key):
        d = self.root / "points" / key[:2]
        return d / f"{key}.npz", d / f"{key}.json"

    def load(self, key):
        """``(meta, arrays)`` of a stored point, or ``None`` when absent, incomplete or damaged (a
        ``.json`` that is not a point record, a non-regular or oversized file, an unreadable
        ``.npz``). Failed points come back with ``arrays = None``."""
        npz, js = self._paths(key)
        meta = _read_json(js)
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        if meta.get("status") != "ok":
            if meta.get("status") != "error":
                return None
            return meta, None
        outputs = meta.get("outputs")
        if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
            return None
        from ..readfile import load_npz

        try:
            arrays = load_npz(npz, "point")          # sized from its headers: a zip bomb is damage, not a crash
        except ValueError:
            return None
        if sorted(arrays) != sorted(outputs):
            return None
        return meta, arrays

    def _write(self, path, data: bytes):
        if path.is_dir() and not path.is_symlink():
            try:                    # an (empty) directory where a point file belongs: damage, replaced
                path.rmdir()
            except OSError:
                raise ValueError(f"store: {path} is a directory where a point file belongs; remove it") from None
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            raise ValueError(f"store: cannot write {path} ({exc.strerror or exc}); free space or choose another "
                             "store (--store)") from None

    def save_ok(self, key, meta: dict, arrays: dict):
        npz, js = self._paths(key)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        self._write(npz, buf.getvalue())
        meta = {**meta, "key": key, "status": "ok", "outputs": sorted(arrays)}
        meta["params"] = _json_params(meta.get("params", {}))
        self._write(js, json.dumps(meta, indent=1, sort_keys=True, allow_nan=True).encode())

    def save_error(self, key, meta: dict, message: str):
        _, js = self._paths(key)
        meta = {**meta, "key": key, "status": "error", "error": message, "outputs": []}
        meta["params"] = _json_params(meta.get("params", {}))
        self._write(js, json.dumps(meta, indent=1, sort_keys=True, allow_nan=True).encode())

    def write_manifest(self, manifest: dict):
        self._write(self.root / "sweep.json", json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())

    def manifest(self) -> dict | None:
        m = _read_json(self.root / "sweep.json")
        return m if isinstance(m, dict) else None

    @contextlib.contextmanager
    def lock(self):
        """Hold an exclusive OS lock (``fcntl.flock``) on ``STORE/sweep.lock`` while a sweep runs;
        a second process on the same store gets a ``ValueError`` at once. The lock file is opened read-only and
        never written (:func:`limits.stores.open_lock`: a symbolic link, a hard link or a non-regular file there is
        refused); it stays (deleting it would race with a waiting process); the OS drops the lock when the process
        ends, however it ends. No lock is taken where ``fcntl`` is missing (Windows) or where the lock file cannot
        be created because the store is read-only (nothing can write there either)."""
        try:
            import fcntl
        except ImportError:                     # pragma: no cover — Windows
            yield
            return
        from ..stores import open_lock

        path = self.root / LOCK_NAME
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"store: cannot create the store {self.root} ({exc.strerror or exc})") from None
        fd = open_lock(path, "store", "sweep store")
        if fd is None:
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ValueError(f"store: {self.root} is in use by another sweep process (lock {path}); one sweep "
                                 "per store at a time — wait for it to finish or use another store (--store)") from None
            yield
        finally:
            os.close(fd)                        # closing the descriptor releases the lock

    def clean_temporary(self, older_than=60.0) -> int:
        """Remove temporary files left by a writer killed mid-write (``.NAME.*.tmp`` older than
        ``older_than`` seconds, so a concurrent writer is not disturbed); returns how many."""
        import time

        d = self.root / "points"
        n = 0
        if d.exists():
            now = time.time()
            for p in d.rglob(".*.tmp"):
                try:
                    if now - p.stat().st_mtime > older_than:
                        p.unlink()
                        n += 1
                except OSError:
                    pass
        return n

    def point_files(self):
        """Every stored point file (``*.npz``, ``*.json``) — temporary files excluded."""
        d = self.root / "points"
        return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []
