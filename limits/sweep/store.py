"""On-disk store of finished sweep points (what makes a sweep resumable).

Layout under the store directory::

    points/ab/<key>.npz   numeric outputs of the point (np.savez, loaded with allow_pickle=False)
    points/ab/<key>.json  {"key", "function", "version", "params", "seed", "status": "ok"|"error",
                           "error", "seconds", "outputs": [names], "skipped": [names]}
    sweep.json            the last sweep run against this store (function, grid, dataset path)

``key = sha256(canonical JSON of (function name, package version, parameters, seed))``; arrays
among the parameters enter by dtype, shape and a sha256 of their bytes. Each file is written with
:func:`limits.results.atomic_write_bytes` (temporary file + rename), the ``.npz`` first and the
``.json`` last: a point counts as stored only once its ``.json`` exists and names every array the
``.npz`` holds, so a kill at any moment leaves complete points or none — never a partial one.
Nothing is ever unpickled.
"""
from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from ..results import atomic_write_bytes, atomic_write_text


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


def _json_params(params: dict) -> dict:
    return {k: (v if isinstance(v, (bool, int, float, str, type(None))) else _canonical(v)) for k, v in params.items()}


class Store:
    """Point files under ``root`` (created on first write)."""

    def __init__(self, root):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ValueError(f"store: {root} exists and is not a directory")

    def _paths(self, key):
        d = self.root / "points" / key[:2]
        return d / f"{key}.npz", d / f"{key}.json"

    def load(self, key):
        """``(meta, arrays)`` of a stored point, or ``None`` when absent or incomplete. Failed
        points come back with ``arrays = None``."""
        npz, js = self._paths(key)
        try:
            meta = json.loads(js.read_text())
        except (OSError, ValueError):
            return None
        if meta.get("key") != key:
            return None
        if meta.get("status") != "ok":
            return meta, None
        try:
            with np.load(npz, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            return None
        if sorted(arrays) != sorted(meta.get("outputs", [])):
            return None
        return meta, arrays

    def save_ok(self, key, meta: dict, arrays: dict):
        npz, js = self._paths(key)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        atomic_write_bytes(npz, buf.getvalue())
        meta = {**meta, "key": key, "status": "ok", "outputs": sorted(arrays)}
        meta["params"] = _json_params(meta.get("params", {}))
        atomic_write_text(js, json.dumps(meta, indent=1, sort_keys=True, allow_nan=True))

    def save_error(self, key, meta: dict, message: str):
        _, js = self._paths(key)
        meta = {**meta, "key": key, "status": "error", "error": message, "outputs": []}
        meta["params"] = _json_params(meta.get("params", {}))
        atomic_write_text(js, json.dumps(meta, indent=1, sort_keys=True, allow_nan=True))

    def write_manifest(self, manifest: dict):
        atomic_write_text(self.root / "sweep.json", json.dumps(manifest, indent=1, sort_keys=True, default=str))

    def manifest(self) -> dict | None:
        try:
            return json.loads((self.root / "sweep.json").read_text())
        except (OSError, ValueError):
            return None

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
